"""The table: the entries of the functions, reductions, shapes, indexing, matmul, softmax
and the fused loss, each defined in one place with all it needs.

What an entry holds, and how one is applied, is :class:`~autodiff_lab.primitive.Primitive`
(:mod:`autodiff_lab.primitive`, with the arithmetic entries ``+ - * / **``); in short:

- ``forward(*inputs, **params)``: the value it computes;
- ``vjp``: one rule per input, ``rule(g, out, *inputs, **params)``, giving that input's
  share of the gradient: the upstream gradient ``g`` times the local derivative
  (reverse mode, the chain rule applied backwards);
- ``jvp``: one rule per input, ``rule(t, out, *inputs, **params)``, giving that input's
  contribution to the output's tangent when the input moves by ``t`` (forward mode);
- its rule as text, its display form in the drawings and its domain;
- ``linear``: whether it is linear in its inputs (the ops a jvp leaves on the tangent
  are), and then ``transposed``: its transpose as text (``sum`` -> ``broadcast``). The
  transpose of a linear op *is* its vjp rule (:meth:`Primitive.transpose`);
- ``batch``: its batching rule, how to apply it to a whole batch at once (``vmap``,
  :mod:`autodiff_lab.batching`).

``Value``, ``Tensor`` and ``Dual`` all compute through the entries (``backward()`` through
:meth:`Primitive.pullback`, ``Dual`` through :meth:`Primitive.pushforward`), and so do the
steppers. Adding an elementwise function means adding one :func:`elementwise` entry here
and one short definition each in ``ops.py`` (``ops.<name>``) and in
:class:`~autodiff_lab.primitive.FunctionMethods` (the method of ``Value``, ``Tensor`` and
``Dual``), which a test asks for; it is then a drawable and steppable node, and the
gradient checks in the tests pick it up from :data:`PRIMITIVES` (they fail until its test
cases are added). The machinery and the arithmetic entries are imported from here too.

The rules are written with ordinary operators and the generic functions of
:mod:`autodiff_lab.ops`. On plain numbers they compute numbers; handed graph values (as
``backward(create_graph=True)`` does) they record a new graph, which can be differentiated
again.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import ops
from .kinds import BatchedArray, Boxed, constant, zeros_like
from .primitive import (
    ADD,
    DIV,
    EVERYWHERE,
    MUL,
    NEG,
    PLAIN_TYPES,
    POW,
    POW_CONST,
    PRIMITIVES,
    SUB,
    Domain,
    Primitive,
    bind,
    broadcast_to,
    check_domain,
    primitive,
    shape,
    sum_to,
)
from .types import Args, Axis, Flags, Fn, Rule, Shape

__all__ = [  # the machinery and the arithmetic entries, imported from here too
    "ADD", "SUB", "MUL", "DIV", "NEG", "POW", "POW_CONST", "EVERYWHERE", "PLAIN_TYPES",
    "PRIMITIVES", "Domain", "Primitive", "bind", "check_domain", "primitive"]  # fmt: skip


# --- batching (vmap): the helpers the batching rules share ----------------------------------
# A batching rule ``batch(args, batched, **params)`` gets each input with its batch axis in
# front where ``batched[i]`` is True (as it is for one example elsewhere) and returns the
# whole batch's result, batch axis first. It uses primitives only, so it can be traced.


def _pad_example(x: Any, rank: int) -> Any:
    """A batch ``x`` whose examples have fewer than ``rank`` axes, with size-1 axes put
    after its batch axis up to ``rank`` (numpy aligns shapes from the right, so the batch
    axis must stay in front of every example axis)."""
    x_shape = shape(x)
    if len(x_shape) - 1 >= rank:
        return x
    return ops.reshape(x, x_shape[:1] + (1,) * (rank - len(x_shape) + 1) + x_shape[1:])


def batch_aligned(args: Args, batched: Sequence[bool]) -> list[Any]:
    """Inputs that broadcast together as the examples do: a batched input of fewer axes
    than the widest example gets size-1 axes after its batch axis (:func:`_pad_example`)."""
    rank = max(len(shape(a)) - b for a, b in zip(args, batched))
    return [_pad_example(a, rank) if b else a for a, b in zip(args, batched)]


def _example_axes(axis: Axis, ndim: int) -> Axis:
    """Axes of one example (``ndim`` axes) as axes of the batch: one further right
    (``None``, all of them, is ``1 … ndim``)."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, int):
        return axis % ndim + 1
    return tuple(a % ndim + 1 for a in axis)


