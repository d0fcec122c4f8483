"""``make book``: the course as a static site, built from the committed notebooks, checked as files.

:func:`built_book` builds it once per test run (the browser test, tests/browser/test_book.py,
reads the same build): the same command as ``make book``, into a folder that every xdist
worker of the run shares, behind a file lock. The build does not execute a notebook. These
tests read the files; the browser test loads the pages.
"""

from __future__ import annotations

import fcntl
import functools
import html.parser
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.exhaustive  # a Sphinx build of the whole course: about a minute

#: Sphinx warnings the build may give, each with why it is not the book's fault.
ACCEPTED_WARNINGS = [
    # chapter 05's Markdown shows the training loop with "…" for an argument list; Pygments
    # cannot lex that as Python, Sphinx retries "in relaxed mode" and highlights it anyway.
    r"WARNING: Lexing literal_block .*? resulted in an error at token: '…'\. Retrying in "
    r"relaxed mode\. \[misc\.highlighting_failure\]",
]


def book_command(out: Path, doctrees: Path) -> list[str]:
    """What ``make book`` runs (the Makefile's recipe, with this run's folders)."""
    recipe = (ROOT / "Makefile").read_text().split("\nbook:", 1)[1].split("\n\n", 1)[0]
    line = next(x.strip() for x in recipe.splitlines() if "sphinx" in x)
    assert line == "$(BIN)/python -m sphinx -q -b html -c docs -d build/book-doctrees . build/book"
    return [sys.executable, "-m", "sphinx", "-q", "-b", "html", "-c", "docs", "-d",
            str(doctrees), str(ROOT), str(out)]  # fmt: skip


def built_book(tmp_path_factory) -> tuple[Path, str, float]:
    """(the built site, the build's warnings, seconds it took), built once per test run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the run's workers
    out, done_file = base / "book" / "html", base / "book" / "built.json"
    done_file.parent.mkdir(parents=True, exist_ok=True)
    with open(base / "book" / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done_file.exists():
            start = time.perf_counter()
            run = subprocess.run(
                book_command(out, base / "book" / "doctrees"), cwd=ROOT, capture_output=True,
                text=True, timeout=600,
                env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
            )  # fmt: skip
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            result = {"warnings": run.stderr, "seconds": time.perf_counter() - start}
            done_file.write_text(json.dumps(result))
    result = json.loads(done_file.read_text())
    return out, result["warnings"], result["seconds"]


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    out, warnings, seconds = built_book(tmp_path_factory)
    print(f"book built in {seconds:.0f} s")
    unexplained = [
        line for line in warnings.splitlines()
        if "WARNING" in line and not any(re.search(p, line) for p in ACCEPTED_WARNINGS)
    ]  # fmt: skip
    assert not unexplained, "\n".join(unexplained)
    return out


def course_pages() -> list[str]:
    """Every page the book must have, as paths inside the site."""
    pages = ["index.html", "search.html"]
    pages += [f"notebooks/{p.stem}.html" for p in sorted(ROOT.glob("notebooks/*.ipynb"))]
    pages += [f"exercises/{p.stem}.html" for p in sorted(ROOT.glob("exercises/*.ipynb"))]
    pages += [f"docs/{p.stem}.html" for p in sorted(ROOT.glob("docs/*.md"))]
    return pages


class Links(html.parser.HTMLParser):
    """Every URL a page links to or loads, and every id it defines."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []  # fetched by the browser as the page loads
        self.links: list[str] = []  # followed when clicked
        self.ids: set[str] = set()
        self.images: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("script", "img", "iframe", "source", "audio", "video") and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"])
        if tag == "img":
            self.images.append(a)


