"""The student's side of grading: run a notebook's code, then answer the grader's cases.

Started by :mod:`autodiff_lab.grading.grader` as a fresh process per submission::

    python -m autodiff_lab.grading.worker REQUEST.json EVENTS.jsonl

It limits its own memory and file sizes first, then runs the notebook's code cells in
order with IPython's shell (so ``%magics`` work; an error in a cell is recorded and the
next cell runs, as a lecturer pressing "Run All, continue on error" would). Then, for each
exercise, it calls ``exercise.run(answer, inputs)`` on the inputs the grader sent and
reports the plain-data result. It never judges anything: the reference and the comparison
live in the grader. Progress and answers go to the events file, one JSON object per line,
so the grader can tell which cell or exercise was running when a limit was hit.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

# Bound before any student code runs, so monkeypatching these cannot garble the channel.
_write = os.write
_dumps = json.dumps
_exit = os._exit

MAX_EVENT_BYTES = 16 * 2**20  # one answer larger than this is refused
MAX_PRINTED_BYTES = 2**20  # student output kept (the rest is dropped, not buffered)


def limit_resources(memory_mb: float, output_mb: float) -> None:
    """Cap address space and the size of any file written; no core dumps.

    Soft and hard limits are both set, so (unprivileged) student code cannot raise them.
    A file-size overrun then fails the write (EFBIG) instead of killing the process.
    """
    memory = int(memory_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = int(output_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # The grader interrupts a cell that runs too long: SIGINT must raise KeyboardInterrupt
    # even if the grader itself was started with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Events:
    """Append-only JSON-lines channel to the grader (unbuffered: each event is one write)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def emit(self, **event) -> None:
        data = (_dumps(event, separators=(",", ":")) + "\n").encode()
        if len(data) > MAX_EVENT_BYTES:
            raise ValueError(f"event of {len(data)} bytes is too large")
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


def run(request: dict, events: Events) -> None:
    """Run the cells, then every requested exercise's cases, reporting as we go."""
    sys.stdout = BoundedOutput(1)
    sys.stderr = BoundedOutput(2)
    sys.argv = [""]  # as in a kernel; the grader's file names are none of the notebook's business
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from . import registry
    from .checking import run_answer
    from .plaindata import PlainDataError, from_plain, to_plain
    from .scoring import CRASH, ERROR, VALUE, short_error

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    events.emit(event="ready")

    skip = set(request.get("skip_cells", []))
    for index, source in enumerate(request["cells"]):
        if index in skip:
            continue
        events.emit(event="cell", index=index)
        try:
            result = shell.run_cell(source, store_history=False)
            error = result.error_before_exec or result.error_in_exec
            message = short_error(error) if error is not None else None
        except BaseException as exc:  # the shell catches almost everything; be sure
            message = short_error(exc)
        events.emit(event="cell_done", index=index, error=message)

    memory_note = f"ran out of memory (the limit is {request['memory_mb']:g} MB)"
    for item in request["exercises"]:
        exercise = registry.get(item["id"])
        events.emit(event="exercise", id=exercise.id)
        answer = shell.user_ns.get(exercise.answer)
        if answer is None:
            events.emit(event="answer_missing", id=exercise.id)
            continue
        for index, encoded in enumerate(item["cases"]):
            events.emit(event="case_start", id=exercise.id, index=index)
            try:
                outcome = run_answer(exercise, answer, from_plain(encoded))
            except BaseException as exc:  # KeyboardInterrupt raised by student code, say
                outcome = None
                kind, value, message = ERROR, None, short_error(exc)
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
                    event="case",
                    id=exercise.id,
                    index=index,
                    kind=kind,
                    value=value,
                    message=message,
                )
            except (ValueError, TypeError, OverflowError, OSError, MemoryError) as exc:
                events.emit(
                    event="case", id=exercise.id, index=index, kind=ERROR, value=None,
                    message=f"the result could not be sent: {type(exc).__name__}",
                )  # fmt: skip
        events.emit(event="exercise_done", id=exercise.id)
    events.emit(event="finished")


def main(argv: list[str]) -> None:
    request_path, events_path = argv
    with open(request_path) as f:
        request = json.load(f)
    limit_resources(request["memory_mb"], request["output_mb"])
    events = Events(events_path)
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
