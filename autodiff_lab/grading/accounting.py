"""What one worker uses: its tasks (processes and threads) and its memory, read from /proc.

The limits a lecturer sets (``--max-processes``, ``--memory``) apply to what these functions
measure, summed over every process of one worker:

- **Tasks** are processes *and* threads (each thread is a task the machine has a limited
  number of: a thread bomb exhausts them as surely as a fork bomb). Counted from each
  process's ``/proc/PID/status`` (``Threads:``).
- **Memory** is what the worker really holds, never the address space it reserved (CUDA
  builds of PyTorch reserve many GB they never touch)::

      memory = sum over its processes of PSS            (resident pages; a page shared by n
                                                         processes counts 1/n in each)
             + files in the sandbox's RAM folders        (/tmp and /dev/shm: used blocks,
                                                         whether open, mapped or neither)
             + memfd files its processes hold open       (each file once, by inode: memory
                                                         no process maps shows in no PSS;
                                                         without the sandbox, files of the
                                                         machine's /dev/shm held open too)

  A shared-memory file that is both held open (or kept in a RAM folder) and mapped counts
  twice: the limit errs against the hoarder, and an honest notebook rarely maps one.
  System V IPC objects, which no process holds, are refused in the sandbox instead
  (:func:`~autodiff_lab.grading.sandbox.seccomp_program`); without it they are not seen.

Which processes belong to a worker: in the sandbox, every process of its PID namespace,
listed through the namespace's own ``/proc`` (``/proc/<its first process>/root/proc``: no
new session or cleared environment leaves it) once it is mounted, and until then (while
bubblewrap sets the sandbox up, that path is the machine's own ``/proc``, and its RAM
folders the machine's ``/tmp`` and ``/dev/shm``: counting them would charge every process and
temporary file of the machine to the worker) by the namespace of each of the machine's
processes, its RAM folders not yet; without the sandbox, every process carrying the run's
token in its environment (:func:`processes_with_token`).

Where the measure is the only limit (no cgroup is used; see docs/lecturer.md), a burst between two
looks is not seen: tasks are counted every :data:`TASK_CHECK_SECONDS`, memory every
:data:`MEMORY_CHECK_SECONDS`. Two hard limits stand behind it, per process: the worker's
``RLIMIT_DATA`` (writable private memory, so one large allocation fails with MemoryError)
and, in the sandbox with a grader that is not root, ``RLIMIT_NPROC`` (the kernel counts
tasks per user namespace, so that is per worker; root is exempt from it, so a root
grader's watching thread runs at a higher CPU priority than its workers instead).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TASK_CHECK_SECONDS = 0.02  # cheap: a few status files
MEMORY_CHECK_SECONDS = 0.25  # reads each process's smaps_rollup and its descriptors
RAM_FOLDERS = ("/tmp", "/dev/shm")  # tmpfs mounts of the sandbox, counted as memory
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Usage:
    """One look at a worker: its task count and memory in bytes (with the parts)."""

    tasks: int
    memory: int = 0
    resident: int = 0  # PSS summed over its processes
    ram_folders: int = 0  # used blocks of the sandbox's /tmp and /dev/shm
    memfd: int = 0  # memfd (and, unsandboxed, /dev/shm) files held open (distinct inodes)


def processes_with_token(token: str, env_name: str) -> list[int]:
    """PIDs whose environment carries ``env_name=token`` (Linux /proc; elsewhere none)."""
    needle = f"{env_name}={token}".encode()
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


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid``."""
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


