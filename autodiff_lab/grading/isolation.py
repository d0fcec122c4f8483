"""Run isolated: the notebook's cells and the cases' inputs in fresh worker processes.

:func:`run_isolated` hands the plan to workers (:mod:`.supervise`, in the
:mod:`.sandbox`) until every exercise has answers or a reason why not: a cell or an
exercise that kills a worker or runs too long is skipped by the next one; a worker the
grader's infrastructure could not start is tried again (:class:`InfrastructureFailure`
after :data:`INFRASTRUCTURE_ATTEMPTS`). What the workers report becomes a
:class:`~.results.Progress`; nothing here judges. Next stage: :mod:`.judging`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from .own_code import run_in_child, switched_off
from .plaindata import from_plain, to_plain
from .results import Plan, Progress, Settings, Submission
from .scoring import CRASH, ERROR, NOT_IMPLEMENTED, NOT_RUN, TIMEOUT, VALUE, Outcome
from .spec import Exercise
from .supervise import WorkerRun, notebook_time_limit, run_worker

OUTPUT_LIMIT_MB = 64.0
INFRASTRUCTURE_ATTEMPTS = 3  # tries at starting a worker before "not graded" (see below)
INFRASTRUCTURE_PAUSE = 1.0  # seconds before the second try (twice that before the third)


class ExerciseDefinitionError(ValueError):
    """An exercise the grader cannot hand to a worker safely (see :func:`runner_spec`)."""


def runner_spec(exercise: Exercise) -> dict:
    """How the worker finds ``exercise.run``: a module-level function in a module that
    holds no references (no ``EXERCISES``), imported by name or loaded from its file."""
    run = exercise.run
    module = sys.modules.get(getattr(run, "__module__", ""), None)
    name = getattr(run, "__name__", "")
    if module is None or getattr(module, name, None) is not run:
        raise ExerciseDefinitionError(
            f"exercise {exercise.id}: run must be a module-level function (got {run!r}), so "
            "the student's process can import it without the exercise"
        )
    if hasattr(module, "EXERCISES"):
        raise ExerciseDefinitionError(
            f"exercise {exercise.id}: run lives in {module.__name__}, which defines the "
            "exercises (and their references); move it to a module of runners"
        )
    return {"module": module.__name__, "file": getattr(module, "__file__", None), "name": name}


def paths_workers_need(exercises: list[Exercise]) -> list[Path]:
    """Read-only folders and files a worker needs, bound back inside hidden folders."""
    import autodiff_lab

    package = Path(autodiff_lab.__file__).parent
    keep = {Path(sys.prefix), Path(sys.base_prefix), package}
    # A PYTHONPATH entry holding the package (an uninstalled checkout) would show the
    # whole course folder, .git included: only the package itself is shown then.
    keep.update(
        Path(p)
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and not package.is_relative_to(Path(os.path.abspath(p)))
    )
    for exercise in exercises:
        file = runner_spec(exercise)["file"]
        if file and not Path(file).is_relative_to(Path(autodiff_lab.__file__).parent):
            keep.add(Path(file))
    return sorted(keep)


def paths_workers_must_not_see(settings: Settings, submissions: list[Submission]) -> list[Path]:
    """The course folder, home, submissions, exports, solutions and the references."""
    import autodiff_lab

    package = Path(autodiff_lab.__file__).parent
    hide = {Path.cwd(), Path.home(), package / "grading" / "exercises"}
    hide.update(p / "solutions" for p in (Path.cwd(), package.parent))
    hide.update(Path(os.path.abspath(s.path)).parent for s in submissions)
    hide.update(Path(os.path.abspath(s.path)).parent.parent for s in submissions if s.own_folder)
    hide.update(Path(os.path.abspath(p)) for p in settings.hide)
    return sorted(hide)


def run_isolated(
    plan: Plan,
    scratch_source: Path,
    settings: Settings,
    keep: list[Path],
    hide: list[Path],
    stop: threading.Event | None = None,
) -> Progress:
    """Run the notebook in workers until every exercise has answers or a reason why not."""
    progress = Progress({e.id: [None] * len(plan.cases[e.id]) for e in plan.exercises})
    cells, exercises, cap = len(plan.cells), len(plan.exercises), settings.notebook_timeout
    limit = notebook_time_limit(settings.timeout, cells, exercises, cap)
    settings = dataclasses.replace(settings, notebook_timeout=limit)  # as the notes say it
    deadline = time.monotonic() + settings.notebook_timeout
    # Own-code exercises go to a worker of their own that runs no student code itself
    # (each answer in a child with the library switched off: grading/own_code.py).
    by_id = {e.id: e for e in plan.exercises}
    own = {e.id: switched_off(e) for e in plan.exercises if switched_off(e) is not None}
    for group in ([e.id for e in plan.exercises if e.id not in own], list(own)):
        if group:
            _run_group(group, plan, progress, settings, by_id, own, scratch_source, keep, hide,
                       deadline, stop)  # fmt: skip
    for i in own:  # a refused import is said once, at the top of the report, too
        first = progress.outcomes[i][0] if progress.outcomes[i] else None
        record = first.value if first is not None and first.kind == VALUE else None
        if isinstance(record, dict) and record.get("error") == "LibraryCode":
            message = str(record.get("message", ""))
            if message.startswith(f"exercise {i} must be your own code"):
                progress.note(_scrub(message)[:300] + "; it scores nothing")
    return progress


def _run_group(
    remaining: list[str],
    plan: Plan,
    progress: Progress,
    settings: Settings,
    by_id: dict[str, Exercise],
    own: dict[str, list[str] | None],
    scratch_source: Path,
    keep: list[Path],
    hide: list[Path],
    deadline: float,
    stop: threading.Event | None,
) -> None:
    """:func:`run_isolated` for one group of exercises: all ordinary or all own-code."""
    timeout = settings.timeout
    attempt = 0
    label = "own" if remaining[0] in own else "run"
    while remaining:
        attempt += 1
        request = {
            "cells": plan.cells,
            "skip_cells": sorted(progress.killed_cells),
            "own_code": label == "own",
            "exercises": [
                {
                    "id": i,
                    "answer": by_id[i].answer,
                    "run": runner_spec(by_id[i]),
                    "cases": [to_plain(c.inputs) for c in plan.cases[i]],
                    "own_code": own.get(i),
                }
                for i in remaining
            ],
            "timeout": timeout,
            "memory_mb": settings.memory_mb,
            "output_mb": OUTPUT_LIMIT_MB,
        }
        run = _run_worker_retrying(
            request, scratch_source, f"{label}{attempt}", settings, keep, hide, deadline, stop
        )
        done = _absorb(run.events, plan, progress, timeout)
        remaining = [i for i in remaining if i not in done]
        if run.finished or not remaining:
            for i in remaining:  # "finished" but silent about an exercise: forged or lost
                _fill(progress.outcomes[i], Outcome(CRASH, message="no answer was received"))
            break
        if not _after_a_stopped_run(run, plan, progress, remaining, settings):
            break


class InfrastructureFailure(RuntimeError):
    """The grader could not run a worker for a notebook: no student code ran, so it is
    not the student's result (see :func:`_run_worker_retrying`)."""


