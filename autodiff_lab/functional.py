"""Function transformations, as JAX exposes them: ``grad``, ``vjp``, ``jvp``, Jacobians.

They take an ordinary Python function of numbers or arrays and return a new function.

- :func:`jvp` (forward mode) pushes one tangent through ``f`` with :class:`Dual` numbers:
  one pass gives d(every output) along one input direction.
- :func:`vjp` (reverse mode) records ``f`` as a graph and pulls one cotangent back through
  it: one pass gives d(one output combination)/d(every input).
- :func:`grad` is ``vjp`` with the cotangent 1 for a scalar-valued ``f``.
- :func:`jacfwd` builds a Jacobian column by column (one ``jvp`` per input entry);
  :func:`jacrev` row by row (one ``vjp`` per output entry).

Numbers become :class:`Value` leaves and arrays :class:`Tensor` leaves; results come back
as plain floats and ndarrays. Handed graph values instead (as when one transformation is
applied to another, ``grad(grad(f))``), they differentiate those values in place and return
graph values, so the result can be differentiated again.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np

from . import graph
from .dual import Dual, new_tag
from .tensor import Tensor, stack
from .value import Value


def _is_node(x) -> bool:
    return isinstance(x, Value | Tensor)


def _leaf(x, *, scalar_as_value=True):
    """A fresh differentiable leaf holding ``x``; graph values are used as they are."""
    if _is_node(x):
        return x
    if scalar_as_value and isinstance(x, numbers.Real):
        return Value(float(x))
    return Tensor(x, requires_grad=True)


def _argnums(argnums, n: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"argnums {argnums!r} is out of range for {n} positional arguments")
    return tuple(i % n for i in nums)


def _zeros_for(leaf):
    if isinstance(leaf, Value):
        return 0.0
    return np.zeros_like(leaf.data)


def _seed_for(out, create_graph: bool):
    if isinstance(out, Value):
        return Value(1.0) if create_graph else 1.0
    ones = np.ones_like(out.data)
    return Tensor(ones) if create_graph else ones


def _pull_back(out, leaves, seed, create_graph: bool):
    """Gradients of ``out`` (weighted by ``seed``) for each leaf, without touching ``.grad``."""
    if not _is_node(out) or out._fn is None and out not in leaves:
        found = {}
    else:
        found = graph.backpropagate(
            out, seed, create_graph=create_graph, accumulate=False, wanted=leaves
        )
    grads = []
    for leaf in leaves:
        g = found.get(leaf)
        if g is None:
            g = _zeros_for(leaf)
            g = (Value(g) if isinstance(leaf, Value) else Tensor(g)) if create_graph else g
        grads.append(g)
    return grads


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Like :func:`grad`, but the new function returns ``(f(x), grad)``."""

    def value_and_grad_f(*args):
        nums = _argnums(argnums, len(args))
        args = list(args)
        nested = any(_is_node(args[i]) for i in nums)
        leaves = [_leaf(args[i]) for i in nums]
        for i, leaf in zip(nums, leaves):
            args[i] = leaf
        out = f(*args)
        if _is_node(out):
            size = 1 if isinstance(out, Value) else out.size
        else:
            size = np.size(out)
        if size != 1:
            raise ValueError(
                f"grad: f must return a scalar (one number), got shape {np.shape(_raw(out))}. "
                "For vector outputs use jacrev, jacfwd or vjp."
            )
        if isinstance(out, Tensor) and out.shape != ():
            out = out.reshape(())
        grads = _pull_back(out, leaves, _seed_for(out, nested) if _is_node(out) else None, nested)
        if not nested:
            out = _raw(out)
        result = grads[0] if isinstance(argnums, int) else tuple(grads)
        return out, result

    value_and_grad_f.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    return value_and_grad_f


