"""A learner's own progress: the best score of every exercise they checked, per chapter.

Each ``check("N.M", answer)`` records the exercise's best score so far in one small JSON
file on this computer, and nowhere else (nothing is ever sent anywhere)::

    $AUTODIFF_LAB_DATA_DIR/progress.json           when that variable is set (tests use it)
    $XDG_DATA_HOME/autodiff-lab/progress.json      Linux and others (default ~/.local/share)
    ~/Library/Application Support/autodiff-lab/…   macOS
    %APPDATA%\\autodiff-lab\\progress.json         Windows

:func:`progress` shows a table per chapter — exercises attempted (checked with an answer
that is not the stub), passed, best points of the chapter's total, and the next exercise to
do (the first one not passed) — as a widget with "refresh" and "reset" buttons in Jupyter,
and as a static table (HTML and text) where widgets do not run. :func:`reset_progress`
forgets everything. A file that cannot be read or written never breaks ``check``: progress
is then simply not kept. Two kernels checking at the same instant may lose one record.

(``autodiff_lab.progress`` is the function; this module's other names import as
``from autodiff_lab.progress import record``.)
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ChapterRow", "data_file", "progress", "record", "reset_progress", "summary"]

ENV_DATA_DIR = "AUTODIFF_LAB_DATA_DIR"
FILE_NAME = "progress.json"
RECORDED_STATUSES = ("passed", "failed", "not attempted", "timed out", "crashed")


def data_file() -> Path:
    """Where progress is kept (see the module docstring); nothing is created here."""
    override = os.environ.get(ENV_DATA_DIR)
    if override:
        return Path(override).expanduser() / FILE_NAME
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "autodiff-lab" / FILE_NAME


def load() -> dict[str, dict[str, Any]]:
    """Every recorded exercise: ``{"1.1": {"best", "max", "passed", "tried", "checks"}}``."""
    try:
        data = json.loads(data_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    exercises = data.get("exercises") if isinstance(data, dict) else None
    return exercises if isinstance(exercises, dict) else {}


def _save(exercises: dict[str, dict[str, Any]]) -> None:
    """Write atomically (a temporary file renamed over the old one)."""
    path = data_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "exercises": exercises}, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(result) -> bool:
    """Keep ``result``'s score if it is the exercise's best; True when the file was written.

    ``result`` is a scorecard (``exercise_id``, ``status``, ``score``, ``max_score``).
    Never raises: progress that cannot be saved is not kept.
    """
    try:
        if str(result.status) not in RECORDED_STATUSES:
            return False
        exercises = load()
        entry = exercises.get(str(result.exercise_id), {})
        score, maximum = float(result.score), float(result.max_score)
        entry["best"] = max(score, float(entry.get("best", 0.0)))
        entry["max"] = maximum
        entry["passed"] = bool(entry.get("passed")) or str(result.status) == "passed"
        entry["tried"] = bool(entry.get("tried")) or str(result.status) != "not attempted"
        entry["checks"] = int(entry.get("checks", 0)) + 1
        entry["last"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        exercises[str(result.exercise_id)] = entry
        _save(exercises)
        return True
    except Exception:  # a read-only home, a full disk…: checking must still work
        return False


def reset_progress() -> None:
    """Forget every recorded score (deletes the progress file)."""
    data_file().unlink(missing_ok=True)


@dataclass
class ChapterRow:
    """One chapter's line: counts of its exercises, best points, the next exercise."""

    chapter: int
    exercises: int
    attempted: int
    passed: int
    points: float
    max_points: float
    next_exercise: str  # "1.3 Divide two dual numbers", or "" when every one is passed


def _course_exercises() -> list:
    from .grading import registry  # (here: importing autodiff_lab loads no grading code)

    return registry.all_exercises()


def _max_points(exercise) -> float:
    """The exercise's total points with check's default cases."""
    import numpy as np

    from .grading.spec import case_seed

    cases = exercise.cases(np.random.default_rng(case_seed(exercise.id)))
    return float(sum(c.points for c in cases))


