"""Exercise 6.5 (medium by the rubric in spec.py): a new primitive, ``logaddexp``,
through the public extension API.

The student defines ``logaddexp(a, b) = log(eᵃ + eᵇ)`` with
:func:`autodiff_lab.extend.define_primitive`: a forward that never overflows, one vjp
rule per input and one jvp rule per input, written with differentiable operations.
It is graded on random programs (:mod:`autodiff_lab.grading.runners.primitive`): values
on floats (extreme ones included), one recorded node and its gradients on ``Value``,
broadcasting ``Tensor`` backward with a random cotangent, forward mode, the 2×2 Hessian
by grad of grad, and a Hessian-vector product by forward over reverse.

References are closed forms computed here with numpy (never the engine): with
``out = logaddexp(a, b)``, ``p = e^(a − out) = σ(a − b)`` and ``q = e^(b − out) = 1 − p``,
``∂out/∂a = p``, ``∂out/∂b = q``, ``∂²out/∂a² = ∂²out/∂b² = pq``, ``∂²out/∂a∂b = −pq``.
The hints come from wrong rules computed here on the same case.
"""

from __future__ import annotations

import numpy as np

from ..runners.primitive import primitive_run
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error

__all__ = ["EXERCISES", "primitive_reference"]


# --- closed forms ------------------------------------------------------------------------------


