"""Chapter 02 in Notebook 7 (the classic-style interface, ``/notebooks/...``), in Chromium.

Open the chapter, run every cell from the Run menu (the stepper stays at step 0 of 7, the
seed, where the text starts), then press the backward stepper's "step" button as a student
does and check the kernel sent a new drawing: the caption moves to step 1, one node is
highlighted and the picture's SVG changes. Screenshot:
``artifacts/screenshots/notebook7_backward_stepper.png``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

# check() records progress in the user's data folder: the servers these tests start inherit
# this, so the tests' records go to a temporary folder (make test sets it already).
os.environ.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-browser-"))

# minutes of a second server and of training in the browser: make test-exhaustive (CI)
pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]

CHAPTER = "02_reverse_mode.ipynb"
ACTIVE = "svg g.node.value.active"
PROGRESS_SETUP = """\
import autodiff_lab
from autodiff_lab.grading import check

autodiff_lab.reset_progress()


def dual_mul(x, y):
    (a, da), (b, db) = x, y
    return a * b, a * db + da * b


check("1.1", dual_mul)"""


def wait_for_kernel(server, path: str, timeout: float = 90) -> None:
    """Until the server reports an idle kernel for the notebook at ``path``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        url = f"{server.base}/api/sessions?token={server.token}"
        with urllib.request.urlopen(url, timeout=5) as response:
            sessions = json.loads(response.read())
        if any(
            s.get("path") == path and s.get("kernel", {}).get("execution_state") == "idle"
            for s in sessions
        ):
            return
        time.sleep(0.3)
    raise AssertionError(f"no idle kernel for {path} within {timeout:g} s")


def run_all(page, server, path: str) -> None:
    """Run > Run All Cells once the kernel is ready (a click before that is lost: retry)."""
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    wait_for_kernel(server, path)
    for _attempt in range(4):
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        try:
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-InputArea-prompt')]"
                ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))",
                timeout=20_000,
            )
            return
        except Exception:  # playwright's TimeoutError: the kernel was not up yet
            continue
    raise AssertionError("Run All did not start any cell in Notebook 7")


def test_chapter_02_backward_stepper_in_notebook7(browser_page, jupyter_server, screenshot):
    from playwright.sync_api import expect

    page = browser_page
    page.goto(jupyter_server.url(CHAPTER, "notebooks"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    expect(page.locator("#main-panel, .jp-NotebookPanel").first).to_be_visible()
    assert page.locator(".jp-LabShell").count() == 0  # Notebook 7's shell, not JupyterLab's
    run_all(page, jupyter_server, CHAPTER)
    # After Run All the stepper is where the chapter's text starts: step 0, the seed (the
    # cells after it read later steps with grads_at, they do not move the widget).
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
    expect(caption).to_contain_text("Step 0 of 7: the seed")
    drawing = stepper.locator(".widget-html-content svg").first
    before = drawing.evaluate("svg => svg.outerHTML")
    assert stepper.locator(ACTIVE).count() == 0  # the seed: no rule has run yet

    step.click()
    expect(caption).to_contain_text("Step 1 of 7")
    expect(stepper.locator(ACTIVE)).to_have_count(1)
    after = stepper.locator(".widget-html-content svg").first.evaluate("svg => svg.outerHTML")
    assert after != before  # the drawing changed: another node is highlighted
    screenshot(stepper, "notebook7_backward_stepper")


def test_progress_table_and_reset_in_notebook7(browser_page, jupyter_server, screenshot):
    """check() records exercise 1.1; progress() shows it; the two-click reset clears it."""
    from playwright.sync_api import expect

    from autodiff_lab.grading import registry

    n = sum(e.chapter == 1 for e in registry.all_exercises())  # chapter 01's exercises
    nb = new_notebook(
        cells=[new_code_cell(PROGRESS_SETUP), new_code_cell("autodiff_lab.progress()")]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, jupyter_server.root / "progress_view.ipynb")
    page = browser_page
    page.goto(jupyter_server.url("progress_view.ipynb", "notebooks"))
    run_all(page, jupyter_server, "progress_view.ipynb")
    view = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")
    reset = view.locator(".widget-button", has_text="reset…")
    expect(reset).to_be_visible(timeout=120_000)
    first_row = view.locator(".autodiff-lab-progress tr").nth(1)
    expect(first_row).to_contain_text("01")
    expect(first_row.locator("td").nth(2)).to_have_text(f"1/{n}")  # passed: 1.1
    expect(first_row.locator("td").nth(4)).to_contain_text("1.2 ")  # next exercise
    screenshot(view, "notebook7_progress")
    reset.click()
    really = view.locator(".widget-button", has_text="really forget all?")
    expect(really).to_be_visible()
    really.click()
    expect(first_row.locator("td").nth(2)).to_have_text(f"0/{n}")
    expect(first_row.locator("td").nth(4)).to_contain_text("1.1 ")
