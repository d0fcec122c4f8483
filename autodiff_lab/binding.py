"""Applying a primitive (:func:`bind`), and the registry of the built-in entries.

:func:`bind` applies a :class:`~autodiff_lab.primitives.Primitive` to any inputs, choosing
who computes: a tracer (``Dual``, a ``vmap`` batch) if there is one — the newest, the
largest tag — else a graph value's class (``Value``, ``Tensor``), which records the node,
else the entry's own forward on plain numbers. :data:`PRIMITIVES` maps each built-in
entry's name to it (the entries of :mod:`autodiff_lab.primitives` register themselves);
:mod:`autodiff_lab.ops` applies them by name, which is why both live below ``ops`` and the
entries above it (their rules are written with ``ops``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .kinds import Node, Tracer

if TYPE_CHECKING:
    from .primitives import Primitive

PRIMITIVES: dict[str, Primitive] = {}


def bind(prim: Primitive, *inputs, **params):
    """Apply ``prim`` to ``inputs``, recording it if any input is a graph value.

    Tracers (``Dual``, ``vmap``'s batches) are the outer layers, so they are looked for
    first; among them the newest transformation call (the largest tag) goes first. It
    unwraps its own inputs and binds again: the next layer's turn.
    """
    node = None
    for x in inputs:
        if type(x) in PLAIN_TYPES:
            continue
        if isinstance(x, Tracer):
            if len(inputs) > 1:
                x = _newest_tracer(inputs)
            return type(x)._apply(prim, *inputs, **params)
        if node is None and isinstance(x, Node):
            node = x
    if node is not None:
        return type(node)._apply(prim, *inputs, **params)
    return prim.forward(*inputs, **params)


def _newest_tracer(inputs) -> Tracer:
    """The tracer with the largest tag (of the innermost transformation)."""
    newest = None
    for x in inputs:
        if isinstance(x, Tracer) and (newest is None or x.tag > newest.tag):
            newest = x
    return newest  # type: ignore[return-value]


# never graph values: constants wherever they meet a traced value (np.bool_ too: a mask
# `x > 0` of a 0-d array is one)
PLAIN_TYPES = {float, int, bool, np.ndarray, np.float64, np.float32, np.bool_}
