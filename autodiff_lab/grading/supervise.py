"""Running one worker process: start it (sandboxed), watch its events and clocks, end it.

The grader hands :func:`run_worker` a request (cells to run, exercises with their case
inputs) and gets back a :class:`WorkerRun`: the events the worker reported and how it
ended. Everything about processes lives here; nothing here judges an answer.

- **Channels are inherited file descriptors, never paths.** The request and the events
  are unnamed temporary files (no name on disk another process could open); the worker
  gets their descriptors and nothing else (``close_fds``). Events are JSON lines the
  worker appends; the grader reads them with ``pread`` as they grow, so a student's
  child holding the descriptor cannot make the grader wait.
- **Clocks.** The worker interrupts a cell itself after ``timeout`` seconds (an alarm
  raising ``KeyboardInterrupt``, like Jupyter's stop button) and the next cell runs. If
  the code swallows that, or an exercise runs past ``timeout``, or the whole notebook
  runs past its ``deadline`` (:func:`notebook_time_limit`), the grader kills the worker.
  The phase events that restart the per-step clock come from the student's process, so
  :class:`PhaseClock` takes them only forward through the plan, each step once: forging
  them buys no time beyond the notebook's own limit.
- **Limits** on tasks (processes and threads) and memory (what is held, not address
  space): measured by :mod:`~autodiff_lab.grading.accounting`, no cgroup.
- **Infrastructure failures** (a worker that could not start or never got ready) are
  told apart from the student's result: :attr:`WorkerRun.infrastructure_failure`.
- **Killing** ends the worker's session, every process carrying this run's token in its
  environment, and — in the sandbox — its whole PID namespace.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .accounting import (
    MEMORY_CHECK_SECONDS,
    TASK_CHECK_SECONDS,
    ProcessWatch,
    processes_with_token,
)
from .sandbox import Sandbox, seccomp_program

TOKEN_ENV = "AUTODIFF_LAB_GRADING_TOKEN"
STARTUP_TIMEOUT = 60.0  # importing numpy + IPython on a busy machine; not the student's time
INTERRUPT_GRACE = 2.0  # seconds a cell gets to stop after its alarm before the process is killed
MAX_EVENT_LOG_BYTES = 64 * 2**20  # read at most this much of a worker's events (its file cap)
MAX_LINE_BYTES = 17 * 2**20  # one event line: an answer is refused above 16 MB
POLL_SECONDS = 0.02
MAX_PROCESSES = 64  # tasks (processes and threads) one worker may have at once, in all
TASK_LIMIT_MARGIN = 8  # the kernel's RLIMIT_NPROC (sandbox) sits this far above the watch's
WATCH_NICENESS = -5  # a root grader's supervising threads (see _watch_first)
OUTPUT_TAIL_BYTES = 1500
WORKER_MODULE = "autodiff_lab.grading.worker"


@dataclass
class WorkerRun:
    """What one worker process reported before it finished, died or was stopped."""

    events: list[dict]
    finished: bool
    stopped_for: str | None  # "timeout", "deadline", "stopped", "processes", "memory", None
    phase: tuple[str, Any]  # ("startup"|"cell"|"exercise"|"between", index or id)
    exit_description: str
    output_tail: str  # the end of its stdout/stderr, control characters shown as \x1b
    infrastructure_failure: str | None = None
    """Why the GRADER could not run this worker, or None: not the student's result.

    Set when no student code ran: the worker could not be started (fork/exec failed, e.g.
    EAGAIN when the machine's tasks are exhausted; the sandbox failed to start), or it
    ended, or was stopped, before reporting ``ready`` (the worker reports ``ready`` after
    its own imports and before the first cell, so nothing of the submission has run by
    then). The caller should run the submission again rather than record this run; since
    a lasting cause (a ``--memory`` too small to import IPython, a broken environment)
    fails every time, retry a bounded number of times and then record it as the crash it
    is. Never set for Ctrl-C (``stopped_for == "stopped"``).
    """
    malformed_events: int = 0  # lines on the channel that were not a well-formed event


_EXERCISE_KINDS = ("exercise", "exercise_done", "answer_missing")
_OPTIONAL_STR = (str, type(None))


class EventReader:
    """Reads the JSON-lines events as the file grows, keeping only events that can matter.

    The file is the student's process's to write, so it may hold anything: malformed
    lines, unknown kinds, fields of any type, cells or exercises that do not exist, the
    same event a million times. Kept: known kinds naming a real cell (``0 <= index <
    cells``) or a requested exercise (and case), each distinct (kind, id, index) once, the
    first, rebuilt with only the fields of its kind, each of its type (``error`` and
    ``message`` strings or None, ``interrupted`` a bool, ``kind`` a string; ``value`` is
    plain JSON, decoded by the grader). Anything else is counted in ``malformed`` and
    dropped. So what the grader holds is bounded by the notebook's size, never by what the
    process wrote; at most :data:`MAX_EVENT_LOG_BYTES` are read at all.
    """

    def __init__(self, fd: int, cells: int = 0, cases: dict[str, int] | None = None) -> None:
        self.fd = fd
        self.consumed = 0
        self.partial = b""
        self.cells = cells
        self.cases = cases or {}
        self.seen: set[tuple] = set()
        self.malformed = 0

    def _exercise(self, ex_id: Any) -> bool:
        return type(ex_id) is str and ex_id in self.cases

    def _clean(self, event: Any) -> dict | None:
        """The event with only its kind's fields, or None when it is not well formed."""
        if type(event) is not dict:
            return None
        kind, ex_id, index = event.get("event"), event.get("id"), event.get("index")
        if kind in ("ready", "finished"):
            return {"event": kind}
        if kind == "started":
            pid = event.get("pid")
            return {"event": kind, "pid": pid if type(pid) is int else None}
        if kind in ("cell", "cell_done"):
            if type(index) is not int or not 0 <= index < self.cells:
                return None
            if kind == "cell":
                return {"event": kind, "index": index}
            error, interrupted = event.get("error"), event.get("interrupted", False)
            if not isinstance(error, _OPTIONAL_STR) or type(interrupted) is not bool:
                return None
            return {"event": kind, "index": index, "error": error, "interrupted": interrupted}
        if kind in _EXERCISE_KINDS:
            return {"event": kind, "id": ex_id} if self._exercise(ex_id) else None
        if kind == "case":
            if not self._exercise(ex_id) or type(index) is not int:
                return None
            outcome, message = event.get("kind"), event.get("message")
            if not 0 <= index < self.cases[str(ex_id)] or type(outcome) is not str:
                return None
            if not isinstance(message, _OPTIONAL_STR):
                return None
            return {
                "event": kind, "id": ex_id, "index": index, "kind": outcome,
                "value": event.get("value"), "message": message,
            }  # fmt: skip
        return None

    def _keep(self, event: Any) -> dict | None:
        clean = self._clean(event)
        if clean is None:
            self.malformed += 1
            return None
        key = (clean["event"], clean.get("id"), clean.get("index"))
        if key in self.seen:
            return None
        self.seen.add(key)
        return clean

    def read_new(self) -> list[dict]:
        events = []
        while self.consumed < MAX_EVENT_LOG_BYTES:
            chunk = os.pread(
                self.fd, min(2**20, MAX_EVENT_LOG_BYTES - self.consumed), self.consumed
            )
            if not chunk:
                break
            self.consumed += len(chunk)
            lines = (self.partial + chunk).split(b"\n")
            self.partial = lines.pop()
            if len(self.partial) > MAX_LINE_BYTES:  # a line longer than any answer: drop it
                self.partial = b""
                self.malformed += 1
            for line in lines:
                try:
                    event = json.loads(line)
                except (ValueError, RecursionError):
                    self.malformed += 1
                    continue
                kept = self._keep(event)
                if kept is not None:
                    events.append(kept)
        return events


class PhaseClock:
    """Which step the worker is in and since when, moved ONLY forward through the plan.

    Phase events arrive on the student's own channel, so the student can forge them. The
    order is fixed: startup, ready, then each cell (start, done) by index, then each
    requested exercise (start, done) in the request's order. An event is taken only if it
    lies after the current step, and each once (the reader drops repeats), so forged
    events can restart the clock at most once per step of the notebook's own plan: a
    forger gets no more time than an honest notebook whose every step ran to its limit —
    the per-notebook limit of :func:`notebook_time_limit` — and a forged step is blamed
    for what happens next.
    """

    def __init__(self, exercise_order: list[str], now: float) -> None:
        self.order = {ex_id: k for k, ex_id in enumerate(exercise_order)}
        self.position: tuple = (0,)
        self.phase: tuple[str, Any] = ("startup", None)
        self.started = now
        self.ready = False
        self.startup_seconds = 0.0  # from start to "ready": the grader's time, not the student's

    def _position(self, event: dict) -> tuple | None:
        kind = event["event"]
        if kind == "ready":
            return (1,)
        if kind in ("cell", "cell_done"):
            return (2, event["index"], kind == "cell_done")
        if kind in _EXERCISE_KINDS:
            return (3, self.order[event["id"]], kind != "exercise")
        return None

    def advance(self, event: dict, now: float) -> None:
        position = self._position(event)
        if position is None or position <= self.position:
            return
        self.position, self.started = position, now
        kind = event["event"]
        if kind == "ready":
            self.ready, self.startup_seconds = True, now - self.started
        if kind == "cell":
            self.phase = ("cell", event["index"])
        elif kind == "exercise":
            self.phase = ("exercise", event["id"])
        else:
            self.phase = ("between", None)


def notebook_time_limit(timeout: float, cells: int, exercises: int, cap: float) -> float:
    """Seconds of the student's time one notebook may take in all, from its plan::

        (2 * cells + exercises) * (timeout + INTERRUPT_GRACE), at most cap

    ``cells``: the code cells planned to run; ``exercises``: the exercises requested (each
    exercise's cases share one ``timeout``); ``cap``: the lecturer's
    ``--notebook-timeout``. Every cell may run to its limit twice (a rerun after a stopped
    step runs the cells again) and every exercise once (a stopped one is not retried);
    a notebook that sleeps just under the limit in every cell, or forges events to
    restart the clock, is stopped there. The student's time: :func:`run_worker` leaves
    out each worker's start-up (up to "ready", at most :data:`STARTUP_TIMEOUT`), which
    is the grader's.
    """
    steps = 2 * max(0, cells) + max(0, exercises)
    return min(cap, steps * (timeout + INTERRUPT_GRACE))


def _unnamed_file(data: bytes = b"", *, append: bool = False) -> int:
    """A descriptor of a file with no name (so no other process can open it by path)."""
    try:
        fd = os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR, 0o600)
    except (AttributeError, OSError):  # no O_TMPFILE here: a named file, unlinked at once
        fd, name = tempfile.mkstemp(prefix="autodiff-lab-")
        os.unlink(name)
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    if append:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return fd


