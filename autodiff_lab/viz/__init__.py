"""Pictures of the graph and of the gradients flowing through it.

- :func:`draw_graph` — the recorded graph of a ``Value`` or ``Tensor`` as SVG.
- :class:`BackwardStepper` — ``backward()`` one node at a time (reverse mode).
- :class:`ForwardStepper` — tangents pushed forward one node at a time (forward mode).
- :class:`FiniteDifferenceExplorer` — finite-difference error vs step size h.
- :class:`CostExplorer` — measured cost of forward vs reverse mode as inputs/outputs grow.
- :class:`TrainingDashboard` — live training curves (in :mod:`autodiff_lab.viz.dashboard`).
- :class:`LinearizeViewer`, :func:`draw_linear_graph` — a jvp's linear graph and its
  transpose, the vjp (in :mod:`autodiff_lab.viz.linear_viewer`).
- :class:`CheckpointExplorer` — checkpointing: kept vs recomputed values, memory and time.
- ``plot_mode_race``, ``plot_jacobian_passes`` — the chapters' figures, one call on a slide
  (in :mod:`autodiff_lab.viz.plots`).
- :func:`describe` — a sentence saying what a matplotlib figure shows, for its alt text (in
  :mod:`autodiff_lab.viz.figures`, which gives every figure a text alternative).

Every widget also shows a static picture where no kernel runs (GitHub, nbviewer, HTML).
"""

from __future__ import annotations

from .drawing import GraphDrawing, draw_graph
from .figures import describe
from .render import render_svg, renderer_name

__all__ = [
    "draw_graph", "GraphDrawing", "render_svg", "renderer_name", "describe",
    "BackwardStepper", "ForwardStepper", "FiniteDifferenceExplorer", "CostExplorer",
    "TrainingDashboard", "CheckpointExplorer", "LinearizeViewer", "draw_linear_graph",
]  # fmt: skip

_LAZY = {
    "BackwardStepper": ".steppers",
    "ForwardStepper": ".steppers",
    "FiniteDifferenceExplorer": ".explorers",
    "CostExplorer": ".explorers",
    "TrainingDashboard": ".dashboard",
    "CheckpointExplorer": ".checkpointing",
    "LinearizeViewer": ".linear_viewer",
    "draw_linear_graph": ".linear_viewer",
}


def __getattr__(name: str):
    """Import the widgets on first use (ipywidgets and matplotlib load only when needed)."""
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name], __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
