"""The gradebook: one SQLite file (stdlib ``sqlite3``) holding every grade, plus exports.

Tables: ``submissions`` (one row per notebook: student, file hash, total, status, seed,
sandbox, notes, time), ``results`` (one row per submission and exercise: points, status,
feedback) and ``in_progress`` (notebooks being graded right now; a row left behind means
the grader died on it). Each submission is written in one transaction, so a grader that
dies mid-batch leaves every finished submission recorded and none half-written; the next
run skips what is already graded (same file content) unless asked to regrade. Regrading
replaces rows (upsert), so grading twice never duplicates anything.

Exports, for the lecturer's LMS and the students:

- the per-exercise CSV (:meth:`Gradebook.export_csv`): one row per student and exercise.
  When a student answered the same exercise in several notebooks, the row is their BEST
  result (most points; on a tie the latest graded) and names the notebook it came from.
  A student whose notebooks answer no exercise still gets a row, with the reason as status;
- the summary CSV (:meth:`Gradebook.export_summary`): one row per student with ``total``,
  ``maximum`` (the same for everyone: every exercise graded in the export) and one column
  per course notebook (chapter), summing the same best results;
- one feedback report per student (Markdown or HTML), with every notebook's results.

Nothing exported names a folder of the grader's machine: notebooks appear by their name
relative to the folder given to ``grade`` (``ann/03_backprop.ipynb``).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import html
import os
import re
import secrets
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .results import NOT_GRADED
from .safetext import printable
from .scoring import STATUSES

if TYPE_CHECKING:
    from .results import SubmissionResult

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS submissions (
    submission TEXT PRIMARY KEY,          -- the notebook's absolute path (never exported)
    student    TEXT NOT NULL,
    notebook   TEXT NOT NULL,             -- its name relative to the folder graded
    sha256     TEXT NOT NULL,             -- content graded (a changed file is regraded)
    score      REAL NOT NULL,
    max_score  REAL NOT NULL,
    status     TEXT NOT NULL,             -- graded, unreadable, no exercises
    seed       INTEGER NOT NULL,          -- the batch's secret seed, to reproduce a grade
    sandbox    TEXT NOT NULL,             -- bubblewrap, or none
    notes      TEXT NOT NULL,
    graded_at  TEXT NOT NULL,
    duration_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (   -- the batch seed, drawn once per gradebook
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS in_progress (
    submission TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL,
    alone      INTEGER NOT NULL,          -- 1: it was the only notebook being graded
    started_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    submission TEXT NOT NULL REFERENCES submissions(submission) ON DELETE CASCADE,
    student    TEXT NOT NULL,
    exercise   TEXT NOT NULL,
    title      TEXT NOT NULL,
    points     REAL NOT NULL,
    max_points REAL NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    feedback   TEXT NOT NULL,
    graded_at  TEXT NOT NULL,
    PRIMARY KEY (submission, exercise)
);
"""

CSV_COLUMNS = [
    "student", "exercise", "title", "points", "max_points", "status", "feedback", "notebook",
    "graded_at", "sandbox",
]  # fmt: skip


