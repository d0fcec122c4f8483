"""Capstone 2.5, vjp and jacrev on top of a reverse pass: graded on random f: Rⁿ → Rᵐ.

Right transforms written here score full marks; wrong ones (a transposed Jacobian, x.grad
accumulating across passes, a vjp that ignores u, finite differences, forward-mode Duals,
the library's own ``functional.jacrev``) lose points with the hint naming the mistake;
the references agree with PyTorch (float64).
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch02_reverse
from autodiff_lab.grading.runners.capstones import function_from


def _pull(f, x, u):
    leaf = Tensor(np.asarray(x, dtype=float), requires_grad=True)
    out = f(leaf)
    out.backward(np.asarray(u, dtype=float))
    return out.data, leaf.grad


class Right:
    def vjp(f, x, u):
        return _pull(f, x, u)

    def jacrev(f, x):
        m = np.size(f(np.asarray(x, dtype=float)))
        return np.stack([_pull(f, x, np.eye(m)[i])[1] for i in range(m)])


class Transposed(Right):
    def jacrev(f, x):
        return Right.jacrev(f, x).T


class Accumulates(Right):
    def jacrev(f, x):
        leaf = Tensor(np.asarray(x, dtype=float), requires_grad=True)
        out = f(leaf)
        rows = []
        for i in range(out.size):
            out.backward(np.eye(out.size)[i])
            rows.append(leaf.grad.copy())
        return np.stack(rows)


class IgnoresU(Right):
    def vjp(f, x, u):
        leaf = Tensor(np.asarray(x, dtype=float), requires_grad=True)
        out = f(leaf)
        out.sum().backward()
        return out.data, leaf.grad


class FiniteDifferences(Right):
    def jacrev(f, x):
        x = np.asarray(x, dtype=float)
        h = 1e-6
        cols = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))]
        return np.stack(cols, axis=1)


class ForwardMode(Right):
    def jacrev(f, x):
        x = np.asarray(x, dtype=float)
        return np.stack([f(Dual(x, e)).tangent for e in np.eye(len(x))], axis=1)


class LoopsOverInputs(Right):
    """jacrev seeds with e_j of the input's size (a loop over inputs, not outputs)."""

    def jacrev(f, x):
        n = np.size(x)
        return np.stack([_pull(f, x, np.eye(n)[j])[1] for j in range(n)])


class Borrowed(Right):
    def jacrev(f, x):
        from autodiff_lab.functional import jacrev

        return jacrev(f)(x)


WRONG = [
    (Transposed, "The Jacobian is transposed"),
    (Accumulates, "x.grad adds up across backward passes"),
    (IgnoresU, "The vjp ignores u"),
    (LoopsOverInputs, "the loop runs over the outputs, not the inputs"),
    (FiniteDifferences, "never run on a recording Tensor"),
    (ForwardMode, "never run on a recording Tensor"),
    (Borrowed, "not from autodiff_lab.functional"),
]


def test_right_transforms_score_full_marks():
    for seed in (None, 7, 123):
        result = check("2.5", Right, seed=seed, show=False)
        assert result.status == "passed", result.to_text()


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_wrong_transforms_lose_points_with_their_hint(wrong, hint):
    for seed in (None, 7):
        result = check("2.5", wrong, seed=seed, show=False)
        assert result.status == "failed" and 0 < result.score < result.max_score
        assert any(hint in h for h in result.hints), result.to_text()


def test_references_agree_with_torch(torch):
    for case in registry.get("2.5").cases(np.random.default_rng(5)):
        kind, program, x, *rest = case.inputs
        reference = ch02_reverse.reverse_reference(case.inputs)
        f = function_from(program)
        tx = torch.tensor(x)
        if kind == "vjp":
            value, pull = torch.func.vjp(f_torch(torch, program), tx)
            np.testing.assert_allclose(reference["value"], value.numpy(), rtol=1e-12)
            (pulled,) = pull(torch.tensor(rest[0]))
            np.testing.assert_allclose(reference["vjp"], pulled.numpy(), rtol=1e-10, atol=1e-12)
        else:
            jac = torch.autograd.functional.jacobian(f_torch(torch, program), tx)
            np.testing.assert_allclose(reference["jacobian"], jac.numpy(), rtol=1e-10, atol=1e-12)
        assert np.shape(f(np.asarray(x))) == np.shape(reference.get("value", f(np.asarray(x))))


def f_torch(torch, program):
    """The case's function written again with torch operations (independent of ops)."""

    def f(x):
        vals = [x]
        for op, *a in program:
            v = vals[a[0]]
            if op == "lin":
                vals.append(torch.tensor(a[1]) @ v)
            elif op in ("add", "mul"):
                vals.append(v + vals[a[1]] if op == "add" else v * vals[a[1]])
            elif op == "sq":
                vals.append(v * v)
            else:
                vals.append(getattr(torch, op)(v))
        return vals[-1]

    return f


def test_random_functions_cover_every_instruction():
    ops = set()
    rng = np.random.default_rng(0)
    for _ in range(30):
        ops |= {op for op, *_ in ch02_reverse.random_function(rng, 3, 2, 6)}
    assert ops == {"lin", "add", "mul", "tanh", "sin", "exp", "sq"}
