"""The engine against PyTorch (float64): values and gradients, property-based.

For every registered primitive there is a *twin*: a hypothesis strategy drawing random
inputs (values and shapes — broadcast-compatible shapes for the binary ops, random axes,
indices, permutations…) together with the same computation written once with our
``Tensor`` and once with ``torch``. The test runs both, compares the outputs, then pulls
the same random cotangent back through both and compares every input's gradient.
``test_every_primitive_has_a_torch_twin`` fails when a primitive is added without one.

More twins cover ops that are not primitives of their own (``stack``, reflected operators,
composite expressions), the scalar ``Value`` against 0-d torch tensors, float32, and
PyTorch's accumulation semantics.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from primitive_cases import torch_twins

import autodiff_lab as adl
from autodiff_lab import Tensor, Value, concatenate, cross_entropy, stack
from autodiff_lab.functional import jvp
from autodiff_lab.primitives import ELEMENTWISE, PRIMITIVES, bind

RTOL, ATOL = 1e-9, 1e-11


# --- strategies ---------------------------------------------------------------------------


def floats(low=-3.0, high=3.0):
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def arrays(shape, low=-3.0, high=3.0):
    """float64 arrays of ``shape`` with entries in [low, high] (hypothesis shrinks them)."""
    return hnp.arrays(np.float64, shape, elements=floats(low, high))


def nonzero_arrays(shape):
    """Entries with |x| >= 0.3 (denominators)."""
    return hnp.arrays(np.float64, shape, elements=st.one_of(floats(-3, -0.3), floats(0.3, 3)))


def positive_arrays(shape):
    """Entries in [0.3, 3] (log, sqrt, the base of a power)."""
    return arrays(shape, 0.3, 3.0)


def shapes(min_dims=0, max_dims=3):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4)


def broadcast_pair():
    """Two shapes that broadcast together, e.g. (3, 1) and (4,)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)


# --- twins: the same computation in both engines -----------------------------------------


@dataclass
class Twin:
    ours: Callable  # on autodiff_lab Tensors
    theirs: Callable  # on torch tensors
    arrays: list  # the inputs, one ndarray per differentiable argument


TWINS: dict[str, Callable[[st.DataObject], Twin]] = {}  # primitive name -> drawer
COMPOSITES: dict[str, Callable[[st.DataObject], Twin]] = {}  # ops built from primitives


def twin(name: str, table: dict = TWINS):
    def register(draw_twin):
        table[name] = draw_twin
        return draw_twin

    return register


def binary_twin(name, op, right=arrays, left=arrays):
    @twin(name)
    def draw(data):
        (sa, sb), _ = data.draw(broadcast_pair())
        return Twin(op, op, [data.draw(left(sa)), data.draw(right(sb))])


binary_twin("add", lambda a, b: a + b)
binary_twin("sub", lambda a, b: a - b)
binary_twin("mul", lambda a, b: a * b)
binary_twin("div", lambda a, b: a / b, right=nonzero_arrays)
binary_twin("pow", lambda a, b: a**b, left=positive_arrays)


@twin("where")
def _(data):
    (sc, sa, sb), _ = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=4)
    )
    mask = data.draw(hnp.arrays(np.bool_, sc), label="condition")  # a constant of the op
    return Twin(
        lambda a, b: adl.where(mask, a, b),
        lambda a, b: torch_twins()["where"](mask, a, b),
        [data.draw(arrays(sa)), data.draw(arrays(sb))],
    )


def choice_twin(name):
    """maximum/minimum; small integers make ties likely (both split the gradient there)."""

    @twin(name)
    def draw(data):
        (sa, sb), _ = data.draw(broadcast_pair())
        ints = [hnp.arrays(np.float64, s, elements=st.integers(-2, 2).map(float)) for s in (sa, sb)]
        a, b = data.draw(st.one_of(st.tuples(arrays(sa), arrays(sb)), st.tuples(*ints)))
        return Twin(getattr(adl.ops, name), torch_twins()[name], [a, b])


choice_twin("maximum")
choice_twin("minimum")


