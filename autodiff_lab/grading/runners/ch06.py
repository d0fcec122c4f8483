"""What the student's process runs for ch06's exercises: call the answer on the inputs.

Chapter 06 exercises: higher-order derivatives, Taylor coefficients, HVPs, tags.

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch06`, which the student's process never imports.
"""

from __future__ import annotations

import numpy as np

from autodiff_lab import ops  # absolute: own_code.py loads this file outside the package

from .capstones import library_error, ready_made_parts
from .common import as_array, number

SCALAR_FUNCTIONS = {
    "sin(2x)": lambda x: ops.sin(2 * x),
    "exp(-x)": lambda x: ops.exp(-x),
    "sin(x)*exp(x)": lambda x: ops.sin(x) * ops.exp(x),
    "x^5 - 3x^2": lambda x: x**5 - 3 * x**2,
}


def _nth_run(answer, inputs):
    name, x, n = inputs
    return number(answer(SCALAR_FUNCTIONS[name], n)(x))


_W = np.array([0.5, -1.0, 0.8])


def _exp_of_w_dot(x):
    return ops.exp((_W * x).sum())


def _sin_of_w_dot(x):
    return ops.sin((_W * x).sum())


def _geometric(x):
    return 1 / (1 - (0.2 * _W * x).sum())


def _squared_norm(x):
    return (x * x).sum()


def _first_times_second(x):
    return x[0] * x[1]


#: f: R^3 -> R for 6.2, written with the generic ops (they work on arrays and Tensors).
DIRECTIONAL_FUNCTIONS = {
    "exp(w.x)": _exp_of_w_dot,
    "sin(w.x)": _sin_of_w_dot,
    "1/(1 - 0.2 w.x)": _geometric,
    "x.x": _squared_norm,
    "x[0]*x[1]": _first_times_second,
}


def _taylor_run(answer, inputs):
    name, x0, v, degree = inputs
    out = answer(DIRECTIONAL_FUNCTIONS[name], np.array(x0), np.array(v), degree)
    return [number(c) for c in out]


_Q = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, -1.0], [0.0, -1.0, 4.0]])


def _quadratic(x):
    return 0.5 * (x * (_Q @ x)).sum()


def _sum_tanh(x):
    return ops.tanh(x).sum()


def _exp_product(x):
    return ops.exp(x[0] * x[1]) + x[2] ** 3


def _log_sum_exp(x):
    return ops.log(ops.exp(x).sum())


VECTOR_FUNCTIONS = {
    "0.5 x.Qx": _quadratic,
    "sum(tanh(x))": _sum_tanh,
    "exp(x0*x1) + x2^3": _exp_product,
    "log(sum(exp(x)))": _log_sum_exp,
}


def _hvp_run(answer, inputs):
    name, x, v = inputs
    return as_array(answer(VECTOR_FUNCTIONS[name], np.array(x), np.array(v))).tolist()


def _x_sin_x(derivative, x):
    return derivative(lambda t: t * ops.sin(t), x)


def _nested_sum(derivative, x):  # d/dx [x * d/dy (x + y)] = 1
    return derivative(lambda a: a * derivative(lambda y: a + y, 1.0), x)


def _nested_product(derivative, x):  # d/dx [x * d/dy (x y)] = d/dx x^2 = 2x
    return derivative(lambda a: a * derivative(lambda y: a * y, 1.0), x)


def _three_levels(derivative, x):  # d/dx [x * d/dy [y * d/dz (x y z)]] = d/dx 2x^2 = 4x
    return derivative(
        lambda a: a * derivative(lambda b: b * derivative(lambda c: a * b * c, 1.0), 1.0), x
    )


def _constant(derivative, x):  # f ignores x: the output is a plain number
    return derivative(lambda t: 3.0, x)


TAG_PROBLEMS = {
    "x sin x": _x_sin_x,
    "d/dx [x * d/dy (x + y)]": _nested_sum,
    "d/dx [x * d/dy (x y)]": _nested_product,
    "three levels: 4x": _three_levels,
    "a constant function": _constant,
}


#: 6.4 asks for the tagging that the package's jvp (and torch's, jax's) already does.
TAGGING_LIBRARIES = ("autodiff_lab.functional", "torch", "jax", "functorch")


def _tag_run(answer, inputs):
    """The nested problem's value with the student's ``derivative``; an answer that hands
    the work to a ready-made jvp (the chapter's one-liner) is a ``LibraryCode`` record."""
    used = ready_made_parts(answer, banned_modules=TAGGING_LIBRARIES)
    if used:
        return library_error(f"derivative uses {used}; tag the Dual yourself")
    name, x = inputs
    return number(TAG_PROBLEMS[name](answer, x))
