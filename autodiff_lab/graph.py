"""The graph core shared by ``Value`` and ``Tensor``: what a node is, grad mode,
topological order and backpropagation.

Every graph value is a :class:`Node`: its ``data``, its ``grad``, the nodes it was computed
from (``_prev``, in argument order), the primitive that computed it (``_fn``, None for a
leaf) with its parameters (``_params``), and ``requires_grad``. (:class:`Boxed` is the base
of every value that is not a plain number or array: nodes, and the tracers of the
transformations, which are in :mod:`autodiff_lab.kinds`.)

The visualisations walk the graph with the same :func:`topological_order` that
:func:`backpropagate` runs, so what the widgets show is what ``backward()`` does. What a
graph keeps alive in memory is counted in :mod:`autodiff_lab.memory`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from .primitive import Primitive


class Boxed:
    """Base of every value that is not a plain number or array: a graph node (reverse mode),
    a dual number (forward mode) or a vmap batch — a *box* around plain values, in HIPS
    autograd's word. ``isinstance(x, Boxed)`` asks "is ``x`` not plain?" once for all three;
    a :class:`~autodiff_lab.kinds.Tracer` is the box a running ``jvp`` or ``vmap`` call
    puts around a value."""

    __slots__ = ()


class Node(Boxed):
    """A value in a recorded graph. What the graph core reads:

    - ``data``: what it computed; ``grad``: its accumulated gradient;
    - ``_prev``: the nodes it was computed from, in argument order;
    - ``_fn``: the primitive that computed it (None for a leaf) and ``_params``: that
      primitive's keyword parameters (or None);
    - ``requires_grad``: whether gradients flow into it; ``label``: a name for drawings.
    """

    __slots__ = ()
    data: Any
    grad: Any
    _prev: tuple[Node, ...]
    _fn: Primitive | None
    _params: dict[str, Any] | None
    requires_grad: bool
    label: str

    @classmethod
    def _apply(cls, prim: Primitive, /, *inputs: Any, **params: Any) -> Node:
        """``prim`` applied to ``inputs`` (some of them nodes of this class), recorded."""
        raise NotImplementedError

    @property
    def _op(self) -> str:
        """The operation's symbol (``'+'``, ``'tanh'``…), ``''`` for a leaf (as micrograd)."""
        return "" if self._fn is None else self._fn.op(self._params)

    def detach(self) -> Node:
        """The same data as a new leaf, cut off from the graph."""
        raise NotImplementedError


class _GradMode:
    enabled = True


def is_grad_enabled() -> bool:
    """False inside ``with no_grad():``."""
    return _GradMode.enabled


@contextmanager
def grad_mode(enabled: bool) -> Iterator[None]:
    """Record graphs (``True``) or not (``False``) inside the block; the mode before after."""
    previous = _GradMode.enabled
    _GradMode.enabled = enabled
    try:
        yield
    finally:
        _GradMode.enabled = previous


def no_grad() -> AbstractContextManager[None]:
    """Compute without recording a graph (evaluation, optimizer updates)."""
    return grad_mode(False)


class _OuterGraph:
    """``with outer_graph:`` runs a function that may close over graph values made around
    it: an outer reverse-mode transformation's, the leaves that stand for an outer jvp's
    duals (forward over reverse), linearize's recorded tangents. Inside (``depth > 0``), a
    reverse-mode transformation records its backward pass as a graph (create_graph) and
    returns graph values, since dropping the graph would silently make those values
    constants (``grad(lambda x: x * grad(lambda y: x * y)(1.0))(2.0)`` is 4, not 2)."""

    depth = 0

    def __enter__(self) -> None:
        _OuterGraph.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        _OuterGraph.depth -= 1


outer_graph = _OuterGraph()


def enable_grad() -> AbstractContextManager[None]:
    """Record again inside ``no_grad()`` (PyTorch's ``enable_grad``; checkpoint's
    recomputation and linearize's tangent graph need it when run under ``no_grad``)."""
    return grad_mode(True)


