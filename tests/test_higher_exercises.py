"""Chapter 06 exercises: right answers get full marks, known mistakes get their hint,
references (closed forms) agree with PyTorch, and the solutions notebook shows full marks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import assert_solutions_score_full_marks

from autodiff_lab import Dual
from autodiff_lab.dual import new_tag
from autodiff_lab.functional import grad, hessian, jvp
from autodiff_lab.grading import check
from autodiff_lab.grading.exercises import ch06

ROOT = Path(__file__).resolve().parent.parent


def nth_derivative(f, n):
    for _ in range(n):
        f = grad(f)
    return f


def taylor_along(f, x0, v, degree, *, divide=math.factorial):
    def g(t):  # f along the line through x0 in direction v
        return f(x0 + t * v)

    t0 = np.array(0.0)  # an array, so t * v is recorded as a tensor operation
    return [float(nth_derivative(g, j)(t0)) / divide(j) for j in range(degree + 1)]


def tagged_derivative(f, x):
    tag = new_tag()
    out = f(Dual(x, 1.0, tag))
    return out.tangent if isinstance(out, Dual) and out.tag == tag else 0.0


def untagged_derivative(f, x):
    out = f(Dual(x, 1.0))
    return out.tangent if isinstance(out, Dual) else 0.0


RIGHT = {
    "6.1": nth_derivative,
    "6.2": taylor_along,
    "6.3": lambda f, x, v: jvp(grad(f), (x,), (v,))[1],
    "6.4": tagged_derivative,
}

WRONG = [
    ("6.1", lambda f, n: nth_derivative(f, max(n - 1, 0)), "one time too few"),
    ("6.1", lambda f, n: nth_derivative(f, n + 1), "one time too many"),
    ("6.2", lambda f, x0, v, d: taylor_along(f, x0, v, d, divide=lambda j: 1), "themselves"),
    ("6.2", lambda f, x0, v, d: taylor_along(f, x0, v, d)[:-1], "Wrong number of coefficients"),
    ("6.2", lambda f, x0, v, d: taylor_along(f, x0, np.ones(3), d), "direction v was not used"),
    ("6.2", lambda f, x0, v, d: taylor_along(f, x0, v, d, divide=lambda j: max(j, 1)), "by j!"),
    ("6.3", lambda f, x, v: jvp(grad(f), (x,), (v,))[0], "That is the gradient of f"),
    ("6.3", lambda f, x, v: hessian(f)(x), "whole Hessian"),
    ("6.3", lambda f, x, v: float(grad(f)(x) @ v), "directional derivative of f"),
    ("6.4", untagged_derivative, "Perturbation confusion"),
]


def test_chapter_06_has_at_least_three_exercises_all_answered_here():
    ids = [e.id for e in ch06.EXERCISES]
    assert len(ids) >= 3 and sorted(ids) == sorted(RIGHT)


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_scores_full_marks(exercise_id):
    result = check(exercise_id, RIGHT[exercise_id], show=False)
    assert result.status == "passed", result.to_text()
    assert result.score == result.max_score > 0 and len(result.cases) >= 5
    assert result.hints == []


@pytest.mark.parametrize(("exercise_id", "wrong", "hint"), WRONG, ids=[h for _, _, h in WRONG])
def test_wrong_answer_loses_points_and_gets_the_right_hint(exercise_id, wrong, hint):
    result = check(exercise_id, wrong, show=False)
    assert result.status == "failed" and result.score < result.max_score, result.to_text()
    assert any(hint in h for h in result.hints), result.to_text()


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_hard_coded_answer_does_not_pass(exercise_id):
    exercise = next(e for e in ch06.EXERCISES if e.id == exercise_id)
    cases = exercise.cases(np.random.default_rng(0))
    first = exercise.run(RIGHT[exercise_id], cases[0].inputs)
    passed = sum(bool(exercise.compare(first, exercise.reference(c.inputs))) for c in cases)
    assert passed < len(cases)


def test_stub_is_not_attempted():
    def stub(*args):
        raise NotImplementedError("Exercise 6.3: hvp")

    result = check("6.3", stub, show=False)
    assert result.status == "not attempted" and result.score == 0


def test_closed_form_references_match_pytorch():
    torch = pytest.importorskip("torch")
    torch_scalar = {
        "sin(2x)": lambda x: torch.sin(2 * x),
        "exp(-x)": lambda x: torch.exp(-x),
        "sin(x)*exp(x)": lambda x: torch.sin(x) * torch.exp(x),
        "x^5 - 3x^2": lambda x: x**5 - 3 * x**2,
    }
    for name, tf in torch_scalar.items():
        x = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
        y = tf(x)
        for k in range(1, 5):
            (y,) = torch.autograd.grad(y, x, create_graph=True)
            assert ch06._derivative(name, 0.37, k) == pytest.approx(y.item(), rel=1e-10), name
    Q = torch.tensor(ch06._Q)
    torch_vector = {
        "0.5 x.Qx": lambda x: 0.5 * x @ Q @ x,
        "sum(tanh(x))": lambda x: torch.tanh(x).sum(),
        "exp(x0*x1) + x2^3": lambda x: torch.exp(x[0] * x[1]) + x[2] ** 3,
        "log(sum(exp(x)))": lambda x: torch.logsumexp(x, 0),
    }
    x = np.array([0.3, -0.8, 1.1])
    for name, tf in torch_vector.items():
        expected = torch.autograd.functional.hessian(tf, torch.tensor(x)).numpy()
        np.testing.assert_allclose(ch06.VECTOR_HESSIANS[name](x), expected, rtol=1e-12)
        xt = torch.tensor(x, requires_grad=True)
        (grad_expected,) = torch.autograd.grad(tf(xt), xt)
        np.testing.assert_allclose(ch06._GRADIENTS[name](x), grad_expected.numpy(), rtol=1e-12)


def test_solution_notebook_shows_full_marks_for_every_exercise():
    assert_solutions_score_full_marks(ROOT / "solutions" / "06_beyond.ipynb", ch06.EXERCISES)
