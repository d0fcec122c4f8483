"""What the student's process runs for ch01's exercises: call the answer on the inputs.

Chapter 01 exercises: forward mode (dual numbers, jvp, a Jacobian column).

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch01`, which the student's process never imports.
"""

from __future__ import annotations

import numpy as np

from ... import ops
from .common import as_array, number


def _pair(out) -> list[float]:
    """``[primal, tangent]`` from a pair or a Dual."""
    if hasattr(out, "primal") and hasattr(out, "tangent"):
        return [number(out.primal), number(out.tangent)]
    primal, tangent = out
    return [number(primal), number(tangent)]


def _mul_run(answer, inputs):
    a, da, b, db = inputs
    return _pair(answer((a, da), (b, db)))


def _sin_run(answer, inputs):
    return _pair(answer(tuple(inputs)))


def _jvp_run(answer, inputs):
    value, tangent = answer(*inputs)
    return [[number(v) for v in value], [number(t) for t in tangent]]


_MIX = np.array([[2.0, -1.0, 0.5, 0.0], [0.0, 1.0, 3.0, -2.0], [1.0, 0.0, -1.0, 4.0],
                 [0.5, 2.0, 0.0, 1.0]])  # fmt: skip


def _scaled_by_sum(x):
    """f(x) = x · Σx"""
    return x * ops.sum(x)


def _sin_times_first(x):
    """f(x) = sin(x) · x₀ + x"""
    return ops.sin(x) * x[0] + x


def _mix_then_tanh(x):
    """f(x) = tanh(M x) for a fixed 4×4 matrix M"""
    n = ops.shape(x)[0]
    return ops.tanh(_MIX[:n, :n] @ x)


JACOBIAN_FUNCTIONS = {
    "x * sum(x)": _scaled_by_sum,
    "sin(x) * x[0] + x": _sin_times_first,
    "tanh(M @ x)": _mix_then_tanh,
}


def _column_run(answer, inputs):
    name, x, j = inputs
    column = answer(JACOBIAN_FUNCTIONS[name], np.asarray(x, dtype=np.float64), j)
    return as_array(column)


def _heron_run(answer, inputs):
    a, steps = inputs
    return _pair(answer(a, steps))
