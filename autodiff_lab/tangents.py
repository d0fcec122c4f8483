"""Forward mode over a recorded graph: replay it with dual numbers.

A reverse-mode transformation (``grad``, ``vjp``, ``jacrev``) run with
``create_graph`` returns its result *as a graph*: every gradient is a node computed, op by
op, from the input leaves. To push a tangent through that result (forward-over-reverse,
e.g. a Hessian-vector product ``H v = d/dε grad f(x + ε v)``) we do not need a second
engine: we *replay* the recorded graph, evaluating each node's primitive again with the
leaf replaced by a :class:`~autodiff_lab.Dual` ``x + v ε``. Every primitive knows its
``jvp`` rules, so the replay carries the tangent along; nodes that do not depend on the
replaced leaf keep the value they already hold and are not recomputed.

One replay costs about one evaluation of the recorded graph, so ``H v`` costs a small
constant times ``f`` — without ever forming ``H``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .dual import Dual
from .graph import topological_order
from .kinds import BatchedArray, Node, is_node
from .primitive import bind
from .types import Operand, Tree


def replay(
    outputs: Tree, substitutions: Mapping[Node, Operand], cache: dict[Node, Operand] | None = None
) -> Tree:
    """Re-evaluate the graph behind ``outputs`` with ``substitutions`` (node -> new value).

    ``outputs`` is a graph node, a plain value, or a (nested) tuple/list of them; the
    result has the same structure, every node replaced by its re-evaluated value. Nodes in
    topological order: a node whose inputs all kept their values keeps its own
    (``node.data``); otherwise its primitive runs again on the new inputs (``bind`` picks
    the dual-number rules when an input is a ``Dual``).

    When a substituted value wraps a graph node (forward mode over a graph that is itself
    being differentiated), unchanged nodes are passed on as nodes, so the replay records
    onto that graph instead of dropping it. ``cache`` (node -> new value) may be shared
    between calls that use the same substitutions.
    """
    changed = {} if cache is None else cache
    changed.update(substitutions)
    keep_graph = any(_holds_node(v) for v in substitutions.values())

    def unchanged(node: Node) -> Operand:
        return node if keep_graph else node.data

    def new_value(out: Tree) -> Tree:
        if isinstance(out, tuple | list):
            return type(out)(new_value(o) for o in out)
        if isinstance(out, Dual):  # graphs inside a dual (f closed over a jvp's dual):
            # p + t·ε with both parts replayed (each may now move: ε² = 0 adds them up)
            primal, tangent = new_value(out.primal), new_value(out.tangent)
            return primal + tangent * Dual(0.0, 1.0, out.tag)
        if isinstance(out, BatchedArray):  # a batch of graph values: each one replayed
            # (kinds.BatchedArray declares no constructor; its class, Batched, takes val, tag)
            return type(out)(new_value(out.val), out.tag)  # type: ignore[call-arg]
        if not is_node(out):
            return out
        for node in topological_order(out):
            if node in changed or node._fn is None:
                continue
            if any(p in changed for p in node._prev):
                inputs = [changed[p] if p in changed else unchanged(p) for p in node._prev]
                changed[node] = bind(node._fn, *inputs, **(node._params or {}))
        return changed[out] if out in changed else unchanged(out)

    return new_value(outputs)


def _holds_node(x: Operand) -> bool:
    """Whether a graph node is inside ``x`` (a dual's primal or tangent, at any depth): a
    tangent being recorded (``linearize``) counts as much as a primal."""
    if isinstance(x, Dual):
        return _holds_node(x.primal) or _holds_node(x.tangent)
    return is_node(x)
