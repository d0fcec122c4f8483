"""Read: which notebooks, whose, and a private copy of each before any student code runs.

:func:`collect_submissions` finds the notebooks; :func:`stage` copies and hashes them
before the batch (looking with ``lstat`` first, so nothing is opened that cannot be
graded); :func:`read_facts` reads one staged notebook — per submission, in its own
grading thread — in a limited child process (:mod:`.notebook_facts`). Next stage:
:mod:`.planning`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import unicodedata
from pathlib import Path

from . import notebook_facts
from .notebook_facts import CHAPTER_FILE_RE, MAX_CODE_BYTES
from .results import Staged, Submission
from .safetext import one_line, printable

MAX_COPIED_FILES = 200  # files of a student's own folder copied along, at most
MAX_COPIED_BYTES = 50 * 2**20  # a student's folder copied into the scratch folder, at most
MAX_NOTEBOOK_BYTES = MAX_CODE_BYTES  # more code is not graded ("too large to grade")
MAX_STORED_BYTES = 100 * 2**20  # a larger file (outputs included) is not even read
READ_MEMORY_MB = 1024.0  # the child that reads a notebook (see read_facts)
READ_SECONDS = 60.0
MAX_FOLDER_DEPTH = 16  # folders searched below a folder given on the command line
MAX_NOTEBOOKS_PER_STUDENT = 20  # more are not graded (the first ones by name are)
MAX_STUDENT_BYTES = 100 * 2**20  # staged for one student in all (notebooks + their files)


def _notebooks_under(folder: Path, warnings: list[str]) -> list[Path]:
    """Every ``.ipynb`` below ``folder``, at most :data:`MAX_FOLDER_DEPTH` levels down.

    Walked with a stack, not recursion (a tree 1 100 levels deep is just deep); a link to
    a folder is not followed, a folder that cannot be listed or lies deeper is skipped, each
    with a warning for the lecturer. Whatever is named ``*.ipynb`` is returned, regular
    file or not: :func:`stage` refuses the others with a status.
    """
    found: list[Path] = []
    stack = [(folder, 0)]
    too_deep = 0
    while stack:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"could not list {here} ({exc.strerror}): not searched")
            continue
        for entry in entries:
            if entry.is_symlink() and entry.is_dir():  # maybe another student's folder
                warnings.append(f"{entry.path} is a link to a folder: not searched")
            elif entry.is_dir(follow_symlinks=False):
                if entry.name == ".ipynb_checkpoints":
                    continue
                if depth >= MAX_FOLDER_DEPTH:
                    too_deep += 1
                    continue
                stack.append((Path(entry.path), depth + 1))
            elif (
                entry.name.endswith(".ipynb")
                and ".new." not in entry.name
                and ".backup-" not in entry.name
            ):
                found.append(Path(entry.path))
    if too_deep:
        warnings.append(
            f"{too_deep} folders in {folder} lie more than {MAX_FOLDER_DEPTH} levels deep: "
            "not searched"
        )
    return sorted(found)


def collect_submissions(
    paths: list[str | Path], warnings: list[str] | None = None
) -> list[Submission]:
    """Notebooks named on the command line, or found (recursively) in folders.

    Whose: in a folder given on the command line, ``<folder>/<student>/….ipynb`` belongs to
    ``<student>`` and ``<folder>/<name>.ipynb`` to ``<name>``; a file named directly belongs
    to its folder when it carries a course notebook name (``03_….ipynb``), else to its stem.
    What could not be searched is added to ``warnings``.
    """
    warnings = [] if warnings is None else warnings
    found: dict[str, Submission] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not path.is_symlink():
            for nb in _notebooks_under(path, warnings):
                rel = nb.relative_to(path)
                own = len(rel.parts) > 1
                student = rel.parts[0] if own else nb.stem
                sub = Submission(nb, student, rel.as_posix(), own_folder=own)
                found.setdefault(sub.key, sub)
        elif os.path.lexists(path) and not path.is_dir():
            parent = Path(os.path.abspath(path)).parent
            named_by_course = CHAPTER_FILE_RE.match(path.name)
            student = parent.name if named_by_course else path.stem
            name = f"{parent.name}/{path.name}" if named_by_course else path.name
            sub = Submission(path, student, name, own_folder=bool(named_by_course))
            found.setdefault(sub.key, sub)
        else:
            raise FileNotFoundError(f"no such notebook or folder: {printable(raw)}")
    return list(found.values())


def _copy_regular_files(source: Path, target: Path, budget: int) -> int:
    """Copy the regular files directly in ``source`` (no links, no sub-folders, no pipes),
    the first :data:`MAX_COPIED_FILES` by name, within ``budget`` bytes; return what is left."""
    copied = 0
    for entry in sorted(source.iterdir()):
        info = os.lstat(entry)
        if stat.S_ISREG(info.st_mode) and info.st_size <= budget and not entry.suffix == ".ipynb":
            budget -= _copy_file(entry, target / entry.name, info, budget)[1]
            copied += 1
            if copied >= MAX_COPIED_FILES:
                break
    return budget


def _copy_file(source: Path, target: Path, info: os.stat_result, limit: int) -> tuple[str, int]:
    """Copy and hash a regular file without ever blocking or following a link; return
    (sha256, bytes). Opened non-blocking and no-follow, then checked to be the very file
    ``info`` describes (a swap between ``lstat`` and ``open`` is refused); at most
    ``limit`` bytes are read (a file that grows past it is refused)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(source, flags)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            info.st_dev,
            info.st_ino,
        ):
            raise OSError(errno.ESTALE, "the file changed while it was being read")
        digest, size = hashlib.sha256(), 0
        with open(target, "wb") as out:
            while chunk := os.read(fd, 2**20):
                size += len(chunk)
                if size > limit:
                    raise OSError(errno.EFBIG, "the file grew while it was being read")
                digest.update(chunk)
                out.write(chunk)
        return digest.hexdigest(), size
    finally:
        os.close(fd)


