"""Re-execute notebooks in place, so their stored outputs are fresh (``make notebooks``).

With no arguments: every notebook in notebooks/ and solutions/. Each runs in a fresh
kernel from its own folder, with the environment the tests use (wasm Graphviz renderer,
one BLAS thread), so `pytest --nbval` then sees the same outputs.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("AUTODIFF_LAB_RENDERER", "wasm")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
# The stored outputs show a new learner's progress, never the maintainer's own.
os.environ["AUTODIFF_LAB_DATA_DIR"] = tempfile.mkdtemp(prefix="autodiff-lab-notebooks-")


def execute(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(
        [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("solutions/*.ipynb")]
    )
    for path in paths:
        seconds = execute(path.resolve())
        print(f"executed {path} in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