@functools.cache
def parse(path: Path) -> Links:
    """A page's links, read once per test process."""
    parser = Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_chapter_exercise_and_guide_is_a_page_and_no_solution_is(book):
    missing = [p for p in course_pages() if not (book / p).is_file()]
    assert not missing
    assert len([p for p in course_pages() if p.startswith("exercises/")]) == 8
    pages = list(book.rglob("*.html"))
    assert not [p for p in pages if "solution" in str(p.relative_to(book)).lower()]
    notebook_pages = [p for p in pages if p.parent.name in ("notebooks", "exercises")]
    assert len(notebook_pages) == len(list(ROOT.glob("notebooks/*.ipynb"))) + 8
    leaked = [p for p in notebook_pages if "BEGIN SOLUTION" in p.read_text(encoding="utf-8")]
    assert not leaked, leaked  # (the maintainer's guide shows the marker, as an example)


def test_nothing_is_loaded_from_the_network(book):
    """No page loads a script, style, font or image from anywhere but the site itself."""
    remote = re.compile(r"^(https?:)?//", re.I)
    found = []
    for page in book.rglob("*.html"):
        found += [f"{page.relative_to(book)}: {u}" for u in parse(page).loads if remote.match(u)]
    for sheet in book.rglob("*.css"):
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", sheet.read_text(errors="replace")):
            if remote.match(url):
                found.append(f"{sheet.relative_to(book)}: {url}")
        imports = re.findall(
            r"@import\s+(?:url\()?['\"]?((https?:)?//[^'\")\s]+)", sheet.read_text()
        )
        found += [f"{sheet.relative_to(book)}: @import {u}" for u, _ in imports]
        # the browser test's axe audit skips stylesheets (tests/browser/test_book.py): the only
        # rule that reads them, css-orientation-lock, has nothing to find
        assert "orientation" not in sheet.read_text(errors="replace"), sheet
    assert not found, "\n".join(found[:20])


def test_every_link_in_the_book_resolves(book):
    """Every link between pages, and every page's own resources, point at a file of the
    build (and an anchor on that page, when they name one)."""
    broken, checked, external = [], 0, set()
    for page in sorted(book.rglob("*.html")):
        if page.parent.name == "_static":  # the theme's template macros, not pages
            continue
        links = parse(page)
        for url in links.links + links.loads:
            parts = urlsplit(url)
            if parts.scheme in ("http", "https", "mailto"):
                external.add(url)
                continue
            if parts.scheme in ("data", "javascript") or url.startswith("#") and not url[1:]:
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            checked += 1
            if not target.exists():
                broken.append(f"{page.relative_to(book)} -> {url}")
                continue
            if parts.fragment and target.suffix == ".html":
                if parts.fragment not in parse(target).ids:
                    broken.append(f"{page.relative_to(book)} -> {url} (no such anchor)")
    print(f"{checked} links inside the book checked; {len(external)} to other sites")
    assert checked > 500 and not broken, "\n".join(broken[:30])


def test_outputs_render_as_in_jupyterlab(book):
    """Widgets show their static picture with the "run this cell" line (no widget view),
    figures carry their alt text, graph drawings are SVG with a title, math is MathML."""
    gallery = (book / "notebooks" / "widgets_gallery.html").read_text(encoding="utf-8")
    stored = json.loads((ROOT / "notebooks" / "widgets_gallery.ipynb").read_text())
    widgets = sum(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for c in stored["cells"] for o in c.get("outputs", [])
    )  # fmt: skip
    assert widgets >= 5
    assert gallery.count("autodiff-lab-static") >= widgets
    assert "run this cell to make the controls live" in gallery
    assert "widget-view+json" not in gallery  # no empty placeholder for a live view
    chapter = parse(book / "notebooks" / "00_why_autodiff.html")
    figures = [i for i in chapter.images if i.get("src", "").startswith("data:image/png")]
    assert figures and all(len(i.get("alt", "")) > 20 for i in figures), figures[:1]
    reverse = (book / "notebooks" / "02_reverse_mode.html").read_text(encoding="utf-8")
    assert "<svg" in reverse and "computation graph of" in reverse
    assert reverse.count("<math") > 20 and "math-source" not in reverse
    fallbacks = sum(p.read_text().count("math-source") for p in book.rglob("*.html"))
    print(f"formulas latex2mathml could not convert (shown as source): {fallbacks}")
