"""The grader's result types, at the bottom: every stage imports them, they import no stage.

A submission's path, one module per stage, in order (:mod:`~autodiff_lab.grading.grader`
has the map): :mod:`.reading` makes a :class:`Staged` of a :class:`Submission`;
:mod:`.planning` makes its :class:`Plan`; :mod:`.isolation` runs it and fills a
:class:`Progress`; :mod:`.judging` turns both into verdicts; :mod:`.batch` assembles the
:class:`SubmissionResult` that :mod:`.gradebook` records.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .safetext import name_text, one_line, printable, storable_path
from .sandbox import Sandbox, choose
from .scoring import ExerciseResult, Outcome
from .spec import Case, Exercise
from .supervise import MAX_PROCESSES

DEFAULT_TIMEOUT = 60.0
DEFAULT_NOTEBOOK_TIMEOUT = 600.0
DEFAULT_MEMORY_MB = 2048.0
MAX_NOTES = 20  # notes kept per notebook (the rest are counted)
MAX_NOTE_CHARS = 400  # one note, at most
#: A submission the grader could not grade (its worker could not start: the machine, not the
#: notebook); recorded so every export lists the student, and never skipped by a rerun.
NOT_GRADED = "not graded"


@dataclass
class Submission:
    """One notebook to grade, whose it is, and its name as the student knows it."""

    path: Path
    student: str
    name: str = ""  # e.g. "ann/03_backprop.ipynb": relative to the folder given, never absolute
    own_folder: bool = False  # the notebook sits in a folder of this student's alone

    def __post_init__(self) -> None:
        # Names are shown and stored: control characters and undecodable bytes escaped;
        # the student's one to one (it tells students apart).
        self.name = printable(self.name or self.path.name)
        self.student = name_text(self.student)

    @property
    def key(self) -> str:
        """The gradebook's key: the absolute path (stays on the lecturer's machine), as
        :func:`~.safetext.storable_path` makes it, one to one."""
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
class Plan:
    """What one notebook is graded on: its cells, and per exercise the cases and references."""

    cells: list[str]
    exercises: list[Exercise]
    cases: dict[str, list[Case]]
    expected: dict[str, list[Any]]
    notes: list[str]


@dataclass
class Progress:
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


def now() -> str:
    """The time, as the gradebook records it (UTC, to the second)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
