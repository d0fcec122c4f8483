"""Grading submitted notebooks: each in its own process, every verdict computed here.

Design
------
* **One fresh process per submission** (:mod:`autodiff_lab.grading.worker`), a plain
  ``python`` subprocess that runs the notebook's code cells with IPython's shell — not a
  Jupyter kernel. A kernel would add ZeroMQ sockets, a heartbeat and a kernel manager
  between the grader and the code without buying anything for grading; a plain process is
  quicker to start, its limits (``setrlimit``) and its session are ours to set, and it
  talks to the grader through *files*, never pipes, so a child the student leaves behind
  holding stdout cannot make the grader wait.
* **The verdict is computed outside the student's process.** The grader draws the cases
  (a fresh random seed per submission, recorded in the gradebook), sends their inputs as
  JSON, and receives plain-data answers as JSON (never pickles). The reference values and
  the comparison run here. Monkeypatching ``check`` or ``numpy``, or printing "PASS",
  changes nothing but the student's own answers.
* **Limits.** A per-cell and per-exercise timeout (the clock restarts at each cell and each
  exercise), an address-space limit (``RLIMIT_AS``), a file-size limit on everything the
  process writes, and output beyond 1 MB dropped. A cell that runs too long is interrupted
  (``KeyboardInterrupt``, like Jupyter's stop button) and the next cell runs. When an
  exercise runs too long, an interrupt is swallowed, or the code kills its own process
  (``os._exit``, a segfault), the grader kills the whole process session — plus any
  process carrying this run's token in its environment, which finds children that started
  a session of their own — records what happened, and starts a new process that skips
  that cell or exercise, so the rest is still graded.
* **Cases and answers.** Each exercise's cases run in one go with its timeout; points are
  per case. The notebook's own ``check`` calls do nothing while grading.

Limits of the sandbox, stated plainly: this is not a security boundary against a
determined attacker (the code runs as the grader's user and can read files, use the
network, or kill the grader); it makes honest mistakes and the usual tricks harmless.
Run the grader in a container or as a throwaway user for untrusted classes.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import registry
from .build import CHECK_CALL_RE, EXERCISE_COMMENT_RE, code_sources, read_notebook, sha256_file
from .checking import case_seed
from .plaindata import from_plain, to_plain
from .scoring import (
    CRASH,
    ERROR,
    NOT_IMPLEMENTED,
    NOT_RUN,
    TIMEOUT,
    VALUE,
    ExerciseResult,
    Outcome,
    judge_exercise,
)
from .spec import Exercise

TOKEN_ENV = "AUTODIFF_LAB_GRADING_TOKEN"
STUB_RE = re.compile(r"NotImplementedError\(\s*[\"']Exercise (\d+\.\d+):")
CHAPTER_FILE_RE = re.compile(r"^(\d+)_")
# The references ship with the package, so a notebook could call them instead of answering.
INTERNALS_RE = re.compile(r"\.reference\b|grading\.exercises|grading\.registry|import registry")
DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY_MB = 2048.0
OUTPUT_LIMIT_MB = 64.0
STARTUP_TIMEOUT = 60.0  # importing numpy + IPython on a busy machine; not the student's time
MAX_EVENT_LOG_BYTES = 128 * 2**20
POLL_SECONDS = 0.02
INTERRUPT_GRACE = 2.0  # seconds a cell gets to stop after SIGINT before the process is killed


@dataclass
class Submission:
    """One notebook to grade and whose it is."""

    path: Path
    student: str

    @property
    def key(self) -> str:
        return str(self.path.resolve())


@dataclass
class SubmissionResult:
    """Every exercise's verdict for one notebook."""

    submission: Submission
    exercises: list[ExerciseResult]
    sha256: str
    seed: int
    graded_at: str
    duration_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)


# --- which notebooks, whose, which exercises ---------------------------------------------


