"""Reading stored notebooks in tests (shared by the chapter tests).

A module of its own rather than conftest.py, as ``svg_helpers``: tests/ and tests/browser/
each have a conftest, so ``from conftest import …`` would find whichever was imported first.
"""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path


def notebook_cells(path: Path) -> list[dict]:
    """The cells of a stored notebook, as JSON (no nbformat normalisation)."""
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def cell_source(cell: dict) -> str:
    """A cell's source as one string (stored either as a string or a list of lines)."""
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def markdown_text(path: Path) -> str:
    """Every Markdown cell of a notebook, joined by newlines."""
    return "\n".join(cell_source(c) for c in notebook_cells(path) if c["cell_type"] == "markdown")


def printed(cell: dict) -> str:
    """What one code cell printed (its stream outputs)."""
    return "".join(
        o["text"] if isinstance(o["text"], str) else "".join(o["text"])
        for o in cell.get("outputs", [])
        if o["output_type"] == "stream"
    )


def printed_text(cells: list[dict]) -> str:
    """Every stored stream and text/plain output of these cells, in order."""
    out = []
    for cell in cells:
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                out.append("".join(o["text"]))
            elif "data" in o:
                out.append("".join(o["data"].get("text/plain", "")))
    return "\n".join(out)


def assert_solutions_score_full_marks(path: Path, exercises) -> None:
    """A solutions notebook marks every exercise's answer and stores a PASSED scorecard."""
    code = [c for c in notebook_cells(path) if c["cell_type"] == "code"]
    sources = "\n".join(cell_source(c) for c in code)
    texts = [
        "".join(out.get("data", {}).get("text/plain", "")) + "".join(out.get("text", ""))
        for c in code
        for out in c.get("outputs", [])
    ]
    for exercise in exercises:
        assert f"### BEGIN SOLUTION  # Exercise {exercise.id}" in sources
        card = next((t for t in texts if t.startswith(f"Exercise {exercise.id}:")), None)
        assert card is not None and "PASSED" in card.splitlines()[0], card


def nbval_sanitized(text: str) -> str:
    """``text`` as strict nbval compares it: every rule of tests/nbval_sanitize.cfg applied
    (addresses, graphviz versions, timings, the bytes of PNG pictures inside HTML)."""
    rules = configparser.ConfigParser(interpolation=None)
    rules.read(Path(__file__).with_name("nbval_sanitize.cfg"), encoding="utf-8")
    for section in rules.sections():
        text = re.sub(rules[section]["regex"], rules[section]["replace"], text)
    return text


#: A chapter split into parts: ``NN_K_slug.ipynb`` is part K of chapter NN (the convention of
#: issue 25 §3, e.g. ``03_1_value_and_backward.ipynb``); a chapter in one piece is ``NN_slug``.
CHAPTER_PART = re.compile(r"^(\d\d)_(?:(\d)_)?")


def chapter_notebooks(folder: Path, number: int) -> list[Path]:
    """Chapter ``number``'s notebooks in ``folder``: the one notebook, or every part in order."""
    return sorted(folder.glob(f"{number:02d}_*.ipynb"))


def chapter_label(path: Path) -> str:
    """How the course names a chapter notebook: ``"04"`` for a chapter, ``"03.1"`` for a part."""
    found = CHAPTER_PART.match(path.name)
    assert found, f"{path.name} is not a chapter notebook (NN_slug or NN_K_slug)"
    return found[1] if found[2] is None else f"{found[1]}.{found[2]}"