def worker_environment(scratch_home: str, token: str) -> dict[str, str]:
    """A small, explicit environment: nothing of the grader's leaks into the worker."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": scratch_home,
        "LANG": "C.UTF-8",
        "AUTODIFF_LAB_GRADING": "1",
        TOKEN_ENV: token,
        "MPLBACKEND": "Agg",
        "IPYTHONDIR": f"{scratch_home}/.ipython",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONSAFEPATH": "1",  # the notebook's folder never shadows the standard library
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    if os.environ.get("PYTHONPATH"):  # an uninstalled checkout of the package
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def kill_everything(proc: subprocess.Popen, token: str) -> None:
    """Kill the worker's session and every process that inherited this run's token."""
    for attempt in range(3):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        survivors = processes_with_token(token, TOKEN_ENV)
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


def describe_exit(returncode: int | None) -> str:
    """``"exited with code 1"``, ``"was killed by SIGKILL"``…"""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def _shown(char: str) -> str:
    if char in "\n\t" or (char.isprintable() and char != "\x7f"):
        return char
    return f"\\x{ord(char):02x}" if ord(char) < 256 else f"\\u{ord(char):04x}"


def _printable(text: str) -> str:
    """``text`` with control characters (but newline and tab) shown as ``\\x1b``-style
    escapes: the worker's output never reaches a terminal raw."""
    return "".join(_shown(char) for char in text)


