"""Lecture mode in a real browser: JupyterLab renders a chapter as a RISE slideshow.

Opens chapter 04 in JupyterLab, chooses View > Render as Reveal Slideshow (jupyterlab-rise),
and advances one slide with reveal.js's "next" control. The expected slide titles are read
from the notebook's own metadata (the cells marked ``slide``), not from the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHAPTER = "04_tensors.ipynb"
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / CHAPTER

# The index of the slide on screen and its first heading, as reveal.js shows it.
CURRENT_SLIDE_JS = """() => {
  const slides = [...document.querySelectorAll('.reveal .slides > section')];
  const index = slides.findIndex(s => s.classList.contains('present'));
  if (index < 0) return null;
  const heading = slides[index].querySelector('h1, h2');
  return [index, slides.length, heading ? heading.textContent.replace('¶', '').trim() : null];
}"""


def slide_titles(path: Path) -> list[str]:
    """The first heading of every cell that opens a slide, in order."""
    titles = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["metadata"].get("slideshow", {}).get("slide_type") != "slide":
            continue
        source = "".join(cell["source"])
        match = re.search(r"^#{1,2} +(.+)$", source, flags=re.M)
        titles.append(match.group(1).strip() if match else "")
    return titles


def test_jupyterlab_presents_a_chapter_as_rise_slides(jupyterlab, browser_page, screenshot):
    titles = slide_titles(NOTEBOOK)
    assert len(titles) >= 5 and titles[0].startswith("Chapter 04")
    page = browser_page
    jupyterlab.open(CHAPTER)

    page.locator(".lm-MenuBar-item", has_text="View").first.click()
    page.locator(".lm-Menu-item[data-command='RISE:preview']").click()
    frame = page.wait_for_selector("iframe[src*='/rise/']", timeout=60_000).content_frame()
    frame.wait_for_selector(".reveal .slides > section.present", timeout=90_000)

    index, count, heading = frame.evaluate(CURRENT_SLIDE_JS)
    assert (index, count) == (0, len(titles))
    assert heading == titles[0]

    frame.locator(".reveal .controls .navigate-right").click()
    frame.wait_for_function(f"() => ({CURRENT_SLIDE_JS})()[0] === 1", timeout=30_000)
    index, _, heading = frame.evaluate(CURRENT_SLIDE_JS)
    assert index == 1 and heading == titles[1]
    screenshot(page, "rise_slideshow_04_second_slide")

    # the key each chapter's first cell names: Space walks fragments and sub-slides in
    # order (where the code sits); the right arrow would jump to the next slide instead
    in_subslide = (
        "() => !!document.querySelector("
        "'.reveal .slides > section.present > section.present:not(:first-child)')"
    )
    for _ in range(4):
        frame.locator(".reveal").press("Space")
        if frame.evaluate(in_subslide):
            break
    assert frame.evaluate(in_subslide), "Space did not reach slide 2's sub-slide"
    assert frame.evaluate(CURRENT_SLIDE_JS)[0] == 1  # still slide 2: nothing was skipped
    screenshot(page, "rise_slideshow_04_space_reaches_subslide")
    # notebooks/rise.css wraps long code lines: none is cut off at the panel's right edge
    clipped = frame.evaluate(
        "() => [...document.querySelectorAll('.reveal section.present .cm-scroller')]"
        ".filter(s => s.offsetParent && s.scrollWidth > s.clientWidth + 1).length"
    )
    assert clipped == 0