def _batch_over_axis(name: str, default_axis: int | None) -> Fn:
    """sum/mean/max over axis a of each example (softmax, log_softmax along it): over (along)
    axis a + 1 of the batch; the other parameters (keepdims) as they are."""

    def rule(args: Args, batched: Flags, axis: Axis = default_axis, **params: Any) -> Any:
        (x,) = args
        return bind(PRIMITIVES[name], x, axis=_example_axes(axis, len(shape(x)) - 1), **params)

    return rule


# --- choosing entries: where, maximum, minimum ------------------------------------------
# Each entry of the output is one entry of one input, so the gradient goes back to the
# entry chosen (ties of maximum/minimum split it in two halves, as PyTorch and JAX do).


def _symmetric(name: str, forward: Fn, *rules: Rule, **kw: Any) -> Primitive:
    """Register an entry whose Jacobian in each input is symmetric (diagonal for where,
    maximum and minimum, which work entry by entry; softmax's): ``Jᵀg`` and ``Jt`` are the
    same product, so each of ``rules``, ``rule(d, out, *inputs, **params)`` with ``d``
    the gradient ``g`` or the tangent ``t``, is both that input's vjp and its jvp rule."""
    return primitive(name, forward, vjp=rules, jvp=rules, **kw)


def _numbers_stay_numbers(np_fn: Fn) -> Fn:
    """``np_fn`` as a forward that gives a Python float for Python-number inputs (the
    scalar engine holds floats) and arrays otherwise."""

    def forward(*xs: Any) -> Any:
        out = np_fn(*xs)
        return out if any(isinstance(x, np.ndarray) for x in xs) else float(out)

    forward.__name__ = forward.__qualname__ = np_fn.__name__
    return forward


def _chosen(c: Any, x: Any, holds: bool = True) -> Any:
    """``x`` where the condition ``c`` holds (or, ``holds=False``, does not), 0 elsewhere
    (``c`` a constant: its mask)."""
    return bind(WHERE, constant(c), x, 0.0) if holds else bind(WHERE, constant(c), 0.0, x)


WHERE: Primitive  # (its rules apply it again: defined just below)
WHERE = _symmetric(  # where(c, a, b): a where c holds, else b; the condition gets no gradient
    "where",
    _numbers_stay_numbers(np.where),
    lambda d, out, c, a, b: d * 0.0,
    lambda d, out, c, a, b: _chosen(c, d),
    lambda d, out, c, a, b: _chosen(c, d, holds=False),
    broadcasts=True,
    linear="rest",
    transposed="where back (c fixed)",
    batch="broadcasting",
    rule="d where(c, a, b)/da = 1 where c holds, else 0;  d/db = the rest;  d/dc = 0",
)


def _share(a: Any, b: Any, wins: Callable[[Any, Any], Any]) -> Any:
    """The share of the gradient that goes to ``a``: 1 where ``wins(a, b)``, ½ at a tie,
    0 elsewhere (a constant: the choice does not move under a small step)."""
    a, b = constant(a), constant(b)
    share = wins(a, b) * 1.0 + (a == b) * 0.5
    if type(share) is float:  # (Python numbers)
        return share
    dtypes = [x.dtype for x in (a, b) if hasattr(x, "dtype")]
    return share.astype(np.result_type(*dtypes, np.float32))  # float32 stays float32


def _extremum(name: str, forward: Fn, wins: Fn, word: str, sign: str) -> Primitive:
    """maximum (wins = >) or minimum (wins = <): the gradient goes to the operand that wins,
    split in halves on a tie (as torch does)."""
    return _symmetric(
        name,
        _numbers_stay_numbers(forward),
        lambda d, out, a, b: d * _share(a, b, wins),
        lambda d, out, a, b: d * _share(b, a, wins),
        batch="broadcasting",
        broadcasts=True,
        rule=f"d {word}(a, b)/da = 1 where a {sign} b, ½ where a = b, else 0 (and alike for b)",
    )