class Gradebook:
    """A gradebook file; use as a context manager or call :meth:`close`. A
    ``submission_key`` is a :attr:`~.results.Submission.key`, stored as it is."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(SCHEMA)
        columns = {r["name"] for r in self.conn.execute("PRAGMA table_info(submissions)")}
        if "sandbox" not in columns:
            raise ValueError(
                f"{self.path} was written by an older autodiff-lab; grade into a new file"
            )

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def batch_seed(self, requested: int | None = None, *, new: bool = False) -> int:
        """The cases' seed for this gradebook: ``requested``, else (unless ``new``) the one
        stored by the first run, else a fresh secret one; whichever it is, it is stored, so
        a rerun (resumed batch, late student) draws the same cases."""
        row = self.conn.execute("SELECT value FROM settings WHERE name = 'seed'").fetchone()
        if requested is not None:
            seed = int(requested)
        elif row is not None and not new:
            return int(row["value"])
        else:
            seed = secrets.randbits(31)
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO settings VALUES ('seed', ?)", (str(seed),))
        return seed

    def is_graded(self, submission_key: str, sha256: str) -> bool:
        """True when this exact file content was graded already (a :data:`NOT_GRADED`
        record is not a grade: the grader's own failure is tried again)."""
        row = self.conn.execute(
            "SELECT sha256, status FROM submissions WHERE submission = ?",
            (submission_key,),
        ).fetchone()
        return row is not None and row["sha256"] == sha256 and row["status"] != NOT_GRADED

    def in_progress(self) -> dict[str, tuple[str, int]]:
        """Notebooks left "in progress" by a grader that died: key -> (sha256, alone)."""
        rows = self.conn.execute("SELECT submission, sha256, alone FROM in_progress")
        return {r["submission"]: (r["sha256"], r["alone"]) for r in rows}

    def mark_in_progress(self, submission_key: str, sha256: str, *, alone: bool) -> None:
        """Say (durably) that this notebook is being graded now."""
        with self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO in_progress VALUES (?, ?, ?, ?)",
                (submission_key, sha256, int(alone), _now()),
            )

    def clear_in_progress(self, submission_key: str) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM in_progress WHERE submission = ?", (submission_key,))

    def record(self, result: SubmissionResult) -> None:
        """Insert or replace one submission's grades, atomically (and end its "in progress")."""
        sub = result.submission
        with self.conn:  # one transaction: all of this submission or nothing
            self.conn.execute(
                """INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(submission) DO UPDATE SET student = excluded.student,
                     notebook = excluded.notebook, sha256 = excluded.sha256,
                     score = excluded.score, max_score = excluded.max_score,
                     status = excluded.status, seed = excluded.seed,
                     sandbox = excluded.sandbox, notes = excluded.notes,
                     graded_at = excluded.graded_at, duration_s = excluded.duration_s""",
                (
                    sub.key, printable(sub.student), printable(sub.name),
                    result.sha256, result.score, result.max_score, str(result.status),
                    result.seed, result.sandbox, "\n".join(map(printable, result.notes)),
                    result.graded_at, round(result.duration_s, 3),
                ),
            )  # fmt: skip
            key = sub.key
            self.conn.execute("DELETE FROM in_progress WHERE submission = ?", (key,))
            ids = [e.exercise_id for e in result.exercises]
            self.conn.execute(
                f"DELETE FROM results WHERE submission = ? AND exercise NOT IN "
                f"({', '.join('?' * len(ids))})",
                (key, *ids),
            )
            self.conn.executemany(
                """INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(submission, exercise) DO UPDATE SET student = excluded.student,
                     title = excluded.title, points = excluded.points,
                     max_points = excluded.max_points, status = excluded.status,
                     feedback = excluded.feedback, graded_at = excluded.graded_at""",
                [
                    (
                        key,
                        printable(sub.student),
                        e.exercise_id,
                        printable(e.title),
                        e.score,
                        e.max_score,
                        str(e.status),
                        printable(e.feedback),
                        result.graded_at,
                    )  # fmt: skip
                    for e in result.exercises
                ],
            )

    def rows(self, submissions: list[str] | None = None) -> list[dict]:
        """Result rows (one per submission and exercise), ordered by student and exercise."""
        query = """SELECT r.student, s.notebook, r.exercise, r.title, r.points, r.max_points,
                          r.status, r.feedback, r.graded_at, r.submission, s.sandbox
                   FROM results r JOIN submissions s USING (submission)"""
        params: tuple = ()
        if submissions is not None:
            query += f" WHERE r.submission IN ({', '.join('?' * len(submissions))})"
            params = tuple(submissions)
        rows = [dict(r) for r in self.conn.execute(query, params)]
        rows.sort(key=lambda r: (r["student"], r["notebook"], _id_key(r["exercise"])))
        return rows

    def submission_rows(self, submissions: list[str] | None = None) -> list[dict]:
        query = "SELECT * FROM submissions"
        params: tuple = ()
        if submissions is not None:
            query += f" WHERE submission IN ({', '.join('?' * len(submissions))})"
            params = tuple(submissions)
        rows = [dict(r) for r in self.conn.execute(query, params)]
        return sorted(rows, key=lambda r: (r["student"], r["notebook"]))

    def best_rows(self, submissions: list[str] | None = None) -> list[dict]:
        """One row per (student, exercise): the best result over the student's notebooks.

        Best = most points; on a tie the latest graded, then the first notebook by name.
        A student none of whose notebooks answers an exercise gets one row saying why.
        """
        best: dict[tuple[str, str], dict] = {}
        for row in self.rows(submissions):
            key = (row["student"], row["exercise"])
            old = best.get(key)
            if old is None or (row["points"], row["graded_at"]) > (old["points"], old["graded_at"]):
                best[key] = row
        students = {s for s, _ in best}
        for sub in self.submission_rows(submissions):
            if sub["student"] not in students:
                students.add(sub["student"])
                best[(sub["student"], "")] = {
                    "student": sub["student"], "exercise": "", "title": "", "points": 0.0,
                    "max_points": 0.0, "status": sub["status"],
                    "feedback": " ".join(sub["notes"].split("\n")), "notebook": sub["notebook"],
                    "graded_at": sub["graded_at"], "sandbox": sub["sandbox"],
                }  # fmt: skip
        return sorted(best.values(), key=lambda r: (r["student"], _id_key(r["exercise"])))

    def export_csv(self, path: str | Path, submissions: list[str] | None = None) -> int:
        """Write one CSV row per student and exercise (see the module docstring)."""
        rows = self.best_rows(submissions)

        def write(f: TextIO) -> None:
            writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)

        _write_whole(Path(path), write)
        return len(rows)

    def export_summary(
        self,
        path: str | Path,
        submissions: list[str] | None = None,
        chapters: list[int] | None = None,
    ) -> int:
        """One row per student: ``student,total,maximum,<one column per notebook>``.

        ``maximum`` is the same for everyone and comes from the course's exercise
        definitions, never from what a notebook claims to answer: every exercise of the
        assigned ``chapters`` — by default each chapter in which at least half of the
        students have a result, so a ``# Exercise 8.3`` comment in one notebook cannot
        add chapter 8 to everyone's maximum (it adds that student's points, if any).
        """
        rows = self.best_rows(submissions)
        columns = _notebook_columns(rows)
        assigned = set(chapters) if chapters is not None else _assigned_chapters(rows)
        maximum = _course_maximum(rows, assigned)
        table: dict[str, dict[str, float]] = defaultdict(
            lambda: dict.fromkeys(columns.values(), 0.0)
        )
        for row in rows:
            table[row["student"]]  # every student appears, even with nothing graded
            if row["exercise"]:
                table[row["student"]][columns[_chapter(row["exercise"])]] += row["points"]

        def write(f: TextIO) -> None:
            writer = csv.writer(f)
            writer.writerow(["student", "total", "maximum", *map(csv_cell, columns.values())])
            for student in sorted(table):
                points = table[student]
                writer.writerow(
                    [csv_cell(student), _num(sum(points.values())), _num(maximum),
                     *(_num(points[c]) for c in columns.values())]
                )  # fmt: skip

        _write_whole(Path(path), write)
        return len(table)

    def write_reports(
        self, folder: str | Path, submissions: list[str] | None = None, fmt: str = "md"
    ) -> list[Path]:
        """One feedback file per student (Markdown or HTML); return the paths written.

        File names come from the student's name made safe for any file system, plus a
        short hash of the exact name whenever that changed it, so "ann lee" and
        "ann_lee" get two files.
        """
        if fmt not in ("md", "html"):
            raise ValueError(f"report format must be 'md' or 'html', got {fmt!r}")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        by_student: dict[str, list[dict]] = defaultdict(list)
        for sub in self.submission_rows(submissions):
            by_student[sub["student"]].append(sub)
        results: dict[str, list[dict]] = defaultdict(list)
        for row in self.rows(submissions):
            results[row["submission"]].append(row)
        written = []
        taken: set[str] = set()  # compared case-insensitively (macOS, Windows disks)
        for student, subs in sorted(by_student.items()):
            render = _markdown_report if fmt == "md" else _html_report
            name, digits = report_name(student), 8
            while name.lower() in taken:  # two hashes alike in 8 digits: use more
                digits += 8
                name = report_name(student, digits)
            taken.add(name.lower())
            path = folder / f"{name}.{fmt}"
            _write_whole(path, partial(_write_text, render(student, subs, results)))
            written.append(path)
        return written


