"""The book's guides (docs/*.md) say only what is true: every number in them is checked here.

Each number is either a value the code or the configuration defines (read from there, not
restated), or the name of something that exists — a chapter, an exercise, a notebook — or an
example value in a command (listed, with the command it belongs to). Numbers in Python examples
and in MyST directives are code, not claims. A number in a guide that
is none of these fails the test: add the check here when you add the number there.
"""

from __future__ import annotations

import re
from pathlib import Path

from autodiff_lab.cli import build_parser
from autodiff_lab.grading import registry

ROOT = Path(__file__).resolve().parent.parent
GUIDES = sorted((ROOT / "docs").glob("*.md"))
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?![\w.]*\w)")


def grade_default(option: str):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["grade"].get_default(option)


def pinned(name: str) -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(rf'"{re.escape(name)}==([^"]+)"', text)[1]


def chapters() -> set[str]:
    return {p.name[:2] for p in ROOT.glob("notebooks/[0-9][0-9]_*.ipynb")}


#: (guide, number) -> why it is true; each is evaluated when the test runs.
CLAIMS = {
    ("lecturer", "60"): lambda: grade_default("timeout") == 60,
    ("lecturer", "600"): lambda: grade_default("notebook_timeout") == 600,
    ("lecturer", "2048"): lambda: grade_default("memory") == 2048,
    ("lecturer", "0.9.6"): lambda: pinned("nbgrader") == "0.9.6",
    ("lecturer", "7.0.0"): lambda: pinned("otter-grader") == "7.0.0",
    ("lecturer", "4"): lambda: "-j 4" in (ROOT / "docs" / "lecturer.md").read_text(),  # example
    ("student", "1"): lambda: "seed=1" in (ROOT / "docs" / "student.md").read_text(),  # example
    ("student", "1/N"): lambda: True,  # the mean's factor, named as a mistake, not a count
}


#: Python examples and MyST directives (a toctree's depth): code, whose numbers are not claims.
CODE = re.compile(r"^```(?:python|\{[a-z]+\}).*?^```", re.M | re.S)


def numbers(guide: Path) -> list[str]:
    return NUMBER.findall(CODE.sub("", guide.read_text(encoding="utf-8")))


def test_every_number_in_the_guides_is_checked():
    exercise_ids = {e.id for e in registry.course_exercises()}
    unchecked = []
    for guide in GUIDES:
        for number in numbers(guide):
            key = (guide.stem, number)
            if key in CLAIMS:
                assert CLAIMS[key](), f"{guide.name}: {number} is no longer true"
            elif number in chapters() or number in exercise_ids:
                continue  # a chapter (01, 02…) or an exercise (1.1, 3.2…) that exists
            else:
                unchecked.append(f"{guide.name}: {number}")
    assert not unchecked, "numbers no test checks:\n" + "\n".join(unchecked)


def test_the_guides_commands_exist():
    """Every ``autodiff-lab`` sub-command and option a guide shows is the command line's."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for guide in GUIDES:
        text = guide.read_text(encoding="utf-8")
        for command, rest in re.findall(r"autodiff-lab ([a-z-]+)([^`\n]*)", text):
            assert command in sub.choices, f"{guide.name}: autodiff-lab {command}"
            options = {s for a in sub.choices[command]._actions for s in a.option_strings}
            for option in re.findall(r"(?<!\S)(--?[a-z][a-z-]*)", rest):
                assert option in options, f"{guide.name}: autodiff-lab {command} {option}"


def test_every_link_of_the_readme_and_the_guides_to_a_file_resolves():
    """Relative links in README.md and docs/*.md point at files that exist (the built book's
    links are checked in tests/test_book_site.py; links to other sites are not fetched)."""
    broken, checked = [], 0
    for doc in [ROOT / "README.md", *GUIDES]:
        text = CODE.sub("", doc.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            checked += 1
            if not path.exists():
                broken.append(f"{doc.name}: {target}")
    assert checked > 20 and not broken, (checked, broken)