MAXIMUM = _extremum("maximum", np.maximum, operator.gt, "max", ">")  # the larger, entry by entry
MINIMUM = _extremum("minimum", np.minimum, operator.lt, "min", "<")  # the smaller, entry by entry

# --- elementwise functions ---------------------------------------------------------------
# Each is also a function of every kind of number (``ops.exp``) and a method of Value,
# Tensor and Dual (``x.exp()``): both are made from this table.

ELEMENTWISE: list[Primitive] = []


def elementwise(
    name: str, on_float: Fn, on_array: Fn, vjp: Rule, jvp: Rule, **kw: Any
) -> Primitive:
    """Register an elementwise primitive: ``on_float`` computes it for a Python number,
    ``on_array`` for a numpy array; ``vjp`` and ``jvp`` are its one rule each. Its batching
    rule comes free: applied to a batch, it applies to every entry of every example."""

    def forward(x: Any) -> Any:
        if type(x) is float or type(x) is int:
            return on_float(x)
        return on_array(x)

    forward.__name__ = forward.__qualname__ = name
    prim = primitive(name, forward, vjp=(vjp,), jvp=(jvp,), batch="broadcasting", **kw)
    ELEMENTWISE.append(prim)
    return prim


def _stable_sigmoid(x: Any) -> Any:
    """sigmoid(x) = 1 / (1 + e^-x), computed without overflow for large |x|."""
    if type(x) is float or type(x) is int:  # not numpy scalars: they stay numpy
        if x >= 0:
            return 1.0 / (1.0 + math.exp(-x))
        e = math.exp(x)
        return e / (1.0 + e)
    x = np.asarray(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _float_log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf if x == 0 else math.nan


EXP = elementwise(
    "exp",
    math.exp,
    np.exp,
    vjp=lambda g, out, x: g * out,
    jvp=lambda t, out, x: t * out,
    rule="d eˣ/dx = eˣ",
)
LOG = elementwise(
    "log",
    _float_log,
    np.log,
    vjp=lambda g, out, x: g / x,
    jvp=lambda t, out, x: t / x,
    rule="d log x/dx = 1/x",
    domain=Domain("x > 0", outside=lambda x: x < 0, edge=lambda x: x == 0),
)
LOG1P = elementwise(  # log(1 + x), accurate for tiny x (where 1 + x rounds to 1)
    "log1p",
    lambda x: math.log1p(x) if x > -1 else -math.inf if x == -1 else math.nan,
    np.log1p,
    vjp=lambda g, out, x: g / (1 + x),
    jvp=lambda t, out, x: t / (1 + x),
    rule="d log(1 + x)/dx = 1/(1 + x)",
    domain=Domain("x > -1", outside=lambda x: x < -1, edge=lambda x: x == -1),
)
TANH = elementwise(
    "tanh",
    math.tanh,
    np.tanh,
    vjp=lambda g, out, x: g * (1 - out * out),
    jvp=lambda t, out, x: t * (1 - out * out),
    rule="d tanh x/dx = 1 − tanh²x",
)
SIGMOID = elementwise(
    "sigmoid",
    _stable_sigmoid,
    _stable_sigmoid,
    vjp=lambda g, out, x: g * out * (1 - out),
    jvp=lambda t, out, x: t * out * (1 - out),
    rule="d σ(x)/dx = σ(x)(1 − σ(x))",
)
SOFTPLUS = elementwise(  # a smooth relu: log(1 + e^x) = max(x, 0) + log(1 + e^-|x|)
    "softplus",
    lambda x: max(x, 0.0) + math.log1p(math.exp(-abs(x))),
    lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))),
    vjp=lambda g, out, x: g * ops.sigmoid(x),
    jvp=lambda t, out, x: t * ops.sigmoid(x),
    rule="d softplus(x)/dx = σ(x)",
)
RELU = elementwise(  # the slope at x = 0 is 0, as in PyTorch
    "relu",
    lambda x: 0.0 if x <= 0 else x,  # (nan stays nan)
    lambda x: np.maximum(x, 0),
    vjp=lambda g, out, x: g * (constant(x) > 0),
    jvp=lambda t, out, x: t * (constant(x) > 0),
    rule="d relu(x)/dx = 1 if x > 0 else 0",
    symbol="ReLU",
)
SIN = elementwise(
    "sin",
    math.sin,
    np.sin,
    vjp=lambda g, out, x: g * ops.cos(x),
    jvp=lambda t, out, x: t * ops.cos(x),
    rule="d sin x/dx = cos x",
)
COS = elementwise(
    "cos",
    math.cos,
    np.cos,
    vjp=lambda g, out, x: -g * ops.sin(x),
    jvp=lambda t, out, x: -t * ops.sin(x),
    rule="d cos x/dx = −sin x",
)
SQRT = elementwise(
    "sqrt",
    math.sqrt,
    np.sqrt,
    vjp=lambda g, out, x: g * 0.5 / out,
    jvp=lambda t, out, x: t * 0.5 / out,
    rule="d √x/dx = 1/(2√x)",
    domain=Domain("x >= 0", outside=lambda x: x < 0),
)


