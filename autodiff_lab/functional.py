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

Transformations compose in any order, to any depth:

- reverse over reverse, ``grad(grad(f))``, ``jacrev(jacrev(f))``: the inner one, handed
  graph values, records its backward pass as a graph (``create_graph``) that the outer one
  differentiates;
- forward over reverse, ``jacfwd(jacrev(f))``, ``jvp(grad(f), ...)``: the inner one,
  handed :class:`Dual` numbers, runs on graph leaves holding their primals and then
  replays its recorded result with the duals put back (:func:`autodiff_lab.tangents.replay`);
- forward over forward, ``jacfwd(jacfwd(f))``: duals inside duals, kept apart by tags.

Each transformation below reads its plain case first; the adapters for arguments that carry
an outer transformation's duals or batches are picked by one table, :data:`NESTING`
(inner × outer → adapter), at the end of the module.

Second derivatives: :func:`hessian` (``mode="fwd-rev"`` or ``"rev-rev"``) and :func:`hvp`,
a Hessian-vector product without forming the Hessian.

Transformations of chapter 08 (:mod:`autodiff_lab.linear`):

- :func:`linearize` records the jvp once as a graph of linear operations
  (a :class:`~autodiff_lab.linear.LinearGraph`), applied to many tangents;
- :func:`linear_transpose` runs that graph backwards, each op replaced by its transpose:
  the vjp, obtained from forward mode;
- :func:`vmap` (:mod:`autodiff_lab.batching`) maps a function over a batch in one pass,
  with one batching rule per primitive. It nests with itself, ``jvp``, ``vjp``, ``grad``
  and the Jacobians and Hessians built from them: ``vmap(grad(loss), in_axes=(None, 0,
  0))`` gives per-example gradients, ``vmap(hessian(f))`` per-example Hessians (reverse
  mode inside ``vmap`` records the whole batch's graph from batched leaves,
  :func:`_batched_reverse`; forward over reverse replays it, :func:`_through_duals`);
  ``jacfwd``/``jacrev`` with ``vectorize=True`` are ``vmap`` over ``jvp``/``vjp``
  instead of a Python loop.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import graph, linear, ops
from .batching import Batched, batch_levels, has_batch, lift, vmap, wrap  # noqa: F401
from .dual import Dual, new_tag
from .extend import new_leaf
from .kinds import Boxed, Node, as_primal, data_of, innermost, is_node, is_tracer, zeros_like
from .linear import LinearGraph, LinearTranspose
from .tangents import replay
from .tensor import Tensor, stack
from .types import Fn, Operand, Operands, Pullback, Shape, Tree
from .value import Value


def _leaf(x: Operand, *, scalar_as_value: bool = True) -> Operand:
    """A fresh differentiable leaf holding ``x``. For a graph value (inside another
    reverse-mode transformation) a fresh node ``x · 1`` that depends on it: this
    transformation differentiates through that node only, so a function that also
    closes over ``x`` (``grad(lambda y: f(y * x))(x)``) keeps the two uses apart while
    the outer transformation still sees both."""
    if is_node(x):
        return x * 1.0
    if isinstance(x, Boxed):  # (a vmap batch or a dual where a plain value must be)
        raise NotImplementedError(
            f"reverse mode cannot start from a {type(x).__name__} here: this nesting of "
            "transformations (e.g. jvp of vmap of vjp) is not supported; apply jvp "
            "inside vmap instead: vmap(lambda x, t: jvp(g, (x,), (t,)))"
        )
    return new_leaf(x, scalar_as_value=scalar_as_value)


def _argnums(argnums: int | Sequence[int], n: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"argnums {argnums!r} is out of range for {n} positional arguments")
    return tuple(i % n for i in nums)


def _seed_for(out: Node, create_graph: bool) -> Operand:
    if isinstance(out, Value):
        return Value(1.0) if create_graph else 1.0
    ones = np.ones_like(out.data)
    return Tensor(ones) if create_graph else ones


def _pull_back(
    out: Operand, leaves: Sequence[Node], seed: Operand, create_graph: bool
) -> list[Operand]:
    """Gradients of ``out`` (weighted by ``seed``) for each leaf, without touching ``.grad``."""
    if isinstance(out, Batched):  # (a batch inside a dual: its graph is not one leaf's)
        raise NotImplementedError(
            "grad/vjp/jacrev: f closes over a dual number whose tangent is a vmap batch "
            "(jacfwd(..., vectorize=True) or vmap over tangents, around a gradient of a "
            "function that closes over the differentiated argument): not supported; use "
            "jacfwd without vectorize there"
        )
    if isinstance(out, Dual):  # f closed over a dual number: d(p + t ε) = dp + dt ε
        primal_grads = _pull_back(out.primal, leaves, seed, create_graph)
        tangent_grads = _pull_back(out.tangent, leaves, seed, create_graph)
        return [Dual(p, t, out.tag) for p, t in zip(primal_grads, tangent_grads, strict=True)]
    if not is_node(out) or out._fn is None and out not in leaves:
        found = {}
    else:
        found = graph.backpropagate(
            out, seed, create_graph=create_graph, accumulate=False, wanted=leaves
        )

    def zero(leaf: Node) -> Operand:  # (no path from the leaf to out)
        g = zeros_like(leaf)
        return new_leaf(g, requires_grad=False) if create_graph else g

    return [found[leaf] if leaf in found else zero(leaf) for leaf in leaves]


