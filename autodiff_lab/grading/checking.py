"""``check("3.2", my_function)``: a student's scorecard, right in the notebook.

Runs the exercise's cases (seeded random inputs plus edge cases) on the student's answer,
compares each result with the reference, and shows a scorecard: pass/fail per case, the
points, and on failure a hint. Hints are tiered: the first failing attempt in a kernel
gets a gentle nudge, later attempts get more specific ones; a recognised mistake (say, a
wrong sign) gets its own hint first. A stub that still raises ``NotImplementedError``
shows "not attempted"; any other error shows as one short line, never a traceback.

In Jupyter the scorecard is HTML; elsewhere it is printed as text. The check is for
learning, not for marks: the command-line grader recomputes every verdict outside the
student's process. While the grader runs a notebook (``AUTODIFF_LAB_GRADING=1``) ``check``
does nothing.

(This module is ``checking``, not ``check``, so that ``autodiff_lab.grading.check`` is
always the function, never a submodule that shadows it.)
"""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np

from .plaindata import PlainDataError, to_plain
from .scoring import (
    CRASH,
    ERROR,
    NOT_IMPLEMENTED,
    VALUE,
    ExerciseResult,
    Outcome,
    judge_exercise,
    short_error,
)
from .spec import case_seed

__all__ = ["check", "CheckResult", "run_answer", "case_seed"]

GRADING_ENV = "AUTODIFF_LAB_GRADING"
#: Set by the first cell of an exported nbgrader/Otter notebook: no solution sketches there.
ASSIGNMENT_ENV = "AUTODIFF_LAB_ASSIGNMENT"

_assignment = False  # set by an exported assignment's check cell: no solution sketches
_attempts: dict[str, int] = {}  # exercise id -> checks run in this kernel (hint tiers)


class CheckResult(ExerciseResult):
    """A scorecard: ``.score``, ``.max_score``, ``.status``, ``.cases``, ``.hints``.

    Displays as HTML in Jupyter and as text elsewhere. :func:`check` shows it once; when
    it is also a cell's last value, the duplicate display is skipped.
    """

    _skip_next_display = False

    def _ipython_display_(self) -> None:
        if self._skip_next_display:
            self._skip_next_display = False
            return
        from IPython.display import display

        display({"text/plain": self.to_text(), "text/html": self.to_html()}, raw=True)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return (
            f"<CheckResult exercise {self.exercise_id}: {self.status}, "
            f"{self.score:g}/{self.max_score:g} points>"
        )


def run_answer(run, answer_name: str, answer: Any, inputs: tuple) -> Outcome:
    """``run(answer, inputs)`` on a private copy of one case's inputs, as an Outcome.

    ``run`` is the exercise's student-side adapter; ``answer_name`` names the student's
    function in error messages.
    """
    try:
        value = run(answer, copy.deepcopy(inputs))
        to_plain(value)  # the grader only accepts plain data; say so here too
        return Outcome(VALUE, value)
    except NotImplementedError as exc:
        return Outcome(NOT_IMPLEMENTED, message=short_error(exc, answer_name))
    except PlainDataError as exc:
        return Outcome(ERROR, message=f"the result is not plain data: {exc}")
    except MemoryError:
        return Outcome(CRASH, message="ran out of memory (MemoryError)")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: one short line, not a traceback
        return Outcome(ERROR, message=short_error(exc, answer_name))


def check(
    exercise_id: str,
    answer: Any,
    *,
    seed: int | None = None,
    show: bool = True,
    record: bool = True,
    reveal: bool = False,
    assignment: bool = False,
):
    """Check ``answer`` (the function or class you wrote) for exercise ``exercise_id``.

    Returns a :class:`CheckResult` (``.score``, ``.max_score``, ``.status``) and, unless
    ``show=False``, displays it. Unless ``record=False`` (a demonstration, as on the start
    page), the best score is kept in the learner's progress (``autodiff_lab.progress()``).
    Hints never give the solution away; ``reveal=True`` adds the exercise's solution sketch
    when the answer is not right yet — except in an exported assignment: its check cells
    pass ``assignment=True`` (nbgrader, Otter), which refuses ``reveal`` in this kernel from
    then on, as does ``AUTODIFF_LAB_ASSIGNMENT=1``. (A student can still read the package's
    exercise modules: in-kernel tests cannot hide what the kernel can import.)
    """
    global _assignment
    _assignment = _assignment or assignment
    exercise_id = str(exercise_id)
    if os.environ.get(GRADING_ENV) == "1":
        return CheckResult(exercise_id, "", "skipped", 0.0, 0.0, note="checks skip while grading")
    from . import registry  # here, not at import: the grader's worker imports this module

    try:
        exercise = registry.get(exercise_id)
    except KeyError as exc:
        result = CheckResult(exercise_id, "unknown exercise", "error", 0.0, 0.0, note=exc.args[0])
        return _show(result) if show else result
    _attempts[exercise_id] = _attempts.get(exercise_id, 0) + 1
    cases = exercise.cases(np.random.default_rng(case_seed(exercise_id, seed)))
    expected = [exercise.reference(copy.deepcopy(c.inputs)) for c in cases]
    if answer is None or answer is Ellipsis:
        outcomes = [Outcome(NOT_IMPLEMENTED) for _ in cases]
    else:
        outcomes = _own_code_outcomes(exercise, answer, cases) or [
            run_answer(exercise.run, exercise.answer, answer, c.inputs) for c in cases
        ]
    refused = reveal and (_assignment or os.environ.get(ASSIGNMENT_ENV) == "1")
    judged = judge_exercise(
        exercise,
        cases,
        outcomes,
        expected,
        attempt=_attempts[exercise_id],
        reveal=reveal and not refused,
    )
    result = CheckResult(**vars(judged))
    if refused:
        result.note = "reveal=True is switched off in a graded assignment"
    if record:
        # Imported here: the own-code child loads this module from its file under a private
        # package name (grading/own_code.py), where nothing above grading/ exists.
        from ..progress import record as record_progress

        record_progress(result)  # kept on this computer only
    return _show(result) if show else result


def _own_code_outcomes(exercise, answer: Any, cases: list) -> list[Outcome] | None:
    """An own-code exercise checked in IPython: its answer computed from the kernel's cells
    (``In``) in a child where the library is switched off, as the batch grader does
    (:mod:`.own_code`). None elsewhere: outside IPython, or when ``answer`` is not what the
    notebook's answer name holds (the in-process check then runs)."""
    if not exercise.own_code:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    history = shell.user_ns.get("In") if shell is not None else None
    if not isinstance(history, list) or shell.user_ns.get(exercise.answer) is not answer:
        return None
    from .isolation import outcomes_in_child

    return outcomes_in_child(exercise, cases, [str(cell) for cell in history])


def _show(result: CheckResult) -> CheckResult:
    """Display in Jupyter (HTML), print elsewhere."""
    shell = _kernel_shell()
    if shell is None:
        print(result.to_text())
        return result
    from IPython.display import display

    display({"text/plain": result.to_text(), "text/html": result.to_html()}, raw=True)
    # If the result is also the cell's value, IPython would display it again: skip that
    # once, and re-arm after the cell so ``r = check(...)`` then ``r`` still shows it.
    result._skip_next_display = True

    def rearm(*_args: Any) -> None:
        result._skip_next_display = False
        try:
            shell.events.unregister("post_run_cell", rearm)
        except ValueError:
            pass

    shell.events.register("post_run_cell", rearm)
    return result


def _kernel_shell():
    """The IPython shell when running inside a Jupyter kernel, else None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return shell
