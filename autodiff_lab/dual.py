"""``Dual``: forward mode. A number (or array) travelling with its tangent.

``Dual(x, dx)`` stands for ``x + dx·ε`` with ``ε² = 0``. Then ``f(x + dx·ε) = f(x) + f'(x)dx·ε``:
evaluating ``f`` once on a dual number gives the value *and* the directional derivative.
Each operation uses its primitive's ``jvp`` rules (:mod:`autodiff_lab.primitives`):
``tangent_out = Σ_i (d out / d input_i) · tangent_i``.

Works for floats and numpy arrays alike. Every dual carries a ``tag``: :func:`jvp` gives
each call a fresh one, and an operation only differentiates with respect to the newest tag
among its inputs, treating older duals as constants. That keeps nested derivatives apart
(without tags, ``d/dx [x · d/dy (x + y)]`` comes out 2 instead of 1: perturbation
confusion). Duals you build by hand share tag 0.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any

import numpy as np

from . import primitives as P
from .kinds import Boxed, DualNumber, constant, is_node, stop_gradient, zeros_like
from .methods import ArrayMethods, _shape
from .primitive import PLAIN_TYPES, bind
from .types import Operand, Shape

_tags = itertools.count(1)


def new_tag() -> int:
    """A tag no dual has used yet (one per ``jvp`` call)."""
    return next(_tags)


class Dual(DualNumber, ArrayMethods):
    """``primal + tangent·ε``: forward-mode automatic differentiation."""

    __slots__ = ("primal", "tangent", "tag")
    __array_ufunc__ = None  # ndarray * Dual defers to Dual.__rmul__

    def __init__(self, primal: Operand, tangent: Operand = None, tag: int = 0) -> None:
        if isinstance(primal, list | tuple):
            primal = np.asarray(primal, dtype=float)
        if not isinstance(primal, numbers.Number | np.ndarray | Boxed):
            raise TypeError(f"Dual: primal must be a number or array, got {type(primal).__name__}")
        if isinstance(primal, numbers.Integral):
            primal = float(primal)
        if tangent is None:
            tangent = zeros_like(primal)
        elif isinstance(tangent, list | tuple):
            tangent = np.asarray(tangent, dtype=float)
        if _shape(tangent) != _shape(primal):
            raise ValueError(
                f"Dual: tangent shape {_shape(tangent)} must equal primal shape {_shape(primal)}"
            )
        self.primal, self.tangent, self.tag = primal, tangent, tag

    @classmethod
    def _new(cls, primal: Operand, tangent: Operand, tag: int) -> Dual:
        """A dual from an operation's result (already consistent: no checks needed)."""
        out = cls.__new__(cls)
        out.primal, out.tangent, out.tag = primal, tangent, tag
        return out

    @classmethod
    def _apply(cls, fn: P.Primitive, *inputs: Operand, **params: Any) -> Dual:
        """Push the primals through ``fn`` and the tangents through its jvp rules."""
        for x in inputs:
            if type(x) not in PLAIN_TYPES and not isinstance(x, Boxed | numbers.Number):
                raise TypeError(f"Dual {fn.symbol}: cannot combine a Dual with {type(x).__name__}")
        tag = max(x.tag for x in inputs if isinstance(x, Dual))
        mine = [isinstance(x, Dual) and x.tag == tag for x in inputs]
        primals = [x.primal if m else x for x, m in zip(inputs, mine)]
        if fn.domain.outside is not None:
            x = constant(primals[0])
            P.check_domain(fn, "Dual", x, scalar=isinstance(x, numbers.Number))
        try:
            out = bind(fn, *primals, **params)
        except ValueError as e:
            if any(is_node(p) for p in primals):  # graph values explain themselves
                raise
            shapes = " and ".join(str(np.shape(p)) for p in primals)
            raise ValueError(f"Dual {fn.symbol}: cannot apply to shapes {shapes}: {e}") from None
        tangents = [x.tangent if m else None for x, m in zip(inputs, mine)]
        tangent = fn.pushforward(tangents, out, primals, params)
        return Dual._new(out, zeros_like(out) if tangent is None else tangent, tag)

    def detach(self) -> Dual:
        """The same primal (itself detached when it is a graph value) with a zero
        tangent: a constant for forward mode, as ``Tensor.detach`` is for reverse mode."""
        primal = stop_gradient(self.primal)
        return Dual._new(primal, zeros_like(primal), self.tag)

    @property
    def shape(self) -> Shape:
        return _shape(self.primal)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    # operators, functions, reductions, reshaping: shared with Tensor (methods.py)

    def __repr__(self) -> str:
        tag = f", tag={self.tag}" if self.tag else ""
        return f"Dual(primal={self.primal!r}, tangent={self.tangent!r}{tag})"
