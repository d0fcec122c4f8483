"""The numbers the README and the guides state are the numbers the project has.

Each test reads a figure from README.md or a guide in docs/ and compares it with what it
counts (a test table, the exercise registry, a notebook folder, pyproject.toml), so the claim
and its evidence cannot drift apart. The README itself stays a page: at most
:data:`README_LINES` lines.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_LINES = 150  # issue 28: "a README that fits on a page"

#: the README's picture: a widget's static picture, as the widgets gallery stores it
PICTURE = DOCS / "_static" / "backward-stepper.svg"
PICTURE_CELL_SOURCE = "tensor_stepper = BackwardStepper(loss)"


def guide(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


def stated_number(text: str, pattern: str, where: str) -> int:
    match = re.search(pattern, " ".join(text.split()))  # (lines wrap anywhere)
    assert match, f"{where} no longer says {pattern!r}: update this test with it"
    return int(match.group(1))


def course_exercises() -> tuple[set[int], list]:
    from autodiff_lab.grading.registry import all_exercises

    # the course's chapters are those with a solutions notebook (not tests' own exercises)
    chapters = {int(p.name[:2]) for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")}
    return chapters, [e for e in all_exercises() if e.chapter in chapters]


def test_the_readme_fits_on_a_page():
    lines = README.count("\n") + (not README.endswith("\n"))
    assert lines <= README_LINES, f"README.md has {lines} lines; at most {README_LINES}"


def test_each_design_decision_is_one_line_linking_to_its_full_text():
    """README "Design decisions": one line per decision, each starting with a link into a
    guide's section (tests/test_book_guides.py checks that the section exists)."""
    section = README[README.index("## Design decisions") : README.index("## Licence")]
    lines = [line for line in section.splitlines()[1:] if line.strip()]
    decisions = [line for line in lines if line.startswith("- ")]
    assert len(decisions) >= 5 and len(lines) == len(decisions) + 1, lines  # + one intro line
    for line in decisions:
        assert re.match(r"- \[[^]]+\]\(docs/[a-z]+\.md#[a-z0-9-]+\)", line), line