def _sign(x: Any) -> Any:
    """sign(x) as a constant: −1, 0 or 1 (each example's own, in a batch)."""
    c = constant(x)
    batch = isinstance(c, BatchedArray)  # (numpy's sign cannot look inside a batch)
    return (c > 0) * 1.0 - (c < 0) * 1.0 if batch else np.sign(c)


ABS = elementwise(  # the slope at x = 0 is 0, as in PyTorch
    "abs",
    abs,
    np.abs,
    vjp=lambda g, out, x: g * _sign(x),
    jvp=lambda t, out, x: t * _sign(x),
    rule="d |x|/dx = sign(x)",
)

# --- reductions and reshaping (tensors) --------------------------------------------------


def _kept_dims(r: Any, x_shape: Shape, axis: Axis, keepdims: bool) -> Any:
    """A reduction's result ``r`` with the axes it removed put back, as size 1."""
    if keepdims or axis is None:
        return r
    axes = {a % len(x_shape) for a in ((axis,) if isinstance(axis, int) else axis)}
    return ops.reshape(r, tuple(1 if i in axes else n for i, n in enumerate(x_shape)))


def _expand_reduced(g: Any, x: Any, axis: Axis, keepdims: bool) -> Any:
    """Put back the axes a reduction of ``x`` removed, then broadcast to ``x``'s shape."""
    x_shape = shape(x)
    return broadcast_to(_kept_dims(g, x_shape, axis, keepdims), x_shape)


def _count(x_shape: Shape, axis: Axis) -> int:
    axes = range(len(x_shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    return int(np.prod([x_shape[a] for a in axes], dtype=np.int64))


SUM = primitive(  # every input entry contributes once: the gradient is copied back
    "sum",
    lambda x, axis=None, keepdims=False: np.asarray(x).sum(axis=axis, keepdims=keepdims),
    vjp=(lambda g, out, x, axis=None, keepdims=False: _expand_reduced(g, x, axis, keepdims),),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.sum(t, axis, keepdims),),
    linear="all",
    transposed="broadcast",
    batch=_batch_over_axis("sum", None),
    rule="every entry of the input contributes once: the gradient is copied back",
)
MEAN = primitive(  # a sum divided by the count of entries summed
    "mean",
    lambda x, axis=None, keepdims=False: np.asarray(x).mean(axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, x, axis, keepdims) / _count(shape(x), axis)
        ),
    ),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.mean(t, axis, keepdims),),
    linear="all",
    transposed="broadcast ÷ n",
    batch=_batch_over_axis("mean", None),
    rule="like sum, divided by the number of entries averaged",
)


def _argmax_mask(out: Any, x: Any, axis: Axis, keepdims: bool) -> Any:
    """1/k at the k entries equal to the max (ties share the gradient), 0 elsewhere."""
    x = constant(x)
    mask = (x == _kept_dims(constant(out), shape(x), axis, keepdims)).astype(x.dtype)
    return mask / ops.sum(mask, axis, keepdims=True)


MAX = primitive(  # only the largest entry moves the max
    "max",
    lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, x, axis, keepdims) * _argmax_mask(out, x, axis, keepdims)
        ),
    ),
    jvp=(
        lambda t, out, x, axis=None, keepdims=False: ops.sum(
            t * _argmax_mask(out, x, axis, keepdims), axis, keepdims
        ),
    ),
    batch=_batch_over_axis("max", None),
    rule="only the largest entry moves the max: it gets the whole gradient",
)

