"""The widgets in a real browser: JupyterLab, Voila, and a rendered graph.

Each test drives the widget the way a student does (buttons, the slider's editable
readout) and waits for the picture the kernel sends back, then checks which node is
highlighted. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import io

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.browser

NOTEBOOK = "browser_widgets.ipynb"
SETUP = """\
from autodiff_lab import Value, exp, sin
from autodiff_lab.viz import BackwardStepper, FiniteDifferenceExplorer, draw_graph

a = Value(0.5, label="a"); b = Value(-0.75, label="b")
c = a * b; c.label = "c"
s = c + a; s.label = "s"
L = s.tanh(); L.label = "L"
stepper = BackwardStepper(L)
stepper"""
EXPLORER = "FiniteDifferenceExplorer(lambda x: sin(x) * exp(x), x=1.0)"
DRAWING = 'L.backward()\ndraw_graph(L, title="L = tanh(a·b + a) after backward()")'

ACTIVE_LABEL = ".widget-html-content svg g.node.value.active text >> nth=0"


@pytest.fixture(scope="module")
def widgets_notebook(jupyter_server):
    """A small notebook with a BackwardStepper, an explorer and a drawing (unexecuted)."""
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(EXPLORER), new_code_cell(DRAWING)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, jupyter_server.root / NOTEBOOK)
    return NOTEBOOK


def set_slider(scope, value):
    """Type a value into a slider's editable readout (works in Lab, Notebook 7, Voila)."""
    readout = scope.locator(".widget-readout").first
    readout.click()
    readout.press("Control+a")
    readout.type(str(value))
    readout.press("Enter")


def test_backward_stepper_and_explorer_in_jupyterlab(jupyterlab, widgets_notebook, screenshot):
    from playwright.sync_api import expect

    page = jupyterlab.page
    jupyterlab.open(widgets_notebook)
    jupyterlab.run_all()
    stepper = page.locator(".jp-Cell").nth(0).locator(".jp-OutputArea-output")
    step = stepper.locator(".widget-button", has_text="step ▶")
    expect(step).to_be_visible(timeout=60_000)
    expect(stepper.locator(".widget-html-content")).to_contain_text("Step 0 of 5")
    assert stepper.locator("svg g.node.value.active").count() == 0  # nothing has run yet

    step.click()  # backward() starts at the loss
    expect(stepper.locator(ACTIVE_LABEL)).to_have_text("L")
    step.click()  # then s = c + a
    expect(stepper.locator(ACTIVE_LABEL)).to_have_text("s")
    expect(stepper.locator(".widget-html-content")).to_contain_text("Step 2 of 5")

    set_slider(stepper, 3)  # c = a * b: a gets its second share
    expect(stepper.locator(ACTIVE_LABEL)).to_have_text("c")
    expect(stepper.locator(".widget-html-content")).to_contain_text("add up")
    screenshot(stepper, "lab_backward_stepper_step3")

    explorer = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")
    image = explorer.locator("img").first
    expect(image).to_be_visible()
    before = image.get_attribute("src")
    set_slider(explorer, 0.5)
    # the readout is one of the explorer's HTML widgets (its plot is another)
    expect(explorer.locator(".widget-html-content", has_text="x = 0.500")).to_be_visible()
    expect(image).not_to_have_attribute("src", before)  # a new plot arrives (after the readout)
    drawing = (
        page.locator(".jp-Cell")
        .nth(2)
        .locator("img[alt^='computation graph of L = tanh(a × b + a): 5 values, 3 operations.']")
    )
    expect(drawing).to_be_visible()
    assert drawing.evaluate("img => img.naturalWidth") > 300  # the SVG decoded and drew
    screenshot(page, "lab_widgets_notebook", full_page=True)

    # the same picture in the dark theme: explicit fills on white keep it readable
    page.locator(".lm-MenuBar-item", has_text="Settings").first.click()
    page.locator(".lm-Menu-item", has_text="Theme").first.hover()
    page.locator(".lm-Menu-item", has_text="JupyterLab Dark").first.click()
    expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1)
    stepper.scroll_into_view_if_needed()
    background = stepper.locator(".widget-html-content > div").first.evaluate(
        "el => getComputedStyle(el).backgroundColor"
    )
    assert background == "rgb(255, 255, 255)"
    screenshot(page, "lab_dark_theme_stepper")


def test_backward_stepper_in_voila(browser_page, jupyter_server, widgets_notebook, screenshot):
    from playwright.sync_api import expect

    page = browser_page
    page.goto(jupyter_server.url(widgets_notebook, "voila"))
    step = page.locator(".widget-button", has_text="step ▶").first
    expect(step).to_be_visible(timeout=90_000)
    step.click()
    step.click()
    expect(page.locator(ACTIVE_LABEL).first).to_have_text("s")
    set_slider(page, 4)  # b: a leaf, its gradient final
    expect(page.locator(ACTIVE_LABEL).first).to_have_text("b")
    expect(page.locator(".widget-html-content").first).to_contain_text("It is a leaf")
    screenshot(page, "voila_backward_stepper_step4", full_page=True)


def test_graph_renders_to_png_with_the_palette(browser_page, screenshot):
    from PIL import Image

    from autodiff_lab import Value
    from autodiff_lab.viz import draw_graph
    from autodiff_lab.viz.drawing import FILL_INPUT, FILL_OP, FILL_OUTPUT

    a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    c = a * b
    c.label = "c"
    out = (c + a).tanh()
    out.label = "out"
    out.backward()
    svg = draw_graph(out, large=True, title="out = tanh(a·b + a)").svg
    browser_page.set_content(f"<html><body style='margin:0'>{svg}</body></html>")
    path = screenshot(browser_page.locator("svg").first, "graph_large")
    image = Image.open(io.BytesIO(path.read_bytes())).convert("RGB")
    assert image.width > 600 and image.height > 100
    colours = {rgb for _, rgb in image.getcolors(maxcolors=1_000_000)}
    for fill in (FILL_INPUT, FILL_OUTPUT, FILL_OP):
        rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colours, f"fill {fill} not drawn"


def test_gallery_shows_stored_pictures_before_anything_runs(jupyterlab, screenshot):
    """Opened untrusted and not run, the gallery still shows its graphs and steppers.

    JupyterLab strips inline SVG from untrusted HTML and will not render stored SVG
    outputs; the stored HTML images (data URIs) survive that.
    """
    from playwright.sync_api import expect

    page = jupyterlab.page
    jupyterlab.open("widgets_gallery.ipynb")
    stepper = page.locator("img[alt='BackwardStepper at step 0']").first
    expect(stepper).to_be_visible(timeout=30_000)
    stepper.scroll_into_view_if_needed()
    assert stepper.evaluate("img => img.naturalWidth") > 300  # the picture decoded
    graphs = page.locator("img[alt^='computation graph of']")
    expect(graphs.first).to_be_attached()
    assert graphs.count() >= 3
    screenshot(page, "lab_gallery_not_run_yet")
