"""``vmap``: batching as a transformation.

``vmap(f)(xs)`` computes ``[f(x) for x in xs]`` stacked, but runs ``f`` once: each
argument becomes a :class:`Batched` value, ``Batched(val, tag)``, a whole batch of
examples (``val[0], val[1], …``, the batch along axis 0) that ``f`` handles as if it were
one example (``x.shape`` is the shape of one example). Every primitive applied to it uses
its *batching rule* (``Primitive.batch``, one per primitive in
:mod:`autodiff_lab.primitives`): how to apply the op to the whole batch at once, batch
axis first. Elementwise ops need nothing more (numpy broadcasting carries the batch axis
along); a reduction over axis ``a`` of an example reduces axis ``a + 1`` of the batch; a
matrix product becomes a batched matrix product.

Like ``Dual``, a ``Batched`` value is a tracer with a ``tag`` (one per ``vmap`` call), so
``vmap`` nests with itself and with ``jvp`` (the newest call handles an op first, then
the next layer, see :func:`autodiff_lab.primitives.bind`). Reverse mode inside ``vmap``
(per-example gradients, ``vmap(grad(loss), in_axes=(None, 0, 0))``) records the graph of
the whole batch with batched leaves, so each example's gradient stays its own
(``autodiff_lab.functional._batched_reverse``, with :func:`lift` and :func:`wrap`).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import ops
from . import primitives as P
from .dual import Dual, new_tag
from .kinds import BatchedArray, Boxed, constant
from .methods import ArrayMethods, _plain_index
from .primitive import bind
from .types import Axes, Fn, Index, Operand, Operands, Shape, Tree


def _comparison(op: Callable[[Operand, Operand], Operand]) -> Callable[[Batched, Operand], Operand]:
    """The comparison ``op`` of a batch: each example's own (plain booleans, no derivative)."""

    def compare(self: Batched, other: Operand) -> Operand:
        a, b = constant(self), constant(other)
        tag = max(x.tag for x in (a, b) if isinstance(x, Batched))
        batched = [isinstance(x, Batched) and x.tag == tag for x in (a, b)]
        args = P.batch_aligned([x.val if m else x for x, m in zip((a, b), batched)], batched)
        return Batched(op(*args), tag)

    compare.__name__ = compare.__qualname__ = f"__{op.__name__}__"
    return compare


