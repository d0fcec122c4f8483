"""The gradebook: one SQLite file (stdlib ``sqlite3``) holding every grade, plus exports.

Two tables: ``submissions`` (one row per graded notebook: student, file hash, total, seed,
notes, time) and ``results`` (one row per submission and exercise: points, status,
feedback, time). Each submission is written in one transaction, so a grader that dies
mid-batch leaves every finished submission recorded and none half-written; the next run
skips what is already graded (same file content) unless asked to regrade. Regrading
replaces rows (upsert), so grading twice never duplicates anything.
"""

from __future__ import annotations

import csv
import html
import sqlite3
from collections import defaultdict
from pathlib import Path

from .grader import SubmissionResult
from .scoring import STATUSES

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS submissions (
    submission TEXT PRIMARY KEY,          -- the notebook's absolute path
    student    TEXT NOT NULL,
    notebook   TEXT NOT NULL,             -- file name
    sha256     TEXT NOT NULL,             -- content graded (a changed file is regraded)
    score      REAL NOT NULL,
    max_score  REAL NOT NULL,
    seed       INTEGER NOT NULL,          -- the cases' seed, to reproduce a grade
    notes      TEXT NOT NULL,
    graded_at  TEXT NOT NULL,
    duration_s REAL NOT NULL
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
    "student", "notebook", "exercise", "title", "points", "max_points", "status", "feedback",
    "graded_at", "submission",
]  # fmt: skip


class Gradebook:
    """A gradebook file; use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(SCHEMA)

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def is_graded(self, submission_key: str, sha256: str) -> bool:
        """True when this exact file content was graded already."""
        row = self.conn.execute(
            "SELECT sha256 FROM submissions WHERE submission = ?", (submission_key,)
        ).fetchone()
        return row is not None and row["sha256"] == sha256

    def record(self, result: SubmissionResult) -> None:
        """Insert or replace one submission's grades, atomically."""
        sub = result.submission
        with self.conn:  # one transaction: all of this submission or nothing
            self.conn.execute(
                """INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(submission) DO UPDATE SET student = excluded.student,
                     notebook = excluded.notebook, sha256 = excluded.sha256,
                     score = excluded.score, max_score = excluded.max_score,
                     seed = excluded.seed, notes = excluded.notes,
                     graded_at = excluded.graded_at, duration_s = excluded.duration_s""",
                (
                    sub.key, sub.student, sub.path.name, result.sha256, result.score,
                    result.max_score, result.seed, "\n".join(result.notes), result.graded_at,
                    round(result.duration_s, 3),
                ),
            )  # fmt: skip
            ids = [e.exercise_id for e in result.exercises]
            self.conn.execute(
                f"DELETE FROM results WHERE submission = ? AND exercise NOT IN "
                f"({', '.join('?' * len(ids))})",
                (sub.key, *ids),
            )
            self.conn.executemany(
                """INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(submission, exercise) DO UPDATE SET student = excluded.student,
                     title = excluded.title, points = excluded.points,
                     max_points = excluded.max_points, status = excluded.status,
                     feedback = excluded.feedback, graded_at = excluded.graded_at""",
                [
                    (
                        sub.key,
                        sub.student,
                        e.exercise_id,
                        e.title,
                        e.score,
                        e.max_score,
                        e.status,
                        e.feedback,
                        result.graded_at,
                    )  # fmt: skip
                    for e in result.exercises
                ],
            )

    def rows(self, submissions: list[str] | None = None) -> list[dict]:
        """Result rows (one per submission and exercise), ordered by student and exercise."""
        query = """SELECT r.student, s.notebook, r.exercise, r.title, r.points, r.max_points,
                          r.status, r.feedback, r.graded_at, r.submission
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

    def export_csv(self, path: str | Path, submissions: list[str] | None = None) -> int:
        """Write one CSV row per submission and exercise; return the number of rows."""
        rows = self.rows(submissions)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        return len(rows)

    def write_reports(
        self, folder: str | Path, submissions: list[str] | None = None, fmt: str = "md"
    ) -> list[Path]:
        """One feedback file per student (Markdown or HTML); return the paths written."""
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
        for student, subs in sorted(by_student.items()):
            render = _markdown_report if fmt == "md" else _html_report
            path = folder / f"{_safe_name(student)}.{fmt}"
            path.write_text(render(student, subs, results), encoding="utf-8")
            written.append(path)
        return written


def _id_key(exercise_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in exercise_id.split("."))


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "student"


def _md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipes, newlines or raw HTML."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown_report(student: str, subs: list[dict], results: dict[str, list[dict]]) -> str:
    lines = [f"# Feedback for {student}", ""]
    for sub in subs:
        lines += [
            f"## {sub['notebook']}: {sub['score']:g} / {sub['max_score']:g} points",
            "",
            f"Graded {sub['graded_at']}.",
            "",
        ]
        if sub["notes"]:
            lines += [f"- {_md_cell(n)}" for n in sub["notes"].splitlines()] + [""]
        rows = results.get(sub["submission"], [])
        if rows:
            lines += ["| Exercise | Points | Status | Feedback |", "|---|---|---|---|"]
            lines += [
                f"| {r['exercise']} {_md_cell(r['title'])} | {r['points']:g} / {r['max_points']:g} "
                f"| {r['status']} | {_md_cell(r['feedback'])} |"
                for r in rows
            ]
            lines.append("")
    return "\n".join(lines)


def _html_report(student: str, subs: list[dict], results: dict[str, list[dict]]) -> str:
    esc = html.escape
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
            f"<h2>{esc(sub['notebook'])}: {sub['score']:g} / {sub['max_score']:g} points</h2>"
            f"<p>Graded {esc(sub['graded_at'])}.</p>"
        )
        if sub["notes"]:
            parts.append(
                "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in sub["notes"].splitlines()) + "</ul>"
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
