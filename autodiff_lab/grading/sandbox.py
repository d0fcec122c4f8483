"""Where a student's process may look: bubblewrap's namespaces, or (said plainly) nothing.

With `bubblewrap <https://github.com/containers/bubblewrap>`_ (Debian: ``apt install
bubblewrap``) every worker runs with:

- new PID, mount, network, IPC and UTS namespaces (``--unshare-all``): it sees only its
  own processes (not the grader, not other students' workers), has no network, and every
  process it starts is killed when it ends (``--die-with-parent``; the namespace's first
  process takes all others with it);
- the whole filesystem read-only (``--ro-bind / /``, all capabilities dropped), so the
  Python environment cannot be changed (no ``.pth`` file, no edited package);
- an empty ``/tmp`` and empty folders over the course folder, the home folder, the
  submissions, the gradebook and its exports, ``solutions/`` and the exercise references
  (``autodiff_lab/grading/exercises``); the Python environment and the package's student
  side are then bound back read-only;
- its own scratch copy of its submission, writable, at :data:`SCRATCH_IN_SANDBOX`.

Without bubblewrap the worker is a plain process of the grader's user: the grader says so
(a line at start, a column of the CSV, a line in each report), and ``--require-sandbox``
refuses to grade. What is then not protected is listed in the README ("Exercises and
grades").
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
    Path(p) for p in ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc")
)
NO_SANDBOX_NOTE = "graded WITHOUT a sandbox (bubblewrap not available): see the README"


@dataclass(frozen=True)
class Sandbox:
    """The isolation in use: ``kind`` is ``"bubblewrap"`` or ``"none"`` (with the reason)."""

    kind: str
    executable: str | None = None
    reason: str = ""
    hide: tuple[Path, ...] = field(default=())  # extra folders to hide (gradebook, exports)

    @property
    def isolated(self) -> bool:
        return self.kind == "bubblewrap"

    def describe(self) -> str:
        """One line for the lecturer."""
        if self.isolated:
            return f"sandbox: bubblewrap ({self.executable}): no network, no view of other files"
        return f"WARNING: grading without a sandbox ({self.reason}); see the README"

    def command(
        self, argv: list[str], *, scratch: Path, keep: list[Path], hide: list[Path]
    ) -> tuple[list[str], Path]:
        """The command that runs ``argv`` isolated, and the working folder it runs in.

        ``keep``: files or folders the worker needs that may lie inside a hidden folder
        (bound back read-only). ``hide``: folders it must not see.
        """
        if not self.isolated or self.executable is None:
            return argv, scratch
        return [self.executable, *_bwrap_arguments(scratch, keep, [*hide, *self.hide])] + [
            "--",
            *argv,
        ], Path(SCRATCH_IN_SANDBOX)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _bwrap_arguments(scratch: Path, keep: list[Path], hide: list[Path]) -> list[str]:
    """bubblewrap's options; mounts apply in order, so later ones cover earlier ones."""
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    tmp = Path("/tmp")
    inner = [p for p in hide if any(_within(p, k) for k in keep)]
    outer = sorted(
        {p for p in hide if p not in inner and not any(_within(s, p) for s in SYSTEM_FOLDERS)},
        key=lambda p: len(p.parts),
    )
    hidden = [tmp]
    for folder in outer:
        if folder.is_dir() and not any(_within(folder, h) for h in hidden):
            args += ["--tmpfs", str(folder)]
            hidden.append(folder)
    for path in sorted(set(keep), key=lambda p: len(p.parts)):
        if path.exists() and any(_within(path, h) for h in hidden):
            args += ["--ro-bind", str(path), str(path)]
    for folder in sorted(set(inner), key=lambda p: len(p.parts)):
        if folder.is_dir():
            args += ["--tmpfs", str(folder)]
    args += ["--bind", str(scratch), SCRATCH_IN_SANDBOX, "--chdir", SCRATCH_IN_SANDBOX]
    return args


@functools.lru_cache(maxsize=4)
def _bwrap_works(executable: str) -> str:
    """'' when bubblewrap can start a process here, else why not (e.g. no user namespaces)."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    argv = [executable, *_bwrap_arguments(scratch, [], []), "--", sys.executable, "-c", "0"]
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
