"""Forward mode (``Dual``, ``jvp``) and the first-order function transforms.

``grad``, ``value_and_grad``, ``vjp``, ``jvp``, ``jacfwd`` and ``jacrev`` are checked
against calculus written out by hand and against ``torch.autograd.functional.jacobian``;
``jvp`` and ``vjp`` are checked against each other (``<v, J u>`` computed both ways) on
random inputs drawn by hypothesis. Nesting and second derivatives are tested in
``test_higher_*.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autodiff_lab as adl
from autodiff_lab import Dual, Tensor, Value
from autodiff_lab import graph as graph_core
from autodiff_lab.functional import grad, jacfwd, jacrev, jvp, value_and_grad, vjp


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- Dual numbers: closed forms ---------------------------------------------------------------

UNARY = {  # name: (f written with the generic functions, f, f' by calculus, domain)
    "exp": (adl.exp, np.exp, np.exp, (-2, 2)),
    "log": (adl.log, np.log, lambda x: 1 / x, (0.2, 3)),
    "tanh": (adl.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2, (-2, 2)),
    "sigmoid": (adl.sigmoid, sigmoid, lambda x: sigmoid(x) * (1 - sigmoid(x)), (-3, 3)),
    "relu": (adl.relu, lambda x: np.maximum(x, 0), lambda x: (x > 0) * 1.0, (-2, 2)),
    "sin": (adl.sin, np.sin, np.cos, (-3, 3)),
    "cos": (adl.cos, np.cos, lambda x: -np.sin(x), (-3, 3)),
    "sqrt": (adl.sqrt, np.sqrt, lambda x: 0.5 / np.sqrt(x), (0.2, 3)),
    "abs": (adl.abs, np.abs, np.sign, (-2, 2)),
    "x**3": (lambda x: x**3, lambda x: x**3, lambda x: 3 * x**2, (-2, 2)),
    "1/x": (lambda x: 1 / x, lambda x: 1 / x, lambda x: -1 / x**2, (0.5, 2)),
    "2**x": (lambda x: 2**x, lambda x: 2**x, lambda x: 2**x * math.log(2), (-2, 2)),
    "x*sin(x)": (
        lambda x: x * adl.sin(x),
        lambda x: x * np.sin(x),
        lambda x: np.sin(x) + x * np.cos(x),
        (-2, 2),
    ),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_dual_number_carries_the_derivative(name, rng):
    f, f_plain, df, (low, high) = UNARY[name]
    for x in rng.uniform(low, high, 3):
        out = f(Dual(float(x), 1.0))
        assert out.primal == pytest.approx(f_plain(x), rel=1e-13)
        assert out.tangent == pytest.approx(df(x), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_dual_arrays_push_elementwise_tangents(name, rng):
    f, f_plain, df, (low, high) = UNARY[name]
    x = rng.uniform(low, high, (2, 3))
    t = rng.standard_normal((2, 3))
    out = f(Dual(x, t))
    np.testing.assert_allclose(out.primal, f_plain(x), rtol=1e-13)
    np.testing.assert_allclose(out.tangent, df(x) * t, rtol=1e-12, atol=1e-14)


def test_dual_binary_rules():
    a, b = Dual(1.5, 0.3), Dual(-0.5, 2.0)  # tangents ta = 0.3, tb = 2.0
    assert (a * b).tangent == pytest.approx(0.3 * -0.5 + 1.5 * 2.0)  # product rule
    assert (a / b).tangent == pytest.approx(0.3 / -0.5 - 1.5 * 2.0 / 0.25)  # quotient rule
    assert (a - b).tangent == pytest.approx(0.3 - 2.0)
    p = Dual(2.0, 0.3) ** Dual(3.0, 2.0)  # d(a^b) = b a^(b-1) da + a^b ln(a) db
    assert p.tangent == pytest.approx(3 * 4 * 0.3 + 8 * math.log(2) * 2.0)
    assert (2.0 - a).tangent == -0.3 and (3.0 / a).tangent == pytest.approx(-3 * 0.3 / 2.25)
    assert (-a).tangent == -0.3 and (a + 4).tangent == 0.3


def test_dual_array_ops_by_hand(rng):
    A = rng.standard_normal((3, 4))
    x, t = rng.standard_normal(4), rng.standard_normal(4)
    out = A @ Dual(x, t)  # d(Ax) = A dx
    np.testing.assert_allclose(out.primal, A @ x, rtol=1e-13)
    np.testing.assert_allclose(out.tangent, A @ t, rtol=1e-13)
    s = Dual(x, t).sum()
    assert s.tangent == pytest.approx(t.sum())
    m = Dual(x, t).reshape(2, 2).T[0].mean()
    assert m.tangent == pytest.approx((t[0] + t[2]) / 2)  # row 0 of [[t0, t1], [t2, t3]].T
    p = adl.softmax(Dual(x, t))  # d softmax = (diag(p) - p p^T) dx
    q = np.exp(x) / np.exp(x).sum()
    np.testing.assert_allclose(p.tangent, (np.diag(q) - np.outer(q, q)) @ t, rtol=1e-12)


def test_dual_arrays_concatenate_and_stack(rng):
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    joined = adl.concatenate([Dual(x, t), np.ones(2), Dual(2 * x, 2 * t)])
    np.testing.assert_array_equal(joined.primal, np.concatenate([x, np.ones(2), 2 * x]))
    np.testing.assert_array_equal(joined.tangent, np.concatenate([t, np.zeros(2), 2 * t]))
    stacked = adl.stack([Dual(x, t), x], axis=1)
    np.testing.assert_array_equal(stacked.primal, np.stack([x, x], axis=1))
    np.testing.assert_array_equal(stacked.tangent, np.stack([t, np.zeros(3)], axis=1))


def test_dual_without_a_tangent_is_a_constant():
    d = Dual(2.0)
    assert d.tangent == 0.0 and adl.exp(d).tangent == 0.0
    arr = Dual(np.ones(3))
    np.testing.assert_array_equal(arr.tangent, np.zeros(3))


# --- jvp --------------------------------------------------------------------------------------


def test_jvp_is_the_directional_derivative():
    def f(x, y):
        return adl.sin(x) * y + x * x

    out, tangent = jvp(f, (0.5, 2.0), (1.0, 0.0))  # d/dx
    assert out == pytest.approx(math.sin(0.5) * 2 + 0.25)
    assert tangent == pytest.approx(math.cos(0.5) * 2 + 1.0)
    _, tangent = jvp(f, (0.5, 2.0), (0.0, 1.0))  # d/dy
    assert tangent == pytest.approx(math.sin(0.5))
    _, tangent = jvp(f, (0.5, 2.0), (3.0, -1.0))  # 3 d/dx - d/dy
    assert tangent == pytest.approx(3 * (math.cos(0.5) * 2 + 1.0) - math.sin(0.5))


def test_jvp_on_arrays_and_single_arguments(rng):
    x, u = rng.standard_normal(5), rng.standard_normal(5)
    out, tangent = jvp(adl.tanh, x, u)  # a bare primal and tangent are accepted
    assert isinstance(out, np.ndarray) and isinstance(tangent, np.ndarray)
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-13)
    np.testing.assert_allclose(tangent, (1 - np.tanh(x) ** 2) * u, rtol=1e-12)


def test_jvp_of_a_function_ignoring_its_input():
    out, tangent = jvp(lambda x: 3.0, (1.0,), (1.0,))
    assert out == 3.0 and tangent == 0.0


# --- grad, value_and_grad, vjp -------------------------------------------------------------------


def test_grad_of_a_float_function_returns_a_float():
    df = grad(lambda x: x * adl.exp(x))
    g = df(0.7)
    assert isinstance(g, float)
    assert g == pytest.approx(math.exp(0.7) * 1.7)


def test_grad_of_an_array_function_has_the_inputs_shape(rng):
    x = rng.standard_normal((3, 2))
    g = grad(lambda x: (x * x).sum() / 2 + adl.tanh(x).mean())(x)
    assert isinstance(g, np.ndarray) and g.shape == (3, 2)
    np.testing.assert_allclose(g, x + (1 - np.tanh(x) ** 2) / 6, rtol=1e-13)


def test_grad_argnums_and_value_and_grad():
    def f(x, y, z):
        return x * y + y * z * z

    assert grad(f, argnums=1)(2.0, 3.0, 4.0) == pytest.approx(2 + 16)
    assert grad(f, argnums=(0, 2))(2.0, 3.0, 4.0) == pytest.approx((3.0, 24.0))
    assert grad(f, argnums=-1)(2.0, 3.0, 4.0) == pytest.approx(24.0)
    value, grads = value_and_grad(f, argnums=(0, 1))(2.0, 3.0, 4.0)
    assert value == pytest.approx(54.0) and grads == pytest.approx((3.0, 18.0))


def test_grad_does_not_accumulate_between_calls():
    df = grad(lambda x: x * x * x)
    assert df(2.0) == df(2.0) == 12.0


def test_grad_of_a_function_with_control_flow():
    def f(x):
        total = x
        for _ in range(3):
            total = total * x if total < 10 else total + x
        return total

    # at x = 2: 2 -> 4 -> 8 -> 16, i.e. x^4: derivative 4 x^3 = 32
    assert grad(f)(2.0) == pytest.approx(32.0)
    # at x = 3: 3 -> 9 -> 27 -> 30, i.e. x^3 + x: derivative 3 x^2 + 1 = 28
    assert grad(f)(3.0) == pytest.approx(28.0)


def test_vjp_pulls_back_a_cotangent(rng):
    A = rng.standard_normal((4, 3))
    x = rng.standard_normal(3)
    out, vjp_fn = vjp(lambda x: adl.tanh(Tensor(A) @ x), x)
    np.testing.assert_allclose(out, np.tanh(A @ x), rtol=1e-13)
    v = rng.standard_normal(4)
    jac = (1 - np.tanh(A @ x) ** 2)[:, None] * A  # J = diag(1 - tanh^2) A
    (pulled,) = vjp_fn(v)
    np.testing.assert_allclose(pulled, v @ jac, rtol=1e-12)
    (again,) = vjp_fn(v)  # the recorded graph can be pulled back through again
    np.testing.assert_array_equal(again, pulled)


def test_vjp_with_several_inputs_and_a_scalar_output():
    out, vjp_fn = vjp(lambda a, b: a * b + adl.log(b), 2.0, 0.5)
    assert out == pytest.approx(1.0 + math.log(0.5))
    da, db = vjp_fn(2.0)
    assert da == pytest.approx(2 * 0.5) and db == pytest.approx(2 * (2.0 + 1 / 0.5))


# --- Jacobians: jacfwd == jacrev == torch ---------------------------------------------------------


def _r3_to_r2(x):
    return (np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]]) @ x) * x[:2]


FUNCTIONS = {  # name: (f, input shape)
    "R^3 -> R^2": (_r3_to_r2, (3,)),
    "softmax R^4 -> R^4": (lambda x: adl.softmax(x * 2.0), (4,)),
    "matrix -> vector": (lambda x: adl.tanh(x).sum(axis=0) * x[0], (2, 3)),
    "vector -> matrix": (lambda x: adl.sigmoid(x.reshape(2, 2)) @ x.reshape(2, 2).T, (4,)),
    "R^3 -> R": (lambda x: adl.log((x * x).sum() + 1.0), (3,)),
    "R -> R^3": (lambda x: adl.sin(x * np.array([1.0, 2.0, 3.0])), ()),
}

TORCH_FUNCTIONS = {  # the same functions in PyTorch
    "R^3 -> R^2": lambda x, t: t.tensor([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]]) @ x * x[:2],
    "softmax R^4 -> R^4": lambda x, t: t.softmax(x * 2.0, dim=-1),
    "matrix -> vector": lambda x, t: x.tanh().sum(dim=0) * x[0],
    "vector -> matrix": lambda x, t: x.reshape(2, 2).sigmoid() @ x.reshape(2, 2).T,
    "R^3 -> R": lambda x, t: ((x * x).sum() + 1.0).log(),
    "R -> R^3": lambda x, t: (x * t.tensor([1.0, 2.0, 3.0])).sin(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jacfwd_equals_jacrev_equals_torch(name, torch, rng):
    f, shape = FUNCTIONS[name]
    x = rng.standard_normal(shape)
    forward = jacfwd(f)(x)
    reverse = jacrev(f)(x)
    expected = torch.autograd.functional.jacobian(
        lambda t: TORCH_FUNCTIONS[name](t, torch), torch.tensor(x)
    ).numpy()
    assert np.shape(forward) == np.shape(reverse) == expected.shape
    np.testing.assert_allclose(forward, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(reverse, expected, rtol=1e-10, atol=1e-12)


def test_jacobian_costs_one_pass_per_input_or_per_output(monkeypatch):
    """jacfwd: one forward pass per input entry; jacrev: one recording, one backward per output."""
    calls = {"f": 0, "backward": 0}
    original = graph_core.backpropagate

    def counting_backpropagate(*args, **kwargs):
        calls["backward"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(graph_core, "backpropagate", counting_backpropagate)

    def f(x):  # R^5 -> R^2
        calls["f"] += 1
        return np.arange(10.0).reshape(2, 5) @ adl.tanh(x)

    x = np.linspace(-1, 1, 5)
    jacfwd(f)(x)
    assert calls == {"f": 5, "backward": 0}
    calls.update(f=0)
    jacrev(f)(x)
    assert calls == {"f": 1, "backward": 2}


# --- jvp and vjp agree: <v, J u> both ways --------------------------------------------------------

RANDOM_FUNCTIONS = {  # name: (f, input shape, output shape)
    "tanh(W x) * x": (
        lambda x: adl.tanh(np.linspace(-1, 1, 12).reshape(4, 3) @ x) * x.sum(),
        (3,),
        (4,),
    ),
    "log_softmax over rows": (lambda x: adl.log_softmax(x * x, axis=1), (2, 3), (2, 3)),
    "broadcast and reduce": (
        lambda x: (x.reshape(3, 1) * x.reshape(1, 3)).max(axis=0) + adl.exp(-x),
        (3,),
        (3,),
    ),
    "indexing and concatenation": (
        lambda x: adl.concatenate([x[[0, 0, 2]] * x[1], adl.sigmoid(x)]),
        (3,),
        (6,),
    ),
}


@pytest.mark.parametrize("name", sorted(RANDOM_FUNCTIONS))
@given(data=st.data())
def test_jvp_and_vjp_agree(name, data):
    f, in_shape, out_shape = RANDOM_FUNCTIONS[name]
    elements = st.floats(-2, 2, allow_nan=False, allow_subnormal=False)
    x = data.draw(hnp.arrays(np.float64, in_shape, elements=elements), label="x")
    u = data.draw(hnp.arrays(np.float64, in_shape, elements=elements), label="u")
    v = data.draw(hnp.arrays(np.float64, out_shape, elements=elements), label="v")
    out_f, ju = jvp(f, (x,), (u,))
    out_r, vjp_fn = vjp(f, x)
    (vj,) = vjp_fn(v)
    np.testing.assert_allclose(out_f, out_r, rtol=1e-13, atol=1e-13)
    assert np.sum(v * ju) == pytest.approx(np.sum(vj * u), rel=1e-9, abs=1e-9)


# --- one function, every kind of number ---------------------------------------------------------


def test_one_function_runs_on_floats_arrays_values_tensors_and_duals():
    def f(x):
        return adl.tanh(x) * adl.exp(-x) + adl.sqrt(x * x + 1.0)

    x0 = 0.3
    expected = math.tanh(x0) * math.exp(-x0) + math.sqrt(x0 * x0 + 1)
    slope = (
        (1 - math.tanh(x0) ** 2) * math.exp(-x0)
        - math.tanh(x0) * math.exp(-x0)
        + x0 / math.sqrt(x0 * x0 + 1)
    )
    assert f(x0) == pytest.approx(expected, rel=1e-14)
    assert f(np.array([x0]))[0] == pytest.approx(expected, rel=1e-14)
    v = Value(x0)
    fv = f(v)
    fv.backward()
    assert fv.data == pytest.approx(expected, rel=1e-14) and v.grad == pytest.approx(slope)
    t = Tensor([x0], requires_grad=True)
    ft = f(t)
    ft.sum().backward()
    assert ft.data[0] == pytest.approx(expected, rel=1e-14) and t.grad[0] == pytest.approx(slope)
    d = f(Dual(x0, 1.0))
    assert d.primal == pytest.approx(expected, rel=1e-14) and d.tangent == pytest.approx(slope)
    assert grad(f)(x0) == pytest.approx(slope) and jvp(f, (x0,), (1.0,))[1] == pytest.approx(slope)


def test_dual_keeps_float32_and_saturates_finitely():
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    out = adl.tanh(Dual(x, np.ones(3, dtype=np.float32)) * 2.0) @ np.ones(3, dtype=np.float32)
    assert out.primal.dtype == np.float32 and out.tangent.dtype == np.float32
    assert out.tangent == pytest.approx(np.sum(2 * (1 - np.tanh(2 * x) ** 2)), rel=1e-5)
    big = Dual(np.array([1000.0, -1000.0]), np.ones(2))
    for f in (adl.tanh, adl.sigmoid):
        d = f(big)
        assert np.all(np.isfinite(d.primal)) and np.all(np.isfinite(d.tangent))
        np.testing.assert_allclose(d.tangent, 0.0, atol=1e-300)


def test_jvp_through_cross_entropy(rng):
    z, u = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    targets = np.array([2, 0, 0, 1])
    loss, tangent = jvp(lambda z: adl.cross_entropy(z, targets), (z,), (u,))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert loss == pytest.approx(-np.mean(np.log(p[np.arange(4), targets])), rel=1e-13)
    onehot = np.eye(3)[targets]
    assert tangent == pytest.approx(np.sum((p - onehot) / 4 * u), rel=1e-12)


def test_transforms_of_a_function_that_ignores_its_input():
    """A constant output has zero derivatives (and no graph to walk)."""
    out, vjp_fn = vjp(lambda x: 3.0, np.ones(2))
    assert out == 3.0
    (pulled,) = vjp_fn(1.0)
    np.testing.assert_array_equal(pulled, [0.0, 0.0])
    np.testing.assert_array_equal(grad(lambda x: 3.0)(np.ones(2)), [0.0, 0.0])
    _, (da, db) = value_and_grad(lambda a, b: a * 2.0, argnums=(0, 1))(1.5, 4.0)
    assert (da, db) == (2.0, 0.0)
    np.testing.assert_array_equal(jacrev(lambda x: np.ones(3))(np.ones(2)), np.zeros((3, 2)))
    np.testing.assert_array_equal(jacfwd(lambda x: np.ones(3))(np.ones(2)), np.zeros((3, 2)))


# --- the elementwise functions and methods are written out (not generated) -------------------

CLOSED_FORMS = {  # name: f at a point by its formula (math module), for a float
    "exp": math.exp,
    "log": math.log,
    "log1p": math.log1p,
    "tanh": math.tanh,
    "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
    "softplus": lambda x: math.log(1 + math.exp(x)),
    "relu": lambda x: max(x, 0.0),
    "sin": math.sin,
    "cos": math.cos,
    "sqrt": math.sqrt,
    "abs": lambda x: -x if x < 0 else x,
}


def test_every_elementwise_entry_has_a_function_and_a_method():
    """``ops.<name>`` and ``x.<name>()`` exist for every elementwise entry, defined in
    ops.py and primitive.py (where an editor and mypy find them), and compute the formula."""
    import inspect

    from autodiff_lab import ops
    from autodiff_lab import primitive as methods
    from autodiff_lab.primitives import ELEMENTWISE

    assert sorted(p.name for p in ELEMENTWISE) == sorted(CLOSED_FORMS)
    for prim in ELEMENTWISE:
        fn = getattr(ops, prim.name)
        method = getattr(methods.NumberMethods, prim.name)
        assert inspect.getmodule(fn) is ops and fn.__name__ == prim.name
        assert inspect.getmodule(method) is methods and method.__name__ == prim.name
        x = 0.7
        want = CLOSED_FORMS[prim.name](x)
        assert ops.__dict__[prim.name](x) == pytest.approx(want, rel=1e-15)
        v = getattr(Value(x), prim.name)()
        assert v.data == pytest.approx(want, rel=1e-15) and v._fn is prim
        t = getattr(Tensor(np.array([x]), requires_grad=True), prim.name)()
        np.testing.assert_allclose(t.data, [want], rtol=1e-15)
        assert t._fn is prim
        d = getattr(Dual(x, 1.0), prim.name)()
        assert d.primal == pytest.approx(want, rel=1e-15)
    assert abs(Value(-2.0)).data == 2.0
