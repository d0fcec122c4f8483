"""What the exported notebooks' test cells call: the grader's cases and checks, in the kernel.

nbgrader and Otter Grader run their tests inside the student's kernel, after the student's
cells. These two functions give them the same cases (``case_seed(id, seed)`` with the seed
fixed at export, as ``autodiff-lab grade --seed SEED``), the same transport of answers
(plain data through JSON, as the grader's worker sends them) and the same judging
(:func:`~autodiff_lab.grading.scoring.judge_exercise`), so the points are the grader's.

- :func:`points` (nbgrader): the exercise's points; nbgrader reads a test cell's last value
  as partial credit. Warnings and anything the answer writes to stderr are kept out of the
  cell's output, because nbgrader gives zero to a test cell that writes to stderr.
- :func:`case_passed` (Otter): ``True`` when case ``k`` passes; each case is one Otter test
  worth that case's points.

Unlike ``autodiff-lab grade`` these run in the student's own process, so a student who
sets out to fool them can (as with any test that nbgrader or Otter runs in the kernel).
While ``autodiff-lab grade`` runs a notebook (``AUTODIFF_LAB_GRADING=1``) both do nothing:
that grader judges the answers itself.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import warnings
from typing import Any

import numpy as np

from ..checking import GRADING_ENV, case_seed, run_answer
from ..plaindata import from_plain, to_plain
from ..scoring import ERROR, VALUE, Outcome

__all__ = ["points", "case_passed"]

_plans: dict[tuple[str, int], tuple[Any, list, list]] = {}


def _plan(exercise_id: str, seed: int):
    """(exercise, cases, references) for this seed, computed once per kernel."""
    key = (str(exercise_id), int(seed))
    if key not in _plans:
        from .. import registry  # the references: imported only when a test runs

        exercise = registry.get(exercise_id)
        cases = exercise.cases(np.random.default_rng(case_seed(exercise.id, seed)))
        expected = [exercise.reference(copy.deepcopy(c.inputs)) for c in cases]
        _plans[key] = (exercise, cases, expected)
    return _plans[key]


def _outcome(exercise, answer: Any, inputs: tuple) -> Outcome:
    """One case's outcome, as the grader receives it (answers cross as JSON plain data)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        outcome = run_answer(exercise.run, exercise.answer, answer, inputs)
    if outcome.kind == VALUE:
        try:
            outcome.value = from_plain(json.loads(json.dumps(to_plain(outcome.value))))
        except (TypeError, ValueError, RecursionError) as exc:
            return Outcome(ERROR, message=f"the result is not plain data: {exc}")
    return outcome


def points(exercise_id: str, answer: Any, *, seed: int, show: bool = True) -> float:
    """The points ``answer`` earns for exercise ``exercise_id`` with the cases of ``seed``.

    Shows the scorecard (nbgrader's feedback then lists every case), returns a float.
    """
    if os.environ.get(GRADING_ENV) == "1":
        return 0.0
    from ..scoring import judge_exercise

    exercise, cases, expected = _plan(exercise_id, seed)
    outcomes = [_outcome(exercise, answer, c.inputs) for c in cases]
    result = judge_exercise(exercise, cases, outcomes, expected)
    if show:
        try:
            from IPython.display import display

            display({"text/plain": result.to_text(), "text/html": result.to_html()}, raw=True)
        except ImportError:  # outside IPython
            print(result.to_text())
    return float(result.score)


def case_passed(exercise_id: str, answer: Any, index: int, *, seed: int) -> bool:
    """True when case ``index`` of exercise ``exercise_id`` (cases of ``seed``) passes."""
    if os.environ.get(GRADING_ENV) == "1":
        return False
    from ..scoring import judge_case

    exercise, cases, expected = _plan(exercise_id, seed)
    case = cases[int(index)]
    outcome = _outcome(exercise, answer, case.inputs)
    return bool(judge_case(exercise, case, outcome, expected[int(index)]).passed)