def _write_whole(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write ``path`` whole or not at all: into a file beside it, renamed over it when done,
    so a grader stopped mid-export leaves the previous file, never half a class's CSV that
    a lecturer could upload as the whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "w", newline="", encoding="utf-8") as f:
            write(f)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _write_text(text: str, f: TextIO) -> None:
    f.write(text)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _num(x: float) -> str:
    return f"{x:g}"


def _chapter(exercise_id: str) -> int:
    return int(exercise_id.split(".")[0])


def course_notebook_names() -> dict[int, str]:
    """Chapter -> the course's own exercise notebook (``exercises/NN_name.ipynb`` beside the
    package), never a name a student chose."""
    import autodiff_lab

    folder = Path(autodiff_lab.__file__).parent.parent / "exercises"
    names: dict[int, str] = {}
    for nb in sorted(folder.glob("[0-9]*_*.ipynb")) if folder.is_dir() else []:
        found = re.match(r"^(\d+)_", nb.name)
        if found and ".new." not in nb.name and ".backup-" not in nb.name:
            names.setdefault(int(found.group(1)), nb.stem)
    return names


def _assigned_chapters(rows: list[dict]) -> set[int]:
    """Chapters in which at least half of the students have a result (any status)."""
    students = {r["student"] for r in rows}
    having: dict[int, set[str]] = defaultdict(set)
    for row in rows:
        if row["exercise"]:
            having[_chapter(row["exercise"])].add(row["student"])
    return {ch for ch, who in having.items() if 2 * len(who) >= len(students)}