def test_the_readme_names_the_licence_pyproject_declares():
    licence = re.search(r'^license = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    section = README[README.index("## Licence") :]
    assert licence and re.search(rf"^{re.escape(licence[1])}\b", section.split("\n", 2)[2])


def test_the_python_version_the_readme_and_the_guide_need_is_pyprojects():
    floor = re.search(
        r'^requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text(), re.M
    )
    assert floor
    for where, text in (("README.md", README), ("maintainer.md", guide("maintainer"))):
        assert f"Python ≥ {floor[1]}" in text, where


def stored_picture() -> tuple[str, str]:
    """(the SVG, the widget's step line) of the gallery cell the README shows."""
    cells = json.loads((ROOT / "notebooks" / "widgets_gallery.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if "".join(c["source"]).startswith(PICTURE_CELL_SOURCE)]
    (html,) = [
        "".join(o["data"]["text/html"])
        for o in cell["outputs"]
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    (svg,) = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)"', html)
    step = re.search(r"<b>(Step \d+ of \d+)", html)
    assert step, "the stored picture no longer names its step"
    return base64.b64decode(svg).decode("utf-8"), step[1]


def write_picture() -> None:
    """Rewrite docs/_static/backward-stepper.svg from the gallery's stored output."""
    PICTURE.write_text(stored_picture()[0], encoding="utf-8")


def test_the_readme_picture_is_the_widgets_stored_picture():
    """The picture is the backward stepper's static picture as the gallery notebook stores it
    (regenerate: ``python tests/test_guide_claims.py``), and its alt text names the same step."""
    svg, step = stored_picture()
    assert PICTURE.read_text(encoding="utf-8") == svg, "run `python tests/test_guide_claims.py`"
    shown = re.search(r"!\[([^]]+)\]\(docs/_static/backward-stepper\.svg\)", README)
    assert shown, "the README shows no picture of a widget"
    assert step.lower() in shown[1].lower(), (step, shown[1])
    assert f"{step.lower()} through a small tensor graph" in " ".join(README.split()).lower()


def test_error_table_size_matches_the_maintainers_guide():
    from test_engine_errors import ERRORS

    text = guide("maintainer")
    assert stated_number(text, r"a table of (\d+) bad inputs", "maintainer.md") == len(ERRORS)


def test_wrong_answer_table_size_matches_the_maintainers_guide():
    from test_exercises_content import WRONG

    pattern = r"scorecards and hints, (\d+) plausible wrong answers"
    assert stated_number(guide("maintainer"), pattern, "maintainer.md") == len(WRONG)


def test_backward_twice_on_one_graph_as_the_design_guide_says(torch):
    """design.md: (a·a)·3 at a = 2 gives a.grad 12 then 24; PyTorch raises without
    retain_graph, and gives 12 then 24 with it."""
    from autodiff_lab import Value

    text = " ".join(guide("design").split())
    assert "gives `a.grad` 12, then 24" in text
    assert "(with it, PyTorch also gives 12 then 24)" in text
    a = Value(2.0)
    out = (a * a) * 3
    out.backward()
    assert a.grad == 12.0
    out.backward()
    assert a.grad == 24.0

    t = torch.tensor(2.0, requires_grad=True)
    out_t = (t * t) * 3
    out_t.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out_t.backward()
    t = torch.tensor(2.0, requires_grad=True)
    out_t = (t * t) * 3
    out_t.backward(retain_graph=True)
    assert t.grad.item() == 12.0
    out_t.backward()
    assert t.grad.item() == 24.0


def test_exercise_counts_in_the_course_table_match_the_registry():
    """Each row's "(N: a trivial, b easy, …; ~M min)" in the README's course table."""
    from autodiff_lab.grading.spec import LEVELS

    chapters, exercises = course_exercises()
    rows = re.findall(r"\[(\d\d)\]\(exercises/[^)]*\) \((\d+): ([a-z0-9, ]+); ~(\d+) min\)", README)
    assert sorted(int(row[0]) for row in rows) == sorted(chapters), rows
    for chapter, count, levels, minutes in rows:
        mine = [e for e in exercises if e.chapter == int(chapter)]
        assert len(mine) == int(count), (chapter, [e.id for e in mine])
        stated = {level: int(n) for n, level in (part.split() for part in levels.split(", "))}
        actual = {lv: n for lv in LEVELS if (n := sum(e.level == lv for e in mine))}
        assert stated == actual, (chapter, stated, actual)
        assert list(stated) == [lv for lv in LEVELS if lv in stated], "levels out of order"
        assert int(minutes) == sum(e.minutes for e in mine), chapter


@pytest.mark.parametrize("page", ["README.md", "docs/exercises.md"])
def test_the_totals_sentence_matches_the_registry(page):
    """ "42 exercises (6 trivial, 16 easy, 14 medium, 6 hard), about 770 minutes"."""
    from autodiff_lab.grading.spec import LEVELS

    _, exercises = course_exercises()
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    totals = re.search(
        r"in all there are (\d+) exercises \((\d+) trivial, (\d+) easy, (\d+) medium, "
        r"(\d+) hard\), about (\d+) minutes",
        text,
        re.I,
    )
    assert totals, f"{page}: the totals sentence"
    expected = [len(exercises)] + [sum(e.level == lv for e in exercises) for lv in LEVELS]
    expected.append(sum(e.minutes for e in exercises))
    assert [int(n) for n in totals.groups()] == expected


def test_every_chapter_ends_with_a_medium_or_hard_exercise():
    """docs/exercises.md: "Every chapter ends with a medium or hard exercise"."""
    assert "Every chapter ends with a medium or hard exercise." in guide("exercises")
    chapters, exercises = course_exercises()
    for chapter in chapters:
        last = max((e for e in exercises if e.chapter == chapter), key=lambda e: e.sort_key)
        assert last.level in ("medium", "hard"), (last.id, last.level)


def test_the_capstones_the_guide_names_are_the_hard_exercises():
    """docs/exercises.md's capstones (its first sentence up to "Each is a variant") and the
    student's guide's list are the exercises whose level is hard; the two it names as former
    capstones are medium."""
    text = " ".join(guide("exercises").split())
    section = text[text.index("## The capstones") : text.index("## What an answer may use")]
    ids = r"(?<![\d.])(\d\.\d)(?![\d.]*\d)"
    capstones = re.findall(ids, section[: section.index("Each is a variant")])
    former = re.findall(ids, section[section.index("Two former capstones") :])
    _, exercises = course_exercises()
    level = {e.id: e.level for e in exercises}
    assert sorted(capstones) == sorted(i for i, lv in level.items() if lv == "hard")
    assert former and all(level[i] == "medium" for i in former)
    student = " ".join(guide("student").split())
    assert f"The capstones ({', '.join(sorted(capstones))}) are graded" in student


def test_the_api_tour_runs_and_its_comments_are_true():
    """docs/design.md "A tour of the API": the code block runs, and what its comments say."""
    import math

    import numpy as np

    text = guide("design")
    start = text.index("## A tour of the API")
    code = text[text.index("```python", start) + len("```python") : text.index("```\n", start + 30)]
    names: dict = {}
    exec(compile(code, "design.md tour", "exec"), names)  # noqa: S102 (our own guide)
    x = 0.5
    exact = math.exp(-x) * (1 - math.tanh(x) ** 2 - math.tanh(x))  # d/dx tanh(x) e^-x
    assert names["x"].grad == pytest.approx(exact, rel=1e-12)
    assert names["f_jvp"](1.0) == pytest.approx(exact, rel=1e-12)
    (transposed,) = names["linear_transpose"](names["f_jvp"])(1.0)
    assert transposed == pytest.approx(exact, rel=1e-12)
    assert names["grad"](lambda v: names["stop_gradient"](v) * v)(3.0) == 3.0
    xs = np.linspace(0, 1, 5)
    batched = names["vmap"](names["grad"](names["f"]))(xs)
    by_hand = np.exp(-xs) * (1 - np.tanh(xs) ** 2 - np.tanh(xs))
    np.testing.assert_allclose(np.asarray(batched), by_hand, rtol=1e-12)
    assert names["W"].grad.shape == names["W"].shape


def test_the_own_code_exercises_and_what_is_switched_off_are_as_the_guide_says():
    """docs/exercises.md "What an answer may use": which exercises compute their answer with
    the libraries switched off, and which libraries, as the specs and own_code.py say."""
    from autodiff_lab.grading import own_code, registry

    text = " ".join(guide("exercises").split())
    own = [e for e in registry.course_exercises() if e.own_code]
    ids = [e.id for e in own]
    assert f"{', '.join(ids[:-1])} and {ids[-1]} (each marked `own_code` in its spec)" in text
    whole = [e.id for e in own if not e.builds_on_engine]
    on_engine = [e.id for e in own if e.builds_on_engine]
    assert f"all of `autodiff_lab` for {', '.join(whole[:-1])} and {whole[-1]}" in text
    ready = ", ".join(f"`{m.split('.')[-1]}`" for m in own_code.READY_MADE)
    assert f"({ready}) for {', '.join(on_engine[:-1])} and {on_engine[-1]}," in text
    named = {"tensorflow": "TensorFlow", "keras": "Keras", "sklearn": "scikit-learn"}
    shown = [named.get(m, m) for m in own_code.FOREIGN if m not in ("functorch", "jaxlib")]
    assert f"{', '.join(shown[:-1])} and {shown[-1]} for all of them" in text


if __name__ == "__main__":
    write_picture()
    print(f"wrote {PICTURE.relative_to(ROOT)} from the widgets gallery's stored output")