def topological_order(root: Node) -> list[Node]:
    """All nodes ``root`` depends on, each listed after every node it was computed from.

    Depth-first search with an explicit stack (no recursion, so a chain of a million
    operations is fine). The first time a node is popped it is *visited*: a leaf is placed
    in the order at once; a node with parents goes back on the stack under a marker, its
    parents above it. When the marker comes off, every parent has been placed: the node
    under it is placed next. A node popped again after its visit is skipped. Parents are
    visited in ``_prev`` order, so the order is the same every run, and the same as the
    recursive version's.
    """
    order = []
    visited = set()
    marker = _PARENTS_PLACED
    stack = [root]
    while stack:
        node = stack.pop()
        if node is marker:  # the node under the marker is ready
            order.append(stack.pop())
        elif node not in visited:
            visited.add(node)
            parents = node._prev
            if parents:
                stack.append(node)
                stack.append(marker)
                stack.extend(reversed(parents))  # reversed: the first parent is done first
            else:
                order.append(node)
    return order


_PARENTS_PLACED = Node()  # the marker topological_order pushes over a node it has visited


class BackwardTrace(Protocol):
    """What :func:`backpropagate` reports as it runs (the BackwardStepper records it)."""

    def visit(self, node: Node, grad: Any) -> None:
        """``node``'s turn has come; ``grad`` is its complete gradient (None: none reached it)."""

    def share(self, node: Node, position: int, share: Any, before: Any, after: Any) -> None:
        """``node`` sent ``share`` to input ``position``: its gradient ``before`` -> ``after``."""


def backpropagate(
    root: Node,
    seed: Any,
    *,
    create_graph: bool = False,
    accumulate: bool = True,
    wanted: Iterable[Node] = (),
    trace: BackwardTrace | None = None,
) -> dict[Node, Any]:
    """Run every node's pullback in reverse topological order.

    ``seed`` is d root / d root (1 for a scalar). Each node's gradient is complete when
    its turn comes, because every node that uses it comes later in topological order and
    so has already been processed. The node's primitive then passes a share to each
    parent (:meth:`~autodiff_lab.primitives.Primitive.pullback`: ``upstream gradient x
    local derivative``); a parent used twice receives two shares, which add up.

    With ``accumulate`` each node's ``.grad`` is increased by its gradient (so gradients
    add up across calls, as in PyTorch). Gradients of the nodes in ``wanted`` are also
    returned in a dict. With ``create_graph`` the rules run on the nodes themselves, so
    the gradients are new graph values that can be differentiated again. ``trace`` is
    told every step (the steppers show them).
    """
    wanted = set(wanted)
    found = {}
    pending = {root: seed}  # gradients received so far, for nodes not yet processed
    for node in reversed(topological_order(root)):
        g = pending.pop(node, None)
        if type(g) is np.ndarray and g.dtype != node.data.dtype:  # float32 stays float32
            g = g.astype(node.data.dtype)
        if trace is not None:
            trace.visit(node, g)
        if g is None:  # no gradient reaches this node
            continue
        if accumulate:
            node.grad = g if node.grad is None else node.grad + g
        if wanted and node in wanted:
            found[node] = g
        fn = node._fn
        if fn is None:  # a leaf: nothing further back
            continue
        parents = node._prev
        # The rules see the values (or, to record the backward pass as a graph, the nodes
        # themselves); node._params holds the primitive's keyword parameters (axis=...).
        if len(parents) == 2:  # (most nodes: spelled out, quicker than a comprehension)
            a, b = parents
            values, wanted_by = [a.data, b.data], [a.requires_grad, b.requires_grad]
        else:
            values, wanted_by = [p.data for p in parents], [p.requires_grad for p in parents]
        out, inputs = (node, parents) if create_graph else (node.data, values)
        shares = fn.pullback(g, out, inputs, node._params or _NO_PARAMS, wanted_by)
        for position, share in enumerate(shares):
            if share is not None:
                parent = parents[position]
                received = pending.get(parent)
                pending[parent] = total = share if received is None else received + share
                if trace is not None:
                    trace.share(node, position, share, received, total)
    return found


_NO_PARAMS: dict[str, Any] = {}
