"""The study time a chapter states on its first cell ("About N minutes") is measured.

The study model, for a student who reads the text, reads the code and runs every cell:

    minutes = (words of Markdown, speaker notes included) / 100
              + (non-blank lines of code) x 9 s
              + (code cells) x 30 s

100 words a minute is studying technical prose with formulas (skimming it goes at 150-200, a
speed at which a derivation is not followed); 9 seconds a line is reading code to know what
each line does, as the exercises then ask; 30 seconds a cell is running it and looking at
its output. Lines, not cells, carry the reading: a long cell split in two for the slides
takes no longer to read. Graded exercises are not included (each chapter says where they
are). Every chapter states a time within 25 % of this estimate, and the course tables of the
README and of the student's guide (docs/student.md) repeat it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from notebook_helpers import cell_source as _source

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(
    p for p in (ROOT / "notebooks").glob("0[0-9]_*.ipynb") if p.stem != "00_start_here"
)
WORDS_PER_MINUTE = 100
SECONDS_PER_CODE_LINE = 9
SECONDS_PER_CODE_CELL = 30
STATED = re.compile(r"\bAbout (\d+) minutes\b", re.IGNORECASE)


def reading_time(path: Path) -> tuple[int, int, int, float]:
    """(Markdown words, non-blank code lines, code cells, estimated minutes) of one chapter."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    words = sum(len(_source(c).split()) for c in cells if c["cell_type"] == "markdown")
    code = [_source(c) for c in cells if c["cell_type"] == "code" and _source(c).strip()]
    lines = sum(1 for source in code for line in source.splitlines() if line.strip())
    seconds = lines * SECONDS_PER_CODE_LINE + len(code) * SECONDS_PER_CODE_CELL
    return words, lines, len(code), words / WORDS_PER_MINUTE + seconds / 60


def test_the_estimate_counts_words_code_lines_and_cells(tmp_path):
    """300 words, 3 code cells of 10 lines (blank lines not counted), an empty cell (not
    counted): 3 + 30 x 9 s + 3 x 30 s = 3 + 4.5 + 1.5 = 9 minutes."""
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "word " * 200, "metadata": {}},
            {"cell_type": "markdown", "source": ["word " * 50, "word " * 50], "metadata": {}},
            *({"cell_type": "code", "source": "x = 1\n\n" * 10, "metadata": {}} for _ in range(3)),
            {"cell_type": "code", "source": "  \n", "metadata": {}},
        ]
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert reading_time(path) == (300, 30, 3, pytest.approx(9.0))


def test_every_chapter_states_a_reading_time():
    missing = [p.stem for p in CHAPTERS if not STATED.search(_first_cell(p))]
    assert not missing, f"chapters with no 'About N minutes' on their first cell: {missing}"


@pytest.mark.parametrize("page", ["README.md", "docs/student.md"])
def test_the_course_tables_give_the_times_the_chapters_state(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    link = r"(?:\.\./)?notebooks/"
    for path in CHAPTERS:
        row = re.search(rf"^\| \[[^]]*\]\({link}{path.name}\) \| ~(\d+) min \|", text, re.M)
        assert row, f"{page}'s course table has no '~N min' cell for {path.name}"
        assert int(row.group(1)) == int(STATED.search(_first_cell(path)).group(1)), path.name
    times = re.findall(rf"^\| \[[^]]*\]\({link}[^)]*\) \| ~(\d+) min \|", text, re.M)
    assert len(times) == len(CHAPTERS), f"{page}: a '~N min' row that is no chapter"


def _first_cell(path: Path) -> str:
    return _source(json.loads(path.read_text(encoding="utf-8"))["cells"][0])


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_stated_reading_time_is_within_25_percent_of_the_estimate(path):
    found = STATED.search(_first_cell(path))
    assert found, f"{path.name} states no reading time on its first cell"
    words, lines, cells, minutes = reading_time(path)
    stated = int(found.group(1))
    assert abs(stated - minutes) <= 0.25 * minutes, (
        f"{path.name} says about {stated} minutes; {words} words / {WORDS_PER_MINUTE} + "
        f"{lines} code lines x {SECONDS_PER_CODE_LINE} s + {cells} cells x "
        f"{SECONDS_PER_CODE_CELL} s = {minutes:.0f} minutes"
    )


def test_start_page_slide_count_per_chapter_is_true():
    """The start page's pacing note: "Each chapter is 20-50 slides" (slides + subslides)."""
    start = ROOT / "notebooks" / "00_start_here.ipynb"
    assert "Each notebook is 20–50 slides" in "".join(
        _source(c) for c in json.loads(start.read_text(encoding="utf-8"))["cells"]
    )
    for path in CHAPTERS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        kinds = [c["metadata"].get("slideshow", {}).get("slide_type") for c in cells]
        slides = kinds.count("slide") + kinds.count("subslide")
        assert 20 <= slides <= 50, f"{path.name}: {slides} slides"
