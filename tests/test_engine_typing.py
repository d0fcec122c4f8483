"""The engine's core passes ``mypy --strict`` (issue 27): every function annotated, no bare
generic, no ``Any`` returned where a type is declared.

The files are those of chapter 03's reading path and of the array engine
(:data:`STRICT`); the transformations follow as they are typed. mypy runs in-process
(``mypy.api``) with the project's configuration and its cache, as ``make test``'s own mypy
run does; only errors in these files count (the modules they import are checked by
``make test``'s plain run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STRICT = ["graph", "kinds", "primitive", "ops", "primitives", "memory", "methods"]
STRICT += ["value", "tensor"]


def test_the_engine_core_passes_mypy_strict(monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # the project's configuration, and paths as written below
    files = [f"autodiff_lab/{name}.py" for name in STRICT]
    stdout, stderr, _ = api.run(["--strict", "--no-error-summary", *files])
    mine = tuple(files)
    errors = [line for line in stdout.splitlines() if line.startswith(mine) and ": error:" in line]
    assert not stderr.strip(), stderr
    assert not errors, "\n".join(errors)
