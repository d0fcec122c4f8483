"""A solutions notebook read for export: each cell with its role and the exercises it serves.

Roles: ``markdown`` and ``raw`` (text), ``code`` (setup or demonstration code),
``solution`` (a code cell with ``### BEGIN SOLUTION`` regions; ``ids`` are the exercises
it answers) and ``check`` (a code cell calling ``check("N.M", answer)``; ``ids`` is
``[N.M]``). Cells tagged ``solution-only`` are left out, outputs and execution metadata
are cleared, as ``autodiff-lab build-exercises`` does.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..build import (
    CHECK_CALL_RE,
    SOLUTION_ONLY_TAG,
    BuildError,
    read_notebook,
    replace_regions,
    solution_notebooks,
)

CHAPTER_RE = re.compile(r"^(\d+)_")


@dataclass
class Cell:
    """One notebook cell (a dict as in the file, ``source`` one string) and its role."""

    role: str
    cell: dict
    ids: list[str] = field(default_factory=list)


@dataclass
class Chapter:
    """A chapter's exercises notebook: its file name, notebook metadata and cells."""

    name: str  # e.g. "01_forward_mode.ipynb"
    number: int
    metadata: dict
    cells: list[Cell]

    @property
    def exercise_ids(self) -> list[str]:
        """The exercises answered in this notebook, in the order they appear."""
        ids: list[str] = []
        for c in self.cells:
            if c.role == "solution":
                ids += [i for i in c.ids if i not in ids]
        return ids

    @property
    def assignment(self) -> str:
        """The assignment's name in nbgrader and Otter: ``ch01``."""
        return f"ch{self.number:02d}"


def read_chapter(path: Path) -> Chapter:
    """Read ``solutions/NN_name.ipynb``; raise BuildError when it cannot be exported."""
    path = Path(path)
    number = CHAPTER_RE.match(path.name)
    if number is None:
        raise BuildError(f"{path.name}: a chapter's notebook name starts with its number (NN_)")
    nb = read_notebook(path)
    metadata = copy.deepcopy(nb.get("metadata", {}))
    metadata.pop("widgets", None)
    kept = [c for c in nb["cells"] if SOLUTION_ONLY_TAG not in c["metadata"].get("tags", [])]
    cells: list[Cell] = []
    for index, cell in enumerate(kept):
        cell = copy.deepcopy(cell)
        cell["metadata"].pop("execution", None)
        cell.pop("id", None)
        if cell["cell_type"] != "code":
            cells.append(Cell(cell["cell_type"], cell))
            continue
        cell["outputs"], cell["execution_count"] = [], None
        later = [c["source"] for c in kept[index + 1 :] if c["cell_type"] == "code"]
        _, ids, _ = replace_regions(cell["source"], later, f"{path.name} cell {index + 1}")
        if ids:
            cells.append(Cell("solution", cell, list(dict.fromkeys(ids))))
        elif found := CHECK_CALL_RE.search(cell["source"]):
            cell["source"] = assignment_check(cell["source"])
            cells.append(Cell("check", cell, [found.group(1)]))
        else:
            cells.append(Cell("code", cell))
    chapter = Chapter(path.name, int(number.group(1)), metadata, cells)
    for exercise_id in chapter.exercise_ids:
        registry.get(exercise_id)  # a KeyError names the unknown exercise
    return chapter


def assignment_check(source: str) -> str:
    """A practice ``check("N.M", answer)`` cell as an exported assignment runs it:
    ``check("N.M", answer, assignment=True)``, which switches solution sketches off for the
    rest of the kernel's life (``reveal=True`` is refused from then on)."""
    stripped = source.rstrip()
    if not stripped.endswith(")") or "assignment=" in stripped:
        return source
    return stripped[:-1].rstrip().rstrip(",") + ", assignment=True)"


def chapters(solutions_dir: Path, only: list[str] | None = None) -> list[Chapter]:
    """Every chapter in ``solutions_dir`` with exercises (``only``: chapter numbers)."""
    wanted = {int(n) for n in only} if only else None
    found = []
    for path in solution_notebooks(Path(solutions_dir)):
        number = CHAPTER_RE.match(path.name)
        if number and (wanted is None or int(number.group(1)) in wanted):
            chapter = read_chapter(path)
            if chapter.exercise_ids:
                found.append(chapter)
    if wanted is not None and len(found) != len(wanted):
        missing = sorted(wanted - {c.number for c in found})
        raise BuildError(f"no exercises notebook in {solutions_dir} for chapter(s) {missing}")
    return found


def case_points(exercise_id: str, seed: int) -> list[float]:
    """Each case's points for ``exercise_id`` with the cases of ``seed`` (grader's order)."""
    import numpy as np

    from ..checking import case_seed

    exercise = registry.get(exercise_id)
    return [
        float(c.points) for c in exercise.cases(np.random.default_rng(case_seed(exercise_id, seed)))
    ]
