"""What the student's process runs for ch05's exercises: call the answer on the inputs.

Chapter 05 exercises: training (accuracy, cross-entropy, SGD with momentum, a Linear layer,

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch05`, which the student's process never imports.
"""

from __future__ import annotations

import numpy as np

from .common import as_array, number


def _accuracy_run(answer, inputs):
    logits, targets = inputs
    return number(answer(logits, targets))


def _ce_run(answer, inputs):
    logits, targets = inputs
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss, grad = answer(logits, targets)
    return [number(loss), as_array(grad)]


def _momentum_run(answer, inputs):
    param, grads, lr, mu = inputs
    param = np.array(param, dtype=float)
    velocity = np.zeros_like(param)
    for grad in grads:
        param, velocity = answer(param, np.array(grad, dtype=float), velocity, lr, mu)
        param, velocity = as_array(param), as_array(velocity)
    return [param, velocity]


def _linear_run(answer, inputs):
    x, w, b, g = inputs
    try:
        y, dx, dw, db = answer(x, w, b, g)
    except ValueError as exc:  # a shape mismatch inside a matmul
        return {"error": "ValueError", "message": str(exc)[:200]}
    return [as_array(y), as_array(dx), as_array(dw), as_array(db)]


def _train_run(answer, inputs):
    w, b = answer(*inputs)
    return [as_array(w), number(b)]
