"""What the student's process runs for ch03's exercises: call the answer on the inputs.

Chapter 03 exercises: micrograd from scratch (ops with their backward, planted bugs).

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch03`, which the student's process never imports.
"""

from __future__ import annotations

import numpy as np

from ...value import Value
from .common import number


def _op_run(answer, inputs):
    """Call ``answer(*args)``, then its backward closure on ``g``: [out, input grad(s)]."""
    *args, g = inputs
    out, backward = answer(*args)
    grads = backward(g)
    if isinstance(grads, list | tuple):
        return [number(out), [number(v) for v in grads]]
    return [number(out), number(grads)]


def _sigmoid_run(answer, inputs):
    """Like any op, but an overflow anywhere is an error, numpy's too: ``np.exp(800)`` only
    warns and returns inf, and 1 / (1 + inf) = 0 would hide the unstable formula."""
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            return _op_run(answer, inputs)
    except (OverflowError, FloatingPointError) as exc:
        return {"error": "OverflowError", "message": str(exc)[:200]}


def local_grads(node) -> tuple[float, ...]:
    """∂node/∂parent for each parent in ``node._prev`` (for +, *, tanh and exp nodes).

    A leaf has no parents, so it gets the empty tuple.
    """
    op, parents = node._op, node._prev
    if not parents:
        return ()
    if op == "+":
        return (1.0, 1.0)
    if op == "*":
        return (parents[1].data, parents[0].data)
    if op == "tanh":
        return (1.0 - node.data**2,)
    if op == "exp":
        return (node.data,)
    raise ValueError(f"local_grads: no rule for op {op!r} (known: +, *, tanh, exp)")


def build_expression(spec):
    """Build ``Value`` nodes from ``[("leaf", x) | (op, i) | (op, i, j), ...]``.

    ``i, j`` index earlier entries; ops are "+", "*", "tanh", "exp". Returns all nodes;
    the last one is the root.
    """
    nodes = []
    for k, (op, *args) in enumerate(spec):
        if op == "leaf":
            node = Value(args[0], label=f"x{k}")
        elif op == "+":
            node = nodes[args[0]] + nodes[args[1]]
        elif op == "*":
            node = nodes[args[0]] * nodes[args[1]]
        else:
            node = getattr(nodes[args[0]], op)()
        nodes.append(node)
    return nodes


def _leaf_indices(spec) -> list[int]:
    return [k for k, (op, *_) in enumerate(spec) if op == "leaf"]


def _driver_run(answer, inputs):
    spec = inputs[0]
    nodes = build_expression(spec)
    answer(nodes[-1], local_grads)
    return [number(nodes[k].grad) for k in _leaf_indices(spec)]


def _fit_run(answer, inputs):
    w, b = answer(*inputs)
    return [number(w), number(b)]