# --- batching rules of the shape ops (vmap; see batch_aligned above) ---------------------


def _batch_reshape(args: Args, batched: Flags, **params: Any) -> Any:
    """Each example reshaped: the batch axis stays in front."""
    (x,) = args
    return bind(RESHAPE, x, shape=(shape(x)[0], *params["shape"]))


def _batch_transpose(args: Args, batched: Flags, axes: Shape | None = None) -> Any:
    """Each example's axes permuted: the batch axis stays in front."""
    (x,) = args
    n = len(shape(x)) - 1
    example = range(n - 1, -1, -1) if axes is None else (a % n for a in axes)
    return bind(TRANSPOSE, x, axes=(0, *(a + 1 for a in example)))


def _batch_broadcast_to(args: Args, batched: Flags, **params: Any) -> Any:
    """Each example broadcast: new axes go after the batch axis."""
    (x,) = args
    x = _pad_example(x, len(params["shape"]))
    return bind(BROADCAST_TO, x, shape=(shape(x)[0], *params["shape"]))


def _batch_index(index: Any) -> tuple[tuple[Any, ...], int]:
    """One example's index as an index of the batch (``:`` for the batch axis in front),
    and how many axes numpy puts before the batch axis: when integer-array indices are
    separated by a slice, numpy moves their axes to the front of the result."""
    parts: list[Any] = []
    for p in index if isinstance(index, tuple) else (index,):
        if isinstance(p, np.ndarray) and p.dtype == bool:
            parts.extend(np.nonzero(p))  # a mask selects as the integer arrays of its True entries
        else:
            parts.append(p)
    front = 0
    if any(isinstance(p, np.ndarray) for p in parts):
        advanced = [i for i, p in enumerate(parts) if isinstance(p, np.ndarray | numbers.Integral)]
        if advanced[-1] - advanced[0] + 1 != len(advanced):
            front = len(np.broadcast_shapes(*(np.shape(parts[i]) for i in advanced)))
    return (slice(None), *parts), front


def _batch_getitem(args: Args, batched: Flags, index: Any) -> Any:
    """Each example indexed alike: ``x[:, index]`` (batch axis put back in front)."""
    (x,) = args
    batch_index, front = _batch_index(index)
    return ops.move_axis(bind(GETITEM, x, index=batch_index), front, 0)


def _batch_scatter_add(args: Args, batched: Flags, index: Any, **params: Any) -> Any:
    """Each example scattered alike into its own zeros: ``out[:, index] += g``."""
    (g,) = args
    size = shape(g)[0]
    batch_index, front = _batch_index(index)
    g = ops.move_axis(g, 0, front)  # laid out as numpy lays out out[:, index]
    return bind(SCATTER_ADD, g, index=batch_index, shape=(size, *params["shape"]))


def _batch_concatenate(args: Args, batched: Flags, axis: int = 0) -> Any:
    """Each example joined along ``axis``: along ``axis + 1`` of the batch (inputs shared
    by every example are repeated first)."""
    size = next(shape(a)[0] for a, b in zip(args, batched) if b)
    parts = [a if b else broadcast_to(a, (size, *shape(a))) for a, b in zip(args, batched)]
    return bind(CONCATENATE, *parts, axis=_example_axes(axis, len(shape(parts[0])) - 1))


def _batch_matmul(args: Args, batched: Flags) -> Any:
    """A batch of matrix products is one batched matrix product (numpy's ``@`` treats
    leading axes as a stack). Vectors become 1-row / 1-column matrices first, and their
    extra axis is dropped again after."""
    a, b = args
    a_vector = len(shape(a)) - batched[0] == 1
    b_vector = len(shape(b)) - batched[1] == 1
    if a_vector:  # (…, k) -> (…, 1, k)
        a = ops.reshape(a, shape(a)[:-1] + (1,) + shape(a)[-1:])
    if b_vector:  # (…, k) -> (…, k, 1)
        b = ops.reshape(b, shape(b) + (1,))
    out = bind(MATMUL, *batch_aligned([a, b], batched))
    if a_vector or b_vector:  # (…, m, n): a vector a's row axis m, b's column axis n dropped
        out_shape = shape(out)
        out = ops.reshape(out, out_shape[:-2] + out_shape[-2:][a_vector : 2 - b_vector])
    return out