def summary(exercises: dict[str, dict[str, Any]] | None = None) -> list[ChapterRow]:
    """One :class:`ChapterRow` per chapter with exercises, from the recorded progress."""
    recorded = load() if exercises is None else exercises
    rows: dict[int, ChapterRow] = {}
    for exercise in _course_exercises():
        entry = recorded.get(exercise.id, {})
        row = rows.setdefault(exercise.chapter, ChapterRow(exercise.chapter, 0, 0, 0, 0.0, 0.0, ""))
        row.exercises += 1
        row.attempted += bool(entry.get("tried"))
        row.passed += bool(entry.get("passed"))
        row.points += float(entry.get("best", 0.0))
        row.max_points += float(entry.get("max") or _max_points(exercise))
        if not entry.get("passed") and not row.next_exercise:
            row.next_exercise = f"{exercise.id} {exercise.title}"
    return [rows[k] for k in sorted(rows)]


HEADER = ["chapter", "attempted", "passed", "points", "next exercise"]


def _cells(row: ChapterRow) -> list[str]:
    return [
        f"{row.chapter:02d}",
        f"{row.attempted}/{row.exercises}",
        f"{row.passed}/{row.exercises}",
        f"{row.points:g}/{row.max_points:g}",
        row.next_exercise or "all passed ✓",
    ]


def to_text(rows: list[ChapterRow]) -> str:
    """The table as aligned plain text."""
    table = [HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[k]) for line in table) for k in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in table]
    return "Your progress (best check per exercise)\n" + "\n".join(s.rstrip() for s in lines)


def to_html(rows: list[ChapterRow]) -> str:
    """The table as HTML (inline styles: it looks the same everywhere)."""
    cell = "padding:2px 10px;border-bottom:1px solid #d0d7de;text-align:left"
    head = "".join(f'<th style="{cell}">{h}</th>' for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f'<td style="{cell}">{html.escape(c)}</td>' for c in _cells(r)) + "</tr>"
        for r in rows
    )
    return (
        '<div class="autodiff-lab-progress"><b>Your progress</b> (best check per exercise, '
        f'kept on this computer only)<table style="border-collapse:collapse;margin-top:4px">'
        f"<tr>{head}</tr>{body}</table></div>"
    )


class ProgressReport:
    """The static table: HTML in Jupyter, text elsewhere (``str()``)."""

    def __init__(self, rows: list[ChapterRow]) -> None:
        self.rows = rows

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": to_text(self.rows), "text/html": to_html(self.rows)}

    def __str__(self) -> str:
        return to_text(self.rows)

    __repr__ = __str__


def _widget(rows: list[ChapterRow]):
    """The table in a widget with "refresh" and a two-click "reset"."""
    import ipywidgets as widgets

    class ProgressView(widgets.VBox):
        """Live table; the static table rides along for viewers without a kernel."""

        def __init__(self) -> None:
            self.rows = rows
            self.table = widgets.HTML(to_html(rows))
            self.refresh_button = widgets.Button(description="refresh", icon="refresh")
            self.reset_button = widgets.Button(description="reset…", button_style="")
            self.refresh_button.on_click(lambda _b: self.refresh())
            self.reset_button.on_click(lambda _b: self.reset())
            buttons = widgets.HBox([self.refresh_button, self.reset_button])
            super().__init__([self.table, buttons])

        def refresh(self) -> None:
            self.rows = summary()
            self.table.value = to_html(self.rows)
            self.reset_button.description, self.reset_button.button_style = "reset…", ""

        def reset(self) -> None:
            """First click asks, the second one forgets everything."""
            if self.reset_button.description == "reset…":
                self.reset_button.description = "really forget all?"
                self.reset_button.button_style = "danger"
                return
            reset_progress()
            self.refresh()

        _ipython_display_ = None  # ipywidgets 7.8 (make lecture's pin): use _repr_mimebundle_

        def _repr_mimebundle_(self, **kwargs):
            from .viz.render import widget_view_bundle

            data = widget_view_bundle(self)
            data["text/plain"] = to_text(self.rows)
            data["text/html"] = to_html(self.rows)
            return data

        def __repr__(self) -> str:
            return to_text(self.rows)

    return ProgressView()


def progress(*, widget: bool = True):
    """Your progress per chapter: a widget in Jupyter (refresh, reset), else a static table."""
    rows = summary()
    if widget:
        try:
            return _widget(rows)
        except ImportError:
            pass
    return ProgressReport(rows)
