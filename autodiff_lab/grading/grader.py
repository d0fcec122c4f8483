"""Grading submitted notebooks: read → plan → run isolated → judge → record.

- **Read.** Before the batch starts every submission is hashed and copied into the
  grader's private folder (:func:`stage`); a symbolic link is not followed (it is
  recorded as unreadable), so no student can take, or later change, another's notebook.
- **Plan** (here, in the grader). Which exercises the notebook answers; their cases drawn
  from the batch's secret seed (:func:`grade_batch` draws one per batch, records it in the
  gradebook, and every student gets the same cases, so identical notebooks get identical
  points); the reference values.
- **Run isolated** (:mod:`~autodiff_lab.grading.supervise`, in the
  :mod:`~autodiff_lab.grading.sandbox`). A fresh worker per submission runs the cells in a
  scratch copy and sends back plain-data answers to the case inputs. When a cell or an
  exercise makes the worker die or run too long, a new worker skips it, so the rest is
  still graded; the whole notebook has a total time cap.
- **Judge** (:mod:`~autodiff_lab.grading.scoring`, here). Answers against references;
  nothing the student's process does changes a verdict, only its own answers.
- **Record** (:mod:`~autodiff_lab.grading.gradebook`), one transaction per submission.
  Each submission is marked "in progress" first: if the grader itself is killed, the next
  run records that submission as crashed (after one more try alone) and goes on.
"""

from __future__ import annotations

import copy
import datetime as dt
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from . import notebook_facts, registry
from .checking import case_seed
from .gradebook import NOT_GRADED
from .notebook_facts import MAX_CODE_BYTES, code_facts, code_sources
from .plaindata import from_plain, to_plain
from .safetext import one_line, printable, storable_path
from .sandbox import NO_SANDBOX_NOTE, Sandbox, choose
from .scoring import (
    CRASH,
    ERROR,
    NOT_IMPLEMENTED,
    NOT_RUN,
    TIMEOUT,
    VALUE,
    ExerciseResult,
    Outcome,
    Status,
    judge_exercise,
)
from .spec import Case, Exercise
from .supervise import MAX_PROCESSES, WorkerRun, run_worker

CHAPTER_FILE_RE = re.compile(r"^(\d+)_")
DEFAULT_TIMEOUT = 60.0
DEFAULT_NOTEBOOK_TIMEOUT = 600.0
DEFAULT_MEMORY_MB = 2048.0
OUTPUT_LIMIT_MB = 64.0
MAX_COPIED_BYTES = 50 * 2**20  # a student's folder copied into the scratch folder, at most
MAX_NOTEBOOK_BYTES = MAX_CODE_BYTES  # more code is not graded ("too large to grade")
MAX_STORED_BYTES = 100 * 2**20  # a larger file (outputs included) is not even read
READ_MEMORY_MB = 1024.0  # the child that reads a notebook (see read_facts)
READ_SECONDS = 60.0
MAX_FOLDER_DEPTH = 16  # folders searched below a folder given on the command line
MAX_NOTE_CHARS = 400  # one note, at most
INFRASTRUCTURE_ATTEMPTS = 3  # tries at starting a worker before "not graded" (see below)
INFRASTRUCTURE_PAUSE = 1.0  # seconds before the second try (twice that before the third)
MAX_NOTEBOOKS_PER_STUDENT = 20  # more are not graded (the first ones by name are)
MAX_STUDENT_BYTES = 100 * 2**20  # staged for one student in all (notebooks + their files)
MAX_NOTES = 20  # notes kept per notebook (the rest are counted)


class ExerciseDefinitionError(ValueError):
    """An exercise the grader cannot hand to a worker safely (see :func:`runner_spec`)."""


@dataclass
class Submission:
    """One notebook to grade, whose it is, and its name as the student knows it."""

    path: Path
    student: str
    name: str = ""  # e.g. "ann/03_backprop.ipynb": relative to the folder given, never absolute
    own_folder: bool = False  # the notebook sits in a folder of this student's alone

    def __post_init__(self) -> None:
        # Names are shown and stored: control characters and undecodable bytes escaped.
        self.name = printable(self.name or self.path.name)
        self.student = printable(self.student)

    @property
    def key(self) -> str:
        """The gradebook's key: the absolute path (stays on the lecturer's machine)."""
        return storable_path(os.path.abspath(self.path))


@dataclass
class Staged:
    """A submission hashed and copied before the batch: ``folder`` holds the private copy."""

    submission: Submission
    sha256: str  # or "unread:<size>:<mtime>" for a file refused before reading
    folder: Path | None  # the files the worker gets (the student's own folder's)
    problem: str = ""  # why it cannot be graded (a symbolic link, unreadable…)
    notebook: Path | None = None  # the private copy of the notebook file, as submitted
    notes: list[str] = field(default_factory=list)  # e.g. a hard link to another submission


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
    status: str = "graded"  # or Status.UNREADABLE / NO_EXERCISES / CRASHED (no exercises run)
    sandbox: str = "bubblewrap"

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)


