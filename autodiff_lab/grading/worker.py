"""The student's side of grading: run a notebook's code, then answer the grader's cases.

Started by :mod:`autodiff_lab.grading.supervise` as a fresh process per submission (in
the sandbox when there is one), with two inherited file descriptors::

    python -P -s -m autodiff_lab.grading.worker REQUEST_FD EVENTS_FD

It limits its own memory, tasks and file sizes first, then runs the notebook's code cells in
order with IPython's shell (so ``%magics`` work; an error in a cell is recorded and the
next cell runs, as a lecturer pressing "Run All, continue on error" would). Then, for each
exercise, it imports the exercise's student-side ``run`` by name (from
:mod:`autodiff_lab.grading.runners`, or the file the request names) and reports
``run(answer, inputs)`` for each input the grader sent. That is all this process holds:
no exercise objects, no references, no mistake detectors — it never imports the exercise
modules or the registry, so there is nothing here to find, patch or call. Progress and
answers go to the events descriptor, one JSON object per line.

``-P`` (``PYTHONSAFEPATH``): the notebook's folder is added to ``sys.path`` after the
standard library, so a student's ``random.py`` or ``resource.py`` shadows nothing.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys

from .importing import import_file

# Bound before any student code runs, so monkeypatching these cannot garble the channel.
_write = os.write
_dumps = json.dumps
_exit = os._exit

MAX_EVENT_BYTES = 16 * 2**20  # one answer larger than this is refused


class AnswerTooLarge(ValueError):
    """An answer whose JSON exceeds MAX_EVENT_BYTES."""


MAX_PRINTED_BYTES = 2**20  # student output kept (the rest is dropped, not buffered)
MAX_OPEN_FILES = 1024  # per process: the grader reads every open descriptor (memfd memory)


def limit_resources(memory_mb: float, output_mb: float, max_tasks: int | None = None) -> None:
    """Cap writable private memory, tasks (sandbox only), open files and file sizes; no cores.

    Memory: ``RLIMIT_DATA`` (heap, anonymous and writable private mappings, thread stacks),
    so one allocation past the limit raises MemoryError. Not ``RLIMIT_AS``: address space
    reserved and never touched (``PROT_NONE``, as the CUDA build of PyTorch maps its
    libraries and reserves) is no memory; what all the worker's processes hold together
    is watched by the grader (:mod:`~autodiff_lab.grading.accounting`).
    ``max_tasks``: ``RLIMIT_NPROC``, given only in the sandbox, where the kernel counts
    processes and threads per user namespace (this worker's alone; a root grader's
    workers are exempt, and are counted by the grader's watch).
    Soft and hard limits are both set, so (unprivileged) student code cannot raise them.
    A file-size overrun then fails the write (EFBIG) instead of killing the process.
    """
    memory = int(memory_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    if max_tasks is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (max_tasks, max_tasks))
    files = min(MAX_OPEN_FILES, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))  # the grader's look stays cheap
    size = int(output_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # The grader interrupts a cell that runs too long: SIGINT must raise KeyboardInterrupt
    # even if the grader itself was started with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Events:
    """Append-only JSON-lines channel to the grader (unbuffered: each event is one write)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, **event) -> None:
        data = (_dumps(event, separators=(",", ":")) + "\n").encode()
        if len(data) > MAX_EVENT_BYTES:
            raise AnswerTooLarge(
                f"answer too large to send ({len(data) / 2**20:.0f} MB; "
                f"the limit is {MAX_EVENT_BYTES // 2**20} MB)"
            )
        while data:
            written = _write(self.fd, data)
            data = data[written:]


class BoundedOutput:
    """``sys.stdout`` for student code: passes the first MAX_PRINTED_BYTES on, drops the rest.

    An endless ``print`` loop then costs nothing but time (and hits the timeout).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.budget = MAX_PRINTED_BYTES
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text: str) -> int:
        if self.budget > 0:
            data = str(text).encode("utf-8", "replace")[: self.budget]
            self.budget -= len(data)
            try:
                _write(self.fd, data)
            except OSError:
                self.budget = 0
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fd

    def writable(self) -> bool:
        return True


class _CellAlarm:
    """Interrupts a cell after ``seconds`` (``KeyboardInterrupt``, as Jupyter's stop button)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        signal.signal(signal.SIGALRM, self._ring)

    def _ring(self, *_args) -> None:
        self.fired = True
        raise KeyboardInterrupt(f"the cell did not finish within {self.seconds:g} s")

    def __enter__(self) -> _CellAlarm:
        self.fired = False
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)


def load_runner(spec: dict):
    """The exercise's ``run`` function: ``{"module": name, "file": path or None, "name": …}``."""
    name, file = str(spec["module"]), spec.get("file")
    if file and not name.startswith("autodiff_lab."):
        module = import_file(name, file, f"the runners module {name!r}")
    else:
        module = importlib.import_module(name)
    return getattr(module, str(spec["name"]))


