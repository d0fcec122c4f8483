"""An nbgrader course from ``solutions/``: ``DIR/source/chNN/NN_name.ipynb`` + config.

Every cell gets nbgrader's metadata (schema 3):

- text and setup code: read-only (``locked``);
- a cell with ``### BEGIN SOLUTION`` regions: a solution cell (nbgrader's own markers:
  ``nbgrader generate_assignment`` replaces each region with its code stub);
- each ``check("N.M", answer)`` cell stays, read-only, for practice; after it comes an
  autograded test cell worth the exercise's points. Its graded part is between
  ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``, so students never see the seed:
  ``points("N.M", answer, seed=SEED)`` (:func:`~autodiff_lab.grading.export.points`) runs
  the cases ``autodiff-lab grade --seed SEED`` runs and returns the points, which nbgrader
  takes as the cell's partial credit.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..build import BuildError, dumps_notebook
from .chapters import Chapter, case_points

CONFIG = '''\
"""nbgrader configuration written by `autodiff-lab export nbgrader` (edit course_id freely)."""

c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = {course_id!r}
'''

README = """\
# nbgrader course written by `autodiff-lab export nbgrader`

Assignments: {assignments}. Cases seed: {seed} (the test cells' hidden part holds it too).

1. Put this folder on the JupyterHub as the course directory (with `autodiff-lab` installed
   in the students' and the grader's environment), then for each assignment:
   `nbgrader generate_assignment ch01` (writes `release/ch01/`), and release it.
2. After collecting: `nbgrader autograde ch01` and `nbgrader generate_feedback ch01`.
3. The same points from the course's own grader, on the collected notebooks:
   `autodiff-lab grade submitted/ --seed {seed}`.
"""


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return meta


def test_cell_source(exercise_id: str, answer: str, total: float, seed: int) -> str:
    """The autograded cell of one exercise (the hidden part is cut from the release)."""
    return (
        f"# Exercise {exercise_id} is graded here ({total:g} points) on cases drawn from a seed\n"
        "# your lecturer fixed. Try your answer with the check cell above first.\n"
        "### BEGIN HIDDEN TESTS\n"
        "from autodiff_lab.grading.export import points\n\n"
        f'points("{exercise_id}", {answer}, seed={int(seed)})\n'
        "### END HIDDEN TESTS"
    )


def assignment_notebook(chapter: Chapter, seed: int) -> dict:
    """The chapter's nbgrader source notebook, as a dict (``source`` strings)."""
    from .. import registry

    cells: list[dict] = []
    answered: set[str] = set()
    tested: set[str] = set()
    for k, part in enumerate(chapter.cells):
        cell = dict(part.cell)
        cell["metadata"] = dict(cell["metadata"])
        if part.role == "solution":
            grade_id = "answer-" + "-".join(i.replace(".", "_") for i in part.ids)
            cell["metadata"]["nbgrader"] = _meta(grade_id, solution=True)
            answered.update(part.ids)
        else:
            cell["metadata"]["nbgrader"] = _meta(f"{part.role}-{k}", locked=True)
        cells.append(cell)
        if part.role == "check" and part.ids[0] in answered and part.ids[0] not in tested:
            exercise_id = part.ids[0]
            exercise = registry.get(exercise_id)
            total = sum(case_points(exercise_id, seed))
            cells.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {
                        "nbgrader": _meta(
                            f"test-{exercise_id.replace('.', '_')}",
                            grade=True,
                            locked=True,
                            points=total,
                        )
                    },
                    "outputs": [],
                    "source": test_cell_source(exercise_id, exercise.answer, total, seed),
                }
            )
            tested.add(exercise_id)
    untested = [i for i in chapter.exercise_ids if i not in tested]
    if untested:
        raise BuildError(
            f'{chapter.name}: exercise(s) {", ".join(untested)} have no check("N.M", …) cell '
            "after their answer, where the graded test cell would go"
        )
    return {
        "cells": cells,
        "metadata": chapter.metadata,
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def export(chapters: list[Chapter], target: Path, seed: int, course_id: str) -> list[Path]:
    """Write the course into ``target``; return the notebooks written."""
    target = Path(target)
    written = []
    for chapter in chapters:
        folder = target / "source" / chapter.assignment
        folder.mkdir(parents=True, exist_ok=True)
        nb = assignment_notebook(chapter, seed)
        for cell in nb["cells"]:  # nbformat 4.5 wants cell ids
            cell["id"] = cell["metadata"]["nbgrader"]["grade_id"]
        path = folder / chapter.name
        path.write_text(dumps_notebook(nb), encoding="utf-8")
        written.append(path)
    (target / "nbgrader_config.py").write_text(CONFIG.format(course_id=course_id))
    names = ", ".join(c.assignment for c in chapters)
    (target / "README.md").write_text(README.format(assignments=names, seed=seed))
    (target / "export.json").write_text(
        json.dumps({"tool": "nbgrader", "seed": seed, "assignments": names}, indent=1) + "\n"
    )
    return written
