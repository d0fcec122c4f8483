"""Every widget's static fallback (what a reloaded notebook, GitHub or nbviewer shows in
place of the live controls) tells the student to run the cell again."""

import ipywidgets
import pytest

from autodiff_lab import Value
from autodiff_lab.viz import (
    BackwardStepper,
    CostExplorer,
    FiniteDifferenceExplorer,
    ForwardStepper,
    TrainingDashboard,
)

HINT = "run this cell to make the controls live"


def _graph():
    a = Value(0.5, label="a")
    b = Value(-0.75, label="b")
    out = (a * b + a).tanh()
    out.label = "L"
    return out


WIDGETS = {
    "BackwardStepper": lambda: BackwardStepper(_graph()),
    "ForwardStepper": lambda: ForwardStepper(lambda x, y: (x * y).sin(), [0.5, 2.0], [1.0, 0.0]),
    "FiniteDifferenceExplorer": lambda: FiniteDifferenceExplorer(lambda x: x * x, x=1.0),
    "CostExplorer": lambda: CostExplorer(sizes=(1, 2), repeats=1),
    "TrainingDashboard": lambda: TrainingDashboard(seed=0, grid=10),
}


@pytest.mark.parametrize("name", sorted(WIDGETS))
def test_fallback_says_run_the_cell(name):
    widget = WIDGETS[name]()
    assert isinstance(widget, ipywidgets.DOMWidget)
    bundle = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # the live widget
    # where the live widget cannot be shown, the text and the HTML picture say what to do
    assert bundle["text/plain"].startswith(name)
    assert bundle["text/plain"].endswith("(Static picture: " + HINT + ".)")
    assert "\n" not in bundle["text/plain"]
    html = bundle["text/html"]
    assert HINT in html and "<img " in html and "<svg" not in html  # sanitizers drop <svg>
