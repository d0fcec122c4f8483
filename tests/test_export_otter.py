"""``autodiff-lab export otter`` end to end with the real Otter Grader (pinned in the test extra).

One chapter's master notebook is exported; ``otter assign`` builds the student notebook and
the autograder zip; ``otter run`` grades two submissions built from the student notebook:
every answer cell filled in from the solutions (full marks) and the notebook unedited
(zero). Otter's points per question must equal ``autodiff-lab grade --seed SEED``'s on the
same notebooks, and the student notebook's stubs are those of ``exercises/``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from export_testkit import SEED, finish, grader_points, read_nb, require, source, start, tool
from export_testkit import write_nb as write

from autodiff_lab.cli import main

pytestmark = pytest.mark.exhaustive  # Otter run end to end: half a minute of its processes

ROOT = Path(__file__).resolve().parent.parent
NAME = "01_forward_mode.ipynb"


def _answers_in_master(master: dict) -> list[str]:
    """The code cells between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` raw cells."""
    answers, inside = [], False
    for cell in master["cells"]:
        text = source(cell).strip()
        if cell["cell_type"] == "raw" and text in ("# BEGIN SOLUTION", "# END SOLUTION"):
            inside = text == "# BEGIN SOLUTION"
        elif inside and cell["cell_type"] == "code":
            answers.append(source(cell))
    return answers


def test_otter_assign_and_run_match_the_grader(tmp_path: Path) -> None:
    require("otter", "otter-grader==7.0.0")
    out = tmp_path / "otter"
    assert main(["export", "otter", str(out), "--chapters", "1", "--seed", str(SEED)]) == 0
    folder = out / "ch01"
    tool("otter", "assign", NAME, "dist", cwd=folder)
    student = read_nb(folder / "dist" / "student" / NAME)
    (autograder,) = (folder / "dist" / "autograder").glob("*.zip")

    answer_cells = [
        c for c in student["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])
    ]
    released = [source(c) for c in answer_cells]
    # The student's stubs are exactly the exercise notebook's answer cells.
    exercises = read_nb(ROOT / "exercises" / NAME)
    stubs = [
        source(c)
        for c in exercises["cells"]
        if c["cell_type"] == "code" and "raise NotImplementedError(" in source(c)
    ]
    assert released == stubs
    assert str(SEED) not in json.dumps(student)

    solutions = _answers_in_master(read_nb(folder / NAME))
    assert len(solutions) == len(released) == 6  # exercises 1.1–1.6

    def submission(name: str, answers: list[str]) -> Path:
        nb = copy.deepcopy(student)
        cells = [c for c in nb["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])]
        for cell, text in zip(cells, answers, strict=False):
            cell["source"] = text
        return write(tmp_path / "submissions" / name / NAME, nb)

    paths = {"solved": submission("solved", solutions), "stub": submission("stub", [])}
    otter_points: dict[str, dict[str, float]] = {}
    maximum: dict[str, float] = {}
    runs = {}  # the two `otter run`s at once: each spends seconds importing Otter
    for name, path in paths.items():
        (tmp_path / "results" / name).mkdir(parents=True)
        out_dir = str(tmp_path / "results" / name)
        runs[name] = start(
            "otter", "run", "-a", str(autograder), "-o", out_dir, str(path), cwd=tmp_path
        )
    for name, process in runs.items():
        finish(process)
        results = json.loads((tmp_path / "results" / name / "results.json").read_text())
        for test in results["tests"]:
            if test["name"].startswith("ex"):
                exercise_id = test["name"][2:].replace("_", ".")
                otter_points.setdefault(name, {})[exercise_id] = float(test["score"])
                maximum[exercise_id] = float(test["max_score"])
    ids = [f"1.{k}" for k in range(1, 7)]
    assert sorted(maximum) == ids
    assert otter_points["solved"] == maximum  # full marks
    assert otter_points["stub"] == dict.fromkeys(ids, 0.0)  # zero
    assert grader_points(paths, SEED) == otter_points
