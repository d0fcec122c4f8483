"""The numbers the README states are the numbers the project has.

Each test reads a figure from README.md and compares it with what it counts (a test table,
the exercise registry, a notebook folder), so the claim and its evidence cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_number(pattern: str) -> int:
    match = re.search(pattern, README)
    assert match, f"README.md no longer says {pattern!r}: update this test with the README"
    return int(match.group(1))


def test_error_table_size_matches_the_readme():
    from test_engine_errors import ERRORS

    assert readme_number(r"a table of (\d+) bad inputs") == len(ERRORS)


def test_backward_twice_on_one_graph_as_the_readme_says(torch):
    """README: (a·a)·3 at a = 2 gives a.grad 12 then 24; PyTorch raises without retain_graph."""
    from autodiff_lab import Value

    assert "gives `a.grad` 12, then 24" in README
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
    out_t.backward()
    assert t.grad.item() == 24.0


def test_wrong_answer_table_size_matches_the_readme():
    from test_exercises_content import WRONG

    assert readme_number(r"scorecards and hints, (\d+) plausible wrong answers") == len(WRONG)


def test_exercise_counts_in_the_course_table_match_the_registry():
    """Each row's "(N: a trivial, b easy, …; ~M min)" and the totals under the table."""
    from autodiff_lab.grading.registry import all_exercises
    from autodiff_lab.grading.spec import LEVELS

    # the course's chapters are those with a solutions notebook (not tests' own exercises)
    chapters = {int(p.name[:2]) for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")}
    exercises = [e for e in all_exercises() if e.chapter in chapters]
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
    totals = re.search(
        r"in all there are (\d+) exercises \((\d+) trivial, (\d+) easy, (\d+) medium, "
        r"(\d+) hard\),\s+about (\d+) minutes",
        README,
    )
    assert totals, "the totals sentence under the course table"
    expected = [len(exercises)] + [sum(e.level == lv for e in exercises) for lv in LEVELS]
    expected.append(sum(e.minutes for e in exercises))
    assert [int(n) for n in totals.groups()] == expected


def test_the_api_tour_runs_and_its_comments_are_true():
    """README "A tour of the API": the code block runs, and what its comments say holds."""
    import math

    import numpy as np

    start = README.index("## A tour of the API")
    code = README[
        README.index("```python", start) + len("```python") : README.index("```\n", start + 30)
    ]
    names: dict = {}
    exec(compile(code, "README tour", "exec"), names)  # noqa: S102 (our own README)
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
