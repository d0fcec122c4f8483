"""Chapter 04 exercises: tensors (np.tile's backward, matmul's backward, softmax,
log-softmax, a numerical Jacobian)."""

from __future__ import annotations

import numpy as np

from ..runners.ch04 import (
    GRADCHECK_FUNCTIONS,
    _gradcheck_run,
    _logsm_run,
    _matmul_run,
    _softmax_run,
    _tile_run,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, finite, is_error

__all__ = ["EXERCISES", "GRADCHECK_FUNCTIONS"]


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


# --- 4.1 np.tile's backward ----------------------------------------------------------
# np.tile(x, reps) lays whole copies of x side by side along every axis; the copies'
# gradients add up into x. Unlike broadcasting, the copies are interleaved with x's own
# positions (along an axis of size n tiled r times, output j holds x[j % n]), so
# `unbroadcast` cannot find them: the student must split each axis into (copy, position).


def _tile_case(rng, name, shape, reps) -> Case:
    """x drawn with `shape`, and an upstream gradient of np.tile(x, reps)'s shape."""
    x = draw(rng, -2.0, 2.0, shape)
    return Case(name, (x, draw(rng, -2.0, 2.0, np.tile(x, reps).shape), reps))


def _tile_cases(rng):
    """Random shapes and reps drawn here (sizes 2-4, so every mistake shows), then edges."""

    def sizes(n: int) -> tuple[int, ...]:
        return tuple(int(s) for s in rng.integers(2, 5, size=n))

    def copies(n: int) -> tuple[int, ...]:
        return tuple(int(r) for r in rng.integers(1, 4, size=n))

    x_same = sizes(int(rng.integers(2, 4)))
    same = copies(len(x_same) - 1) + (int(rng.integers(2, 4)),)  # the last axis is tiled
    x_shorter = sizes(3)
    shorter = copies(1) + (int(rng.integers(2, 4)),)  # 2 of 3 axes; the last is tiled
    x_longer = sizes(int(rng.integers(1, 3)))
    longer = (int(rng.integers(2, 4)),) + copies(len(x_longer) - 1) + (int(rng.integers(2, 4)),)
    return [
        _tile_case(rng, f"random x of shape {x_same}, reps {same}", x_same, same),
        _tile_case(rng, f"random x of shape {x_shorter}, reps {shorter}", x_shorter, shorter),
        _tile_case(rng, f"random x of shape {x_longer}, reps {longer}", x_longer, longer),
        _tile_case(rng, "edge: reps an int, np.tile(x, 3) with x 2×3", (2, 3), 3),
        _tile_case(rng, "edge: x a number (0-d), reps (2, 3)", (), (2, 3)),
        _tile_case(rng, "edge: reps all 1 (one copy: g itself)", (3, 2), (1, 1)),
        _tile_case(rng, "edge: a 0 in reps (no copies: the gradient is 0)", (2, 3), (2, 0)),
    ]


def _tile_reference(inputs):
    """dx[i] = Σ g[j] over the output positions j that hold a copy of x[i].

    Written as an index map, independently of any reshape: tile the flat indices of x the
    way np.tile tiles x, then add g up by index (np.bincount).
    """
    x, g, reps = inputs
    x = np.asarray(x, dtype=np.float64)
    source = np.tile(np.arange(x.size).reshape(x.shape), reps)  # which x[i] each output holds
    total = np.bincount(source.ravel(), weights=np.ravel(g), minlength=x.size)
    return total.reshape(x.shape)


def _padded(x_shape: tuple, reps) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """x's shape and reps padded with 1s in front to one length, as np.tile pads them."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    d = max(len(x_shape), len(reps))
    return (1,) * (d - len(x_shape)) + tuple(x_shape), (1,) * (d - len(reps)) + reps


def _tile_variant(case: Case, *, copies_last=False, reps_at_end=False) -> np.ndarray:
    """The reshape-and-sum backward with one of two slips (for the mistakes' detectors):
    each axis split as (position, copy) instead of (copy, position); a short reps padded
    with 1s at the END instead of in front."""
    x, g, reps = case.inputs
    x_shape = np.shape(x)
    if reps_at_end:
        reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
        reps = reps + (1,) * (len(x_shape) - len(reps))
    shape, reps = _padded(x_shape, reps)
    pairs = [
        n for r, s in zip(reps, shape, strict=True) for n in ((s, r) if copies_last else (r, s))
    ]
    copy_axes = tuple(range(1 if copies_last else 0, 2 * len(shape), 2))
    return np.asarray(g, dtype=np.float64).reshape(pairs).sum(axis=copy_axes).reshape(x_shape)


def _tile_is(got, exp, case, **slip) -> bool:
    return close(got, _tile_variant(case, **slip)) and not close(got, exp)


def _first_copy(case: Case) -> np.ndarray:
    """The gradient of the first copy only: g's leading block of x's (padded) shape."""
    x, g, reps = case.inputs
    shape, _ = _padded(np.shape(x), reps)
    return np.asarray(g)[tuple(slice(0, s) for s in shape)].reshape(np.shape(x))


def _flat_blocks(case: Case) -> np.ndarray:
    """Flattened g cut into prod(reps) consecutive blocks of x.size entries, added up."""
    x, g, reps = case.inputs
    return np.asarray(g, dtype=np.float64).reshape(-1, np.size(x)).sum(axis=0).reshape(np.shape(x))


def _flat_blocks_is(got, exp, case: Case) -> bool:
    """got is the flat-blocks sum, and not ALSO reps padded at the end: for a 1-entry reps
    the two slips give the same numbers, and then neither hint is sure."""
    return (
        close(got, _flat_blocks(case))
        and not close(got, exp)
        and not close(got, _tile_variant(case, reps_at_end=True))
    )


def _copies(case: Case) -> int:
    x, _, reps = case.inputs
    return int(np.prod(_padded(np.shape(x), reps)[1]))


TILE = Exercise(
    id="4.1",
    title="The backward of np.tile: add up the copies",
    level="medium",
    minutes=25,
    task="tile_backward(x, g, reps): the gradient for x of np.tile(x, reps), given the "
    "upstream gradient g (shaped like np.tile(x, reps))",
    answer="tile_backward",
    cases=_tile_cases,
    run=_tile_run,
    reference=_tile_reference,
    mistakes=(
        Mistake(
            "The result has the shape of the tiled output. The gradient for x has x's shape: "
            "every copy of x[i] sends its gradient back to x[i], where they add up.",
            lambda got, exp, case: np.shape(got) == np.shape(case.inputs[1]) != np.shape(exp),
        ),
        Mistake(
            "The copies' gradients are averaged. Each copy is a use of x[i], and uses add "
            "up: sum, not mean.",
            lambda got, exp, case: (
                _copies(case) > 1 and close(got * _copies(case), exp) and not close(got, exp)
            ),
        ),
        Mistake(
            "That is the gradient of the first copy only. Every copy of x[i] in the output "
            "sends gradient back to x[i]: add all of them.",
            lambda got, exp, case: close(got, _first_copy(case)) and not close(got, exp),
        ),
        Mistake(
            "Reshaped in the wrong order. np.tile lays whole copies one after another, so "
            "along an axis of size n the output index is copy·n + i: split it as "
            "(reps, n), the copy axis FIRST, and sum the copy axes. (n, reps) is how "
            "np.repeat lays its copies.",
            lambda got, exp, case: _tile_is(got, exp, case, copies_last=True),
        ),
        Mistake(
            "Summed consecutive blocks of the flattened output. When an inner axis is "
            "tiled, a copy of x is not one block of g.ravel() (np.tile(x, (1, 2)) holds "
            "row 0 of x twice, then row 1 twice): split every axis into (copy, position).",
            lambda got, exp, case: _flat_blocks_is(got, exp, case),
        ),
        Mistake(
            "A reps shorter than x.ndim applies to x's LAST axes: np.tile(x, 2) on a 3×4 "
            "array copies along axis 1, as if reps were (1, 2). Pad reps with 1s in front.",
            lambda got, exp, case: (
                _tile_is(got, exp, case, reps_at_end=True) and not close(got, _flat_blocks(case))
            ),
        ),
        Mistake(
            "reps is longer than x.ndim here: np.tile then treats x as if it had leading "
            "axes of size 1 (shape (1,)·k + x.shape), and copies along those too. Pad x's "
            "shape with 1s in front to len(reps), and sum the new axes away.",
            lambda got, exp, case: (
                is_error(got, "ValueError")
                and np.ndim(case.inputs[2]) == 1
                and len(case.inputs[2]) > np.ndim(case.inputs[0])
            ),
        ),
        Mistake(
            "The values are right, but the result keeps the leading axes of size 1 that "
            "np.tile added in front of x's shape: reshape it to x.shape.",
            lambda got, exp, case: (
                np.shape(got) != np.shape(exp)
                and np.shape(got) == _padded(np.shape(case.inputs[0]), case.inputs[2])[0]
                and close(np.reshape(got, np.shape(exp)), exp)
            ),
        ),
        Mistake(
            "reps can be a single int, as in np.tile(x, 3): treat it as (3,).",
            lambda got, exp, case: is_error(got, "TypeError") and np.ndim(case.inputs[2]) == 0,
        ),
    ),
    nudges=(
        "Start in 1-D: np.tile(x, r) with len(x) = n holds x[j % n] at position j. Which "
        "positions hold x[i]? Then pad x.shape and reps with 1s in front to one length.",
        "Reshape g to (reps[0], shape[0], reps[1], shape[1], ...), sum the axes 0, 2, 4, "
        "... (the copies), then reshape to x.shape.",
    ),
)


# --- 4.2 matmul's backward -----------------------------------------------------------


def _matmul_cases(rng):
    cases = []
    for n, k, m in [(3, 4, 2), (2, 5, 3), (4, 3, 1)]:
        cases.append(
            Case(
                f"random A {n}×{k}, B {k}×{m}",
                (
                    draw(rng, -2.0, 2.0, (n, k)),
                    draw(rng, -2.0, 2.0, (k, m)),
                    draw(rng, -2.0, 2.0, (n, m)),
                ),
            )
        )
    cases += [
        Case(
            "edge: square 3×3 matrices",
            (
                draw(rng, -2.0, 2.0, (3, 3)),
                draw(rng, -2.0, 2.0, (3, 3)),
                draw(rng, -2.0, 2.0, (3, 3)),
            ),
        ),
        Case(
            "edge: a row times a column (1×4 @ 4×1)",
            (
                draw(rng, -2.0, 2.0, (1, 4)),
                draw(rng, -2.0, 2.0, (4, 1)),
                draw(rng, -2.0, 2.0, (1, 1)),
            ),
        ),
        Case(
            "edge: upstream gradient of ones",
            (draw(rng, -2.0, 2.0, (2, 3)), draw(rng, -2.0, 2.0, (3, 4)), np.ones((2, 4))),
        ),
    ]
    return cases


def _matmul_reference(inputs):
    """dA[i, j] = Σ_m G[i, m] B[j, m];  dB[j, m] = Σ_i A[i, j] G[i, m] (loops as einsum)."""
    a, b, g = (np.asarray(v, dtype=float) for v in inputs)
    return [np.einsum("im,jm->ij", g, b), np.einsum("ij,im->jm", a, g)]


def _matmul_has(got, case, which: int, make) -> bool:
    a, b, g = (np.asarray(v, dtype=float) for v in case.inputs)
    exp = _matmul_reference(case.inputs)
    return close(got[which], make(a, b, g)) and not close(got[which], exp[which])


MATMUL = Exercise(
    id="4.2",
    title="matmul's backward",
    level="easy",
    minutes=10,
    parts=("dL/dA", "dL/dB"),
    task="matmul_backward(A, B, G): for C = A @ B and upstream gradient G = dL/dC, "
    "return (dL/dA, dL/dB)",
    answer="matmul_backward",
    cases=_matmul_cases,
    run=_matmul_run,
    reference=_matmul_reference,
    mistakes=(
        Mistake(
            "The shapes do not fit (ValueError). Let the shapes guide you: dA must be n×k "
            "like A, dB k×m like B, and G is n×m. Which arrangement of G with B (or with A), "
            "transposed or not, gives those shapes?",
            lambda got, exp, case: is_error(got, "ValueError"),
        ),
        Mistake(
            "dA needs B *transposed*: dA = G @ Bᵀ (row i of dA pairs row i of G with the "
            "rows of B).",
            lambda got, exp, case: _matmul_has(got, case, 0, lambda a, b, g: g @ b),
        ),
        Mistake(
            "dB needs A *transposed*: dB = Aᵀ @ G.",
            lambda got, exp, case: _matmul_has(got, case, 1, lambda a, b, g: a @ g),
        ),
        Mistake(
            "The factors are in the wrong order: dA = G @ Bᵀ (G first) and dB = Aᵀ @ G "
            "(G last) — matrix products do not commute.",
            lambda got, exp, case: (
                _matmul_has(got, case, 0, lambda a, b, g: b.T @ g)
                or _matmul_has(got, case, 1, lambda a, b, g: g @ a.T)
            ),
        ),
    ),
    nudges=("Check shapes: dL/dA has the shape of A, dL/dB the shape of B.",),
    reveal="dA = G @ B.T and dB = A.T @ G.",
)


# --- 4.3 a stable softmax ------------------------------------------------------------


def _softmax_cases(rng):
    cases = [
        Case("random 1-D, axis -1", (draw(rng, -3, 3, (5,)), -1)),
        Case("random 3×4, axis 1", (draw(rng, -3, 3, (3, 4)), 1)),
        Case("random 3×4, axis 0", (draw(rng, -3, 3, (3, 4)), 0)),
        Case("random 2×3×4, axis -1", (draw(rng, -3, 3, (2, 3, 4)), -1)),
    ]
    cases += [
        Case("edge: huge logits (1000, 1001, 1002)", (np.array([1000.0, 1001.0, 1002.0]), -1)),
        Case("edge: very negative logits", (np.array([[-1000.0, -1001.0], [-5.0, 5.0]]), 1)),
        Case("edge: all equal", (np.zeros((2, 3)), -1)),
    ]
    return cases


def _softmax_reference(inputs):
    x, axis = inputs
    return _softmax(np.asarray(x, dtype=float), axis)


SOFTMAX = Exercise(
    id="4.3",
    title="A numerically stable softmax",
    level="easy",
    minutes=10,
    task="stable_softmax(x, axis): exp(x) / sum(exp(x)) along `axis`, without overflow",
    answer="stable_softmax",
    cases=_softmax_cases,
    run=_softmax_run,
    reference=_softmax_reference,
    mistakes=(
        Mistake(
            "Overflow: exp(1000) is inf, and inf/inf is NaN. Softmax does not change when "
            "you subtract a constant from every entry: subtract the max along the axis first.",
            lambda got, exp, case: not finite(got),
        ),
        Mistake(
            "Normalised along the wrong axis: the entries should sum to 1 along `axis`.",
            lambda got, exp, case: (
                np.ndim(case.inputs[0]) > 1
                and any(
                    close(got, _softmax(np.asarray(case.inputs[0]), ax))
                    for ax in range(np.ndim(case.inputs[0]))
                )
            ),
        ),
        Mistake(
            "The whole array sums to 1: normalise each slice along `axis` separately "
            "(sum with axis=axis, keepdims=True).",
            lambda got, exp, case: (
                np.ndim(case.inputs[0]) > 1
                and np.shape(got) == np.shape(case.inputs[0])
                and np.isclose(np.sum(got), 1.0)
            ),
        ),
    ),
    nudges=(
        "Subtract the largest entry along the axis before exponentiating: the softmax does "
        "not change, and exp never sees a large number.",
        "Use keepdims=True in both the max and the sum so the shapes broadcast back.",
    ),
    reveal="z = x - x.max(axis=axis, keepdims=True), then normalise exp(z).",
)


# --- 4.4 log-softmax's backward ------------------------------------------------------


def _logsm_cases(rng):
    cases = [
        Case("random 1-D", (draw(rng, -2.0, 2.0, (4,)), draw(rng, -2.0, 2.0, (4,)), -1)),
        Case(
            "random 3×5, axis -1", (draw(rng, -2.0, 2.0, (3, 5)), draw(rng, -2.0, 2.0, (3, 5)), -1)
        ),
        Case("random 4×3, axis 0", (draw(rng, -2.0, 2.0, (4, 3)), draw(rng, -2.0, 2.0, (4, 3)), 0)),
    ]
    one_hot = np.zeros((2, 3))
    one_hot[0, 1] = one_hot[1, 2] = -1.0
    cases += [
        Case(
            "edge: g = -one_hot (the cross-entropy case)",
            (draw(rng, -2.0, 2.0, (2, 3)), one_hot, -1),
        ),
        Case(
            "edge: large logits",
            (np.array([[500.0, 501.0, 499.0]]), np.array([[1.0, 2.0, -1.0]]), 1),
        ),
    ]
    return cases


def _logsm_reference(inputs):
    """dx_j = Σ_i g_i (δ_ij - softmax_j) = g_j - softmax_j Σ_i g_i, along the axis."""
    x, g, axis = (np.asarray(v, dtype=float) if i < 2 else v for i, v in enumerate(inputs))
    s = _softmax(x, axis)
    return g - s * g.sum(axis=axis, keepdims=True)


def _logsm_is(got, case, make) -> bool:
    x, g, axis = case.inputs
    x, g = np.asarray(x, float), np.asarray(g, float)
    return close(got, make(x, g, _softmax(x, axis), axis)) and not close(
        got, _logsm_reference(case.inputs)
    )


LOGSOFTMAX = Exercise(
    id="4.4",
    title="log-softmax's backward",
    level="medium",
    minutes=20,
    task="log_softmax_backward(x, g, axis): the gradient for x of log_softmax(x, axis) given "
    "upstream gradient g",
    answer="log_softmax_backward",
    cases=_logsm_cases,
    run=_logsm_run,
    reference=_logsm_reference,
    mistakes=(
        Mistake(
            "That is g - softmax(x): it assumes the upstream gradients sum to 1. Every output "
            "depends on every input, so subtract softmax(x) · Σ g (sum along the axis).",
            lambda got, exp, case: _logsm_is(got, case, lambda x, g, s, ax: g - s),
        ),
        Mistake(
            "That is g - softmax·g (entry by entry). Output i depends on every x_j through "
            "the log-sum-exp: subtract softmax(x) · Σ_i g_i.",
            lambda got, exp, case: _logsm_is(got, case, lambda x, g, s, ax: g - s * g),
        ),
        Mistake(
            "That is the backward of softmax, s·(g - Σ g·s). For log_softmax it is "
            "g - softmax(x)·Σ g.",
            lambda got, exp, case: _logsm_is(
                got, case, lambda x, g, s, ax: s * (g - (g * s).sum(axis=ax, keepdims=True))
            ),
        ),
        Mistake(
            "The sign is flipped: log_softmax(x) = x - logsumexp(x), so the gradient is "
            "g - softmax(x)·Σ g.",
            lambda got, exp, case: close(-got, exp) and not close(got, exp),
        ),
        Mistake(
            "The sum of g is taken along the wrong axis: use axis=axis, keepdims=True.",
            lambda got, exp, case: (
                np.ndim(case.inputs[0]) > 1
                and _logsm_is(
                    got,
                    case,
                    lambda x, g, s, ax: g - s * g.sum(axis=1 - (ax % 2), keepdims=True),
                )
            ),
        ),
    ),
    nudges=("log_softmax(x)_i = x_i - log Σ_j exp(x_j); differentiate both terms.",),
    reveal="dx = g - softmax(x, axis) * g.sum(axis=axis, keepdims=True)",
)


# --- 4.5 a numerical Jacobian for gradient checks -----------------------------------------
# The chapter's numeric_gradient handles a scalar f. Here f returns an array (or a number):
# the student must decide the layout J[out index..., in index...] (out axes first, as
# jacrev / torch.autograd.functional.jacobian do) and fill one slice per nudged entry.


def _gradcheck_cases(rng):
    cases = [
        Case("random 1-D, f = softmax(x)", ("softmax(x)", draw(rng, -2.0, 2.0, (4,)), 1e-5)),
        Case("random 1-D, f = cumsum(x**2)", ("cumsum(x**2)", draw(rng, -2.0, 2.0, (5,)), 1e-5)),
        Case(
            "random 2×3 in, 2×2 out: tanh(x @ x.T)",
            ("tanh(x @ x.T)", draw(rng, -1.0, 1.0, (2, 3)), 1e-5),
        ),
        Case(
            "random 2×2 in and out: x * sum(x)", ("x * sum(x)", draw(rng, -2.0, 2.0, (2, 2)), 1e-5)
        ),
        Case(
            "random 3 in, 2 out: sin(x)[:2] * x[-1]",
            ("sin(x)[:2] * x[-1]", draw(rng, -2.0, 2.0, (3,)), 1e-5),
        ),
    ]
    cases += [
        Case(
            "edge: a number out (the Jacobian is the gradient)",
            ("sum(x**3)", draw(rng, -2.0, 2.0, (2, 2)), 1e-5),
        ),
        Case("edge: one entry in", ("cumsum(x**2)", np.array([0.5]), 1e-4)),
        Case("edge: a large step h = 0.1", ("cumsum(x**2)", np.array([1.0, -2.0, 0.5]), 0.1)),
    ]
    return cases


def _central_differences(name, x, h, *, kind="central", restore=True, out_first=True):
    """J[o..., i...] = (f(x + h e_i) - f(x - h e_i))[o] / 2h (or variants, for mistakes)."""
    f = GRADCHECK_FUNCTIONS[name]
    x = np.array(x, dtype=np.float64)
    out_shape = np.shape(f(x))
    columns = np.zeros(x.shape + out_shape)  # one slice per input entry, then reordered
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = np.asarray(f(x), dtype=np.float64)
        if kind == "forward":
            x[i] = old
            columns[i] = (up - np.asarray(f(x))) / h
        else:
            x[i] = old - h
            columns[i] = (up - np.asarray(f(x))) / (2 * h)
        if restore:
            x[i] = old
    if not out_first:
        return columns
    return np.moveaxis(columns, list(range(x.ndim)), list(range(len(out_shape), columns.ndim)))


def _gradcheck_reference(inputs):
    return _central_differences(*inputs)


def _is_variant(got, case, **wrong) -> bool:
    expected = _central_differences(*case.inputs)
    return close(got, _central_differences(*case.inputs, **wrong), rtol=1e-9) and not close(
        got, expected
    )


NUMERICAL_GRADIENT = Exercise(
    id="4.5",
    title="A numerical Jacobian for gradient checks",
    level="medium",
    minutes=20,
    task="numerical_jacobian(f, x, h): J of shape f(x).shape + x.shape by central differences "
    "(f(x+h·e_i) - f(x-h·e_i)) / 2h, leaving x unchanged",
    answer="numerical_jacobian",
    cases=_gradcheck_cases,
    run=_gradcheck_run,
    reference=_gradcheck_reference,
    mistakes=(
        Mistake(
            "The axes are in the wrong order: J[o, i] = ∂f_o/∂x_i has the OUTPUT's axes "
            "first (shape f(x).shape + x.shape), as jacrev and "
            "torch.autograd.functional.jacobian lay it out. Nudging x[i] fills J[..., i].",
            lambda got, exp, case: _is_variant(got, case, out_first=False),
        ),
        Mistake(
            "That is the forward difference (f(x+h) - f(x)) / h, whose error shrinks only "
            "like h. The central difference (f(x+h) - f(x-h)) / 2h is accurate to h².",
            lambda got, exp, case: _is_variant(got, case, kind="forward"),
        ),
        Mistake(
            "The two points are 2h apart: divide the difference by 2h, not h.",
            lambda got, exp, case: close(got, 2 * exp) and not close(got, exp),
        ),
        Mistake(
            "Each entry must go back to its old value before the next one is nudged "
            "(otherwise later entries are evaluated at a shifted x).",
            lambda got, exp, case: _is_variant(got, case, restore=False),
        ),
        Mistake(
            "x changed: nudge a copy, or put every entry back when you are done with it.",
            lambda got, exp, case: is_error(got, "changed x"),
        ),
    ),
    nudges=("Call f(x) once to learn the output's shape; allocate J with shape "
        "out_shape + x.shape; loop over every index i of x (np.ndindex).",),
    reveal="For index i: save x[i], evaluate f at x[i] + h and at x[i] - h, restore x[i], and "
        "store the difference / 2h in J[(...,) + i].",
)


EXERCISES: list[Exercise] = [TILE, MATMUL, SOFTMAX, LOGSOFTMAX, NUMERICAL_GRADIENT]
