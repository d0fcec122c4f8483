"""Capstone 4.7, a gradient-check bug hunt: fresh planted bugs in every table.

A careful checker written here (float64 central differences, relative error with a tiny
absolute floor, kinks skipped) finds exactly the planted rules on many seeds; careless
ones (no kink check, absolute tolerances either way, forward differences, float32, a
string instead of a list) lose points with the hint naming the mistake. The catalog's
right rules agree with PyTorch and its wrong rules differ from it.
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch04_bughunt
from autodiff_lab.grading.plaindata import dumps
from autodiff_lab.grading.runners.capstones import formula


def _one_sided(f, x, h):
    return (f(x + h) - f(x)) / h, (f(x) - f(x - h)) / h


def _is_kink(f, x, h):
    right, left = _one_sided(f, x, h)
    return abs(right - left) > 1e-2 * max(1.0, abs(right))


def careful(table, h=1e-5):
    wrong = []
    for name, (forward, vjp, xs) in table.items():
        for x in np.asarray(xs, dtype=np.float64):
            if _is_kink(forward, x, h):
                continue
            numeric, analytic = (forward(x + h) - forward(x - h)) / (2 * h), vjp(x, 1.0)
            if abs(numeric - analytic) > 1e-8 + 1e-5 * max(abs(numeric), abs(analytic)):
                wrong.append(name)
                break
    return wrong


def _hunter(*, kinks=True, tol=None, central=True, dtype=np.float64, h=1e-5):
    def hunt(table):
        wrong = []
        for name, (forward, vjp, xs) in table.items():
            f = (lambda x, fw=forward: dtype(fw(dtype(x)))) if dtype is np.float32 else forward
            for x in np.asarray(xs, dtype=dtype):
                if kinks and _is_kink(f, x, h):
                    continue
                up, down = f(x + h), (f(x - h) if central else f(x))
                numeric, analytic = (up - down) / ((2 if central else 1) * h), vjp(x, 1.0)
                bound = tol if tol is not None else 1e-8 + 1e-5 * max(abs(numeric), abs(analytic))
                if abs(numeric - analytic) > bound:
                    wrong.append(name)
                    break
        return wrong

    return hunt


WRONG = [
    (_hunter(kinks=False), "reported at a kink"),
    (_hunter(tol=1e-3), "tiny gradients (1e-4·cos x) slipped through"),
    (_hunter(tol=1e-6), "large gradients"),
    (_hunter(central=False), "Right rules were reported wrong"),
    (_hunter(dtype=np.float32, h=1e-3), "use float64"),
    (lambda table: ",".join(careful(table)), "must return a list of names"),
]
IDS = [
    "no kink check",
    "absolute 1e-3",
    "absolute 1e-6",
    "forward differences",
    "float32",
    "a string",
]


def test_a_careful_checker_finds_exactly_the_planted_rules():
    for seed in (None, *range(1, 40)):
        result = check("4.7", careful, seed=seed, show=False)
        assert result.status == "passed", result.to_text()


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=IDS)
def test_careless_checkers_lose_points_with_their_hint(wrong, hint):
    for seed in (None, 7):
        result = check("4.7", wrong, seed=seed, show=False)
        assert result.status == "failed" and result.score < result.max_score, result.to_text()
        assert any(hint in h for h in result.hints), result.to_text()


def test_every_table_plants_a_fresh_set_and_keeps_it_secret():
    exercise = registry.get("4.7")
    sets = set()
    for seed in range(6):
        for case in exercise.cases(np.random.default_rng(seed)):
            planted = exercise.reference(case.inputs)
            planted = [planted] if len(case.inputs) == 1 else planted
            assert "wrong" not in dumps(case.inputs).lower()
            for rows, names in zip(case.inputs, planted, strict=True):
                assert len(rows) == 8 and all(len(row) == 4 for row in rows)
                assert any(fwd in ch04_bughunt.KINKED for _n, fwd, _r, _x in rows)
                sets.add(tuple((n, r) for n, _f, r, _x in rows if n in names))
    assert len(sets - {()}) == 30  # 36 tables, 30 with bugs, each with its own planted set


def test_the_table_without_a_bug_gives_nothing_to_an_answer_that_reports_nothing():
    """Alone, the clean table's point went to ``lambda table: []`` on every seed."""
    for seed in (None, 1, 2, 3):
        result = check("4.7", lambda table: [], seed=seed, show=False, record=False)
        assert result.score == 0, result.to_text()
        clean_case = result.cases[-1]
        assert "all right, then one planted wrong" in clean_case.name and not clean_case.passed


def test_catalog_rules_against_torch(torch):
    """Right rules equal torch's derivative away from kinks; every wrong rule differs."""
    torch_of = {
        "sin(x)*x": lambda t: torch.sin(t) * t, "exp(2*x)": lambda t: torch.exp(2 * t),
        "tanh(x)": torch.tanh, "log(1 + x**2)": lambda t: torch.log(1 + t**2),
        "sqrt(1 + x**2)": lambda t: torch.sqrt(1 + t**2), "x**3": lambda t: t**3,
        "abs(x)": torch.abs, "maximum(x, 0)": torch.relu,
        "1e-4*cos(x)": lambda t: 1e-4 * torch.cos(t), "exp(3*x)": lambda t: torch.exp(3 * t),
    }  # fmt: skip
    assert set(torch_of) == {entry[0] for entry in ch04_bughunt.CATALOG}
    for fwd, right, wrongs, (lo, hi), _kinks in ch04_bughunt.CATALOG:
        x = torch.linspace(lo, hi, 7) + 0.0123  # no kink on the grid
        t = x.clone().requires_grad_(True)
        torch_of[fwd](t).sum().backward()
        np.testing.assert_allclose(formula(right, ("x", "g"))(x.numpy(), 1.0), t.grad.numpy(),
                                   rtol=1e-12, atol=1e-15)  # fmt: skip
        for rule in wrongs:
            assert not np.allclose(formula(rule, ("x", "g"))(x.numpy(), 1.0), t.grad.numpy())


def test_formulas_are_parsed_not_evaluated():
    with pytest.raises(ValueError, match="not allowed"):
        formula("__import__('os').getcwd()", ("x",))(1.0)