def _run_worker_retrying(
    request: dict,
    scratch_source: Path,
    label: str,
    settings: Settings,
    keep: list[Path],
    hide: list[Path],
    deadline: float,
    stop: threading.Event | None,
) -> WorkerRun:
    """One worker run in a fresh scratch copy; a run the grader's infrastructure failed
    (``WorkerRun.infrastructure_failure``: the worker could not start, or died before
    running anything of the notebook — a machine out of tasks) is tried again, at most
    :data:`INFRASTRUCTURE_ATTEMPTS` times in all, then :class:`InfrastructureFailure`."""
    failure = ""
    for attempt in range(INFRASTRUCTURE_ATTEMPTS):
        if attempt:  # give a loaded machine a moment
            if stop is not None and stop.wait(INFRASTRUCTURE_PAUSE * attempt):
                break
        scratch = scratch_source.parent / f"{scratch_source.name}-{label}-{attempt}"
        shutil.copytree(scratch_source, scratch, symlinks=True)
        try:
            run = run_worker(
                request, sandbox=settings.sandbox, scratch=scratch, keep=keep, hide=hide,
                timeout=settings.timeout, deadline=deadline, stop=stop,
                python=settings.python, max_processes=settings.max_processes,
                memory_mb=settings.memory_mb,
            )  # fmt: skip
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        failure = getattr(run, "infrastructure_failure", None) or ""
        if not failure or run.stopped_for == "stopped":
            return run
    raise InfrastructureFailure(failure or "grading was stopped")


def _after_a_stopped_run(
    run: WorkerRun, plan: Plan, progress: Progress, remaining: list[str], settings: Settings
) -> bool:
    """Record why a worker stopped early; True when another worker should carry on."""
    if run.stopped_for in ("deadline", "stopped"):
        what = (
            f"the notebook used up its total time of {settings.notebook_timeout:g} s"
            if run.stopped_for == "deadline"
            else "grading was stopped (Ctrl-C) while this notebook ran"
        )
        progress.note(what)
        for i in remaining:
            _fill(progress.outcomes[i], Outcome(TIMEOUT, message=what))
            progress.exercise_notes.setdefault(i, what[0].upper() + what[1:] + ".")
        return False
    kind = TIMEOUT if run.stopped_for == "timeout" else CRASH
    what = {
        "timeout": f"did not finish within {settings.timeout:g} s",
        "processes": f"started more than {settings.max_processes} processes and was stopped",
        "memory": (
            f"used more than {settings.memory_mb:g} MB in all its processes together "
            "and was stopped"
        ),
    }.get(run.stopped_for or "", f"ended the notebook's process, which {run.exit_description}")
    stage, where = run.phase
    if stage == "cell" and isinstance(where, int) and where not in progress.killed_cells:
        progress.killed_cells[where] = (kind, f"code cell {where + 1} {what}")
        progress.note(f"code cell {where + 1} {what}; it was skipped on a rerun")
        return True
    if stage == "exercise" and where in remaining:
        outcomes = progress.outcomes[where]
        case_index = next((k for k, o in enumerate(outcomes) if o is None), None)
        if case_index is not None:
            case_name = plan.cases[where][case_index].name
            outcomes[case_index] = Outcome(kind, message=what)
            _fill(outcomes, Outcome(NOT_RUN))
            progress.exercise_notes[where] = f"Case '{case_name}' {what}."
        remaining.remove(where)
        return True
    # Died before any cell, or between steps: nothing to skip, nothing to retry.
    plain_crash = kind == CRASH and run.stopped_for is None
    reason = f"the notebook's process {run.exit_description if plain_crash else what}"
    if stage == "startup" and run.output_tail.strip():
        reason += f" while starting: {_scrub(run.output_tail.strip().splitlines()[-1])[:200]}"
    progress.note(reason)
    for i in remaining:
        _fill(progress.outcomes[i], Outcome(kind, message=what))
        progress.exercise_notes[i] = reason[0].upper() + reason[1:] + "."
    return False


