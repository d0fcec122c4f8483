"""``Value``: a scalar that remembers how it was computed (reverse mode, micrograd-style).

Each operation returns a new ``Value`` holding the result, the values it came from
(``_prev``) and the primitive that made it (``_fn``). ``backward()`` then walks that record
in reverse, applying each primitive's local derivative rule (see
:mod:`autodiff_lab.primitive`).

Compatible with Karpathy's micrograd: ``.data``, ``.grad``, ``._prev``, ``._op``, ``.label``
and ``.backward()`` mean the same. Differences, all deliberate: ``_prev`` is a tuple in
argument order (micrograd's set changes order from run to run); the graph walk is
iterative (no recursion limit); ``grad`` starts as the float ``0.0``; nodes hold no
closures, so a finished graph is freed at once instead of waiting for the garbage
collector.

Every node keeps its ``.grad`` after ``backward()`` (as in micrograd; PyTorch keeps only
the leaves'). Calling ``backward()`` again adds to every ``.grad``: zero them first.

From chapter 03.1 (and micrograd) to this package — three files to read, in this order:
``value.py`` (this file), ``primitive.py``, ``graph.py``:

==================================  ===================================================
chapter 03 / micrograd              here
==================================  ===================================================
``class Value``: ``data``,          :class:`Value` (this file): the same attributes;
``grad``, ``_prev``, ``_op``,       :meth:`Value._apply` is the one way a node is made
``label``                           (inputs, domain check, forward, record)
``a + b``, ``a * b``, ``x.tanh()``  ``NumberMethods.__add__``, ``__mul__``, ``tanh``…
…                                   (``primitive.py``, shared with ``Tensor`` and
                                    ``Dual``): each applies the op's entry with
                                    ``Value._apply``
``out._backward``, the closure      ``_fn`` (the op's primitive) and ``_params`` (its
each op sets (``add``, ``mul``,     parameters); the primitive's ``vjp`` rules
``unary`` for ``tanh``, ``exp``,    (``ADD``, ``MUL``, ``POW_CONST`` in ``primitive.py``;
``**``)                             ``TANH``, ``EXP``, ``RELU`` in ``primitives.py``),
                                    applied by ``Primitive.pullback``, compute
                                    ``upstream grad × local derivative`` when backward
                                    reaches the node. No closure is stored: a closure
                                    refers to ``out``, which holds it, a reference
                                    cycle per node left for the garbage collector
``topological_order`` (chapter 03   :func:`autodiff_lab.graph.topological_order`
imports chapter 02's) / micrograd's (``graph.py``; iterative, deterministic)
``build_topo``
the loop in ``backward()`` that     :func:`autodiff_lab.graph.backpropagate`
calls each ``_backward``            (``graph.py``); its ``pending`` dict keeps each
                                    pass's gradients apart, so a second ``backward()``
                                    adds one more gradient instead of passing stale
                                    inner ones on
``zero_grad``                       :meth:`Value.zero_grad` (this file)
==================================  ===================================================
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from . import graph, primitives
from . import primitive as P
from .graph import Node
from .primitive import EVERYWHERE

Operand = Any  # what an operator accepts: a Value, a number, or a tracer (which then drives)


def _as_number(x: Any, op: str) -> float:
    """A Python float from an int/float/numpy scalar, or a clear TypeError."""
    if type(x) is float or type(x) is int:  # (the usual cases, tested first: quicker)
        return float(x)
    if isinstance(x, numbers.Real):
        return float(x)
    shape = getattr(x, "shape", None)
    if shape == ():
        return float(x)
    what = f"array of shape {shape}" if shape is not None else f"{type(x).__name__} {x!r}"
    raise TypeError(
        f"Value {op}: expected a number (int or float) or a Value, got {what}. "
        "Use Tensor for arrays."
    )


def _constant(x: Any, fn: P.Primitive) -> Value:
    """A number met by ``fn`` as a constant Value (``a * 3``: the 3)."""
    out = Value.__new__(Value)  # (no constructor call: a constant is made per operation)
    out.data, out.grad, out.label = _as_number(x, fn.symbol), 0.0, ""
    out._prev, out._fn, out._params = (), None, None
    return out


class Value(Node, P.NumberMethods):
    """A scalar in a recorded computation. ``Value(2.0) * Value(3.0)`` records a ``*`` node."""

    __slots__ = ("data", "grad", "_prev", "_fn", "_params", "label")
    requires_grad = True  # every Value takes part in backward, as in micrograd

    def __init__(
        self, data: Any, _children: Iterable[Value] = (), _op: str = "", label: str = ""
    ) -> None:
        self.data = data if type(data) is float else _as_number(data, "constructor")
        self.grad = 0.0
        self._prev: tuple[Value, ...] = tuple(_children)
        self._fn = _primitive_for_symbol(_op, len(self._prev)) if _op else None
        self._params = None
        self.label = label

    @classmethod
    def _apply(cls, fn: P.Primitive, /, *inputs: Any, **params: Any) -> Value:
        """The one way a node is made: ``fn`` applied to ``inputs`` (numbers become
        constant Values), checked against its domain, recorded (not inside ``no_grad()``)."""
        for x in inputs:
            if type(x) is not Value:  # numbers become constant Values
                inputs = tuple([v if isinstance(v, Value) else _constant(v, fn) for v in inputs])
                break
        if fn.domain is not EVERYWHERE:
            x = inputs[fn.domain.arg]
            P.check_domain(fn, "Value", x.data, scalar=True, label=x.label)
        out = cls.__new__(cls)
        # The forward on the inputs' numbers. Most operations have one or two inputs and no
        # parameters: those calls are spelled out, since building a list of the numbers
        # would cost about as much as the whole operation.
        if len(inputs) == 2 and not params:
            out.data = fn.forward(inputs[0].data, inputs[1].data)
        elif len(inputs) == 1:  # (x ** 2 has a parameter, the exponent)
            number = inputs[0].data
            out.data = fn.forward(number, **params) if params else fn.forward(number)
        else:
            out.data = fn.forward(*[x.data for x in inputs], **params)
        out.grad = 0.0
        out.label = ""
        if graph._GradMode.enabled:
            out._prev, out._fn, out._params = inputs, fn, params or None
        else:
            out._prev, out._fn, out._params = (), None, None
        return out

    # --- arithmetic and functions (a * b, x.tanh()…): NumberMethods, in primitive.py ------

    # --- many scalars at once ------------------------------------------------------------

    @staticmethod
    def sum(values: Iterable[Operand], start: Operand = 0.0) -> Value:
        """``start + v1 + ... + vn`` recorded as one ``Σ`` node (each input's gradient: 1)."""
        values = list(values)
        if start != 0.0:
            values.append(start)
        return Value._apply(primitives.ADD_N, *values)

    @staticmethod
    def dot(ws: Iterable[Operand], xs: Iterable[Operand]) -> Value:
        """``w1*x1 + ... + wn*xn`` as one node: d/dwi = xi, d/dxi = wi (a neuron's core)."""
        ws, xs = list(ws), list(xs)
        if len(ws) != len(xs):
            raise ValueError(f"Value.dot: {len(ws)} weights but {len(xs)} inputs")
        return Value._apply(primitives.DOT, *ws, *xs)

    def __float__(self) -> float:
        return float(self.data)

    # --- autodiff --------------------------------------------------------------------

    def backward(self, create_graph: bool = False) -> None:
        """Fill ``.grad`` of every node this value depends on with d self / d node.

        Gradients add up across calls. With ``create_graph=True`` the gradients are
        themselves ``Value`` nodes (differentiable again, e.g. for a second derivative).
        """
        seed = Value(1.0) if create_graph else 1.0
        graph.backpropagate(self, seed, create_graph=create_graph)

    def detach(self) -> Value:
        """The same number as a new leaf, cut off from the graph."""
        return Value(self.data, label=self.label)

    def zero_grad(self) -> None:
        """Set the gradient of this node and every node it depends on back to 0."""
        for node in graph.topological_order(self):
            node.grad = 0.0

    def __repr__(self) -> str:
        return f"Value(data={self.data}, grad={self.grad})"


def _primitive_for_symbol(op: str, arity: int) -> P.Primitive:
    """Map micrograd-style ``Value(x, (a, b), '+')`` to its primitive."""
    for prim in P.PRIMITIVES.values():  # (every entry: primitives.py registers the rest)
        if op in (prim.symbol, prim.name) and (not prim.vjp or len(prim.vjp) == arity):
            return prim
    if op.startswith("**"):
        raise ValueError("Value: build powers with `a ** 2`, not Value(..., _op='**2')")
    raise ValueError(f"Value: unknown operation {op!r} (known: {sorted(P.PRIMITIVES)})")
