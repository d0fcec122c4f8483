"""Every primitive operation, each defined in one place with all of its rules.

A primitive has

- ``forward(*inputs, **params)``: the value it computes;
- ``vjp``: one rule per input, ``rule(g, out, *inputs, **params)``, giving that input's
  share of the gradient: the upstream gradient ``g`` times the local derivative
  (reverse mode, the chain rule applied backwards);
- ``jvp``: one rule per input, ``rule(t, out, *inputs, **params)``, giving that input's
  contribution to the output's tangent when the input moves by ``t`` (forward mode).

``Value``, ``Tensor`` and ``Dual`` all compute through this table, so adding an operation
means adding one entry here (and a method that calls it); the gradient checks in the tests
pick it up from :data:`PRIMITIVES`.

The rules are written with ordinary operators and the generic functions of
:mod:`autodiff_lab.ops`. On plain numbers they compute numbers; handed graph values (as
``backward(create_graph=True)`` does) they record a new graph, which can be differentiated
again.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import ops
from .ops import broadcast_to, shape, sum_to, unbroadcast


class Primitive:
    """An operation with its forward computation and its derivative rules."""

    __slots__ = ("name", "symbol", "forward", "vjp", "jvp", "vjp_all", "jvp_all")

    def __init__(
        self,
        name: str,
        forward: Callable,
        vjp: tuple | None = None,
        jvp: tuple | None = None,
        *,
        symbol: str | None = None,
        vjp_all: Callable | None = None,
        jvp_all: Callable | None = None,
    ):
        self.name = name
        self.symbol = symbol or name
        self.forward = forward
        self.vjp = vjp  # one rule per input (None: that input is not differentiable)
        self.jvp = jvp
        # Primitives with any number of inputs (concatenate) give all rules at once.
        self.vjp_all = vjp_all
        self.jvp_all = jvp_all

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


PRIMITIVES: dict[str, Primitive] = {}


def primitive(name: str, forward, vjp=None, jvp=None, **kw) -> Primitive:
    """Create a primitive and register it in :data:`PRIMITIVES`."""
    prim = Primitive(name, forward, vjp, jvp, **kw)
    PRIMITIVES[name] = prim
    return prim


def bind(prim: Primitive, *inputs, **params):
    """Apply ``prim`` to ``inputs``, recording it if any input is a graph value.

    Forward-mode ``Dual`` values are the outermost layer, so they are looked for first.
    """
    node = None
    for x in inputs:
        if type(x) in PLAIN_TYPES:
            continue
        if hasattr(x, "tangent"):
            return type(x)._apply(prim, *inputs, **params)
        if node is None and hasattr(x, "_fn"):
            node = x
    if node is not None:
        return type(node)._apply(prim, *inputs, **params)
    return prim.forward(*inputs, **params)


PLAIN_TYPES = {float, int, bool, np.ndarray, np.float64, np.float32}  # never graph values


def constant(x):
    """The plain number or array inside a graph value, with its history dropped.

    Derivative rules use it for quantities whose own derivative is zero almost
    everywhere (a relu's on/off mask, the sign of ``abs``).
    """
    while hasattr(x, "tangent") or hasattr(x, "_fn"):
        x = x.primal if hasattr(x, "tangent") else x.data
    return x


def _bcast(t, out):
    """A tangent stretched to the output's shape (broadcasting copies it)."""
    return t if type(t) is float else broadcast_to(t, shape(out))


# --- arithmetic -------------------------------------------------------------------------
# d(a+b) = da + db;  d(a*b) = b da + a db;  d(a/b) = da/b - a db/b^2;  d(a^b) = ...

ADD = primitive(
    "add",
    lambda a, b: a + b,
    vjp=(lambda g, out, a, b: unbroadcast(g, a), lambda g, out, a, b: unbroadcast(g, b)),
    jvp=(lambda t, out, a, b: _bcast(t, out), lambda t, out, a, b: _bcast(t, out)),
    symbol="+",
)
SUB = primitive(
    "sub",
    lambda a, b: a - b,
    vjp=(lambda g, out, a, b: unbroadcast(g, a), lambda g, out, a, b: unbroadcast(-g, b)),
    jvp=(lambda t, out, a, b: _bcast(t, out), lambda t, out, a, b: _bcast(-t, out)),
    symbol="-",
)
MUL = primitive(
    "mul",
    lambda a, b: a * b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g * b, a),
        lambda g, out, a, b: unbroadcast(g * a, b),
    ),
    jvp=(lambda t, out, a, b: _bcast(t * b, out), lambda t, out, a, b: _bcast(a * t, out)),
    symbol="*",
)
DIV = primitive(
    "div",
    lambda a, b: a / b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g / b, a),
        lambda g, out, a, b: unbroadcast(-g * out / b, b),
    ),
    jvp=(lambda t, out, a, b: _bcast(t / b, out), lambda t, out, a, b: _bcast(-t * out / b, out)),
    symbol="/",
)
NEG = primitive("neg", lambda a: -a, vjp=(lambda g, out, a: -g,), jvp=(lambda t, out, a: -t,))
POW = primitive(  # a ** b with both differentiable:  d/da = b a^(b-1),  d/db = a^b log(a)
    "pow",
    lambda a, b: a**b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g * b * a ** (b - 1), a),
        lambda g, out, a, b: unbroadcast(g * out * ops.log(a), b),
    ),
    jvp=(
        lambda t, out, a, b: _bcast(t * b * a ** (b - 1), out),
        lambda t, out, a, b: _bcast(t * out * ops.log(a), out),
    ),
    symbol="**",
)


