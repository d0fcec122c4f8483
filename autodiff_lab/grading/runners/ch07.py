"""What the student's process runs for ch07's exercises: call the answer on the inputs.

Chapter 07 exercises: a NaN gradient fixed, a stable custom vjp, checkpointing under a
memory budget, a training run tamed by gradient clipping.

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into plain
data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch07`, which the student's process never imports.
Floating-point warnings are silenced: a NaN or an overflow is an answer to report, not a
crash.
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from ... import nn, ops, optim
from ...graph import topological_order
from ...kinds import is_node
from ...tensor import Tensor
from .common import as_array, number


def _grad_list(t: Tensor):
    return None if t.grad is None else as_array(t.grad).tolist()


# --- 7.1 a norm whose gradient is finite at 0 -------------------------------------------------


def _safe_norm_run(answer, inputs):
    (x,) = inputs
    t = Tensor(np.array(x, dtype=np.float64), requires_grad=True)
    with np.errstate(all="ignore"):
        out = answer(t)
        value = number(out)
        if is_node(out) and getattr(out, "requires_grad", True):
            out.backward()
    return {"value": value, "grad": _grad_list(t)}


# --- 7.2 a stable logsumexp with a custom vjp -------------------------------------------------


def _logsumexp_run(answer, inputs):
    x, scale = inputs
    t = Tensor(np.array(x, dtype=np.float64), requires_grad=True)
    with np.errstate(all="ignore"):
        out = answer(t)
        value = number(out)
        nodes = len(topological_order(out)) if is_node(out) else 0
        if is_node(out) and out.requires_grad:
            (scale * out).backward()  # the incoming gradient g = scale
    return {"value": value, "grad": _grad_list(t), "nodes": nodes}


# --- 7.3 checkpointing under a memory budget --------------------------------------------------


def _tanh_step(h):
    return 0.9 * ops.tanh(h) + 0.1


def _sin_step(h):
    return h + 0.1 * ops.sin(h)


#: The chains of 7.3: one step h -> step(h), written with the engine's ops.
CHAIN_STEPS = {"0.9 tanh(h) + 0.1": _tanh_step, "h + 0.1 sin(h)": _sin_step}


def _chain_run(answer, inputs):
    name, x, n = inputs
    x = np.array(x, dtype=np.float64)
    gc.collect()
    tracemalloc.start()
    try:
        grad = answer(CHAIN_STEPS[name], x, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # memory in units of one array of the chain (first: the scorecard shows it untruncated)
    return {"peak_arrays": round(peak / x.nbytes, 1), "grad": as_array(grad).tolist()}


# --- 7.4 a training run tamed by gradient clipping ---------------------------------------------


def _clipped_run(answer, inputs):
    """Train the planted network ``steps`` steps with the student's ``clipped_step``."""
    W1, b1, W2, b2, X, y, lr, max_norm, steps = inputs
    first, second = nn.Linear(len(W1), len(W1[0])), nn.Linear(len(W2), len(W2[0]))
    for layer, W, b in ((first, W1, b1), (second, W2, b2)):
        layer.W.data = np.array(W, dtype=np.float64)
        layer.b.data = np.array(b, dtype=np.float64)
    model = nn.Sequential(first, nn.Tanh(), second)
    optimizer = optim.SGD(model.parameters(), lr=lr)
    X, y = np.array(X, dtype=np.float64), np.array(y, dtype=np.float64)
    norms = []
    with np.errstate(all="ignore"):
        for _ in range(steps):
            norms.append(number(answer(model, optimizer, X, y, max_norm)))
    params = [as_array(p.data).ravel() for p in model.parameters()]
    return {"norms": norms, "params": np.concatenate(params).tolist()}
