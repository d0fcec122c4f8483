"""Capstone 4.6 (hard): the backward rules of a tensor engine, graded on random shapes.

The student writes a class ``BackwardRules`` whose methods return the gradient for ``x``
given the upstream gradient ``g`` (the gradient of a scalar loss with respect to the op's
output)::

    sum(x, g, axis, keepdims)    mean(x, g, axis, keepdims)    max(x, g, axis, keepdims)
    reshape(x, g, shape)         transpose(x, g, axes)         getitem(x, g, index)

Each case draws a fresh shape, axis (an int, a negative int, a tuple or None), keepdims,
permutation or integer index array with repeats; the reference is the library's
:class:`~autodiff_lab.Tensor` backward, run here in the grader. Max's convention (the
library's, and ``torch.amax``'s): the k entries tied for the maximum share the gradient,
g / k each. The hints come from the wrong rules computed here with numpy on the same
case: a wrong axis, g broadcast without putting the reduced axes back, a mean that does
not divide (or divides by the wrong count), ties that do not share, the transpose undone
with the same permutation, repeated indices that overwrite instead of adding up.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...tensor import Tensor
from ..runners.capstones import _index, rules_run
from ..spec import Case, Exercise, Mistake, close
from ._common import is_error

__all__ = ["EXERCISES", "rules_reference"]


def rules_reference(inputs) -> np.ndarray:
    """The gradient for x from the library's Tensor: ``op(x).backward(g)``."""
    op, x, g, params = inputs
    t = Tensor(np.array(x, dtype=np.float64), requires_grad=True)
    if op in ("sum", "mean", "max"):
        out = getattr(t, op)(axis=params[0], keepdims=params[1])
    elif op == "reshape":
        out = t.reshape(*params[0])
    elif op == "transpose":
        out = t.transpose(*params[0]) if params[0] is not None else t.transpose()
    else:
        out = t[_index(params[0])]
    out.backward(np.array(g, dtype=np.float64))
    return np.asarray(t.grad, dtype=np.float64)


# --- the cases --------------------------------------------------------------------------------


def _shape(rng, ndim: int, square: bool = False) -> tuple[int, ...]:
    """A random shape; ``square`` repeats one size so a wrong axis still broadcasts."""
    if square:
        n = int(rng.integers(2, 4))
        return (n,) * ndim
    return tuple(int(n) for n in rng.integers(2, 5, size=ndim))


def _reduced_shape(shape, axis, keepdims) -> tuple[int, ...]:
    return np.zeros(shape).sum(axis=axis, keepdims=keepdims).shape


def _with_ties(rng, shape, axis) -> np.ndarray:
    """Small integers where every max along ``axis`` (a 2-d x) is shared by two entries."""
    x = rng.integers(-2, 3, size=shape).astype(float)
    if axis is None:
        i, j = rng.choice(x.size, size=2, replace=False)
        x.flat[i] = x.flat[j] = x.max() + 1
    else:
        for row in x:  # axis 1: the rows
            i, j = rng.choice(row.size, size=2, replace=False)
            row[i] = row[j] = row.max() + 1
    return x


def _reduction_case(rng, op: str, axis, keepdims: bool, shape, *, ties: bool = False):
    x = _with_ties(rng, shape, axis) if ties else np.round(rng.normal(size=shape), 4)
    g = np.round(rng.normal(size=_reduced_shape(shape, axis, keepdims)), 4)
    return (op, x, g, (axis, keepdims))


