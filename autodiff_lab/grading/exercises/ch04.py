"""Chapter 04 exercises: tensors (unbroadcast, matmul's backward, softmax, log-softmax)."""

from __future__ import annotations

import numpy as np

from ..runners.ch04 import (
    GRADCHECK_FUNCTIONS,
    _gradcheck_run,
    _logsm_run,
    _matmul_run,
    _softmax_run,
    _unbroadcast_run,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, finite, is_error

__all__ = ["EXERCISES", "GRADCHECK_FUNCTIONS"]


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


# --- 4.1 unbroadcast -----------------------------------------------------------------

_SHAPE_PAIRS = [  # (shape of the input, shape it was broadcast to)
    ((3,), (4, 3)),
    ((4, 1), (4, 5)),
    ((1, 3), (2, 4, 3)),
    ((2, 1, 3), (2, 4, 3)),
    ((), (3, 2)),
    ((1,), (5,)),
]


def _unbroadcast_cases(rng):
    picks = rng.choice(len(_SHAPE_PAIRS), size=3, replace=False)
    cases = []
    for i in picks:
        shape, big = _SHAPE_PAIRS[int(i)]
        cases.append(Case(f"random grad {big} back to {shape}", (draw(rng, -2.0, 2.0, big), shape)))
    cases += [
        Case("edge: shapes already equal", (draw(rng, -2.0, 2.0, (2, 3)), (2, 3))),
        Case("edge: size-1 axis in the middle", (draw(rng, -2.0, 2.0, (2, 4, 3)), (2, 1, 3))),
        Case("edge: a scalar, broadcast to (3, 2)", (draw(rng, -2.0, 2.0, (3, 2)), ())),
        Case(
            "edge: new leading axes and a size-1 axis", (draw(rng, -2.0, 2.0, (2, 3, 4, 5)), (4, 1))
        ),
    ]
    return cases


def _unbroadcast_reference(inputs):
    """Sum over every axis numpy broadcasting added or stretched (written out by hand)."""
    grad, shape = inputs
    shape = tuple(shape)
    out = np.array(grad, dtype=np.float64)
    while out.ndim > len(shape):  # axes added in front
        out = out.sum(axis=0)
    for axis, size in enumerate(shape):  # size-1 axes that were stretched
        if size == 1 and out.shape[axis] != 1:
            out = out.sum(axis=axis, keepdims=True)
    return out


def _count(grad, shape) -> int:
    return int(np.asarray(grad).size // max(1, int(np.prod(shape, dtype=int))))


UNBROADCAST = Exercise(
    id="4.1",
    title="unbroadcast: the gradient of broadcasting",
    level="medium",
    minutes=20,
    task="unbroadcast(grad, shape): sum grad back to `shape`, undoing numpy broadcasting",
    answer="unbroadcast",
    cases=_unbroadcast_cases,
    run=_unbroadcast_run,
    reference=_unbroadcast_reference,
    mistakes=(
        Mistake(
            "Broadcasting *copies* an entry, so the copies' gradients must be added up: use "
            "sum, not mean.",
            lambda got, exp, case: close(got * _count(*case.inputs), exp) and not close(got, exp),
        ),
        Mistake(
            "The values are right but the shape is not: keep the size-1 axes of `shape` "
            "(sum them with keepdims=True) so the result has exactly the input's shape.",
            lambda got, exp, case: (
                got.shape != exp.shape
                and got.size == exp.size
                and close(got.reshape(exp.shape), exp)
            ),
        ),
        Mistake(
            "Only the new leading axes were summed. An axis where the input had size 1 was "
            "stretched too: sum it as well (keepdims=True).",
            lambda got, exp, case: (
                got.shape != exp.shape
                and any(s == 1 for s in case.inputs[1])
                and close(
                    got,
                    np.asarray(case.inputs[0]).sum(
                        axis=tuple(range(np.ndim(case.inputs[0]) - len(case.inputs[1])))
                    ),
                )
            ),
        ),
    ),
    nudges=(
        "Two kinds of axes to sum: the extra leading ones, and those where `shape` has a 1.",
        "Sum axis 0 while grad has too many dimensions; then sum every axis where shape[i] "
        "== 1 with keepdims=True.",
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
    nudges=(
        "Check shapes: dL/dA has the shape of A, dL/dB the shape of B.",
        "dA = G @ B.T and dB = A.T @ G.",
    ),
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
            lambda got, exp, case: np.ndim(case.inputs[0]) > 1 and np.isclose(np.sum(got), 1.0),
        ),
    ),
    nudges=(
        "z = x - x.max(axis=axis, keepdims=True), then normalise exp(z).",
        "Use keepdims=True in both the max and the sum so the shapes broadcast back.",
    ),
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
    nudges=(
        "log_softmax(x)_i = x_i - log Σ_j exp(x_j); differentiate both terms.",
        "dx = g - softmax(x, axis) * g.sum(axis=axis, keepdims=True)",
    ),
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
    nudges=(
        "Call f(x) once to learn the output's shape; allocate J with shape "
        "out_shape + x.shape; loop over every index i of x (np.ndindex).",
        "For index i: save x[i], evaluate f at x[i] + h and at x[i] - h, restore x[i], and "
        "store the difference / 2h in J[(...,) + i].",
    ),
)


EXERCISES: list[Exercise] = [UNBROADCAST, MATMUL, SOFTMAX, LOGSOFTMAX, NUMERICAL_GRADIENT]