def _pow_const_slope(a, exponent):
    """c a^(c-1); for c = 0 the power is the constant 1, so the slope is 0 (even at a = 0)."""
    if exponent == 0:  # (a ** -1 would divide by zero at a = 0: higher derivatives of x**2)
        return 0.0 * a
    return exponent * a ** (exponent - 1)


POW_CONST = primitive(  # a ** c for a constant number c:  d/da = c a^(c-1)
    "pow_const",
    lambda a, exponent: a**exponent,
    vjp=(lambda g, out, a, exponent: g * _pow_const_slope(a, exponent),),
    jvp=(lambda t, out, a, exponent: t * _pow_const_slope(a, exponent),),
    symbol="**",
)

# --- elementwise functions ---------------------------------------------------------------

EXP = primitive(  # d/dx e^x = e^x
    "exp", ops.exp, vjp=(lambda g, out, x: g * out,), jvp=(lambda t, out, x: t * out,)
)
LOG = primitive(  # d/dx log x = 1/x
    "log", ops.log, vjp=(lambda g, out, x: g / x,), jvp=(lambda t, out, x: t / x,)
)
TANH = primitive(  # d/dx tanh x = 1 - tanh(x)^2
    "tanh",
    ops.tanh,
    vjp=(lambda g, out, x: g * (1 - out * out),),
    jvp=(lambda t, out, x: t * (1 - out * out),),
)
SIGMOID = primitive(  # d/dx s(x) = s(x) (1 - s(x))
    "sigmoid",
    ops.sigmoid,
    vjp=(lambda g, out, x: g * out * (1 - out),),
    jvp=(lambda t, out, x: t * out * (1 - out),),
)
RELU = primitive(  # d/dx relu x = 1 if x > 0 else 0   (0 at x = 0, as PyTorch)
    "relu",
    ops.relu,
    vjp=(lambda g, out, x: g * (constant(x) > 0),),
    jvp=(lambda t, out, x: t * (constant(x) > 0),),
    symbol="ReLU",
)
SIN = primitive(  # d/dx sin x = cos x
    "sin", ops.sin, vjp=(lambda g, out, x: g * ops.cos(x),), jvp=(lambda t, out, x: t * ops.cos(x),)
)
COS = primitive(  # d/dx cos x = -sin x
    "cos",
    ops.cos,
    vjp=(lambda g, out, x: -g * ops.sin(x),),
    jvp=(lambda t, out, x: -t * ops.sin(x),),
)
SQRT = primitive(  # d/dx sqrt x = 1 / (2 sqrt x)
    "sqrt",
    ops.sqrt,
    vjp=(lambda g, out, x: g * 0.5 / out,),
    jvp=(lambda t, out, x: t * 0.5 / out,),
)
ABS = primitive(  # d/dx |x| = sign(x)   (0 at x = 0, as PyTorch)
    "abs",
    ops.abs,
    vjp=(lambda g, out, x: g * np.sign(constant(x)),),
    jvp=(lambda t, out, x: t * np.sign(constant(x)),),
)