def _shares(a, b):
    """(out, p, q): logaddexp and its two partial derivatives, stable for any a, b."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = np.logaddexp(a, b)
    return out, np.exp(a - out), np.exp(b - out)


def _sum_to(g, shape) -> np.ndarray:
    """``g`` summed back to ``shape`` (the reverse of numpy broadcasting)."""
    g = np.asarray(g, dtype=np.float64)
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def _answer(inputs, *, swap=False, no_g=False, constant_rules=False, jvp_rule="right"):
    """What ``run`` returns for these inputs, for the right rules or a wrong variant."""
    kind = inputs[0]
    if kind == "value":
        return float(_shares(inputs[1], inputs[2])[0])
    if kind == "graph":
        out, p, q = _shares(inputs[1], inputs[2])
        da, db = (q, p) if swap else (p, q)
        return [float(out), float(da), float(db)]
    if kind == "tensor":
        _, a, b, g = inputs
        out, p, q = _shares(a, b)
        weights_a, weights_b = (q, p) if swap else (p, q)
        g = np.ones_like(out) if no_g else np.asarray(g, dtype=np.float64)
        da = _sum_to(g * weights_a, np.shape(a))
        db = _sum_to(g * weights_b, np.shape(b))
        return [out, da, db]
    if kind == "jvp":
        _, a, b, ta, tb = inputs
        _out, p, q = _shares(a, b)
        ta, tb = np.asarray(ta, dtype=np.float64), np.asarray(tb, dtype=np.float64)
        if jvp_rule == "copied":  # b's rule a copy of a's
            return ta * p + tb * p
        if jvp_rule == "a only":
            return ta * p
        return ta * p + tb * q
    if kind == "hessian":
        _out, p, q = _shares(inputs[1], inputs[2])
        pq = 0.0 if constant_rules else float(p * q)
        return [[pq, -pq], [-pq, pq]]
    if kind == "hvp":
        _, x, v = inputs
        _out, p, q = _shares(x[0], x[1])
        pq = 0.0 if constant_rules else float(p * q)
        return [pq * (v[0] - v[1]), pq * (v[1] - v[0])]
    raise ValueError(f"unknown case kind {kind!r}")


def primitive_reference(inputs):
    """The right answer for a case, from the closed forms."""
    return _answer(inputs)


# --- the cases ---------------------------------------------------------------------------------


def _vec(rng, shape, lo=-3.0, hi=3.0):
    return draw(rng, lo, hi, shape)


def _primitive_cases(rng):
    cases = []
    for _ in range(3):
        a, b = draw(rng, -4, 4), draw(rng, -4, 4)
        cases.append(Case(f"value: logaddexp({a}, {b})", ("value", a, b)))
    big = round(float(rng.uniform(700, 900)), 2)
    cases.append(Case(f"value: huge inputs ({big}, {big - 1})", ("value", big, big - 1)))
    cases.append(Case(f"value: very negative ({-big}, {-big - 2})", ("value", -big, -big - 2)))
    cases.append(Case("value: a = b = 0.5 gives 0.5 + log 2", ("value", 0.5, 0.5)))
    for _ in range(2):
        a, b = draw(rng, -3, 3), draw(rng, -3, 3)
        cases.append(Case(f"Value: one node and its gradients at ({a}, {b})", ("graph", a, b)))
    cases.append(Case(f"Value: gradients at huge inputs ({big}, {big})", ("graph", big, big)))
    shapes = [((3, 1), (4,)), ((2, 3), (2, 3)), ((1, 4), (3, 1))]
    for sa, sb in shapes:
        a, b = _vec(rng, sa), _vec(rng, sb)
        g = _vec(rng, np.broadcast_shapes(sa, sb), -2, 2)
        cases.append(Case(f"Tensor: shapes {sa} and {sb}, random cotangent", ("tensor", a, b, g)))
    a, b = _vec(rng, (2, 2), 600, 800), _vec(rng, (2, 2), 600, 800)
    g = _vec(rng, (2, 2), -2, 2)
    cases.append(Case("Tensor: entries between 600 and 800", ("tensor", a, b, g)))
    for _ in range(2):
        a, b, ta, tb = (_vec(rng, (3,)) for _ in range(4))
        cases.append(Case("forward mode: jvp along random tangents", ("jvp", a, b, ta, tb)))
    for _ in range(2):
        a, b = draw(rng, -3, 3), draw(rng, -3, 3)
        cases.append(Case(f"grad of grad: the 2x2 Hessian at ({a}, {b})", ("hessian", a, b)))
    x, v = [draw(rng, -2, 2), draw(rng, -2, 2)], [draw(rng, -1, 1), draw(rng, -1, 1)]
    cases.append(Case(f"forward over reverse: H v at x = {x}, v = {v}", ("hvp", x, v)))
    return cases


# --- the mistakes, recognised from wrong rules computed here ---------------------------------


def _kind(case) -> str:
    return case.inputs[0]


def _overflows(got, exp, case) -> bool:
    if _kind(case) not in ("value", "graph", "tensor") or close(got, exp):
        return False
    if is_error(got, "OverflowError"):
        return True
    values = got if _kind(case) == "value" else got[0]
    return not np.all(np.isfinite(np.asarray(values, dtype=float)))


def _swapped(got, exp, case) -> bool:
    return (
        _kind(case) in ("graph", "tensor")
        and not close(got, exp)
        and close(got, _answer(case.inputs, swap=True))
    )


def _no_unbroadcast(got, exp, case) -> bool:
    if _kind(case) != "tensor" or not is_error(got, "ValueError"):
        return False
    _, a, b, _g = case.inputs
    return np.shape(a) != np.shape(b) and "has shape" in got.get("message", "")


def _forgot_g(got, exp, case) -> bool:
    return (
        _kind(case) == "tensor"
        and not close(got, exp)
        and close(got, _answer(case.inputs, no_g=True))
    )


def _constant_rules(got, exp, case) -> bool:
    return (
        _kind(case) in ("hessian", "hvp")
        and not close(got, exp)
        and close(got, _answer(case.inputs, constant_rules=True))
    )


def _jvp_copied(got, exp, case) -> bool:
    if _kind(case) != "jvp" or close(got, exp):
        return False
    return close(got, _answer(case.inputs, jvp_rule="copied")) or close(
        got, _answer(case.inputs, jvp_rule="a only")
    )


def _missing_rule(got, exp, case) -> bool:
    return is_error(got, "NotImplementedError") and "without a" in got.get("message", "")


PRIMITIVE = Exercise(
    id="6.5",
    title="A new primitive through the extension API",
    level="medium",
    minutes=30,
    task="logaddexp = define_primitive('logaddexp', forward, vjp=(…, …), jvp=(…, …)): "
    "log(exp(a) + exp(b)) that never overflows, with its rules",
    answer="logaddexp",
    cases=_primitive_cases,
    run=primitive_run,
    reference=primitive_reference,
    mistakes=(
        Mistake(
            "logaddexp must be the op define_primitive(...) returns, under a name of its own "
            "(not a composite of library functions, not a built-in name).",
            lambda got, exp, case: is_error(got, "NotAPrimitive") or is_error(got, "NotOneNode"),
        ),
        Mistake(
            "The forward overflows: exp(800) is inf. Factor out the larger input, "
            "m + log(exp(a − m) + exp(b − m)) with m = max(a, b) (np.maximum for arrays).",
            _overflows,
        ),
        Mistake(
            "The two vjp rules are swapped: ∂/∂a is e^(a − out) = σ(a − b), the weight of "
            "a's own exponential; b gets e^(b − out).",
            _swapped,
        ),
        Mistake(
            "With broadcasting, an input's gradient must be summed back to that input's "
            "shape: wrap each share in ops.unbroadcast(share, a) (resp. b).",
            _no_unbroadcast,
        ),
        Mistake(
            "The vjp rules forgot the upstream gradient g: a share is g times the local "
            "derivative (right only when g is all ones).",
            _forgot_g,
        ),
        Mistake(
            "Grad of grad lost the curvature: the rules use a number frozen out of the "
            "graph (math.exp, float(...), .data). Write them with ops.exp, *, - on the "
            "values the rule receives, so the rule itself is differentiated.",
            _constant_rules,
        ),
        Mistake(
            "Forward mode is wrong: the tangent is t_a·e^(a − out) + t_b·e^(b − out), one "
            "jvp rule per input, each with its own weight.",
            _jvp_copied,
        ),
        Mistake(
            "A rule is missing: give both vjp=(rule_a, rule_b) and jvp=(rule_a, rule_b).",
            _missing_rule,
        ),
    ),
    nudges=(
        "Differentiate log(e^a + e^b) by the chain rule, then write the result with out, the "
        "value the primitive hands each rule: no exponential of a or b alone is needed.",
    ),
    reveal="vjp rule for a: lambda g, out, a, b: ops.unbroadcast(g * ops.exp(a - out), a); the "
    "jvp rule for a: lambda t, out, a, b: t * ops.exp(a - out).",
)


EXERCISES: list[Exercise] = [PRIMITIVE]
