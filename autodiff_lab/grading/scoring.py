"""Turning what a student's code did into a verdict: case results, status, points, hints.

Shared by the in-notebook :func:`~autodiff_lab.grading.check` and the command-line grader,
so both judge the same way. The student's side produces an :class:`Outcome` per case (a
value, or what went wrong); the judging side — here — compares it with the reference.

Statuses of an exercise: see :class:`Status`. Points are the sum over the cases that
passed, whatever the status.
"""

from __future__ import annotations

import html
import traceback
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from .spec import Case, Exercise


class _PlainString(str, Enum):
    """An enum member that is, prints and formats as its plain string (``enum.StrEnum``
    needs Python 3.11); its repr is the string's, so notebooks show ``'passed'``."""

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Status(_PlainString):
    """The verdict on one exercise (a row of the gradebook)."""

    PASSED = "passed"  # every case right
    FAILED = "failed"  # some case wrong or raised an error
    NOT_ATTEMPTED = "not attempted"  # the stub's NotImplementedError, or no answer defined
    TIMED_OUT = "timed out"  # the student's process ran past a time limit
    CRASHED = "crashed"  # the student's process died (or the grader did, while on it)
    UNREADABLE = "unreadable"  # the submission is not a notebook the grader can read
    NO_EXERCISES = "no exercises"  # a readable notebook that answers no known exercise


PASSED, FAILED, NOT_ATTEMPTED, TIMED_OUT, CRASHED = (
    Status.PASSED, Status.FAILED, Status.NOT_ATTEMPTED, Status.TIMED_OUT, Status.CRASHED,
)  # fmt: skip
STATUSES = tuple(Status)


class Kind(_PlainString):
    """What happened when the student's code ran on one case."""

    VALUE = "value"
    NOT_IMPLEMENTED = "not implemented"
    ERROR = "error"
    TIMEOUT = "timed out"
    CRASH = "crashed"
    NOT_RUN = "not run"


VALUE, NOT_IMPLEMENTED, ERROR, TIMEOUT, CRASH, NOT_RUN = tuple(Kind)

GENERIC_NUDGE = (
    "Compare your result with the expected one on the first failing case above; "
    "try that input by hand in a cell."
)
TIMED_OUT_HINT = (
    "Your code ran too long: look for a loop that never ends, or work that grows too fast."
)
NOT_ATTEMPTED_HINT = (
    "Replace the `raise NotImplementedError(...)` line in `{answer}` with your code."
)


@dataclass
class Outcome:
    """What the student's code did on one case: a value, or the reason there is none."""

    kind: str
    value: Any = None
    message: str = ""


@dataclass
class CaseResult:
    """The verdict on one case."""

    name: str
    points: float
    max_points: float
    status: str  # "passed", "failed", "error", "not attempted", "timed out", "crashed", "not run"
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == PASSED


