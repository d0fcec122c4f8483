"""The README's table of exercises, generated from the exercise registry.

Every exercise declares its id, title, level and minutes once, in its ``Exercise`` spec
(``autodiff_lab/grading/exercises/chNN*.py``); this script writes them as one Markdown table,
so the README never restates them by hand. ``tests/test_readme_exercise_table.py`` checks
that the README's table equals the registry.

    python tools/exercise_table.py                 # print the table
    python tools/exercise_table.py --summary       # and the counts per level, total minutes
    python tools/exercise_table.py --chapters      # and each chapter's counts and minutes
    python tools/exercise_table.py --update README.md   # replace the table in the README

``--update`` replaces the Markdown table that starts with :data:`HEADER` (the header line up
to the first line that is not a table row); a README without one is left alone and the
script says where the table must go first.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = "| exercise | title | level | time |"
RULE = "|---|---|---|---|"


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


def per_chapter() -> list[str]:
    """Per chapter, the course table's exercise cell: ``NN (7: 2 easy, 3 medium; ~155 min)``."""
    from autodiff_lab.grading.spec import LEVELS

    chapters: dict[int, list[tuple[str, str, str, int]]] = {}
    for row in rows():
        chapters.setdefault(int(row[0].split(".")[0]), []).append(row)
    lines = []
    for chapter, found in sorted(chapters.items()):
        counts = Counter(level for _, _, level, _ in found)
        levels = ", ".join(f"{counts[lv]} {lv}" for lv in LEVELS if counts[lv])
        total = sum(minutes for *_, minutes in found)
        lines.append(f"{chapter:02d} ({len(found)}: {levels}; ~{total} min)")
    return lines


def update(readme: Path) -> bool:
    """Replace the exercise table in ``readme``; False when it has none yet."""
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == HEADER]
    if not starts:
        return False
    start = starts[0]
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = [table()]
    readme.write_text("".join(lines), encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", action="store_true", help="also print the counts")
    parser.add_argument("--chapters", action="store_true", help="also print counts per chapter")
    parser.add_argument("--update", type=Path, metavar="README", help="rewrite the table there")
    args = parser.parse_args(argv)
    if args.update is not None:
        if not update(args.update):
            print(f"{args.update} has no line {HEADER!r}: paste the table there first")
            return 1
        print(f"updated the exercise table in {args.update}")
    else:
        print(table(), end="")
    if args.summary:
        print(summary())
    if args.chapters:
        print("\n".join(per_chapter()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
