"""Grading submitted notebooks: read → plan → run isolated → judge → record.

A submission's path through the grader, one module per stage, in this order:

1. **Read** (:mod:`~autodiff_lab.grading.reading`). Before the batch every submission is
   looked at with ``lstat``, then hashed and copied into the grader's private folder
   (:func:`stage`): no symbolic link is followed, no pipe opened, no oversized file read,
   so no student can take, or later change, another's notebook. Each notebook is then read
   — JSON, exercise ids, syntax trees — in a limited child process
   (:mod:`~autodiff_lab.grading.notebook_facts`), never in the grader's own.
2. **Plan** (:mod:`~autodiff_lab.grading.planning`, in the grader). Which exercises the
   notebook answers; their cases drawn from the batch's secret seed (one per gradebook,
   so identical notebooks get identical points); the reference values.
3. **Run isolated** (:mod:`~autodiff_lab.grading.isolation`, through
   :mod:`~autodiff_lab.grading.supervise` in the :mod:`~autodiff_lab.grading.sandbox`).
   A fresh worker per submission runs the cells in a scratch copy and sends back
   plain-data answers to the case inputs; a cell or exercise that kills a worker or runs
   too long is skipped by the next one; the whole notebook has a total time cap.
4. **Judge** (:mod:`~autodiff_lab.grading.judging`). Answers against references; nothing
   the student's process does changes a verdict, only its own answers.
5. **Record** (:mod:`~autodiff_lab.grading.gradebook`), one transaction per submission,
   every text escaped. Each submission is marked "in progress" first: if the grader itself
   is killed, the next run records that submission as crashed (after one more try alone).

The types every stage shares are in :mod:`~autodiff_lab.grading.results` (at the bottom:
it imports no stage); the batch scheduler that drives the stages is
:mod:`~autodiff_lab.grading.batch`. This module only gathers the public names.
"""

from __future__ import annotations

from .batch import (
    RERUN_ALONE_NOTE,
    BatchSummary,
    grade_batch,
    grade_staged,
    grade_submission,
    plan_staged,
)
from .isolation import (
    INFRASTRUCTURE_ATTEMPTS,
    INFRASTRUCTURE_PAUSE,
    OUTPUT_LIMIT_MB,
    ExerciseDefinitionError,
    InfrastructureFailure,
    _after_a_stopped_run,
    run_isolated,
    runner_spec,
)
from .judging import judge
from .notebook_facts import OTHER_AUTODIFF
from .planning import (
    answered_exercises,
    exercises_from_facts,
    exercises_in,
    library_calls,
    library_notes,
    plan_submission,
)
from .reading import (
    MAX_COPIED_BYTES,
    MAX_FOLDER_DEPTH,
    MAX_NOTEBOOK_BYTES,
    MAX_NOTEBOOKS_PER_STUDENT,
    MAX_STORED_BYTES,
    MAX_STUDENT_BYTES,
    READ_MEMORY_MB,
    READ_SECONDS,
    collect_submissions,
    read_facts,
    stage,
)
from .results import (
    DEFAULT_MEMORY_MB,
    DEFAULT_NOTEBOOK_TIMEOUT,
    DEFAULT_TIMEOUT,
    MAX_NOTE_CHARS,
    MAX_NOTES,
    NOT_GRADED,
    Plan,
    Progress,
    Settings,
    Staged,
    Submission,
    SubmissionResult,
    capped_notes,
)

_Progress = Progress  # the name older tests import

__all__ = [
    "DEFAULT_MEMORY_MB", "DEFAULT_NOTEBOOK_TIMEOUT", "DEFAULT_TIMEOUT",
    "INFRASTRUCTURE_ATTEMPTS", "INFRASTRUCTURE_PAUSE", "MAX_COPIED_BYTES",
    "MAX_FOLDER_DEPTH", "MAX_NOTEBOOK_BYTES", "MAX_NOTEBOOKS_PER_STUDENT", "MAX_NOTES",
    "MAX_NOTE_CHARS", "MAX_STORED_BYTES", "MAX_STUDENT_BYTES", "NOT_GRADED", "OTHER_AUTODIFF",
    "OUTPUT_LIMIT_MB", "READ_MEMORY_MB", "READ_SECONDS", "RERUN_ALONE_NOTE", "BatchSummary",
    "ExerciseDefinitionError", "InfrastructureFailure", "Plan", "Progress", "Settings",
    "Staged", "Submission", "SubmissionResult", "_Progress", "_after_a_stopped_run",
    "answered_exercises", "capped_notes", "collect_submissions", "exercises_from_facts",
    "exercises_in", "grade_batch", "grade_staged", "grade_submission", "judge",
    "library_calls", "library_notes", "plan_staged", "plan_submission", "read_facts",
    "run_isolated", "runner_spec", "stage",
]  # fmt: skip