@dataclass
class ExerciseResult:
    """The verdict on one exercise: ``status``, ``score`` out of ``max_score``, cases, hints."""

    exercise_id: str
    title: str
    status: str
    score: float
    max_score: float
    cases: list[CaseResult] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    note: str = ""  # one line on why (e.g. "cell 4 did not finish within 5 s")

    @property
    def feedback(self) -> str:
        """One paragraph for a gradebook or report: what passed, what went wrong, hints."""
        parts = []
        if self.note:
            parts.append(self.note)
        if self.cases and self.status not in (NOT_ATTEMPTED,):
            n_passed = sum(c.passed for c in self.cases)
            parts.append(f"{n_passed}/{len(self.cases)} cases passed.")
            first_bad = next((c for c in self.cases if not c.passed and c.message), None)
            if first_bad is not None and not (self.note and self.status in (TIMED_OUT, CRASHED)):
                parts.append(f"First failing case: {first_bad.name}: {first_bad.message}.")
        parts += [f"Hint: {h}" for h in self.hints]
        return " ".join(parts)

    def to_text(self) -> str:
        """A plain-text scorecard."""
        mark = {PASSED: "✓", "not run": "·"}
        lines = [
            f"Exercise {self.exercise_id}: {self.title} — {self.status.upper()} "
            f"({_fmt_points(self.score)}/{_fmt_points(self.max_score)} points)"
        ]
        if self.note:
            lines.append(f"  {self.note}")
        for case in self.cases:
            points = f"{_fmt_points(case.points)}/{_fmt_points(case.max_points)}"
            line = f"  {mark.get(case.status, '✗')} {case.name} [{points}]"
            if case.message:
                line += f": {case.message}"
            lines.append(line)
        lines += [f"  Hint: {h}" for h in self.hints]
        return "\n".join(lines)

    def to_html(self) -> str:
        """An HTML scorecard (inline styles only, so it renders the same everywhere).

        Its own white background and dark text keep every colour above 4.5:1 contrast in
        JupyterLab's light and dark themes; each row's ✓/✗ is repeated in words (``title``)
        and the columns have headers, for screen readers.
        """
        colour = STATUS_COLOURS.get(self.status, OTHER_COLOUR)
        esc = html.escape
        head = "".join(
            f'<th style="padding:1px 6px;text-align:left;font-weight:normal;color:{MUTED}">'
            f"{name}</th>"
            for name in ("", "case", "points", "what went wrong")
        )
        rows = [f"<tr>{head}</tr>"]
        for case in self.cases:
            symbol, tint = {PASSED: ("✓", PASS_COLOUR), "not run": ("·", MUTED)}.get(
                case.status, ("✗", FAIL_COLOUR)
            )
            rows.append(
                f'<tr><td style="color:{tint};font-weight:bold;padding:1px 6px" '
                f'title="{esc(str(case.status))}">{symbol}</td>'
                f'<td style="padding:1px 6px;text-align:left">{esc(case.name)}</td>'
                f'<td style="padding:1px 6px;text-align:right">{_fmt_points(case.points)}/'
                f"{_fmt_points(case.max_points)}</td>"
                f'<td style="padding:1px 6px;text-align:left;font-family:monospace">'
                f"{_message_html(case.message)}</td></tr>"
            )
        hints = "".join(
            f'<div style="margin-top:4px;padding:4px 8px;background:{HINT_BACKGROUND};'
            f'color:{INK};border-radius:4px"><b>Hint:</b> {esc(h)}</div>'
            for h in self.hints
        )
        note = f'<div style="margin:2px 0">{esc(self.note)}</div>' if self.note else ""
        return (
            f'<div class="autodiff-lab-scorecard" style="background:#ffffff;color:{INK};'
            f"border:1px solid {colour};"
            f'border-left:6px solid {colour};border-radius:4px;padding:6px 10px;margin:4px 0">'
            f"<div><b>Exercise {esc(self.exercise_id)}: {esc(self.title)}</b> — "
            f'<span style="color:{colour};font-weight:bold">{esc(self.status)}</span> '
            f"({_fmt_points(self.score)}/{_fmt_points(self.max_score)} points)</div>{note}"
            f'<table style="border-collapse:collapse;margin-top:4px;color:{INK}">'
            f"{''.join(rows)}</table>"
            f"{hints}</div>"
        )


#: The scorecard's colours, all on its own white background (WCAG AA: 4.5:1 or more).
INK = "#1a1a1a"
MUTED = "#57606a"
PASS_COLOUR = "#1a7f37"
FAIL_COLOUR = "#cf222e"
OTHER_COLOUR = "#bc4c00"  # timed out, crashed, …
HINT_BACKGROUND = "#fff8c5"
STATUS_COLOURS: dict[str, str] = {PASSED: PASS_COLOUR, FAILED: FAIL_COLOUR, NOT_ATTEMPTED: MUTED}


def _message_html(message: str) -> str:
    """A case's message as HTML: each named part of a structured answer on its own line."""
    return "<br>".join(html.escape(part) for part in message.split(PART_SEPARATOR))


def _fmt_points(points: float) -> str:
    return f"{points:g}"