class Batched(BatchedArray, ArrayMethods):
    """A batch of examples, ``val[0], val[1], …``, pushed through a function by the
    ``vmap`` call ``tag``. ``shape`` is the shape of one example; ``val`` may hold plain
    arrays, graph nodes, duals or the batches of outer ``vmap`` calls."""

    __slots__ = ("val", "tag")
    __array_ufunc__ = None  # ndarray + Batched defers to Batched.__radd__

    def __init__(self, val: Operand, tag: int) -> None:
        self.val, self.tag = val, tag

    @classmethod
    def _apply(cls, prim: P.Primitive, *inputs: Operand, **params: Any) -> Batched:
        """Apply ``prim`` to the batch: unwrap this call's batches (the newest tag among
        the inputs; other values are the same for every example) and run its batching rule."""
        tag = max(x.tag for x in (*inputs, *params.values()) if isinstance(x, Batched))
        batched = [isinstance(x, Batched) and x.tag == tag for x in inputs]
        args = [x.val if b else x for x, b in zip(inputs, batched)]
        # a parameter its rule takes per example (cross_entropy's labels), batch axis first
        per_example = {
            k: v.val
            for k, v in params.items()
            if k in prim.batched_params and isinstance(v, Batched) and v.tag == tag
        }
        sizes = {ops.shape(a)[0] for a, b in zip(args, batched) if b}
        sizes |= {ops.shape(v)[0] for v in per_example.values()}
        if len(sizes) > 1:
            raise ValueError(
                f"vmap {prim.name}: the inputs have different batch sizes {sorted(sizes)} "
                f"(example shapes {[ops.shape(x) for x in inputs]})"
            )
        if prim.batch is None:
            raise NotImplementedError(
                f"vmap: primitive {prim.name!r} has no batching rule; give its entry a "
                "batch=rule(args, batched, **params) (see autodiff_lab.primitives)"
            )
        if prim is P.GETITEM and _holds_batch(params["index"]):
            return _take_per_example(inputs[0], params["index"])
        params = {**params, **per_example}
        for name, value in params.items():
            if _holds_batch(value) and name not in per_example:
                raise NotImplementedError(
                    f"vmap {prim.name}: a parameter that differs per example (here "
                    f"{list(params)}) is not supported; only the inputs may be batched"
                )
        if prim.batch == "broadcasting":  # elementwise: the batch axis rides along
            out = bind(prim, *P.batch_aligned(args, batched), **params)
        else:
            # (a rule: the one str, "broadcasting", is handled above)
            out = prim.batch(args, batched, **params)  # type: ignore[operator]
        (size,) = sizes
        if ops.shape(out)[:1] != (size,):
            raise RuntimeError(
                f"vmap {prim.name}: the batching rule returned shape {ops.shape(out)}, "
                f"which does not start with the batch size {size}"
            )
        return Batched(out, tag)

    # --- facts about one example ---------------------------------------------------

    @property
    def shape(self) -> Shape:
        return tuple(ops.shape(self.val)[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        inner = constant(self.val)  # (another vmap's batch: the dtype of its examples)
        return inner.dtype if isinstance(inner, Batched) else np.result_type(inner)

    @property
    def batch_size(self) -> int:
        return int(ops.shape(self.val)[0])

    def __len__(self) -> int:
        return self.shape[0]

    def constant(self) -> Batched:
        """The same batch, every example's history and tangents dropped."""
        inner = constant(self.val)
        return self if inner is self.val else Batched(inner, self.tag)

    def astype(self, dtype: DTypeLike) -> Batched:
        """Every example converted to ``dtype`` (no derivative: a constant)."""
        inner = self.constant().val  # (another vmap's batch converts its own examples)
        val = inner.astype(dtype) if isinstance(inner, Batched) else np.asarray(inner).astype(dtype)
        return Batched(val, self.tag)

    def __getitem__(self, index: Index) -> Operand:
        if _holds_batch(index):  # each example has its own index (a class label…)
            return _take_per_example(self, index)
        index = _plain_index(index)
        try:
            np.empty(self.shape)[index]  # the check, on one example's shape
        except IndexError as e:
            raise IndexError(f"Batched []: index {index!r} for shape {self.shape}: {e}") from None
        return self._apply(P.GETITEM, self, index=index)

    # --- comparisons: per example, no derivative (masks in rules, control by data) ---

    __lt__ = _comparison(operator.lt)
    __le__ = _comparison(operator.le)
    __gt__ = _comparison(operator.gt)
    __ge__ = _comparison(operator.ge)
    __eq__ = _comparison(operator.eq)
    __ne__ = _comparison(operator.ne)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            "vmap: a batched value has no single truth value (each example has its own); "
            "`if x > 0:` on a batch cannot be vmapped: use a mask, e.g. relu or x * (x > 0)"
        )

    def __repr__(self) -> str:
        return f"Batched(batch of {self.batch_size}, example shape {self.shape}, tag={self.tag})"


def _take_per_example(x: Operand, index: Index) -> Batched:
    """``x[index]`` where the index differs from example to example (``logp[y]`` with a
    batch of labels ``y``): ONE integer-array index of the whole batch, ``arange(B)``
    choosing each example's own slice. Indices are integers and integer arrays only."""
    parts = index if isinstance(index, tuple) else (index,)
    tag = max(p.tag for p in parts if isinstance(p, Batched))
    if any(
        not isinstance(p, Batched | np.ndarray | numbers.Integral)
        or isinstance(p, Batched)
        and p.tag != tag
        for p in parts
    ) or (isinstance(x, Batched) and x.tag > tag):
        raise NotImplementedError(
            f"vmap []: an index that differs per example works with integers and integer "
            f"arrays only (no slices, no other vmap's batches), got {index!r}"
        )
    batched = [isinstance(p, Batched) for p in parts]
    vals = [np.asarray(constant(p).val if b else p) for p, b in zip(parts, batched)]
    if any(v.dtype.kind not in "iu" for v in vals):
        raise TypeError(f"vmap []: a per-example index must hold integers, got {index!r}")
    size = next(v.shape[0] for v, b in zip(vals, batched) if b)
    rank = max(v.ndim - b for v, b in zip(vals, batched))  # an example's index ndim
    rows = np.arange(size).reshape((size,) + (1,) * rank)  # example k reads its own slice
    index = (rows, *P.batch_aligned(vals, batched))
    return Batched(bind(P.GETITEM, _examples(x, tag, size), index=index), tag)


def _examples(x: Operand, tag: int, size: int) -> Operand:
    """The ``size`` examples of the vmap call ``tag`` in ``x``, batch axis first: its own
    batch's, or ``x`` repeated along a new batch axis (a value the same for every example)."""
    if isinstance(x, Batched) and x.tag == tag:
        return x.val
    return ops.broadcast_to(x, (size, *ops.shape(x)))


def _holds_batch(value: Tree) -> bool:
    if isinstance(value, tuple | list):
        return any(_holds_batch(v) for v in value)
    return isinstance(value, BatchedArray)


# --- vmap -------------------------------------------------------------------------------


def vmap(f: Fn, in_axes: Axes = 0, out_axes: Axes = 0) -> Fn:
    """``vmap(f)(xs)`` = ``stack([f(x) for x in xs])``, computed in one pass over the batch.

    ``in_axes`` says, for each positional argument, which axis holds the batch (an int),
    or None for an argument shared by every example; one int or None applies to all
    arguments, a tuple gives one entry per argument (an argument that is a tuple or list
    has the entry applied to each of its items). ``out_axes`` places the batch axis in
    each output (None: an output that is the same for every example). ``f`` may return
    one array or a tuple/list of them.
    """

    def vmapped(*args: Tree) -> Tree:
        axes = _per_argument(in_axes, len(args))
        tag = new_tag()
        sizes: list[tuple[int, int, int]] = []  # (size, argument, axis)
        wrapped = [
            _batch_argument(a, ax, tag, k, sizes) for k, (a, ax) in enumerate(zip(args, axes))
        ]
        if not sizes:
            raise ValueError(
                f"vmap: in_axes={in_axes!r} batches none of the {len(args)} arguments; "
                "at least one must have an int axis"
            )
        size = sizes[0][0]
        for s, k, ax in sizes[1:]:
            if s != size:
                raise ValueError(
                    f"vmap: argument {sizes[0][1]} has batch size {size} (axis "
                    f"{sizes[0][2]}) but argument {k} has batch size {s} (axis {ax}); "
                    f"in_axes={in_axes!r} must pick axes of the same size"
                )
        return _unbatch_output(f(*wrapped), out_axes, tag, size)

    vmapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    return vmapped


def _per_argument(in_axes: Axes, n: int) -> tuple[Axes, ...]:
    if in_axes is None or isinstance(in_axes, int):
        return (in_axes,) * n
    if not isinstance(in_axes, tuple | list):
        raise TypeError(f"vmap: in_axes must be an int, None or a tuple, got {in_axes!r}")
    if len(in_axes) != n:
        raise ValueError(
            f"vmap: in_axes={tuple(in_axes)!r} has {len(in_axes)} entries but the function "
            f"was called with {n} positional arguments"
        )
    for ax in in_axes:
        if ax is not None and not isinstance(ax, int | tuple | list):
            raise TypeError(f"vmap: each in_axes entry must be an int or None, got {ax!r}")
    return tuple(in_axes)


def _batch_argument(
    x: Tree, axis: Any, tag: int, k: int, sizes: list[tuple[int, int, int]]
) -> Tree:
    """Argument ``k`` with its batch axis moved to the front and wrapped as a batch."""
    if isinstance(x, tuple | list):
        items = axis if isinstance(axis, tuple | list) else [axis] * len(x)
        if len(items) != len(x):
            raise ValueError(
                f"vmap: in_axes entry {axis!r} does not match argument {k}'s {len(x)} items"
            )
        return type(x)(_batch_argument(v, a, tag, k, sizes) for v, a in zip(x, items))
    if axis is None:
        return x
    if not isinstance(x, Boxed | np.ndarray):
        x = np.asarray(x, dtype=float)
    shape = ops.shape(x)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(
            f"vmap: in_axes asks for axis {axis} of argument {k}, which has shape {shape} "
            f"({len(shape)} axes)"
        )
    sizes.append((shape[axis], k, axis))
    return Batched(ops.move_axis(x, axis % len(shape), 0), tag)


def _unbatch_output(out: Tree, out_axes: Axes, tag: int, size: int) -> Tree:
    """The batch of call ``tag`` taken out of ``out``, its axis put at ``out_axes``."""
    if isinstance(out, tuple | list):
        axes = out_axes if isinstance(out_axes, tuple | list) else [out_axes] * len(out)
        if len(axes) != len(out):
            raise ValueError(f"vmap: out_axes={out_axes!r} does not match the {len(out)} outputs")
        return type(out)(_unbatch_output(o, a, tag, size) for o, a in zip(out, axes))
    if isinstance(out, Dual) and _holds_tag(out, tag):
        # a dual of an outer jvp holding this batch inside: take it out of both parts
        primal = _unbatch_output(out.primal, out_axes, tag, size)
        tangent = _unbatch_output(out.tangent, out_axes, tag, size)
        return Dual(primal, tangent, out.tag)
    if isinstance(out, Batched) and out.tag != tag and _holds_tag(out.val, tag):
        # another vmap's batch around ours (a batch of gradients, each a batch of rows):
        # take ours out of its examples, whose axis 0 is that batch's own
        inner_axes = out_axes + 1 if isinstance(out_axes, int) and out_axes >= 0 else out_axes
        return Batched(_unbatch_output(out.val, inner_axes, tag, size), out.tag)
    if out_axes is None:
        if isinstance(out, Batched) and out.tag == tag:
            raise ValueError(
                "vmap: out_axes=None, but the output differs from example to example "
                f"(example shape {out.shape})"
            )
        return out  # the same for every example
    if isinstance(out, numbers.Number):
        out = np.asarray(out, dtype=float)
    val = _examples(out, tag, size)
    ndim = len(ops.shape(val))
    if not isinstance(out_axes, int) or not -ndim <= out_axes < ndim:
        raise ValueError(
            f"vmap: out_axes={out_axes!r} is out of range for an output with {ndim} axes"
        )
    return ops.move_axis(val, 0, out_axes % ndim)


def _holds_tag(x: Operand, tag: int) -> bool:
    """Whether the batch of call ``tag`` is inside ``x`` (under other batches or duals)."""
    while isinstance(x, Batched | Dual):
        if isinstance(x, Batched) and x.tag == tag:
            return True
        x = x.val if isinstance(x, Batched) else x.primal
    return False


# --- reverse mode inside vmap --------------------------------------------------------------


def batch_levels(values: Operands) -> list[tuple[int, int]]:
    """The ``(tag, batch size)`` of every vmap call whose batches occur in ``values``,
    oldest call first."""
    found: dict[int, int] = {}
    for x in values:
        while isinstance(x, Batched):
            found[x.tag] = x.batch_size
            x = x.val
    return sorted(found.items())


def lift(x: Operand, levels: Sequence[tuple[int, int]]) -> Operand:
    """``x`` with the batch axes of all ``levels`` in front (oldest first), as one plain
    array or graph node: a value the same for every example is repeated along its axis."""
    if not levels:
        return x
    *older, (tag, size) = levels
    return lift(_examples(x, tag, size), older)


def wrap(raw: Operand, levels: Sequence[tuple[int, int]]) -> Operand:
    """The inverse of :func:`lift`: the leading axes of ``raw`` made batches again."""
    for tag, _ in levels:
        raw = Batched(raw, tag)
    return raw


def has_batch(values: Operands) -> bool:
    return any(isinstance(v, Batched) for v in values)