def collect_submissions(paths: list[str | Path]) -> list[Submission]:
    """Notebooks named on the command line, or found (recursively) in folders.

    Whose: in a folder given on the command line, ``<folder>/<student>/….ipynb`` belongs to
    ``<student>`` and ``<folder>/<name>.ipynb`` to ``<name>``; a file named directly belongs
    to its folder when it carries a course notebook name (``03_….ipynb``), else to its stem.
    """
    found: dict[str, Submission] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for nb in sorted(path.rglob("*.ipynb")):
                if ".ipynb_checkpoints" in nb.parts or ".new." in nb.name or ".backup-" in nb.name:
                    continue
                rel = nb.relative_to(path)
                student = rel.parts[0] if len(rel.parts) > 1 else nb.stem
                found.setdefault(str(nb.resolve()), Submission(nb, student))
        elif path.is_file():
            named_by_course = CHAPTER_FILE_RE.match(path.name) and path.resolve().parent.name
            student = path.resolve().parent.name if named_by_course else path.stem
            found.setdefault(str(path.resolve()), Submission(path, student))
        else:
            raise FileNotFoundError(f"no such notebook or folder: {raw}")
    return list(found.values())


def exercises_in(nb: dict, path: Path) -> tuple[list[Exercise], list[str]]:
    """The exercises a notebook answers: its chapter's (from ``NN_`` in the file name) plus
    every id it mentions in ``check("N.M", …)``, ``# Exercise N.M`` or a stub message."""
    ids: set[str] = set()
    notes: list[str] = []
    text = "\n".join(code_sources(nb))
    for pattern in (CHECK_CALL_RE, EXERCISE_COMMENT_RE, STUB_RE):
        ids.update(pattern.findall(text))
    chapter = CHAPTER_FILE_RE.match(path.name)
    known = {e.id: e for e in registry.all_exercises()}
    if chapter:
        ids.update(i for i, e in known.items() if e.chapter == int(chapter.group(1)))
    for unknown in sorted(ids - set(known)):
        notes.append(f"the notebook mentions exercise {unknown}, which does not exist")
    if INTERNALS_RE.search(text):
        notes.append("the notebook uses the grader's internals (registry or references): read it")
    chosen = sorted((known[i] for i in ids if i in known), key=lambda e: e.sort_key)
    return chosen, notes


# --- running the student's process ---------------------------------------------------------


@dataclass
class WorkerRun:
    """What one worker process reported before it finished, died or was stopped."""

    events: list[dict]
    finished: bool
    stopped_for: str | None  # "timeout" when the grader killed it, else None
    interrupted_cells: list[int]  # cells stopped by an interrupt (the run went on after them)
    phase: tuple[str, Any]  # ("startup"|"cell"|"exercise"|"between", index or id)
    exit_description: str
    output_tail: str


class _EventReader:
    """Reads the JSON-lines events file as it grows; ignores malformed lines.

    The file is opened once, before the worker starts, so renaming or deleting it from the
    notebook cannot hide the events.
    """

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")  # closed by close()
        self.consumed = 0
        self.partial = b""

    def read_new(self) -> list[dict]:
        if self.consumed >= MAX_EVENT_LOG_BYTES:
            return []
        chunk = self.file.read(MAX_EVENT_LOG_BYTES - self.consumed)
        self.consumed += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict) and isinstance(event.get("event"), str):
                events.append(event)
        return events

    def close(self) -> None:
        self.file.close()


