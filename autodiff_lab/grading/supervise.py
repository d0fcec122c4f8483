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
  runs past its ``deadline``, the grader kills the worker.
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

from .sandbox import Sandbox

TOKEN_ENV = "AUTODIFF_LAB_GRADING_TOKEN"
STARTUP_TIMEOUT = 60.0  # importing numpy + IPython on a busy machine; not the student's time
INTERRUPT_GRACE = 2.0  # seconds a cell gets to stop after its alarm before the process is killed
MAX_EVENT_LOG_BYTES = 64 * 2**20  # read at most this much of a worker's events (its file cap)
MAX_LINE_BYTES = 17 * 2**20  # one event line: an answer is refused above 16 MB
POLL_SECONDS = 0.02
WATCH_SECONDS = 0.25  # how often the worker's processes are counted and measured
MAX_PROCESSES = 64  # processes one worker may have at once (all its descendants)
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
    output_tail: str


class EventReader:
    """Reads the JSON-lines events as the file grows, keeping only events that can matter.

    The file is the student's process's to write, so it may hold anything: malformed
    lines, unknown kinds, cells or exercises that do not exist, the same event a million
    times. Kept: known kinds naming a real cell (``0 <= index < cells``) or a requested
    exercise (and case), each distinct (kind, id, index) once, the first. So what the
    grader holds is bounded by the notebook's size, never by what the process wrote; at
    most :data:`MAX_EVENT_LOG_BYTES` are read at all.
    """

    def __init__(self, fd: int, cells: int = 0, cases: dict[str, int] | None = None) -> None:
        self.fd = fd
        self.consumed = 0
        self.partial = b""
        self.cells = cells
        self.cases = cases or {}
        self.seen: set[tuple] = set()

    def _keep(self, event: Any) -> bool:
        if not isinstance(event, dict):
            return False
        kind, ex_id, index = event.get("event"), event.get("id"), event.get("index")
        if kind in ("started", "ready", "finished"):
            key: tuple = (kind,)
        elif kind in ("cell", "cell_done"):
            if type(index) is not int or not 0 <= index < self.cells:
                return False
            key = (kind, index)
        elif kind in ("exercise", "exercise_done", "answer_missing"):
            if not isinstance(ex_id, str) or ex_id not in self.cases:
                return False
            key = (kind, ex_id)
        elif kind == "case":
            if not isinstance(ex_id, str) or ex_id not in self.cases:
                return False
            if type(index) is not int or not 0 <= index < self.cases[ex_id]:
                return False
            key = (kind, ex_id, index)
        else:
            return False
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

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
            for line in lines:
                try:
                    event = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if self._keep(event):
                    events.append(event)
        return events


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
        survivors = processes_with_token(token)
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


def processes_with_token(token: str) -> list[int]:
    """PIDs whose environment carries ``TOKEN_ENV=token`` (Linux /proc; elsewhere none)."""
    needle = f"{TOKEN_ENV}={token}".encode()
    pids: list[int] = []
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


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _memory_of(pid: int) -> int:
    """Bytes of memory ``pid`` holds: its proportional share (PSS: pages shared after a
    fork count once in all), else its resident size."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class ProcessWatch:
    """The processes of one worker, counted and measured (Linux ``/proc``).

    In the sandbox: every process in the worker's PID namespace (a new session or a
    cleared environment does not leave it). Without: every process carrying the run's
    token. Their number and their summed memory (PSS) are what the limits apply to
    (``RLIMIT_NPROC`` cannot: it counts every process of the grader's user, and none for
    root).
    """

    def __init__(self, proc: subprocess.Popen, token: str, sandboxed: bool) -> None:
        self.proc, self.token, self.sandboxed = proc, token, sandboxed
        self.namespace = ""

    def pids(self) -> list[int]:
        if not Path("/proc").is_dir():
            return []
        if not self.sandboxed:
            return sorted({self.proc.pid, *processes_with_token(self.token)})
        if not self.namespace:
            inner = _children(self.proc.pid)
            self.namespace = _pid_namespace(inner[0]) if inner else ""
            if not self.namespace or self.namespace == _pid_namespace(os.getpid()):
                self.namespace = ""
                return []
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _pid_namespace(int(entry.name)) == self.namespace:
                pids.append(int(entry.name))
        return pids

    def over_limit(self, max_processes: int, memory_mb: float) -> str | None:
        """``"processes"`` or ``"memory"`` when a limit is passed, else None."""
        pids = self.pids()
        if len(pids) > max_processes:
            return "processes"
        used = sum(_memory_of(pid) for pid in pids)
        return "memory" if used > memory_mb * 2**20 else None


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
    then, whatever the phase. ``stop`` set (Ctrl-C) kills the worker at once.
    """
    request_fd = _unnamed_file(json.dumps(request).encode())
    events_fd = _unnamed_file(append=True)
    output_fd = _unnamed_file(append=True)
    cases = {e["id"]: len(e["cases"]) for e in request.get("exercises", [])}
    reader = EventReader(events_fd, len(request.get("cells", [])), cases)
    token = secrets.token_hex(16)
    argv = [python, "-P", "-s", "-m", WORKER_MODULE, str(request_fd), str(events_fd)]
    argv, cwd = sandbox.command(argv, scratch=scratch, keep=keep, hide=hide)
    env = worker_environment(str(cwd), token)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output_fd, stderr=output_fd,
            cwd=scratch, env=env, start_new_session=True, close_fds=True,
            pass_fds=(request_fd, events_fd),
        )  # fmt: skip
    finally:
        os.close(request_fd)
    events: list[dict] = []
    phase: tuple[str, Any] = ("startup", None)
    phase_started = time.monotonic()
    finished = False
    stopped_for = None
    watch = ProcessWatch(proc, token, sandbox.isolated)
    next_watch = time.monotonic() + WATCH_SECONDS
    try:
        while True:
            exited = proc.poll() is not None
            for event in reader.read_new():
                events.append(event)
                kind = event["event"]
                if kind in ("cell", "exercise"):
                    phase = (kind, event.get("index", event.get("id")))
                    phase_started = time.monotonic()
                elif kind in ("ready", "cell_done", "exercise_done", "answer_missing"):
                    phase = ("between", None)
                    phase_started = time.monotonic()
                elif kind == "finished":
                    finished = True
            if exited or finished:
                break
            now = time.monotonic()
            # A cell's own alarm interrupts it at `timeout`; the grader steps in after a grace.
            limit = {"startup": STARTUP_TIMEOUT, "cell": timeout + INTERRUPT_GRACE}
            if stop is not None and stop.is_set():
                stopped_for = "stopped"
                break
            if now > deadline:
                stopped_for = "deadline"
                break
            if now - phase_started > limit.get(phase[0], timeout):
                stopped_for = "timeout"
                break
            if now > next_watch:
                next_watch = now + WATCH_SECONDS
                stopped_for = watch.over_limit(max_processes, memory_mb)
                if stopped_for:
                    break
            time.sleep(POLL_SECONDS)
    finally:
        kill_everything(proc, token)
    for event in reader.read_new():  # whatever arrived between the last read and the kill
        events.append(event)
        finished = finished or event["event"] == "finished"
    size = os.fstat(output_fd).st_size
    tail = os.pread(output_fd, OUTPUT_TAIL_BYTES, max(0, size - OUTPUT_TAIL_BYTES))
    os.close(events_fd)
    os.close(output_fd)
    return WorkerRun(
        events=events,
        finished=finished,
        stopped_for=stopped_for,
        phase=phase,
        exit_description=describe_exit(proc.returncode),
        output_tail=tail.decode("utf-8", "replace"),
    )