def _record(
    f: Fn, args: Operands, nums: Iterable[int], *, scalar_as_value: bool = True
) -> tuple[Tree, list[Node], bool]:
    """The opening every reverse-mode transformation shares: run ``f`` on ``args`` with
    the arguments at positions ``nums`` made differentiable leaves.

    Returns ``(out, leaves, nested)``. ``nested`` is True inside another reverse-mode
    transformation or when an argument already is a graph value: the backward pass must
    then be recorded as a graph (``create_graph``) and graph values returned.
    """
    nums = list(nums)
    nested = graph.outer_graph.depth > 0 or any(is_node(args[i]) for i in nums)
    given = [args[i] for i in nums]
    leaves = [_leaf(x, scalar_as_value=scalar_as_value) for x in given]
    out = _run(f, args, nums, leaves)
    if any(is_node(x) for x in given) and not _closes_over(out, given, leaves):
        # f does not also close over the graph values it was given: differentiate them in
        # place (run again), so the recorded graph has no extra x · 1 node per level
        out = _run(f, args, nums, given)
        leaves = given
    return out, leaves, nested


def _run(f: Fn, args: Operands, nums: Sequence[int], xs: Sequence[Operand]) -> Tree:
    """``f(*args)`` with ``xs`` at positions ``nums``, run inside ``graph.outer_graph``
    (``f`` may close over the graph values made here: a gradient inside records its
    backward pass)."""
    call = list(args)
    for i, x in zip(nums, xs, strict=True):
        call[i] = x
    with graph.outer_graph:
        return f(*call)


def _closes_over(out: Tree, given: Operands, leaves: Sequence[Node]) -> bool:
    """Whether the graph of ``out`` uses a given graph value other than through the fresh
    node made from it (``_leaf``): the function closed over it as well."""
    core = innermost(out)
    if not is_node(core):
        return True  # (a batch, a dual's tangent…: keep the fresh nodes, always right)
    fresh = {id(leaf) for leaf, x in zip(leaves, given) if leaf is not x}
    wanted = {id(x) for x in given if is_node(x)}
    for node in graph.topological_order(core):
        if id(node) not in fresh and any(id(p) in wanted for p in node._prev):
            return True
    return isinstance(out, Dual)


def _one_output(out: Tree, where: str) -> Operand:
    """Reverse mode pulls back one output: several must be stacked into one Tensor first."""
    if isinstance(out, list | tuple):
        raise TypeError(
            f"{where}: f returned a {type(out).__name__} of {len(out)} outputs; reverse mode "
            "needs one Value, Tensor or number — stack them first: "
            "autodiff_lab.stack([...]) (jvp and jacfwd accept tuples)"
        )
    return out


def value_and_grad(f: Fn, argnums: int | Sequence[int] = 0) -> Fn:
    """Like :func:`grad`, but the new function returns ``(f(x), grad)``."""

    def value_and_grad_f(*given: Operand) -> Tree:
        adapter = _adapter("grad", given)
        if adapter is None:  # numbers, arrays or graph values
            out, leaves, nested = _record(f, given, _argnums(argnums, len(given)))
            if has_batch([innermost(out)]):  # f closes over a vmap batch: per example
                return _grad_in_vmap(value_and_grad_f, f, given, argnums)
            return _value_and_gradient(out, leaves, nested, argnums)
        return adapter(value_and_grad_f, f, given, argnums)

    value_and_grad_f.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    return value_and_grad_f


def _value_and_gradient(
    out: Tree, leaves: list[Node], nested: bool, argnums: int | Sequence[int]
) -> tuple[Operand, Tree]:
    """``grad``'s result from ``f``'s recorded output: checked to be one number, pulled back."""
    core = innermost(out)
    if not is_node(core) and not isinstance(core, numbers.Number | np.ndarray | np.generic):
        raise TypeError(
            f"grad: f must return a number (or a 1-element array), got "
            f"{type(core).__name__} {core!r:.40}"
        )
    _check_scalar(np.shape(data_of(out)))
    if isinstance(out, Tensor) and out.shape != ():
        out = out.reshape(())
    seed = _seed_for(core, nested) if is_node(core) else None
    grads = _pull_back(out, leaves, seed, nested)
    result = grads[0] if isinstance(argnums, int) else tuple(grads)
    return (out if nested else data_of(out)), result


def _check_scalar(shape: Shape, where: str = "") -> None:
    """``grad``'s check: ``f`` returned one number (``where``: " per example" inside vmap)."""
    if int(np.prod(shape, dtype=np.int64)) != 1:
        raise ValueError(
            f"grad: f must return a scalar (one number){where}, got shape {shape}. "
            "For vector outputs use jacrev, jacfwd or vjp."
        )


