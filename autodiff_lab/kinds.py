"""The kinds of numbers that carry derivatives (or batches): graph nodes and tracers.

Every module asks "is this a graph value?" or "is this a dual number?" through these
types (as minitorch's ``Variable`` protocol), never by probing for attributes.

- :class:`~autodiff_lab.graph.Node` — a value in a recorded graph
  (:class:`~autodiff_lab.Value`, :class:`~autodiff_lab.Tensor`): reverse mode walks these
  (defined with the graph core, which reads them; imported from here too).
- :class:`Tracer` — a value wrapped by one running transformation call, identified by
  its ``tag`` (a newer call has a larger tag):

  - :class:`DualNumber` — ``primal + tangent·ε`` (:class:`~autodiff_lab.Dual`): forward mode;
  - :class:`BatchedArray` — a batch of values stacked along axis 0
    (:class:`~autodiff_lab.batching.Batched`): ``vmap``.

All derive from :class:`~autodiff_lab.graph.Boxed`; plain floats and numpy arrays are none of them.
:func:`stop_gradient` (any of them as a constant) is written on these types alone. A tracer
is always the outer layer around graph nodes; among tracers, the one with the largest tag
(the innermost transformation) applies an operation first (:func:`~autodiff_lab.primitive.bind`).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import Boxed as Boxed
from .graph import Node as Node  # (imported from here too)

if TYPE_CHECKING:
    from .primitive import Primitive


class Tracer(Boxed):
    """A value wrapped by the transformation call ``tag``; ``_apply(prim, *inputs,
    **params)`` applies a primitive to inputs of which some are its own tracers."""

    __slots__ = ()
    tag: int

    @classmethod
    def _apply(cls, prim: Primitive, /, *inputs: Any, **params: Any) -> Tracer:
        raise NotImplementedError


class DualNumber(Tracer):
    """``primal + tangent·ε``, differentiating with respect to the jvp call ``tag``."""

    __slots__ = ()
    primal: Any
    tangent: Any

    def detach(self) -> DualNumber:
        """The same primal (detached too) with a zero tangent: a constant."""
        raise NotImplementedError


class BatchedArray(Tracer):
    """A batch of values ``val[0], val[1], …`` (the batch along axis 0 of ``val``) that
    the ``vmap`` call ``tag`` pushes through a function as if it were one value.

    ``shape`` is the shape of one example; ``val`` may itself hold tracers or graph
    nodes of other transformations.
    """

    __slots__ = ()
    val: Any

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one example."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype:
        raise NotImplementedError

    def constant(self) -> BatchedArray:
        """The same batch with every example's history and tangents dropped."""
        raise NotImplementedError


def is_node(x: object) -> bool:
    """True for a value of a recorded graph (a ``Value`` or a ``Tensor``)."""
    return isinstance(x, Node)


def is_tracer(x: object) -> bool:
    """True for a value wrapped by a running transformation (a dual or a batched array)."""
    return isinstance(x, Tracer)


def is_dual(x: object) -> bool:
    """True for a forward-mode dual number."""
    return isinstance(x, DualNumber)


def innermost(x: Any) -> Any:
    """The number, array or graph node at the centre of (possibly nested) dual numbers."""
    while isinstance(x, DualNumber):
        x = x.primal
    return x


def data_of(x: Any) -> Any:
    """A graph value's data; anything else as it is (a dual keeps its graph values)."""
    return x.data if isinstance(x, Node) else x


def zeros_like(x: Any) -> Any:
    """The zero of ``x``'s kind: 0.0 for a number, else zeros of its shape and dtype (one
    example's shape for a ``vmap`` batch, whose zero is the same for every example)."""
    x = constant(x)
    if isinstance(x, numbers.Number):
        return 0.0
    if isinstance(x, BatchedArray):
        return np.zeros(x.shape, x.dtype)
    return np.zeros(np.shape(x), np.result_type(x))


def constant(x: Any) -> Any:
    """The plain number or array inside any traced value, its history and tangents dropped.

    Derivative rules use it for quantities whose own derivative is zero almost
    everywhere (a relu's on/off mask, the sign of ``abs``). A batch stays a batch (each
    example keeps its own mask), with plain values inside.
    """
    while True:
        if isinstance(x, DualNumber):
            x = x.primal
        elif isinstance(x, Node):
            x = x.data
        elif isinstance(x, BatchedArray):
            return x.constant()
        else:
            return x


def as_primal(x: Any) -> Any:
    """An input as every transformation takes it, decided once: a traced value as it is;
    a Python number (or numpy scalar) as a float, for the scalar engine (``Value``);
    anything else as an array of its own float type (float32 stays float32, as in
    ``torch.func``; integers and booleans become float64), a 0-d array staying a
    0-d array (``Tensor``), so ``hessian(f)(np.array(2.))`` runs ``f`` on the same kind of
    value as ``grad(f)``."""
    if isinstance(x, Boxed):
        return x
    if isinstance(x, numbers.Real) and not isinstance(x, np.ndarray):
        return float(x)
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(float)


def stop_gradient(x: Any) -> Any:
    """``x`` as a constant: the same value, derivative zero (JAX's ``lax.stop_gradient``).

    A ``Value`` or ``Tensor`` becomes ``x.detach()`` (a new leaf holding the same data,
    cut off from the graph, as PyTorch's ``detach``); a ``Dual`` becomes ``x.detach()``
    (same primal, detached too, tangent zero); numbers and arrays are returned as they
    are; a ``vmap`` batch has every example made a constant. Lists and tuples are handled
    entry by entry. Inside ``grad``, ``jvp``, ``vjp``, ``hessian`` and ``vmap`` it blocks
    exactly what ``no_grad()`` would block for that value.
    """
    if isinstance(x, list | tuple):
        return type(x)(stop_gradient(v) for v in x)
    if isinstance(x, Node | DualNumber):
        return x.detach()
    if isinstance(x, BatchedArray):  # inside vmap: every example made a constant
        return x.constant()
    return x
