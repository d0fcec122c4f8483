"""``Tensor``: the tensor Value — numpy arrays that record the operations applied to them.

The same idea as :class:`~autodiff_lab.Value`, one array at a time: numpy does the array
work, the graph core (:mod:`autodiff_lab.graph`) runs backward, and each primitive's rules
(:mod:`autodiff_lab.primitives`) say how gradients flow. Broadcasting follows numpy; in
backward a gradient is summed back to the shape of the input it belongs to
(:func:`autodiff_lab.ops.sum_to`).

PyTorch-like semantics: ``requires_grad`` marks the tensors to differentiate (an op's
result requires grad when any input does); ``.grad`` is ``None`` until a backward pass
reaches the tensor, then it accumulates across calls. Unlike PyTorch, intermediate tensors
keep their ``.grad`` too (the visualisations show them).
"""

from __future__ import annotations

import numbers
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from . import graph
from . import primitives as P
from .kinds import BatchedArray, Boxed, Node, constant, data_of, is_tracer
from .methods import ArrayMethods
from .types import Shape

Array = npt.NDArray[Any]  # a Tensor's data: a numpy array (float32 or float64)


def _to_array(data: Any, dtype: Any, where: str) -> Array:
    """Validate and convert user data: numeric, rectangular; ints become float64."""
    if isinstance(data, Tensor):
        data = data.data
    try:
        arr = np.asarray(data, dtype=dtype)
    except ValueError as e:
        raise ValueError(
            f"{where}: cannot make an array from {type(data).__name__} "
            f"(rows of different lengths? a ragged list is not a tensor): {e}"
        ) from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{where}: needs numbers, got dtype {arr.dtype} from {type(data).__name__} {data!r:.60}"
        )
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    return arr


class Tensor(Node, ArrayMethods):
    """An n-dimensional array in a recorded computation."""

    __slots__ = ("data", "grad", "requires_grad", "_prev", "_fn", "_params", "label")
    data: Array
    __array_ufunc__ = None  # ndarray + Tensor defers to Tensor.__radd__

    def __init__(
        self,
        data: Any,
        requires_grad: bool = False,
        dtype: Any = None,
        label: str = "",
    ) -> None:
        self.data = _to_array(data, dtype, "Tensor")
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._prev = ()
        self._fn = None
        self._params = None
        self.label = label

    @classmethod
    def _apply(cls, fn: P.Primitive, *inputs: Any, **params: Any) -> Tensor:
        """Compute primitive ``fn`` on the inputs' data; record the node if any input
        requires grad (otherwise the result is a plain constant, with no history)."""
        for x in inputs:
            if not isinstance(x, Tensor):  # numbers and arrays become constant tensors
                like = next(t for t in inputs if isinstance(t, Tensor))
                inputs = tuple(
                    t if isinstance(t, Tensor) else _constant(t, like, fn) for t in inputs
                )
                break
        if fn.domain.outside is not None:
            P.check_domain(fn, "Tensor", inputs[fn.domain.arg].data, scalar=False)
        try:  # (two inputs and no parameters, the usual case, spelled out: quicker)
            if len(inputs) == 2 and not params:
                data = fn.forward(inputs[0].data, inputs[1].data)
            else:
                data = fn.forward(*[x.data for x in inputs], **params)
        except ValueError as e:
            if "broadcast" not in str(e):
                raise
            shapes = " and ".join(str(x.shape) for x in inputs)
            raise ValueError(
                f"Tensor {fn.symbol}: shapes {shapes} cannot be broadcast together (numpy rule: "
                "align shapes from the right; each pair of sizes must be equal or one of them 1)"
            ) from None
        if type(data) is not np.ndarray:  # reductions give numpy scalars: keep arrays
            if isinstance(data, Boxed):
                raise TypeError(
                    f"Tensor {fn.name}: its forward returned a {type(data).__name__} "
                    "for plain inputs; a primitive's forward must return numbers or arrays"
                )
            data = np.asarray(data)
        out = cls.__new__(cls)
        out.data, out.grad, out.label = data, None, ""
        if graph._GradMode.enabled:  # recorded when any input requires grad
            for x in inputs:
                if x.requires_grad:
                    out.requires_grad, out._fn, out._params = True, fn, params or None
                    out._prev = inputs
                    return out
        out.requires_grad, out._prev, out._fn, out._params = False, (), None, None
        return out

    # --- array facts -------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    def __len__(self) -> int:
        return len(self.data)

    def item(self) -> float:
        if self.size != 1:
            raise ValueError(f"Tensor.item: needs exactly one entry, got shape {self.shape}")
        return float(self.data.item())

    def numpy(self) -> Array:
        return self.data

    # --- operators, functions, reductions, reshaping: shared with Dual (methods.py) ------

    # --- autodiff ------------------------------------------------------------------------

    def backward(self, grad: Any = None, create_graph: bool = False) -> None:
        """Accumulate d self / d t into ``t.grad`` for every tensor t this one depends on.

        ``grad`` is the gradient of some final scalar with respect to this tensor; it may
        be left out only when this tensor is a scalar (it is then 1).
        """
        if not self.requires_grad:
            raise RuntimeError(
                "Tensor.backward: this tensor does not require grad (no input had "
                "requires_grad=True, or it was computed under no_grad())"
            )
        if grad is None:
            if self.size != 1:
                raise RuntimeError(
                    f"Tensor.backward: output has shape {self.shape}; backward() without a "
                    "gradient needs a scalar (one number). Reduce it first (.sum(), .mean()) "
                    f"or pass grad= an array of shape {self.shape}."
                )
            grad = np.ones(self.shape, self.dtype)
        else:
            grad = _to_array(grad, self.dtype, "Tensor.backward grad")
            if grad.shape != self.shape:
                raise ValueError(
                    f"Tensor.backward: grad has shape {grad.shape}, output has {self.shape}"
                )
        seed = Tensor(grad) if create_graph else grad
        graph.backpropagate(self, seed, create_graph=create_graph)

    def detach(self) -> Tensor:
        """The same data as a new leaf that does not require grad."""
        return Tensor(self.data)

    def __repr__(self) -> str:
        body = np.array2string(self.data, precision=4, separator=", ", prefix="Tensor(")
        extra = ", requires_grad=True" if self.requires_grad else ""
        if self.dtype != np.float64:
            extra = f", dtype={self.dtype}" + extra
        return f"Tensor({body}{extra})"


