"""Chapter 06 exercises: higher-order derivatives, Taylor coefficients, HVPs, tags.

The functions the student differentiates are named in the (plain-data) case inputs and
looked up in :data:`SCALAR_FUNCTIONS` / :data:`VECTOR_FUNCTIONS` in the student's process;
the references use closed forms only (never the engine).
"""

from __future__ import annotations

import math

import numpy as np

from ..runners.ch06 import (
    _Q,
    _W,
    DIRECTIONAL_FUNCTIONS,
    SCALAR_FUNCTIONS,
    TAG_PROBLEMS,
    VECTOR_FUNCTIONS,
    _hvp_run,
    _nth_run,
    _tag_run,
    _taylor_run,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error, number

__all__ = ["EXERCISES", "SCALAR_DERIVATIVES", "TAG_ANSWERS", "VECTOR_HESSIANS"]


def _poly_derivative(x: float, k: int) -> float:  # f(x) = x^5 - 3x^2
    fifth = math.perm(5, k) * x ** (5 - k) if k <= 5 else 0.0
    second = 3 * math.perm(2, k) * x ** (2 - k) if k <= 2 else 0.0
    return fifth - second


SCALAR_DERIVATIVES = {  # the k-th derivative of each of SCALAR_FUNCTIONS, closed form
    "sin(2x)": lambda x, k: 2**k * math.sin(2 * x + k * math.pi / 2),
    "exp(-x)": lambda x, k: (-1) ** k * math.exp(-x),
    "sin(x)*exp(x)": lambda x, k: 2 ** (k / 2) * math.exp(x) * math.sin(x + k * math.pi / 4),
    "x^5 - 3x^2": _poly_derivative,
}


def _hess_exp_product(x):
    e = math.exp(x[0] * x[1])
    mixed = e * (1 + x[0] * x[1])
    return np.array([[x[1] ** 2 * e, mixed, 0.0], [mixed, x[0] ** 2 * e, 0.0], [0, 0, 6 * x[2]]])


def _hess_log_sum_exp(x):
    p = np.exp(x - x.max())
    p /= p.sum()
    return np.diag(p) - np.outer(p, p)


VECTOR_HESSIANS = {  # the Hessian of each of VECTOR_FUNCTIONS, closed form
    "0.5 x.Qx": lambda x: _Q,
    "sum(tanh(x))": lambda x: np.diag(-2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    "exp(x0*x1) + x2^3": _hess_exp_product,
    "log(sum(exp(x)))": _hess_log_sum_exp,
}


TAG_ANSWERS = {  # the value of each of TAG_PROBLEMS, closed form
    "x sin x": lambda x: math.sin(x) + x * math.cos(x),
    "d/dx [x * d/dy (x + y)]": lambda x: 1.0,
    "d/dx [x * d/dy (x y)]": lambda x: 2 * x,
    "three levels: 4x": lambda x: 4 * x,
    "a constant function": lambda x: 0.0,
}


# --- scalar functions with every derivative in closed form -------------------------------
# name -> (f written with the generic ops, k-th derivative as a closed form)


def _derivative(name: str, x: float, k: int) -> float:
    return SCALAR_DERIVATIVES[name](x, k)


# --- 6.1 the n-th derivative by nesting grad ---------------------------------------------


def _nth_cases(rng):
    names = sorted(SCALAR_FUNCTIONS)
    cases = []
    for _ in range(6):
        name = names[int(rng.integers(len(names)))]
        x, n = draw(rng, -1.5, 1.5), int(rng.integers(1, 5))
        cases.append(Case(f"random: d^{n}/dx^{n} {name} at x = {x}", (name, x, n)))
    cases += [
        Case("edge: n = 0 is f itself", ("sin(2x)", 0.3, 0)),
        Case("edge: n = 5 of x^5 - 3x^2 is the constant 120", ("x^5 - 3x^2", 0.7, 5)),
        Case("edge: n = 6 of x^5 - 3x^2 is 0", ("x^5 - 3x^2", -0.4, 6)),
        Case("edge: x = 0", ("sin(x)*exp(x)", 0.0, 3)),
    ]
    return cases


def _nth_reference(inputs):
    name, x, n = inputs
    return _derivative(name, x, n)


def _is_order(got, case, k) -> bool:
    """``got`` is f's derivative of order k, and on this case that number is neither the
    right one, nor 0, nor f(x) itself (which zeros or f returned unchanged would give)."""
    name, x, n = case.inputs
    wrong = _derivative(name, x, k)
    if k < 0 or any(
        math.isclose(wrong, other, abs_tol=1e-9)
        for other in (_derivative(name, x, n), 0.0, *([_derivative(name, x, 0)] if k else []))
    ):
        return False
    return math.isclose(got, _derivative(name, x, k), rel_tol=1e-6, abs_tol=1e-9)


NTH = Exercise(
    id="6.1",
    title="The n-th derivative by nesting grad",
    level="easy",
    minutes=10,
    task="nth_derivative(f, n): return the function x -> f^(n)(x), built by nesting grad",
    answer="nth_derivative",
    cases=_nth_cases,
    run=_nth_run,
    reference=_nth_reference,
    mistakes=(
        Mistake(
            "That is the derivative of order n - 1: grad was applied one time too few "
            "(the 0-th derivative is f itself, then each grad adds one order).",
            lambda got, exp, case: _is_order(got, case, case.inputs[2] - 1),
        ),
        Mistake(
            "That is the derivative of order n + 1: grad was applied one time too many.",
            lambda got, exp, case: _is_order(got, case, case.inputs[2] + 1),
        ),
    ),
    nudges=(
        "grad(f) is an ordinary function: you can hand it to grad again.",
        "Apply grad n times, each time to the function the step before gave you.",
    ),
)


# --- 6.2 Taylor coefficients along a direction ---------------------------------------------
# The chapter nests grad for f: R -> R. Here f: R^3 -> R and the student must first reduce
# to one variable, g(t) = f(x0 + t v), then nest grad on g at t = 0. References: closed
# forms of g^(j)(0) / j!, with s = w.x0 and r = w.v for the functions of w.x.


def _directional_derivatives(name: str, x0, v, degree: int) -> list[float]:
    """g^(j)(0) for j = 0..degree, g(t) = f(x0 + t v), in closed form."""
    x0, v = np.asarray(x0, dtype=float), np.asarray(v, dtype=float)
    s, r = float(_W @ x0), float(_W @ v)
    out = []
    for j in range(degree + 1):
        if name == "exp(w.x)":
            out.append(r**j * math.exp(s))
        elif name == "sin(w.x)":
            out.append(r**j * math.sin(s + j * math.pi / 2))
        elif name == "1/(1 - 0.2 w.x)":  # g = 1/(1 - 0.2 s - 0.2 r t)
            out.append(math.factorial(j) * (0.2 * r) ** j / (1 - 0.2 * s) ** (j + 1))
        elif name == "x.x":  # |x0|² + 2t x0.v + t²|v|²
            out.append([float(x0 @ x0), 2 * float(x0 @ v), 2 * float(v @ v)][j] if j < 3 else 0.0)
        else:  # x[0]*x[1]: (x00 + t v0)(x01 + t v1)
            coefficients = [x0[0] * x0[1], x0[0] * v[1] + v[0] * x0[1], 2 * v[0] * v[1]]
            out.append(float(coefficients[j]) if j < 3 else 0.0)
    return out


def _taylor_cases(rng):
    names = sorted(DIRECTIONAL_FUNCTIONS)
    cases = []
    for k in range(5):
        name = names[k]
        x0 = [draw(rng, -1.5, 1.5) for _ in range(3)]
        v = [draw(rng, -1.5, 1.5) for _ in range(3)]
        degree = int(rng.integers(2, 6))
        cases.append(
            Case(f"random: {name}, x0 = {x0}, v = {v}, degree {degree}", (name, x0, v, degree))
        )
    cases += [
        Case("edge: degree 0 (just f(x0))", ("exp(w.x)", [0.5, 0.0, -0.5], [1.0, 1.0, 1.0], 0)),
        Case("edge: v = e_1 (along one axis)", ("sin(w.x)", [0.2, 0.4, -0.1], [0.0, 1.0, 0.0], 4)),
        Case(
            "edge: v orthogonal to w (f constant along v)",
            ("exp(w.x)", [0.3, 0.1, 0.2], [2.0, 1.0, 0.0], 3),
        ),
        Case("edge: a quadratic ends at order 2", ("x.x", [1.0, -2.0, 0.5], [0.5, 0.5, -1.0], 5)),
    ]
    return cases


def _taylor_reference(inputs):
    name, x0, v, degree = inputs
    derivatives = _directional_derivatives(name, x0, v, degree)
    return [d / math.factorial(j) for j, d in enumerate(derivatives)]


def _plain_derivatives(case) -> list[float]:
    return _directional_derivatives(*case.inputs)


def _taylor_is(got, case, v) -> bool:
    """True when got is the right answer for direction v instead of the case's own."""
    name, x0, _v, degree = case.inputs
    wrong = _taylor_reference((name, x0, v, degree))
    return close(got, wrong) and not close(got, _taylor_reference(case.inputs))


TAYLOR = Exercise(
    id="6.2",
    title="Taylor coefficients along a direction",
    level="medium",
    minutes=20,
    task="taylor_along(f, x0, v, degree): Taylor coefficients of g(t) = f(x0 + t*v) at t = 0: "
    "[g(0), g'(0), g''(0)/2!, ..., g^(degree)(0)/degree!]",
    answer="taylor_along",
    cases=_taylor_cases,
    run=_taylor_run,
    reference=_taylor_reference,
    mistakes=(
        Mistake(
            "These are the derivatives themselves: the j-th Taylor coefficient is "
            "g^(j)(0) / j! (use math.factorial).",
            lambda got, exp, case: case.inputs[3] >= 2 and close(got, _plain_derivatives(case)),
        ),
        Mistake(
            "Wrong number of coefficients: degree d needs d + 1 of them, from g(0) "
            "(order 0) up to order d.",
            lambda got, exp, case: len(got) != len(exp),
        ),
        Mistake(
            "The direction v was not used (these are the coefficients along (1, 1, 1)): "
            "g(t) = f(x0 + t·v), so every derivative of g carries v — g'(0) = ∇f(x0)·v.",
            lambda got, exp, case: _taylor_is(got, case, [1.0, 1.0, 1.0]),
        ),
        Mistake(
            "Coefficient j was divided by j, not by j! (for j ≥ 2 they differ).",
            lambda got, exp, case: (
                case.inputs[3] >= 2
                and close(got, [d / max(j, 1) for j, d in enumerate(_plain_derivatives(case))])
                and not close(got, exp)
            ),
        ),
    ),
    nudges=(
        "Reduce to one variable: g = lambda t: f(x0 + t * v) is a function of a number t, "
        "and nested grad works on it at t = 0 (pass t as np.array(0.0): t * v is then an "
        "array operation the engine records).",
        "Coefficient j is grad^j(g)(np.array(0.0)) / math.factorial(j), for j = 0..degree.",
    ),
)


# --- 6.3 a Hessian-vector product by forward-over-reverse ------------------------------------
# name -> (f written with the generic ops, Hessian as a closed form)


_GRADIENTS = {  # closed forms, only to recognise the "returned the gradient" mistake
    "0.5 x.Qx": lambda x: _Q @ x,
    "sum(tanh(x))": lambda x: 1 - np.tanh(x) ** 2,
    "exp(x0*x1) + x2^3": lambda x: np.array(
        [x[1] * math.exp(x[0] * x[1]), x[0] * math.exp(x[0] * x[1]), 3 * x[2] ** 2]
    ),
    "log(sum(exp(x)))": lambda x: np.exp(x) / np.exp(x).sum(),
}


def _is_directional(got, case) -> bool:
    """``got`` is grad f(x) · v, a number that is not 0 here (zeros would match it too)."""
    name, x, v = case.inputs
    wrong = float(_GRADIENTS[name](np.array(x)) @ np.array(v))
    return not math.isclose(wrong, 0.0, abs_tol=1e-12) and close(float(got), wrong)


def _hvp_cases(rng):
    cases = []
    for name in sorted(VECTOR_FUNCTIONS):
        x = [draw(rng, -1.5, 1.5) for _ in range(3)]
        v = [draw(rng, -1.5, 1.5) for _ in range(3)]
        cases.append(Case(f"random: {name}, x = {x}, v = {v}", (name, x, v)))
    cases += [
        Case(
            "edge: v = e_1 picks column 1 of H",
            ("exp(x0*x1) + x2^3", [0.3, -0.5, 1.2], [0.0, 1.0, 0.0]),
        ),
        Case("edge: v = 0 gives 0", ("log(sum(exp(x)))", [0.1, 0.2, 0.3], [0.0, 0.0, 0.0])),
        Case("edge: x = 0", ("sum(tanh(x))", [0.0, 0.0, 0.0], [1.0, -2.0, 0.5])),
    ]
    return cases


def _hvp_reference(inputs):
    name, x, v = inputs
    return (VECTOR_HESSIANS[name](np.array(x)) @ np.array(v)).tolist()


HVP = Exercise(
    id="6.3",
    title="A Hessian-vector product without the Hessian",
    level="trivial",
    minutes=5,
    task="hvp(f, x, v): return H(x) @ v for a scalar f, as the jvp of grad(f) along v",
    answer="hvp",
    cases=_hvp_cases,
    run=_hvp_run,
    reference=_hvp_reference,
    mistakes=(
        Mistake(
            "That is the gradient of f, not H v: jvp returns a pair (value, tangent), and "
            "the value of grad(f) at x is the gradient. Take the tangent.",
            lambda got, exp, case: (
                close(got, _GRADIENTS[case.inputs[0]](np.array(case.inputs[1])))
                and not close(got, exp)
            ),
        ),
        Mistake(
            "H v has the shape of x (one number per input). A 3x3 result is the whole "
            "Hessian: push the one direction v through grad(f) instead.",
            lambda got, exp, case: np.shape(got) == (3, 3),
        ),
        Mistake(
            "One number is the directional derivative of f (grad f · v). H v is the "
            "directional derivative of the *gradient*: jvp(grad(f), (x,), (v,)).",
            lambda got, exp, case: np.ndim(got) == 0 and _is_directional(got, case),
        ),
    ),
    nudges=("H v = d/dε grad f(x + ε v) at ε = 0: a jvp of the function grad(f).",),
    reveal="jvp(grad(f), (x,), (v,)) returns (grad f(x), H v).",
)


# --- 6.4 a forward-mode derivative without perturbation confusion --------------------------


def _tag_cases(rng):
    cases = []
    for name in TAG_PROBLEMS:
        x = draw(rng, -1.5, 1.5)
        cases.append(Case(f"{name} at x = {x}", (name, x)))
    cases.append(Case("edge: the classic, at x = 1", ("d/dx [x * d/dy (x + y)]", 1.0)))
    return cases


def _tag_reference(inputs):
    name, x = inputs
    return TAG_ANSWERS[name](x)


def _untagged_derivative(f, x):
    """The textbook mistake: every Dual shares tag 0 (one ε for all derivatives)."""
    from ...dual import Dual

    out = f(Dual(x, 1.0))
    return out.tangent if isinstance(out, Dual) else 0.0


def _is_confused(got, expected, case) -> bool:
    name, x = case.inputs
    confused = number(TAG_PROBLEMS[name](_untagged_derivative, x))
    return not close(confused, expected) and close(got, confused)


TAGGED = Exercise(
    id="6.4",
    title="A forward-mode derivative that nests",
    level="easy",  # the chapter shows tagging; what is left is a few lines with Dual
    minutes=15,
    task="derivative(f, x): df/dx with Dual(x, 1.0, tag) for a fresh tag = new_tag(); "
    "the tangent only if f(...) is a Dual with that tag, else 0.0",
    answer="derivative",
    cases=_tag_cases,
    run=_tag_run,
    own_code=True, builds_on_engine=True,  # its Dual engine only: grading/own_code.py
    reference=_tag_reference,
    mistakes=(
        Mistake(
            "This exercise is the tagging itself: build the Dual with a fresh tag yourself "
            "instead of calling a ready-made jvp (which tags for you).",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "Perturbation confusion: the inner derivative also picked up the outer one's "
            "perturbation of x (d/dx [x · d/dy (x + y)] comes out 2 instead of 1). Give "
            "every call its own tag (new_tag()) and read the tangent only from a Dual "
            "carrying *your* tag.",
            _is_confused,
        ),
    ),
    nudges=(
        "A Dual made with a fresh tag (new_tag()) carries an ε no other derivative uses.",
        "If f returns a plain number, or a Dual with another tag, f does not depend on "
        "your ε: the derivative is 0.0.",
    ),
)


EXERCISES = [NTH, TAYLOR, HVP, TAGGED]
