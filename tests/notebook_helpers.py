"""Reading stored notebooks in tests (shared by the chapter tests).

A module of its own rather than conftest.py, as ``svg_helpers``: tests/ and tests/browser/
each have a conftest, so ``from conftest import …`` would find whichever was imported first.
"""

from __future__ import annotations

import json
from pathlib import Path


def notebook_cells(path: Path) -> list[dict]:
    """The cells of a stored notebook, as JSON (no nbformat normalisation)."""
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def cell_source(cell: dict) -> str:
    """A cell's source as one string (stored either as a string or a list of lines)."""
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def markdown_text(path: Path) -> str:
    """Every Markdown cell of a notebook, joined by newlines."""
    return "\n".join(cell_source(c) for c in notebook_cells(path) if c["cell_type"] == "markdown")


def printed(cell: dict) -> str:
    """What one code cell printed (its stream outputs)."""
    return "".join(
        o["text"] if isinstance(o["text"], str) else "".join(o["text"])
        for o in cell.get("outputs", [])
        if o["output_type"] == "stream"
    )
