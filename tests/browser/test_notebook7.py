"""Chapter 02 in Notebook 7 (the classic-style interface, ``/notebooks/...``), in Chromium.

Open the chapter, run every cell from the Run menu (the chapter leaves its stepper at step
5 of 7), then press the backward stepper's "step" button as a student does and check the
kernel sent a new drawing: the caption moves to step 6 and the picture's SVG changes. Screenshot:
``artifacts/screenshots/notebook7_backward_stepper.png``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

CHAPTER = "02_reverse_mode.ipynb"
ACTIVE = "svg g.node.value.active"


def test_chapter_02_backward_stepper_in_notebook7(browser_page, jupyter_server, screenshot):
    from playwright.sync_api import expect

    page = browser_page
    page.goto(jupyter_server.url(CHAPTER, "notebooks"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    expect(page.locator("#main-panel, .jp-NotebookPanel").first).to_be_visible()
    assert page.locator(".jp-LabShell").count() == 0  # Notebook 7's shell, not JupyterLab's

    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
    # The chapter's next cell moves the stepper on (stepper.step = 5), so read where it is.
    stepper = (
        page.locator(".jp-OutputArea-output", has=page.locator(".widget-button"))
        .filter(has_text="step ▶")
        .first
    )
    step = stepper.locator(".widget-button", has_text="step ▶").first
    expect(step).to_be_visible(timeout=180_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-InputArea-prompt')]"
        ".every(p => !p.textContent.includes('*'))",
        timeout=180_000,
    )
    stepper.scroll_into_view_if_needed()
    caption = stepper.locator(".widget-html-content").first
    expect(caption).to_contain_text("Step 5 of 7")
    drawing = stepper.locator(".widget-html-content svg").first
    before = drawing.evaluate("svg => svg.outerHTML")
    assert stepper.locator(ACTIVE).count() == 1  # node a, whose rule runs at step 5

    step.click()
    expect(caption).to_contain_text("Step 6 of 7")
    expect(stepper.locator(ACTIVE)).to_have_count(1)
    after = stepper.locator(".widget-html-content svg").first.evaluate("svg => svg.outerHTML")
    assert after != before  # the drawing changed: another node is highlighted
    screenshot(stepper, "notebook7_backward_stepper")