def brief(value: Any, width: int = 90) -> str:
    """A short, deterministic repr for feedback (6 significant digits, long output cut)."""
    text = " ".join(_short_repr(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_repr(value: Any, depth: int = 0) -> str:
    if depth > 6:
        return "…"
    if isinstance(value, (bool, np.bool_)) or value is None:
        return repr(bool(value) if isinstance(value, np.bool_) else value)
    if isinstance(value, (float, np.floating)):
        text = f"{float(value):.6g}"
        return text if any(ch in text for ch in ".eni") else text + ".0"  # 6.0, not 6
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=6, threshold=12, edgeitems=3, linewidth=10_000):
            return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(_short_repr(v, depth + 1) for v in value[:12])
        if len(value) > 12:
            items += ", …"
        if isinstance(value, tuple):
            return f"({items},)" if len(value) == 1 else f"({items})"
        return f"[{items}]"
    if isinstance(value, dict):
        items = ", ".join(
            f"{k!r}: {_short_repr(v, depth + 1)}" for k, v in list(value.items())[:12]
        )
        return "{" + items + "}"
    return repr(value)


def short_error(exc: BaseException, answer_name: str = "") -> str:
    """``"ZeroDivisionError: division by zero (line 3 of your dual_mul)"`` — no traceback."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    student = [f for f in frames if _is_student_frame(f.filename)]
    if student:
        frame = student[-1]
        where = f"your {frame.name}" if frame.name not in ("<module>", "") else "your code"
        text += f" (line {frame.lineno} of {where})"
    return brief(text, 200) if len(text) > 200 else text


def _is_student_frame(filename: str) -> bool:
    """Code typed in a notebook cell (ipykernel: /tmp/ipykernel_*/…; IPython: <ipython-input-…>)."""
    return (
        filename.startswith("<ipython-input")
        or "ipykernel_" in filename
        or filename.startswith("<cell")
        or filename.startswith("<grading-cell")
    )


def judge_case(exercise: Exercise, case: Case, outcome: Outcome, expected: Any) -> CaseResult:
    """Compare one outcome with the reference value."""
    points = float(case.points)
    if outcome.kind != VALUE:
        renamed: dict[str, str] = {NOT_IMPLEMENTED: NOT_ATTEMPTED, ERROR: "error"}
        status = renamed.get(outcome.kind, outcome.kind)
        return CaseResult(case.name, 0.0, points, status, outcome.message)
    try:
        ok = bool(exercise.compare(outcome.value, expected))
    except Exception as exc:  # a comparison that cannot even run means a wrong answer
        ok = False
        return CaseResult(
            case.name,
            0.0,
            points,
            FAILED,
            f"could not compare ({type(exc).__name__}): got {brief(outcome.value)}",
        )
    if ok:
        return CaseResult(case.name, points, points, PASSED)
    if _is_error_record(outcome.value):
        message = _error_record_text(outcome.value)
    elif exercise.describe is not None:
        try:
            message = exercise.describe(outcome.value, expected)
        except Exception:  # an answer of a shape the description does not expect
            message = mismatch_text(outcome.value, expected, exercise.parts)
    else:
        message = mismatch_text(outcome.value, expected, exercise.parts)
    return CaseResult(case.name, 0.0, points, FAILED, message)


def _is_error_record(value: Any) -> bool:
    """An error a runner reported as plain data (``runners.common.error_result``)."""
    return isinstance(value, dict) and isinstance(value.get("error"), str) and "message" in value


def _error_record_text(record: dict) -> str:
    """A runner's error record in words, never the dict: ``TypeError: … (at backward)``.

    ``LibraryCode`` records are sentences already ("MyValue is autodiff_lab's class…").
    """
    message = str(record.get("message", "")).strip()
    text = message if record["error"] == "LibraryCode" else f"{record['error']}: {message}"
    if record.get("at"):
        text += f" (in {record['at']})"
    return text


#: Between the parts of a structured answer in a failing case's message.
PART_SEPARATOR = " · "


def mismatch_text(got: Any, expected: Any, parts: tuple[str, ...] = ()) -> str:
    """What a failing case says: ``got 0.5, expected 0.25``.

    The one formatter of wrong answers, for the notebook scorecard and the command-line
    grader alike. With the exercise's ``parts`` and an answer with that many items, each
    part is named: ``value: got 0.143159, expected 0.143159 · gradient: got 0.143159,
    expected 0.258073``. An answer of another shape is shown whole, with the parts it
    should have had.
    """
    expected_items = _items(expected)
    if not parts or expected_items is None or len(expected_items) != len(parts):
        return f"got {brief(got)}, expected {brief(expected)}"
    got_items = _items(got)
    if got_items is None or len(got_items) != len(parts):
        return f"got {brief(got)}, expected ({', '.join(parts)}) = {brief(expected)}"
    return PART_SEPARATOR.join(
        f"{name}: got {brief(g)}, expected {brief(e)}"
        for name, g, e in zip(parts, got_items, expected_items, strict=True)
    )


def _items(value: Any) -> list | None:
    """The items of a list, tuple or 1-d array; None for anything else."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return list(value)
    return None


def detected_mistakes(
    exercise: Exercise, cases: list[Case], outcomes: list[Outcome], expected: list[Any]
) -> list[str]:
    """Hints of the known mistakes that explain some wrong value (each hint once, in order).

    A case whose wrong value two or more mistakes explain (on an edge case two mistaken
    formulas can give the same number, e.g. ``a·db`` and ``da·db`` when ``db = 0``) names
    none of them by itself: such cases count only when no case singles out a mistake.
    """
    single: list[str] = []
    ambiguous: list[str] = []
    for case, outcome, exp in zip(cases, outcomes, expected, strict=True):
        if outcome.kind != VALUE:
            continue
        try:
            if exercise.compare(outcome.value, exp):
                continue
        except Exception:
            pass
        matched = [m.hint for m in exercise.mistakes if m.matches(outcome.value, exp, case)]
        found = single if len(matched) == 1 else ambiguous
        found += [h for h in matched if h not in found]
    hints = single or ambiguous
    return [m.hint for m in exercise.mistakes if m.hint in hints]


def judge_exercise(
    exercise: Exercise,
    cases: list[Case],
    outcomes: list[Outcome],
    expected: list[Any],
    *,
    attempt: int = 1,
    note: str = "",
    reveal: bool = False,
) -> ExerciseResult:
    """The verdict on a whole exercise, with tiered hints.

    A detected :class:`~autodiff_lab.grading.spec.Mistake` hint takes precedence; otherwise
    the ``attempt``-th tier of nudges is shown (tier 1: the first nudge; tier 2: the first
    two, …), so repeated attempts reveal more. No tier is the solution: the exercise's
    ``reveal`` sketch is added only with ``reveal=True`` (a learner's explicit request
    through ``check``; the grader and the exported notebooks never pass it).
    """
    results = [
        judge_case(exercise, c, o, e) for c, o, e in zip(cases, outcomes, expected, strict=True)
    ]
    score = sum(r.points for r in results)
    max_score = sum(float(c.points) for c in cases)
    kinds = {o.kind for o in outcomes}
    if results and all(r.passed for r in results):
        status = PASSED
    elif CRASH in kinds:
        status = CRASHED
    elif TIMEOUT in kinds:
        status = TIMED_OUT
    elif NOT_IMPLEMENTED in kinds and VALUE not in kinds:
        status = NOT_ATTEMPTED
    elif not results:
        status = NOT_ATTEMPTED
    else:
        status = FAILED
    hints: list[str] = []
    if status == NOT_ATTEMPTED:
        hints = [NOT_ATTEMPTED_HINT.format(answer=exercise.answer)]
        results = [r if r.status != NOT_ATTEMPTED else _quiet(r) for r in results]
    elif status != PASSED:
        hints = detected_mistakes(exercise, cases, outcomes, expected)
        if not hints and status == TIMED_OUT:
            hints = [TIMED_OUT_HINT]
        elif not hints and status == FAILED:
            tiers = list(exercise.nudges) or [GENERIC_NUDGE]
            hints = tiers[: max(1, min(attempt, len(tiers)))]
    if reveal and status != PASSED and exercise.reveal:
        hints = [*hints, f"{REVEAL_PREFIX}{exercise.reveal}"]
    return ExerciseResult(
        exercise.id, exercise.heading, status, score, max_score, results, hints, note
    )


#: How a revealed solution sketch starts in the hints, so nobody mistakes it for a hint.
REVEAL_PREFIX = "Solution sketch (you asked for it): "


def _quiet(result: CaseResult) -> CaseResult:
    """A not-attempted case needs no message: the scorecard's status says it all."""
    return CaseResult(result.name, result.points, result.max_points, "not run", "")