def _rules_cases(rng):
    cases = []
    draws = [
        ("sum", 0, False, 2, True), ("sum", -1, True, 3, False), ("sum", (0, 2), False, 3, False),
        ("sum", None, False, 2, False), ("mean", 0, False, 2, False),
        ("mean", (1, 2), True, 3, False), ("mean", -2, False, 3, True),
        ("max", 1, False, 2, False), ("max", -1, True, 3, False), ("max", 0, False, 3, True),
    ]  # fmt: skip
    for op, axis, keepdims, ndim, square in draws:
        shape = _shape(rng, ndim, square)
        inputs = _reduction_case(rng, op, axis, keepdims, shape)
        cases.append(Case(f"{op} of {shape}, axis={axis}, keepdims={keepdims}", inputs))
    shape = (int(rng.integers(2, 4)), int(rng.integers(3, 5)))
    inputs = _reduction_case(rng, "max", 1, False, shape, ties=True)
    cases.append(Case(f"max of {shape} with ties, axis=1 (ties share g)", inputs))
    inputs = _reduction_case(rng, "max", None, False, (3, 3), ties=True)
    cases.append(Case("max of (3, 3) with ties, axis=None (ties share g)", inputs))
    for ndim in (2, 3):
        shape = _shape(rng, ndim)
        new = (int(np.prod(shape)),) if ndim == 3 else (shape[1], -1)
        x = np.round(rng.normal(size=shape), 4)
        g = np.round(rng.normal(size=x.reshape(new).shape), 4)
        cases.append(Case(f"reshape {shape} -> {new}", ("reshape", x, g, (new,))))
    for axes in ((1, 2, 0), (2, 0, 1), None):
        shape = _shape(rng, 3)
        x = np.round(rng.normal(size=shape), 4)
        g = np.round(rng.normal(size=np.transpose(x, axes).shape), 4)
        cases.append(Case(f"transpose {shape}, axes={axes}", ("transpose", x, g, (axes,))))
    shape = _shape(rng, 2)
    index = [int(i) for i in rng.integers(0, shape[0], size=shape[0] + 3)]  # repeats for sure
    x = np.round(rng.normal(size=shape), 4)
    g = np.round(rng.normal(size=(len(index), shape[1])), 4)
    cases.append(Case(f"x[rows] on {shape}, rows={index}", ("getitem", x, g, (index,))))
    shape = _shape(rng, 2)
    rows = [int(i) for i in rng.integers(0, shape[0], size=5)]
    cols = [int(i) for i in rng.integers(0, shape[1], size=5)]
    rows[-1], cols[-1] = rows[0], cols[0]  # one entry read twice
    x = np.round(rng.normal(size=shape), 4)
    g = np.round(rng.normal(size=5), 4)
    cases.append(
        Case(f"x[rows, cols] on {shape}, pairs={list(zip(rows, cols, strict=True))}",
             ("getitem", x, g, ((rows, cols),)))
    )  # fmt: skip
    return cases


# --- wrong rules, computed here, for the hints ----------------------------------------------


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axes))


def _expanded_at(g, positions, shape) -> np.ndarray | None:
    """g with new axes at ``positions``, broadcast to ``shape`` (None if it cannot be)."""
    try:
        return np.broadcast_to(np.expand_dims(np.asarray(g), tuple(positions)), shape)
    except ValueError:  # numpy's AxisError is a ValueError too
        return None


def _is_reduction(case) -> bool:
    return case.inputs[0] in ("sum", "mean", "max")


def _scale(case) -> float:
    op, x, _g, (axis, _keepdims) = case.inputs
    if op != "mean":
        return 1.0
    return 1.0 / int(np.prod([np.shape(x)[a] for a in _axes(axis, np.ndim(x))]))


def _wrong_axis(got, exp, case) -> bool:
    if not _is_reduction(case) or close(got, exp):
        return False
    op, x, g, (axis, keepdims) = case.inputs
    shape, right = np.shape(x), _axes(axis, np.ndim(x))
    if keepdims or axis is None:
        return False
    leading = tuple(range(len(right)))  # g broadcast as it is: the no-expand mistake's own
    for positions in itertools.combinations(range(len(shape)), len(right)):
        if positions in (right, leading):
            continue
        candidate = _expanded_at(g, positions, shape)
        if candidate is None:
            continue
        if op == "max":
            mask = x == np.max(x, axis=axis, keepdims=True)
            candidate = candidate * mask / mask.sum(axis=axis, keepdims=True)
        if close(got, candidate * _scale(case)):
            return True
    return False


def _no_expand(got, exp, case) -> bool:
    """g broadcast to x's shape as it is: fails (an error) or lands on the wrong axis."""
    if not _is_reduction(case) or close(got, exp):
        return False
    op, x, g, (axis, keepdims) = case.inputs
    if keepdims or axis is None:
        return False
    if is_error(got, "ValueError"):
        return True
    try:
        candidate = np.broadcast_to(np.asarray(g), np.shape(x))
    except ValueError:
        return False
    if op == "max":
        mask = x == np.max(x, axis=axis, keepdims=True)
        candidate = candidate * mask / mask.sum(axis=axis, keepdims=True)
    return close(got, candidate * _scale(case))


