"""One worker at a time, attacked from inside, supervised by ``run_worker`` in bubblewrap.

Each test runs a tiny notebook (a few code cells, no exercises unless said) straight
through :func:`~autodiff_lab.grading.supervise.run_worker`, performs one attack and
asserts the fair outcome: memory counted as what the worker holds (not the address space
it reserved; memfd and ``/dev/shm`` files included), threads counted as tasks, a clock the
student's forged events cannot reset, malformed events dropped, the output never raw on a
terminal, and a worker that could not start told apart from a student's result. Without
bubblewrap these tests skip; under ``CI=true`` they fail (CI installs it).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from grading_testkit import bubblewrap_or_skip

import autodiff_lab
from autodiff_lab.grading import supervise
from autodiff_lab.grading.sandbox import Sandbox
from autodiff_lab.grading.supervise import EventReader, notebook_time_limit, run_worker

pytestmark = pytest.mark.slow  # each test starts one or two sandboxed workers: seconds
PACKAGE_ROOT = Path(autodiff_lab.__file__).parent.parent
TIMEOUT = 3.0


def keep_paths() -> list[Path]:
    import sys

    return [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable), PACKAGE_ROOT]


def run_cells(
    tmp_path: Path,
    cells: list[str],
    *,
    sandbox: Sandbox | None = None,
    memory_mb: float = 1024.0,
    max_processes: int = 64,
    timeout: float = TIMEOUT,
    seconds: float = 60.0,
    exercises: list[dict] | None = None,
    python: str | None = None,
    name: str = "scratch",
) -> supervise.WorkerRun:
    import sys

    scratch = tmp_path / name
    scratch.mkdir()
    request = {
        "cells": cells, "exercises": exercises or [], "timeout": timeout,
        "memory_mb": memory_mb, "output_mb": 64.0,
    }  # fmt: skip
    return run_worker(
        request, sandbox=sandbox or bubblewrap_or_skip(), scratch=scratch, keep=keep_paths(),
        hide=[], timeout=timeout, deadline=time.monotonic() + seconds,
        python=python or sys.executable, max_processes=max_processes, memory_mb=memory_mb,
    )  # fmt: skip


def cell_errors(run: supervise.WorkerRun) -> dict[int, str | None]:
    return {e["index"]: e["error"] for e in run.events if e["event"] == "cell_done"}


# --- memory: what the worker holds, not the address space it reserved ------------------

RESERVE_8_GIB = """
import mmap
reserved = mmap.mmap(-1, 8 * 2**30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000,
                     prot=0)  # PROT_NONE, MAP_NORESERVE: address space only, never touched
"""


MAP_4_GIB_OF_FILES = """
import ctypes, glob, mmap, os, numpy
libraries = glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so*"),
                      recursive=True) + glob.glob(numpy.__file__ + "/../../numpy.libs/*")
largest = max(libraries, key=os.path.getsize)  # OpenBLAS: tens of MB
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
with open(largest, "rb") as f:  # read-only file mappings, as libraries are mapped
    size = os.fstat(f.fileno()).st_size
    for _ in range(4 * 2**30 // size + 1):
        at = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_PRIVATE, f.fileno(), 0)
        assert at not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
"""


def test_eight_gib_of_reserved_address_space_grades_normally(tmp_path):
    """As the CUDA build of PyTorch maps its libraries: far more address space than memory."""
    cells = [RESERVE_8_GIB, MAP_4_GIB_OF_FILES, "import numpy as np\nx = np.ones(10**7)"]
    run = run_cells(tmp_path, cells, memory_mb=512)
    assert run.finished and run.stopped_for is None, run
    assert cell_errors(run) == {0: None, 1: None, 2: None}
    assert run.infrastructure_failure is None


def test_one_allocation_past_the_limit_is_a_memory_error_not_a_kill(tmp_path):
    run = run_cells(tmp_path, ["import numpy as np\nx = np.ones(200 * 2**20)"], memory_mb=512)
    assert run.finished and run.stopped_for is None
    assert "MemoryError" in (cell_errors(run)[0] or "")


MEMFD_BOMB = """
import os, time
held = []
for k in range(40):  # 40 files of 48 MB (each under the 64 MB file-size limit): 1.9 GB
    fd = os.memfd_create(f"hoard{k}")
    os.posix_fallocate(fd, 0, 48 * 2**20)  # memory no process maps: in no process's PSS
    held.append(fd)
