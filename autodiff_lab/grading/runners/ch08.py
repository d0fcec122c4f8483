"""What the student's process runs for ch08's exercises: call the answer on the inputs.

Chapter 08 exercises: per-example gradient norms, a batching rule, transposing a linear
program.

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch08`, which the student's process never imports.
"""

from __future__ import annotations

import gc
import sys

import numpy as np

from ... import ops
from .common import as_array


def mlp_sizes(theta_size: int, d: int) -> int:
    """The hidden width h of :func:`mlp_loss` for a parameter vector of ``theta_size``
    entries and ``d`` inputs: ``theta_size = h*d + h + h + 1``."""
    h, rest = divmod(theta_size - 1, d + 2)
    if rest:
        raise ValueError(f"mlp_loss: {theta_size} parameters do not fit d = {d} inputs")
    return h


def mlp_loss(theta, x, y):
    """The squared error of a one-hidden-layer tanh network on ONE example.

    ``theta`` is one flat vector ``[W1 (h×d, row by row), b1 (h), w2 (h), b2]``,
    ``x`` one input of shape (d,), ``y`` one target number:
    ``loss = ½ (w2 · tanh(W1 x + b1) + b2 − y)²``.
    """
    d = ops.shape(x)[-1]
    h = mlp_sizes(ops.shape(theta)[0], d)
    W1 = ops.reshape(theta[: h * d], (h, d))
    b1 = theta[h * d : h * d + h]
    w2 = theta[h * d + h : h * d + 2 * h]
    b2 = theta[h * d + 2 * h]
    hidden = ops.tanh(W1 @ x + b1)
    prediction = ops.sum(w2 * hidden) + b2
    error = prediction - y
    return 0.5 * error * error


def _norms_run(answer, inputs):
    theta, X, Y = inputs
    norms = answer(mlp_loss, np.array(theta), np.array(X), np.array(Y))
    return as_array(norms).tolist()


def lines_run(fn, *args):
    """``(fn(*args), the number of Python lines executed meanwhile)``, by ``sys.settrace``.

    Lines, not calls: a loop body of slot operations (``acc += x[i]``) calls no function,
    but each pass runs its lines. The tracer that was set before (a debugger, coverage) is
    put back afterwards. The garbage collector is paused meanwhile: a collection that
    finalizes another test's or cell's objects (a suspended generator closed, say) runs
    Python lines that are not ``fn``'s (a right answer once counted as a loop that way).
    """
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous, collecting = sys.gettrace(), gc.isenabled()
    gc.disable()
    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(previous)
        if collecting:
            gc.enable()
    return result, count


#: How many times the batch is repeated for the loop probe.
LOOP_PROBE_COPIES = 8


def _batch_sum_run(answer, inputs):
    """The student's ``(out, out_bdim)``, with the batch axis moved to the front, and whether
    the rule loops over the examples: run again on the batch repeated 8 times, a rule without
    a loop runs the same Python lines, one with a loop runs more."""
    x, bdim, axis = inputs
    (out, out_bdim), lines = lines_run(answer, np.array(x), bdim, axis)
    bigger = np.concatenate([np.array(x)] * LOOP_PROBE_COPIES, axis=bdim)
    _, more_lines = lines_run(answer, bigger, bdim, axis)
    loops = more_lines > lines + 2
    out = as_array(out)
    if not isinstance(out_bdim, int | np.integer) or not -out.ndim <= out_bdim < out.ndim:
        return {"shape": list(out.shape), "out_bdim": repr(out_bdim), "values": None, "loop": loops}
    moved = np.moveaxis(out, int(out_bdim), 0)
    return {"shape": list(moved.shape), "out_bdim": "ok", "values": moved.tolist(), "loop": loops}


def _transpose_run(answer, inputs):
    program, input_sizes, cotangent = inputs
    try:
        got = answer(program, dict(input_sizes), np.array(cotangent))
    except ValueError as exc:  # a matrix product of mismatched shapes, most often
        return {"error": "ValueError", "message": str(exc)[:200]}
    if not isinstance(got, dict):
        return {"not a dict": type(got).__name__}
    return {str(k): as_array(v).tolist() for k, v in got.items()}