def _scrub(text: str) -> str:
    """Text from the student's process without the grader's folders (shown to students)."""
    import autodiff_lab

    folders = {
        tempfile.gettempdir(): "/tmp",
        str(Path(autodiff_lab.__file__).parent): "autodiff_lab",
        sys.prefix: "<python>",
        sys.base_prefix: "<python>",
        str(Path.cwd()): ".",
        str(Path.home()): "~",
    }
    for folder, short in sorted(folders.items(), key=lambda kv: -len(kv[0])):
        if len(folder) > 1:
            text = text.replace(folder, short)
    return text


def _fill(outcomes: list[Outcome | None], outcome: Outcome) -> None:
    for k, existing in enumerate(outcomes):
        if existing is None:
            outcomes[k] = outcome


def _absorb(events: list[dict], plan: Plan, progress: Progress, timeout: float) -> set[str]:
    """Record the answers a worker reported; return the exercises it completed.

    Events come from the student's process, so any shape may arrive: an event that does
    not fit is that case's failure (when it names one) or ignored, never a crash.
    """
    done: set[str] = set()
    for event in events:
        kind, ex_id, index = event.get("event"), event.get("id"), event.get("index")
        if kind == "cell_done":
            _note_cell(event, progress, timeout, len(plan.cells))
            continue
        if not isinstance(ex_id, str) or ex_id not in progress.outcomes:
            continue
        if kind in ("answer_missing", "exercise_done"):
            done.add(ex_id)
            if kind == "answer_missing":
                progress.missing.add(ex_id)
        elif kind == "case":
            outcomes = progress.outcomes[ex_id]
            if type(index) is not int or not 0 <= index < len(outcomes):
                continue
            if outcomes[index] is None:  # the first report counts
                outcomes[index] = _decode_outcome(event)
    return done


def _note_cell(event: dict, progress: Progress, timeout: float, cells: int) -> None:
    index, error = event.get("index"), event.get("error")
    if type(index) is not int or not error or not 0 <= index < cells:
        return
    if event.get("interrupted") is True:
        progress.interrupted_cells.add(index)
        note = f"code cell {index + 1} did not finish within {timeout:g} s; it was interrupted"
    else:
        note = f"code cell {index + 1} raised {_scrub(str(error))[:200]}"
    progress.note(note)


def _decode_outcome(event: dict) -> Outcome:
    kind = event.get("kind")
    message = _scrub(str(event.get("message") or ""))[:500]
    if kind == VALUE:
        try:
            return Outcome(VALUE, from_plain(event.get("value")))
        except Exception as exc:
            return Outcome(ERROR, message=f"the answer could not be decoded: {exc}"[:300])
    if kind in (NOT_IMPLEMENTED, ERROR, CRASH):
        return Outcome(kind, message=message)
    return Outcome(ERROR, message="malformed answer from the notebook's process")


def outcomes_in_child(
    exercise, cases: list, cells: list[str], timeout: float = 60.0
) -> list | None:
    """The practice ``check``'s outcomes for an own-code exercise in a student's kernel:
    ``cells`` (the kernel's ``In``, in the order they ran) chosen and run in a child where
    the library is switched off, as the batch grader does; None when the child found no
    answer of that name (it was made some way the cells do not show: check it in-process).
    """

    class Collect:
        def __init__(self) -> None:
            self.events: list[dict] = []

        def emit(self, **event) -> None:
            self.events.append(event)

    item = {
        "id": exercise.id, "answer": exercise.answer, "run": runner_spec(exercise),
        "cases": [to_plain(c.inputs) for c in cases], "own_code": switched_off(exercise),
    }  # fmt: skip
    collect = Collect()
    run_in_child(item, cells, {"timeout": timeout, "memory_mb": None}, collect, flags=("-P",))
    if any(e["event"] == "answer_missing" for e in collect.events):
        return None
    outcomes: list = [None] * len(cases)
    for event in collect.events:
        if event["event"] == "case" and outcomes[event["index"]] is None:
            outcomes[event["index"]] = _decode_outcome(event)
    return outcomes