@twin("neg")
def _(data):
    return Twin(lambda a: -a, lambda a: -a, [data.draw(arrays(data.draw(shapes())))])


@twin("pow_const")
def _(data):
    c = data.draw(st.sampled_from([2, 3, 2.0, 0.5, -1.5, 1.0, 0]))
    make = arrays if float(c).is_integer() and c >= 0 else positive_arrays
    return Twin(lambda a: a**c, lambda a: a**c, [data.draw(make(data.draw(shapes())))])


def unary_twin(name, ours, theirs, make=arrays):
    @twin(name)
    def draw(data):
        return Twin(ours, theirs, [data.draw(make(data.draw(shapes())))])


def _shared_twin(name):
    """The PyTorch twin from the shared table of primitive cases (imported when called)."""
    return lambda *tensors, **params: torch_twins()[name](*tensors, **params)


for _prim in ELEMENTWISE:  # every elementwise primitive, drawn inside its domain
    _make = arrays if _prim.domain.outside is None else positive_arrays
    # ours through the generic math function (ops.exp(t)), theirs from the shared table
    unary_twin(_prim.name, getattr(adl.ops, _prim.name), _shared_twin(_prim.name), _make)


@st.composite
def reduction(draw):
    """A shape, an axis (None, an int, possibly negative, or a tuple) and keepdims."""
    shape = draw(shapes(min_dims=1))
    ndim = len(shape)
    axis = draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1),
            st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).flatmap(
                # some axes counted from the end: (0, -1) as well as (0, 2)
                lambda axes: st.tuples(*(st.sampled_from([a, a - ndim]) for a in axes))
            ),
        )
    )
    return shape, axis, draw(st.booleans())


def reduction_twin(name, torch_name):
    @twin(name)
    def draw(data):
        shape, axis, keepdims = data.draw(reduction())
        dims = tuple(range(len(shape))) if axis is None else axis

        def theirs(t):
            return getattr(t, torch_name)(dim=dims, keepdim=keepdims)

        def ours(x):
            return getattr(x, name)(axis=axis, keepdims=keepdims)

        # small integers make ties likely: max shares the gradient between equal entries,
        # as torch.amax does
        small_integers = hnp.arrays(np.float64, shape, elements=st.integers(-2, 2).map(float))
        x = data.draw(st.one_of(arrays(shape), small_integers))
        return Twin(ours, theirs, [x])


reduction_twin("sum", "sum")
reduction_twin("mean", "mean")
reduction_twin("max", "amax")


