"""Helpers for the export tests: the real classroom tools, run as their users run them."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SEED = 4242
# Exercise 1.2 with the derivative's sign flipped: only the case with tangent 0 passes.
WRONG_DUAL_SIN = (
    "def dual_sin(x):\n"
    "    primal, tangent = x\n"
    "    return math.sin(primal), -math.cos(primal) * tangent"
)


def require(module: str, pin: str):
    """Import a classroom tool; skip without it, but FAIL under CI=true (the test extra has it)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"{pin} is not installed (pip install -e '.[test]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; under CI=true the export tests must run")
        pytest.skip(message)


def _env() -> dict[str, str]:
    """This environment's bin folder first on PATH, as after activating the venv
    (``nbgrader db`` calls ``alembic``)."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("AUTODIFF_LAB_GRADING", None)
    # the notebooks' practice check() cells record progress: not into the user's own
    env.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-export-"))
    return env


def start(*argv: str, cwd: Path) -> subprocess.Popen:
    """Start a console script of this environment (``finish`` waits for it)."""
    command = [str(Path(sys.executable).parent / argv[0]), *argv[1:]]
    return subprocess.Popen(
        command, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen, timeout: float = 180) -> None:
    """Wait for a started tool; fail with its output when it did not succeed."""
    stdout, stderr = process.communicate(timeout=timeout)
    output = f"{stdout[-3000:]}\n{stderr[-3000:]}"
    assert process.returncode == 0, f"{' '.join(process.args)} failed:\n{output}"


def tool(*argv: str, cwd: Path, timeout: float = 180) -> None:
    """Run a console script of this environment to the end."""
    finish(start(*argv, cwd=cwd), timeout)


def read_nb(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_nb(path: Path, nb: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return path


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def grader_points(paths: dict[str, Path], seed: int) -> dict[str, dict[str, float]]:
    """``autodiff-lab grade --seed SEED``'s points per exercise for each named notebook."""
    from autodiff_lab.grading.grader import Submission, grade_submission

    points = {}
    for name, path in paths.items():
        result = grade_submission(Submission(path, name), seed=seed)
        assert result.status == "graded", (name, result.notes)
        points[name] = {e.exercise_id: e.score for e in result.exercises}
    return points
