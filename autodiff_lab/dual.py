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

import numpy as np

from . import primitives as P
from .primitives import bind

_tags = itertools.count(1)


def new_tag() -> int:
    """A tag no dual has used yet (one per ``jvp`` call)."""
    return next(_tags)


def _zeros_like(x):
    x = P.constant(x)
    return 0.0 if isinstance(x, numbers.Number) else np.zeros(np.shape(x), np.result_type(x))


class Dual:
    """``primal + tangent·ε``: forward-mode automatic differentiation."""

    __slots__ = ("primal", "tangent", "tag")
    __array_ufunc__ = None  # ndarray * Dual defers to Dual.__rmul__

    def __init__(self, primal, tangent=None, tag: int = 0):
        if isinstance(primal, list | tuple):
            primal = np.asarray(primal, dtype=float)
        if not (isinstance(primal, numbers.Number | np.ndarray) or hasattr(primal, "_fn")
                or isinstance(primal, Dual)):  # fmt: skip
            raise TypeError(f"Dual: primal must be a number or array, got {type(primal).__name__}")
        if isinstance(primal, numbers.Integral):
            primal = float(primal)
        if tangent is None:
            tangent = _zeros_like(primal)
        elif isinstance(tangent, list | tuple):
            tangent = np.asarray(tangent, dtype=float)
        if np.shape(P.constant(tangent)) != np.shape(P.constant(primal)):
            raise ValueError(
                f"Dual: tangent shape {np.shape(P.constant(tangent))} must equal primal shape "
                f"{np.shape(P.constant(primal))}"
            )
        self.primal, self.tangent, self.tag = primal, tangent, tag

    @classmethod
    def _new(cls, primal, tangent, tag):
        """A dual from an operation's result (already consistent: no checks needed)."""
        out = cls.__new__(cls)
        out.primal, out.tangent, out.tag = primal, tangent, tag
        return out

    @classmethod
    def _apply(cls, fn, *inputs, **params):
        """Push the primals through ``fn`` and the tangents through its jvp rules."""
        for x in inputs:
            plain = type(x) in P.PLAIN_TYPES or isinstance(x, numbers.Number)
            if plain or isinstance(x, Dual) or hasattr(x, "_fn"):
                continue
            raise TypeError(f"Dual {fn.symbol}: cannot combine a Dual with {type(x).__name__}")
        tag = max(x.tag for x in inputs if isinstance(x, Dual))
        mine = [isinstance(x, Dual) and x.tag == tag for x in inputs]
        primals = [x.primal if m else x for x, m in zip(inputs, mine)]
        try:
            out = bind(fn, *primals, **params)
        except ValueError as e:
            if any(hasattr(p, "_fn") for p in primals):  # graph values explain themselves
                raise
            shapes = " and ".join(str(np.shape(p)) for p in primals)
            raise ValueError(f"Dual {fn.symbol}: cannot apply to shapes {shapes}: {e}") from None
        tangents = [x.tangent if m else None for x, m in zip(inputs, mine)]
        tangent = fn.pushforward(tangents, out, primals, params)
        return Dual._new(out, _zeros_like(out) if tangent is None else tangent, tag)

    @property
    def shape(self) -> tuple:
        return np.shape(P.constant(self.primal))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    # arithmetic
    def __add__(self, other):
        return Dual._apply(P.ADD, self, other)

    def __radd__(self, other):
        return Dual._apply(P.ADD, other, self)

    def __sub__(self, other):
        return Dual._apply(P.SUB, self, other)

    def __rsub__(self, other):
        return Dual._apply(P.SUB, other, self)

    def __mul__(self, other):
        return Dual._apply(P.MUL, self, other)

    def __rmul__(self, other):
        return Dual._apply(P.MUL, other, self)

    def __truediv__(self, other):
        return Dual._apply(P.DIV, self, other)

    def __rtruediv__(self, other):
        return Dual._apply(P.DIV, other, self)

    def __pow__(self, other):
        if isinstance(other, numbers.Real):
            return Dual._apply(P.POW_CONST, self, exponent=other)
        return Dual._apply(P.POW, self, other)

    def __rpow__(self, other):
        return Dual._apply(P.POW, other, self)

    def __neg__(self):
        return Dual._apply(P.NEG, self)

    def __matmul__(self, other):
        return Dual._apply(P.MATMUL, self, other)

    def __rmatmul__(self, other):
        return Dual._apply(P.MATMUL, other, self)

    # comparisons look at the primal (for control flow)
    def __lt__(self, other):
        return P.constant(self) < P.constant(other)

    def __le__(self, other):
        return P.constant(self) <= P.constant(other)

    def __gt__(self, other):
        return P.constant(self) > P.constant(other)

    def __ge__(self, other):
        return P.constant(self) >= P.constant(other)

    __hash__ = object.__hash__

    # functions
    def exp(self):
        return Dual._apply(P.EXP, self)

    def log(self):
        _check_domain(self, "log", np.less(P.constant(self), 0), "x > 0")
        return Dual._apply(P.LOG, self)

    def tanh(self):
        return Dual._apply(P.TANH, self)

    def sigmoid(self):
        return Dual._apply(P.SIGMOID, self)

    def relu(self):
        return Dual._apply(P.RELU, self)

    def sin(self):
        return Dual._apply(P.SIN, self)

    def cos(self):
        return Dual._apply(P.COS, self)

    def sqrt(self):
        _check_domain(self, "sqrt", np.less(P.constant(self), 0), "x >= 0")
        return Dual._apply(P.SQRT, self)

    def abs(self):
        return Dual._apply(P.ABS, self)

    __abs__ = abs

    def softmax(self, axis=-1):
        return Dual._apply(P.SOFTMAX, self, axis=axis)

    def log_softmax(self, axis=-1):
        return Dual._apply(P.LOG_SOFTMAX, self, axis=axis)

    # arrays
    def sum(self, axis=None, keepdims=False):
        return Dual._apply(P.SUM, self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return Dual._apply(P.MEAN, self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return Dual._apply(P.MAX, self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return Dual._apply(P.RESHAPE, self, shape=shape)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return Dual._apply(P.TRANSPOSE, self, axes=tuple(axes) if axes else None)

    @property
    def T(self):  # noqa: N802
        return self.transpose()

    def broadcast_to(self, shape):
        return Dual._apply(P.BROADCAST_TO, self, shape=tuple(shape))

    def __getitem__(self, index):
        return Dual._apply(P.GETITEM, self, index=index)

    def __repr__(self) -> str:
        tag = f", tag={self.tag}" if self.tag else ""
        return f"Dual(primal={self.primal!r}, tangent={self.tangent!r}{tag})"


def _check_domain(x: Dual, op: str, bad, rule: str):
    """A clear error instead of a silent nan (as Value and Tensor do)."""
    if np.any(bad):
        primal = P.constant(x)
        if np.ndim(primal) == 0:
            raise ValueError(f"Dual {op}: {op} is defined for {rule}, got {float(primal)!r}")
        first = tuple(np.argwhere(bad)[0].tolist())
        raise ValueError(
            f"Dual {op}: {op} is defined for {rule}, but the shape-{np.shape(primal)} primal "
            f"has {float(primal[first])!r} at index {first}"
        )