@twin("reshape")
def _(data):
    shape = data.draw(shapes())
    n = math.prod(shape)
    candidates = [(n,), (-1,), (1, n), (n, 1), shape[::-1], (1, -1, 1)]
    candidates += [(d, n // d) for d in range(1, n + 1) if n % d == 0]
    new_shape = data.draw(st.sampled_from(candidates))
    return Twin(
        lambda x: x.reshape(new_shape), lambda t: t.reshape(new_shape), [data.draw(arrays(shape))]
    )


@twin("transpose")
def _(data):
    shape = data.draw(shapes(min_dims=1, max_dims=4))
    ndim = len(shape)
    axes = data.draw(st.one_of(st.none(), st.permutations(range(ndim)).map(tuple)))
    if axes is not None:  # negative axes count from the end
        axes = tuple(a - ndim if data.draw(st.booleans()) else a for a in axes)
    torch_axes = tuple(reversed(range(ndim))) if axes is None else axes
    ours = (lambda x: x.T) if axes is None else (lambda x: x.transpose(axes))
    return Twin(ours, lambda t: t.permute(torch_axes), [data.draw(arrays(shape))])


@twin("broadcast_to")
def _(data):
    target = data.draw(shapes())
    dropped = data.draw(st.integers(0, len(target)))
    source = tuple(1 if data.draw(st.booleans()) else n for n in target[dropped:])
    return Twin(
        lambda x: x.broadcast_to(target),
        lambda t: t.broadcast_to(target),
        [data.draw(arrays(source))],
    )


@st.composite
def index_for(draw, n, m):
    """An index into an (n, m) array: ints, slices, integer arrays with repeats, mixes."""
    row = st.integers(-n, n - 1)
    rows = st.lists(row, min_size=1, max_size=8).map(np.array)
    kinds = ["int", "slice", "array", "list", "pair", "slice+array", "mask", "new axis"]
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        return draw(row)
    if kind == "mask":  # boolean rows
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if kind == "new axis":
        return (None, draw(row), Ellipsis)
    if kind == "slice":
        start, stop = draw(st.integers(-n, n)), draw(st.integers(-n, n))
        return (slice(start, stop, draw(st.integers(1, 3))), slice(None, None, 2))
    if kind == "array":  # repeated rows: their gradients must add up
        return draw(rows)
    if kind == "list":
        return draw(st.lists(row, min_size=1, max_size=8))
    if kind == "pair":  # x[rows, cols]: repeated (row, col) pairs add up too
        k = draw(st.integers(1, 8))
        pick = st.lists(st.integers(0, n * m - 1), min_size=k, max_size=k)
        flat = np.array(draw(pick))
        return (flat // m, flat % m)
    return (
        slice(None),
        draw(st.lists(st.integers(-m, m - 1), min_size=1, max_size=6).map(np.array)),
    )


@twin("getitem")
def _(data):
    n, m = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    index = data.draw(index_for(n, m))

    import torch

    def torch_index(i):
        if isinstance(i, tuple):
            return tuple(torch_index(j) for j in i)
        if isinstance(i, np.ndarray):
            return torch.tensor(i) if i.dtype == bool else i.tolist()
        return i

    return Twin(lambda x: x[index], lambda t: t[torch_index(index)], [data.draw(arrays((n, m)))])


@twin("scatter_add")
def _(data):
    n, m = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))

    def ours(x):
        return bind(PRIMITIVES["scatter_add"], x, index=rows, shape=(n, m))

    def theirs(t):
        import torch

        return torch.zeros((n, m)).index_put((torch.tensor(rows),), t, accumulate=True)

    return Twin(ours, theirs, [data.draw(arrays((len(rows), m)))])


@twin("concatenate")
def _(data):
    import torch

    base = list(data.draw(shapes(min_dims=1)))
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    parts = []
    for _ in range(data.draw(st.integers(1, 4))):
        base[axis] = data.draw(st.integers(1, 3))
        parts.append(data.draw(arrays(tuple(base))))
    return Twin(lambda *xs: concatenate(xs, axis=axis), lambda *ts: torch.cat(ts, dim=axis), parts)


MATMUL_SHAPES = {  # (k = contracted size, n/m free sizes, b batch)
    "2-D @ 2-D": lambda b, n, k, m: ((n, k), (k, m)),
    "1-D @ 2-D": lambda b, n, k, m: ((k,), (k, m)),
    "2-D @ 1-D": lambda b, n, k, m: ((n, k), (k,)),
    "1-D @ 1-D": lambda b, n, k, m: ((k,), (k,)),
    "batched": lambda b, n, k, m: ((b, n, k), (b, k, m)),
    "batched @ 2-D": lambda b, n, k, m: ((b, n, k), (k, m)),
    "2-D @ batched": lambda b, n, k, m: ((n, k), (b, k, m)),
    "broadcast batch": lambda b, n, k, m: ((b, 1, n, k), (2, k, m)),
    "1-D @ batched": lambda b, n, k, m: ((k,), (b, k, m)),
    "batched @ 1-D": lambda b, n, k, m: ((b, n, k), (k,)),
}


@twin("matmul")
def _(data):
    sizes = [data.draw(st.integers(1, 4)) for _ in range(4)]
    sa, sb = MATMUL_SHAPES[data.draw(st.sampled_from(sorted(MATMUL_SHAPES)))](*sizes)
    return Twin(
        lambda a, b: a @ b, lambda a, b: a @ b, [data.draw(arrays(sa)), data.draw(arrays(sb))]
    )


@st.composite
def logits(draw, shape):
    """Logits at scale 1, 50 or 1000: softmax must stay finite (shift by the max)."""
    scale = draw(st.sampled_from([1.0, 50.0, 1000.0]))
    return draw(arrays(shape)) * scale


def softmax_twin(name):
    @twin(name)
    def draw(data):
        shape = data.draw(shapes(min_dims=1))
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        return Twin(
            lambda x: getattr(adl, name)(x, axis=axis),
            lambda t: getattr(t, name)(dim=axis),
            [data.draw(logits(shape))],
        )


softmax_twin("softmax")
softmax_twin("log_softmax")


@twin("cross_entropy")
def _(data):
    import torch

    n, c = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    targets = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n)))
    return Twin(
        lambda z: cross_entropy(z, targets),
        lambda z: torch.nn.functional.cross_entropy(z, torch.tensor(targets)),
        [data.draw(logits((n, c)))],
    )