def _course_maximum(rows: list[dict], chapters: set[int]) -> float:
    """The points of every exercise the course defines in ``chapters`` (the grader's
    recorded maximum where it graded one, else the exercise's own cases)."""
    import numpy as np

    from . import registry

    recorded: dict[str, float] = {}
    for row in rows:
        if row["exercise"]:
            recorded[row["exercise"]] = max(recorded.get(row["exercise"], 0.0), row["max_points"])
    total = {i: p for i, p in recorded.items() if _chapter(i) in chapters}
    for exercise in registry.all_exercises():
        if exercise.chapter in chapters and exercise.id not in total:
            cases = exercise.cases(np.random.default_rng(0))
            total[exercise.id] = float(sum(c.points for c in cases))
    return sum(total.values())


def _notebook_columns(rows: list[dict]) -> dict[int, str]:
    """Chapter -> column name: the course's exercise notebook for it, else ``chapter NN``."""
    course = course_notebook_names()
    chapters = sorted({_chapter(r["exercise"]) for r in rows if r["exercise"]})
    return {ch: course.get(ch, f"chapter {ch:02d}") for ch in chapters}


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A CSV value shown as text by a spreadsheet and by ``cat``: control characters
    escaped (:func:`~autodiff_lab.grading.safetext.printable`: no ``\r`` or ESC can draw
    a forged row), and one starting like a formula gets a ``'``."""
    if not isinstance(value, str):
        return value
    value = printable(value)
    return "'" + value if value.startswith(FORMULA_START) else value


