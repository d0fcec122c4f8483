"""Otter Grader assignment notebooks from ``solutions/``: ``DIR/chNN/NN_name.ipynb``.

Each is an Otter "master" notebook (Otter Assign's format, version 1): a raw
``# ASSIGNMENT CONFIG`` cell first, then per exercise a question block —
``# BEGIN QUESTION`` (name ``exN_M``), the exercise's text, a ``# BEGIN SOLUTION`` block with
the answer cell, a ``# BEGIN TESTS`` block, ``# END QUESTION`` — and the practice
``check("N.M", answer)`` cell after it. ``otter assign NN_name.ipynb dist`` then writes the
student notebook (``dist/student/``) and the autograder zip (``dist/autograder/``).

- The answer's ``### BEGIN SOLUTION`` region becomes Otter's ``# BEGIN SOLUTION NO PROMPT``
  region followed by a prompt block, so the student's notebook gets the same stub as
  ``exercises/``: ``raise NotImplementedError("Exercise N.M: <task>")``.
- One hidden test per case, worth that case's points: ``case_passed("N.M", answer, k,
  seed=SEED)`` (:func:`~autodiff_lab.grading.export.case_passed`) is ``True`` when case
  ``k`` passes, with the cases ``autodiff-lab grade --seed SEED`` runs, so Otter's score is
  the grader's. Each test's expected output, ``True``, is stored as the cell's output (Otter
  reads the expected output of a test from there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import registry
from ..build import BEGIN_RE, END_RE, dumps_notebook, stub_line
from .chapters import Chapter, case_points

ASSIGNMENT_CONFIG = """\
# ASSIGNMENT CONFIG
name: {name}
requirements: requirements.txt
generate: true
init_cell: false
check_all_cell: false
export_cell: false
run_tests: false
tests:
  files: false
  ok_format: true"""

REQUIREMENTS = """\
# What the autograder installs besides Otter. autodiff-lab is not on PyPI: replace the line
# below with where your course's copy is, e.g. git+https://github.com/<you>/autodiff_lab
{requirement}
"""

README = """\
# Otter Grader assignments written by `autodiff-lab export otter`

Assignments: {assignments}. Cases seed: {seed} (only the hidden tests hold it).

For each chapter folder (e.g. `ch01/`):

1. Edit `requirements.txt` so that it installs `autodiff-lab` (from your course's repository).
2. `otter assign 01_forward_mode.ipynb dist` writes the student notebook
   (`dist/student/01_forward_mode.ipynb`) and the autograder (`dist/autograder/*.zip`).
3. Gradescope: create a "Programming Assignment", choose "Zip file upload" as the autograder
   configuration and upload the zip from `dist/autograder/`; students submit the notebook.
4. Locally or in a container: `otter run -a dist/autograder/ch01-autograder_*.zip -o OUT
   SUBMISSION.ipynb` writes `OUT/results.json` (OUT must exist).
5. The same points from the course's own grader: `autodiff-lab grade SUBMISSIONS --seed {seed}`.
"""


def _raw(text: str) -> dict:
    return {"cell_type": "raw", "metadata": {}, "source": text}


def _solution_source(source: str, exercise_ids: list[str]) -> str:
    """``### BEGIN/END SOLUTION`` regions as Otter's, each followed by our stub as its prompt."""
    out: list[str] = []
    current = None
    for line in source.split("\n"):
        begin = BEGIN_RE.match(line)
        if begin:
            found = re.search(r"Exercise\s+(\d+\.\d+)", begin["rest"])
            current = (begin["indent"], found.group(1) if found else exercise_ids[0])
            out.append(f"{begin['indent']}# BEGIN SOLUTION NO PROMPT")
        elif END_RE.match(line) and current is not None:
            indent, exercise_id = current
            out += [
                f"{indent}# END SOLUTION",
                f'{indent}""" # BEGIN PROMPT',
                stub_line(indent, exercise_id),  # the exercise notebook's stub, as written there
                f'{indent}""" # END PROMPT',
            ]
            current = None
        else:
            out.append(line)
    return "\n".join(out)


def _test_cell(exercise_id: str, answer: str, index: int, points: float, seed: int) -> dict:
    source = (
        '""" # BEGIN TEST CONFIG\n'
        f"points: {points:g}\n"
        "hidden: true\n"
        '""" # END TEST CONFIG\n'
        "from autodiff_lab.grading.export import case_passed\n\n"
        f'case_passed("{exercise_id}", {answer}, {index}, seed={int(seed)})'
    )
    output = {
        "data": {"text/plain": "True"},
        "execution_count": None,
        "metadata": {},
        "output_type": "execute_result",
    }
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [output],
        "source": source,
    }


def question_name(exercise_ids: list[str]) -> str:
    """Otter's name for the question of these exercises: ``ex1_1`` (a Python identifier)."""
    return "ex" + "_and_".join(i.replace(".", "_") for i in exercise_ids)


def master_notebook(chapter: Chapter, seed: int) -> dict:
    """The chapter's Otter master notebook, as a dict (``source`` strings)."""
    cells: list[dict] = [_raw(ASSIGNMENT_CONFIG.format(name=chapter.assignment))]
    for part in chapter.cells:
        if part.role != "solution":
            cells.append(part.cell)
            continue
        prompt: list[dict] = []  # the Markdown right before the answer: the question's text
        while cells and cells[-1]["cell_type"] == "markdown":
            prompt.insert(0, cells.pop())
        name = question_name(part.ids)
        cells.append(_raw(f"# BEGIN QUESTION\nname: {name}\ncheck_cell: false"))
        cells += prompt
        answer_cell = dict(part.cell, source=_solution_source(part.cell["source"], part.ids))
        cells += [_raw("# BEGIN SOLUTION"), answer_cell, _raw("# END SOLUTION")]
        cells.append(_raw("# BEGIN TESTS"))
        for exercise_id in part.ids:
            answer = registry.get(exercise_id).answer
            for k, points in enumerate(case_points(exercise_id, seed)):
                cells.append(_test_cell(exercise_id, answer, k, points, seed))
        cells += [_raw("# END TESTS"), _raw("# END QUESTION")]
    return {"cells": cells, "metadata": chapter.metadata, "nbformat": 4, "nbformat_minor": 4}


def export(
    chapters: list[Chapter], target: Path, seed: int, requirement: str = "autodiff-lab"
) -> list[Path]:
    """Write one folder per chapter into ``target``; return the master notebooks written."""
    target = Path(target)
    written = []
    for chapter in chapters:
        folder = target / chapter.assignment
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / chapter.name
        path.write_text(dumps_notebook(master_notebook(chapter, seed)), encoding="utf-8")
        (folder / "requirements.txt").write_text(REQUIREMENTS.format(requirement=requirement))
        written.append(path)
    names = ", ".join(c.assignment for c in chapters)
    (target / "README.md").write_text(README.format(assignments=names, seed=seed))
    (target / "export.json").write_text(
        json.dumps({"tool": "otter", "seed": seed, "assignments": names}, indent=1) + "\n"
    )
    return written