@twin("add_n")
def _(data):
    shape = data.draw(st.sampled_from([(), (3,)]))
    xs = [data.draw(arrays(shape)) for _ in range(data.draw(st.integers(1, 5)))]
    return Twin(
        lambda *ts: bind(PRIMITIVES["add_n"], *ts),
        lambda *ts: functools.reduce(lambda a, b: a + b, ts),
        xs,
    )


@twin("dot")
def _(data):
    k = data.draw(st.integers(1, 4))
    ws_and_xs = [data.draw(arrays(())) for _ in range(2 * k)]
    return Twin(
        lambda *ts: bind(PRIMITIVES["dot"], *ts),
        lambda *ts: sum(w * x for w, x in zip(ts[:k], ts[k:], strict=True)),
        ws_and_xs,
    )


# --- composites: not primitives of their own, built from them ----------------------------


@twin("stack", COMPOSITES)
def _(data):
    import torch

    shape = data.draw(shapes())
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    parts = [data.draw(arrays(shape)) for _ in range(data.draw(st.integers(1, 4)))]
    return Twin(lambda *xs: stack(xs, axis=axis), lambda *ts: torch.stack(ts, dim=axis), parts)


@twin("numbers on either side", COMPOSITES)
def _(data):
    c = data.draw(floats(0.5, 2.0))

    def f(x):
        return (2.0 - x) * c + 1.5 / x - x / c + c**x + x**2

    return Twin(f, f, [data.draw(positive_arrays(data.draw(shapes())))])


@twin("broadcast chain", COMPOSITES)
def _(data):
    (sa, sb), _ = data.draw(broadcast_pair())

    def ours(a, b):
        return adl.tanh(a * b + a).sum(axis=-1) if len(np.broadcast_shapes(sa, sb)) else a * b + a

    def theirs(a, b):
        return (a * b + a).tanh().sum(dim=-1) if len(np.broadcast_shapes(sa, sb)) else a * b + a

    return Twin(ours, theirs, [data.draw(arrays(sa)), data.draw(arrays(sb))])


@twin("linear layer + relu + cross_entropy", COMPOSITES)
def _(data):
    import torch

    n, d, h, c = (data.draw(st.integers(1, 4)) for _ in range(4))
    targets = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n)))

    def ours(x, w1, b1, w2):
        return cross_entropy(adl.relu(x @ w1 + b1) @ w2, targets)

    def theirs(x, w1, b1, w2):
        return torch.nn.functional.cross_entropy((x @ w1 + b1).relu() @ w2, torch.tensor(targets))

    shapes_ = [(n, d), (d, h), (h,), (h, c)]
    return Twin(ours, theirs, [data.draw(arrays(s)) for s in shapes_])


@twin("same input in three places", COMPOSITES)
def _(data):
    def f(x):
        return (x * x).sum() + (x.exp() * x).mean() - x.max()

    return Twin(f, f, [data.draw(arrays(data.draw(shapes(min_dims=1))))])


# --- running a twin ------------------------------------------------------------------------


def assert_close(actual, expected, rtol, atol, err_msg=""):
    """``allclose`` with ``atol`` scaled by the size of the numbers being compared.

    A result that cancels to nearly 0 keeps the rounding error of its big terms; the
    absolute tolerance follows the largest entry instead of staying fixed.
    """
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale, err_msg=err_msg)


