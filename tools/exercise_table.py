"""The table of exercises and their counts, generated from the exercise registry.

Every exercise declares its id, title, level and minutes once, in its ``Exercise`` spec
(``autodiff_lab/grading/exercises/chNN*.py``); this script writes what the pages say about
them, so no page restates them by hand: the table of every exercise (in ``docs/exercises.md``),
each chapter's counts in the course table (``[01](exercises/…) (6: 2 trivial, …; ~55 min)``,
in the README) and the totals sentence (``42 exercises (6 trivial, …), about 770 minutes``).
``tests/test_exercise_table.py`` checks that the pages equal the registry.

    python tools/exercise_table.py                 # print the table
    python tools/exercise_table.py --summary       # and the counts per level, total minutes
    python tools/exercise_table.py --chapters      # and each chapter's counts and minutes
    python tools/exercise_table.py --update        # rewrite docs/exercises.md and README.md
    python tools/exercise_table.py --update FILE   # rewrite what FILE holds of the three

``--update`` replaces, in each file, the Markdown table that starts with :data:`HEADER` (the
header line up to the first line that is not a table row), every chapter's counts cell and
every totals sentence it finds; a file with none of them is left alone and the script says
where the table must go first.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = "| exercise | title | level | time |"
RULE = "|---|---|---|---|"
#: the files ``--update`` rewrites when none is named: the guide holding the table, the README
TARGETS = [ROOT / "docs" / "exercises.md", ROOT / "README.md"]
#: a chapter's counts in the course table, after its link: ``[04](exercises/04_tensors.ipynb)``
CHAPTER_CELL = re.compile(r"(\[(\d\d)\]\(exercises/[^)]*\) )\(\d+: [a-z0-9, ]+; ~\d+ min\)")
#: the totals sentence, as :func:`summary` writes it
TOTALS = re.compile(r"\d+ exercises \((?:\d+ [a-z]+, )*\d+ [a-z]+\),\s+about \d+ minutes")


def rows() -> list[tuple[str, str, str, int]]:
    """(id, title, level, minutes) of every registered exercise, in id order."""
    from autodiff_lab.grading import registry

    return [(e.id, e.title, e.level, e.minutes) for e in registry.course_exercises()]


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (a `|` would end the cell)."""
    return text.replace("|", "\\|")


def table() -> str:
    """The Markdown table: one row per exercise."""
    lines = [HEADER, RULE]
    for ident, title, level, minutes in rows():
        lines.append(f"| {ident} | {_cell(title)} | {level} | {minutes} min |")
    return "\n".join(lines) + "\n"


def summary() -> str:
    """One sentence: how many exercises, how many per level, the minutes they add up to."""
    from autodiff_lab.grading.spec import LEVELS

    found = rows()
    counts = Counter(level for _, _, level, _ in found)
    per_level = ", ".join(f"{counts[level]} {level}" for level in LEVELS)
    total = sum(minutes for *_, minutes in found)
    return f"{len(found)} exercises ({per_level}), about {total} minutes"


def chapter_counts() -> dict[str, str]:
    """Per chapter ("04"), its counts as the course table shows them: ``(7: 2 easy, …)``."""
    from autodiff_lab.grading.spec import LEVELS

    chapters: dict[int, list[tuple[str, str, str, int]]] = {}
    for row in rows():
        chapters.setdefault(int(row[0].split(".")[0]), []).append(row)
    cells = {}
    for chapter, found in sorted(chapters.items()):
        counts = Counter(level for _, _, level, _ in found)
        levels = ", ".join(f"{counts[lv]} {lv}" for lv in LEVELS if counts[lv])
        total = sum(minutes for *_, minutes in found)
        cells[f"{chapter:02d}"] = f"({len(found)}: {levels}; ~{total} min)"
    return cells


def per_chapter() -> list[str]:
    """Per chapter, the course table's exercise cell: ``NN (7: 2 easy, 3 medium; ~155 min)``."""
    return [f"{chapter} {cell}" for chapter, cell in chapter_counts().items()]


def update(page: Path) -> bool:
    """Rewrite the exercise table, the chapters' counts and the totals in ``page``; False
    (and the page left alone) when it holds none of them."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == HEADER]
    found = bool(starts)
    if starts:
        end = starts[0]
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines[starts[0] : end] = [table()]
        text = "".join(lines)
    cells = chapter_counts()

    def cell(match: re.Match) -> str:
        if match.group(2) not in cells:
            raise SystemExit(f"{page}: chapter {match.group(2)} has no exercises in the registry")
        return match.group(1) + cells[match.group(2)]

    text, n_cells = CHAPTER_CELL.subn(cell, text)
    text, n_totals = TOTALS.subn(summary(), text)
    if not (found or n_cells or n_totals):
        return False
    page.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", action="store_true", help="also print the counts")
    parser.add_argument("--chapters", action="store_true", help="also print counts per chapter")
    parser.add_argument(
        "--update",
        type=Path,
        nargs="*",
        metavar="FILE",
        help="rewrite the table and counts there (default: docs/exercises.md and README.md)",
    )
    args = parser.parse_args(argv)
    if args.update is not None:
        for page in args.update or TARGETS:
            if not update(page):
                print(f"{page} has no line {HEADER!r}: paste the table there first")
                return 1
            print(f"updated the exercise table and counts in {page}")
    else:
        print(table(), end="")
    if args.summary:
        print(summary())
    if args.chapters:
        print("\n".join(per_chapter()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