def _unread_fingerprint(info: os.stat_result) -> str:
    """What identifies a file that is refused unread: a changed file is tried again."""
    return f"unread:{info.st_size}:{info.st_mtime_ns}"


def _refusal(sub: Submission, info: os.stat_result, count: int, left: int) -> str:
    """Why a notebook is not staged at all (decided from ``lstat``, before opening it)."""
    if stat.S_ISLNK(info.st_mode):
        return "the notebook is a symbolic link: not graded"
    if not stat.S_ISREG(info.st_mode):
        return "the notebook is not a regular file (a named pipe, device or socket): not graded"
    if count > MAX_NOTEBOOKS_PER_STUDENT:
        return (
            f"not graded: more than {MAX_NOTEBOOKS_PER_STUDENT} notebooks from this "
            "student (the first ones by name are graded)"
        )
    if info.st_size > MAX_STORED_BYTES:
        return (
            f"too large to grade ({info.st_size / 2**20:.1f} MB on disk; at most "
            f"{_mb(MAX_STORED_BYTES)} with outputs, {_mb(MAX_NOTEBOOK_BYTES)} of code)"
        )
    if info.st_size > left:
        return f"not graded: this student's files exceed {_mb(MAX_STUDENT_BYTES)} in all"
    return ""


def stage(submissions: list[Submission], root: Path) -> list[Staged]:
    """Copy and hash every submission into ``root`` (private) before any student code runs.

    Each notebook is looked at with ``lstat`` first and opened only when it is a regular
    file of a size that can be graded (a named pipe is never opened, a 100 GB sparse file
    never read); it is read once, streaming, into ``root/NNNNN.ipynb`` and hashed on the
    way. A notebook in a folder of the student's own brings that folder's other regular
    files (data, helper modules) along into ``root/NNNNN/``; one in a shared folder comes
    alone. A symbolic link is never followed: it may point at another student's work; a
    hard link to another submission in the batch is graded, with a note on both naming
    the other (nothing tells which name is the author's); so is a student's name that reads
    the same as another's (:func:`looks_like`). A failure staging one notebook
    is that notebook's status, never the batch's.
    """
    staged = []
    count: dict[str, int] = {}
    budget: dict[str, int] = {}
    inodes: dict[tuple[int, int], list[int]] = {}
    for k, sub in enumerate(submissions):
        count[sub.student] = count.get(sub.student, 0) + 1
        left = budget.setdefault(sub.student, MAX_STUDENT_BYTES)
        try:
            info = os.lstat(sub.path)
        except OSError as exc:
            staged.append(Staged(sub, "", None, f"the notebook cannot be read ({exc.strerror})"))
            continue
        problem = _refusal(sub, info, count[sub.student], left)
        if problem:  # a fixed file is graded on the next run: it changes the fingerprint
            staged.append(Staged(sub, _unread_fingerprint(info), None, problem))
            continue
        folder, notebook = root / f"{k:05d}", root / f"{k:05d}.ipynb"
        try:
            sha256, size = _copy_file(sub.path, notebook, info, MAX_STORED_BYTES)
            folder.mkdir()
            left -= size
            if sub.own_folder:
                cap = min(MAX_COPIED_BYTES - size, left)
                left -= cap - _copy_regular_files(Path(sub.path).parent, folder, cap)
                if size <= cap:  # the notebook under its own name too, when it fits
                    shutil.copyfile(notebook, folder / Path(sub.path).name)
                    left -= size
        except Exception as exc:  # OSError mostly; never the batch's failure
            why = getattr(exc, "strerror", None) or type(exc).__name__
            staged.append(
                Staged(sub, _unread_fingerprint(info), None, f"the notebook cannot be read ({why})")
            )
            continue
        budget[sub.student] = left
        staged.append(Staged(sub, sha256, folder, notebook=notebook))
        inodes.setdefault((info.st_dev, info.st_ino), []).append(len(staged) - 1)
    _name_lookalikes(staged)
    for same in inodes.values():
        for i in same if len(same) > 1 else ():
            others = ", ".join(staged[j].submission.name for j in same if j != i)
            staged[i].notes.append(
                f"this notebook is the same file as {others} (a hard link): the same work "
                "is graded for each; check whose it is"
            )
    return staged


