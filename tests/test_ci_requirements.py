"""With ``CI=true`` a test that would skip because PyTorch is missing fails instead.

Runs pytest (in a subprocess, with this suite's conftest) on two small test files that
need ``torch`` while ``import torch`` is made to fail: once without CI (both skip), once
with ``CI=true`` (both fail: one at collection, one through the ``torch`` fixture).
"""

from __future__ import annotations

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