REPORT_NAME_CHARS = 64


def report_name(student: str, digits: int = 8) -> str:
    """A file name for a student's report: the name made safe (ASCII letters, digits,
    ``-_.``; at most :data:`REPORT_NAME_CHARS`), then ALWAYS a hash of the exact name, so
    no folder name can take another student's file ("ann lee" vs "ann_lee" vs a folder
    named ``ann_lee-<hash>``) and no name is too long for the file system."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "_" for ch in student)
    safe = safe[:REPORT_NAME_CHARS].strip(".") or "student"
    return f"{safe}-{hashlib.sha256(student.encode('utf-8', 'surrogatepass')).hexdigest()[:digits]}"


def _id_key(exercise_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in exercise_id.split("."))


def _md_text(text: str) -> str:
    """Text shown as itself in Markdown, on one line: control characters escaped (no
    ``\r`` or line separator can end a table row or start a heading), HTML escaped,
    Markdown's punctuation backslashed (links, emphasis, pipes, ``#``, backticks), ``:``
    and ``.`` too, so no URL or ``www.`` becomes a link."""
    text = html.escape(printable(text), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~:.<>-])", r"\\\1", text)


_md_cell = _md_text  # inside a table cell: the same (pipes are escaped too)


def _headline(sub: dict) -> str:
    """``12 / 16 points``, or the reason there are none."""
    if sub["status"] != "graded":
        return str(sub["status"])
    return f"{sub['score']:g} / {sub['max_score']:g} points"


def _markdown_report(student: str, subs: list[dict], results: dict[str, list[dict]]) -> str:
    lines = [f"# Feedback for {_md_text(student)}", ""]
    for sub in subs:
        lines += [
            f"## {_md_text(sub['notebook'])}: {_headline(sub)}",
            "",
            f"Graded {sub['graded_at']}.",
            "",
        ]
        if sub["notes"]:
            lines += [f"- {_md_cell(n)}" for n in sub["notes"].split("\n")] + [""]
        rows = results.get(sub["submission"], [])
        if rows:
            lines += ["| Exercise | Points | Status | Feedback |", "|---|---|---|---|"]
            lines += [
                f"| {r['exercise']} {_md_cell(r['title'])} | {r['points']:g} / {r['max_points']:g} "
                f"| {r['status']} | {_md_cell(r['feedback'])} |"  # id and status: the grader's
                for r in rows
            ]
            lines.append("")
    return "\n".join(lines)


def _html_report(student: str, subs: list[dict], results: dict[str, list[dict]]) -> str:
    def esc(text: object) -> str:
        return html.escape(printable(text))

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Feedback for {esc(student)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}"
        "table{border-collapse:collapse}.passed{color:#1a7f37}.failed{color:#cf222e}</style>",
        f"</head><body><h1>Feedback for {esc(student)}</h1>",
    ]
    for sub in subs:
        parts.append(
            f"<h2>{esc(sub['notebook'])}: {esc(_headline(sub))}</h2>"
            f"<p>Graded {esc(sub['graded_at'])}.</p>"
        )
        if sub["notes"]:
            parts.append(
                "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in sub["notes"].split("\n")) + "</ul>"
            )
        rows = results.get(sub["submission"], [])
        if rows:
            parts.append(
                "<table><tr><th>Exercise</th><th>Points</th><th>Status</th><th>Feedback</th></tr>"
            )
            parts += [
                f"<tr><td>{esc(r['exercise'])} {esc(r['title'])}</td>"
                f"<td>{r['points']:g} / {r['max_points']:g}</td>"
                f"<td class='{esc(r['status'].replace(' ', '-'))}'>{esc(r['status'])}</td>"
                f"<td>{esc(r['feedback'])}</td></tr>"
                for r in rows
            ]
            parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