def grad(f: Fn, argnums: int | Sequence[int] = 0) -> Fn:
    """The gradient of a scalar-valued ``f``: ``grad(f)(x)`` is df/dx, shaped like x.

    ``argnums`` picks the arguments to differentiate (an int, or a tuple for several,
    which then returns a tuple of gradients). Reverse mode: one backward pass.
    """
    vg = value_and_grad(f, argnums)

    def grad_f(*args: Operand) -> Tree:
        return vg(*args)[1]

    grad_f.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    return grad_f


def vjp(f: Fn, *primals: Operand) -> tuple[Operand, Pullback]:
    """Reverse mode: ``out, vjp_fn = vjp(f, *primals)``; ``vjp_fn(ct)`` is ``ctᵀ·J``.

    ``vjp_fn`` takes a cotangent shaped like ``out`` and returns a tuple with one gradient
    per primal. It can be called many times: the graph is recorded once.
    """
    nums = tuple(range(len(primals)))
    adapter = _adapter("vjp", primals)
    if adapter is None:  # numbers, arrays or graph values
        out, leaves, nested = _record(f, primals, nums)
        out = _one_output(out, "vjp")
        if has_batch([innermost(out)]):  # f closes over a vmap batch
            return _vjp_in_vmap(vjp, f, primals, nums)
        return (out if nested else data_of(out)), _pullback_of(out, leaves, nested)
    result: tuple[Operand, Pullback] = adapter(vjp, f, primals, nums)
    return result


def _pullback_of(out: Operand, leaves: list[Node], nested: bool) -> Pullback:
    """``vjp``'s ``vjp_fn`` for the recorded output ``out``."""

    def vjp_fn(cotangent: Operand) -> tuple[Operand, ...]:
        if isinstance(cotangent, Batched):  # vmap(vjp_fn): a batch of cotangents at once
            _check_cotangent(cotangent.shape, np.shape(data_of(out)), " per example")
            return tuple(_pull_back(out, leaves, cotangent, nested))
        if isinstance(cotangent, Dual):  # vjp_fn is linear: the tangent is vjp_fn(tangent)
            primal_part, tangent_part = vjp_fn(cotangent.primal), vjp_fn(cotangent.tangent)
            return tuple(
                Dual(p, t, cotangent.tag) for p, t in zip(primal_part, tangent_part, strict=True)
            )
        if isinstance(out, Value):
            seed = cotangent if nested else float(cotangent)
        else:
            seed = cotangent if nested and is_node(cotangent) else np.asarray(cotangent)
            _check_cotangent(np.shape(data_of(seed)), np.shape(data_of(out)))
            if nested and not is_node(seed):
                seed = Tensor(seed)
            elif not nested:
                # (out may be a constant)
                seed = seed.astype(np.result_type(data_of(out)), copy=False)
        return tuple(_pull_back(out, leaves, seed, nested))

    return vjp_fn


def _check_cotangent(ct_shape: Shape, out_shape: Shape, where: str = "") -> None:
    """``vjp_fn``'s check: a cotangent shaped like ``f``'s output (``where``: " per example"
    inside vmap)."""
    if ct_shape != out_shape:
        raise ValueError(
            f"vjp: cotangent has shape {ct_shape}{where}, but f's output has shape {out_shape}"
        )


def _tangent_of(out: Operand, tag: int) -> tuple[Operand, Operand]:
    if isinstance(out, Dual) and out.tag == tag:
        return out.primal, out.tangent
    return out, zeros_like(out)


def jvp(f: Fn, primals: Operands, tangents: Operands) -> tuple[Tree, Tree]:
    """Forward mode: ``(f(*primals), J·tangents)`` in one pass with dual numbers.

    ``primals`` and ``tangents`` are tuples with one entry per argument of ``f``
    (a single number or array is accepted too).
    """
    if not isinstance(primals, tuple | list):
        primals, tangents = (primals,), (tangents,)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    tag = new_tag()
    out = f(*(Dual(p, t, tag) for p, t in zip(primals, tangents, strict=True)))
    if isinstance(out, tuple | list):
        pairs = [_tangent_of(o, tag) for o in out]
        return type(out)(p for p, _ in pairs), type(out)(t for _, t in pairs)
    return _tangent_of(out, tag)


