"""Helpers for the grading machinery's tests: the test exercises and tiny notebooks."""

from __future__ import annotations

import contextlib
import csv
import io
import sqlite3
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


def grade_folder(subs: Path, root: Path, column: str, sandbox: str = "none") -> dict:
    """``autodiff-lab grade SUBS`` as a lecturer runs it (no sandbox unless ``sandbox``
    names one, 2 workers, 10 s cells), its exports written under ``root``: the exit code,
    the CSV rows, the summary, the paths, what it printed, and each student's (status,
    notes, ``column``) from the gradebook."""
    paths = {k: root / v for k, v in
             [("db", "book.sqlite"), ("csv", "grades.csv"), ("summary", "totals.csv"),
              ("report", "reports")]}  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_cli(
            ["grade", str(subs), "--db", str(paths["db"]), "--out", str(paths["csv"]),
             "--summary", str(paths["summary"]), "--report", str(paths["report"]),
             "-j", "2", "--timeout", "10", "--sandbox", sandbox, "--quiet",
             "--exercises-module", EXERCISES_MODULE]
        )  # fmt: skip
    with open(paths["csv"], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(paths["summary"], newline="", encoding="utf-8") as f:
        summary = list(csv.reader(f))
    with sqlite3.connect(paths["db"]) as conn:
        query = f"SELECT student, status, notes, {column} FROM submissions"
        subs_rows = {r[0]: r[1:] for r in conn.execute(query)}
    return {"rc": rc, "rows": rows, "summary": summary, "paths": paths, "out": out.getvalue(),
            "err": err.getvalue(), "subs": subs_rows, "db": paths["db"]}  # fmt: skip
