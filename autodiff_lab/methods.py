"""The methods the array types share (``Tensor``, ``Dual``, ``vmap``'s batches): each one
applies one primitive.

``t.sum(axis=0)``, ``a @ b``, ``t.T``… are written once here, in :class:`ArrayMethods`:
matmul, the reductions and reshaping of arrays, with the shape checks that give clear
errors. A class supplies how it applies a primitive — ``_apply(fn, *inputs, **params)`` —
and inherits the rest. The operators and functions every number has (``a * b``,
``x.exp()``…), ``Value`` too, are :class:`~autodiff_lab.primitive.NumberMethods` (with the
machinery chapter 03 reads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import primitives as P
from .kinds import constant
from .primitive import NumberMethods
from .types import Shape


class ArrayMethods(NumberMethods):
    """Matmul, reductions and reshaping, shared by ``Tensor``, ``Dual`` and ``vmap``'s batches."""

    __slots__ = ()
    _apply: Any  # the class's way to apply a primitive (Tensor._apply, Dual._apply)

    if TYPE_CHECKING:  # provided by Tensor and Dual

        @property
        def shape(self) -> Shape: ...

        @property
        def ndim(self) -> int: ...

    def __matmul__(self, other: Any) -> Any:
        try:
            return self._binary(P.MATMUL, self, other)
        except ValueError:  # numpy refused: say which axes do not line up
            _check_matmul(type(self).__name__, self.shape, _shape(other))
            raise

    def __rmatmul__(self, other: Any) -> Any:
        try:
            return self._binary(P.MATMUL, other, self)
        except ValueError:
            _check_matmul(type(self).__name__, _shape(other), self.shape)
            raise

    # --- along an axis ---------------------------------------------------------------

    def softmax(self, axis: int = -1) -> Any:
        return self._apply(P.SOFTMAX, self, axis=self._axis(axis, "softmax"))

    def log_softmax(self, axis: int = -1) -> Any:
        return self._apply(P.LOG_SOFTMAX, self, axis=self._axis(axis, "log_softmax"))

    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        return self._apply(P.SUM, self, axis=self._axis(axis, "sum"), keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        return self._apply(P.MEAN, self, axis=self._axis(axis, "mean"), keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        axis = self._axis(axis, "max")
        reduced = range(self.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        if any(self.shape[a] == 0 for a in reduced):
            raise ValueError(
                f"{type(self).__name__} max: shape {self.shape} has no entries along axis {axis}"
            )
        return self._apply(P.MAX, self, axis=axis, keepdims=keepdims)

    def _axis(self, axis: Any, op: str) -> Any:
        """``axis`` checked against this array's shape (a clear error when out of range)."""
        axes = (axis,) if isinstance(axis, int) else axis or ()
        for a in axes:
            if not -self.ndim <= a < self.ndim:
                raise ValueError(
                    f"{type(self).__name__} {op}: axis {a} is out of range for shape {self.shape}"
                )
        return axis if axis is None or isinstance(axis, int) else tuple(axis)

    # --- shapes ----------------------------------------------------------------------

    def reshape(self, *shape: Any) -> Any:
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        try:
            np.empty(self.shape).reshape(shape)  # cheap shape check: no data is copied
        except ValueError:
            raise ValueError(
                f"{type(self).__name__} reshape: cannot reshape shape {self.shape} "
                f"({int(np.prod(self.shape))} entries) into {shape}"
            ) from None
        return self._apply(P.RESHAPE, self, shape=shape)

    def transpose(self, *axes_given: Any) -> Any:
        axes: Any = axes_given
        if len(axes) == 1 and not isinstance(axes[0], int):  # t.transpose((1, 0)) or (None)
            axes = axes[0]
        axes = tuple(axes) if axes else None
        if axes is not None and sorted(a + self.ndim if a < 0 else a for a in axes) != list(
            range(self.ndim)
        ):
            raise ValueError(
                f"{type(self).__name__} transpose: axes {axes} must list each axis of shape "
                f"{self.shape} exactly once (a permutation of {tuple(range(self.ndim))})"
            )
        return self._apply(P.TRANSPOSE, self, axes=axes)

    @property
    def T(self) -> Any:
        return self.transpose()

    def broadcast_to(self, shape: Any) -> Any:
        return self._apply(P.BROADCAST_TO, self, shape=tuple(shape))

    def __getitem__(self, index: Any) -> Any:
        index = _plain_index(index)
        try:
            constant(self)[index]
        except IndexError as e:
            raise IndexError(
                f"{type(self).__name__} []: index {index!r} for shape {self.shape}: {e}"
            ) from None
        return self._apply(P.GETITEM, self, index=index)


def _shape(x: Any) -> Shape:
    return np.shape(constant(x))  # (a vmap batch gives one example's shape)


def _check_matmul(where: str, a: Shape, b: Shape) -> None:
    if not a or not b:
        raise ValueError(f"{where} @: needs at least 1-D operands, got shapes {a} and {b}")
    k_left = a[-1]
    k_right = b[0] if len(b) == 1 else b[-2]
    if k_left != k_right:
        raise ValueError(
            f"{where} @: shapes {a} and {b} do not line up: the last axis of the left "
            f"({k_left}) must equal the {'only' if len(b) == 1 else 'second-to-last'} axis "
            f"of the right ({k_right})"
        )


def _plain_index(index: Any) -> Any:
    """Arrays inside an index stay arrays (graph values give their data); lists become
    integer arrays."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if isinstance(index, list):
        return np.asarray(index, dtype=np.intp)
    plain = constant(index)
    if plain is not index:
        return np.asarray(plain).astype(np.intp)
    return index