time.sleep(30)
"""

SHM_BOMB = """
import os, time
written = 0
try:
    for k in range(4):  # 4 files of 48 MB in /dev/shm, closed: held by no process at all
        with open(f"/dev/shm/hoard{k}", "wb") as f:
            for _ in range(48):
                f.write(b"x" * 2**20)
                written += 1
except OSError as exc:
    raise RuntimeError(f"SHM-FULL after {written} MB ({exc.strerror})")
time.sleep(30)
"""


@pytest.mark.parametrize("bomb", [MEMFD_BOMB, SHM_BOMB], ids=["memfd", "dev-shm"])
def test_memory_held_in_shared_memory_files_is_stopped(tmp_path, bomb):
    start = time.monotonic()
    run = run_cells(tmp_path, ["x = 1", bomb], memory_mb=200)  # the worker alone: ~70 MB
    elapsed = time.monotonic() - start
    assert run.stopped_for == "memory", run
    assert run.phase == ("cell", 1)
    assert elapsed < 15  # not the cell's 30 s
    assert run.infrastructure_failure is None  # the student's own doing: recorded


def test_memfd_files_count_without_the_sandbox_too(tmp_path):
    run = run_cells(tmp_path, ["x = 1", MEMFD_BOMB], memory_mb=300,
                    sandbox=Sandbox("none", reason="test"))  # fmt: skip
    assert run.stopped_for == "memory" and run.phase == ("cell", 1), run


def test_the_sandboxs_own_root_and_dev_are_read_only(tmp_path):
    """bubblewrap's / and /dev are RAM folders of unlimited size: nothing may be written."""
    probe = """
import os
refused = []
for folder in ["/", "/dev"]:
    try:
        open(os.path.join(folder, "hoard"), "wb").close()
    except OSError as exc:
        refused.append(folder)
assert refused == ["/", "/dev"], refused
"""
    run = run_cells(tmp_path, [probe])
    assert cell_errors(run) == {0: None}, run


# --- tasks: threads count against --max-processes ----------------------------------------

THREAD_BOMB = """
import threading, time
threading.stack_size(64 * 1024)
gate = threading.Event()
started = 0
try:
    while True:
        threading.Thread(target=gate.wait, daemon=True).start()
        started += 1
except RuntimeError as exc:
    raise RuntimeError(f"THREADS-REFUSED after {started}")
"""


def test_a_thread_bomb_is_stopped_and_an_honest_neighbour_is_not_hurt(tmp_path):
    honest: dict[str, supervise.WorkerRun] = {}

    def neighbour() -> None:
        time.sleep(0.5)  # starts while the bomb is going off
        honest["run"] = run_cells(
            tmp_path, ["import subprocess\nsubprocess.run(['true'], check=True)", "y = 2"],
            name="honest",
        )  # fmt: skip

    beside = threading.Thread(target=neighbour)
    beside.start()
    run = run_cells(tmp_path, ["x = 1", THREAD_BOMB], max_processes=32, name="bomb")
    beside.join()
    # Root graders: the watch stops it; others: the kernel's per-sandbox count refuses more
    # (at the limit plus a margin, far below what memory alone would allow).
    refused = re.search(r"THREADS-REFUSED after (\d+)", cell_errors(run).get(1) or "")
    if refused:
        assert int(refused.group(1)) <= 32 + supervise.TASK_LIMIT_MARGIN, run
    else:
        assert run.stopped_for == "processes" and run.phase == ("cell", 1), run
    assert honest["run"].finished and cell_errors(honest["run"]) == {0: None, 1: None}


def test_tasks_are_still_counted_when_the_sandboxs_proc_is_out_of_reach(tmp_path, monkeypatch):
    """Should the sandbox's own /proc refuse the grader, every process of the machine in
    the sandbox's PID namespace is counted instead."""
    from autodiff_lab.grading import accounting

    listdir = accounting.os.listdir

    def refusing(path):
        if str(path).endswith("/root/proc"):
            raise PermissionError(13, "refused", str(path))
        return listdir(path)

    monkeypatch.setattr(accounting.os, "listdir", refusing)
    forky = "import subprocess, time\nkids = [subprocess.Popen(['sleep', '20']) for _ in range(12)]"
    # Their memory is counted too: on a busy machine (the test suite's own processes) that is
    # more than a worker's usual limit, so the limit is set out of reach — processes are tested.
    run = run_cells(tmp_path, ["x = 1", forky + "\ntime.sleep(20)"], max_processes=8,
                    memory_mb=1e6)  # fmt: skip
    assert run.stopped_for == "processes" and run.phase == ("cell", 1), run