def jacfwd(f: Fn, argnums: int = 0, vectorize: bool = False) -> Fn:
    """The Jacobian by forward mode: one :func:`jvp` per input entry (a column each).

    The result has shape ``out.shape + x.shape``. Cost: ``x.size`` forward passes, so it
    suits *tall* Jacobians (few inputs, many outputs). With ``vectorize=True`` the
    columns come from ONE pass of a batch of tangents, ``vmap(jvp)`` over the unit
    vectors, instead of a Python loop (the same matrix; the primal is computed once).
    """

    def jacfwd_f(*given: Operand) -> Operand:
        adapter = _adapter("jacfwd", given)
        if adapter is not None:
            return adapter(jacfwd_f, f, given, argnums)
        args = list(given)  # numbers, arrays, graph values or vmap batches
        x = as_primal(args[argnums])
        x_shape = x.shape if isinstance(x, Batched) else np.shape(data_of(x))
        dtype = x.dtype if isinstance(x, Batched) else np.result_type(data_of(x))
        dtype = dtype if dtype.kind == "f" else np.dtype(float)  # (a batch of integers)

        def f_of_x(xd: Operand) -> Tree:
            return f(*args[:argnums], xd, *args[argnums + 1 :])

        if vectorize:  # J[..., j] = jvp(f, x, e_j), all j in one batch
            n = int(np.prod(x_shape, dtype=np.int64))
            basis = np.eye(n, dtype=dtype).reshape((n, *x_shape))
            out, columns = vmap(lambda e: jvp(f_of_x, (x,), (e,)), out_axes=(None, -1))(basis)
            if isinstance(out, tuple | list):  # one Jacobian per output
                return type(out)(
                    ops.reshape(c, np.shape(data_of(o)) + x_shape) for o, c in zip(out, columns)
                )
            return ops.reshape(columns, np.shape(data_of(out)) + x_shape)
        pushed = [jvp(f_of_x, (x,), (e,)) for e in ops.basis(x_shape, dtype)]  # (out, J e)
        # (x has no entries: no column, but the output's shape is needed)
        out = pushed[-1][0] if pushed else f_of_x(x)
        columns = [column for _, column in pushed]
        if isinstance(out, tuple | list):  # one Jacobian per output, from its own columns
            return type(out)(
                _from_columns(o, [c[i] for c in columns], x_shape, dtype) for i, o in enumerate(out)
            )
        return _from_columns(out, columns, x_shape, dtype)

    jacfwd_f.__name__ = f"jacfwd({getattr(f, '__name__', 'f')})"
    return jacfwd_f


def jacrev(f: Fn, argnums: int = 0, vectorize: bool = False) -> Fn:
    """The Jacobian by reverse mode: one backward pass per output entry (a row each).

    The result has shape ``out.shape + x.shape``. Cost: ``out.size`` backward passes, so
    it suits *wide* Jacobians (many inputs, few outputs) — a gradient is one row. With
    ``vectorize=True`` the rows come from ONE backward pass of a batch of cotangents,
    ``vmap(vjp_fn)`` over the unit vectors, instead of a Python loop (the same matrix).
    """

    def jacrev_f(*given: Operand) -> Operand:
        adapter = _adapter("jacrev", given)
        if adapter is None:  # numbers, arrays or graph values
            args = list(given)
            if not is_node(args[argnums]):  # an array of its float type (a number: float64)
                args[argnums] = np.asarray(as_primal(args[argnums]))
            out, (leaf,), nested = _record(f, args, (argnums,), scalar_as_value=False)
            out = _one_output(out, "jacrev")
            if has_batch([innermost(out)]):  # f closes over a vmap batch
                return _jacrev_in_vmap(jacrev_f, f, args, argnums)
            return _rows(out, leaf, nested, vectorize)
        return adapter(jacrev_f, f, given, argnums)

    jacrev_f.__name__ = f"jacrev({getattr(f, '__name__', 'f')})"
    return jacrev_f


def _rows(out: Operand, leaf: Node, nested: bool, vectorize: bool) -> Operand:
    """``jacrev``'s Jacobian of the recorded output ``out``, one pulled-back row per entry."""
    if isinstance(out, Value):  # scalar engine: one row, the gradient
        (row,) = _pull_back(out, [leaf], _seed_for(out, nested), nested)
        return row if nested else float(data_of(row))
    if not isinstance(out, Tensor):  # (not a graph value)
        out = Tensor(data_of(out))
    shape = out.shape + np.shape(data_of(leaf))
    if vectorize and out.size:  # row i = e_iᵀ J, all i in one batch of cotangents
        eye = np.eye(out.size, dtype=out.dtype).reshape((out.size, *out.shape))
        rows = vmap(lambda ct: _pull_back(out, [leaf], ct, nested)[0])(eye)
        return ops.reshape(rows, shape)
    seeds = ops.basis(out.shape, out.dtype) if out.shape else [np.ones((), out.dtype)]
    rows = [_pull_back(out, [leaf], Tensor(e) if nested else e, nested)[0] for e in seeds]
    if not rows:
        zeros = np.zeros(shape, np.result_type(data_of(leaf)))
        return Tensor(zeros) if nested else zeros
    if nested:
        return stack([r if is_node(r) else Tensor(r) for r in rows]).reshape(shape)
    return np.stack(rows).reshape(shape)


HESSIAN_MODES = ("fwd-rev", "rev-rev")


