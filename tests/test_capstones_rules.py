"""Capstone 4.6, tensor backward rules: graded on random shapes, axes and index arrays.

Right rules written here (independently of the solutions notebook) score full marks;
plausible wrong ones lose points and get the hint that names their mistake; rules that
call the library's Tensor score nothing; the references agree with PyTorch (float64).
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Tensor
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch04_rules


def _expand(x, g, axis, keepdims):
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    return np.broadcast_to(g, x.shape)


class Right:
    def sum(x, g, axis, keepdims):
        return _expand(x, g, axis, keepdims).copy()

    def mean(x, g, axis, keepdims):
        kept = np.ones(x.shape).sum(axis=axis, keepdims=True)  # the count along the axes
        return _expand(x, g, axis, keepdims) / kept

    def max(x, g, axis, keepdims):
        is_top = x == x.max(axis=axis, keepdims=True)
        return _expand(x, g, axis, keepdims) * is_top / is_top.sum(axis=axis, keepdims=True)

    def reshape(x, g, shape):
        return g.reshape(x.shape)

    def transpose(x, g, axes):
        return np.transpose(g, None if axes is None else np.argsort(axes))

    def getitem(x, g, index):
        out = np.zeros(x.shape)
        np.add.at(out, index, g)
        return out


class NoExpand(Right):
    def sum(x, g, axis, keepdims):
        return np.broadcast_to(g, x.shape).copy()


class LastAxis(Right):
    """Always expands g at the last axis (right for axis=-1 only)."""

    def sum(x, g, axis, keepdims):
        if axis is not None and not keepdims:
            g = np.expand_dims(g, -1)
        return np.broadcast_to(g, x.shape).copy()


class MeanNotDivided(Right):
    def mean(x, g, axis, keepdims):
        return Right.sum(x, g, axis, keepdims)


class TiesEach(Right):
    def max(x, g, axis, keepdims):
        return _expand(x, g, axis, keepdims) * (x == x.max(axis=axis, keepdims=True))


class SamePermutation(Right):
    def transpose(x, g, axes):
        return np.transpose(g, axes)


class Overwrites(Right):
    def getitem(x, g, index):
        out = np.zeros(x.shape)
        out[index] += g
        return out


class UsesTensor(Right):
    def sum(x, g, axis, keepdims):
        t = Tensor(x, requires_grad=True)
        t.sum(axis=axis, keepdims=keepdims).backward(g)
        return t.grad


WRONG = [
    (NoExpand, "put them back"),
    (LastAxis, "wrong axis"),
    (MeanNotDivided, "divides g by the number of entries averaged"),
    (TiesEach, "share the gradient, g / k each"),
    (SamePermutation, "inverse permutation"),
    (Overwrites, "np.add.at"),
]


def test_right_rules_score_full_marks():
    for seed in (None, 7, 123):
        result = check("4.6", Right, seed=seed, show=False)
        assert result.status == "passed", result.to_text()
        assert result.hints == []


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_wrong_rules_lose_points_with_the_hint_that_names_the_mistake(wrong, hint):
    for seed in (None, 7):
        result = check("4.6", wrong, seed=seed, show=False)
        assert result.status == "failed" and 0 < result.score < result.max_score
        assert any(hint in h for h in result.hints), result.to_text()


def test_rules_that_call_the_librarys_tensor_score_nothing_there():
    result = check("4.6", UsesTensor, show=False)
    sums = [c for c in result.cases if c.name.startswith("sum")]
    assert sums and all(c.points == 0 and "uses Tensor (autodiff_lab)" in c.message for c in sums)
    assert any("must not call a library's" in h for h in result.hints)


def test_a_stub_is_not_attempted():
    class Rules:
        def sum(*args):
            raise NotImplementedError("Exercise 4.6: write this backward rule")

        mean = max = reshape = transpose = getitem = sum

    result = check("4.6", Rules, show=False)
    assert result.status == "not attempted" and result.score == 0


def test_cases_cover_the_promised_ground():
    cases = registry.get("4.6").cases(np.random.default_rng(4))
    ops = [c.inputs[0] for c in cases]
    assert set(ops) == {"sum", "mean", "max", "reshape", "transpose", "getitem"}
    axes = [c.inputs[3][0] for c in cases if c.inputs[0] in ("sum", "mean", "max")]
    assert None in axes and any(isinstance(a, tuple) for a in axes)
    assert any(isinstance(a, int) and a < 0 for a in axes)
    for case in cases:
        if case.inputs[0] == "getitem":
            spec = case.inputs[3][0]
            flat = list(zip(*spec, strict=True)) if isinstance(spec, tuple) else spec
            assert len(set(flat)) < len(flat)  # some entry is read twice
        if "ties" in case.name:
            x, axis = case.inputs[1], case.inputs[3][0]
            top = x.max(axis=axis, keepdims=True)
            assert ((x == top).sum(axis=axis) >= 2).all()


def test_references_agree_with_torch(torch):
    for case in registry.get("4.6").cases(np.random.default_rng(9)):
        op, x, g, params = case.inputs
        t = torch.tensor(x, requires_grad=True)
        if op in ("sum", "mean"):
            dims = params[0] if params[0] is not None else tuple(range(x.ndim))
            out = getattr(torch, op)(t, dim=dims, keepdim=params[1])
        elif op == "max":
            dims = params[0] if params[0] is not None else tuple(range(x.ndim))
            out = torch.amax(t, dim=dims, keepdim=params[1])
        elif op == "reshape":
            out = t.reshape(params[0])
        elif op == "transpose":
            out = t.permute(params[0] if params[0] is not None else tuple(range(x.ndim))[::-1])
        else:
            spec = params[0]
            index = tuple(torch.tensor(s) for s in spec) if isinstance(spec, tuple) else spec
            out = t[index if isinstance(spec, tuple) else torch.tensor(spec)]
        out.backward(torch.tensor(g))
        np.testing.assert_allclose(ch04_rules.rules_reference(case.inputs), t.grad.numpy())
