"""Math functions that work on every kind of number the course uses.

``exp(x)`` is ``math.exp`` for a float, ``numpy.exp`` for an array, and the recorded
operation for a :class:`~autodiff_lab.Value`, :class:`~autodiff_lab.Tensor` or
:class:`~autodiff_lab.Dual`. So one Python function can be evaluated on plain numbers,
pushed forward with ``jvp`` and pulled back with ``grad`` without changing a line::

    def f(x):
        return tanh(x) * exp(-x)

The derivative rules in :mod:`autodiff_lab.primitives` are written with these functions
too, which is what lets a gradient be differentiated again.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "exp", "log", "tanh", "sigmoid", "relu", "sin", "cos", "sqrt", "abs",
    "sum", "mean", "max", "reshape", "transpose", "matmul", "softmax", "log_softmax",
    "shape", "sum_to", "broadcast_to", "unbroadcast",
]  # fmt: skip


def _is_traced(x) -> bool:
    """True for the course's own number types (they know how to record an op)."""
    if type(x) is np.ndarray or type(x) is float:
        return False
    return hasattr(x, "_fn") or hasattr(x, "tangent")


def _stable_sigmoid(x):
    """sigmoid(x) = 1 / (1 + e^-x), computed without overflow for large |x|."""
    if type(x) is float or type(x) is int:  # not numpy scalars: they stay numpy
        if x >= 0:
            return 1.0 / (1.0 + math.exp(-x))
        e = math.exp(x)
        return e / (1.0 + e)
    x = np.asarray(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _relu(x):
    if isinstance(x, float | int):
        return x if x > 0 else 0.0 * x
    return np.maximum(x, 0)


def _elementwise(name: str, on_float, on_array, doc: str):
    """Build the generic function ``name`` that dispatches on its argument's type."""

    def fn(x):
        if type(x) is float or type(x) is int:
            return on_float(x)
        if _is_traced(x):
            return getattr(x, name)()
        return on_array(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


exp = _elementwise("exp", math.exp, np.exp, "e^x.  d/dx = e^x")
tanh = _elementwise("tanh", math.tanh, np.tanh, "tanh(x).  d/dx = 1 - tanh(x)^2")
sin = _elementwise("sin", math.sin, np.sin, "sin(x).  d/dx = cos(x)")
cos = _elementwise("cos", math.cos, np.cos, "cos(x).  d/dx = -sin(x)")
sigmoid = _elementwise(
    "sigmoid", _stable_sigmoid, _stable_sigmoid, "1/(1+e^-x).  d/dx = s(x)(1 - s(x))"
)
relu = _elementwise("relu", _relu, _relu, "max(x, 0).  d/dx = 1 if x > 0 else 0")
abs = _elementwise("abs", lambda x: x if x >= 0 else -x, np.abs, "|x|.  d/dx = sign(x)")  # noqa: A001


def _float_log(x):
    return math.log(x) if x > 0 else -math.inf if x == 0 else math.nan


log = _elementwise("log", _float_log, np.log, "natural log.  d/dx = 1/x")
sqrt = _elementwise("sqrt", math.sqrt, np.sqrt, "square root.  d/dx = 1 / (2 sqrt(x))")


# --- array functions -------------------------------------------------------------------


def shape(x) -> tuple:
    """The shape of an array-like; ``()`` for a Python number."""
    return x.shape if type(x) is np.ndarray else getattr(x, "shape", ())


def sum(x, axis=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (all axes when None)."""
    if type(x) is np.ndarray:
        return x.sum(axis=axis, keepdims=keepdims)
    if _is_traced(x):
        return x.sum(axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (all axes when None)."""
    if _is_traced(x):
        return x.mean(axis=axis, keepdims=keepdims)
    return np.mean(x, axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Largest entry over ``axis``."""
    if _is_traced(x):
        return x.max(axis=axis, keepdims=keepdims)
    return np.max(x, axis=axis, keepdims=keepdims)


def reshape(x, new_shape):
    if _is_traced(x):
        return x.reshape(new_shape)
    return np.reshape(x, new_shape)


def transpose(x, axes=None):
    if _is_traced(x):
        return x.transpose(axes)
    return np.transpose(x, axes)


def matmul(a, b):
    return a @ b


def broadcast_to(x, new_shape):
    """Repeat ``x`` along new or size-1 axes to ``new_shape`` (numpy broadcasting)."""
    if shape(x) == tuple(new_shape):
        return x
    if _is_traced(x):
        return x.broadcast_to(new_shape)
    return np.broadcast_to(x, new_shape)


def sum_to(x, target_shape):
    """Sum ``x`` down to ``target_shape``: the reverse of broadcasting.

    Broadcasting copies a value along the axes it adds or stretches, so the gradient
    flowing back must *add up* the copies along exactly those axes.
    """
    target_shape = tuple(target_shape)
    x_shape = shape(x)
    if x_shape == target_shape:
        return x
    lead = len(x_shape) - len(target_shape)  # axes broadcasting added in front
    if lead:
        x = sum(x, axis=tuple(range(lead)))
        x_shape = shape(x)
    if x_shape != target_shape:  # size-1 axes that broadcasting stretched
        stretched = tuple(i for i, n in enumerate(target_shape) if n == 1 and x_shape[i] != 1)
        x = sum(x, axis=stretched, keepdims=True)
    return x


def unbroadcast(grad, like):
    """Sum ``grad`` back to the shape of ``like`` (a no-op for scalars)."""
    if type(grad) is float:
        return grad
    return sum_to(grad, shape(like))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the max so exp cannot overflow."""
    if _is_traced(x):
        return x.softmax(axis=axis)
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    z /= z.sum(axis=axis, keepdims=True)
    return z


def log_softmax(x, axis=-1):
    """x - log(sum(exp(x))) along ``axis``, computed stably (log-sum-exp)."""
    if _is_traced(x):
        return x.log_softmax(axis=axis)
    shifted = x - x.max(axis=axis, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return shifted