def hessian(f: Fn, argnums: int = 0, mode: str = "fwd-rev") -> Fn:
    """The matrix of second derivatives of a scalar ``f``: shape ``x.shape + x.shape``.

    ``mode="fwd-rev"`` (the default, as in JAX and ``torch.func``): ``jacfwd(jacrev(f))``,
    forward over reverse. The gradient's graph is recorded once, then replayed with one
    dual number ``x + e_j ε`` per column ``j`` (:func:`autodiff_lab.tangents.replay`).
    ``mode="rev-rev"``: ``jacrev(jacrev(f))``, one backward pass through the gradient's
    graph per row. Both give the same matrix at about the same cost: ``x.size`` passes
    over the gradient's graph.
    """
    if mode not in HESSIAN_MODES:
        raise ValueError(f"hessian: mode must be one of {HESSIAN_MODES}, got {mode!r}")
    gradient = jacrev(f, argnums)
    if mode == "rev-rev":
        return jacrev(gradient, argnums)
    columns_by_jvp = jacfwd(gradient, argnums)

    def hessian_f(*given: Operand) -> Operand:
        x = given[argnums]
        if not any(map(is_tracer, given)) and not is_node(x) and graph.outer_graph.depth == 0:
            # jacfwd(gradient), with the recording of the gradient hoisted out of the loop
            x = as_primal(x)
            args = list(given)
            leaf = args[argnums] = _leaf(x)
            recorded = gradient(*args)  # a graph from `leaf` (nested mode)
            # jacfwd of the replay of the gradient's graph: x + e ε gives the column H e
            return jacfwd(lambda xd: replay(recorded, {leaf: xd}))(x)
        return columns_by_jvp(*given)  # inside another transformation: jacfwd(jacrev(f))

    hessian_f.__name__ = f"hessian({getattr(f, '__name__', 'f')})"
    return hessian_f


def _from_columns(out: Operand, columns: list[Operand], x_shape: Shape, dtype: np.dtype) -> Operand:
    """The Jacobian of shape ``out.shape + x.shape`` from its columns, stacked along a new
    last axis (graph values stay graph values), of ``dtype``: the input's float type."""
    if not x_shape:  # a scalar input: the Jacobian is the one column
        column = columns[0]
        return column if isinstance(column, Boxed) else np.asarray(column, dtype=dtype)[()]
    shape = np.shape(data_of(out)) + x_shape
    if not columns:
        return np.zeros(shape, dtype)
    if any(isinstance(c, Node | Batched) for c in columns):  # graph values, or inside vmap
        return stack(columns, axis=-1).reshape(shape)
    return np.stack([np.asarray(c, dtype=dtype) for c in columns], axis=-1).reshape(shape)


def hvp(f: Fn, x: Operand, v: Operand, mode: str = "fwd-rev") -> Operand:
    """The Hessian-vector product ``H(x) · v`` of a scalar ``f``, without forming ``H``.

    ``mode="fwd-rev"``: ``jvp(grad(f), x, v)``, the directional derivative of the gradient
    along ``v`` (one recorded backward pass, replayed once with ``x + v ε``).
    ``mode="rev-rev"``: ``grad(x -> grad(f)(x) · v)``, a second backward pass.
    Either way the cost is a small constant times one evaluation of ``f``, whatever the
    size of ``x``; forming ``H`` first would take ``x.size`` passes.
    """
    x = as_primal(x)
    v_raw = data_of(v)
    if np.shape(v_raw) != np.shape(data_of(innermost(x))):
        raise ValueError(
            f"hvp: v has shape {np.shape(v_raw)}, but x has shape "
            f"{np.shape(data_of(innermost(x)))}; they must match"
        )
    if mode == "fwd-rev":
        return jvp(grad(f), (x,), (as_primal(v),))[1]
    if mode == "rev-rev":

        def gradient_along_v(x: Operand) -> Operand:
            g = grad(f)(x)
            return g * v if not np.shape(v_raw) else (g * v).sum()

        return grad(gradient_along_v)(x)
    raise ValueError(f"hvp: mode must be one of {HESSIAN_MODES}, got {mode!r}")


# --- linearize and linear_transpose (chapter 08; the graph of linear ops: linear.py) -------


def linearize(f: Fn, *primals: Operand) -> tuple[Tree, LinearGraph | TracedLinearMap]:
    """``out, f_jvp = linearize(f, *primals)``: ``f``'s value and its jvp as a linear map:
    a :class:`~autodiff_lab.linear.LinearGraph` (:func:`autodiff_lab.linear.linearize`)
    for numbers and arrays. Inside another transformation — traced primals, or ``f`` closing
    over an outer transformation's values (its graph values, duals or batches), which a
    graph of the jvp would hold as constants — the map is ``jvp`` itself and its transpose
    ``vjp`` (:class:`TracedLinearMap`)."""
    if not any(isinstance(p, Boxed) for p in primals) and graph.outer_graph.depth == 0:
        try:
            return linear.linearize(f, *primals)
        except linear.ClosesOverTraced:  # f closes over an outer jvp's duals or vmap's batches
            pass
    linear_map = TracedLinearMap(f, primals)
    return linear_map.out, linear_map


def linear_transpose(
    f_jvp: LinearGraph | TracedLinearMap | Fn, *primals: Operand
) -> LinearTranspose:
    """The transpose of a linear map: ``linear_transpose(f_jvp)(ct)`` is ``Jᵀ ct``, for the
    map :func:`linearize` returns, or for a linear Python function with example primals
    (see :func:`autodiff_lab.linear.linear_transpose`), linearized by :func:`linearize`."""
    if isinstance(f_jvp, linear.Transposable) or not primals:
        return linear.linear_transpose(f_jvp, *primals)
    return LinearTranspose(linearize(f_jvp, *primals)[1])


