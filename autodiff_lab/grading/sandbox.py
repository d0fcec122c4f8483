"""Where a student's process may look: bubblewrap's namespaces, or (said plainly) nothing.

With `bubblewrap <https://github.com/containers/bubblewrap>`_ (Debian: ``apt install
bubblewrap``) every worker runs with:

- new user, PID, mount, network, IPC and UTS namespaces (``--unshare-all``), as uid/gid
  65534 (nobody): it sees only its own processes (not the grader, not other students'
  workers), has no network, and every process it starts is killed when it ends
  (``--die-with-parent``; the namespace's first process takes all others with it);
- an ALLOWLIST of the file system, read-only, all capabilities dropped: the system
  folders (:data:`SYSTEM_FOLDERS`, with the secrets of :data:`MASKED` covered by empty
  ones), the Python environment and the package's student side (``keep``); inside those,
  the exercise references and ``solutions/`` covered by empty folders. Nothing else of
  the machine exists there: not the course folder or its ``.git``, other students'
  copies (whatever ``TMPDIR`` is), submissions, gradebook, exports;
- a ``/tmp`` and a ``/dev/shm`` of its own, RAM tmpfs of :data:`SANDBOX_TMP_MB` MB each
  where bubblewrap has ``--size`` (0.7+), whose use counts as the worker's memory; the
  sandbox's ``/`` and ``/dev`` (RAM folders bubblewrap makes) are read-only;
- its own scratch copy of its submission, writable, at :data:`SCRATCH_IN_SANDBOX`;
- no System V IPC objects (a seccomp filter, :func:`seccomp_program`, where the machine
  is x86_64 or aarch64): memory they hold belongs to no process.

The worker's uid is mapped to the grader's: a grader running as root leaves the root-owned
files of the allowlist readable, hence :data:`MASKED`. Processes and memory of all the
worker's processes are watched by :mod:`~autodiff_lab.grading.supervise`.

Without bubblewrap the worker is a plain process of the grader's user: the grader says so
(a line at start, a column of the CSV, a line in each report), and ``--require-sandbox``
refuses to grade. What is then not protected is listed in the lecturer's guide
(docs/lecturer.md, "The sandbox and what it protects").
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SCRATCH_IN_SANDBOX = "/tmp/submission"
# Never hidden, nor any folder holding one of them: the worker's programs and libraries.
SYSTEM_FOLDERS = tuple(
    Path(p) for p in ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc")
)
# Secrets inside the system folders, replaced by empty ones (the worker's uid is mapped to
# the grader's, so a grader running as root could otherwise read them).
MASKED = tuple(
    Path(p)
    for p in (
        "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
        "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd",
    )
)  # fmt: skip
SANDBOX_UID = 65534  # "nobody"
SANDBOX_TMP_MB = 256.0  # the size of the sandbox's /tmp and /dev/shm (RAM) when bwrap has --size
#: Where what is not protected without a sandbox is listed (a guide of the course book).
WHAT_IS_NOT_PROTECTED = (
    "the lecturer's guide (docs/lecturer.md), 'The sandbox and what it protects'"
)
NO_SANDBOX_NOTE = (
    f"graded WITHOUT a sandbox (bubblewrap not available): see {WHAT_IS_NOT_PROTECTED}"
)


@dataclass(frozen=True)
class Sandbox:
    """The isolation in use: ``kind`` is ``"bubblewrap"`` or ``"none"`` (with the reason)."""

    kind: str
    executable: str | None = None
    reason: str = ""
    hide: tuple[Path, ...] = field(default=())  # extra folders to hide (gradebook, exports)
    tmp_mb: float = SANDBOX_TMP_MB

    @property
    def isolated(self) -> bool:
        return self.kind == "bubblewrap"

    def describe(self) -> str:
        """One line for the lecturer."""
        if self.isolated:
            return f"sandbox: bubblewrap ({self.executable}): no network, no view of other files"
        return f"WARNING: grading without a sandbox ({self.reason}); see {WHAT_IS_NOT_PROTECTED}"

    def command(
        self,
        argv: list[str],
        *,
        scratch: Path,
        keep: list[Path],
        hide: list[Path],
        seccomp_fd: int | None = None,
    ) -> tuple[list[str], Path]:
        """The command that runs ``argv`` isolated, and the working folder it runs in.

        ``keep``: files or folders the worker needs that may lie inside a hidden folder
        (bound back read-only). ``hide``: folders it must not see. ``seccomp_fd``: an
        inherited descriptor holding :func:`seccomp_program`.
        """
        if not self.isolated or self.executable is None:
            return argv, scratch
        size = int(self.tmp_mb * 2**20) if _supports_size(self.executable) else None
        options = _bwrap_arguments(scratch, keep, [*hide, *self.hide], size)
        if seccomp_fd is not None:
            options += ["--seccomp", str(seccomp_fd)]
        return [self.executable, *options, "--", *argv], Path(SCRATCH_IN_SANDBOX)


# System V IPC objects (shared memory, message queues, semaphores) live in the sandbox's
# IPC namespace, held by no process: memory the grader's watch cannot see. Honest code
# uses none (multiprocessing's are POSIX, files in /dev/shm), so the sandbox refuses them.
_SYSV_GET = {  # audit architecture -> (shmget, semget, msgget) system call numbers
    "x86_64": (0xC000003E, (29, 64, 68)),
    "aarch64": (0xC00000B7, (194, 190, 186)),
}


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic-BPF seccomp filter (as bubblewrap's ``--seccomp`` reads it) failing
    ``shmget``, ``semget`` and ``msgget`` with EPERM, and every system call of another
    ABI (32-bit, x32) with EPERM; None on a machine it does not know."""
    import struct

    known = _SYSV_GET.get(machine or os.uname().machine)
    if known is None:
        return None
    arch, calls = known
    load, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET
    allow, refuse = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO|EPERM
    n = len(calls)
    program = [
        (load, 0, 0, 4),  # the architecture
        (jeq, 1, 0, arch),
        (ret, 0, 0, refuse),  # another ABI
        (load, 0, 0, 0),  # the system call number
        (jset, n + 1, 0, 0x40000000),  # x32 on x86_64: refused
        *[(jeq, n - k, 0, nr) for k, nr in enumerate(calls)],
        (ret, 0, 0, allow),
        (ret, 0, 0, refuse),
    ]
    return b"".join(struct.pack("=HBBI", *op) for op in program)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@functools.lru_cache(maxsize=4)
