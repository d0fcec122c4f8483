"""The widgets gallery: its table lists every picture and widget the package offers (issue 25:
"every widget" lacked CheckpointExplorer and the linearize viewer), and its text is true."""

from __future__ import annotations

from pathlib import Path

from notebook_helpers import markdown_text
from notebook_helpers import notebook_cells as _cells

import autodiff_lab.viz as viz

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "notebooks" / "widgets_gallery.ipynb"
NOT_WIDGETS = {"GraphDrawing", "render_svg", "renderer_name", "describe"}  # helpers, not shown


def test_the_table_lists_every_widget_and_drawing_of_the_package():
    first = _cells(GALLERY)[0]["source"]
    listed = "".join(first).split("All of them live in")[0]  # the table, before the note
    missing = [n for n in viz.__all__ if n not in NOT_WIDGETS and f"`{n}" not in listed]
    assert not missing, f"widgets the gallery's table leaves out: {missing}"


def test_every_widget_class_has_an_example_cell():
    code = "\n".join(
        c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        for c in _cells(GALLERY)
        if c["cell_type"] == "code"
    )
    for name in viz.__all__:
        if name not in NOT_WIDGETS and name != "draw_linear_graph":
            assert f"{name}(" in code, name


def test_autodiff_is_not_said_to_have_no_error():
    text = markdown_text(GALLERY)
    assert "neither error" not in text
    assert "no truncation error" in text and "rounding" in text