class TracedLinearMap:
    """:func:`linearize` inside another transformation (its primals, or values ``f`` closes
    over, are traced: ``vmap``'s batches, ``jvp``'s duals, reverse mode's graph values). A
    graph of the jvp recorded from them would hold them as constants, so here the map *is* the jvp:
    ``f_jvp(t)`` runs ``jvp(f, primals, t)`` (``f`` runs again for each tangent) and its
    transpose runs ``vjp(f, *primals)`` — the same numbers, by the transformations that
    compose with every other."""

    def __init__(self, f: Fn, primals: tuple[Operand, ...]) -> None:
        self.f, self.primals = f, primals
        self.out = jvp(f, primals, tuple(zeros_like(p) for p in primals))[0]

    def __call__(self, *tangents: Operand) -> Tree:
        if len(tangents) != len(self.primals):
            raise ValueError(
                f"linearize: f_jvp takes {len(self.primals)} tangent(s), one per primal, "
                f"got {len(tangents)}"
            )
        return jvp(self.f, self.primals, tangents)[1]

    def transpose_apply(self, cotangent: Tree) -> tuple[Operand, ...]:
        return vjp(self.f, *self.primals)[1](cotangent)

    def __repr__(self) -> str:
        return f"<TracedLinearMap: jvp of {getattr(self.f, '__name__', 'f')}>"


# --- nesting: a transformation applied inside another ----------------------------------------
#
# A transformation's arguments may carry an outer transformation's values. Graph values
# (an outer grad, vjp or jacrev) need no adapter: ``_record`` differentiates them in place
# and records the backward pass. Dual numbers (an outer jvp or jacfwd) and vmap batches do:
#
#   inner \ outer | jvp: duals         | vmap: batches         | both
#   --------------+--------------------+-----------------------+---------------------------
#   grad          | _through_duals     | _grad_in_vmap         | _through_duals
#   jacrev        | _through_duals     | _jacrev_in_vmap       | _through_duals
#   jacfwd        | _through_duals     | (plain: jvp maps)     | _through_duals if a dual
#                 |                    |                       | is on top, else plain
#   vjp           | _vjp_through_duals | _vjp_in_vmap          | _vjp_by_grad
#   hessian       | jacfwd(jacrev(f)) as it is: the rows of jacfwd and jacrev
#   linearize     | TracedLinearMap: jvp and vjp themselves
#   jvp, vmap     | none: duals and batches of any kinds nest (the larger tag goes first)
#
# ``NESTING`` (at the end of the module, after the adapters) holds the rows; each cell is
# ``(when, adapter)``, tried in order, and ``adapter(transformed, f, args, argnums)`` gives
# the transformation's result. No cell matches: the plain case, which each transformation
# reads first.

Adapter = Callable[[Fn, Fn, Operands, Any], Any]


def _has_dual(args: Operands) -> bool:
    return any(isinstance(a, Dual) for a in args)


def _carries_duals(args: Operands) -> bool:
    """A dual number as an argument, or as the examples of a batch."""
    return any(
        isinstance(a, Dual) or isinstance(a, Batched) and isinstance(a.val, Dual) for a in args
    )


def _duals_and_batches(args: Operands) -> bool:
    """Both an outer jvp's duals and an outer vmap's batches, in either order."""
    return any(isinstance(a, Batched) and isinstance(a.val, Dual) for a in args) or (
        _has_dual(args) and has_batch([innermost(a) for a in args])
    )


def _adapter(inner: str, args: Operands) -> Adapter | None:
    """The adapter of ``NESTING`` for ``inner`` called on ``args``; None in the plain case."""
    return next((adapter for when, adapter in NESTING[inner] if when(args)), None)


