"""Helpers for the grading machinery's tests: the test exercises and tiny notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat

from autodiff_lab.grading import registry

EXERCISES_MODULE = str(Path(__file__).with_name("grading_testkit_exercises.py"))

CORRECT = {
    "dsin": "import math\n\ndef dsin(x):\n    return math.cos(x)",
    "square": "def square(x):\n    return x * x",
    "scale": "import numpy as np\n\ndef scale(v, a):\n    return a * np.asarray(v)",
}


def load_test_exercises() -> None:
    """Register chapter 97 (idempotent) in this process; the grader passes it on."""
    registry.load_module(EXERCISES_MODULE)


def write_notebook(path: Path, cells: list[str], markdown_first: str | None = None) -> Path:
    """A notebook with these code cells (and optionally a Markdown cell first)."""
    nb = nbformat.v4.new_notebook()
    if markdown_first:
        nb.cells.append(nbformat.v4.new_markdown_cell(markdown_first))
    nb.cells += [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def run_cli(argv: list[str]) -> int:
    """Run a grading sub-command in this process (as ``autodiff-lab ARGV`` would)."""
    import argparse

    from autodiff_lab.grading import cli as grading_cli

    parser = argparse.ArgumentParser(prog="autodiff-lab")
    grading_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.run(args)


def bubblewrap_or_skip():
    """The bubblewrap sandbox; skip without it, but FAIL under CI=true (CI installs it)."""
    import os

    import pytest

    from autodiff_lab.grading.sandbox import choose

    try:
        return choose("bubblewrap")
    except RuntimeError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the sandbox tests: {exc}")
        pytest.skip(str(exc))