def _pid_namespace(pid: int | str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _threads(status_path: str) -> int:
    """A process's task count from its ``status`` file (0 when it is gone)."""
    try:
        with open(status_path, "rb") as f:
            for line in f:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _pss(proc: str) -> int:
    """Bytes of memory one process holds (PSS), else its resident size."""
    try:
        with open(f"{proc}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"{proc}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _shared_files(proc: str, seen: dict[tuple[int, int], int], prefixes: tuple[str, ...]) -> None:
    """Add the shared-memory files ``proc`` holds open (named by one of ``prefixes``) to
    ``seen`` ((device, inode) -> bytes)."""
    fd_dir = f"{proc}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return
    for name in names:
        try:
            if not os.readlink(f"{fd_dir}/{name}").startswith(prefixes):
                continue
            info = os.stat(f"{fd_dir}/{name}")
        except OSError:
            continue
        seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512


def _used_bytes(folder: str) -> int:
    try:
        stat = os.statvfs(folder)
    except OSError:
        return 0
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


class ProcessWatch:
    """The processes of one worker, counted and measured (see the module's docstring).

    ``leader`` is the worker's process as the grader started it (bubblewrap in the sandbox).
    """

    def __init__(self, leader: int, token: str, env_name: str, sandboxed: bool) -> None:
        self.leader, self.token, self.env_name, self.sandboxed = leader, token, env_name, sandboxed
        self.anchor = 0  # the sandbox's first process (PID 1 inside), once it exists
        self.known: list[str] = []  # /proc folders of the processes seen at the last look
        self.rooted = False  # the sandbox's own root is in place (its /proc, /tmp, /dev/shm)

    def _find_anchor(self) -> bool:
        if not self.anchor:
            inner = children_of(self.leader)
            if inner and _pid_namespace(inner[0]) not in ("", _pid_namespace(os.getpid())):
                self.anchor = inner[0]
        return bool(self.anchor)

    def process_folders(self) -> list[str]:
        """A ``/proc/PID`` folder for every process of the worker (empty before it exists)."""
        if not Path("/proc").is_dir():
            return []
        if not self.sandboxed:
            pids = {self.leader, *processes_with_token(self.token, self.env_name)}
            self.known = [f"/proc/{pid}" for pid in sorted(pids)]
        elif self._find_anchor():
            inside = f"/proc/{self.anchor}/root/proc"
            try:
                own = os.readlink(f"{inside}/1/ns/pid") == _pid_namespace(self.anchor)
                self.rooted = self.rooted or own
                if own:
                    self.known = [f"{inside}/{n}" for n in os.listdir(inside) if n.isdigit()]
                else:  # still the machine's /proc (the sandbox is being set up): scan them all
                    self.known = self._scan_namespace()
            except PermissionError:  # its /proc is out of the grader's reach: scan them all
                self.known = self._scan_namespace()
            except OSError:  # the namespace is gone: nothing of it is left running
                self.known = []
        else:
            self.known = []
        return self.known

    def _scan_namespace(self) -> list[str]:
        """Every process of the machine in the sandbox's PID namespace (slower)."""
        namespace = _pid_namespace(self.anchor)
        if not namespace:
            return []
        return [
            f"/proc/{entry.name}"
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _pid_namespace(entry.name) == namespace
        ]

    def tasks(self) -> int:
        """Processes and threads of the worker (in the sandbox a fresh, cheap listing;
        without it, the processes found at the last full look)."""
        folders = self.process_folders() if self.sandboxed else self.known
        return sum(_threads(f"{folder}/status") for folder in folders)

    def usage(self) -> Usage:
        """Tasks and memory, all processes of the worker summed."""
        folders = self.process_folders()
        tasks = sum(_threads(f"{folder}/status") for folder in folders)
        resident = sum(_pss(folder) for folder in folders)
        memfd: dict[tuple[int, int], int] = {}
        # The sandbox's /dev/shm is measured whole below; the machine's, file by file.
        prefixes = ("/memfd:",) if self.sandboxed else ("/memfd:", "/dev/shm/")
        for folder in folders:
            _shared_files(folder, memfd, prefixes)
        ram = 0
        if self.sandboxed and self.rooted:  # before, these folders are the machine's own
            ram = sum(_used_bytes(f"/proc/{self.anchor}/root{f}") for f in RAM_FOLDERS)
        held = sum(memfd.values())
        return Usage(tasks, resident + ram + held, resident, ram, held)
