"""Chapter 03 exercises: micrograd from scratch (ops with their backward, planted bugs).

Exercises 3.1–3.3 write an op the micrograd way, as a forward computation plus the
closure that runs backward: ``op(x) -> (out, backward)`` where ``backward(g)`` returns the
gradient for the input(s) given the upstream gradient ``g``. Exercises 3.4–3.5 fix bugs
planted in a backward driver and in a training loop.
"""

from __future__ import annotations

import math

import numpy as np

from ..runners.ch03 import (
    _driver_run,
    _fit_run,
    _leaf_indices,
    _op_run,
    _sigmoid_run,
    build_expression,
    local_grads,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error

__all__ = ["EXERCISES", "build_expression", "local_grads"]


# --- 3.1 exp ---------------------------------------------------------------------------


def _exp_cases(rng):
    cases = []
    for _ in range(5):
        x, g = draw(rng, -3.0, 3.0), draw(rng, -2, 2)
        cases.append(Case(f"random x={x}, upstream g={g}", (x, g)))
    cases += [
        Case("edge: x = 0, g = 1", (0.0, 1.0)),
        Case("edge: upstream g = 0", (1.3, 0.0)),
        Case("edge: x = -20 (tiny e^x)", (-20.0, 3.0)),
    ]
    return cases


def _exp_reference(inputs):
    x, g = inputs
    return [math.exp(x), g * math.exp(x)]


EXP = Exercise(
    id="3.1",
    title="exp with its backward",
    level="trivial",
    minutes=5,
    parts=("value", "gradient"),
    task="exp_op(x): return (e**x, backward) where backward(g) is the gradient for x",
    answer="exp_op",
    cases=_exp_cases,
    run=_op_run,
    reference=_exp_reference,
    mistakes=(
        Mistake(
            "backward ignores the upstream gradient g: the chain rule multiplies the local "
            "derivative e^x by g.",
            lambda got, exp, case: (
                close(got[1], math.exp(case.inputs[0])) and not close(got[1], exp[1])
            ),
        ),
        Mistake(
            "backward passes g through unchanged: it must multiply by d e^x/dx = e^x.",
            lambda got, exp, case: close(got[1], case.inputs[1]) and not close(got[1], exp[1]),
        ),
        Mistake(
            "The local derivative of e^x is e^x itself (not x·e^(x-1)).",
            lambda got, exp, case: (
                not close(got[1], exp[1])
                and close(got[1], case.inputs[1] * case.inputs[0] * math.exp(case.inputs[0] - 1))
            ),
        ),
    ),
    nudges=("Compute the output first: exp is its own derivative, so backward can reuse it.",),
    reveal="def backward(g): return g * out",
)


# --- 3.2 a ** b with both differentiable ------------------------------------------------


def _pow_cases(rng):
    cases = []
    for _ in range(5):
        a, b, g = draw(rng, 0.2, 3.0), draw(rng, -2.0, 3.0), draw(rng, -2, 2)
        cases.append(Case(f"random a={a}, b={b}, g={g}", (a, b, g)))
    cases += [
        Case("edge: a = 1 (log a = 0)", (1.0, 2.5, 1.0)),
        Case("edge: b = 0", (2.0, 0.0, 1.0)),
        Case("edge: a = e, b = 1", (math.e, 1.0, 2.0)),
    ]
    return cases


def _pow_reference(inputs):
    a, b, g = inputs
    out = a**b
    return [out, [g * b * a ** (b - 1), g * out * math.log(a)]]


def _pow_grads_are(got, case, da=None, db=None) -> bool:
    a, b, g = case.inputs
    exp = _pow_reference(case.inputs)[1]
    check_a = da is None or close(got[1][0], da(a, b, g))
    check_b = db is None or close(got[1][1], db(a, b, g))
    return check_a and check_b and not close(got[1], exp)


POW = Exercise(
    id="3.2",
    title="a ** b with a differentiable exponent",
    level="easy",
    minutes=10,
    parts=("value", "(grad for a, grad for b)"),
    task="pow_op(a, b): return (a**b, backward) where backward(g) is (grad for a, grad for b)",
    answer="pow_op",
    cases=_pow_cases,
    run=_op_run,
    reference=_pow_reference,
    mistakes=(
        Mistake(
            "The exponent's gradient is missing log(a): d(a^b)/db = a^b · ln(a) "
            "(write a^b = e^(b ln a)).",
            lambda got, exp, case: _pow_grads_are(got, case, db=lambda a, b, g: g * a**b),
        ),
        Mistake(
            "The exponent's gradient used the power rule; that rule is for the base. For the "
            "exponent, d(a^b)/db = a^b · ln(a).",
            lambda got, exp, case: _pow_grads_are(
                got, case, db=lambda a, b, g: g * b * a ** (b - 1)
            ),
        ),
        Mistake(
            "The base's gradient lost the factor b: d(a^b)/da = b · a^(b-1).",
            lambda got, exp, case: _pow_grads_are(got, case, da=lambda a, b, g: g * a ** (b - 1)),
        ),
        Mistake(
            "The base's gradient should lower the power by one: b · a^(b-1), not b · a^b.",
            lambda got, exp, case: _pow_grads_are(got, case, da=lambda a, b, g: g * b * a**b),
        ),
        Mistake(
            "backward must return two gradients, (grad for a, grad for b), each times g.",
            lambda got, exp, case: not isinstance(got[1], list | tuple),
        ),
    ),
    nudges=("Two inputs, two local derivatives: ∂/∂a and ∂/∂b of a^b.",),
    reveal="∂(a^b)/∂a = b·a^(b-1) and ∂(a^b)/∂b = a^b·ln a; multiply both by g.",
)


# --- 3.3 a numerically stable sigmoid ---------------------------------------------------


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _sigmoid_cases(rng):
    cases = []
    for _ in range(5):
        x, g = draw(rng, -6, 6), draw(rng, -2, 2)
        cases.append(Case(f"random x={x}, g={g}", (x, g)))
    cases += [
        Case("edge: x = 0 (s = 1/2)", (0.0, 1.0)),
        Case("edge: x = 800 (e^-x underflows)", (800.0, 1.0)),
        Case("edge: x = -800 (e^-x overflows)", (-800.0, 1.0), points=3.0),
        Case("edge: x = -1e5, g = 2 (e^-x overflows)", (-1e5, 2.0), points=3.0),
    ]
    return cases


def _sigmoid_reference(inputs):
    x, g = inputs
    s = _sigmoid(x)
    return [s, g * s * (1 - s)]


def _sigmoid_grad_is(got, case, make) -> bool:
    x, g = case.inputs
    s = _sigmoid(x)
    return close(got[1], make(x, s, g)) and not close(got[1], g * s * (1 - s))


SIGMOID = Exercise(
    id="3.3",
    title="sigmoid, numerically stable, with its backward",
    level="easy",
    minutes=15,
    parts=("value", "gradient"),
    task="sigmoid_op(x): return (1/(1+e**-x), backward), without overflow for any float x",
    answer="sigmoid_op",
    cases=_sigmoid_cases,
    run=_sigmoid_run,
    reference=_sigmoid_reference,
    mistakes=(
        Mistake(
            "Overflow: for very negative x, e^-x is too big for a float (math.exp raises, "
            "np.exp returns inf with a warning). For x < 0 use the equal form "
            "e^x / (1 + e^x), whose e^x cannot overflow.",
            lambda got, exp, case: is_error(got, "OverflowError"),
        ),
        Mistake(
            "The local derivative uses the input x; it should use the output s: dσ/dx = s·(1 - s).",
            lambda got, exp, case: _sigmoid_grad_is(got, case, lambda x, s, g: g * x * (1 - x)),
        ),
        Mistake(
            "Half of the derivative is missing: dσ/dx = s·(1 - s), not s.",
            lambda got, exp, case: _sigmoid_grad_is(got, case, lambda x, s, g: g * s),
        ),
        Mistake(
            "Sign error: dσ/dx = s·(1 - s), which is never negative.",
            lambda got, exp, case: _sigmoid_grad_is(got, case, lambda x, s, g: -g * s * (1 - s)),
        ),
        Mistake(
            "backward ignores the upstream gradient g: multiply s·(1 - s) by g.",
            lambda got, exp, case: _sigmoid_grad_is(got, case, lambda x, s, g: s * (1 - s)),
        ),
    ),
    nudges=(
        "Compute s once in forward and reuse it in backward: dσ/dx = s·(1 - s).",
        "Two branches: x >= 0 → 1/(1 + e^-x); x < 0 → e^x/(1 + e^x).",
    ),
)


# --- 3.4 fix the backward driver ------------------------------------------------------


def _forward_mode(spec, seed_leaf: int) -> float:
    """d root / d leaf, by pushing (value, tangent) pairs through ``spec`` (independent check)."""
    vals: list[tuple[float, float]] = []
    for k, (op, *args) in enumerate(spec):
        if op == "leaf":
            vals.append((args[0], 1.0 if k == seed_leaf else 0.0))
        elif op == "+":
            (a, da), (b, db) = vals[args[0]], vals[args[1]]
            vals.append((a + b, da + db))
        elif op == "*":
            (a, da), (b, db) = vals[args[0]], vals[args[1]]
            vals.append((a * b, a * db + da * b))
        elif op == "tanh":
            a, da = vals[args[0]]
            t = math.tanh(a)
            vals.append((t, (1 - t * t) * da))
        else:
            a, da = vals[args[0]]
            vals.append((math.exp(a), math.exp(a) * da))
    return vals[-1][1]


def _random_expression(rng, n_leaves: int, n_ops: int):
    spec: list[tuple] = [("leaf", draw(rng, -1.0, 1.0)) for _ in range(n_leaves)]
    for _ in range(n_ops):
        k = len(spec)
        op = str(rng.choice(["+", "*", "*", "tanh", "exp"], p=[0.3, 0.3, 0.1, 0.2, 0.1]))
        recent = int(rng.integers(max(0, k - 3), k))  # keep the graph connected, chain-like
        if op in ("tanh", "exp"):
            spec.append((op, recent))
        else:
            spec.append((op, recent, int(rng.integers(0, k))))
    return spec


def _driver_cases(rng):
    cases = [
        Case(f"random expression {k + 1}", (_random_expression(rng, n, m),))
        for k, (n, m) in enumerate([(3, 6), (4, 8), (3, 10)])
    ]
    cases += [
        Case("edge: x * x", ([("leaf", 1.5), ("*", 0, 0)],)),
        Case(
            "edge: a diamond, tanh(x) + exp(x)",
            ([("leaf", 0.4), ("tanh", 0), ("exp", 0), ("+", 1, 2)],),
        ),
        Case("edge: the root is a leaf", ([("leaf", 2.0)],)),
    ]
    return cases


def _driver_reference(inputs):
    spec = inputs[0]
    return [_forward_mode(spec, k) for k in _leaf_indices(spec)]


def _shared_leaves(spec) -> set[int]:
    """Leaves whose gradient passes through a node used more than once (fan-out > 1)."""
    uses = [0] * len(spec)
    for _op, *args in spec:
        if _op != "leaf":
            for i in args:
                uses[i] += 1
    feeds = [{k} for k in range(len(spec))]  # feeds[k]: nodes that k's value flows into
    for k in range(len(spec) - 1, -1, -1):
        op, *args = spec[k]
        if op != "leaf":
            for i in args:
                feeds[i] |= feeds[k]
    return {k for k in _leaf_indices(spec) if any(uses[n] > 1 for n in feeds[k])}


def _forward_order_result(spec) -> list[float]:
    """Leaf gradients when the driver walks in *forward* topological order (a bug).

    Every node is then visited before the nodes that use it, while its gradient is still
    0, so only the root passes anything on: to its own inputs.
    """
    values: list[float] = []
    for op, *args in spec:
        if op == "leaf":
            values.append(args[0])
        elif op == "+":
            values.append(values[args[0]] + values[args[1]])
        elif op == "*":
            values.append(values[args[0]] * values[args[1]])
        else:
            values.append(getattr(math, op)(values[args[0]]))
    grads = [0.0] * len(spec)
    op, *args = spec[-1]
    if op == "leaf":
        grads[-1] = 1.0
    elif op == "+":
        grads[args[0]] += 1.0
        grads[args[1]] += 1.0
    elif op == "*":
        grads[args[0]] += values[args[1]]
        grads[args[1]] += values[args[0]]
    elif op == "tanh":
        grads[args[0]] += 1.0 - values[-1] ** 2
    else:
        grads[args[0]] += values[-1]
    return [grads[k] for k in _leaf_indices(spec)]


def _only_shared_wrong(got, exp, case) -> bool:
    spec = case.inputs[0]
    leaves, shared = _leaf_indices(spec), _shared_leaves(spec)
    wrong = {leaf for leaf, g, e in zip(leaves, got, exp, strict=True) if not close(g, e)}
    return bool(wrong) and wrong <= shared


DRIVER = Exercise(
    id="3.4",
    title="Fix the backward driver",
    level="easy",
    minutes=15,
    task="backward(root, local_grads): set .grad of every node root depends on "
    "(fix the planted bug in buggy_backward)",
    answer="backward",
    cases=_driver_cases,
    run=_driver_run,
    reference=_driver_reference,
    mistakes=(
        Mistake(
            "All gradients are 0: seed the walk with root.grad = 1.0 (d root / d root), and "
            "walk from the root backwards.",
            lambda got, exp, case: all(g == 0 for g in got) and not all(e == 0 for e in exp),
        ),
        Mistake(
            "Only the root's own inputs got a gradient: walk the nodes in *reversed* "
            "topological order (root first), so a node's gradient is complete before it is "
            "passed on to its parents.",
            lambda got, exp, case: (
                close(got, _forward_order_result(case.inputs[0])) and not close(got, exp)
            ),
        ),
        Mistake(
            "Only nodes used more than once get wrong gradients: a node that feeds several "
            "others receives one share from each, and the shares must add up "
            "(`parent.grad += ...`, not `=`).",
            _only_shared_wrong,
        ),
    ),
    nudges=(
        "root.grad = 1, then for each node from the root backwards: give each parent "
        "local_grad × node.grad.",
        "Look at how a parent's .grad is updated when two nodes use the same parent.",
    ),
)


# --- 3.5 fix the training loop --------------------------------------------------------


def _fit_cases(rng):
    cases = []
    for _ in range(3):
        n = int(rng.integers(4, 9))
        w_true, b_true = draw(rng, -2, 2), draw(rng, -1, 1)
        xs = [draw(rng, -1.5, 1.5) for _ in range(n)]
        ys = [round(w_true * x + b_true + 0.1 * float(rng.normal()), 4) for x in xs]
        lr, steps = round(float(rng.uniform(0.05, 0.2)), 3), int(rng.integers(15, 40))
        cases.append(Case(f"random line, {n} points, lr={lr}, {steps} steps", (xs, ys, lr, steps)))
    cases += [
        Case("edge: two points, 50 steps", ([0.0, 1.0], [1.0, 3.0], 0.1, 50)),
        Case("edge: 0 steps leaves (0, 0)", ([1.0, 2.0], [1.0, 2.0], 0.1, 0)),
    ]
    return cases


def _gradient_descent(xs, ys, lr, steps, *, accumulate=False, mean=True):
    """w, b after ``steps`` of gradient descent on (1/N) Σ (w x + b - y)², from (0, 0)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    scale = 2.0 / len(x) if mean else 2.0
    w = b = gw_total = gb_total = 0.0
    for _ in range(steps):
        r = w * x + b - y
        gw, gb = scale * float(r @ x), scale * float(r.sum())
        if accumulate:  # the bug: .grad keeps the sum of every step's gradient
            gw_total, gb_total = gw_total + gw, gb_total + gb
            gw, gb = gw_total, gb_total
        w, b = w - lr * gw, b - lr * gb
    return [w, b]


def _fit_reference(inputs):
    return _gradient_descent(*inputs)


FIT = Exercise(
    id="3.5",
    title="Fix the training loop",
    level="easy",
    minutes=10,
    parts=("w", "b"),
    task="fit(xs, ys, lr, steps): gradient descent on the mean squared error of w*x + b "
    "from w = b = 0; return (w, b) (fix the planted bug in buggy_fit)",
    answer="fit",
    cases=_fit_cases,
    run=_fit_run,
    reference=_fit_reference,
    mistakes=(
        Mistake(
            "Gradients add up across backward() calls: each step used the sum of all the "
            "gradients so far. Set w.grad = b.grad = 0 (zero_grad) before every backward().",
            lambda got, exp, case: close(got, _gradient_descent(*case.inputs, accumulate=True)),
        ),
        Mistake(
            "The loss should be the *mean* squared error: divide the sum by the number of points.",
            lambda got, exp, case: close(got, _gradient_descent(*case.inputs, mean=False)),
        ),
    ),
    nudges=(
        "Compare w.grad in the first two steps of buggy_fit with the gradient you expect.",
        "Where do the parameters' gradients start from at each step?",
    ),
)


EXERCISES: list[Exercise] = [EXP, POW, SIGMOID, DRIVER, FIT]
