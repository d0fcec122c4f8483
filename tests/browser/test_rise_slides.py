"""Lecture mode in a real browser: a chapter as a RISE slideshow whose widgets are live.

A lecturer opens a chapter in JupyterLab, runs it, presses Alt+R (the course's lab settings
map it to RISE's full-window slideshow, tools/lab_settings.py) and presents at 1280×720.
Inside the slideshow the test then does what the lecturer does: steps the backward stepper
(chapters 02 and 03), drags a slider (chapter 02's stepper, chapter 07's checkpoint
explorer) and presses the dashboard's Start (chapter 05), and checks each time that the
widget changed — the kernel answered, so the widget is live, not its static picture. Any
console error fails the test unless tests/browser/conftest.py lists it as third-party; no
widget-manager or module-loading error is on that list.

The expected slide titles are read from the notebook's own metadata (the cells marked
``slide``), not from the page. Screenshots: artifacts/screenshots/rise_*.png.

Where they run: ``make test-lecture`` (called by ``make test-exhaustive``) runs them in the
lecture environment, .venv-lecture (tools/lecture-constraints.txt: ipywidgets 7.8.5), with
``AUTODIFF_LAB_LECTURE_ENV=1``; there they must run (in any other environment that variable
fails the collection). Under ipywidgets 8 (``make test``) they are a strict xfail, not run.
"""

from __future__ import annotations

import json
import os
import re
from importlib.metadata import version
from pathlib import Path

import ipywidgets
import pytest
from lab_walk import open_lab, run_notebook

# jupyterlab-rise 0.43.1 (the newest release, built against JupyterLab 4.3) cannot create
# ipywidgets 8's widget manager: "Shared module @jupyterlab/console doesn't exist in shared
# scope default" (upstream jupyterlab-contrib/rise#119, open), so every widget shows only its
# stored picture. With ipywidgets 7.8.5 + jupyterlab_widgets 1.1.11 (JupyterLab 4.6.6, same
# RISE) these tests pass: `make test-lecture` runs them in that environment (.venv-lecture);
# the test extra cannot have them: otter-grader 7.0.0 (and every 6.x) requires
# ipywidgets>=8.1.5. strict: when RISE is fixed, these pass under ipywidgets 8 and the mark
# must go.
LIVE_IN_RISE = int(ipywidgets.__version__.split(".")[0]) < 8
if os.environ.get("AUTODIFF_LAB_LECTURE_ENV") == "1" and not LIVE_IN_RISE:
    pytest.fail(
        f"make test-lecture ran in an environment with ipywidgets {ipywidgets.__version__}: "
        "the RISE tests would be a strict xfail there, never run (expected .venv-lecture)",
        pytrace=False,
    )
