"""``autodiff-lab export nbgrader`` end to end with the real nbgrader (pinned in the test extra).

One chapter's assignment is exported, ``nbgrader generate_assignment`` releases it, and
``nbgrader autograde`` grades three submissions built from the release: every answer cell
filled in from the solutions (full marks), the release unedited (zero), and a mix (1.1
right, 1.2 with a sign error, the rest stubs). nbgrader's points per exercise must equal
``autodiff-lab grade --seed SEED``'s on the very same notebooks.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from export_testkit import SEED, WRONG_DUAL_SIN, grader_points, read_nb, require, source, tool
from export_testkit import write_nb as write

from autodiff_lab.cli import main

pytestmark = pytest.mark.exhaustive  # nbgrader run end to end: about a minute of its processes


def test_nbgrader_generate_and_autograde_match_the_grader(tmp_path: Path) -> None:
    require("nbgrader", "nbgrader==0.9.6")
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    assert main(["export", "nbgrader", str(course), "--chapters", "1", "--seed", str(SEED)]) == 0
    tool("nbgrader", "generate_assignment", "ch01", cwd=course)
    name = "01_forward_mode.ipynb"
    release = read_nb(course / "release" / "ch01" / name)
    solved = {
        c["metadata"]["nbgrader"]["grade_id"]: c
        for c in read_nb(course / "source" / "ch01" / name)["cells"]
    }
    released_text = "\n".join(source(c) for c in release["cells"])
    assert str(SEED) not in released_text and "BEGIN SOLUTION" not in released_text

    def submission(student: str, answers: dict[str, str]) -> Path:
        nb = copy.deepcopy(release)
        for cell in nb["cells"]:
            grade_id = cell["metadata"]["nbgrader"]["grade_id"]
            if grade_id in answers:
                cell["source"] = answers[grade_id]
        return write(course / "submitted" / student / "ch01" / name, nb)

    answer_ids = [k for k, c in solved.items() if c["metadata"]["nbgrader"]["solution"]]
    assert answer_ids == [f"answer-1_{k}" for k in range(1, 7)]
    paths = {
        "solved": submission("solved", {k: source(solved[k]) for k in answer_ids}),
        "stub": submission("stub", {}),
        "mixed": submission(
            "mixed", {"answer-1_1": source(solved["answer-1_1"]), "answer-1_2": WRONG_DUAL_SIN}
        ),
    }
    tool("nbgrader", "autograde", "ch01", "--create", cwd=course)

    nbgrader_points: dict[str, dict[str, float]] = {}
    maximum: dict[str, float] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in paths:
            notebook = gradebook.find_submission_notebook(name[:-6], "ch01", student)
            for grade in notebook.grades:
                if grade.cell.name.startswith("test-"):
                    exercise_id = grade.cell.name[5:].replace("_", ".")
                    nbgrader_points.setdefault(student, {})[exercise_id] = grade.score
                    maximum[exercise_id] = grade.max_score
    ids = [f"1.{k}" for k in range(1, 7)]
    assert sorted(maximum) == ids
    assert nbgrader_points["solved"] == maximum  # full marks
    assert nbgrader_points["stub"] == dict.fromkeys(ids, 0.0)  # zero
    mixed = nbgrader_points["mixed"]
    assert mixed["1.1"] == maximum["1.1"] and 0 < mixed["1.2"] < maximum["1.2"]
    assert all(mixed[i] == 0 for i in ids[2:])
    # The course's own grader, on the same three notebooks with the same seed.
    assert grader_points(paths, SEED) == nbgrader_points