def check_twin(torch, tw: Twin, data, dtype=np.float64, rtol=RTOL, atol=ATOL):
    """Run ``tw`` in both engines; compare outputs, then gradients for a random cotangent."""
    ours_in = [Tensor(a, requires_grad=True, dtype=dtype) for a in tw.arrays]
    torch_dtype = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    theirs_in = [torch.tensor(a, dtype=torch_dtype, requires_grad=True) for a in tw.arrays]
    out = tw.ours(*ours_in)
    ref = tw.theirs(*theirs_in)
    assert isinstance(out, Tensor)
    assert out.shape == tuple(ref.shape)
    assert out.dtype == dtype
    assert_close(out.data, ref.detach().numpy(), rtol, atol)

    cotangent = data.draw(arrays(out.shape), label="cotangent").astype(dtype)
    out.backward(cotangent)
    ref.backward(torch.tensor(cotangent))
    for i, (x, t) in enumerate(zip(ours_in, theirs_in, strict=True)):
        expected = np.zeros(x.shape, dtype) if t.grad is None else t.grad.numpy()
        assert x.grad is not None, f"input {i}: no gradient arrived"
        assert x.grad.shape == x.shape and x.grad.dtype == dtype, f"input {i}"
        assert_close(x.grad, expected, rtol, atol, err_msg=f"input {i}")


def test_every_primitive_has_a_torch_twin():
    missing = sorted(set(PRIMITIVES) - set(TWINS))
    assert not missing, f"add a torch twin for the new primitives {missing}"


@pytest.mark.parametrize("name", sorted(set(TWINS) & set(PRIMITIVES)) + sorted(COMPOSITES))
@given(data=st.data())
def test_matches_torch(torch, name, data):
    draw_twin = TWINS.get(name) or COMPOSITES[name]
    check_twin(torch, draw_twin(data), data)


@pytest.mark.parametrize(
    "name", ["add", "mul", "div", "matmul", "sum", "max", "getitem", "log_softmax", "cross_entropy",
             "linear layer + relu + cross_entropy"]
)  # fmt: skip
@given(data=st.data())
def test_float32_matches_torch_float32_and_stays_float32(torch, name, data):
    """float32 in: float32 values and gradients, close to torch's float32 results."""
    draw_twin = TWINS.get(name) or COMPOSITES[name]
    check_twin(torch, draw_twin(data), data, dtype=np.float32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(set(TWINS) & set(PRIMITIVES)) + sorted(COMPOSITES))
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@given(data=st.data())
def test_forward_mode_matches_torch_jvp(torch, name, data):
    """The same twins pushed forward: our ``jvp`` (Dual numbers) vs ``torch.func.jvp``."""
    draw_twin = TWINS.get(name) or COMPOSITES[name]
    tw = draw_twin(data)
    tangents = [data.draw(arrays(np.shape(a)), label="tangent") for a in tw.arrays]
    out, tangent = jvp(tw.ours, tuple(tw.arrays), tuple(tangents))
    ref_out, ref_tangent = torch.func.jvp(
        tw.theirs,
        tuple(torch.tensor(a) for a in tw.arrays),
        tuple(torch.tensor(t) for t in tangents),
    )
    assert np.shape(out) == tuple(ref_out.shape) == np.shape(tangent)
    assert_close(out, ref_out.numpy(), RTOL, ATOL)
    assert_close(tangent, ref_tangent.numpy(), RTOL, ATOL)


# --- the scalar Value against 0-d torch tensors --------------------------------------------

