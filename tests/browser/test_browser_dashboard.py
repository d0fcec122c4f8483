"""The training dashboard in a real browser, in a narrow (~600 px) JupyterLab panel.

A first press of Start must show learning happen (the dashboard starts untrained) and the
controls must stay readable where the panel is half a screen wide (beside slides): every
slider keeps its label whole and a usable track, and the picture fits the panel.
"""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

# minutes of a second server and of training in the browser: make test-exhaustive (CI)
pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]

NOTEBOOK = "browser_dashboard.ipynb"
SETUP = """\
from autodiff_lab.viz import TrainingDashboard
dashboard = TrainingDashboard(seed=0, grid=30, steps=40)
dashboard"""


@pytest.fixture(scope="module")
def dashboard_notebook(jupyter_server):
    nb = new_notebook(cells=[new_code_cell(SETUP)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, jupyter_server.root / NOTEBOOK)
    return NOTEBOOK


def test_dashboard_start_learns_and_fits_600px(jupyterlab, dashboard_notebook, screenshot):
    from playwright.sync_api import expect

    page = jupyterlab.page
    jupyterlab.open(dashboard_notebook)
    # make the notebook panel itself 600 px wide (the side bars keep their widths)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
    extra = page.viewport_size["width"] - panel.bounding_box()["width"]
    page.set_viewport_size({"width": int(600 + extra), "height": 1000})
    page.wait_for_function(
        "() => Math.abs(document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')"
        ".getBoundingClientRect().width - 600) < 2"
    )
    jupyterlab.run_all()
    out = page.locator(".jp-Cell").nth(0).locator(".jp-OutputArea-output")
    status = out.locator(".widget-html-content").first
    expect(status).to_contain_text("untrained MLP 2-16-16-2")
    expect(status).to_contain_text("Start trains 40 steps from this untrained network")
    screenshot(out, "dashboard-600px-untrained")

    # every slider: the whole label is visible (not cut off) and the track is usable
    sliders = out.locator(".widget-slider")
    assert sliders.count() == 4
    for k in range(sliders.count()):
        label = sliders.nth(k).locator(".widget-label").first
        full = label.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        assert full, f"slider {k}: label {label.inner_text()!r} is cut off"
        track = sliders.nth(k).locator(".slider-container, .widget-slider > .slider").first
        assert track.bounding_box()["width"] >= 80, f"slider {k}: track shrank"
    picture = out.locator(".widget-image").first
    assert picture.bounding_box()["width"] <= out.bounding_box()["width"] + 1

    out.locator(".widget-button", has_text="Start").click()
    expect(status).to_contain_text("step 40,", timeout=30_000)
    expect(status).to_contain_text("Start trains 40 more steps from here")
    screenshot(out, "dashboard-600px-after-start")