@dataclass
class Settings:
    """How to grade: limits, the sandbox, the folders the workers must not see."""

    timeout: float = DEFAULT_TIMEOUT
    notebook_timeout: float = DEFAULT_NOTEBOOK_TIMEOUT
    memory_mb: float = DEFAULT_MEMORY_MB
    sandbox: Sandbox = field(default_factory=choose)  # bubblewrap when it works here
    hide: list[Path] = field(default_factory=list)
    python: str = sys.executable
    max_processes: int = MAX_PROCESSES


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


# --- read: which notebooks, whose, copied before the batch -----------------------------


def _notebooks_under(folder: Path, warnings: list[str]) -> list[Path]:
    """Every ``.ipynb`` below ``folder``, at most :data:`MAX_FOLDER_DEPTH` levels down.

    Walked with a stack, not recursion (a tree 1 100 levels deep is just deep); links to
    folders are not followed; a folder that cannot be listed, or lies deeper, is skipped
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
            if entry.is_dir(follow_symlinks=False):
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
    """Copy the regular files directly in ``source`` (no links, no sub-folders, no pipes)."""
    for entry in sorted(source.iterdir()):
        info = os.lstat(entry)
        if stat.S_ISREG(info.st_mode) and info.st_size <= budget and not entry.suffix == ".ipynb":
            budget -= _copy_file(entry, target / entry.name, info, budget)[1]
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
    the other (nothing tells which name is the author's). A failure staging one notebook
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
    for same in inodes.values():
        for i in same if len(same) > 1 else ():
            others = ", ".join(staged[j].submission.name for j in same if j != i)
            staged[i].notes.append(
                f"this notebook is the same file as {others} (a hard link): the same work "
                "is graded for each; check whose it is"
            )
    return staged


def _mb(n: int) -> str:
    return f"{n / 2**20:g} MB"


# --- plan: what the notebook answers, its cases and their references ------------------


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


def answered_exercises(nb: dict, file_name: str) -> tuple[list[Exercise], list[str]]:
    """:func:`exercises_from_facts` of a notebook read in this process (the course's own
    notebooks and tests; a submission is read by :func:`read_facts`)."""
    return exercises_from_facts(code_facts(code_sources(nb)), file_name)


def exercises_from_facts(facts: dict, file_name: str) -> tuple[list[Exercise], list[str]]:
    """The exercises a notebook answers, and notes for the lecturer.

    Its chapter's (from ``NN_`` in the file name), every id it mentions in
    ``check("N.M", …)``, ``# Exercise N.M`` or a stub message, and every exercise whose
    answer it defines (``def dual_mul``): a renamed notebook with its checks deleted counts.
    """
    ids = set(facts["mentioned"])
    notes: list[str] = []
    known = {e.id: e for e in registry.all_exercises()}
    chapter = CHAPTER_FILE_RE.match(file_name)
    if chapter:
        ids.update(i for i, e in known.items() if e.chapter == int(chapter.group(1)))
    defined = set(facts["defined"])
    ids.update(i for i, e in known.items() if e.answer in defined)
    unknown = sorted(ids - set(known), key=_id_key)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" * (len(unknown) > 5))
        which = "exercise" if len(unknown) == 1 else "exercises"
        verb = "does" if len(unknown) == 1 else "do"
        notes.append(f"the notebook mentions {which} {shown}, which {verb} not exist")
    if facts["internals"]:
        notes.append("the notebook uses the grader's internals (registry or references): read it")
    chosen = sorted((known[i] for i in ids if i in known), key=lambda e: e.sort_key)
    notes += library_notes(facts, chosen)
    if chosen and facts["not_analysed"]:
        cells = ", ".join(str(n) for n, _ in facts["not_analysed"][:5])
        size = sum(b for _, b in facts["not_analysed"]) / 2**10
        notes.append(
            f"code cells {cells} ({size:.0f} KB) are too large to be searched for library "
            "calls: read them"
        )
    return chosen, notes


def _id_key(exercise_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in exercise_id.split("."))


def library_calls(cells: list[str], exercises: list[Exercise]) -> list[str]:
    """:func:`library_notes` of code read in this process."""
    return library_notes(code_facts(cells), exercises)


def library_notes(facts: dict, exercises: list[Exercise]) -> list[str]:
    """Notes for answers whose body calls a FUNCTION of the course library (``autodiff_lab``).

    Decision (README, "Exercises and grades"): calling the library's own function
    (``ops.softmax`` for 4.3, ``functional.hvp`` for 6.3…) is NOT refused — the grader
    checks answers, and later exercises build on the library — but the report names what
    was called, for the lecturer to judge. Classes (``Tensor``, ``Value``) are not noted.
    An answer whose body uses another automatic-differentiation library (PyTorch, JAX,
    TensorFlow, autograd, micrograd: ``torch.tile(...).backward()`` for 4.1) is noted the
    same way. Names are followed through aliases (``import … as j``, ``F =
    autodiff_lab.functional``, ``j = jacfwd``: the note gives the function's real name)
    and into the notebook's own functions the answer calls.
    """
    import inspect

    resolve = _chain_resolver(facts)
    functions = facts["functions"]
    notes = []
    for exercise in exercises:
        if exercise.answer not in functions:
            continue
        bodies, todo = set(), [exercise.answer]
        while todo:  # the answer and every notebook function it refers to, once each
            name = todo.pop()
            if name in bodies or name not in functions:
                continue
            bodies.add(name)
            todo += functions[name]["names"]
        used, others = set(), set()
        for chain in (c for name in sorted(bodies) for c in functions[name]["chains"]):
            obj, path, foreign = resolve(chain)
            if foreign:
                others.add(".".join(chain))
            elif inspect.isfunction(obj) and not obj.__module__.startswith("autodiff_lab.grading"):
                label = ".".join(path)
                if path[-1] != obj.__name__:
                    label += f" ({obj.__module__}.{obj.__qualname__})"
                used.add(label)
        if used:
            notes.append(
                f"exercise {exercise.id}: `{exercise.answer}` calls the library's own "
                f"{', '.join(sorted(used)[:8])} (allowed; check that it does what the "
                "exercise asked)"
            )
        if others:
            notes.append(
                f"exercise {exercise.id}: `{exercise.answer}` uses another autodiff library: "
                f"{', '.join(sorted(others)[:5])} (allowed; check that it does what the "
                "exercise asked)"
            )
    return notes


def _chain_resolver(facts: dict) -> Callable[[list[str]], tuple[Any, list[str], bool]]:
    """``resolve(["F", "jacfwd"])`` -> (the course library's object or None, the part of the
    chain that named it, whether the chain starts at another autodiff library)."""
    import importlib

    def load(module: str, name: str | None) -> Any:
        if module != "autodiff_lab" and not module.startswith("autodiff_lab."):
            return None
        for attempt in ((f"{module}.{name}", None), (module, name)) if name else ((module, None),):
            try:
                found: Any = importlib.import_module(attempt[0])
                return getattr(found, attempt[1]) if attempt[1] else found
            except Exception:
                continue
        return None

    def base(name: str, depth: int) -> tuple[Any, bool]:
        if name in facts["foreign"]:
            return None, True
        if name in facts["imports"]:
            return load(*facts["imports"][name]), False
        if name in facts["aliases"] and depth < 8:  # a = b; b = a ends here
            obj, _, foreign = walk(facts["aliases"][name], depth + 1)
            return obj, foreign
        return None, False

    def walk(chain: list[str], depth: int = 0) -> tuple[Any, list[str], bool]:
        obj, foreign = base(chain[0], depth)
        path = chain[:1]
        for attr in chain[1:]:
            if obj is None or inspect.isfunction(obj):
                break
            obj, path = getattr(obj, attr, None), [*path, attr]
        return obj, path, foreign

    import inspect

    return walk


def exercises_in(nb: dict, path: Path) -> tuple[list[Exercise], list[str]]:
    """:func:`answered_exercises` of a notebook file."""
    return answered_exercises(nb, Path(path).name)


def runner_spec(exercise: Exercise) -> dict:
    """How the worker finds ``exercise.run``: a module-level function in a module that
    holds no references (no ``EXERCISES``), imported by name or loaded from its file."""
    run = exercise.run
    module = sys.modules.get(getattr(run, "__module__", ""), None)
    name = getattr(run, "__name__", "")
    if module is None or getattr(module, name, None) is not run:
        raise ExerciseDefinitionError(
            f"exercise {exercise.id}: run must be a module-level function (got {run!r}), so "
            "the student's process can import it without the exercise"
        )
    if hasattr(module, "EXERCISES"):
        raise ExerciseDefinitionError(
            f"exercise {exercise.id}: run lives in {module.__name__}, which defines the "
            "exercises (and their references); move it to a module of runners"
        )
    return {"module": module.__name__, "file": getattr(module, "__file__", None), "name": name}


# --- plan ---------------------------------------------------------------------------------


@dataclass
class Plan:
    """What one notebook is graded on: its cells, and per exercise the cases and references."""

    cells: list[str]
    exercises: list[Exercise]
    cases: dict[str, list[Case]]
    expected: dict[str, list[Any]]
    notes: list[str]


def plan_submission(staged: Staged, seed: int) -> Plan | SubmissionResult:
    """The plan for a staged notebook, or the result of one that cannot be run at all."""
    sub = staged.submission

    def without(status: Status, note: str) -> SubmissionResult:
        notes = capped_notes([*staged.notes, note])
        return SubmissionResult(sub, [], staged.sha256, seed, _now(), 0.0, notes, str(status))

    if staged.notebook is None:
        return without(Status.UNREADABLE, staged.problem)
    facts = read_facts(staged.notebook)
    if "problem" in facts:
        return without(Status.UNREADABLE, facts["problem"])
    exercises, notes = exercises_from_facts(facts, Path(sub.path).name)
    if not exercises:
        return without(Status.NO_EXERCISES, "no exercises found in this notebook")
    cases, expected = {}, {}
    for exercise in exercises:
        cases[exercise.id] = exercise.cases(np.random.default_rng(case_seed(exercise.id, seed)))
        expected[exercise.id] = [
            exercise.reference(copy.deepcopy(c.inputs)) for c in cases[exercise.id]
        ]
    return Plan(facts["cells"], exercises, cases, expected, [*staged.notes, *notes])


def capped_notes(notes: list[str], dropped: int = 0) -> list[str]:
    """Notes as a report may show them: each one line of at most :data:`MAX_NOTE_CHARS`
    (control characters escaped: a note cannot forge another), :data:`MAX_NOTES` at most,
    then how many more there were."""
    lines = [one_line(n, MAX_NOTE_CHARS) for n in notes]
    dropped += max(0, len(lines) - MAX_NOTES)
    lines = lines[:MAX_NOTES]
    if dropped:
        lines.append(f"... and {dropped} more notes like these (not shown)")
    return lines


# --- run isolated -------------------------------------------------------------------------


def _paths_workers_need(exercises: list[Exercise]) -> list[Path]:
    """Read-only folders and files a worker needs, bound back inside hidden folders."""
    import autodiff_lab

    package = Path(autodiff_lab.__file__).parent
    keep = {Path(sys.prefix), Path(sys.base_prefix), package}
    # A PYTHONPATH entry holding the package (an uninstalled checkout) would show the
    # whole course folder, .git included: only the package itself is shown then.
    keep.update(
        Path(p)
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and not package.is_relative_to(Path(os.path.abspath(p)))
    )
    for exercise in exercises:
        file = runner_spec(exercise)["file"]
        if file and not Path(file).is_relative_to(Path(autodiff_lab.__file__).parent):
            keep.add(Path(file))
    return sorted(keep)


def _paths_workers_must_not_see(settings: Settings, submissions: list[Submission]) -> list[Path]:
    """The course folder, home, submissions, exports, solutions and the references."""
    import autodiff_lab

    package = Path(autodiff_lab.__file__).parent
    hide = {Path.cwd(), Path.home(), package / "grading" / "exercises"}
    hide.update(p / "solutions" for p in (Path.cwd(), package.parent))
    hide.update(Path(os.path.abspath(s.path)).parent for s in submissions)
    hide.update(Path(os.path.abspath(s.path)).parent.parent for s in submissions if s.own_folder)
    hide.update(Path(os.path.abspath(p)) for p in settings.hide)
    return sorted(hide)


@dataclass
class _Progress:
    """What the workers reported so far for one notebook."""

    outcomes: dict[str, list[Outcome | None]]
    missing: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    noted: set[str] = field(default_factory=set)
    dropped_notes: int = 0

    def note(self, text: str) -> None:
        """Add a note once; past :data:`MAX_NOTES` only count it (a flood stays cheap)."""
        if text in self.noted:
            return
        if len(self.notes) >= MAX_NOTES:
            self.dropped_notes += 1
            return
        self.noted.add(text)
        self.notes.append(text)

    exercise_notes: dict[str, str] = field(default_factory=dict)
    killed_cells: dict[int, tuple[str, str]] = field(default_factory=dict)
    interrupted_cells: set[int] = field(default_factory=set)


def run_isolated(
    plan: Plan,
    scratch_source: Path,
    settings: Settings,
    keep: list[Path],
    hide: list[Path],
    stop: threading.Event | None = None,
) -> _Progress:
    """Run the notebook in workers until every exercise has answers or a reason why not."""
    progress = _Progress({e.id: [None] * len(plan.cases[e.id]) for e in plan.exercises})
    remaining = [e.id for e in plan.exercises]
    deadline = time.monotonic() + settings.notebook_timeout
    timeout = settings.timeout
    attempt = 0
    while remaining:
        attempt += 1
        by_id = {e.id: e for e in plan.exercises}
        request = {
            "cells": plan.cells,
            "skip_cells": sorted(progress.killed_cells),
            "exercises": [
                {
                    "id": i,
                    "answer": by_id[i].answer,
                    "run": runner_spec(by_id[i]),
                    "cases": [to_plain(c.inputs) for c in plan.cases[i]],
                }
                for i in remaining
            ],
            "timeout": timeout,
            "memory_mb": settings.memory_mb,
            "output_mb": OUTPUT_LIMIT_MB,
        }
        run = _run_worker_retrying(
            request, scratch_source, f"run{attempt}", settings, keep, hide, deadline, stop
        )
        done = _absorb(run.events, plan, progress, timeout)
        remaining = [i for i in remaining if i not in done]
        if run.finished or not remaining:
            for i in remaining:  # "finished" but silent about an exercise: forged or lost
                _fill(progress.outcomes[i], Outcome(CRASH, message="no answer was received"))
            break
        if not _after_a_stopped_run(run, plan, progress, remaining, settings):
            break
    return progress


class InfrastructureFailure(RuntimeError):
    """The grader could not run a worker for a notebook: no student code ran, so it is
    not the student's result (see :func:`_run_worker_retrying`)."""


def _run_worker_retrying(
    request: dict,
    scratch_source: Path,
    label: str,
    settings: Settings,
    keep: list[Path],
    hide: list[Path],
    deadline: float,
    stop: threading.Event | None,
) -> WorkerRun:
    """One worker run in a fresh scratch copy; a run the grader's infrastructure failed
    (``WorkerRun.infrastructure_failure``: the worker could not start, or died before
    running anything of the notebook — a machine out of tasks) is tried again, at most
    :data:`INFRASTRUCTURE_ATTEMPTS` times in all, then :class:`InfrastructureFailure`."""
    failure = ""
    for attempt in range(INFRASTRUCTURE_ATTEMPTS):
        if attempt:  # give a loaded machine a moment
            if stop is not None and stop.wait(INFRASTRUCTURE_PAUSE * attempt):
                break
        scratch = scratch_source.parent / f"{scratch_source.name}-{label}-{attempt}"
        shutil.copytree(scratch_source, scratch, symlinks=True)
        try:
            run = run_worker(
                request, sandbox=settings.sandbox, scratch=scratch, keep=keep, hide=hide,
                timeout=settings.timeout, deadline=deadline, stop=stop,
                python=settings.python, max_processes=settings.max_processes,
                memory_mb=settings.memory_mb,
            )  # fmt: skip
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        failure = getattr(run, "infrastructure_failure", None) or ""
        if not failure or run.stopped_for == "stopped":
            return run
    raise InfrastructureFailure(failure or "grading was stopped")


def _after_a_stopped_run(
    run: WorkerRun, plan: Plan, progress: _Progress, remaining: list[str], settings: Settings
) -> bool:
    """Record why a worker stopped early; True when another worker should carry on."""
    if run.stopped_for in ("deadline", "stopped"):
        what = (
            f"the notebook used up its total time of {settings.notebook_timeout:g} s"
            if run.stopped_for == "deadline"
            else "grading was stopped (Ctrl-C) while this notebook ran"
        )
        progress.note(what)
        for i in remaining:
            _fill(progress.outcomes[i], Outcome(TIMEOUT, message=what))
            progress.exercise_notes.setdefault(i, what[0].upper() + what[1:] + ".")
        return False
    kind = TIMEOUT if run.stopped_for == "timeout" else CRASH
    what = {
        "timeout": f"did not finish within {settings.timeout:g} s",
        "processes": f"started more than {settings.max_processes} processes and was stopped",
        "memory": (
            f"used more than {settings.memory_mb:g} MB in all its processes together "
            "and was stopped"
        ),
    }.get(run.stopped_for or "", f"ended the notebook's process, which {run.exit_description}")
    stage, where = run.phase
    if stage == "cell" and isinstance(where, int) and where not in progress.killed_cells:
        progress.killed_cells[where] = (kind, f"code cell {where + 1} {what}")
        progress.note(f"code cell {where + 1} {what}; it was skipped on a rerun")
        return True
    if stage == "exercise" and where in remaining:
        outcomes = progress.outcomes[where]
        case_index = next((k for k, o in enumerate(outcomes) if o is None), None)
        if case_index is not None:
            case_name = plan.cases[where][case_index].name
            outcomes[case_index] = Outcome(kind, message=what)
            _fill(outcomes, Outcome(NOT_RUN))
            progress.exercise_notes[where] = f"Case '{case_name}' {what}."
        remaining.remove(where)
        return True
    # Died before any cell, or between steps: nothing to skip, nothing to retry.
    plain_crash = kind == CRASH and run.stopped_for is None
    reason = f"the notebook's process {run.exit_description if plain_crash else what}"
    if stage == "startup" and run.output_tail.strip():
        reason += f" while starting: {_scrub(run.output_tail.strip().splitlines()[-1])[:200]}"
    progress.note(reason)
    for i in remaining:
        _fill(progress.outcomes[i], Outcome(kind, message=what))
        progress.exercise_notes[i] = reason[0].upper() + reason[1:] + "."
    return False


def _scrub(text: str) -> str:
    """Text from the student's process without the grader's folders (shown to students)."""
    import autodiff_lab

    folders = {
        tempfile.gettempdir(): "/tmp",
        str(Path(autodiff_lab.__file__).parent): "autodiff_lab",
        sys.prefix: "<python>",
        sys.base_prefix: "<python>",
        str(Path.cwd()): ".",
        str(Path.home()): "~",
    }
    for folder, short in sorted(folders.items(), key=lambda kv: -len(kv[0])):
        if len(folder) > 1:
            text = text.replace(folder, short)
    return text


def _fill(outcomes: list[Outcome | None], outcome: Outcome) -> None:
    for k, existing in enumerate(outcomes):
        if existing is None:
            outcomes[k] = outcome


def _absorb(events: list[dict], plan: Plan, progress: _Progress, timeout: float) -> set[str]:
    """Record the answers a worker reported; return the exercises it completed.

    Events come from the student's process, so any shape may arrive: an event that does
    not fit is that case's failure (when it names one) or ignored, never a crash.
    """
    done: set[str] = set()
    for event in events:
        kind, ex_id, index = event.get("event"), event.get("id"), event.get("index")
        if kind == "cell_done":
            _note_cell(event, progress, timeout, len(plan.cells))
            continue
        if not isinstance(ex_id, str) or ex_id not in progress.outcomes:
            continue
        if kind in ("answer_missing", "exercise_done"):
            done.add(ex_id)
            if kind == "answer_missing":
                progress.missing.add(ex_id)
        elif kind == "case":
            outcomes = progress.outcomes[ex_id]
            if type(index) is not int or not 0 <= index < len(outcomes):
                continue
            if outcomes[index] is None:  # the first report counts
                outcomes[index] = _decode_outcome(event)
    return done


def _note_cell(event: dict, progress: _Progress, timeout: float, cells: int) -> None:
    index, error = event.get("index"), event.get("error")
    if type(index) is not int or not error or not 0 <= index < cells:
        return
    if event.get("interrupted") is True:
        progress.interrupted_cells.add(index)
        note = f"code cell {index + 1} did not finish within {timeout:g} s; it was interrupted"
    else:
        note = f"code cell {index + 1} raised {_scrub(str(error))[:200]}"
    progress.note(note)


def _decode_outcome(event: dict) -> Outcome:
    kind = event.get("kind")
    message = _scrub(str(event.get("message") or ""))[:500]
    if kind == VALUE:
        try:
            return Outcome(VALUE, from_plain(event.get("value")))
        except Exception as exc:
            return Outcome(ERROR, message=f"the answer could not be decoded: {exc}"[:300])
    if kind in (NOT_IMPLEMENTED, ERROR, CRASH):
        return Outcome(kind, message=message)
    return Outcome(ERROR, message="malformed answer from the notebook's process")


# --- judge --------------------------------------------------------------------------------


def judge(plan: Plan, progress: _Progress, timeout: float) -> list[ExerciseResult]:
    """Every exercise's verdict, from the references and what the workers reported."""
    stopped_cells = {
        **{i: (TIMEOUT, f"code cell {i + 1} did not finish within {timeout:g} s")
           for i in progress.interrupted_cells},
        **progress.killed_cells,
    }  # fmt: skip
    results = []
    for exercise in plan.exercises:
        cases, expected = plan.cases[exercise.id], plan.expected[exercise.id]
        outs = progress.outcomes[exercise.id]
        note = progress.exercise_notes.get(exercise.id, "")
        if exercise.id in progress.missing:
            # Blame a stopped cell only if it mentions the answer's name (it may define it).
            kind, why = next(
                (f for i, f in sorted(stopped_cells.items()) if exercise.answer in plan.cells[i]),
                (NOT_IMPLEMENTED, ""),
            )
            note = f"`{exercise.answer}` is not defined in the notebook" + (
                f" ({why})." if why else "."
            )
            outs = [Outcome(kind, message=note if kind != NOT_IMPLEMENTED else "") for _ in cases]
        received = [
            o if o is not None else Outcome(CRASH, message="no answer was received") for o in outs
        ]
        results.append(judge_exercise(exercise, cases, received, expected, attempt=1, note=note))
    return results


def grade_staged(
    staged: Staged,
    seed: int,
    settings: Settings,
    keep_hide: tuple[list[Path], list[Path]] | None = None,
    stop: threading.Event | None = None,
) -> SubmissionResult:
    """Read → plan → run isolated → judge one staged notebook."""
    started = time.monotonic()
    plan = plan_submission(staged, seed)
    if isinstance(plan, SubmissionResult):
        plan.sandbox = settings.sandbox.kind
        return plan
    keep, hide = keep_hide or (
        _paths_workers_need(plan.exercises),
        _paths_workers_must_not_see(settings, [staged.submission]),
    )
    assert staged.folder is not None  # plan_submission returned a result for unreadable ones
    try:
        progress = run_isolated(plan, staged.folder, settings, keep, hide, stop)
    except InfrastructureFailure as exc:
        note = (
            f"not graded: {exc} — the grader's failure, not this notebook's; "
            "the next run grades it (nothing of it is recorded as a result)"
        )
        return SubmissionResult(
            staged.submission, [], staged.sha256, seed, _now(), time.monotonic() - started,
            capped_notes([*plan.notes, note]), NOT_GRADED, sandbox=settings.sandbox.kind,
        )  # fmt: skip
    results = judge(plan, progress, settings.timeout)
    notes = capped_notes([*plan.notes, *progress.notes], progress.dropped_notes)
    if not settings.sandbox.isolated:
        notes.append(NO_SANDBOX_NOTE)
    return SubmissionResult(
        staged.submission, results, staged.sha256, seed, _now(), time.monotonic() - started,
        notes, sandbox=settings.sandbox.kind,
    )  # fmt: skip


def grade_submission(
    submission: Submission, *, seed: int | None = None, settings: Settings | None = None
) -> SubmissionResult:
    """Grade one notebook on its own (stages it in a temporary folder first)."""
    settings = settings or Settings()
    with tempfile.TemporaryDirectory(prefix="autodiff-lab-grade-") as root:
        (staged,) = stage([submission], Path(root))
        seed = secrets.randbits(31) if seed is None else int(seed)
        return grade_staged(staged, seed, settings)


# --- a batch ------------------------------------------------------------------------------


@dataclass
class BatchSummary:
    """What a batch did: graded now, skipped (already in the gradebook), grader errors."""

    submissions: list[Submission]
    graded: list[SubmissionResult]
    skipped: list[Submission]
    errors: list[tuple[Submission, str]]
    seed: int = 0
    interrupted: bool = False
    crashed_before: list[Submission] = field(default_factory=list)
    not_graded: list[Submission] = field(default_factory=list)  # the grader's failure
    warnings: list[str] = field(default_factory=list)


def grade_batch(
    submissions: list[Submission],
    gradebook,
    *,
    jobs: int = 1,
    regrade: bool = False,
    seed: int | None = None,
    settings: Settings | None = None,
    progress: bool | None = None,
    on_graded: Callable[[SubmissionResult], None] | None = None,
    new_seed: bool = False,
) -> BatchSummary:
    """Grade many notebooks, ``jobs`` at a time, recording each in ``gradebook`` as it ends.

    One secret seed (``secrets``) gives every student the same cases: drawn on the first run
    into a gradebook and stored there, reused by every rerun (a resumed batch, a late
    student), replaced only by ``seed`` or ``new_seed``. Each job is a thread supervising
    one worker process; every gradebook write happens in this thread. A submission left "in
    progress" by a grader that died while it ran alone is recorded as crashed; one that ran
    beside others is first tried again alone, so only the one that kills the grader is
    blamed. Ctrl-C stops the workers without waiting for their threads, keeps what is
    recorded, leaves the notebooks that were running marked "in progress" as graded beside
    others (the next run grades them first, alone, so a notebook that stalled the batch
    cannot stall it again), clears the other marks and raises ``KeyboardInterrupt``. A
    notebook that timed out while others ran beside it is graded again alone at the end (a
    neighbour may have taken its CPU), and that grade is kept.
    """
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    from tqdm import tqdm

    settings = settings or Settings()
    registry.all_exercises()  # import every exercise module once, before any thread starts
    seed = gradebook.batch_seed(seed, new=new_seed)
    root = Path(tempfile.mkdtemp(prefix="autodiff-lab-grade-"))
    summary = BatchSummary(submissions, [], [], [], seed)
    stop = threading.Event()
    try:
        staged_all = stage(submissions, root)
        left_running = gradebook.in_progress()
        first, rest = [], []
        for st in staged_all:
            key = st.submission.key
            if not regrade and gradebook.is_graded(key, st.sha256):
                summary.skipped.append(st.submission)
            elif not regrade and left_running.get(key, (None, 0))[0] == st.sha256:
                if left_running[key][1]:  # it ran alone when the grader died: it is to blame
                    if _record(
                        gradebook, summary, st, partial(_grader_died_on, st, seed, settings)
                    ):
                        summary.crashed_before.append(st.submission)
                else:
                    first.append(st)
            else:
                rest.append(st)
        if not first and not rest:
            return summary
        keep = _paths_workers_need(registry.all_exercises())
        # Outside the sandbox's allowlist anyway; hidden too should TMPDIR lie inside it.
        hide = [*_paths_workers_must_not_see(settings, submissions), root]
        disable = None if progress is None else not progress
        bar = tqdm(total=len(first) + len(rest), desc="grading", unit="notebook", disable=disable)
        pool = ThreadPoolExecutor(max_workers=max(1, int(jobs)))
        again: list[Staged] = []
        running: dict = {}
        try:
            for phase, (items, width) in enumerate(((first, 1), (rest, jobs), (again, 1))):
                queue, width = list(items), max(1, int(width))
                while queue or running:
                    while queue and len(running) < width:
                        st = queue.pop(0)
                        gradebook.mark_in_progress(st.submission.key, st.sha256, alone=width == 1)
                        future = pool.submit(grade_staged, st, seed, settings, (keep, hide), stop)
                        running[future] = (st, width)
                    finished, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in finished:
                        st, ran_with = running.pop(future)
                        try:
                            result = future.result()
                        except Exception as exc:  # a grader bug or a broken exercise: report
                            _grader_error(gradebook, summary, st, exc)
                            bar.update(1)
                            continue
                        if ran_with > 1 and _timed_out(result) and phase < 2:
                            again.append(st)  # kept in progress: graded again alone below
                            continue
                        if phase == 2:
                            result.notes.append(RERUN_ALONE_NOTE)
                        bar.update(1)
                        if not _record(gradebook, summary, st, result):
                            continue
                        if str(result.status) == NOT_GRADED:
                            summary.not_graded.append(result.submission)
                        else:
                            summary.graded.append(result)
                        if on_graded is not None:
                            on_graded(result)
        except KeyboardInterrupt:
            stop.set()
            summary.interrupted = True
            stalled = {id(st) for st, _ in running.values()}
            for st in [*first, *rest]:
                if gradebook.is_graded(st.submission.key, st.sha256):
                    continue
                if id(st) in stalled:  # next run: first, alone (never blamed for a Ctrl-C)
                    gradebook.mark_in_progress(st.submission.key, st.sha256, alone=False)
                else:
                    gradebook.clear_in_progress(st.submission.key)
            raise
        finally:
            stop.set()
            pool.shutdown(wait=not summary.interrupted, cancel_futures=True)
            bar.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return summary


def _record(
    gradebook,
    summary: BatchSummary,
    st: Staged,
    result: SubmissionResult | Callable[[], SubmissionResult],
) -> bool:
    """Record one submission's result (made here when given how to make it); a failure
    doing so is that submission's grader error (listed, never recorded, so the next run
    grades it), not the batch's."""
    try:
        gradebook.record(result() if callable(result) else result)
        return True
    except Exception as exc:
        _grader_error(gradebook, summary, st, exc)
        return False


def _grader_error(gradebook, summary: BatchSummary, st: Staged, exc: Exception) -> None:
    summary.errors.append((st.submission, one_line(f"{type(exc).__name__}: {exc}", 300)))
    try:
        gradebook.clear_in_progress(st.submission.key)
    except Exception:  # the gradebook itself failing: the error above says enough
        pass


RERUN_ALONE_NOTE = (
    "a part of this notebook timed out while other notebooks were graded beside it; it "
    "was graded again alone and this is that grade"
)


def _timed_out(result: SubmissionResult) -> bool:
    return any(str(e.status) == str(Status.TIMED_OUT) for e in result.exercises) or any(
        "did not finish within" in n for n in result.notes
    )


def _grader_died_on(staged: Staged, seed: int, settings: Settings) -> SubmissionResult:
    """The record of a notebook the grader itself died on while grading it alone."""
    note = (
        "the grader itself was killed while grading this notebook alone; it was not run "
        "again (grade it with --regrade to try once more)"
    )
    plan = plan_submission(staged, seed)
    if isinstance(plan, SubmissionResult):
        return plan
    results = [
        judge_exercise(
            e,
            plan.cases[e.id],
            [Outcome(CRASH, message=note) for _ in plan.cases[e.id]],
            plan.expected[e.id],
            note=note[0].upper() + note[1:] + ".",
        )  # fmt: skip
        for e in plan.exercises
    ]
    return SubmissionResult(
        staged.submission, results, staged.sha256, seed, _now(), 0.0, [note],
        sandbox=settings.sandbox.kind,
    )  # fmt: skip