def _batch_cross_entropy(args: Args, batched: Flags, targets: Any) -> Any:
    """Each example's loss −mean_n log softmax(z_n)[y_n], for the whole batch at once;
    ``targets`` of shape (batch, N) when the labels differ per example."""
    (z,) = args  # (batch, N, C), or (N, C) shared by every example
    logp = bind(LOG_SOFTMAX, z, axis=-1)
    rows: slice | np.ndarray = slice(None)
    if np.ndim(targets) == 2:  # example k reads its own labels, row k of targets
        size = shape(targets)[0]
        if not batched[0]:
            logp = broadcast_to(logp, (size, *shape(logp)))
        rows = np.arange(size).reshape(size, 1)
    picked = bind(GETITEM, logp, index=(rows, np.arange(shape(logp)[1]), targets))
    return bind(NEG, bind(MEAN, picked, axis=1))


RESHAPE = primitive(
    "reshape",
    lambda x, shape: np.reshape(x, shape),
    vjp=(lambda g, out, x, shape: ops.reshape(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: ops.reshape(t, shape),),
    linear="all",
    transposed="reshape back",
    batch=_batch_reshape,
    rule="the gradient is reshaped back to the input's shape",
)
TRANSPOSE = primitive(  # undone by the inverse permutation
    "transpose",
    lambda x, axes=None: np.transpose(x, axes),
    vjp=(
        lambda g, out, x, axes=None: ops.transpose(
            g, None if axes is None else tuple(np.argsort(np.mod(axes, len(axes))))
        ),
    ),
    jvp=(lambda t, out, x, axes=None: ops.transpose(t, axes),),
    linear="all",
    transposed="transpose back",
    batch=_batch_transpose,
    rule="the gradient is transposed back",
)
BROADCAST_TO = primitive(  # copies along new axes; the gradient adds the copies up
    "broadcast_to",
    lambda x, shape: np.broadcast_to(x, shape),
    vjp=(lambda g, out, x, shape: sum_to(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: broadcast_to(t, shape),),
    linear="all",
    transposed="sum",
    batch=_batch_broadcast_to,
    rule="copies add up: the gradient is summed back to the input's shape",
)


def index_text(index: Any, limit: int = 16) -> str:
    """An index as written in Python: ``0:2``, ``1, ::2``, ``array(5,)`` (shortened)."""

    def one(i: Any) -> str:
        if isinstance(i, slice):
            parts = ["" if v is None else str(v) for v in (i.start, i.stop, i.step)]
            return ":".join(parts[:2] if i.step is None else parts)
        if isinstance(i, np.ndarray):
            return f"array{i.shape}"
        return "..." if i is Ellipsis else "None" if i is None else str(i)

    text = ", ".join(one(i) for i in index) if isinstance(index, tuple) else one(index)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scatter_add(g: Any, index: Any, shape: Shape) -> Any:
    out = np.zeros(shape, dtype=np.result_type(g))
    np.add.at(out, index, g)  # repeated indices add up, they do not overwrite
    return out


SCATTER_ADD: Primitive  # (defined below: indexing and scattering are each other's transpose)
GETITEM = primitive(  # x[index]: the gradient goes back to the entries that were read
    "getitem",
    lambda x, index: x[index],
    vjp=(lambda g, out, x, index: bind(SCATTER_ADD, g, index=index, shape=shape(x)),),
    jvp=(lambda t, out, x, index: t[index],),
    symbol="[]",
    linear="all",
    transposed="scatter-add",
    batch=_batch_getitem,
    rule="the gradient goes back to the entries that were read",
    display=lambda params: f"[{index_text(params['index'])}]",
)
SCATTER_ADD = primitive(  # the transpose of indexing: add g into zeros at index
    "scatter_add",
    _scatter_add,
    vjp=(lambda g, out, x, index, shape: g[index],),
    jvp=(lambda t, out, x, index, shape: bind(SCATTER_ADD, t, index=index, shape=shape),),
    linear="all",
    transposed="gather",
    batch=_batch_scatter_add,
    rule="the gradient is read back at the same index",
)


def _concat_vjp_all(g: Any, out: Any, *xs: Any, axis: int = 0) -> list[Any]:
    edges = [0, *np.cumsum([shape(x)[axis] for x in xs])[:-1], shape(out)[axis]]
    index: list[Any] = [slice(None)] * len(shape(out))
    pieces = []
    for start, stop in zip(edges[:-1], edges[1:]):
        index[axis] = slice(start, stop)
        pieces.append(g[tuple(index)])
    return pieces


def _concat_jvp_all(tangents: Args, out: Any, *xs: Any, axis: int = 0) -> Any:
    parts = [t if t is not None else zeros_like(x) for t, x in zip(tangents, xs, strict=True)]
    return bind(CONCATENATE, *parts, axis=axis)


CONCATENATE = primitive(  # each input gets back its own slice of the gradient
    "concatenate",
    lambda *xs, axis=0: np.concatenate(xs, axis=axis),
    vjp_all=_concat_vjp_all,
    jvp_all=_concat_jvp_all,
    linear="all",
    transposed="split",
    batch=_batch_concatenate,
    rule="each input gets back its own slice of the gradient",
)

MATMUL = primitive(  # C = A B:  dA = G B^T,  dB = A^T G   (1-D and batched cases below)
    "matmul",
    lambda a, b: a @ b,
    vjp=(
        lambda g, out, a, b: _matmul_grad_a(g, a, b),
        lambda g, out, a, b: _matmul_grad_b(g, a, b),
    ),
    jvp=(lambda t, out, a, b: t @ b, lambda t, out, a, b: a @ t),
    linear="each",
    transposed="@ cᵀ",
    batch=_batch_matmul,
    rule="C = A B:  dA = G Bᵀ,  dB = Aᵀ G",
    symbol="@",
    notation="infix",
)


def _mT(x: Any) -> Any:
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape(x))
    return ops.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_grad_a(g: Any, a: Any, b: Any) -> Any:
    if a.ndim == 2 and b.ndim == 2:  # the common case: dA = G B^T
        return g @ b.T
    if len(shape(b)) == 1:  # (..., k) @ (k,) -> (...): dA = g[..., None] * b
        return sum_to(ops.reshape(g, shape(g) + (1,)) * b, shape(a))
    if len(shape(a)) == 1:  # (k,) @ (..., k, n) -> (..., n): dA = sum of b @ g
        return sum_to(ops.reshape(b @ ops.reshape(g, shape(g) + (1,)), shape(b)[:-1]), shape(a))
    return sum_to(g @ _mT(b), shape(a))


def _matmul_grad_b(g: Any, a: Any, b: Any) -> Any:
    if a.ndim == 2 and b.ndim == 2:  # the common case: dB = A^T G
        return a.T @ g
    if len(shape(a)) == 1 and len(shape(b)) == 1:  # dot product: dB = g a
        return g * a
    if len(shape(a)) == 1:  # (k,) @ (..., k, n): dB = a[:, None] * g[..., None, :]
        g2 = ops.reshape(g, shape(g)[:-1] + (1, shape(g)[-1]))
        return sum_to(ops.reshape(a, (shape(a)[0], 1)) * g2, shape(b))
    if len(shape(b)) == 1:  # (..., k) @ (k,): dB = Σ over the leading axes of a[..., :] g[...]
        n = int(np.prod(shape(g)))  # = A2ᵀ g2 with the leading axes flattened (a matmul, so a
        a2 = ops.reshape(a, (n, shape(b)[0]))  # batch of cotangents never builds (B, …, k))
        return ops.transpose(a2, (1, 0)) @ ops.reshape(g, (n,))
    return sum_to(_mT(a) @ g, shape(b))


# --- softmax and the fused loss ----------------------------------------------------------

SOFTMAX = _symmetric(  # J = diag(s) - s sᵀ:  J^T g = J g = s * (g - <g, s>) along the axis
    "softmax",
    lambda x, axis=-1: ops.softmax(x, axis),
    lambda d, out, x, axis=-1: out * (d - ops.sum(d * out, axis, keepdims=True)),
    batch=_batch_over_axis("softmax", -1),
    rule="Jᵀg = s ⊙ (g − ⟨g, s⟩)",
)
LOG_SOFTMAX = primitive(  # d log_softmax: g - softmax * sum(g)
    "log_softmax",
    lambda x, axis=-1: ops.log_softmax(x, axis),
    vjp=(lambda g, out, x, axis=-1: g - ops.exp(out) * ops.sum(g, axis, keepdims=True),),
    jvp=(lambda t, out, x, axis=-1: t - ops.sum(ops.exp(out) * t, axis, keepdims=True),),
    batch=_batch_over_axis("log_softmax", -1),
    rule="Jᵀg = g − softmax · Σg",
)


def _one_hot(targets: Any, num_classes: int, dtype: Any) -> Any:
    eye = np.zeros((len(targets), num_classes), dtype=dtype)
    eye[np.arange(len(targets)), targets] = 1
    return eye


def _cross_entropy(logits: Any, targets: Any) -> Any:
    logp = ops.log_softmax(logits, -1)
    return -logp[np.arange(len(targets)), targets].sum() / len(targets)


def _cross_entropy_vjp(g: Any, out: Any, z: Any, targets: Any) -> Any:
    """dL/dz = g (softmax(z) - onehot(targets)) / N."""
    n, classes = shape(z)
    p = ops.softmax(z, -1)
    if type(p) is np.ndarray and not isinstance(g, Boxed):  # a fresh array: in place, no copy
        p[np.arange(n), targets] -= 1
        p *= g / n
        return p
    return g * (p - _one_hot(targets, classes, constant(z).dtype)) / n


CROSS_ENTROPY = primitive(  # mean_i -log softmax(z_i)[y_i]
    "cross_entropy",
    _cross_entropy,
    vjp=(_cross_entropy_vjp,),
    jvp=(
        lambda t, out, z, targets: ops.mean(
            ops.sum(ops.softmax(z, -1) * t, -1, keepdims=False)
            - ops.sum(t * _one_hot(targets, shape(z)[1], constant(z).dtype), -1, keepdims=False)
        ),
    ),
    batch=_batch_cross_entropy,
    batched_params=("targets",),
    rule="d loss/d logits = (softmax − one-hot) / N",
)

# --- many scalars at once (Value) --------------------------------------------------------
# A neuron's weighted sum w1*x1 + ... + wn*xn + b as ONE node instead of 2n nodes: the same
# local derivatives (d/dwi = xi, d/dxi = wi, d/db = 1), far less bookkeeping per step.

ADD_N = primitive(  # x1 + x2 + ... + xn:  every input gets the upstream gradient
    "add_n",
    lambda *xs: _sum_numbers(xs),
    vjp_all=lambda g, out, *xs: [g] * len(xs),
    jvp_all=lambda ts, out, *xs: _sum_numbers([t for t in ts if t is not None]),
    symbol="Σ",
    linear="all",
    transposed="fan-out",
    batch="broadcasting",
    rule="d(x₁ + … + xₙ)/dxᵢ = 1",
)


def _dot_vjp_all(g: Any, out: Any, *xs: Any) -> list[Any]:
    n = len(xs) // 2
    ws, vs = xs[:n], xs[n:]
    return [g * v for v in vs] + [g * w for w in ws]


def _dot_jvp_all(ts: Args, out: Any, *xs: Any) -> Any:
    n = len(xs) // 2
    ws, vs, tws, tvs = xs[:n], xs[n:], ts[:n], ts[n:]
    terms = [t * v for t, v in zip(tws, vs) if t is not None]
    terms += [w * t for w, t in zip(ws, tvs) if t is not None]
    return _sum_numbers(terms)


DOT = primitive(  # w1*x1 + ... + wn*xn  (inputs: w1..wn, x1..xn):  d/dwi = xi,  d/dxi = wi
    "dot",
    lambda *xs: _sum_numbers([w * v for w, v in zip(xs[: len(xs) // 2], xs[len(xs) // 2 :])]),
    vjp_all=_dot_vjp_all,
    jvp_all=_dot_jvp_all,
    symbol="·",
    batch="broadcasting",
    rule="d(Σ wᵢxᵢ)/dwᵢ = xᵢ,  d(Σ wᵢxᵢ)/dxᵢ = wᵢ",
)


def _sum_numbers(xs: Iterable[Any]) -> Any:
    total = 0.0
    for x in xs:
        total = total + x
    return total
