"""What the student's process runs for ch02's exercises: call the answer on the inputs.

Chapter 02 exercises: reverse mode (cost of a Jacobian, vjp, backprop by hand, topo sort).

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into
plain data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch02`, which the student's process never imports.
"""

from __future__ import annotations

from ...value import Value
from .capstones import LIBRARY_PACKAGES, library_error, provenance_problem, ready_made_parts
from .common import error_result, number


def _passes_run(answer, inputs):
    forward, reverse, cheaper = answer(*inputs)
    return [int(forward), int(reverse), str(cheaper)]


def _vjp_run(answer, inputs):
    value, cotangent_in = answer(*inputs)
    return [[number(v) for v in value], [number(c) for c in cotangent_in]]


def _manual_run(answer, inputs):
    f, grads = answer(*inputs)
    return [number(f), [number(g) for g in grads]]


def build_graph(spec):
    """Build a ``Value`` graph from ``[(name, [parent names]), ...]``; returns the last node.

    A node with no parents is a leaf, one parent makes ``tanh(parent)``, two make
    ``parent0 + parent1``. Every node's ``label`` is its name.
    """
    nodes = {}
    for k, (name, parents) in enumerate(spec):
        ps = [nodes[p] for p in parents]
        if not ps:
            node = Value(0.1 * (k % 7) - 0.3)
        elif len(ps) == 1:
            node = ps[0].tanh()
        else:
            node = ps[0] + ps[1]
        node.label = name
        nodes[name] = node
    return nodes[spec[-1][0]]


def _topo_run(answer, inputs):
    """The labels in the order ``answer(root)`` gives; the package's own sort scores nothing."""
    used = provenance_problem(answer, "topological_sort") or ready_made_parts(
        answer, banned_modules=LIBRARY_PACKAGES
    )
    if used:
        return library_error(
            used if "topological_sort" in used else f"topological_sort uses {used}; write your own"
        )
    root = build_graph(inputs[0])
    try:
        order = answer(root)
    except RecursionError as exc:
        return error_result(exc)
    return [node.label for node in order]