SCALAR_EXPRESSIONS = {  # name: (ours on Values, theirs on torch, domain of a, domain of b)
    "a + b": (lambda a, b: a + b, lambda a, b: a + b, floats(), floats()),
    "a - b": (lambda a, b: a - b, lambda a, b: a - b, floats(), floats()),
    "a * b": (lambda a, b: a * b, lambda a, b: a * b, floats(), floats()),
    "a / b": (lambda a, b: a / b, lambda a, b: a / b, floats(), floats(0.3, 3)),
    "a ** b": (lambda a, b: a**b, lambda a, b: a**b, floats(0.3, 3), floats()),
    "-a * b": (lambda a, b: -a * b, lambda a, b: -a * b, floats(), floats()),
    "a ** 3 + b ** 0.5": (
        lambda a, b: a**3 + b**0.5, lambda a, b: a**3 + b**0.5, floats(), floats(0.3, 3)
    ),
    "2 - a + 3 * b": (lambda a, b: 2 - a + 3 * b, lambda a, b: 2 - a + 3 * b, floats(), floats()),
    "1 / a + 2 ** b": (
        lambda a, b: 1 / a + 2**b, lambda a, b: 1 / a + 2**b, floats(0.3, 3), floats()
    ),
    "exp(a) * log(b)": (
        lambda a, b: a.exp() * b.log(), lambda a, b: a.exp() * b.log(), floats(), floats(0.3, 3)
    ),
    "tanh(a * b)": (lambda a, b: (a * b).tanh(), lambda a, b: (a * b).tanh(), floats(), floats()),
    "sigmoid(a) - relu(b)": (
        lambda a, b: a.sigmoid() - b.relu(), lambda a, b: a.sigmoid() - b.relu(), floats(), floats()
    ),
    "sin(a) * cos(b)": (
        lambda a, b: adl.sin(a) * adl.cos(b), lambda a, b: a.sin() * b.cos(), floats(), floats()
    ),
    "sqrt(b) + abs(a)": (
        lambda a, b: adl.sqrt(b) + abs(a), lambda a, b: b.sqrt() + a.abs(), floats(), floats(0.3, 3)
    ),
    "a * a * b (fan-out)": (lambda a, b: a * a * b, lambda a, b: a * a * b, floats(), floats()),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCALAR_EXPRESSIONS))
@given(data=st.data())
def test_value_matches_torch_scalars(torch, name, data):
    ours, theirs, domain_a, domain_b = SCALAR_EXPRESSIONS[name]
    a0, b0 = data.draw(domain_a, label="a"), data.draw(domain_b, label="b")
    a, b = Value(a0), Value(b0)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    out, ref = ours(a, b), theirs(ta, tb)
    out.backward()
    ref.backward()
    assert out.data == pytest.approx(ref.item(), rel=RTOL, abs=ATOL)
    assert a.grad == pytest.approx(ta.grad.item(), rel=RTOL, abs=ATOL)
    assert b.grad == pytest.approx(tb.grad.item(), rel=RTOL, abs=ATOL)


# --- PyTorch semantics: accumulation -------------------------------------------------------


def test_repeated_backward_accumulates_like_torch(torch, rng):
    """Two backward() calls on two fresh graphs: leaf grads are exactly twice one call's."""
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal((3,))
    x, w = Tensor(x0, requires_grad=True), Tensor(w0, requires_grad=True)
    tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    for _ in range(2):
        adl.tanh(x @ w).sum().backward()
        (tx @ tw).tanh().sum().backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.grad, tw.grad.numpy(), rtol=RTOL, atol=ATOL)
    once = Tensor(w0, requires_grad=True)
    adl.tanh(Tensor(x0) @ once).sum().backward()
    np.testing.assert_array_equal(w.grad, 2 * once.grad)


def test_value_repeated_backward_accumulates_like_torch(torch):
    a, ta = Value(0.7), torch.tensor(0.7, requires_grad=True)
    for _ in range(2):
        (a * a.tanh()).backward()
        (ta * ta.tanh()).backward()
    assert a.grad == pytest.approx(ta.grad.item(), rel=1e-12)
    b = Value(0.7)
    (b * b.tanh()).backward()
    assert a.grad == 2 * b.grad  # exactly: the same float added to itself


# --- random expressions: Value, Tensor and Dual against torch ------------------------------
# Hypothesis builds random expression trees over the variables a, b, c and constants; a
# variable used in several places makes fan-out, and the tree shape varies the graph.
# Only smooth, bounded-growth operations: kinks (relu, abs) are covered above.

