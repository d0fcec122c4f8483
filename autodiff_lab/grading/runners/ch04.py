"""What the student's process runs for ch04's exercises: call the answer on the inputs.

Chapter 04 exercises: tensors (np.tile's backward, matmul's backward, softmax, log-softmax,
a numerical Jacobian).

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch04`, which the student's process never imports.
"""

from __future__ import annotations

import numpy as np

from .common import as_array, error_result


def _tile_run(answer, inputs):
    """4.1: ``answer(x, g, reps)`` with ``reps`` an int or a tuple, as ``np.tile`` takes it.

    A ValueError (a reshape to the wrong number of entries) or TypeError (``len`` of an
    int ``reps``) comes back as an error record, for the grader's hints.
    """
    x, g, reps = inputs
    reps = tuple(int(r) for r in reps) if isinstance(reps, (list, tuple)) else int(reps)
    try:
        return as_array(answer(np.array(x, dtype=np.float64), np.array(g, dtype=np.float64), reps))
    except (ValueError, TypeError) as exc:
        return error_result(exc)


def _matmul_run(answer, inputs):
    a, b, g = inputs
    try:
        grad_a, grad_b = answer(a, b, g)
    except ValueError as exc:  # numpy's "matmul: mismatch in its core dimension"
        return error_result(exc)
    return [as_array(grad_a), as_array(grad_b)]


def _softmax_run(answer, inputs):
    x, axis = inputs
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return as_array(answer(x, axis))


def _logsm_run(answer, inputs):
    x, g, axis = inputs
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return as_array(answer(x, g, axis))


def _softmax(x):
    z = np.exp(x - x.max())
    return z / z.sum()


#: f: array -> array (or a number) for 4.5; plain numpy, no autodiff.
GRADCHECK_FUNCTIONS = {
    "sum(x**3)": lambda x: float(np.sum(x**3)),
    "softmax(x)": _softmax,
    "cumsum(x**2)": lambda x: np.cumsum(x**2),
    "tanh(x @ x.T)": lambda x: np.tanh(x @ x.T),
    "x * sum(x)": lambda x: x * np.sum(x),
    "sin(x)[:2] * x[-1]": lambda x: np.sin(x)[:2] * x[-1],
}


def _gradcheck_run(answer, inputs):
    name, x, h = inputs
    x = np.array(x, dtype=np.float64)
    before = x.copy()
    jacobian = as_array(answer(GRADCHECK_FUNCTIONS[name], x, h))
    if not np.array_equal(x, before):
        return {"error": "changed x", "message": "x is not the same after the call"}
    return jacobian
