"""``Value``: a scalar that remembers how it was computed (reverse mode, micrograd-style).

Each operation returns a new ``Value`` holding the result, the values it came from
(``_prev``) and the primitive that made it (``_fn``). ``backward()`` then walks that record
in reverse, applying each primitive's local derivative rule (see
:mod:`autodiff_lab.primitives`).

Compatible with Karpathy's micrograd: ``.data``, ``.grad``, ``._prev``, ``._op``, ``.label``
and ``.backward()`` mean the same. Differences, all deliberate: ``_prev`` is a tuple in
argument order (micrograd's set changes order from run to run); the graph walk is
iterative (no recursion limit); ``grad`` starts as the float ``0.0``; nodes hold no
closures, so a finished graph is freed at once instead of waiting for the garbage
collector.

Every node keeps its ``.grad`` after ``backward()`` (as in micrograd; PyTorch keeps only
the leaves'). Calling ``backward()`` again adds to every ``.grad``: zero them first.

From chapter 03 (and micrograd) to this package:

==================================  ===================================================
chapter 03 / micrograd              here
==================================  ===================================================
``class Value``: ``data``,          :class:`Value` (this file): the same attributes
``grad``, ``_prev``, ``_op``,
``label``
``out._backward``, the closure      ``_fn`` (the op's primitive) and ``_ctx`` (its
each op sets (``add``, ``mul``,     parameters); the primitive's ``vjp`` rules
``unary`` for ``tanh``, ``exp``,    (``primitives.py``: one entry per op, applied by
``**``)                             ``Primitive.pullback``) compute ``upstream grad ×
                                    local derivative`` when backward reaches the node.
                                    No closure is stored: a closure refers to ``out``,
                                    which holds it, a reference cycle per node left
                                    for the garbage collector
``a + b``, ``a * b``, ``x.tanh()``  ``Value.__add__``, ``__mul__`` (this file), and
…                                   ``x.tanh()`` … (``methods.py``: one line each,
                                    applying the op's entry)
``topological_order`` /             :func:`autodiff_lab.graph.topological_order`
micrograd's ``build_topo``          (``graph.py``; iterative, deterministic)
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
from typing import Any

from . import graph
from . import primitives as P
from .kinds import Node, is_dual
from .methods import FunctionMethods


def _as_number(x, op: str):
    """A Python float from an int/float/numpy scalar, or a clear TypeError."""
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


def _as_value(x, op: str):
    """A number as a constant Value; ``NotImplemented`` for a forward-mode Dual, so
    that ``Value * Dual`` is handled by ``Dual.__rmul__`` (the dual is the outer layer)."""
    if is_dual(x):
        return NotImplemented
    return Value(_as_number(x, op))


class Value(Node, FunctionMethods):
    """A scalar in a recorded computation. ``Value(2.0) * Value(3.0)`` records a ``*`` node."""

    __slots__ = ("data", "grad", "_prev", "_fn", "_ctx", "label")
    requires_grad = True  # every Value takes part in backward, as in micrograd

    def __init__(self, data: Any, _children: Any = (), _op: str = "", label: str = "") -> None:
        self.data = data if type(data) is float else _as_number(data, "constructor")
        self.grad = 0.0
        self._prev = tuple(_children)
        self._fn = _primitive_for_symbol(_op, len(self._prev)) if _op else None
        self._ctx = None
        self.label = label

    @classmethod
    def _result(
        cls, data: float, parents: tuple, fn: P.Primitive, ctx: dict | None = None
    ) -> Value:
        """A new node for the output of ``fn`` (no history inside ``no_grad()``)."""
        out = cls.__new__(cls)
        out.data = data
        out.grad = 0.0
        out.label = ""
        if graph._GradMode.enabled:
            out._prev, out._fn, out._ctx = parents, fn, ctx
        else:
            out._prev, out._fn, out._ctx = (), None, None
        return out

    @classmethod
    def _apply(cls, fn: P.Primitive, *inputs: Any, **params: Any) -> Value:
        """Apply any primitive (used by generic code such as derivative rules)."""
        inputs = tuple(x if isinstance(x, Value) else Value(_as_number(x, fn.name)) for x in inputs)
        if fn.domain.outside is not None:
            P.check_domain(fn, "Value", inputs[0].data, scalar=True, label=inputs[0].label)
        data = fn.forward(*(x.data for x in inputs), **params)
        return cls._result(data, inputs, fn, params or None)

    @property
    def _op(self) -> str:
        """The operation's symbol (``'+'``, ``'tanh'``…), ``''`` for a leaf (as micrograd)."""
        return "" if self._fn is None else self._fn.op(self._ctx)

    # --- arithmetic: each builds its output node; the rules live in primitives.py ------

    def __add__(self, other: Any) -> Value:
        other = other if isinstance(other, Value) else _as_value(other, "+")
        if other is NotImplemented:
            return other
        return Value._result(self.data + other.data, (self, other), P.ADD)

    def __mul__(self, other: Any) -> Value:
        other = other if isinstance(other, Value) else _as_value(other, "*")
        if other is NotImplemented:
            return other
        return Value._result(self.data * other.data, (self, other), P.MUL)

    def __sub__(self, other: Any) -> Value:
        other = other if isinstance(other, Value) else _as_value(other, "-")
        if other is NotImplemented:
            return other
        return Value._result(self.data - other.data, (self, other), P.SUB)

    def __truediv__(self, other: Any) -> Value:
        other = other if isinstance(other, Value) else _as_value(other, "/")
        if other is NotImplemented:
            return other
        if other.data == 0:
            raise ZeroDivisionError(f"Value /: division by zero ({self!r} / {other!r})")
        return Value._result(self.data / other.data, (self, other), P.DIV)

    def __pow__(self, other: Any) -> Value:
        if isinstance(other, Value):  # a Value exponent is differentiated too
            if self.data <= 0:
                raise ValueError(
                    f"Value **: a Value exponent needs a positive base (d/db a^b = a^b log a), "
                    f"got base {self.data!r}"
                )
            return Value._result(self.data**other.data, (self, other), P.POW)
        if is_dual(other):
            return NotImplemented
        exponent = _as_number(other, "**")
        if self.data == 0 and exponent < 0:
            raise ZeroDivisionError(f"Value **: 0 raised to the negative power {exponent:g}")
        return Value._result(self.data**exponent, (self,), P.POW_CONST, {"exponent": exponent})

    def __neg__(self) -> Value:
        return Value._result(-self.data, (self,), P.NEG)

    def __radd__(self, other: Any) -> Value:  # other + self
        return Value(_as_number(other, "+")) + self

    def __rmul__(self, other: Any) -> Value:  # other * self
        return Value(_as_number(other, "*")) * self

    def __rsub__(self, other: Any) -> Value:  # other - self
        return Value(_as_number(other, "-")) - self

    def __rtruediv__(self, other: Any) -> Value:  # other / self
        return Value(_as_number(other, "/")) / self

    def __rpow__(self, other: Any) -> Value:  # other ** self
        return Value(_as_number(other, "**")) ** self

    # --- functions: exp, log, tanh, relu… come from the primitive table (methods.py) ----

    def _unary(self, fn: P.Primitive) -> Value:
        """Apply an elementwise primitive (``x.exp()``, ``x.tanh()``…)."""
        if fn.domain.outside is not None:
            P.check_domain(fn, "Value", self.data, scalar=True, label=self.label)
        return Value._result(fn.forward(self.data), (self,), fn)

    # --- many scalars at once ------------------------------------------------------------

    @staticmethod
    def sum(values: Any, start: Any = 0.0) -> Value:
        """``start + v1 + ... + vn`` recorded as one ``Σ`` node (each input's gradient: 1)."""
        values = [v if isinstance(v, Value) else Value(_as_number(v, "sum")) for v in values]
        if start != 0.0:
            values.append(start if isinstance(start, Value) else Value(_as_number(start, "sum")))
        data = P._sum_numbers([v.data for v in values])
        return Value._result(data, tuple(values), P.ADD_N)

    @staticmethod
    def dot(ws: Any, xs: Any) -> Value:
        """``w1*x1 + ... + wn*xn`` as one node: d/dwi = xi, d/dxi = wi (a neuron's core)."""
        ws = [w if isinstance(w, Value) else Value(_as_number(w, "dot")) for w in ws]
        xs = [x if isinstance(x, Value) else Value(_as_number(x, "dot")) for x in xs]
        if len(ws) != len(xs):
            raise ValueError(f"Value.dot: {len(ws)} weights but {len(xs)} inputs")
        data = P._sum_numbers([w.data * x.data for w, x in zip(ws, xs)])
        return Value._result(data, (*ws, *xs), P.DOT)

    # --- comparisons: plain bools on .data, for Python control flow (`if x > 0:`) ------
    # (== is left as identity, so a Value can be a dict key.)

    def __lt__(self, other: Any) -> bool:
        return self.data < (other.data if isinstance(other, Value) else other)

    def __le__(self, other: Any) -> bool:
        return self.data <= (other.data if isinstance(other, Value) else other)

    def __gt__(self, other: Any) -> bool:
        return self.data > (other.data if isinstance(other, Value) else other)

    def __ge__(self, other: Any) -> bool:
        return self.data >= (other.data if isinstance(other, Value) else other)

    __hash__ = object.__hash__

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


def _primitive_for_symbol(op: str, arity: int):
    """Map micrograd-style ``Value(x, (a, b), '+')`` to its primitive."""
    for prim in P.PRIMITIVES.values():
        if op in (prim.symbol, prim.name) and (not prim.vjp or len(prim.vjp) == arity):
            return prim
    if op.startswith("**"):
        raise ValueError("Value: build powers with `a ** 2`, not Value(..., _op='**2')")
    raise ValueError(f"Value: unknown operation {op!r} (known: {sorted(P.PRIMITIVES)})")