# --- reductions and reshaping (tensors) --------------------------------------------------


def _expand_reduced(g, x_shape, axis, keepdims):
    """Put back the axes a reduction removed, then broadcast to the input's shape."""
    if not keepdims and axis is not None:
        axes = (axis,) if isinstance(axis, int) else axis
        kept = list(shape(g))
        for a in sorted(ax % len(x_shape) for ax in axes):
            kept.insert(a, 1)
        g = ops.reshape(g, tuple(kept))
    return broadcast_to(g, x_shape)


def _count(x_shape, axis) -> int:
    if axis is None:
        return int(np.prod(x_shape, dtype=np.int64))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([x_shape[a] for a in axes], dtype=np.int64))


SUM = primitive(  # every input entry contributes once: the gradient is copied back
    "sum",
    lambda x, axis=None, keepdims=False: np.asarray(x).sum(axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: _expand_reduced(g, shape(x), axis, keepdims),
    ),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.sum(t, axis, keepdims),),
)
MEAN = primitive(  # a sum divided by the count of entries summed
    "mean",
    lambda x, axis=None, keepdims=False: np.asarray(x).mean(axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, shape(x), axis, keepdims) / _count(shape(x), axis)
        ),
    ),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.mean(t, axis, keepdims),),
)


def _argmax_mask(out, x, axis, keepdims):
    """1/k at the k entries equal to the max (ties share the gradient), 0 elsewhere."""
    x, out = constant(x), constant(out)
    top = out if keepdims or axis is None else np.expand_dims(out, axis)
    mask = (x == top).astype(x.dtype)
    return mask / np.sum(mask, axis=axis, keepdims=True)