def _through_duals(transformed: Fn, f: Fn, given: Operands, argnums: Any) -> Tree:
    """Forward mode over a reverse-mode transformation: ``transformed(*args)`` with duals.

    Each :class:`Dual` argument is swapped for a graph leaf holding its (innermost)
    primal, and the differentiated arguments become leaves too, so ``transformed`` runs
    in nested mode and returns its result as a graph. Replaying that graph with the duals
    put back pushes their tangents through it: the result holds duals whose tangents are
    the derivative of the transformation's output (e.g. ``H v`` when ``transformed`` is a
    gradient). A batch of duals is first made a dual of batches (:func:`_duals_outside`).

    Inside ``vmap`` (a per-example ``H v``) the same, on the graph of the whole batch: the
    leaves hold the whole batch (:func:`~autodiff_lab.batching.lift`), the recorded graph
    is replayed with duals of whole batches, and the results are made batches again.
    """
    args = _duals_outside(given)
    differentiated = _argnums(argnums, len(args))
    levels = batch_levels([a.primal if isinstance(a, Dual) else a for a in args])
    substitutions: dict[Node, Operand] = {}

    def leaf_for(whole: Operand, tangent: Operand = None) -> Operand:
        """A leaf holding ``whole``, an argument's whole batch (the argument itself outside
        vmap); when the batch holds the duals of an older jvp (``jvp(vmap(hessian))``), it
        holds their primals and is replayed with them. A number's leaf is a Value, except
        in a batch or when its ``tangent`` is a Tensor (linearize records the tangents: the
        replay then combines them with the leaf's graph, which must be a Tensor's too)."""
        core = innermost(whole)
        if levels and is_tracer(core):
            raise NotImplementedError(
                "forward over reverse mode inside vmap (jvp, jacfwd, hessian or hvp of a "
                f"function applying grad/vjp/jacrev) meets a {type(core).__name__} of "
                "another transformation inside the batch: this nesting is not supported"
            )
        leaf = _leaf(core, scalar_as_value=not levels and not isinstance(tangent, Tensor))
        if whole is not core:
            substitutions[leaf] = whole
        return leaf

    for i, a in enumerate(args):
        if isinstance(a, Dual):
            primal = lift(a.primal, levels)
            leaf = leaf_for(primal, a.tangent)
            substitutions[leaf] = Dual(primal, lift(a.tangent, levels), a.tag)
            args[i] = wrap(leaf, levels)
        elif i in differentiated:
            args[i] = wrap(leaf_for(lift(a, levels)), levels)
    with graph.outer_graph:  # f may close over the leaves standing for the duals
        recorded = transformed(*args)
    cache: dict[Node, Operand] = {}  # (one replay, shared by the outputs)

    def replayed(x: Tree) -> Tree:
        """An output of ``transformed`` replayed with the duals (as a whole batch, made
        batches again)."""
        if isinstance(x, tuple | list):
            return type(x)(replayed(v) for v in x)
        x = replay(lift(x, levels), substitutions, cache)
        if isinstance(x, Dual):
            return Dual(wrap(x.primal, levels), wrap(x.tangent, levels), x.tag)
        return wrap(x, levels)

    return replayed(recorded)


def _duals_outside(args: Operands) -> list[Operand]:
    """Each batch of duals as a dual of batches (the same numbers, layered the other way),
    so that forward over reverse applies to it (``jvp(vmap(grad(f)))``)."""
    swapped = []
    for a in args:
        if isinstance(a, Batched) and isinstance(a.val, Dual):
            d = a.val
            a = Dual(Batched(d.primal, a.tag), Batched(d.tangent, a.tag), d.tag)
        swapped.append(a)
    return swapped


def _batched_reverse(
    f: Fn, args: Operands, nums: Iterable[int], where: str
) -> tuple[Operand, list[Node], list[tuple[int, int]], bool]:
    """Reverse mode inside ``vmap``: every example's gradient, from one recorded graph.

    Each differentiated argument becomes ONE leaf holding the whole batch (batch axes
    first; an argument shared by every example is repeated), wrapped as a batch again
    before ``f`` sees it. Every op applies to each example separately, so the graph
    holds the examples side by side, never mixed: pulling back ones (``grad``) or the
    batch of cotangents (``vjp``) gives each example its own gradient. Returns ``(out,
    leaves, levels, nested)``: the whole batch's output (batch axes first), the leaves,
    the ``(tag, size)`` of each vmap call, and whether to record the backward pass.
    """
    nums = list(nums)
    levels = batch_levels(args)
    while True:  # (run again if f closes over the batches of other vmap calls)
        raws = [lift(args[i], levels) for i in nums]  # the whole batch of each argument
        nested = graph.outer_graph.depth > 0 or any(is_node(raw) for raw in raws)
        leaves = [_leaf(raw if isinstance(raw, Boxed) else np.asarray(raw)) for raw in raws]
        out = _run(f, args, nums, [wrap(leaf, levels) for leaf in leaves])
        if where == "vjp":
            out = _one_output(out, "vjp")
        more = [lv for lv in batch_levels([out]) if lv not in levels]
        if not more:
            return lift(out, levels), leaves, levels, nested
        levels = sorted(levels + more)


def _grad_in_vmap(transformed: Fn, f: Fn, args: Operands, argnums: Any) -> tuple[Operand, Tree]:
    """``value_and_grad`` inside ``vmap``: per-example gradients (:func:`_batched_reverse`)."""
    out, leaves, levels, nested = _batched_reverse(f, args, _argnums(argnums, len(args)), "grad")
    sizes = tuple(size for _, size in levels)
    _check_scalar(np.shape(data_of(out))[len(sizes) :], " per example")
    core = innermost(out)  # (out is a dual when f closes over an older jvp's)
    out = ops.reshape(out, sizes)
    seed: Operand = None  # (f does not depend on the differentiated arguments: none)
    if is_node(core):
        ones = np.ones(sizes, dtype=core.dtype)
        seed = Tensor(ones) if nested else ones
    grads = [wrap(g, levels) for g in _pull_back(out, leaves, seed, nested)]
    value = wrap(out if nested else _data_inside(out), levels)
    return value, (grads[0] if isinstance(argnums, int) else tuple(grads))


