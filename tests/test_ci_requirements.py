"""CI's requirements: with ``CI=true`` a test that would skip because PyTorch is missing fails
instead, and CI runs the RISE slideshow tests in the lecture environment.

Runs pytest (in a subprocess, with this suite's conftest) on two small test files that
need ``torch`` while ``import torch`` is made to fail: once without CI (both skip), once
with ``CI=true`` (both fail: one at collection, one through the ``torch`` fixture).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

NO_TORCH = 'import sys\nsys.modules["torch"] = None  # as if PyTorch were not installed\n'

MODULE_LEVEL = (
    NO_TORCH
    + """
import pytest

torch = pytest.importorskip("torch")


def test_uses_torch():
    assert torch
"""
)

FIXTURE = (
    NO_TORCH
    + """

def test_uses_the_fixture(torch):
    assert torch
"""
)


def _run(pytester, monkeypatch, ci: str):
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_module_level=MODULE_LEVEL, test_fixture=FIXTURE)
    monkeypatch.setenv("CI", ci)
    # Only this conftest's plugins: the installed ones (nbval, xdist, playwright…) would cost
    # seconds of imports per run and are not what is tested.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--continue-on-collection-errors"
    )


def test_missing_torch_skips_outside_ci(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "")
    result.assert_outcomes(skipped=2)


def test_missing_torch_fails_in_ci(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "true")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*CI=true requires torch*"])


ROOT = Path(__file__).resolve().parents[1]


def _dry_run(target: str) -> str:
    """What ``make -n target`` would run (nothing is run; recipe lines joined)."""
    make = shutil.which("make")
    assert make, "make is needed to run the suite's Makefile checks"
    result = subprocess.run(
        [make, "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.replace("\\\n", " ")


def test_ci_runs_the_rise_tests_in_the_lecture_environment():
    """.ci/run runs make test-exhaustive, which runs the RISE slideshow tests with the lecture
    environment's Python (ipywidgets 7.8.5: under ipywidgets 8 they are a strict xfail),
    installed under tools/lecture-constraints.txt."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test-exhaustive\b", ci, flags=re.M)
    commands = _dry_run("test-exhaustive")
    assert re.search(r"\.venv-lecture/bin/pip install .*-c tools/lecture-constraints\.txt "
                     r"-e '\.\[lab\]'", commands)  # fmt: skip
    assert re.search(
        r"AUTODIFF_LAB_LECTURE_ENV=1 \.venv-lecture/bin/python -m pytest\s+"
        r"tests/browser/test_rise_slides\.py",
        commands,
    )
    # make test itself does not build the lecture environment (its 5-minute budget)
    assert ".venv-lecture" not in _dry_run("test")


def test_a_background_pass_that_hangs_is_interrupted_and_fails(monkeypatch):
    """tools/run_pytest.py's background nbval passes: one that never ends (once, nbval
    waited on a kernel that had vanished) is interrupted at its limit and counts as failed,
    so the run reports it instead of holding CI until its own time limit."""
    import importlib.util
    import sys
    import time

    spec = importlib.util.spec_from_file_location(
        "run_pytest", Path(__file__).parents[1] / "tools" / "run_pytest.py"
    )
    run_pytest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_pytest)
    monkeypatch.setattr(run_pytest, "BACKGROUND_LIMIT", 2)
    started = time.monotonic()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    assert run_pytest.wait_for("a hung pass", sleeper, started) == 1
    assert sleeper.poll() is not None and time.monotonic() - started < 30
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(0)"])
    assert run_pytest.wait_for("a quick pass", done, time.monotonic()) == 0
