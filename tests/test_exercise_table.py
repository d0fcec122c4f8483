"""The table of exercises lists every exercise with its level and time (issues 13 and 28).

The values come from the registry (each ``Exercise`` spec declares ``id``, ``title``,
``level`` and ``minutes`` once); the table in docs/exercises.md must equal them row for row,
in id order. ``python tools/exercise_table.py --update`` regenerates it, with the chapters'
counts in the README's course table and the totals sentences (checked by
tests/test_guide_claims.py), when an exercise is added or changed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADER = "| exercise | title | level | time |"


def parse_table(text: str) -> list[tuple[str, str, str, int]]:
    """The rows of the Markdown table under HEADER: (id, title, level, minutes)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == HEADER]
    assert len(starts) == 1, f"expected one table headed {HEADER!r}, found {len(starts)}"
    body = []
    for line in lines[starts[0] + 2 :]:  # after the header and the |---| rule
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 4, f"a row with {len(cells)} cells: {line!r}"
        ident, title, level, time = cells
        minutes = re.fullmatch(r"(\d+) min", time)
        assert minutes, f"time must read 'N min', got {time!r} in {line!r}"
        body.append((ident, title, level, int(minutes.group(1))))
    return body


def registry_rows() -> list[tuple[str, str, str, int]]:
    from autodiff_lab.grading import registry

    return [(e.id, e.title, e.level, e.minutes) for e in registry.course_exercises()]


def test_every_exercise_declares_a_level_and_minutes():
    from autodiff_lab.grading.spec import LEVELS

    for ident, title, level, minutes in registry_rows():
        assert level in LEVELS, (ident, level)
        assert minutes > 0, ident
        assert title.strip(), ident


def test_parser_reads_escaped_bars_and_stops_after_the_table():
    text = f"intro\n\n{HEADER}\n|---|---|---|---|\n| 9.1 | a \\| b | easy | 7 min |\n\nafter\n"
    assert parse_table(text) == [("9.1", "a | b", "easy", 7)]


def test_the_guides_table_lists_every_exercise_with_its_level_and_time():
    page = (ROOT / "docs" / "exercises.md").read_text(encoding="utf-8")
    assert parse_table(page) == registry_rows(), (
        "docs/exercises.md's exercise table differs from the exercise specs: "
        "run `python tools/exercise_table.py --update`"
    )


def test_the_generator_rewrites_the_chapters_counts_and_the_totals(tmp_path):
    """A page without the table (the README) gets its course table's counts and its totals
    sentence from the registry; the text around them is kept."""
    from autodiff_lab.grading.spec import LEVELS

    page = tmp_path / "README.md"
    link = "| [01 · forward](notebooks/01.ipynb) | ~25 min | [01](exercises/01_forward_mode.ipynb)"
    page.write_text(
        f"{link} (1: 1 hard; ~1 min) |\n\nin all there are\n"
        "1 exercises (0 trivial, 0 easy, 0 medium, 1 hard), about 1 minutes.\n"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "exercise_table.py"), "--update", str(page)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = registry_rows()
    mine = [r for r in rows if r[0].split(".")[0] == "1"]
    levels = ", ".join(f"{n} {lv}" for lv in LEVELS if (n := sum(1 for r in mine if r[2] == lv)))
    every = ", ".join(f"{sum(1 for r in rows if r[2] == lv)} {lv}" for lv in LEVELS)
    assert page.read_text() == (
        f"{link} ({len(mine)}: {levels}; ~{sum(r[3] for r in mine)} min) |\n\n"
        f"in all there are\n{len(rows)} exercises ({every}), "
        f"about {sum(r[3] for r in rows)} minutes.\n"
    )


def test_the_generator_updates_the_guide_and_the_readme_by_default():
    """``--update`` with no file names the guide holding the table, and the README."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import exercise_table
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert exercise_table.TARGETS == [ROOT / "docs" / "exercises.md", ROOT / "README.md"]


def test_the_generator_writes_a_table_that_equals_the_registry(tmp_path):
    readme = tmp_path / "README.md"
    old_row = "| 0.0 | old | easy | 1 min |"
    readme.write_text(f"# course\n\n{HEADER}\n|---|---|---|---|\n{old_row}\n\nend\n")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "exercise_table.py"), "--update", str(readme)],
        check=True,
        capture_output=True,
    )
    text = readme.read_text()
    assert parse_table(text) == registry_rows()
    assert text.startswith("# course\n\n") and text.endswith("\nend\n")


def test_the_generator_refuses_a_readme_without_the_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "exercise_table.py"), "--update", str(readme)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "paste the table there first" in done.stdout
    assert readme.read_text() == "# no table here\n"


@pytest.mark.parametrize("level", ["trivial", "easy", "medium", "hard"])
def test_summary_counts_each_level(level):
    """The summary line counts what the registry holds (the README's closing note uses it)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "exercise_table.py"), "--summary"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = registry_rows()
    count = sum(1 for r in rows if r[2] == level)
    assert f"{len(rows)} exercises (" in done.stdout
    assert f"{count} {level}" in done.stdout
    assert f"about {sum(r[3] for r in rows)} minutes" in done.stdout


def test_per_chapter_counts_add_up():
    """`--chapters`: one line per chapter, e.g. "04 (7: 2 easy, 3 medium, 2 hard; ~155 min)"."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "exercise_table.py"), "--chapters"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = re.findall(r"^(\d\d) \((\d+): (.*); ~(\d+) min\)$", done.stdout, re.M)
    rows = registry_rows()
    assert {int(c) for c, *_ in lines} == {int(r[0].split(".")[0]) for r in rows}
    for chapter, count, levels, minutes in lines:
        mine = [r for r in rows if int(r[0].split(".")[0]) == int(chapter)]
        assert int(count) == len(mine) and int(minutes) == sum(r[3] for r in mine)
        for part in levels.split(", "):
            n, level = part.split(" ")
            assert int(n) == sum(1 for r in mine if r[2] == level), (chapter, part)