def _mean_count(got, exp, case) -> bool:
    """Mean's gradient not divided, or divided by the size of all of x."""
    if case.inputs[0] != "mean" or close(got, exp):
        return False
    x = case.inputs[1]
    exp = np.asarray(exp)
    return close(got, exp / _scale(case)) or close(got, exp / _scale(case) / np.size(x))


def _ties(got, exp, case) -> bool:
    """Every tied entry gets all of g, or only the first (argmax) does."""
    if case.inputs[0] != "max" or close(got, exp):
        return False
    _op, x, g, (axis, keepdims) = case.inputs
    x = np.asarray(x)
    top = np.max(x, axis=axis, keepdims=True)
    g_full = np.broadcast_to(
        np.asarray(g) if keepdims else np.expand_dims(np.asarray(g), _axes(axis, x.ndim)), x.shape
    )
    all_ties = g_full * (x == top)
    if axis is None:
        flat = np.zeros(x.size)
        flat[np.argmax(x)] = 1.0
        first = flat.reshape(x.shape)
    else:
        first = np.zeros_like(x)
        np.put_along_axis(first, np.expand_dims(np.argmax(x, axis=axis), axis), 1.0, axis=axis)
    return close(got, all_ties) or close(got, g_full * first)


def _same_permutation(got, exp, case) -> bool:
    if case.inputs[0] != "transpose" or close(got, exp):
        return False
    _op, _x, g, (axes,) = case.inputs
    return close(got, np.transpose(g, axes))


def _overwrites(got, exp, case) -> bool:
    if case.inputs[0] != "getitem" or close(got, exp):
        return False
    _op, x, g, (spec,) = case.inputs
    out = np.zeros(np.shape(x))
    out[_index(spec)] = np.asarray(g)  # what `out[index] = g` and `out[index] += g` give
    return close(got, out)


def _returns_g_shape(got, exp, case) -> bool:
    return case.inputs[0] == "reshape" and np.shape(got) == np.shape(case.inputs[2])


RULES = Exercise(
    id="4.6",
    title="Tensor backward rules",
    level="hard",
    minutes=45,
    task="write this backward rule (see the list above)",
    answer="BackwardRules",
    cases=_rules_cases,
    run=rules_run,
    own_code=True,
    reference=rules_reference,
    mistakes=(
        Mistake(
            "This exercise is graded on your own rules: they must not call a library's "
            "Tensor or gradients (autodiff_lab, torch, jax…); numpy is fine.",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "With keepdims=False the reduced axes are gone from g: put them back "
            "(np.expand_dims(g, axis)) before broadcasting g to x's shape.",
            _no_expand,
        ),
        Mistake(
            "The gradient went along the wrong axis: expand g at the axes that were reduced "
            "(normalise a negative axis with axis % x.ndim).",
            _wrong_axis,
        ),
        Mistake(
            "mean's backward divides g by the number of entries averaged: the product of the "
            "reduced axes' sizes (not 1, not the size of all of x).",
            _mean_count,
        ),
        Mistake(
            "Ties: the k entries equal to the maximum share the gradient, g / k each (the "
            "library's and torch.amax's convention), not g each and not only the first.",
            _ties,
        ),
        Mistake(
            "Undo a transpose with the inverse permutation, np.argsort(axes), not with axes "
            "again (they differ for 3 or more axes).",
            _same_permutation,
        ),
        Mistake(
            "Repeated indices: an entry read twice gets both gradients. `out[index] += g` "
            "keeps only one of them; use np.add.at(out, index, g).",
            _overwrites,
        ),
        Mistake(
            "reshape's backward reshapes g back to x's shape.",
            _returns_g_shape,
        ),
    ),
    nudges=(
        "Each rule answers: how much did each entry of x contribute to each entry of the "
        "output? Check the shape of your result first: it must be x's shape.",
        "sum: copy g back along the reduced axes; mean: the same over the count; max: only "
        "to the maximal entries; reshape/transpose: undo them on g; indexing: scatter-add g.",
    ),
)


EXERCISES: list[Exercise] = [RULES]
