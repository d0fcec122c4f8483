"""Math functions that work on every kind of number the course uses.

``exp(x)`` is ``math.exp`` for a float, ``numpy.exp`` for an array, and the recorded
operation for a :class:`~autodiff_lab.Value`, :class:`~autodiff_lab.Tensor` or
:class:`~autodiff_lab.Dual`. So one Python function can be evaluated on plain numbers,
pushed forward with ``jvp`` and pulled back with ``grad`` without changing a line::

    def f(x: Any) -> Any:
        return tanh(x) * exp(-x)

The derivative rules in :mod:`autodiff_lab.primitives` are written with these functions
too, which is what lets a gradient be differentiated again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .kinds import Boxed
from .primitive import PRIMITIVES, bind, broadcast_to, shape, sum_to

__all__ = [
    "exp", "log", "log1p", "tanh", "sigmoid", "softplus", "relu", "sin", "cos", "sqrt", "abs",
    "sum", "mean", "max", "reshape", "transpose", "matmul", "softmax", "log_softmax",
    "where", "maximum", "minimum", "shape", "sum_to", "broadcast_to", "unbroadcast", "basis",
    "move_axis",
]  # fmt: skip


def _is_traced(x: Any) -> bool:
    """True for the course's own number types (they know how to record an op)."""
    return isinstance(x, Boxed)


# --- elementwise functions: each applies its entry of the primitive table ----------------
# (the entries, with their rules, are in primitives.py, which registers them in PRIMITIVES;
# tests/test_engine_forward.py checks that every elementwise entry has its function here)


def exp(x: Any) -> Any:
    """eˣ of a number, an array or a traced value."""
    return bind(PRIMITIVES["exp"], x)


def log(x: Any) -> Any:
    """The natural logarithm (defined for x > 0)."""
    return bind(PRIMITIVES["log"], x)


def log1p(x: Any) -> Any:
    """log(1 + x), accurate for tiny x (defined for x > -1)."""
    return bind(PRIMITIVES["log1p"], x)


def tanh(x: Any) -> Any:
    """The hyperbolic tangent."""
    return bind(PRIMITIVES["tanh"], x)


def sigmoid(x: Any) -> Any:
    """σ(x) = 1 / (1 + e⁻ˣ), computed without overflow."""
    return bind(PRIMITIVES["sigmoid"], x)


def softplus(x: Any) -> Any:
    """log(1 + eˣ), a smooth relu."""
    return bind(PRIMITIVES["softplus"], x)


def relu(x: Any) -> Any:
    """max(x, 0) (slope 0 at x = 0, as in PyTorch)."""
    return bind(PRIMITIVES["relu"], x)


def sin(x: Any) -> Any:
    """The sine."""
    return bind(PRIMITIVES["sin"], x)


def cos(x: Any) -> Any:
    """The cosine."""
    return bind(PRIMITIVES["cos"], x)


def sqrt(x: Any) -> Any:
    """The square root (defined for x >= 0)."""
    return bind(PRIMITIVES["sqrt"], x)


def abs(x: Any) -> Any:  # (shadows the builtin inside this module)
    """|x| (slope 0 at x = 0, as in PyTorch)."""
    return bind(PRIMITIVES["abs"], x)


# --- array functions -------------------------------------------------------------------


def sum(
    x: Any,
    axis: Any = None,
    keepdims: Any = False,
) -> Any:  # (shadows the builtin inside this module)
    """Sum over ``axis`` (all axes when None)."""
    if type(x) is np.ndarray:
        return x.sum(axis=axis, keepdims=keepdims)
    if _is_traced(x):
        return x.sum(axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


def mean(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Mean over ``axis`` (all axes when None)."""
    if _is_traced(x):
        return x.mean(axis=axis, keepdims=keepdims)
    return np.mean(x, axis=axis, keepdims=keepdims)


def max(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Largest entry over ``axis``."""
    if _is_traced(x):
        return x.max(axis=axis, keepdims=keepdims)
    return np.max(x, axis=axis, keepdims=keepdims)


def reshape(x: Any, new_shape: Any) -> Any:
    if _is_traced(x):
        return x.reshape(new_shape)
    return np.reshape(x, new_shape)


def transpose(x: Any, axes: Any = None) -> Any:
    if _is_traced(x):
        return x.transpose(axes)
    return np.transpose(x, axes)


def move_axis(x: Any, source: int, destination: int) -> Any:
    """``np.moveaxis`` for any kind of array (a transpose, recorded when traced)."""
    if source == destination:
        return x
    order = list(range(len(shape(x))))
    order.insert(destination, order.pop(source))
    return transpose(x, tuple(order))


def matmul(a: Any, b: Any) -> Any:
    return a @ b


def where(condition: Any, a: Any, b: Any) -> Any:
    """``a`` where ``condition`` holds, else ``b``, entry by entry (numpy's ``where``, with
    broadcasting); the gradient goes to the entry chosen, none to the condition."""
    return bind(PRIMITIVES["where"], condition, a, b)


def maximum(a: Any, b: Any) -> Any:
    """The larger of ``a`` and ``b``, entry by entry (a tie splits the gradient in halves)."""
    return bind(PRIMITIVES["maximum"], a, b)


def minimum(a: Any, b: Any) -> Any:
    """The smaller of ``a`` and ``b``, entry by entry (a tie splits the gradient in halves)."""
    return bind(PRIMITIVES["minimum"], a, b)


def unbroadcast(grad: Any, like: Any) -> Any:
    """Sum ``grad`` back to the shape of ``like`` (a no-op for scalars)."""
    if type(grad) is float:
        return grad
    return sum_to(grad, shape(like))


def basis(shape: tuple[int, ...], dtype: Any = float) -> Iterator[Any]:
    """The unit arrays e_0, e_1, … of ``shape``, in C order (the number 1.0 for a scalar)."""
    if not shape:
        yield 1.0
        return
    n = int(np.prod(shape, dtype=np.int64))
    for j in range(n):
        e = np.zeros(n, dtype=dtype)
        e[j] = 1
        yield e.reshape(shape)


def softmax(x: Any, axis: Any = -1) -> Any:
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the max so exp cannot overflow."""
    if _is_traced(x):
        return x.softmax(axis=axis)
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    z /= z.sum(axis=axis, keepdims=True)
    return z


def log_softmax(x: Any, axis: Any = -1) -> Any:
    """x - log(sum(exp(x))) along ``axis``, computed stably (log-sum-exp)."""
    if _is_traced(x):
        return x.log_softmax(axis=axis)
    shifted = x - x.max(axis=axis, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return shifted
