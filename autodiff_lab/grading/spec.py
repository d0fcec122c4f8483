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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Case", "Mistake", "Exercise", "allclose_nested"]

RTOL = 1e-6
ATOL = 1e-8


def allclose_nested(got: Any, expected: Any, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """True when ``got`` matches ``expected`` in structure and, for numbers, within tolerance.

    Structure-aware: dicts must have the same keys, lists/tuples the same length (a list and
    a tuple with equal items are equal: transport may turn one into the other), arrays the
    same shape. Numbers compare with ``|got - expected| <= atol + rtol * |expected|``;
    NaN equals NaN and infinities must match exactly. Strings, bools and None compare
    with ``==`` (a bool is not accepted where a number is expected, and vice versa).
    """
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping) or set(got) != set(expected):
            return False
        return all(allclose_nested(got[k], expected[k], rtol, atol) for k in expected)
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return False
        return all(allclose_nested(g, e, rtol, atol) for g, e in zip(got, expected, strict=True))
    if expected is None or isinstance(expected, (str, bytes)):
        return got == expected
    if isinstance(expected, (bool, np.bool_)) or isinstance(got, (bool, np.bool_)):
        return (
            type(got) in (bool, np.bool_)
            and type(expected) in (bool, np.bool_)
            and (bool(got) == bool(expected))
        )
    if isinstance(expected, (int, float, complex, np.number, np.ndarray)):
        if isinstance(got, (str, bytes, Mapping)) or got is None:
            return False
        try:
            got_arr = np.asarray(got, dtype=float)
            exp_arr = np.asarray(expected, dtype=float)
        except (TypeError, ValueError):
            return False
        if got_arr.shape != exp_arr.shape:
            return False
        return bool(np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol, equal_nan=True))
    return got == expected


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
    """

    hint: str
    detect: Callable[[Any, Any, Case], bool]


@dataclass
class Exercise:
    """A graded exercise; see the module docstring for who runs what where."""

    id: str  # "3.2"  (chapter.number)
    title: str
    task: str  # ONE line; the stub raises NotImplementedError(f"Exercise {id}: {task}")
    answer: str  # the name the student defines in the notebook, e.g. "dual_mul"
    cases: Callable[[np.random.Generator], list[Case]]  # seeded random cases + edge cases
    run: Callable[[Any, tuple], Any]  # run(student_answer, inputs) -> PLAIN DATA (student side)
    reference: Callable[[tuple], Any]  # reference(inputs) -> PLAIN DATA (grader side only)
    compare: Callable[[Any, Any], bool] = allclose_nested
    mistakes: tuple[Mistake, ...] = ()
    nudges: tuple[str, ...] = ()  # tiered generic hints: gentle first, more specific later

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