def _vjp_in_vmap(transformed: Fn, f: Fn, args: Operands, argnums: Any) -> tuple[Operand, Pullback]:
    """``vjp`` inside ``vmap``: one vjp per example (:func:`_batched_reverse`)."""
    out, leaves, levels, nested = _batched_reverse(f, args, argnums, "vjp")
    batch_axes = len(levels)

    def vjp_fn(cotangent: Operand) -> tuple[Operand, ...]:
        seed = lift(cotangent, levels)
        if not isinstance(seed, Boxed):
            seed = np.asarray(seed, dtype=np.result_type(data_of(out)))
        # (lift put the same batch axes first on both: compare one example's shapes)
        ct_shape, out_shape = np.shape(data_of(seed)), np.shape(data_of(out))
        _check_cotangent(ct_shape[batch_axes:], out_shape[batch_axes:], " per example")
        if nested and not isinstance(seed, Boxed):
            seed = Tensor(seed)
        grads = _pull_back(out, leaves, seed, nested)
        return tuple(wrap(g, levels) for g in grads)

    return wrap(out if nested else data_of(out), levels), vjp_fn


def _data_inside(x: Operand) -> Operand:
    """``x`` with every graph value in it (inside duals too) replaced by its data."""
    if isinstance(x, Dual):
        return Dual(_data_inside(x.primal), _data_inside(x.tangent), x.tag)
    return data_of(x)


def _vjp_by_grad(
    transformed: Fn, f: Fn, primals: Operands, argnums: Any
) -> tuple[Operand, Pullback]:
    """:func:`vjp` inside both a ``jvp`` and a ``vmap`` (``jvp(vmap(vjp(f)))``,
    ``vmap(jvp(vjp(f)))``): ``vjp_fn(ct)`` is the gradient of ``<f(x), ct>``, which
    :func:`grad` takes through the duals and batches (forward over reverse inside vmap).
    Each call of ``vjp_fn`` runs ``f`` again."""
    out = _one_output(f(*primals), "vjp")

    def vjp_fn(cotangent: Operand) -> tuple[Operand, ...]:
        # (ct an argument: its duals are replayed like x's)
        def weighted(*xs_and_ct: Operand) -> Operand:
            *xs, ct = xs_and_ct
            y = f(*xs) * ct
            return ops.sum(y) if ops.shape(y) else y

        return tuple(grad(weighted, tuple(range(len(primals))))(*primals, cotangent))

    return out, vjp_fn


def _vjp_through_duals(
    transformed: Fn, f: Fn, primals: Operands, argnums: Any
) -> tuple[Operand, Pullback]:
    """:func:`vjp` with dual primals (or a dual cotangent): record on leaves, replay with duals."""
    leaves = [_leaf(innermost(p)) for p in primals]
    pairs = zip(leaves, primals, strict=True)
    substitutions = {leaf: p for leaf, p in pairs if isinstance(p, Dual)}
    out, graph_vjp_fn = vjp(f, *leaves)
    # the forward part is replayed once, shared by every call of vjp_fn
    cache: dict[Node, Operand] = {}

    def vjp_fn(cotangent: Operand) -> Tree:
        subs: dict[Node, Operand] = dict(substitutions)
        seed = cotangent
        if isinstance(cotangent, Dual):
            seed = _leaf(innermost(cotangent), scalar_as_value=isinstance(out, Value))
            subs[seed] = cotangent
        elif not is_node(cotangent) and not isinstance(out, Value):
            seed = Tensor(np.asarray(cotangent, dtype=out.dtype))
        return replay(graph_vjp_fn(seed), subs, cache)

    return replay(out, substitutions, cache), vjp_fn


def _jacrev_in_vmap(transformed: Fn, f: Fn, args: Operands, argnums: int) -> Operand:
    """:func:`jacrev` inside ``vmap``: each example's vjp (one graph for the whole batch),
    with the unit cotangents pushed through it as a second, inner batch."""

    def f_of_x(x: Operand) -> Tree:
        return f(*args[:argnums], x, *args[argnums + 1 :])

    x = args[argnums]
    out, vjp_fn = vjp(f_of_x, x)
    out_shape = out.shape if isinstance(out, Batched) else np.shape(data_of(out))
    x_shape = x.shape if isinstance(x, Batched) else np.shape(data_of(x))
    n = int(np.prod(out_shape, dtype=np.int64))
    (rows,) = vmap(vjp_fn)(np.eye(n).reshape((n, *out_shape)))
    return ops.reshape(rows, tuple(out_shape) + tuple(x_shape))


NESTING: dict[str, tuple[tuple[Callable[[Operands], bool], Adapter], ...]] = {
    "grad": ((_carries_duals, _through_duals), (has_batch, _grad_in_vmap)),
    "jacrev": ((_carries_duals, _through_duals), (has_batch, _jacrev_in_vmap)),
    "jacfwd": ((_has_dual, _through_duals),),
    "vjp": (
        (_duals_and_batches, _vjp_by_grad),
        (has_batch, _vjp_in_vmap),
        (_has_dual, _vjp_through_duals),
    ),
}
