"""The exercise specification: what an exercise *is*, as plain data and small functions.

An :class:`Exercise` says what the student must write (``answer``: a function or class
name), how to call it (``run``), what the right result is (``reference``) and how to
compare the two (``compare``). Test inputs come from ``cases(rng)``: seeded random cases
plus edge cases, so a hard-coded answer cannot pass.

The split between ``run`` and ``reference`` is what makes grading trustworthy:
``run(answer, inputs)`` executes in the *student's* process and must return plain data
(numbers, lists, tuples, dicts, strings, ndarrays); ``reference(inputs)`` executes only in
the grader, which compares the two itself. Nothing the student's code does can change the
verdict, only the answers it hands back.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Case", "Mistake", "Exercise", "LEVELS", "close"]

#: How much thought an exercise takes. The rubric asks three things of each exercise: what
#: the text (the chapter and the exercise's own words) already gives, how many lines the
#: student designs (counted on the solution, blank lines and comments left out), and which
#: concepts it needs that the chapter does not state. Then:
#:
#: - trivial — the text gives the formula or the code; the answer transcribes it (up to
#:   about 3 lines, no decision of one's own);
#: - easy — the text spells out the steps; a few lines (up to about 10) that put the given
#:   pieces together; nothing the chapter does not teach;
#: - medium — one thing the text does not give: a derivation, an algorithm to design, or a
#:   concept beyond the chapter, in up to about 15 lines;
#: - hard (a capstone) — an engine, a tool or a set of rules of one's own design (more than
#:   about 12 lines, parts that work together), needing a concept beyond the chapter or
#:   the design itself, graded on fresh random programs or inputs. Between 12 and 15 lines
#:   the count does not decide: a medium answer is one idea written out, a hard one parts
#:   of one's own design that must work together.
#:
#: ``minutes`` is a first attempt by a student who has read the chapter, one or two failed
#: checks included: trivial 5, easy 10-15, medium 15-40, hard 40-90.
LEVELS = ("trivial", "easy", "medium", "hard")

RTOL = 1e-6
ATOL = 1e-8


def close(got: Any, expected: Any, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """True when ``got`` matches ``expected`` in structure and, for numbers, within tolerance.

    The one closeness rule of the grader, its mistake detectors and ``check``:

    - dicts need the same keys; a list or tuple of plain numbers compares as an array (so an
      ndarray answer matches a list reference); other lists/tuples item by item, same length
      (a list equals a tuple with equal items: transport may turn one into the other);
    - numbers and arrays: same shape and ``|got - expected| <= atol + rtol * |expected|``;
      NaN matches NaN (a reference that is NaN means NaN is the answer), infinities must
      match exactly;
    - strings, bools and None compare with ``==`` and the same type (a bool is not a number).
    """
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping) or set(got) != set(expected):
            return False
        return all(close(got[k], expected[k], rtol, atol) for k in expected)
    if isinstance(expected, (list, tuple)) and not _numbers_only(expected):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return False
        return all(close(g, e, rtol, atol) for g, e in zip(got, expected, strict=True))
    if expected is None or isinstance(expected, (str, bytes)):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (bool, np.bool_)) or isinstance(got, (bool, np.bool_)):
        return (
            type(got) in (bool, np.bool_)
            and type(expected) in (bool, np.bool_)
            and (bool(got) == bool(expected))
        )
    if isinstance(got, (str, bytes, Mapping)) or got is None or _has_bools(got):
        return False
    try:
        got_arr = np.asarray(got, dtype=float)
        exp_arr = np.asarray(expected, dtype=float)
    except (TypeError, ValueError):
        return False
    if got_arr.shape != exp_arr.shape:
        return False
    return bool(np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol, equal_nan=True))


def _has_bools(got: Any) -> bool:
    """True for a bool array or a list holding bools (a bool is not a number here)."""
    if isinstance(got, np.ndarray):
        return got.dtype == np.bool_
    return isinstance(got, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in got)


def _numbers_only(items: list | tuple) -> bool:
    return len(items) > 0 and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
        for v in items
    )


@dataclass(frozen=True)
class Case:
    """One test case. ``inputs`` holds PLAIN DATA only (it travels to the student's process)."""

    name: str  # e.g. "random x = 0.73", "edge: x = 0"
    inputs: tuple
    points: float = 1.0


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer and the hint that explains it.

    ``detect(got, expected, case)`` returns True when this mistake explains ``got``
    (e.g. ``got == -expected`` for a wrong sign). Its hint takes precedence over nudges.
    Detectors see whatever the student's code returned, so :meth:`matches` treats any
    exception inside one (a wrong type, a NaN…) as "not this mistake".
    """

    hint: str
    detect: Callable[[Any, Any, Case], bool]

    def matches(self, got: Any, expected: Any, case: Case) -> bool:
        """True when this mistake explains ``got``; never raises."""
        try:
            return bool(self.detect(got, expected, case))
        except Exception:  # a detector that does not apply to this shape of answer
            return False


@dataclass
class Exercise:
    """A graded exercise; see the module docstring for who runs what where."""

    id: str  # "3.2"  (chapter.number)
    title: str
    task: str  # ONE line; the stub raises NotImplementedError(f"Exercise {id}: {task}")
    answer: str  # the name the student defines in the notebook, e.g. "dual_mul"
    cases: Callable[[np.random.Generator], list[Case]]  # seeded random cases + edge cases
    # run(student_answer, inputs) -> PLAIN DATA, in the student's process. A module-level
    # function in a module WITHOUT references (the course's: grading/runners/chNN.py),
    # because the worker imports that module and nothing else of the exercise.
    run: Callable[[Any, tuple], Any]
    reference: Callable[[tuple], Any]  # reference(inputs) -> PLAIN DATA (grader side only)
    compare: Callable[[Any, Any], bool] = close
    mistakes: tuple[Mistake, ...] = ()
    nudges: tuple[str, ...] = ()  # tiered generic hints: gentle first, more specific later
    # Declared once here; shown in the notebook heading, the scorecard and the exercise table
    # (docs/exercises.md).
    level: str = field(default="", kw_only=True)  # one of LEVELS
    minutes: int = field(default=0, kw_only=True)  # a fair estimate for a first attempt
    # The names of the answer's parts when it is a tuple of different things, in order
    # (``("value", "gradient")``): a failing case then says which number is which.
    parts: tuple[str, ...] = field(default=(), kw_only=True)
    # The solution sketch (code or the finished formula): shown only to a learner who asks,
    # check(..., reveal=True); never by a nudge tier, the grader or an exported notebook.
    reveal: str = field(default="", kw_only=True)
    # describe(got, expected) -> what a failing case says, for answers whose repr tells a
    # student nothing (weight matrices, 300 labels); None: "got …, expected …".
    describe: Callable[[Any, Any], str] | None = field(default=None, kw_only=True)
    # Build it yourself: the batch grader computes the answer in a child where the course
    # library and other autodiff libraries cannot be imported or read (grading/own_code.py).
    own_code: bool = field(default=False, kw_only=True)
    # With own_code: the answer builds on the library's Value/Tensor engine, which stays
    # importable there; its transforms and ready-made parts stay switched off (2.5).
    builds_on_engine: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.parts, tuple) or not all(
            isinstance(p, str) and p.strip() for p in self.parts
        ):
            raise ValueError(
                f"Exercise {self.id}: parts must be a tuple of non-empty names, got {self.parts!r}"
            )
        if len(self.parts) == 1:
            raise ValueError(
                f"Exercise {self.id}: parts names the pieces of a tuple answer; one part "
                f"({self.parts[0]!r}) is not a tuple, leave parts empty"
            )
        if self.level not in LEVELS:
            raise ValueError(
                f"Exercise {self.id}: level must be one of {LEVELS}, got {self.level!r}"
            )
        if self.minutes <= 0:
            raise ValueError(f"Exercise {self.id}: minutes must be > 0, got {self.minutes!r}")

    @property
    def label(self) -> str:
        """Level and time, shown after the title: ``medium · about 20 minutes``.

        Every hard exercise is a chapter's capstone, and its label says so first.
        """
        kind = "capstone · " if self.level == "hard" else ""
        return f"{kind}{self.level} · about {self.minutes} minutes"

    @property
    def heading(self) -> str:
        """The one title text, used by the notebook heading and the scorecard."""
        return f"{self.title} ({self.label})"

    @property
    def chapter(self) -> int:
        """The chapter number: the part of ``id`` before the dot."""
        return int(self.id.split(".")[0])

    @property
    def sort_key(self) -> tuple[int, ...]:
        """Numeric order: "3.10" comes after "3.9"."""
        return tuple(int(part) for part in self.id.split("."))

    def stub_message(self) -> str:
        """The message the generated stub raises: ``Exercise 3.2: <task>``."""
        return f"Exercise {self.id}: {self.task}"


DEFAULT_SEED = 20240601


def case_seed(exercise_id: str, seed: int | None = None) -> int:
    """The seed for an exercise's cases: fixed per exercise unless ``seed`` is given."""
    base = DEFAULT_SEED if seed is None else int(seed)
    return (base + zlib.crc32(str(exercise_id).encode())) % 2**32