MAX = primitive(  # only the largest entry moves the max
    "max",
    lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, shape(x), axis, keepdims) * _argmax_mask(out, x, axis, keepdims)
        ),
    ),
    jvp=(
        lambda t, out, x, axis=None, keepdims=False: ops.sum(
            t * _argmax_mask(out, x, axis, keepdims), axis, keepdims
        ),
    ),
)
RESHAPE = primitive(
    "reshape",
    lambda x, shape: np.reshape(x, shape),
    vjp=(lambda g, out, x, shape: ops.reshape(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: ops.reshape(t, shape),),
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
)
BROADCAST_TO = primitive(  # copies along new axes; the gradient adds the copies up
    "broadcast_to",
    lambda x, shape: np.broadcast_to(x, shape),
    vjp=(lambda g, out, x, shape: sum_to(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: broadcast_to(t, shape),),
)


def _scatter_add(g, index, shape):
    out = np.zeros(shape, dtype=np.result_type(g))
    np.add.at(out, index, g)  # repeated indices add up, they do not overwrite
    return out


GETITEM = primitive(  # x[index]: the gradient goes back to the entries that were read
    "getitem",
    lambda x, index: x[index],
    vjp=(lambda g, out, x, index: bind(SCATTER_ADD, g, index=index, shape=shape(x)),),
    jvp=(lambda t, out, x, index: t[index],),
    symbol="[]",
)
SCATTER_ADD = primitive(  # the transpose of indexing: add g into zeros at index
    "scatter_add",
    _scatter_add,
    vjp=(lambda g, out, x, index, shape: g[index],),
    jvp=(lambda t, out, x, index, shape: bind(SCATTER_ADD, t, index=index, shape=shape),),
)


def _concat_vjp_all(g, out, *xs, axis=0):
    edges = np.cumsum([shape(x)[axis] for x in xs])[:-1]
    pieces, start = [], 0
    for stop in [*edges, shape(out)[axis]]:
        index = [slice(None)] * len(shape(out))
        index[axis] = slice(start, stop)
        pieces.append(g[tuple(index)])
        start = stop
    return pieces


def _concat_jvp_all(tangents, out, *xs, axis=0):
    parts = [
        t if t is not None else np.zeros(shape(x), dtype=np.result_type(constant(x)))
        for t, x in zip(tangents, xs, strict=True)
    ]
    return bind(CONCATENATE, *parts, axis=axis)


CONCATENATE = primitive(  # each input gets back its own slice of the gradient
    "concatenate",
    lambda *xs, axis=0: np.concatenate(xs, axis=axis),
    vjp_all=_concat_vjp_all,
    jvp_all=_concat_jvp_all,
)

MATMUL = primitive(  # C = A B:  dA = G B^T,  dB = A^T G   (1-D and batched cases below)
    "matmul",
    lambda a, b: a @ b,
    vjp=(
        lambda g, out, a, b: _matmul_grad_a(g, a, b),
        lambda g, out, a, b: _matmul_grad_b(g, a, b),
    ),
    jvp=(lambda t, out, a, b: t @ b, lambda t, out, a, b: a @ t),
    symbol="@",
)


def _mT(x):
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape(x))
    return ops.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_grad_a(g, a, b):
    if a.ndim == 2 and b.ndim == 2:  # the common case: dA = G B^T
        return g @ b.T
    if len(shape(b)) == 1:  # (..., k) @ (k,) -> (...): dA = g[..., None] * b
        return sum_to(ops.reshape(g, shape(g) + (1,)) * b, shape(a))
    if len(shape(a)) == 1:  # (k,) @ (..., k, n) -> (..., n): dA = sum of b @ g
        return sum_to(ops.reshape(b @ ops.reshape(g, shape(g) + (1,)), shape(b)[:-1]), shape(a))
    return sum_to(g @ _mT(b), shape(a))


def _matmul_grad_b(g, a, b):
    if a.ndim == 2 and b.ndim == 2:  # the common case: dB = A^T G
        return a.T @ g
    if len(shape(a)) == 1 and len(shape(b)) == 1:  # dot product: dB = g a
        return g * a
    if len(shape(a)) == 1:  # (k,) @ (..., k, n): dB = a[:, None] * g[..., None, :]
        g2 = ops.reshape(g, shape(g)[:-1] + (1, shape(g)[-1]))
        return sum_to(ops.reshape(a, (shape(a)[0], 1)) * g2, shape(b))
    if len(shape(b)) == 1:  # (..., k) @ (k,): dB = sum over the batch of a * g[..., None]
        return sum_to(a * ops.reshape(g, shape(g) + (1,)), shape(b))
    return sum_to(_mT(a) @ g, shape(b))


# --- softmax and the fused loss ----------------------------------------------------------

SOFTMAX = primitive(  # J^T g = s * (g - <g, s>) along the axis
    "softmax",
    lambda x, axis=-1: ops.softmax(x, axis),
    vjp=(lambda g, out, x, axis=-1: out * (g - ops.sum(g * out, axis, keepdims=True)),),
    jvp=(lambda t, out, x, axis=-1: out * (t - ops.sum(t * out, axis, keepdims=True)),),
)
LOG_SOFTMAX = primitive(  # d log_softmax: g - softmax * sum(g)
    "log_softmax",
    lambda x, axis=-1: ops.log_softmax(x, axis),
    vjp=(lambda g, out, x, axis=-1: g - ops.exp(out) * ops.sum(g, axis, keepdims=True),),
    jvp=(lambda t, out, x, axis=-1: t - ops.sum(ops.exp(out) * t, axis, keepdims=True),),
)


def _one_hot(targets, num_classes, dtype):
    eye = np.zeros((len(targets), num_classes), dtype=dtype)
    eye[np.arange(len(targets)), targets] = 1
    return eye


def _cross_entropy(logits, targets):
    logp = ops.log_softmax(logits, -1)
    return -logp[np.arange(len(targets)), targets].sum() / len(targets)


def _cross_entropy_vjp(g, out, z, targets):
    """dL/dz = g (softmax(z) - onehot(targets)) / N."""
    n, classes = shape(z)
    p = ops.softmax(z, -1)
    if type(p) is np.ndarray:  # a fresh array: subtract the one-hot in place (no N x C copy)
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
)


def _dot_vjp_all(g, out, *xs):
    n = len(xs) // 2
    ws, vs = xs[:n], xs[n:]
    return [g * v for v in vs] + [g * w for w in ws]


def _dot_jvp_all(ts, out, *xs):
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
)


def _sum_numbers(xs):
    total = 0.0
    for x in xs:
        total = total + x
    return total