def test_a_sandbox_still_being_set_up_is_charged_only_its_own_processes():
    """While bubblewrap sets up, the sandbox's first process is in its new PID namespace but
    its root, and so ``/proc/<it>/root/proc``, is still the machine's: counting that listing
    charged every process of a busy machine to the worker, and its /tmp to the worker's RAM
    folders, which was then stopped "before it was ready" for processes or memory.
    (``unshare`` leaves a process in exactly that state.)"""
    import shutil
    import subprocess

    from autodiff_lab.grading.accounting import ProcessWatch

    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux)")
    leader = subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork",
                               "sleep", "30"])  # fmt: skip
    try:
        watch = ProcessWatch(leader.pid, token="", env_name="", sandboxed=True)
        deadline = time.monotonic() + 10
        while not watch._find_anchor() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not watch.anchor:
            pytest.skip("unshare could not make a PID namespace here")
        assert watch.tasks() == 1, watch.known  # sleep alone, not the machine's processes
        usage = watch.usage()  # nor the machine's /tmp and /dev/shm as the sandbox's RAM folders
        assert usage.tasks == 1 and usage.ram_folders == 0, usage
    finally:
        leader.kill()
        leader.wait()


# --- infrastructure failures: the grader's, never the student's --------------------------


def test_a_worker_that_cannot_be_started_is_an_infrastructure_failure(tmp_path):
    run = run_cells(tmp_path, ["x = 1"], python=str(tmp_path / "no-such-python"),
                    sandbox=Sandbox("none", reason="test"))  # fmt: skip
    assert run.infrastructure_failure and "could not be started" in run.infrastructure_failure
    assert not run.finished and run.events == []


def test_a_sandbox_that_fails_to_start_is_an_infrastructure_failure(tmp_path):
    broken = Sandbox("bubblewrap", "/bin/false")  # exits 1 before anything runs
    run = run_cells(tmp_path, ["x = 1"], sandbox=broken)
    assert run.infrastructure_failure, run
    assert "exited with code 1 before it was ready" in run.infrastructure_failure


FAKE_INFRASTRUCTURE = """
import os
for fd in range(3, 64):  # forge a startup on every descriptor, then die before 'ready'
    try:
        os.write(fd, b'{"event": "started", "pid": 1}\\n')
    except OSError:
        pass
os._exit(1)
"""


def test_a_student_cannot_fake_an_infrastructure_failure(tmp_path):
    """Student code runs only after 'ready': whatever it does, the run is the student's."""
    for attempt in range(3):  # as the batch does: a start-up the machine failed is retried
        run = run_cells(tmp_path, [FAKE_INFRASTRUCTURE], name=f"scratch{attempt}")
        if run.phase != ("startup", None):
            break
    assert run.infrastructure_failure is None, run
    assert run.exit_description == "exited with code 1" and run.phase == ("cell", 0)


# --- clocks: forged phase events never reset them ---------------------------------------

FORGED_CLOCK = """
import json, os, time
def forge(**event):
    for fd in range(3, 64):
        try:
            os.write(fd, (json.dumps(event) + "\\n").encode())
        except OSError:
            pass
steps = [dict(event="ready")]
for index in range(50):
    steps += [dict(event="cell_done", index=index, error=None, interrupted=False),
              dict(event="cell", index=index)]
steps += [dict(event="exercise", id="97.1"), dict(event="exercise_done", id="97.1")]
end = time.monotonic() + 30
while time.monotonic() < end:  # swallow the alarm; a forged step just before each limit
    try:
        forge(**steps.pop(0)) if steps else None
        time.sleep(0.15)
        forge(**steps.pop(0)) if steps else None
        time.sleep(0.9 * CELL_TIMEOUT)
    except KeyboardInterrupt:
        pass
"""


def test_forged_phase_events_buy_no_time_beyond_the_notebooks_limit(tmp_path):
    """Events move the clock only forward through the notebook's own plan (2 cells, 1
    exercise), each step once; whatever is forged, the notebook is stopped by its limit
    of (2 * 2 + 1) * (timeout + grace) of its own time, not after the 30 s it asked for."""
    exercise = {
        "id": "97.1",
        "answer": "dsin",
        "cases": [[0.0]],
        "run": {"module": "autodiff_lab.grading.runners.common", "name": "number"},
    }
    timeout = 1.5
    limit = notebook_time_limit(timeout, cells=2, exercises=1, cap=600.0)
    cells = [f"CELL_TIMEOUT = {timeout}\n" + FORGED_CLOCK, "x = 1"]
    start = time.monotonic()
    run = run_cells(tmp_path, cells, exercises=[exercise], timeout=timeout, seconds=limit)
    elapsed = time.monotonic() - start
    assert run.stopped_for in ("timeout", "deadline"), run
    assert elapsed < limit + supervise.STARTUP_TIMEOUT / 6, elapsed  # + a slow start-up
    forged = [e for e in run.events if e["event"] in ("cell", "cell_done", "exercise")]
    assert len(forged) <= 2 * 2 + 2  # each step of the plan at most once


