"""The course's own exercises through the real machinery: every solutions notebook scores
full marks and every generated exercise notebook scores 0, "not attempted", without a crash.

Skipped until ``solutions/*.ipynb`` exist. All notebooks are graded in one batch, two at a
time, with the cases' seed fixed so a failure can be reproduced.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from grading_testkit import run_cli

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.skipif(not SOLUTIONS, reason="no solutions/*.ipynb yet")
def test_solutions_score_full_marks_and_exercises_zero(tmp_path):
    exercises_dir = tmp_path / "exercises"
    assert run_cli(["build-exercises", "--solutions", str(ROOT / "solutions"),
                    "--exercises", str(exercises_dir)]) == 0  # fmt: skip
    generated = sorted(exercises_dir.glob("*.ipynb"))
    assert [p.name for p in generated] == [p.name for p in SOLUTIONS]
    grades = tmp_path / "grades.csv"
    rc = run_cli(
        ["grade", *map(str, SOLUTIONS), *map(str, generated), "--db", str(tmp_path / "b.sqlite"),
         "--out", str(grades), "-j", "2", "--timeout", "120", "--seed", "7", "--quiet"]
    )  # fmt: skip
    assert rc == 0
    with open(grades, newline="") as f:
        rows = list(csv.DictReader(f))
    by_folder = {"solutions": [], "exercises": []}
    for row in rows:
        by_folder[row["student"]].append(row)
    graded = {(r["student"], r["notebook"]) for r in rows}
    for path in SOLUTIONS:  # every notebook has exercises, in both versions
        assert ("solutions", path.name) in graded and ("exercises", path.name) in graded
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