def _not_started(exc: OSError) -> WorkerRun:
    reason = f"the worker could not be started ({type(exc).__name__}: {exc})"
    return WorkerRun(
        events=[], finished=False, stopped_for=None, phase=("startup", None),
        exit_description="could not be started", output_tail="",
        infrastructure_failure=reason,
    )  # fmt: skip


def _startup_failure(stopped_for: str | None, exit_description: str, tail: str) -> str:
    """Why a worker ended before it was ready (so before any student code ran)."""
    if stopped_for == "timeout":
        why = f"did not get ready within {STARTUP_TIMEOUT:g} s"
    elif stopped_for in ("memory", "processes", "deadline"):
        why = f"passed its {stopped_for} limit before it was ready"
    else:
        why = f"{exit_description} before it was ready"
    last = tail.strip().splitlines()[-1][:200] if tail.strip() else ""
    return f"the worker {why}" + (f": {last}" if last else "")


def _watch_first() -> int | None:
    """As root, give this (supervising) thread a higher CPU priority than the workers'.

    A root grader's workers are exempt from ``RLIMIT_NPROC``, so only this thread's watch
    stops a thread bomb: it must not wait behind the bomb for the CPU. Returns the
    niceness to restore, or None when nothing was changed.
    """
    if not hasattr(os, "setpriority") or os.geteuid() != 0:
        return None
    thread = threading.get_native_id()
    try:
        before = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(before, WATCH_NICENESS))
    except OSError:
        return None
    return before


def _restore_priority(before: int | None) -> None:
    if before is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), before)
        except OSError:
            pass


