"""Issue 24 §1: no exercise is passed by pasting what the course already wrote.

For each chapter, every code cell of ``notebooks/NN_*.ipynb`` and every given (not to be
written) code cell of ``exercises/NN_*.ipynb`` is run in order in one namespace, as a
kernel would; every function and class a cell defines is then submitted as the answer to
each of that chapter's exercises, and must score under half the points. (A chapter cell
is what a student can paste and rename; a given cell is what the notebook hands out.)

Every chapter runs, 07 and 08 included: their cells execute in about 9 s and 3 s here and
their candidates are scored in seconds (the time limit below bounds any one of them).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import types
import warnings
from pathlib import Path
from unittest import mock

import nbformat
import pytest
from notebook_helpers import chapter_notebooks

from autodiff_lab.grading import check, registry

ROOT = Path(__file__).resolve().parent.parent
MAGIC = re.compile(r"^\s*[%!]", re.MULTILINE)


def _defined(cells: list[str]) -> dict[str, object]:
    """Every function and class the cells define (by name, the last definition kept)."""
    namespace: dict = {"__name__": "__main__"}
    found: dict[str, object] = {}
    for k, source in enumerate(cells):
        if MAGIC.search(source) or "NotImplementedError" in source:
            continue
        before = dict(namespace)
        # Agg for the cells' figures, only meanwhile: a kernel that a later test of this
        # pytest worker starts inherits os.environ, and under Agg its figures never show
        with (
            mock.patch.dict(os.environ, {"MPLBACKEND": "Agg"}),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            try:
                exec(compile(source, f"<cell {k}>", "exec"), namespace)  # noqa: S102
            except BaseException:  # a cell that needs a widget front end or raises on purpose
                continue
        for name, obj in namespace.items():
            new = before.get(name) is not obj
            mine = isinstance(obj, (types.FunctionType, type)) and obj.__module__ == "__main__"
            if new and mine and not name.startswith("_"):
                found[f"cell {k}: {name}"] = obj
    return found


def _cells(chapter: int) -> list[str]:
    """The code cells of the chapter (every part of a chapter in parts, in order), then of its
    exercise notebook."""
    cells = []
    for path in _chapter_files(chapter):
        nb = nbformat.read(path, as_version=4)
        cells += [c.source for c in nb.cells if c.cell_type == "code"]
    return cells


def _chapter_files(chapter: int, root: Path = ROOT) -> list[Path]:
    notebooks = chapter_notebooks(root / "notebooks", chapter)
    return [*notebooks, *chapter_notebooks(root / "exercises", chapter)]


def test_a_chapter_in_parts_submits_the_cells_of_every_part(tmp_path):
    """notebooks/NN_1_*, NN_2_* are one chapter: both parts, then the exercises, in order."""
    files = ["notebooks/03_2_b", "notebooks/03_1_a", "notebooks/04_x", "exercises/03_micrograd"]
    for name in files:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / f"{name}.ipynb").write_text("{}")
    found = [p.stem for p in _chapter_files(3, tmp_path)]
    assert found == ["03_1_a", "03_2_b", "03_micrograd"]


#: Seconds one candidate may spend on one exercise's cases; past it every case it is still
#: running raises (a chapter cell called with an exercise's inputs may run for long).
TIME_LIMIT = 5.0


@contextlib.contextmanager
def _time_limit(seconds: float):
    def stop(signum, frame):
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # and again, for the remaining cases
        raise TimeoutError("over the copy test's time limit")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _score(exercise, answer):
    """The check's (score, max score) for ``answer``, within the time limit."""
    with (
        contextlib.redirect_stdout(io.StringIO()),
        warnings.catch_warnings(),
        _time_limit(TIME_LIMIT),
    ):
        warnings.simplefilter("ignore")
        try:
            result = check(exercise.id, answer, show=False, record=False)
        except TimeoutError:  # the limit struck in the checker itself: no points counted
            return 0.0, 1.0
    return result.score, result.max_score


CHAPTERS = sorted({e.chapter for e in registry.course_exercises()})


@pytest.mark.exhaustive  # about ten minutes: every chapter cell against every exercise
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_chapter_or_given_cell_scores_half_of_an_exercise(chapter):
    exercises = [e for e in registry.course_exercises() if e.chapter == chapter]
    offenders = []
    candidates = _defined(_cells(chapter))
    assert candidates, f"chapter {chapter}: no function or class found to submit"
    for where, answer in candidates.items():
        for exercise in exercises:
            score, max_score = _score(exercise, answer)
            if max_score and score >= max_score / 2:
                offenders.append(f"{exercise.id} <- {where}: {score:g}/{max_score:g}")
    assert not offenders, "\n".join(offenders)
