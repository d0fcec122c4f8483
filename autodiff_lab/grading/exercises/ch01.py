"""Chapter 01 exercises: forward mode (dual numbers, jvp, a Jacobian column).

A dual number is handed to the student's code as a pair ``(primal, tangent)``; answers
may return a pair or a :class:`~autodiff_lab.Dual`.
"""

from __future__ import annotations

import math

import numpy as np

from ..runners.ch01 import (
    _MIX,
    JACOBIAN_FUNCTIONS,
    _column_run,
    _heron_run,
    _jvp_run,
    _mul_run,
    _sin_run,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw

__all__ = ["EXERCISES", "JACOBIAN_FUNCTIONS"]


# --- 1.1 the product of two dual numbers ----------------------------------------------


def _mul_cases(rng):
    cases = []
    for _ in range(5):
        a, da, b, db = (draw(rng, -3.0, 3.0) for _ in range(4))
        cases.append(Case(f"random a={a}, da={da}, b={b}, db={db}", (a, da, b, db)))
    cases += [
        Case("edge: only a moves (db = 0)", (2.0, 1.0, 3.0, 0.0)),
        Case("edge: both move, values 0", (0.0, 1.5, 0.0, -2.0)),
        Case("edge: a·a (same dual twice)", (1.5, 1.0, 1.5, 1.0)),
    ]
    return cases


def _tangent_slip(got, exp, case, wrong: float) -> bool:
    """A mistake in the tangent alone: the primal is right, the tangent is ``wrong`` and not
    the right one, and ``wrong`` is neither 0 nor an input's own tangent (on an edge case
    where the mistaken formula gives those, zeros or the identity would match it too)."""
    tangents = case.inputs[1::2]
    return (
        math.isclose(got[0], exp[0], rel_tol=1e-9, abs_tol=1e-12)
        and math.isclose(got[1], wrong)
        and not math.isclose(got[1], exp[1])
        and not math.isclose(wrong, 0.0, abs_tol=1e-12)
        and not any(math.isclose(wrong, t) for t in tangents)
    )


def _mul_reference(inputs):
    a, da, b, db = inputs
    return [a * b, a * db + da * b]


MUL = Exercise(
    id="1.1",
    title="Multiply two dual numbers",
    level="trivial",
    minutes=5,
    parts=("value", "tangent"),
    task="dual_mul(x, y): x, y are (primal, tangent) pairs; return the pair for x*y",
    answer="dual_mul",
    cases=_mul_cases,
    run=_mul_run,
    reference=_mul_reference,
    mistakes=(
        Mistake(
            "The tangent part multiplied the two tangents. Expand (a + da·ε)(b + db·ε) and "
            "use ε² = 0: the ε term is a·db + da·b.",
            lambda got, exp, case: _tangent_slip(got, exp, case, case.inputs[1] * case.inputs[3]),
        ),
        Mistake(
            "Only one term of the product rule is there: the tangent of a·b needs both "
            "a·db and da·b.",
            lambda got, exp, case: (
                _tangent_slip(got, exp, case, case.inputs[0] * case.inputs[3])
                or _tangent_slip(got, exp, case, case.inputs[1] * case.inputs[2])
            ),
        ),
        Mistake(
            "The primal (first) part should be the ordinary product a·b.",
            lambda got, exp, case: not math.isclose(got[0], exp[0], abs_tol=1e-12),
        ),
    ),
    nudges=("Write (a + da·ε)(b + db·ε), multiply out, and drop every ε² term.",),
    reveal="Return a pair: (a·b, a·db + da·b).",
)


# --- 1.2 sin of a dual number ---------------------------------------------------------


def _sin_cases(rng):
    cases = []
    for _ in range(5):
        x, dx = draw(rng, -4, 4), draw(rng, -3.0, 3.0)
        cases.append(Case(f"random x={x}, dx={dx}", (x, dx)))
    cases += [
        Case("edge: x = 0, dx = 1", (0.0, 1.0)),
        Case("edge: x = π (sin x = 0, cos x = -1)", (math.pi, 2.0)),
        Case("edge: tangent 0 stays 0", (0.7, 0.0)),
    ]
    return cases


def _sin_reference(inputs):
    x, dx = inputs
    return [math.sin(x), math.cos(x) * dx]


SIN = Exercise(
    id="1.2",
    title="sin of a dual number",
    level="trivial",
    minutes=5,
    parts=("value", "tangent"),
    task="dual_sin(x): x is a (primal, tangent) pair; return the pair for sin(x)",
    answer="dual_sin",
    cases=_sin_cases,
    run=_sin_run,
    reference=_sin_reference,
    mistakes=(
        Mistake(
            "The tangent is the derivative cos(x) alone: multiply it by the incoming "
            "tangent dx (chain rule: d sin(u) = cos(u)·du).",
            lambda got, exp, case: _tangent_slip(got, exp, case, math.cos(case.inputs[0])),
        ),
        Mistake(
            "Sign error: d/dx sin x = +cos x (it is cos whose derivative is -sin).",
            lambda got, exp, case: _tangent_slip(got, exp, case, -exp[1]),
        ),
        Mistake(
            "The tangent should use cos(x), not sin(x).",
            lambda got, exp, case: _tangent_slip(
                got, exp, case, math.sin(case.inputs[0]) * case.inputs[1]
            ),
        ),
    ),
    nudges=("sin(x + dx·ε) = sin(x) + cos(x)·dx·ε.",),
    reveal="Return (math.sin(x), math.cos(x) * dx).",
)


# --- 1.3 division of dual numbers -----------------------------------------------------


def _div_cases(rng):
    cases = []
    for _ in range(5):
        a, da, db = draw(rng, -3.0, 3.0), draw(rng, -3.0, 3.0), draw(rng, -3.0, 3.0)
        b = draw(rng, 0.5, 3.0) * (1 if rng.random() < 0.5 else -1)
        cases.append(Case(f"random a={a}, da={da}, b={b}, db={db}", (a, da, b, db)))
    cases += [
        Case("edge: only the denominator moves", (1.0, 0.0, 2.0, 1.0)),
        Case("edge: numerator 0", (0.0, 1.0, -4.0, 3.0)),
        Case("edge: x / x", (2.5, 1.0, 2.5, 1.0)),
    ]
    return cases


def _div_reference(inputs):
    a, da, b, db = inputs
    return [a / b, (da * b - a * db) / b**2]


def _div_variant(case, tangent):
    a, da, b, db = case.inputs
    return tangent(a, da, b, db)


DIV = Exercise(
    id="1.3",
    title="Divide two dual numbers",
    level="easy",
    minutes=10,
    parts=("value", "tangent"),
    task="dual_div(x, y): x, y are (primal, tangent) pairs; return the pair for x/y",
    answer="dual_div",
    cases=_div_cases,
    run=_mul_run,
    reference=_div_reference,
    mistakes=(
        Mistake(
            "The quotient rule has a minus sign: d(a/b) = (da·b - a·db) / b².",
            lambda got, exp, case: _tangent_slip(
                got, exp, case, _div_variant(case, lambda a, da, b, db: (da * b + a * db) / b**2)
            ),
        ),
        Mistake(
            "The two terms of the numerator are swapped: it is da·b - a·db (numerator's "
            "tangent first).",
            lambda got, exp, case: _tangent_slip(
                got, exp, case, _div_variant(case, lambda a, da, b, db: (a * db - da * b) / b**2)
            ),
        ),
        Mistake(
            "Divide by b squared, not by b: d(a/b) = (da·b - a·db) / b².",
            lambda got, exp, case: _tangent_slip(
                got, exp, case, _div_variant(case, lambda a, da, b, db: (da * b - a * db) / b)
            ),
        ),
    ),
    nudges=("Write a/b as a · (1/b) and use d(1/b) = -db / b².",),
    reveal="The tangent is (da·b - a·db) / b².",
)


# --- 1.4 a jvp by hand -----------------------------------------------------------------
# f(x, y) = (sin(x·y), x + y²)   J = [[y cos(xy), x cos(xy)], [1, 2y]]


def _jvp_cases(rng):
    cases = []
    for _ in range(5):
        x, y, dx, dy = (draw(rng, -2, 2) for _ in range(4))
        cases.append(Case(f"random x={x}, y={y}, dx={dx}, dy={dy}", (x, y, dx, dy)))
    cases += [
        Case("edge: direction e_x (a column of J)", (0.8, -1.3, 1.0, 0.0)),
        Case("edge: direction e_y", (0.8, -1.3, 0.0, 1.0)),
        Case("edge: zero direction", (1.1, 0.4, 0.0, 0.0)),
    ]
    return cases


def _jacobian_xy(x, y):
    c = math.cos(x * y)
    return np.array([[y * c, x * c], [1.0, 2 * y]])


def _jvp_reference(inputs):
    x, y, dx, dy = inputs
    jac = _jacobian_xy(x, y)
    return [[math.sin(x * y), x + y * y], list(jac @ np.array([dx, dy]))]


def _tangent_is(got, case, make) -> bool:
    x, y, dx, dy = case.inputs
    return close(got[1], make(x, y, dx, dy)) and not close(got[1], _jvp_reference(case.inputs)[1])


JVP = Exercise(
    id="1.4",
    title="A jvp by hand",
    level="easy",
    minutes=10,
    parts=("f(x, y)", "J @ (dx, dy)"),
    task="jvp_f(x, y, dx, dy): for f(x, y) = (sin(x*y), x + y**2) return (f(x, y), J @ (dx, dy))",
    answer="jvp_f",
    cases=_jvp_cases,
    run=_jvp_run,
    reference=_jvp_reference,
    mistakes=(
        Mistake(
            "That is Jᵀ·v (a vjp), not J·v: output i's tangent is Σ_j ∂f_i/∂x_j · v_j — "
            "sum along a row of J.",
            lambda got, exp, case: _tangent_is(
                got, case, lambda x, y, dx, dy: _jacobian_xy(x, y).T @ np.array([dx, dy])
            ),
        ),
        Mistake(
            "The tangent ignores dy: both inputs move at once, so add ∂f/∂y·dy to ∂f/∂x·dx.",
            lambda got, exp, case: (
                case.inputs[3] != 0
                and _tangent_is(
                    got, case, lambda x, y, dx, dy: _jacobian_xy(x, y) @ np.array([dx, 0.0])
                )
            ),
        ),
        Mistake(
            "Chain rule inside sin: d sin(x·y) = cos(x·y)·(y·dx + x·dy), the inner "
            "derivative of x·y is y·dx + x·dy, not dx + dy.",
            lambda got, exp, case: _tangent_is(
                got,
                case,
                lambda x, y, dx, dy: [math.cos(x * y) * (dx + dy), dx + 2 * y * dy],
            ),
        ),
        Mistake(
            "The value part should be f(x, y) = (sin(x·y), x + y²) itself.",
            lambda got, exp, case: not close(got[0], exp[0]),
        ),
    ),
    nudges=("Push (x + dx·ε, y + dy·ε) through f one operation at a time.",),
    reveal="Tangent of x·y is y·dx + x·dy; tangent of sin(u) is cos(u)·du; tangent of y² is 2y·dy.",
)


# --- 1.5 a Jacobian column with one forward pass --------------------------------------


def _jacobian(name: str, x: np.ndarray) -> np.ndarray:
    """The closed-form Jacobian J[i, k] = d f_i / d x_k of each function above."""
    n = len(x)
    if name == "x * sum(x)":  # d(x_i s)/dx_k = δ_ik s + x_i
        return np.eye(n) * x.sum() + np.outer(x, np.ones(n))
    if name == "sin(x) * x[0] + x":  # δ_ik (cos(x_i) x_0 + 1) + sin(x_i) δ_k0
        jac = np.diag(np.cos(x) * x[0] + 1.0)
        jac[:, 0] += np.sin(x)
        return jac
    mix = _MIX[:n, :n]  # tanh(Mx): diag(1 - tanh² (Mx)) M
    return (1 - np.tanh(mix @ x) ** 2)[:, None] * mix


def _column_cases(rng):
    cases = []
    for name in JACOBIAN_FUNCTIONS:
        n = int(rng.integers(3, 5))
        x = [draw(rng, -1.5, 1.5) for _ in range(n)]
        j = int(rng.integers(0, n))
        cases.append(Case(f"random f(x) = {name}, n = {n}, column {j}", (name, x, j)))
    cases += [
        Case("edge: first column", ("tanh(M @ x)", [0.3, -0.2, 0.9, 1.1], 0)),
        Case("edge: last column", ("x * sum(x)", [1.0, -2.0, 0.5], 2)),
        Case("edge: one input", ("sin(x) * x[0] + x", [0.4], 0)),
    ]
    return cases


def _column_reference(inputs):
    name, x, j = inputs
    return _jacobian(name, np.asarray(x, dtype=np.float64))[:, j]


def _column_is(got, case, pick) -> bool:
    name, x, j = case.inputs
    jac = _jacobian(name, np.asarray(x, dtype=np.float64))
    return close(got, pick(jac, j)) and not close(got, jac[:, j])


COLUMN = Exercise(
    id="1.5",
    title="A Jacobian column in one forward pass",
    level="easy",
    minutes=10,
    task="jacobian_column(f, x, j): column j of f's Jacobian at x from one forward pass with Dual",
    answer="jacobian_column",
    cases=_column_cases,
    run=_column_run,
    reference=_column_reference,
    mistakes=(
        Mistake(
            "That is row j (d f_j / d every x), not column j. One forward pass gives the "
            "derivative of every output along one input: seed the tangent with e_j.",
            lambda got, exp, case: _column_is(got, case, lambda jac, j: jac[j, :]),
        ),
        Mistake(
            "A tangent of all ones moves every input at once and gives the sum of all "
            "columns. Seed the tangent with e_j (1 at position j, 0 elsewhere).",
            lambda got, exp, case: _column_is(got, case, lambda jac, j: jac.sum(axis=1)),
        ),
        Mistake(
            "Return the output's tangent, not its primal (the value of f).",
            lambda got, exp, case: close(
                got, JACOBIAN_FUNCTIONS[case.inputs[0]](np.asarray(case.inputs[1], float))
            ),
        ),
    ),
    nudges=("Build Dual(x, tangent) with a one-hot tangent and call f once.",),
    reveal="tangent = np.zeros_like(x); tangent[j] = 1.0; return f(Dual(x, tangent)).tangent",
)


# --- 1.6 forward mode through a loop: Heron's square root ---------------------------------
# x_0 = a, x_{k+1} = (x_k + a / x_k) / 2. The input a enters twice: as the start x_0 and
# inside every quotient, so its tangent 1 must ride along in both places.


def _heron(a: float, steps: int, dx0: float = 1.0, da_in_quotient: float = 1.0, sign: float = 1.0):
    """Heron's iteration on the dual number (a, 1), with knobs that model wrong answers.

    ``dx0`` is the start tangent (right: 1, since x_0 = a); ``da_in_quotient`` the tangent
    of a inside a / x (right: 1); ``sign`` the sign of the a·dx term of the quotient rule.
    """
    x, dx = a, dx0
    for _ in range(steps):
        q, dq = a / x, (da_in_quotient * x - sign * a * dx) / x**2  # d(a/x)
        x, dx = (x + q) / 2, (dx + dq) / 2
    return [x, dx]


def _unconverged(a: float, steps: int) -> bool:
    """True while the derivative after ``steps`` steps is still far from 1 / (2√a).

    It converges as fast as x does (the error roughly squares each step: the derivative of
    the iteration tends to the derivative of its fixed point), so a case graded after it
    has converged would pass the limit's formula. Every case stops before that.
    """
    return abs(_heron(a, steps)[1] - 0.5 / math.sqrt(a)) > 1e-3 * (0.5 / math.sqrt(a))


def _heron_cases(rng):
    cases = []
    while len(cases) < 5:
        a, steps = draw(rng, 0.5, 60.0), int(rng.integers(1, 6))
        if _unconverged(a, steps):
            cases.append(Case(f"random a={a}, steps={steps}", (a, steps)))
    cases += [
        Case("edge: steps = 0 (x = a itself)", (2.0, 0)),
        Case("edge: a = 0.01, 4 steps (x starts below √a)", (0.01, 4)),
        Case("edge: a = 100, 2 steps (far from converged)", (100.0, 2)),
    ]
    return cases


def _heron_reference(inputs):
    a, steps = inputs
    return _heron(a, steps)


def _heron_is(got, case, **wrong) -> bool:
    a, steps = case.inputs
    return close(got[1], _heron(a, steps, **wrong)[1]) and not close(got[1], _heron(a, steps)[1])


HERON = Exercise(
    id="1.6",
    title="Forward mode through a loop: Heron's square root",
    level="medium",
    minutes=15,
    parts=("x", "dx/da"),
    task="sqrt_heron(a, steps): run x = (x + a/x)/2 from x = a; return (x, dx/da) by forward mode",
    answer="sqrt_heron",
    cases=_heron_cases,
    run=_heron_run,
    reference=_heron_reference,
    mistakes=(
        Mistake(
            "a is held constant inside a / x: its tangent there is 1 too. With the quotient "
            "rule, d(a/x) = (da·x - a·dx) / x², and da = 1 — a Dual for a must be used in "
            "the quotient, not the float a.",
            lambda got, exp, case: _heron_is(got, case, da_in_quotient=0.0),
        ),
        Mistake(
            "The start x_0 = a moves with a: its tangent is 1, not 0.",
            lambda got, exp, case: _heron_is(got, case, dx0=0.0),
        ),
        Mistake(
            "That is the derivative of the limit √a, 1 / (2√a). The program stops after "
            "steps iterations, before its derivative has got there: differentiate the "
            "iterations it runs.",
            lambda got, exp, case: (
                close(got[1], 0.5 / math.sqrt(case.inputs[0])) and not close(got[1], exp[1])
            ),
        ),
        Mistake(
            "The quotient rule has a minus sign: d(a/x) = (da·x - a·dx) / x².",
            lambda got, exp, case: _heron_is(got, case, sign=-1.0),
        ),
        Mistake(
            "The value part should be the x the iteration ends with.",
            lambda got, exp, case: not close(got[0], exp[0]),
        ),
    ),
    nudges=(
        "Carry a pair (x, dx) through the loop, starting from (a, 1): x_0 = a, and a moves "
        "with tangent 1.",
    ),
    reveal="Each step: q, dq = a / x, (1·x - a·dx) / x²; then x, dx = (x + q) / 2, (dx + dq) / 2.",
)


EXERCISES: list[Exercise] = [MUL, SIN, DIV, JVP, COLUMN, HERON]