# --- helpers -----------------------------------------------------------------------------


def _constant(x: Any, like: Tensor, fn: P.Primitive) -> Tensor:
    """A non-Tensor operand as a constant Tensor (Python numbers take ``like``'s dtype)."""
    if isinstance(x, bool | numbers.Number):
        return Tensor(np.asarray(x, dtype=like.dtype))
    try:
        return Tensor(x)
    except (TypeError, ValueError):
        hint = " (grad makes a Python number a Value: inside array transformations pass "
        hint = hint + "np.asarray(x))" if isinstance(x, Node) else ""
        what = f"{type(x).__name__} {x!r:.40}{hint}"
        raise TypeError(f"Tensor {fn.symbol}: cannot combine a Tensor with {what}") from None


def _joinable(tensors: Any, where: str) -> list[Any]:
    """What concatenate and stack join: with a ``Dual`` or a vmap batch among the entries (the
    outer layer), the other entries as arrays; else every entry as a Tensor."""
    if any(is_tracer(t) for t in tensors):
        return [t if isinstance(t, Boxed) else _to_array(t, None, where) for t in tensors]
    return [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]


def concatenate(tensors: Any, axis: int = 0) -> ArrayMethods:
    """Join tensors along an existing axis; backward hands each its slice of the gradient.

    Forward-mode ``Dual`` arrays can be joined too (their tangents are joined alike).
    """
    parts = _joinable(tensors, "concatenate")
    _check_concatenate([np.shape(constant(t)) for t in parts], axis)
    joined: ArrayMethods = P.bind(P.CONCATENATE, *parts, axis=axis)
    return joined


def _check_concatenate(shapes: list[Shape], axis: int) -> None:
    if not shapes:
        raise ValueError("concatenate: needs at least one tensor")
    ref = shapes[0]
    if not -len(ref) <= axis < len(ref):
        raise ValueError(f"concatenate: axis {axis} is out of range for shapes {shapes}")
    for s in shapes:
        if len(s) != len(ref) or any(
            x != y for i, (x, y) in enumerate(zip(s, ref)) if i != axis % len(ref)
        ):
            raise ValueError(f"concatenate: shapes {shapes} must match except along axis {axis}")


def stack(tensors: Any, axis: int = 0) -> ArrayMethods:
    """Join same-shape tensors along a new axis (each gets a size-1 axis, then concatenate)."""
    tensors = _joinable(tensors, "stack")
    if len({t.shape for t in tensors}) > 1:
        raise ValueError(f"stack: all shapes must be equal, got {[t.shape for t in tensors]}")
    axis = axis % (len(tensors[0].shape) + 1)  # (the result has one more axis)
    expanded = [t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in tensors]
    return concatenate(expanded, axis=axis)


def cross_entropy(logits: Tensor, targets: Any) -> ArrayMethods:
    """Mean over the batch of -log softmax(logits)[target], fused and stable.

    ``logits`` has shape (N, C); ``targets`` holds N class indices in [0, C).
    Gradient: (softmax(logits) - onehot(targets)) / N. Forward-mode ``Dual`` logits work too.
    """
    logits = logits if isinstance(logits, Boxed) else Tensor(logits)
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy: logits must have shape (N, C), got {logits.shape}")
    if isinstance(targets, BatchedArray):  # vmap: labels that differ from example to example
        if targets.shape != (logits.shape[0],):
            raise ValueError(
                f"cross_entropy: targets must be {logits.shape[0]} integer class indices per "
                f"example, got shape {targets.shape}"
            )
        batch = type(targets)._apply(P.CROSS_ENTROPY, logits, targets=targets)  # (its rule)
        return cast(ArrayMethods, batch)  # (a vmap batch: an ArrayMethods)
    targets = np.asarray(data_of(targets))
    if targets.shape != (logits.shape[0],) or targets.dtype.kind not in "iu":
        raise ValueError(
            f"cross_entropy: targets must be {logits.shape[0]} integer class indices, got "
            f"shape {targets.shape} dtype {targets.dtype}"
        )
    if targets.size and targets.dtype.kind == "i" and targets.min() < 0:
        raise ValueError(
            f"cross_entropy: targets must lie in [0, {logits.shape[1]}), got {targets.min()}"
        )
    try:
        loss: ArrayMethods = P.bind(P.CROSS_ENTROPY, logits, targets=targets)  # Dual or Tensor
        return loss
    except IndexError:  # a target >= number of classes
        raise ValueError(
            f"cross_entropy: targets must lie in [0, {logits.shape[1]}), got values up to "
            f"{targets.max()}"
        ) from None