def _supports_size(executable: str) -> bool:
    """True when this bubblewrap has ``--size`` (0.7+): a size-limited ``/tmp``."""
    try:
        done = subprocess.run([executable, "--help"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def _bind_or_mask(path: Path, option: str, source: str | None = None) -> list[str]:
    """``--ro-bind``/``--symlink`` a system path as it is (a link stays a link)."""
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    return [option, source or str(path), str(path)]


def _bwrap_arguments(
    scratch: Path, keep: list[Path], hide: list[Path], tmp_bytes: int | None = None
) -> list[str]:
    """bubblewrap's options: an ALLOWLIST of folders, mounted in order (later covers earlier).

    Visible, read-only: the system folders (:data:`SYSTEM_FOLDERS`, minus the secrets in
    :data:`MASKED`) and ``keep`` (the Python environment, the package, runner files).
    Inside those, every folder of ``hide`` (the exercise references, ``solutions/``…) is
    covered by an empty one. Nothing else of the machine exists in the sandbox: not the
    course folder, its ``.git``, other students' copies, the gradebook, any ``TMPDIR``.
    The process runs as uid/gid 65534 (nobody) in a user namespace.
    """
    args = ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid"]
    args += [str(SANDBOX_UID), "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for folder in SYSTEM_FOLDERS:
        if folder.exists() or folder.is_symlink():
            args += _bind_or_mask(folder, "--ro-bind")
    for secret in MASKED:
        if secret.is_symlink() or not secret.exists():
            continue
        args += (
            ["--tmpfs", str(secret)] if secret.is_dir() else ["--ro-bind", "/dev/null", str(secret)]
        )
    args += ["--dev", "/dev", "--proc", "/proc"]
    for ram_folder in ("/tmp", "/dev/shm"):  # RAM folders of their own, size-limited
        args += ["--perms", "1777"]
        if tmp_bytes is not None:
            args += ["--size", str(int(tmp_bytes))]
        args += ["--tmpfs", ram_folder]
    shown: list[Path] = [*SYSTEM_FOLDERS]
    for path in sorted({Path(os.path.abspath(k)) for k in keep}, key=lambda p: len(p.parts)):
        if path.exists() and not any(_within(path, s) for s in shown):
            args += ["--ro-bind", str(path), str(path)]
            shown.append(path)
    for path in sorted({Path(os.path.abspath(h)) for h in hide}, key=lambda p: len(p.parts)):
        if path == Path("/") or any(_within(s, path) for s in SYSTEM_FOLDERS):
            continue  # never cover the worker's own programs
        if any(_within(path, s) for s in shown) and path.exists():
            args += (
                ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
            )
    args += ["--bind", str(scratch), SCRATCH_IN_SANDBOX, "--chdir", SCRATCH_IN_SANDBOX]
    # bubblewrap's own / and /dev are RAM folders the worker owns: read-only, so that only
    # the size-limited /tmp and /dev/shm (and the scratch copy) take what it writes.
    return [*args, "--remount-ro", "/dev", "--remount-ro", "/"]


@functools.lru_cache(maxsize=4)
def _bwrap_works(executable: str) -> str:
    """'' when bubblewrap can start a process here, else why not (e.g. no user namespaces)."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    keep = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable)]
    argv = [executable, *_bwrap_arguments(scratch, keep, []), "--", sys.executable, "-c", "0"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} could not run: {exc}"
    if done.returncode != 0:
        return f"{executable} failed: {done.stderr.decode(errors='replace').strip()[:200]}"
    return ""


def choose(mode: str = "auto") -> Sandbox:
    """The sandbox for ``mode``: ``auto`` (bubblewrap if it works), ``bubblewrap``, ``none``.

    ``bubblewrap`` raises :class:`RuntimeError` when it is missing or does not work.
    """
    if mode == "none":
        return Sandbox("none", reason="--sandbox none")
    executable = shutil.which("bwrap")
    problem = "bwrap is not installed" if executable is None else _bwrap_works(executable)
    if not problem:
        return Sandbox("bubblewrap", executable)
    if mode == "bubblewrap":
        raise RuntimeError(
            f"a sandbox is required but {problem}; install bubblewrap "
            "(Debian/Ubuntu: apt install bubblewrap)"
        )
    return Sandbox("none", reason=problem)
