"""Capstone 6.5, a new primitive (logaddexp) through the extension API.

A right definition written here (independently of the solutions notebook) scores full
marks; plausible wrong ones lose points and get the hint that names their mistake; the
grader's closed forms agree with PyTorch (float64).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff_lab import ops
from autodiff_lab.extend import define_primitive
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch06_primitive


def _stable(a, b):
    m = np.maximum(a, b)
    return m + np.log(np.exp(a - m) + np.exp(b - m))


def _naive(a, b):
    return np.log(np.exp(a) + np.exp(b))


def _vjp(weight_a, weight_b, *, unbroadcast=True, with_g=True):
    def share(weight, which):
        def rule(g, out, a, b):
            s = (g if with_g else 1.0) * weight(a, b, out)
            return ops.unbroadcast(s, (a, b)[which]) if unbroadcast else s

        return rule

    return (share(weight_a, 0), share(weight_b, 1))


def _wa(a, b, out):
    return ops.exp(a - out)


def _wb(a, b, out):
    return ops.exp(b - out)


def _frozen_exp(z):  # math.exp on a scalar: a graph value becomes a plain float
    return math.exp(z) if np.ndim(z) == 0 else np.exp(z)


JVP = (lambda t, out, a, b: t * ops.exp(a - out), lambda t, out, a, b: t * ops.exp(b - out))


def make(forward=_stable, vjp=None, jvp=JVP):
    return define_primitive("logaddexp", forward, vjp=vjp or _vjp(_wa, _wb), jvp=jvp)


def right():
    return make()


WRONG = [
    ("naive forward", lambda: make(forward=_naive), "The forward overflows"),
    ("swapped vjp", lambda: make(vjp=_vjp(_wb, _wa)), "two vjp rules are swapped"),
    ("no unbroadcast", lambda: make(vjp=_vjp(_wa, _wb, unbroadcast=False)), "summed back"),
    ("forgot g", lambda: make(vjp=_vjp(_wa, _wb, with_g=False)), "forgot the upstream"),
    (
        "frozen rules",
        lambda: make(
            vjp=_vjp(
                lambda a, b, out: _frozen_exp(a - out), lambda a, b, out: _frozen_exp(b - out)
            ),
            jvp=(
                lambda t, out, a, b: t * _frozen_exp(a - out),
                lambda t, out, a, b: t * _frozen_exp(b - out),
            ),
        ),
        "lost the curvature",
    ),
    ("jvp copied", lambda: make(jvp=(JVP[0], JVP[0])), "Forward mode is wrong"),
    ("no jvp", lambda: define_primitive("logaddexp", _stable, vjp=_vjp(_wa, _wb)), "missing"),
    ("composite", lambda: lambda a, b: ops.log(ops.exp(a) + ops.exp(b)), "define_primitive"),
]


def test_right_definition_scores_full_marks():
    op = right()
    for seed in (None, 7, 123):
        result = check("6.5", op, seed=seed, show=False)
        assert result.status == "passed", result.to_text()
        assert result.hints == []
        assert len(result.cases) >= 15


@pytest.mark.parametrize(("name", "build", "hint"), WRONG, ids=[w[0] for w in WRONG])
def test_wrong_definitions_lose_points_with_the_hint_that_names_the_mistake(name, build, hint):
    op = build()
    for seed in (None, 7):
        result = check("6.5", op, seed=seed, show=False)
        assert result.status == "failed" and 0 <= result.score < result.max_score
        assert any(hint in h for h in result.hints), result.to_text()


def test_stub_is_not_attempted():
    def stub(*args):  # what build-exercises leaves in each of the five functions
        raise NotImplementedError("Exercise 6.5: logaddexp")

    op = define_primitive("logaddexp", stub, vjp=(stub, stub), jvp=(stub, stub))
    result = check("6.5", op, show=False)
    assert result.status == "not attempted" and result.score == 0


def test_references_agree_with_torch(torch):
    """The closed forms against torch.logaddexp's values, gradients and Hessian."""
    exercise = registry.get("6.5")
    for case in exercise.cases(np.random.default_rng(5)):
        kind, *args = case.inputs
        expected = ch06_primitive.primitive_reference(case.inputs)
        if kind == "value":
            got = torch.logaddexp(torch.tensor(args[0]), torch.tensor(args[1])).item()
            assert got == pytest.approx(expected, rel=1e-13)
        elif kind in ("graph", "tensor"):
            a = torch.tensor(np.asarray(args[0], dtype=float), requires_grad=True)
            b = torch.tensor(np.asarray(args[1], dtype=float), requires_grad=True)
            out = torch.logaddexp(a, b)
            g = torch.tensor(args[2]) if kind == "tensor" else torch.tensor(1.0)
            out.backward(g)
            for mine, theirs in zip(expected, (out.detach(), a.grad, b.grad)):
                np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-300)
        elif kind == "jvp":
            a, b, ta, tb = (torch.tensor(np.asarray(v, dtype=float)) for v in args)
            _, tangent = torch.func.jvp(torch.logaddexp, (a, b), (ta, tb))
            np.testing.assert_allclose(expected, tangent.numpy(), rtol=1e-12)
        elif kind == "hessian":
            h = torch.autograd.functional.hessian(
                lambda x: torch.logaddexp(x[0], x[1]), torch.tensor([args[0], args[1]])
            )
            np.testing.assert_allclose(expected, h.numpy(), rtol=1e-12, atol=1e-15)
        else:  # hvp
            x, v = torch.tensor(args[0]), torch.tensor(args[1])
            h = torch.autograd.functional.hessian(lambda y: torch.logaddexp(y[0], y[1]), x)
            np.testing.assert_allclose(expected, (h @ v).numpy(), rtol=1e-12, atol=1e-15)