def run_worker(
    request: dict,
    *,
    sandbox: Sandbox,
    scratch: Path,
    keep: list[Path],
    hide: list[Path],
    timeout: float,
    deadline: float,
    stop: threading.Event | None = None,
    python: str = sys.executable,
    max_processes: int = MAX_PROCESSES,
    memory_mb: float = float("inf"),
) -> WorkerRun:
    """Start one worker on ``request`` and supervise it until it finishes or is stopped.

    ``deadline`` is a ``time.monotonic()`` instant: the notebook's total time runs out
    then, whatever the phase (see :func:`notebook_time_limit`), pushed back by this
    worker's start-up (the grader's time, bounded by :data:`STARTUP_TIMEOUT`). ``stop``
    set (Ctrl-C) kills the worker at once. ``max_processes`` counts processes and threads;
    ``memory_mb`` applies to the memory of :mod:`~autodiff_lab.grading.accounting`.
    A worker that could not run at all says so in ``infrastructure_failure``.
    """
    if sandbox.isolated:  # the kernel's own count, per user namespace: above the watch's
        request = {**request, "max_tasks": max_processes + TASK_LIMIT_MARGIN}
    request_fd = _unnamed_file(json.dumps(request).encode())
    events_fd = _unnamed_file(append=True)
    output_fd = _unnamed_file(append=True)
    exercise_order = [e["id"] for e in request.get("exercises", [])]
    cases = {e["id"]: len(e["cases"]) for e in request.get("exercises", [])}
    reader = EventReader(events_fd, len(request.get("cells", [])), cases)
    token = secrets.token_hex(16)
    argv = [python, "-P", "-s", "-m", WORKER_MODULE, str(request_fd), str(events_fd)]
    program = seccomp_program() if sandbox.isolated else None
    seccomp_fd = _unnamed_file(program) if program else None
    argv, cwd = sandbox.command(argv, scratch=scratch, keep=keep, hide=hide, seccomp_fd=seccomp_fd)
    passed = (request_fd, events_fd) if seccomp_fd is None else (request_fd, events_fd, seccomp_fd)
    env = worker_environment(str(cwd), token)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output_fd, stderr=output_fd,
            cwd=scratch, env=env, start_new_session=True, close_fds=True, pass_fds=passed,
        )  # fmt: skip
    except OSError as exc:  # fork or exec failed (EAGAIN, ENOMEM, no such program)
        os.close(events_fd)
        os.close(output_fd)
        return _not_started(exc)
    finally:
        os.close(request_fd)  # read by now, or never
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    priority = _watch_first()
    events: list[dict] = []
    clock = PhaseClock(exercise_order, time.monotonic())
    finished = False
    stopped_for = None
    watch = ProcessWatch(proc.pid, token, TOKEN_ENV, sandbox.isolated)
    next_tasks = next_memory = time.monotonic()
    try:
        while True:
            exited = proc.poll() is not None
            for event in reader.read_new():
                events.append(event)
                clock.advance(event, time.monotonic())
                finished = finished or event["event"] == "finished"
            if exited or finished:
                break
            now = time.monotonic()
            # A cell's own alarm interrupts it at `timeout`; the grader steps in after a grace.
            limit = {"startup": STARTUP_TIMEOUT, "cell": timeout + INTERRUPT_GRACE}
            if stop is not None and stop.is_set():
                stopped_for = "stopped"
                break
            if clock.ready and now > deadline + clock.startup_seconds:
                stopped_for = "deadline"
                break
            if now - clock.started > limit.get(clock.phase[0], timeout):
                stopped_for = "timeout"
                break
            if now >= next_memory:
                next_memory, next_tasks = now + MEMORY_CHECK_SECONDS, now + TASK_CHECK_SECONDS
                usage = watch.usage()
                if usage.tasks > max_processes:
                    stopped_for = "processes"
                elif usage.memory > memory_mb * 2**20:
                    stopped_for = "memory"
            elif now >= next_tasks:
                next_tasks = now + TASK_CHECK_SECONDS
                if watch.tasks() > max_processes:
                    stopped_for = "processes"
            if stopped_for:
                break
            time.sleep(POLL_SECONDS)
    finally:
        kill_everything(proc, token)
        _restore_priority(priority)
    for event in reader.read_new():  # whatever arrived between the last read and the kill
        events.append(event)
        clock.advance(event, time.monotonic())
        finished = finished or event["event"] == "finished"
    size = os.fstat(output_fd).st_size
    tail = os.pread(output_fd, OUTPUT_TAIL_BYTES, max(0, size - OUTPUT_TAIL_BYTES))
    os.close(events_fd)
    os.close(output_fd)
    output_tail = _printable(tail.decode("utf-8", "replace"))
    exit_description = describe_exit(proc.returncode)
    failure = None
    if not clock.ready and stopped_for != "stopped":
        failure = _startup_failure(stopped_for, exit_description, output_tail)
    return WorkerRun(
        events=events,
        finished=finished,
        stopped_for=stopped_for,
        phase=clock.phase,
        exit_description=exit_description,
        output_tail=output_tail,
        infrastructure_failure=failure,
        malformed_events=reader.malformed,
    )
