"""Issue 24 §1: the shortcuts that used to pass an exercise without doing it, performed.

Each test submits the shortcut as a student would and asserts the fair outcome; the
capstone 5.6 shortcuts (a nearest-neighbour classifier, a loop without ``zero_grad``) are
performed in ``tests/test_capstones_moons.py``, a table with no planted bug answered by
``[]`` in ``tests/test_capstones_bughunt.py``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import autodiff_lab
from autodiff_lab import ops
from autodiff_lab.extend import define_primitive
from autodiff_lab.grading import check, registry

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (None, 1, 2, 3)


def _check(exercise_id, answer, seed=None):
    return check(exercise_id, answer, seed=seed, show=False, record=False)


@pytest.mark.parametrize("seed", SEEDS)
def test_heron_limit_answer_scores_nothing(seed):
    """1.6: 1/(2√a) scored 3-5 of 8 on cases whose derivative had converged."""

    def limit(a, steps):
        x = a
        for _ in range(steps):
            x = (x + a / x) / 2
        return x, 0.5 / math.sqrt(a)

    result = _check("1.6", limit, seed)
    assert result.score == 0, result.to_text()
    assert any("derivative of the limit" in h for h in result.hints)


def test_heron_derivative_converges_quadratically_as_the_text_says():
    """The exercise text: the derivative reaches 1/(2√a) as fast as x reaches √a."""
    a, x, dx, errors = 9.0, 9.0, 1.0, []
    for _ in range(6):
        x, dx = (x + a / x) / 2, (dx + (x - a * dx) / x**2) / 2
        errors.append(abs(dx - 1 / (2 * math.sqrt(a))))
    ratios = [e1 / e0**2 for e0, e1 in zip(errors[:4], errors[1:5], strict=True)]
    assert errors[-1] < 1e-8 and all(r < 2 for r in ratios), (errors, ratios)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_package_topological_order_scores_nothing_on_2_4(seed):
    for answer in (
        autodiff_lab.topological_order,
        lambda root: autodiff_lab.topological_order(root),
        lambda root: list(autodiff_lab.graph.topological_order(root)),
    ):
        result = _check("2.4", answer, seed)
        assert result.score == 0, result.to_text()
        assert any("your own sort" in h for h in result.hints)


@pytest.mark.parametrize("seed", SEEDS)
def test_naive_sigmoid_is_not_numerically_stable(seed):
    """3.3: 1/(1+np.exp(-x)) returned 0.0 at x = -800 (inf, with a warning) and scored 9/9."""

    def naive(x):
        s = 1 / (1 + np.exp(-x))
        return s, lambda g: g * s * (1 - s)

    result = _check("3.3", naive, seed)
    assert result.status == "failed" and result.score <= result.max_score / 2 + 0.5
    overflow = [c for c in result.cases if "overflows" in c.name]
    assert len(overflow) == 2 and not any(c.passed for c in overflow), result.to_text()
    assert any("too big for a float" in h for h in result.hints)


def _loop_rule(x, bdim, axis):
    """8.2 by a loop over the examples: the line the exercise's reveal uses as a check."""
    return np.stack([np.sum(np.take(x, i, axis=bdim), axis) for i in range(x.shape[bdim])]), 0


def _comprehension_free_loop(x, bdim, axis):
    rows = []
    for row in np.moveaxis(x, bdim, 0):
        rows.append(row.sum(axis=axis))
    return np.array(rows), 0


@pytest.mark.parametrize("rule", [_loop_rule, _comprehension_free_loop])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_batching_rule_with_a_loop_scores_nothing(rule, seed):
    result = _check("8.2", rule, seed)
    assert result.score == 0, result.to_text()
    assert any("loops over the examples" in h for h in result.hints)


