"""The course's own exercises through the real machinery: every solutions notebook scores
full marks and every generated exercise notebook scores 0, "not attempted", without a crash.

Skipped until ``solutions/*.ipynb`` exist. All notebooks are graded in one batch, two at a
time, with the cases' seed fixed so a failure can be reproduced.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path

import pytest
from grading_testkit import run_cli

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
pytestmark = pytest.mark.skipif(not SOLUTIONS, reason="no solutions/*.ipynb yet")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("course")
    exercises_dir = tmp / "exercises"
    assert run_cli(["build-exercises", "--solutions", str(ROOT / "solutions"),
                    "--exercises", str(exercises_dir)]) == 0  # fmt: skip
    generated = sorted(exercises_dir.glob("*.ipynb"))
    assert [p.name for p in generated] == [p.name for p in SOLUTIONS]
    grades, db = tmp / "grades.csv", tmp / "book.sqlite"
    rc = run_cli(
        ["grade", *map(str, SOLUTIONS), *map(str, generated), "--db", str(db),
         "--out", str(grades), "-j", "2", "--timeout", "120", "--seed", "7", "--quiet"]
    )  # fmt: skip
    assert rc == 0
    with open(grades, newline="") as f:
        rows = list(csv.DictReader(f))
    with sqlite3.connect(db) as conn:
        notes = dict(conn.execute("SELECT submission, notes FROM submissions"))
    return {"rows": rows, "notes": notes, "generated": generated}


def test_solutions_score_full_marks_and_exercises_zero(graded):
    rows = graded["rows"]
    by_folder = {"solutions": [], "exercises": []}
    for row in rows:
        by_folder[row["student"]].append(row)
    names = {(r["student"], r["notebook"]) for r in rows}
    for path in SOLUTIONS:  # every notebook has exercises, in both versions
        assert ("solutions", f"solutions/{path.name}") in names
        assert ("exercises", f"exercises/{path.name}") in names
    wrong = [
        (r["notebook"], r["exercise"], r["status"], r["feedback"])
        for r in by_folder["solutions"]
        if r["status"] != "passed" or r["points"] != r["max_points"]
    ]
    assert wrong == []
    assert all(float(r["max_points"]) > 0 for r in rows)
    attempted = [
        (r["notebook"], r["exercise"], r["status"])
        for r in by_folder["exercises"]
        if r["status"] != "not attempted" or float(r["points"])
    ]
    assert attempted == []
    assert len(by_folder["exercises"]) == len(by_folder["solutions"]) >= 4 * len(SOLUTIONS)


def test_exercise_notebooks_run_all_without_errors(graded):
    """A student's "Run All" must not stop at a stub: only ``check`` may call the stubs
    (it reports "not attempted"), or the cell must be tagged ``raises-exception``."""
    stopped = []
    for path in graded["generated"]:
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        for line in graded["notes"][str(path.resolve())].splitlines():
            found = re.match(r"code cell (\d+) raised (.*)", line)
            if found and "raises-exception" not in cells[int(found[1]) - 1]["metadata"].get(
                "tags", []
            ):
                stopped.append(f"{path.name}: {line}")
    assert stopped == []