def run(request: dict, events: Events) -> None:
    """Run the cells, then every requested exercise's cases, reporting as we go.

    A request with ``"own_code": true`` (own-code exercises only) runs no student code in
    this process: each exercise's answer is computed by a child where the library is
    switched off (:mod:`autodiff_lab.grading.own_code`).
    """
    sys.stdout = BoundedOutput(1)
    sys.stderr = BoundedOutput(2)
    sys.argv = [""]  # as in a kernel; the grader's file names are none of the notebook's business
    if request.get("own_code"):
        from .own_code import run_in_child
        from .scoring import CRASH

        skip = set(request.get("skip_cells", []))
        cells = ["" if k in skip else c for k, c in enumerate(request["cells"])]
        events.emit(event="ready")
        for item in request["exercises"]:
            events.emit(event="exercise", id=item["id"])
            try:
                run_in_child(item, cells, request, events)
            except OSError as exc:  # no child could be started (out of tasks, say)
                for index in range(len(item["cases"])):
                    events.emit(
                        event="case", id=item["id"], index=index, kind=str(CRASH), value=None,
                        message=f"the process for this exercise could not start: {exc}"[:300],
                    )  # fmt: skip
            events.emit(event="exercise_done", id=item["id"])
        events.emit(event="finished")
        return
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from .checking import run_answer
    from .plaindata import PlainDataError, from_plain, to_plain
    from .scoring import CRASH, ERROR, VALUE, short_error

    runners = {item["id"]: load_runner(item["run"]) for item in request["exercises"]}
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    sys.path.append(os.getcwd())  # after the standard library: helper modules, no shadowing
    alarm = _CellAlarm(float(request["timeout"]))
    events.emit(event="ready")

    skip = set(request.get("skip_cells", []))
    for index, source in enumerate(request["cells"]):
        if index in skip:
            continue
        events.emit(event="cell", index=index)
        try:
            with alarm:
                result = shell.run_cell(source, store_history=False)
            error = result.error_before_exec or result.error_in_exec
            message = short_error(error) if error is not None else None
        except BaseException as exc:  # the shell catches almost everything; be sure
            message = short_error(exc)
        events.emit(event="cell_done", index=index, error=message, interrupted=alarm.fired)

    memory_note = f"ran out of memory (the limit is {request['memory_mb']:g} MB)"
    for item in request["exercises"]:
        exercise_id, answer_name = item["id"], item["answer"]
        events.emit(event="exercise", id=exercise_id)
        answer = shell.user_ns.get(answer_name)
        if answer is None:
            events.emit(event="answer_missing", id=exercise_id)
            continue
        for index, encoded in enumerate(item["cases"]):
            try:
                outcome = run_answer(runners[exercise_id], answer_name, answer, from_plain(encoded))
            except BaseException as exc:  # KeyboardInterrupt raised by student code, say
                outcome = None
                kind, value, message = str(ERROR), None, short_error(exc)
            if outcome is not None:
                kind, value, message = outcome.kind, None, outcome.message
                if outcome.kind == CRASH:  # run_answer's only crash: MemoryError
                    message = memory_note
                elif outcome.kind == VALUE:
                    try:
                        value = to_plain(outcome.value)
                    except (PlainDataError, RecursionError) as exc:
                        kind, message = ERROR, f"the result is not plain data: {exc}"
            try:
                events.emit(
                    event="case", id=exercise_id, index=index, kind=str(kind), value=value,
                    message=message,
                )  # fmt: skip
            except AnswerTooLarge as exc:
                events.emit(
                    event="case", id=exercise_id, index=index, kind=ERROR, value=None,
                    message=str(exc),
                )  # fmt: skip
            except (ValueError, TypeError, OverflowError, OSError, MemoryError) as exc:
                events.emit(
                    event="case", id=exercise_id, index=index, kind=ERROR, value=None,
                    message=f"the answer could not be sent ({type(exc).__name__}: {exc})"[:300],
                )  # fmt: skip
        events.emit(event="exercise_done", id=exercise_id)
    events.emit(event="finished")


def main(argv: list[str]) -> None:
    request_fd, events_fd = (int(a) for a in argv)
    with os.fdopen(request_fd, "rb") as f:
        request = json.loads(f.read())
    limit_resources(request["memory_mb"], request["output_mb"], request.get("max_tasks"))
    events = Events(events_fd)
    events.emit(event="started", pid=os.getpid())
    try:
        run(request, events)
    except BaseException:  # an internal error: show it in the grader's log, exit non-zero
        import traceback

        _write(2, traceback.format_exc().encode())
        _exit(3)
    # Leave now: no student atexit handlers, no waiting on threads they started.
    _exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