def grad(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The gradient of a scalar-valued ``f``: ``grad(f)(x)`` is df/dx, shaped like x.

    ``argnums`` picks the arguments to differentiate (an int, or a tuple for several,
    which then returns a tuple of gradients). Reverse mode: one backward pass.
    """
    vg = value_and_grad(f, argnums)

    def grad_f(*args):
        return vg(*args)[1]

    grad_f.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    return grad_f


def _raw(x):
    if isinstance(x, Value | Tensor):
        return x.data
    return x


def vjp(f: Callable, *primals):
    """Reverse mode: ``out, vjp_fn = vjp(f, *primals)``; ``vjp_fn(ct)`` is ``ctᵀ·J``.

    ``vjp_fn`` takes a cotangent shaped like ``out`` and returns a tuple with one gradient
    per primal. It can be called many times: the graph is recorded once.
    """
    nested = any(_is_node(p) for p in primals)
    leaves = [_leaf(p) for p in primals]
    out = f(*leaves)

    def vjp_fn(cotangent):
        if isinstance(out, Value):
            seed = cotangent if nested else float(cotangent)
        else:
            seed = cotangent if nested and _is_node(cotangent) else np.asarray(cotangent)
            if np.shape(_raw(seed)) != np.shape(_raw(out)):
                raise ValueError(
                    f"vjp: cotangent has shape {np.shape(_raw(seed))}, but f's output has "
                    f"shape {np.shape(_raw(out))}"
                )
            if nested and not _is_node(seed):
                seed = Tensor(seed)
            elif not nested:
                seed = seed.astype(out.data.dtype, copy=False)
        return tuple(_pull_back(out, leaves, seed, nested))

    return (out if nested else _raw(out)), vjp_fn


def _tangent_of(out, tag):
    if isinstance(out, Dual) and out.tag == tag:
        return out.primal, out.tangent
    zero = 0.0 if isinstance(_raw(out), numbers.Number) else np.zeros_like(_raw(out))
    return out, zero


def jvp(f: Callable, primals: Sequence, tangents: Sequence):
    """Forward mode: ``(f(*primals), J·tangents)`` in one pass with dual numbers.

    ``primals`` and ``tangents`` are tuples with one entry per argument of ``f``
    (a single number or array is accepted too).
    """
    if not isinstance(primals, tuple | list):
        primals, tangents = (primals,), (tangents,)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    tag = new_tag()
    out = f(*(Dual(p, t, tag) for p, t in zip(primals, tangents)))
    if isinstance(out, tuple | list):
        pairs = [_tangent_of(o, tag) for o in out]
        return type(out)(p for p, _ in pairs), type(out)(t for _, t in pairs)
    return _tangent_of(out, tag)


def jacfwd(f: Callable, argnums: int = 0) -> Callable:
    """The Jacobian by forward mode: one :func:`jvp` per input entry (a column each).

    The result has shape ``out.shape + x.shape``.
    """

    def jacfwd_f(*args):
        args = list(args)
        x = args[argnums]
        x_arr = np.asarray(_raw(x), dtype=float)
        columns = []
        for j in range(x_arr.size):
            e = np.zeros(x_arr.size)
            e[j] = 1.0
            e = e.reshape(x_arr.shape) if x_arr.shape else float(e[0])
            primal = x_arr if x_arr.shape else float(x_arr)

            def f_of_x(xd):
                return f(*args[:argnums], xd, *args[argnums + 1 :])

            out, col = jvp(f_of_x, (primal,), (e,))
            columns.append(np.asarray(_raw(col), dtype=float))
        out_shape = np.shape(_raw(out))
        jac = np.stack(columns, axis=-1) if columns else np.zeros(out_shape + (0,))
        return jac.reshape(out_shape + x_arr.shape)

    return jacfwd_f


def jacrev(f: Callable, argnums: int = 0) -> Callable:
    """The Jacobian by reverse mode: one backward pass per output entry (a row each).

    The result has shape ``out.shape + x.shape``.
    """

    def jacrev_f(*args):
        args = list(args)
        x = args[argnums]
        nested = _is_node(x)
        leaf = x if nested else Tensor(np.asarray(x, dtype=float), requires_grad=True)
        args[argnums] = leaf
        out = f(*args)
        if not isinstance(out, Tensor):
            out = Tensor(_raw(out)) if not nested or not _is_node(out) else out
        rows = []
        for i in range(out.size):
            seed = np.zeros(out.size, dtype=out.dtype)
            seed[i] = 1
            seed = seed.reshape(out.shape)
            (row,) = _pull_back(out, [leaf], Tensor(seed) if nested else seed, nested)
            rows.append(row)
        if nested:
            if not rows:
                return Tensor(np.zeros(out.shape + leaf.shape))
            return stack(rows).reshape(out.shape + leaf.shape)
        if not rows:
            return np.zeros(out.shape + leaf.shape)
        return np.stack(rows).reshape(out.shape + leaf.shape)

    return jacrev_f


def hessian(f: Callable, argnums: int = 0) -> Callable:
    """The matrix of second derivatives of a scalar ``f``, by reverse-over-reverse."""
    return jacrev(jacrev(f, argnums), argnums)