def looks_like(name: str) -> str:
    """A name as a reader sees it: compatibility forms folded (NFKC: ``ﬁ`` is ``fi``, a
    composed ``é`` is ``e`` + accent), case and runs of white space ignored."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def _name_lookalikes(staged: list[Staged]) -> None:
    """Note, on each, students whose names differ but read the same ("ann" and "Ann ", a
    composed and a decomposed "café"): a spreadsheet or LMS would show or match them as
    one. Letters of other scripts that look alike (a Cyrillic "а") are not caught."""
    seen: dict[str, set[str]] = {}
    for st in staged:
        seen.setdefault(looks_like(st.submission.student), set()).add(st.submission.student)
    for st in staged:
        others = sorted(seen[looks_like(st.submission.student)] - {st.submission.student})
        if others:
            st.notes.append(
                "this student's name reads the same as another's ("
                + ", ".join(f"'{o}'" for o in others)
                + "): they are graded apart; check which is whose"
            )


def _mb(n: int) -> str:
    return f"{n / 2**20:g} MB"


def read_facts(notebook: Path) -> dict:
    """:func:`~autodiff_lab.grading.notebook_facts.file_facts` of a staged notebook,
    computed in a child process limited to :data:`READ_MEMORY_MB` and
    :data:`READ_SECONDS` of CPU (twice that of wall clock): nothing a student wrote is parsed in the
    grader's own process, so no file can make it slow, big, or hold the GIL."""
    argv = [
        sys.executable, "-I", "-S", notebook_facts.__file__, str(notebook),
        str(MAX_NOTEBOOK_BYTES), str(READ_MEMORY_MB), str(READ_SECONDS),
    ]  # fmt: skip
    limits = f"{READ_MEMORY_MB:g} MB, {READ_SECONDS:g} s"
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=2 * READ_SECONDS
        )
    except subprocess.TimeoutExpired:
        return {"problem": f"could not read the notebook within the grader's limits ({limits})"}
    if done.returncode != 0:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["killed"]
        return {
            "problem": f"could not read the notebook within the grader's limits ({limits}): "
            + one_line(last[0], 120)
        }
    return json.loads(done.stdout)