def _tail(path: Path, n: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_everything(proc: subprocess.Popen, token: str) -> None:
    """Kill the worker's session and every process that inherited this run's token."""
    for attempt in range(3):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        survivors = _processes_with_token(token)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not survivors and attempt:
            break
        time.sleep(0.05)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _processes_with_token(token: str) -> list[int]:
    """PIDs whose environment carries ``TOKEN_ENV=token`` (Linux /proc; elsewhere none)."""
    needle = f"{TOKEN_ENV}={token}".encode()
    pids = []
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return pids
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def run_worker(
    request: dict, *, cwd: Path, timeout: float, workdir: Path, python: str = sys.executable
) -> WorkerRun:
    """Start one worker on ``request`` and supervise it until it finishes or is stopped."""
    workdir.mkdir(parents=True, exist_ok=True)
    request_path, events_path, output_path = (
        workdir / "request.json",
        workdir / "events.jsonl",
        workdir / "output.txt",
    )
    request_path.write_text(json.dumps(request))
    events_path.write_bytes(b"")
    reader = _EventReader(events_path)
    token = secrets.token_hex(16)
    extra = [*registry.extra_modules(), os.environ.get(registry.ENV_EXTRA_MODULES, "")]
    env = dict(os.environ)
    env.update(
        {
            "AUTODIFF_LAB_GRADING": "1",
            TOKEN_ENV: token,
            registry.ENV_EXTRA_MODULES: os.pathsep.join(filter(None, extra)),
            "MPLBACKEND": "Agg",
            "IPYTHONDIR": str(workdir / "ipython"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    n_steps = len(request["cells"]) + len(request["exercises"]) + 1
    budget = STARTUP_TIMEOUT + timeout * n_steps  # bounds even a process forging events
    with open(output_path, "wb") as output:
        proc = subprocess.Popen(
            [python, "-m", "autodiff_lab.grading.worker", str(request_path), str(events_path)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    events: list[dict] = []
    phase: tuple[str, Any] = ("startup", None)
    started = phase_started = time.monotonic()
    finished = False
    stopped_for = None
    interrupted_at: float | None = None  # when the current cell was sent SIGINT
    interrupted_cells: list[int] = []
    try:
        while True:
            exited = proc.poll() is not None
            for event in reader.read_new():
                events.append(event)
                kind = event["event"]
                if kind in ("cell", "exercise"):
                    phase = (kind, event.get("index", event.get("id")))
                    phase_started, interrupted_at = time.monotonic(), None
                elif kind in ("ready", "cell_done", "exercise_done", "answer_missing"):
                    phase = ("between", None)
                    phase_started, interrupted_at = time.monotonic(), None
                elif kind == "finished":
                    finished = True
            if exited or finished:
                break
            now = time.monotonic()
            limit = STARTUP_TIMEOUT if phase[0] == "startup" else timeout
            if now - started > budget:
                stopped_for = "timeout"
                break
            if now - phase_started > limit:
                # A cell that runs too long is interrupted, as in Jupyter: KeyboardInterrupt
                # ends it and the next cell runs in the same process. If the code swallows
                # the interrupt, the process is killed after a grace period.
                if phase[0] == "cell" and interrupted_at is None:
                    interrupted_at = now
                    interrupted_cells.append(phase[1])
                    try:
                        os.kill(proc.pid, signal.SIGINT)
                    except ProcessLookupError:
                        pass
                elif interrupted_at is None or now - interrupted_at > INTERRUPT_GRACE:
                    stopped_for = "timeout"
                    break
            time.sleep(POLL_SECONDS)
    finally:
        _kill_everything(proc, token)
    for event in reader.read_new():  # whatever arrived between the last read and the kill
        events.append(event)
        finished = finished or event["event"] == "finished"
    reader.close()
    return WorkerRun(
        events=events,
        finished=finished,
        stopped_for=stopped_for,
        interrupted_cells=interrupted_cells,
        phase=phase,
        exit_description=_describe_exit(proc.returncode),
        output_tail=_tail(output_path),
    )


# --- grading one notebook ----------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def grade_submission(
    submission: Submission,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: float = DEFAULT_MEMORY_MB,
    seed: int | None = None,
    python: str = sys.executable,
) -> SubmissionResult:
    """Grade one notebook (see the module docstring for how)."""
    started = time.monotonic()
    path = submission.path
    seed = secrets.randbits(31) if seed is None else int(seed)
    sha = sha256_file(path)
    try:
        nb = read_notebook(path)
    except Exception as exc:  # not JSON, not a notebook, …
        return SubmissionResult(
            submission, [], sha, seed, _now(), time.monotonic() - started,
            [f"could not read the notebook: {type(exc).__name__}: {exc}"],
        )  # fmt: skip
    exercises, notes = exercises_in(nb, path)
    if not exercises:
        notes.append("no exercises found in this notebook")
        return SubmissionResult(
            submission, [], sha, seed, _now(), time.monotonic() - started, notes
        )

    cells = code_sources(nb)
    plan: dict[str, tuple[Exercise, list, list]] = {}
    for exercise in exercises:
        cases = exercise.cases(np.random.default_rng(case_seed(exercise.id, seed)))
        expected = [exercise.reference(copy.deepcopy(c.inputs)) for c in cases]
        plan[exercise.id] = (exercise, cases, expected)
    outcomes: dict[str, list[Outcome | None]] = {i: [None] * len(p[1]) for i, p in plan.items()}
    exercise_notes: dict[str, str] = {}
    missing: set[str] = set()
    killed_cells: dict[int, tuple[str, str]] = {}  # cell index -> (outcome kind, note)
    # Timed out and interrupted; a rerun runs them again (with the same timeout), because
    # they may define things before their endless part, as they did the first time.
    interrupted_cells: set[int] = set()
    remaining = [e.id for e in exercises]
    workdir = Path(tempfile.mkdtemp(prefix="autodiff-lab-grade-"))
    try:
        attempt = 0
        while remaining:
            attempt += 1
            request = {
                "cells": cells,
                "skip_cells": sorted(killed_cells),
                "exercises": [
                    {"id": i, "cases": [to_plain(c.inputs) for c in plan[i][1]]} for i in remaining
                ],
                "memory_mb": memory_mb,
                "output_mb": OUTPUT_LIMIT_MB,
            }
            run = run_worker(
                request, cwd=path.resolve().parent, timeout=timeout,
                workdir=workdir / f"run{attempt}", python=python,
            )  # fmt: skip
            interrupted = {
                i: f"code cell {i + 1} did not finish within {timeout:g} s"
                for i in run.interrupted_cells
            }
            interrupted_cells.update(interrupted)
            done = _absorb(run.events, plan, outcomes, missing, notes, interrupted)
            remaining = [i for i in remaining if i not in done]
            if run.finished or not remaining:
                for i in remaining:  # "finished" but silent about an exercise: forged or lost
                    _fill(outcomes[i], Outcome(CRASH, message="no answer was received"))
                break
            kind = TIMEOUT if run.stopped_for == "timeout" else CRASH
            what = (
                f"did not finish within {timeout:g} s"
                if kind == TIMEOUT
                else f"stopped the process, which {run.exit_description}"
            )
            stage, where = run.phase
            if stage == "cell" and isinstance(where, int) and where not in killed_cells:
                killed_cells[where] = (kind, f"code cell {where + 1} {what}")
                notes.append(f"code cell {where + 1} {what}; it was skipped on a rerun")
            elif stage == "exercise" and where in remaining:
                case_index = next((k for k, o in enumerate(outcomes[where]) if o is None), None)
                if case_index is not None:
                    case_name = plan[where][1][case_index].name
                    outcomes[where][case_index] = Outcome(kind, message=what)
                    _fill(outcomes[where], Outcome(NOT_RUN))
                    exercise_notes[where] = f"Case '{case_name}' {what}."
                remaining.remove(where)
            else:  # died before any cell, or between steps: nothing to skip, nothing to retry
                reason = f"the grading process {what}"
                if stage == "startup" and run.output_tail.strip():
                    reason += f": {run.output_tail.strip().splitlines()[-1][:200]}"
                notes.append(reason)
                for i in remaining:
                    _fill(outcomes[i], Outcome(kind, message=what))
                    exercise_notes[i] = reason[0].upper() + reason[1:] + "."
                break
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    # Cells that were stopped: an answer they mention may never have been defined.
    stopped_cells = {
        **{i: (TIMEOUT, f"code cell {i + 1} did not finish within {timeout:g} s")
           for i in interrupted_cells},
        **killed_cells,
    }  # fmt: skip
    results = []
    for exercise in exercises:
        _, cases, expected = plan[exercise.id]
        outs = outcomes[exercise.id]
        note = exercise_notes.get(exercise.id, "")
        if exercise.id in missing:
            # Blame a stopped cell only if it mentions the answer's name (it may define it).
            kind, why = next(
                (fate for i, fate in sorted(stopped_cells.items()) if exercise.answer in cells[i]),
                (NOT_IMPLEMENTED, ""),
            )
            note = f"`{exercise.answer}` is not defined in the notebook" + (
                f" ({why})." if why else "."
            )
            outs = [Outcome(kind, message=note if kind != NOT_IMPLEMENTED else "") for _ in cases]
        outs = [
            o if o is not None else Outcome(CRASH, message="no answer was received") for o in outs
        ]
        results.append(judge_exercise(exercise, cases, outs, expected, attempt=1, note=note))
    return SubmissionResult(
        submission, results, sha, seed, _now(), time.monotonic() - started, notes
    )


def _fill(outcomes: list[Outcome | None], outcome: Outcome) -> None:
    for k, existing in enumerate(outcomes):
        if existing is None:
            outcomes[k] = outcome


def _absorb(events, plan, outcomes, missing, notes, interrupted) -> set[str]:
    """Record the answers reported by a worker; return the exercises it completed."""
    done: set[str] = set()
    for event in events:
        kind, ex_id = event["event"], event.get("id")
        if kind == "cell_done" and event.get("error"):
            index = event.get("index")
            if isinstance(index, int):
                note = f"code cell {index + 1} raised {str(event['error'])[:200]}"
                if index in interrupted:
                    note = f"{interrupted[index]}; it was interrupted"
                if note not in notes:
                    notes.append(note)
        if ex_id not in plan:
            continue
        if kind == "answer_missing":
            missing.add(ex_id)
            done.add(ex_id)
        elif kind == "exercise_done":
            done.add(ex_id)
        elif kind == "case":
            index = event.get("index")
            if not isinstance(index, int) or not 0 <= index < len(outcomes[ex_id]):
                continue
            if outcomes[ex_id][index] is not None:
                continue  # the first report counts
            outcomes[ex_id][index] = _decode_outcome(event)
    return done


def _decode_outcome(event: dict) -> Outcome:
    kind = event.get("kind")
    message = str(event.get("message") or "")[:500]
    if kind == VALUE:
        try:
            return Outcome(VALUE, from_plain(event.get("value")))
        except Exception as exc:
            return Outcome(ERROR, message=f"the answer could not be decoded: {exc}")
    if kind in (NOT_IMPLEMENTED, ERROR, CRASH):
        return Outcome(kind, message=message)
    return Outcome(ERROR, message="malformed answer")


# --- a batch -----------------------------------------------------------------------------


@dataclass
class BatchSummary:
    """What a batch did: graded now, skipped (already in the gradebook), grader errors."""

    submissions: list[Submission]
    graded: list[SubmissionResult]
    skipped: list[Submission]
    errors: list[tuple[Submission, str]]


def grade_batch(
    submissions: list[Submission],
    gradebook,
    *,
    jobs: int = 1,
    regrade: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: float = DEFAULT_MEMORY_MB,
    seed: int | None = None,
    progress: bool | None = None,
    on_graded=None,
) -> BatchSummary:
    """Grade many notebooks, ``jobs`` at a time, recording each in ``gradebook`` as it ends.

    Parallelism: each job is a thread that supervises one student process; the work runs
    in those processes, so threads are enough here and keep every gradebook write in this
    thread. A submission whose grading fails inside the grader itself is reported and left
    ungraded (a rerun retries it); it never stops the batch.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    registry.all_exercises()  # import every exercise module once, before any thread starts
    todo, skipped = [], []
    for sub in submissions:
        if not regrade and gradebook.is_graded(sub.key, sha256_file(sub.path)):
            skipped.append(sub)
        else:
            todo.append(sub)
    summary = BatchSummary(submissions, [], skipped, [])
    if not todo:
        return summary
    pool = ThreadPoolExecutor(max_workers=max(1, int(jobs)))
    try:
        futures = {
            pool.submit(grade_submission, sub, timeout=timeout, memory_mb=memory_mb, seed=seed): sub
            for sub in todo
        }
        # progress=None: a bar only when stderr is a terminal (tqdm's disable=None).
        disable = None if progress is None else not progress
        bar = tqdm(
            as_completed(futures), total=len(futures), desc="grading", unit="notebook",
            disable=disable,
        )  # fmt: skip
        for future in bar:
            sub = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # a grader bug or a broken exercise: report, go on
                summary.errors.append((sub, f"{type(exc).__name__}: {exc}"))
                continue
            gradebook.record(result)
            summary.graded.append(result)
            if on_graded is not None:
                on_graded(result)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return summary
