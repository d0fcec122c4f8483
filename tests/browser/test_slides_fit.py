"""Every slide of every chapter fits a 1280×720 projector, as exported (issue 26 §2).

For each chapter notebook in ``notebooks/`` (``NN_*.ipynb``: split parts such as
``07_1_*`` included) the test writes the offline slides (``export_slides(..., offline=True)``,
the page a lecturer puts on a USB stick; it reads the notebook as committed), opens them in
Chromium at 1280×720 and visits every slide and sub-slide.

What is measured, and why that is what the viewer sees: the offline page has no reveal.js.
Its built-in navigator shows one slide (or sub-slide) at a time as an ordinary block of the
page, unscaled, so one CSS pixel is one pixel of the 1280×720 window and a slide taller than
the window needs scrolling. The height measured is the bottom edge of the slide's lowest
content (the lowest box among its cells, hidden fragments included: they take their place
when shown), not the blank padding under it. A slide fits when that edge is within the 720 px
window.

A slide may be taller only on purpose: one of its cells carries the tag ``slide-scrolls``
(``autodiff_lab.slides.SCROLLS_TAG``), and then the export writes "(this slide scrolls)" on
it. The test fails on any other overflow, naming chapter, slide number and height, and on a
marked slide that fits (the mark would be a false warning).

Text sizes: the export states body text of 18 px and code of 16 px (``_OFFLINE_CSS`` in
autodiff_lab/slides.py; docs/lecturer.md); every paragraph, list item and table cell of the
markdown, and every code input and text output, must be at least that big at 1280×720.

Screenshots (artifacts/screenshots/slides_fit_1280x720_<chapter>_slide<N>.png): in each of
chapters 02, 05 and 07 (each part of a split chapter), the tallest slide with a picture (a
figure, a graph or a widget's stored picture): the slide most at risk of losing its key
message below the window, seen as the audience sees it once its fragments are shown.

Exhaustive tier (minutes: every chapter exported and walked): ``make test-exhaustive``, so
CI; with ``CI=true`` a missing Chromium or Playwright fails it (tests/browser/conftest.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autodiff_lab.slides import SCROLLS_NOTE, export_slides

pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if re.match(r"\d\d_", p.name))
PROJECTOR = {"width": 1280, "height": 720}
#: The sizes the export states (CSS px at 1280×720): markdown text, and code.
BODY_TEXT_PX = 18
CODE_TEXT_PX = 16
SCREENSHOT_CHAPTERS = ("02_", "05_", "07_")

# The slide (or sub-slide) on screen: its number as the counter shows it, the bottom of its
# lowest content box (px from the top of the page), its title, whether it says it scrolls, and
# whether it shows a picture.
MEASURE_JS = """(note) => {
  const leaf = [...document.querySelectorAll('.reveal .slides section.present')].pop();
  let bottom = 0;
  for (const box of leaf.querySelectorAll(':scope > *, .jp-Cell, .jp-Cell > *')) {
    if (getComputedStyle(box).display === 'none') continue;
    bottom = Math.max(bottom, box.getBoundingClientRect().bottom + window.scrollY);
  }
  const heading = leaf.querySelector('h1, h2, h3');
  const title = heading ? heading.textContent.replace('¶', '').trim() : '(no heading)';
  const counter = document.querySelector('#offline-counter').textContent;
  const picture = leaf.querySelector('.jp-OutputArea-output img, .jp-OutputArea-output svg');
  return [counter, Math.round(bottom), title, leaf.innerText.includes(note), picture !== null];
}"""

# The smallest font size (px) of each kind of text on the whole page, every slide shown.
SMALLEST_TEXT_JS = """() => {
  const kinds = {
    body: '.jp-RenderedMarkdown p, .jp-RenderedMarkdown li, .jp-RenderedMarkdown td, '
      + '.jp-RenderedMarkdown th',
    code: '.jp-InputArea pre, .jp-OutputArea-output pre',
  };
  const out = {};
  for (const [kind, selector] of Object.entries(kinds)) {
    const sizes = [...document.querySelectorAll(selector)]
      .filter(e => e.textContent.trim())
      .map(e => parseFloat(getComputedStyle(e).fontSize));
    out[kind] = [sizes.length, sizes.length ? Math.min(...sizes) : null];
  }
  return out;
}"""


def test_there_are_chapters_to_measure():
    assert len(CHAPTERS) >= 9, [p.name for p in CHAPTERS]


@pytest.fixture
def projector_page(browser, console_gate):
    """A fresh 1280×720 page; any console problem of the course fails the test."""
    context = browser.new_context(viewport=PROJECTOR)
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = console_gate.watch(page)
    yield page
    context.close()
    ours = console_gate.ours(problems)
    assert not ours, "errors in the browser console:\n" + "\n".join(ours)


def walk(page):
    """Visit every slide and sub-slide in order (→ passes the fragments on the way); yield
    each one's measurement once (see MEASURE_JS)."""
    page.keyboard.press("Home")
    total = int(page.locator("#offline-counter").inner_text().split("/")[1])
    for number in range(1, total + 1):
        counter = f"{number} / {total}"
        for _ in range(40):  # the fragments of the slide before
            if page.locator("#offline-counter").inner_text() == counter:
                break
            page.keyboard.press("ArrowRight")
        assert page.locator("#offline-counter").inner_text() == counter
        shown, bottom, title, says_it_scrolls, picture = page.evaluate(MEASURE_JS, SCROLLS_NOTE)
        assert shown == counter
        yield number, total, bottom, title, says_it_scrolls, picture


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_slide_fits_1280x720_unless_it_says_it_scrolls(
    path, projector_page, tmp_path, screenshot
):
    page = projector_page
    html = export_slides(path, tmp_path, offline=True)
    page.goto(html.as_uri())
    page.wait_for_selector("#offline-counter")
    height = PROJECTOR["height"]

    overflowing, needless_marks, tallest = [], [], (0, 0)
    for number, total, bottom, title, says_it_scrolls, picture in walk(page):
        where = f"{path.stem} slide {number}/{total} ({title!r}): {bottom} px"
        if bottom > height and not says_it_scrolls:
            overflowing.append(where)
        if bottom <= height and says_it_scrolls:
            needless_marks.append(where)
        if picture and bottom <= height and bottom > tallest[1]:
            tallest = (number, bottom)
    # the screenshot first: it is there to look at when the slides do not fit too
    if path.stem.startswith(SCREENSHOT_CHAPTERS) and tallest[0]:
        page.evaluate(f"location.hash = '#/{tallest[0]}'")
        page.reload()
        page.wait_for_selector("#offline-counter")
        assert page.locator("#offline-counter").inner_text().startswith(f"{tallest[0]} /")
        page.add_style_tag(content=".reveal .fragment { visibility: visible !important; }")
        shot = screenshot(page, f"slides_fit_1280x720_{path.stem}_slide{tallest[0]}")
        assert shot.stat().st_size > 10_000  # a picture of a slide, not an empty page
    assert total >= 3
    assert not overflowing, (
        f"slides taller than the {height} px window at 1280×720 (split them, shorten them, or "
        "tag one cell 'slide-scrolls' where scrolling is meant):\n" + "\n".join(overflowing)
    )
    assert not needless_marks, (
        "slides tagged 'slide-scrolls' that fit (remove the tag):\n" + "\n".join(needless_marks)
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_slide_text_is_at_least_the_stated_size(path, projector_page, tmp_path):
    page = projector_page
    html = export_slides(path, tmp_path, offline=True)
    page.goto(html.as_uri())
    page.wait_for_selector("#offline-counter")
    page.add_style_tag(content=".reveal .slides section { display: block !important; }")
    smallest = page.evaluate(SMALLEST_TEXT_JS)
    body_count, body_px = smallest["body"]
    code_count, code_px = smallest["code"]
    assert body_count > 0 and body_px >= BODY_TEXT_PX, (path.stem, smallest)
    if code_count:
        assert code_px >= CODE_TEXT_PX, (path.stem, smallest)


def test_a_marked_slide_says_it_scrolls(tmp_path):
    """The mark works as the fit test assumes: the slide with a tagged cell (and only it)
    shows the note, under the cell that opens it."""
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    first, second = new_markdown_cell("# FIRSTSLIDE"), new_markdown_cell("## SECONDSLIDE")
    cells = [first, second, new_markdown_cell("THIRDCELL")]
    for cell, kind in zip(cells, ("slide", "subslide", "-")):
        cell.metadata["slideshow"] = {"slide_type": kind}
    cells[2].metadata["tags"] = ["slide-scrolls"]
    path = tmp_path / "marked.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    html = export_slides(path, tmp_path, offline=True).read_text(encoding="utf-8")
    assert html.count(SCROLLS_NOTE) == 1
    order = [html.index(text) for text in ("FIRSTSLIDE", "SECONDSLIDE", SCROLLS_NOTE, "THIRDCELL")]
    assert order == sorted(order)
