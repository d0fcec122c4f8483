"""The course book (``make book``) in a real browser, served from a local folder only.

The build is :func:`test_book_site.built_book`'s (once per test run). A local HTTP server on
127.0.0.1 serves it; every request the pages make is recorded, and one that leaves that
server fails the test (the site must work offline and on a course server with no internet).

1. Every page loads with no console error, uncaught exception or HTTP error, and no request
   goes anywhere but the local server.
2. Navigation: the sidebar leads from the start page to a chapter; search finds a chapter by
   a word of its text.
3. Stored outputs: a widget's static picture with its "run this cell" line, a figure's alt
   text, math typeset (MathML laid out by the browser).
4. Accessibility: axe's WCAG 2.1 A/AA audit finds no serious or critical violation on the
   book's pages, in the light and in the dark theme (colour contrast included).
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
from test_book_site import built_book, course_pages
from test_browser_a11y import FAILING_IMPACTS, WCAG_AA

# the book built and audited in both themes: minutes, so in make test-exhaustive (CI)
pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the build; no log line per request, and a browser that closes a connection
    early (leaving a page mid-download) is not an error of the book."""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built book on a local server: yields its base URL."""
    folder, _, _ = built_book(tmp_path_factory)
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def watch_requests(page, base: str) -> list[str]:
    """Every request of ``page`` that does not go to ``base`` (data: and blob: are local)."""
    outside: list[str] = []

    def note(request):
        url = request.url
        if not url.startswith((base + "/", "data:", "blob:")):
            outside.append(url)

    page.on("request", note)
    return outside


def test_every_page_loads_offline_without_errors(browser_page, site):
    page = browser_page
    outside = watch_requests(page, site)
    for path in course_pages():
        page.goto(f"{site}/{path}", wait_until="networkidle")
        if path == "index.html":  # the front door sends the reader to the first page
            page.wait_for_url("**/docs/index.html")
            page.wait_for_load_state("networkidle")
        page.locator("h1:visible").first.wait_for()  # not the print-only header
    assert not outside, outside
    problems = page.console_problems
    assert not problems, problems  # also failed by the fixture, with the whole list


def test_navigation_and_search_find_a_chapter(browser_page, site):
    page = browser_page
    outside = watch_requests(page, site)
    page.goto(f"{site}/index.html", wait_until="networkidle")  # the front door redirects
    assert page.url.endswith("/docs/index.html")
    nav = page.locator("nav.bd-docs-nav")
    nav.get_by_role("link", name="02 · Reverse mode", exact=False).first.click()
    page.wait_for_url("**/notebooks/02_reverse_mode.html")
    assert "Reverse mode" in page.locator("h1").first.inner_text()

    page.goto(f"{site}/search.html?q=topological", wait_until="networkidle")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=30_000)
    hrefs = [a.get_attribute("href") or "" for a in results.all()]
    assert any("notebooks/02_reverse_mode.html" in h for h in hrefs), hrefs
    assert not outside, outside


def test_stored_outputs_show_as_in_jupyterlab(browser_page, site):
    page = browser_page
    page.goto(f"{site}/notebooks/widgets_gallery.html", wait_until="networkidle")
    picture = page.locator(".autodiff-lab-static").first
    assert picture.is_visible()
    assert page.get_by_text("run this cell to make the controls live").first.is_visible()

    page.goto(f"{site}/notebooks/00_why_autodiff.html", wait_until="networkidle")
    figure = page.locator("img[src^='data:image/png']").first
    figure.scroll_into_view_if_needed()
    alt = figure.get_attribute("alt") or ""
    assert len(alt) > 20 and figure.evaluate("img => img.complete && img.naturalWidth > 0")

    page.goto(f"{site}/notebooks/02_reverse_mode.html", wait_until="networkidle")
    formula = page.locator("math").first
    box = formula.bounding_box()
    assert box and box["width"] > 5 and box["height"] > 5  # laid out, not raw LaTeX
    assert "\\frac" not in page.locator("main").inner_text()


def axe_violations(page) -> list[dict]:
    """axe's WCAG 2.1 A/AA violations on the page; every element is the book's (its theme
    and its content). axe's stylesheet preload is off: it fetches a stylesheet's
    ``@import "../basic.css"`` against the page's address instead of the stylesheet's (a
    request for /basic.css that the page itself never makes); only css-orientation-lock
    reads those sheets, and the book locks no orientation."""
    from axe_playwright_python.sync_playwright import Axe

    options = {"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"],
               "preload": False}  # fmt: skip
    return Axe().run(page, options=options).response["violations"]


#: A guide (the theme's markup), a chapter with graphs, figures and math, the widgets' static
#: pictures, an exercise notebook and the search page.
AUDITED = [
    "docs/index.html", "notebooks/02_reverse_mode.html", "notebooks/widgets_gallery.html",
    "exercises/01_forward_mode.html", "search.html?q=gradient",
]  # fmt: skip


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_accessibility_audit_in_both_themes(browser_page, site, theme, screenshot):
    page = browser_page
    page.goto(f"{site}/docs/index.html", wait_until="networkidle")
    page.evaluate(
        "m => { localStorage.setItem('mode', m); localStorage.setItem('theme', m); }", theme
    )
    bad = []
    for path in AUDITED:
        page.goto(f"{site}/{path}", wait_until="networkidle")
        assert page.evaluate("() => document.documentElement.dataset.theme") == theme
        page.evaluate("() => document.fonts.ready")  # the page's final layout
        page.wait_for_timeout(400)
        for rule in axe_violations(page):
            for node in rule["nodes"]:
                if (node.get("impact") or rule.get("impact")) in FAILING_IMPACTS:
                    bad.append(f"{path} {rule['id']} at {node['target']}: {node['html'][:150]}")
        screenshot(page, f"book-{path.split('?')[0].replace('/', '-')[:-5]}-{theme}")
    assert not bad, "\n".join(bad)
