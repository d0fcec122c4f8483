"""Judge: every exercise's verdict, from the references and what the workers reported.

Nothing the student's process did changes a verdict, only its own answers: the
references and the scoring (:mod:`.scoring`) live here, in the grader. Next stage:
:mod:`.gradebook` (record).
"""

from __future__ import annotations

from .results import Plan, Progress
from .scoring import CRASH, NOT_IMPLEMENTED, TIMEOUT, ExerciseResult, Outcome, judge_exercise


def judge(plan: Plan, progress: Progress, timeout: float) -> list[ExerciseResult]:
    """Every exercise's verdict, from the references and what the workers reported."""
    stopped_cells = {
        **{i: (TIMEOUT, f"code cell {i + 1} did not finish within {timeout:g} s")
           for i in progress.interrupted_cells},
        **progress.killed_cells,
    }  # fmt: skip
    results = []
    for exercise in plan.exercises:
        cases, expected = plan.cases[exercise.id], plan.expected[exercise.id]
        outs = progress.outcomes[exercise.id]
        note = progress.exercise_notes.get(exercise.id, "")
        if exercise.id in progress.missing:
            # Blame a stopped cell only if it mentions the answer's name (it may define it).
            kind, why = next(
                (f for i, f in sorted(stopped_cells.items()) if exercise.answer in plan.cells[i]),
                (NOT_IMPLEMENTED, ""),
            )
            note = f"`{exercise.answer}` is not defined in the notebook" + (
                f" ({why})." if why else "."
            )
            outs = [Outcome(kind, message=note if kind != NOT_IMPLEMENTED else "") for _ in cases]
        received = [
            o if o is not None else Outcome(CRASH, message="no answer was received") for o in outs
        ]
        results.append(judge_exercise(exercise, cases, received, expected, attempt=1, note=note))
    return results


def judge_all_crashed(plan: Plan, note: str) -> list[ExerciseResult]:
    """Every exercise crashed, each case with ``note`` (the grader died while on it)."""
    return [
        judge_exercise(
            e,
            plan.cases[e.id],
            [Outcome(CRASH, message=note) for _ in plan.cases[e.id]],
            plan.expected[e.id],
            note=note[0].upper() + note[1:] + ".",
        )  # fmt: skip
        for e in plan.exercises
    ]