@pytest.mark.parametrize("borrowed", ["np.logaddexp", "from numpy import logaddexp"])
def test_6_5_forward_borrowing_np_logaddexp_scores_nothing(borrowed):
    namespace = {"np": np, "ops": ops, "define_primitive": define_primitive}
    call = "np.logaddexp(a, b)" if borrowed.startswith("np.") else "logaddexp(a, b)"
    source = (
        ("from numpy import logaddexp\n" if borrowed.startswith("from") else "")
        + f"def forward(a, b):\n    return {call}\n"
        "def va(g, out, a, b):\n    return ops.unbroadcast(g * ops.exp(a - out), a)\n"
        "def vb(g, out, a, b):\n    return ops.unbroadcast(g * ops.exp(b - out), b)\n"
        "def ta(t, out, a, b):\n    return t * ops.exp(a - out)\n"
        "def tb(t, out, a, b):\n    return t * ops.exp(b - out)\n"
        f"op = define_primitive('lae_{abs(hash(borrowed))}', forward, vjp=(va, vb), jvp=(ta, tb))\n"
    )
    exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 (a student's cell)
    result = _check("6.5", namespace["op"])
    assert result.score == 0, result.to_text()
    assert all("compute log(e^a + e^b) yourself" in c.message for c in result.cases)


def test_6_5_given_code_does_not_state_the_derivative():
    text = (ROOT / "exercises" / "06_beyond.ipynb").read_text(encoding="utf-8")
    assert "exp(a − out)" not in text and "exp(a - out)" not in text
    hints = [*registry.get("6.5").nudges, *(m.hint for m in registry.get("6.5").mistakes[:2])]
    assert not any(re.search(r"e\^\(a\s*[−-]\s*out\)", h) for h in hints)


def _solution_lines(exercise_id: str) -> list[str]:
    """The code lines of an exercise's solution regions in solutions/, 12+ characters."""
    import nbformat

    lines = []
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            inside = False
            for line in cell.source.splitlines():
                if "### BEGIN SOLUTION" in line:
                    inside = f"# Exercise {exercise_id}" in line
                elif "### END SOLUTION" in line:
                    inside = False
                elif inside:
                    code = line.split("#")[0].strip()
                    if len(code) >= 12:
                        lines.append(re.sub(r"\s+", "", code))
    return lines


@pytest.mark.parametrize("exercise", registry.course_exercises(), ids=lambda e: e.id)
def test_no_hint_tier_prints_the_solution(exercise):
    """No nudge tier contains a line of the exercise's solution code, nor Python
    statements (``def``, assignments chained by ``;``); the finished answer lives in
    ``reveal`` only. (A mistake's hint may name the fix of that one mistake.)"""
    texts = list(exercise.nudges)
    solution = _solution_lines(exercise.id)
    assert solution, f"no solution lines found for {exercise.id}"
    for text in texts:
        flat = re.sub(r"\s+", "", text)
        leaked = [line for line in solution if line in flat]
        assert not leaked, (exercise.id, text, leaked)
        assert not re.search(r"\bdef \w+\(|\w+ = [^;]+; \w+ = ", text), (
            exercise.id,
            text,
        )


def test_reveal_shows_the_sketch_only_on_request_and_never_in_an_assignment():
    def zeros(x, y):
        return 0.0, 0.0

    exercise = registry.get("1.1")
    for attempt in range(4):  # every nudge tier
        hints = _check("1.1", zeros).hints
        assert not any(exercise.reveal in h for h in hints), (attempt, hints)
    assert any(
        exercise.reveal in h
        for h in check("1.1", zeros, show=False, record=False, reveal=True).hints
    )
    from autodiff_lab.grading import checking

    try:
        check("1.1", zeros, show=False, record=False, assignment=True)
        refused = check("1.1", zeros, show=False, record=False, reveal=True)
        assert not any(exercise.reveal in h for h in refused.hints)
        assert "switched off in a graded assignment" in refused.note
    finally:
        checking._assignment = False


def test_exported_check_cells_switch_reveal_off():
    from autodiff_lab.grading.export.chapters import assignment_check

    assert assignment_check('check("1.1", dual_mul)') == 'check("1.1", dual_mul, assignment=True)'
    assert assignment_check('check("1.1", dual_mul)\n') == 'check("1.1", dual_mul, assignment=True)'


def test_7_5_shortcuts_score_under_half():
    """7.5: code that closes over the recorded trace (calls the notebook's replay function,
    or reads the tape as a name), calls a library, loops over a tape, or writes every
    derivative out as an expression of the inputs (symbolic expansion) — each performed in
    tests/test_capstones_source.py on three seeds; here on the notebook's cases: none scores
    half the points, and each gets the hint that names it."""
    import test_capstones_source as source

    for shortcut, message, hint in source.SHORTCUTS:
        result = _check("7.5", shortcut)
        assert result.score < result.max_score / 2, (shortcut.__name__, result.to_text())
        assert any(message in c.message for c in result.cases), (shortcut.__name__, message)
        assert any(hint in h for h in result.hints), (shortcut.__name__, result.hints)
