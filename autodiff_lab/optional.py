"""PyTorch as an optional oracle: the course compares with it where it is installed.

``make lab`` installs only what the course needs; PyTorch is a test dependency. A notebook
cell that compares with PyTorch starts with ``torch = import_torch()`` and runs its
comparison under ``if torch is not None:``. Without PyTorch the cell prints one line saying
how to add it and the chapter goes on; the committed notebook keeps the output computed
with PyTorch, so a reader still sees the evidence. A learner who runs the cell without
PyTorch replaces that output in their copy, so a cell whose output is evidence ends with
``else: show_committed_result(NOTEBOOK, CELL_ID)``: it prints the committed output, read from
the installed course, under a label saying it is stored, not computed (issue 26 §3).

Decision: the hint names PyTorch's CPU-only wheel index. On Linux, a plain
``pip install torch`` from PyPI brings the CUDA build (several GB); the CPU build is a
few hundred MB and is all the course needs.
"""

from __future__ import annotations

from types import ModuleType

TORCH_CPU_INSTALL = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def import_torch() -> ModuleType | None:
    """Return the ``torch`` module, or print how to install it and return None."""
    try:
        import torch
    except ImportError:
        print(
            "PyTorch is not installed, so this comparison is skipped (the committed "
            f"notebook shows its output). To run it: {TORCH_CPU_INSTALL}"
        )
        return None
    return torch


#: The line above a committed result that a learner without PyTorch is shown.
COMMITTED_LABEL = "Committed result of this cell, computed with PyTorch when the course was built:"


def committed_output(notebook: str, cell_id: str) -> str:
    """What code cell ``cell_id`` of the course's ``notebooks/<notebook>.ipynb`` printed, as
    committed (the course is executed with PyTorch installed).

    The notebook is read from the installed course (:func:`autodiff_lab.course.course_source`:
    the wheel's copy, or the checkout), never from the learner's working copy, where a run
    without PyTorch has replaced that output. Raises LookupError naming the notebook and the
    cell when the cell is missing or printed nothing.
    """
    import json

    from .course import course_source

    path = course_source() / "notebooks" / f"{notebook}.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [c for c in cells if c.get("id") == cell_id and c["cell_type"] == "code"]
    text = "".join(
        "".join(out["text"])
        for cell in found
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    )
    if not text:
        raise LookupError(
            f"committed_output: {path.name} has no code cell {cell_id!r} that printed something"
        )
    return text


def show_committed_result(notebook: str, cell_id: str) -> None:
    """Print, under :data:`COMMITTED_LABEL`, what this PyTorch cell printed as committed.

    A chapter cell that needs PyTorch ends ``else: show_committed_result(NOTEBOOK, ID)``
    after its ``if torch is not None:`` block, with its own notebook's name and cell id, so a
    learner without PyTorch still sees the evidence, labelled as stored, not computed.
    """
    print(COMMITTED_LABEL)
    print(committed_output(notebook, cell_id), end="")