pytestmark = [
    pytest.mark.browser,
    pytest.mark.xfail(
        not LIVE_IN_RISE,
        strict=True,
        run=False,  # known to fail here: not worth minutes of widget timeouts per make test
        reason="RISE 0.43.1 cannot load ipywidgets 8's widget manager (rise#119)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
LECTURE_PINS = ROOT / "tools" / "lecture-constraints.txt"
PROJECTOR = (1280, 720)

# The slide on screen (reveal.js marks the shown slide and sub-slide ``present``): its index
# among the slides, the number of slides, and its first heading.
CURRENT_SLIDE_JS = """() => {
  const slides = [...document.querySelectorAll('.reveal .slides > section')];
  const index = slides.findIndex(s => s.classList.contains('present'));
  if (index < 0) return null;
  const heading = slides[index].querySelector('h1, h2');
  return [index, slides.length, heading ? heading.textContent.replace('¶', '').trim() : null];
}"""

# The innermost section on screen: the sub-slide, or the slide when it has none.
ON_SCREEN = ".reveal .slides section.present:not(.stack)"


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


@pytest.fixture
def lecture(browser, jupyter_server, console_gate):
    """``present(chapter)``: open, run, Alt+R; returns the slideshow's page (1280×720).

    ``present.console_clean()`` (each test's last line) fails on any console problem of
    both pages not listed as third-party.
    """
    context, lab = open_lab(browser, jupyter_server, console_gate, viewport=PROJECTOR)
    watched = [lab]

    def present(chapter: str):
        report = run_notebook(lab, chapter)
        errors = [o for c in report["cells"] for o in c["outputs"] if o["output_type"] == "error"]
        assert not errors, f"{chapter}: a cell failed: {errors[0]['ename']}"
        # the lecturer's next key goes to the notebook in command mode: its first cell
        lab.locator(f"#{report['id']} .jp-Cell .jp-InputPrompt").first.click()
        with context.expect_page() as opened:
            lab.keyboard.press("Alt+R")
        slideshow = opened.value
        console_gate.watch(slideshow)
        watched.append(slideshow)
        slideshow.set_default_timeout(60_000)
        slideshow.wait_for_selector(".reveal.ready .slides > section.present", timeout=90_000)
        slideshow.wait_for_timeout(2_000)  # RISE selects the first cell, then takes keys
        # Alt+R opened the slideshow as a page of its own, the whole window: the slides fill
        # the 1280x720 window, and no half-width preview (RISE:preview, an iframe of the
        # slideshow split beside the notebook) opened in JupyterLab
        assert "/rise/" in slideshow.url
        assert slideshow.viewport_size == {"width": PROJECTOR[0], "height": PROJECTOR[1]}
        box = slideshow.locator(".reveal").first.bounding_box()
        assert [round(box[k]) for k in ("x", "y", "width", "height")] == [0, 0, *PROJECTOR]
        assert lab.locator("iframe[src*='/rise/']").count() == 0
        # a live widget has controls (buttons, sliders: 07.1's explorer has only a slider); a
        # dead one only its stored picture (.autodiff-lab-static)
        live = slideshow.locator(
            ".reveal .jp-OutputArea-output :is(.widget-button, .widget-slider)"
        )
        live.first.wait_for(state="attached", timeout=60_000)
        return slideshow

    def console_clean():
        problems = [p for page in watched for p in page.console_problems]
        ours = console_gate.ours(problems)
        assert not ours, "errors in the browser console:\n" + "\n".join(ours)

    present.console_clean = console_clean
    yield present
    context.close()


def walk_to(slideshow, selector: str, limit: int = 120):
    """Press Space (the next fragment or sub-slide, in order) until a cell output holding
    ``selector`` is on the slide on screen; return that output's locator."""
    target = slideshow.locator(f"{ON_SCREEN} .jp-OutputArea-output:has({selector})").first
    for _ in range(limit):
        if target.count():
            break
        slideshow.keyboard.press("Space")
        slideshow.wait_for_timeout(300)
    assert target.count(), f"no slide shows {selector}"
    target.wait_for(state="visible")
    slideshow.wait_for_timeout(800)  # reveal.js's slide transition ends
    return target


def drag_slider(slideshow, slider, fraction: float) -> None:
    """Drag the slider's handle with the mouse to ``fraction`` of its track."""
    handle = slider.locator(".ui-slider-handle, .noUi-handle").first
    track = slider.locator(".ui-slider, .noUi-target").first
    start, box = handle.bounding_box(), track.bounding_box()
    slideshow.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    slideshow.mouse.down()
    y = box["y"] + box["height"] / 2
    slideshow.mouse.move(box["x"] + fraction * box["width"], y, steps=8)
    slideshow.mouse.up()


def step_number(text: str) -> int:
    return int(re.search(r"Step (\d+) of \d+", text).group(1))


def test_chapter_02_first_slide_and_live_backward_stepper(lecture, screenshot):
    from playwright.sync_api import expect

    chapter = "02_reverse_mode.ipynb"
    titles = slide_titles(NOTEBOOKS / chapter)
    slideshow = lecture(chapter)
    # Alt+R after Run All starts at the first slide (not at the selected, last cell)
    index, count, heading = slideshow.evaluate(CURRENT_SLIDE_JS)
    assert (index, count, heading) == (0, len(titles), titles[0])
    screenshot(slideshow, "rise_1280x720_02_first_slide")

    stepper = walk_to(slideshow, ".widget-button:has-text('step ▶')")
    step = stepper.locator(".widget-button", has_text="step ▶").first
    panel = stepper.locator(".widget-html-content").first
    before = step_number(panel.inner_text())
    steps = int(re.search(r"Step \d+ of (\d+)", panel.inner_text()).group(1))
    target = before + 1 if before < steps else before - 1
    (step if before < steps else stepper.locator(".widget-button", has_text="step back")).click()
    expect(panel).to_contain_text(f"Step {target} of {steps}")
    screenshot(slideshow, "rise_1280x720_02_backward_stepper_live")

    drag_slider(slideshow, stepper.locator(".widget-slider").first, 0.0)  # to step 0
    expect(panel).to_contain_text(f"Step 0 of {steps}")
    assert stepper.locator(".widget-readout").first.inner_text().strip() == "0"
    lecture.console_clean()


def test_chapter_03_backward_stepper_steps_in_the_slideshow(lecture):
    from playwright.sync_api import expect

    slideshow = lecture("03_1_value_and_backward.ipynb")  # part 1 steps backward()
    stepper = walk_to(slideshow, ".widget-button:has-text('step ▶')")
    step = stepper.locator(".widget-button", has_text="step ▶").first
    panel = stepper.locator(".widget-html-content").first
    before = step_number(panel.inner_text())
    step.click()
    expect(panel).to_contain_text(f"Step {before + 1} of")
    lecture.console_clean()


def test_chapter_05_dashboard_start_trains_in_the_slideshow(lecture, screenshot):
    from playwright.sync_api import expect

    slideshow = lecture("05_training_an_mlp.ipynb")
    dashboard = walk_to(slideshow, ".widget-button:has-text('Start')")
    start = dashboard.locator(".widget-button", has_text="Start").first
    status = dashboard.locator(".widget-html-content").first
    expect(status).to_contain_text("untrained MLP")
    picture = dashboard.locator(".widget-image img").first
    before = picture.get_attribute("src")
    start.click()
    expect(status).to_contain_text(re.compile(r"step \d+,"), timeout=60_000)
    expect(status).not_to_contain_text("untrained MLP", timeout=60_000)
    assert picture.get_attribute("src") != before  # a new picture came from the kernel
    screenshot(slideshow, "rise_1280x720_05_dashboard_after_start")
    lecture.console_clean()


def test_chapter_07_checkpoint_explorer_slider_in_the_slideshow(lecture, screenshot):
    from playwright.sync_api import expect

    slideshow = lecture("07_1_memory_and_custom_rules.ipynb")
    explorer = walk_to(slideshow, ".widget-slider:has-text('segments k')")
    slider = explorer.locator(".widget-slider", has_text="segments k").first
    caption = explorer.locator(".widget-html-content", has_text="values kept").first
    before = caption.inner_text()
    drag_slider(slideshow, slider, 1.0)  # the most segments
    expect(caption).not_to_have_text(before)
    k = int(slider.locator(".widget-readout").first.inner_text())
    expect(caption).to_contain_text(f"{k} segments")
    screenshot(slideshow, "rise_1280x720_07_checkpoint_explorer_dragged")
    lecture.console_clean()


def test_lecture_environment_is_the_pinned_one():
    """The environment these tests run in has tools/lecture-constraints.txt's versions."""
    pins = {}
    for line in LECTURE_PINS.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, _, pinned = requirement.partition("==")
            pins[name] = pinned
    assert {"ipywidgets", "jupyterlab_widgets", "jupyterlab-rise"} <= set(pins)
    assert {name: version(name) for name in pins} == pins
