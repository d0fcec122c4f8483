"""The names the engine's signatures use for what they pass around (read by people and mypy).

The engine computes with five kinds of number at once — a Python float, a numpy array, a
graph value (``Value``, ``Tensor``), a dual number, a ``vmap`` batch — and every one of them
takes every operator with every other (``Dual.__rmul__`` for ``ndarray * Dual``, ``Tensor``
beside a float…). Who computes is decided at run time, by :func:`~autodiff_lab.primitive.bind`;
a union of the five would make mypy ask for an ``isinstance`` at each operator the engine
never needs. So :data:`Operand` is ``Any`` to mypy, and the name says what it holds. The
kinds themselves (``Node``, ``Tracer``…) are the classes of :mod:`autodiff_lab.kinds`.

This module imports nothing of the package: every engine module may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

#: A number of any kind: a float, an array, a graph value, a dual, a ``vmap`` batch.
Operand: TypeAlias = Any
#: Several operands, in order (an op's inputs, their tangents, a Jacobian's columns…).
Operands: TypeAlias = Sequence[Any]
#: An :data:`Operand` or a (nested) tuple or list of them: what a function takes or returns.
Tree: TypeAlias = Any
#: What goes between ``[]``: ints, slices, None, ``...``, int or bool arrays, a tuple of them.
Index: TypeAlias = Any
#: A function a transformation takes or returns (of operands, returning a :data:`Tree`).
Fn: TypeAlias = Callable[..., Any]
#: ``vjp``'s ``vjp_fn``: a cotangent shaped like the output -> one cotangent per primal.
Pullback: TypeAlias = Callable[[Any], tuple[Any, ...]]
#: A derivative, transpose or batching rule of a primitive (``rule(g, out, *inputs)``…).
Rule: TypeAlias = Callable[..., Any]
#: A primitive's keyword parameters (``axis=0``, ``shape=(2, 3)``…), as a node keeps them.
Params: TypeAlias = dict[str, Any]
#: ``x -> True`` (or a boolean array) where ``x`` is outside a primitive's domain.
Mask: TypeAlias = Callable[[Any], Any]
#: The inputs of a rule: numbers, arrays or traced values.
Args: TypeAlias = Sequence[Any]
#: One flag per input of an op: wanted? batched? linear?
Flags: TypeAlias = Sequence[bool]
#: The axis (axes) of a reduction; None: all of them.
Axis: TypeAlias = int | tuple[int, ...] | None
#: The shape of an array, or of one example of a ``vmap`` batch.
Shape: TypeAlias = tuple[int, ...]
#: ``vmap``'s ``in_axes``/``out_axes``: an axis, None (not batched), or one entry per argument.
Axes: TypeAlias = int | None | Sequence[Any]
