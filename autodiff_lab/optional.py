"""PyTorch as an optional oracle: the course compares with it where it is installed.

``make lab`` installs only what the course needs; PyTorch is a test dependency. A notebook
cell that compares with PyTorch starts with ``torch = import_torch()`` and runs its
comparison under ``if torch is not None:``. Without PyTorch the cell prints one line saying
how to add it and the chapter goes on; the committed notebook keeps the output computed
with PyTorch, so a reader still sees the evidence.

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