VARIABLES = ("a", "b", "c")
UNARY = {  # name: (ours, torch)
    "tanh": (adl.tanh, lambda x: x.tanh()),
    "sigmoid": (adl.sigmoid, lambda x: x.sigmoid()),
    "sin": (adl.sin, lambda x: x.sin()),
    "cos": (adl.cos, lambda x: x.cos()),
    "exp(tanh)": (lambda x: adl.exp(adl.tanh(x)), lambda x: x.tanh().exp()),
    "x tanh x": (lambda x: x * adl.tanh(x), lambda x: x * x.tanh()),
    "sqrt(x^2 + 1)": (lambda x: adl.sqrt(x * x + 1.0), lambda x: (x * x + 1.0).sqrt()),
    "log(x^2 + 1)": (lambda x: adl.log(x**2 + 1.0), lambda x: (x**2 + 1.0).log()),
    "-x": (lambda x: -x, lambda x: -x),
}
BINARY = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "x / (y^2 + 1)": lambda x, y: x / (y * y + 1.0),
}


def uses_a_variable(expr) -> bool:
    if isinstance(expr, str):
        return True
    return isinstance(expr, tuple) and any(uses_a_variable(arg) for arg in expr[1:])


expressions = st.recursive(
    st.one_of(st.sampled_from(VARIABLES), floats(-2.0, 2.0)),
    lambda kids: st.one_of(
        st.tuples(st.sampled_from(sorted(UNARY)), kids),
        st.tuples(st.sampled_from(sorted(BINARY)), kids, kids),
    ),
    max_leaves=10,
).filter(uses_a_variable)


def evaluate(expr, env: dict, torch_mode: bool):
    """Evaluate an expression tree; variables come from ``env``."""
    if isinstance(expr, str):
        return env[expr]
    if isinstance(expr, float):
        return env["constant"](expr) if torch_mode else expr
    name, *args = expr
    values = [evaluate(arg, env, torch_mode) for arg in args]
    if len(values) == 1:
        ours, theirs = UNARY[name]
        return (theirs if torch_mode else ours)(values[0])
    return BINARY[name](*values)


@pytest.mark.parametrize("engine", ["Value", "Tensor", "Dual"])
@given(data=st.data())
def test_random_expressions_match_torch(torch, engine, data):
    expr = data.draw(expressions, label="expression")
    shape = () if engine == "Value" else (3,)
    inputs = {v: data.draw(arrays(shape, -2.0, 2.0), label=v) for v in VARIABLES}
    theirs = {v: torch.tensor(x, requires_grad=True) for v, x in inputs.items()}
    ref = evaluate(expr, {**theirs, "constant": torch.tensor}, torch_mode=True)
    ref.sum().backward()
    expected = {
        v: t.grad.numpy() if t.grad is not None else np.zeros(shape) for v, t in theirs.items()
    }

    if engine == "Dual":  # forward mode: one jvp along a random direction u
        u = {v: data.draw(arrays(shape), label=f"u_{v}") for v in VARIABLES}
        out, tangent = jvp(
            lambda a, b, c: evaluate(expr, {"a": a, "b": b, "c": c}, torch_mode=False),
            tuple(inputs[v] for v in VARIABLES),
            tuple(u[v] for v in VARIABLES),
        )
        assert_close(out, ref.detach().numpy(), RTOL, ATOL)
        along_u = sum(np.sum(expected[v] * u[v]) for v in VARIABLES)
        assert np.sum(tangent) == pytest.approx(along_u, rel=1e-9, abs=1e-9)
        return

    make = (
        (lambda x: Value(float(x)))
        if engine == "Value"
        else (lambda x: Tensor(x, requires_grad=True))
    )
    ours = {v: make(x) for v, x in inputs.items()}
    out = evaluate(expr, ours, torch_mode=False)
    (out if engine == "Value" else out.sum()).backward()
    assert_close(out.data, ref.detach().numpy(), RTOL, ATOL)
    for v in VARIABLES:
        got = ours[v].grad if ours[v].grad is not None else np.zeros(shape)
        assert_close(got, expected[v], RTOL, ATOL, err_msg=f"d/d{v}")