def test_malformed_events_are_dropped_and_counted_never_a_crash():
    import os

    fd = os.open(os.getcwd(), os.O_TMPFILE | os.O_RDWR, 0o600)
    lines = [
        '{"event": "case", "id": ["97.1"], "index": 0, "kind": "value"}',  # id a list
        '{"event": "case", "id": "97.1", "index": [0], "kind": "value"}',  # index a list
        '{"event": "case", "id": "97.1", "index": 0, "kind": ["value"]}',  # kind a list
        '{"event": "case", "id": "97.1", "index": 0, "kind": "error", "message": {"a": 1}}',
        '{"event": "cell_done", "index": 0, "error": ["x"]}',
        '{"event": "cell_done", "index": 0, "interrupted": "yes"}',
        '{"event": {"cell": 1}, "index": 0}',
        '{"event": "exercise", "id": {"97.1": 1}}',
        "[1, 2, 3]",
        "not json",
        '{"event": "cell", "index": 0, "id": [1], "extra": {"x": 1}}',  # kept, cleaned
        '{"event": "case", "id": "97.1", "index": 0, "kind": "value", "value": [1.5]}',
    ]
    os.write(fd, ("\n".join(lines) + "\n").encode())
    reader = EventReader(fd, cells=1, cases={"97.1": 1})
    events = reader.read_new()
    os.close(fd)
    assert events == [
        {"event": "cell", "index": 0},
        {"event": "case", "id": "97.1", "index": 0, "kind": "value", "value": [1.5],
         "message": None},
    ]  # fmt: skip
    assert reader.malformed == 10
    for event in events:  # every field the grader may hash or compare has its type
        assert {type(v) for k, v in event.items() if k != "value"} <= {str, int, type(None)}


def test_the_notebook_limit_follows_the_cell_timeout_and_the_plan():
    assert supervise.INTERRUPT_GRACE == 2.0
    # (2 * cells + exercises) * (timeout + 2 s), at most --notebook-timeout
    assert notebook_time_limit(5.0, cells=6, exercises=3, cap=600.0) == 15 * 7.0
    assert notebook_time_limit(60.0, cells=30, exercises=10, cap=600.0) == 600.0
    assert notebook_time_limit(3.0, cells=6, exercises=3, cap=6.0) == 6.0


# --- output: never raw on the lecturer's terminal ----------------------------------------


def test_the_workers_output_reaches_no_terminal_raw(tmp_path, capfd):
    noisy = (
        "import os, sys, warnings\n"
        "os.write(2, b'\\x1b[2J\\x1b[31mFAKE GRADER LINE\\r\\n')\n"
        "warnings.warn('\\x1b]0;title\\x07')\n"
        "print('\\x1b[1mbold', file=sys.__stderr__)\n"
        "raise SystemExit(0)"
    )
    run = run_cells(tmp_path, [noisy, "compile('x = \"\\\\\\x1b\"', 'c', 'exec')", "os._exit(5)"])
    assert "\x1b" not in run.output_tail and "\r" not in run.output_tail
    assert "\\x1b[2J" in run.output_tail and "FAKE GRADER LINE" in run.output_tail
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err


SYSV_HOARD = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
refused = []
for name, args in [("shmget", (IPC_PRIVATE, 2**30, IPC_CREAT | 0o600)),
                   ("semget", (IPC_PRIVATE, 8, IPC_CREAT | 0o600)),
                   ("msgget", (IPC_PRIVATE, IPC_CREAT | 0o600))]:
    if getattr(libc, name)(*args) == -1 and ctypes.get_errno() == 1:  # EPERM
        refused.append(name)
assert refused == ["shmget", "semget", "msgget"], refused
"""


def test_system_v_ipc_objects_are_refused_in_the_sandbox(tmp_path):
    """A System V segment no process has attached holds memory no process's PSS shows."""
    from autodiff_lab.grading.sandbox import seccomp_program

    if seccomp_program() is None:
        pytest.skip("no seccomp filter for this machine's architecture")
    run = run_cells(tmp_path, [SYSV_HOARD, "import numpy as np\nx = np.ones(10)"])
    assert cell_errors(run) == {0: None, 1: None}, run
