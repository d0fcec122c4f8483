"""Higher-order derivatives: nested grad, Hessians (both modes), HVPs, nested forward mode.

Expected values come from closed forms (checked with sympy when written) or from PyTorch
in float64 (``torch.autograd.functional`` and ``torch.func``), never from the code under
test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor, Value, cos, exp, sigmoid, sin, tanh
from autodiff_lab.functional import grad, hessian, hvp, jacfwd, jacrev, jvp, vjp
from autodiff_lab.tangents import replay

torch = pytest.importorskip("torch")
F64 = torch.float64


# --- orders 1-4 of scalar functions against closed forms --------------------------------


def _tanh_derivs(x):
    t = math.tanh(x)
    s = 1 - t * t
    return [s, -2 * t * s, -2 * s * (1 - 3 * t * t), 8 * t * s * (2 - 3 * t * t)]


def _sin_exp_derivs(x):  # d^n/dx^n e^x sin x = 2^(n/2) e^x sin(x + n pi/4)
    return [2 ** (n / 2) * math.exp(x) * math.sin(x + n * math.pi / 4) for n in range(1, 5)]


def _x_pow_x_derivs(x):
    p, L = x**x, math.log(x) + 1
    return [
        p * L,
        p * (L**2 + 1 / x),
        p * (L**3 + 3 * L / x - 1 / x**2),
        p * (L**4 + 6 * L**2 / x - 4 * L / x**2 + 3 / x**2 + 2 / x**3),
    ]


SCALAR_FUNCTIONS = {
    "tanh": (lambda x: tanh(x), _tanh_derivs, 0.6),
    "sin*exp": (lambda x: sin(x) * exp(x), _sin_exp_derivs, 0.7),
    "x**x": (lambda x: x**x, _x_pow_x_derivs, 1.3),
}


@pytest.mark.parametrize("engine", ["Value", "Tensor"])
@pytest.mark.parametrize("name", list(SCALAR_FUNCTIONS))
def test_nested_grad_orders_1_to_4_match_closed_forms(name, engine):
    f, derivs, x0 = SCALAR_FUNCTIONS[name]
    x = x0 if engine == "Value" else np.array(x0)
    expected = derivs(x0)
    g = f
    for order in range(1, 5):
        g = grad(g)
        got = g(x)
        assert isinstance(got, float | np.ndarray), f"order {order} should return plain data"
        assert float(got) == pytest.approx(expected[order - 1], rel=1e-10), f"order {order}"


@pytest.mark.parametrize("name", list(SCALAR_FUNCTIONS))
def test_fourth_derivative_by_every_mix_of_modes(name):
    f, derivs, x0 = SCALAR_FUNCTIONS[name]
    fourth = derivs(x0)[3]
    mixes = {
        "fwd^4": jacfwd(jacfwd(jacfwd(jacfwd(f)))),
        "fwd-fwd-rev-rev": jacfwd(jacfwd(grad(grad(f)))),
        "rev-fwd-rev-fwd": grad(jacfwd(grad(jacfwd(f)))),
        "fwd-rev-fwd-rev": jacfwd(grad(jacfwd(grad(f)))),
    }
    for mix, d4 in mixes.items():
        assert float(d4(x0)) == pytest.approx(fourth, rel=1e-10), mix


def test_value_backward_create_graph_gives_differentiable_grad():
    x = Value(0.8)
    y = x * x * x  # y' = 3x^2, y'' = 6x
    y.backward(create_graph=True)
    first = x.grad
    assert isinstance(first, Value) and first.data == pytest.approx(3 * 0.8**2)
    x.grad = 0.0
    first.backward()
    assert x.grad == pytest.approx(6 * 0.8)


def test_tensor_backward_create_graph_gives_differentiable_grad():
    x = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    (x.sin() * x).sum().backward(create_graph=True)  # g = sin x + x cos x
    g = x.grad
    assert isinstance(g, Tensor)
    xs = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(g.data, np.sin(xs) + xs * np.cos(xs), rtol=1e-12)
    x.grad = None
    g.sum().backward()  # g' = 2 cos x - x sin x
    np.testing.assert_allclose(x.grad, 2 * np.cos(xs) - xs * np.sin(xs), rtol=1e-12)


# --- Hessians and HVPs against PyTorch on random functions --------------------------------

UNARY = {
    "tanh": (tanh, torch.tanh),
    "sin": (sin, torch.sin),
    "cos": (cos, torch.cos),
    "sigmoid": (sigmoid, torch.sigmoid),
}


def random_function(seed: int, n: int):
    """f(x) = w . u2(B u1(A x + c)) + mean(exp(0.1 x^2)) + x0 x1 / (1 + x2^2), random parts.

    Returns the same function twice: written with our ops, and with torch's.
    """
    rng = np.random.default_rng(seed)
    m = n + 2
    A, c = rng.normal(size=(m, n)) / math.sqrt(n), rng.normal(size=m)
    B, w = rng.normal(size=(3, m)) / math.sqrt(m), rng.normal(size=3)
    (u1, t1), (u2, t2) = (UNARY[k] for k in rng.choice(sorted(UNARY), 2))

    def ours(x):
        h = u2(B @ u1(A @ x + c))
        return (w * h).sum() + exp(0.1 * x * x).mean() + x[0] * x[1] / (1 + x[2] ** 2)

    At, ct, Bt, wt = (torch.tensor(a, dtype=F64) for a in (A, c, B, w))

    def theirs(x):
        h = t2(Bt @ t1(At @ x + ct))
        return (wt * h).sum() + torch.exp(0.1 * x * x).mean() + x[0] * x[1] / (1 + x[2] ** 2)

    return ours, theirs


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mode", ["fwd-rev", "rev-rev"])
def test_hessian_matches_pytorch(seed, mode):
    ours, theirs = random_function(seed, n=5)
    x = np.random.default_rng(100 + seed).normal(size=5)
    xt = torch.tensor(x, dtype=F64)
    H = hessian(ours, mode=mode)(x)
    assert isinstance(H, np.ndarray) and H.shape == (5, 5)
    np.testing.assert_allclose(
        H, torch.autograd.functional.hessian(theirs, xt).numpy(), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(H, torch.func.hessian(theirs)(xt).numpy(), rtol=1e-9, atol=1e-12)


def test_hessian_of_matrix_input_has_shape_x_by_x():
    A = np.arange(6.0).reshape(2, 3) / 5

    def f(X):
        return (X * X * A).sum() + (X[0, 0] * X[1, 2]).sin()

    def ft(X):
        return (X * X * torch.tensor(A)).sum() + torch.sin(X[0, 0] * X[1, 2])

    X = np.array([[0.3, -0.2, 0.5], [1.0, 0.1, -0.7]])
    expected = torch.func.hessian(ft)(torch.tensor(X)).numpy()
    for mode in ("fwd-rev", "rev-rev"):
        H = hessian(f, mode=mode)(X)
        assert H.shape == (2, 3, 2, 3)
        np.testing.assert_allclose(H, expected, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("mode", ["fwd-rev", "rev-rev"])
def test_hvp_matches_pytorch_without_forming_the_hessian(seed, mode):
    ours, theirs = random_function(seed, n=6)
    rng = np.random.default_rng(200 + seed)
    x, v = rng.normal(size=6), rng.normal(size=6)
    xt, vt = torch.tensor(x), torch.tensor(v)
    got = hvp(ours, x, v, mode=mode)
    _, expected = torch.autograd.functional.hvp(theirs, xt, vt)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-9, atol=1e-12)
    _, expected_func = torch.func.jvp(torch.func.grad(theirs), (xt,), (vt,))
    np.testing.assert_allclose(got, expected_func.numpy(), rtol=1e-9, atol=1e-12)


def test_scalar_engine_hessian_of_two_variables_matches_pytorch():
    def f(x, y):
        return tanh(x * y) + x**3 * exp(y)

    def ft(x, y):
        return torch.tanh(x * y) + x**3 * torch.exp(y)

    x0, y0 = 0.4, -0.3
    ours = [[grad(grad(f, i), j)(x0, y0) for j in (0, 1)] for i in (0, 1)]
    args = (torch.tensor(x0, dtype=F64), torch.tensor(y0, dtype=F64))
    theirs = torch.autograd.functional.hessian(ft, args)
    np.testing.assert_allclose(
        np.array(ours), [[float(theirs[i][j]) for j in (0, 1)] for i in (0, 1)], rtol=1e-12
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_nested_grad_on_values_matches_pytorch_to_order_4(seed):
    rng = np.random.default_rng(seed)
    a, b, c = rng.uniform(0.5, 1.5, size=3)
    (u1, t1), (u2, t2) = (UNARY[k] for k in rng.choice(sorted(UNARY), 2))

    def f(x):
        return u1(a * x + b) * u2(c * x) + exp(-x * x) / (1 + x * x)

    def ft(x):
        return t1(a * x + b) * t2(c * x) + torch.exp(-x * x) / (1 + x * x)

    x0 = float(rng.uniform(-1, 1))
    xt = torch.tensor(x0, dtype=F64, requires_grad=True)
    y, g = ft(xt), f
    for order in range(1, 5):
        (y,) = torch.autograd.grad(y, xt, create_graph=True)
        g = grad(g)
        assert g(x0) == pytest.approx(y.item(), rel=1e-10, abs=1e-12), order


def test_third_derivative_tensor_of_a_tensor_function_matches_pytorch():
    ours, theirs = random_function(4, n=3)
    x = np.array([0.2, -0.4, 0.9])

    def torch_hessian(x):
        return torch.autograd.functional.hessian(theirs, x, create_graph=True)

    expected = torch.autograd.functional.jacobian(torch_hessian, torch.tensor(x)).numpy()
    for third in (jacfwd(hessian(ours)), jacrev(hessian(ours, mode="rev-rev"))):
        got = third(x)
        assert got.shape == (3, 3, 3)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_scalar_hessian_and_hvp_for_one_number():
    def f(x):
        return sin(x) * exp(x)

    expected = 2 * math.cos(0.7) * math.exp(0.7)  # (e^x sin x)'' = 2 e^x cos x
    for mode in ("fwd-rev", "rev-rev"):
        assert float(hessian(f, mode=mode)(0.7)) == pytest.approx(expected, rel=1e-12)
        assert float(hvp(f, 0.7, 3.0, mode=mode)) == pytest.approx(3 * expected, rel=1e-12)


def test_jvp_of_vjp_matches_pytorch():
    """Forward over reverse through vjp itself, with a dual primal and a dual cotangent."""
    rng = np.random.default_rng(7)
    A = rng.normal(size=(3, 4))

    def F(x):
        return tanh(A @ x) * x[:3]

    def Ft(x):
        return torch.tanh(torch.tensor(A) @ x) * x[:3]

    x, v, u, w = rng.normal(size=4), rng.normal(size=4), rng.normal(size=3), rng.normal(size=3)
    xt, vt, ut, wt = (torch.tensor(a) for a in (x, v, u, w))

    # d/de [u^T J(x + e v)]: second-order, through a dual primal
    got = jvp(lambda x: vjp(F, x)[1](u)[0], (x,), (v,))[1]
    _, expected = torch.func.jvp(lambda x: torch.func.vjp(Ft, x)[1](ut)[0], (xt,), (vt,))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10)

    # d/de [(u + e w)^T J(x)] = w^T J: vjp is linear in the cotangent
    got = jvp(lambda ct: vjp(F, x)[1](ct)[0], (u,), (w,))[1]
    np.testing.assert_allclose(got, torch.func.vjp(Ft, xt)[1](wt)[0].numpy(), rtol=1e-10)

    # both at once
    got = jvp(lambda x, ct: vjp(F, x)[1](ct)[0], (x, u), (v, w))[1]
    _, expected = torch.func.jvp(lambda x, ct: torch.func.vjp(Ft, x)[1](ct)[0], (xt, ut), (vt, wt))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10)


def test_jacobians_of_a_vector_function_agree_with_pytorch_in_both_modes():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(5, 3))

    def F(x):
        return sin(A @ x) * x.sum()

    def Ft(x):
        return torch.sin(torch.tensor(A) @ x) * x.sum()

    x = rng.normal(size=3)
    expected = torch.func.jacrev(Ft)(torch.tensor(x)).numpy()
    for jac in (jacfwd, jacrev):
        J = jac(F)(x)
        assert J.shape == (5, 3)
        np.testing.assert_allclose(J, expected, rtol=1e-12)
    # second derivatives of a vector function: shape (5, 3, 3), fwd-over-rev and rev-over-fwd
    expected2 = torch.func.jacfwd(torch.func.jacrev(Ft))(torch.tensor(x)).numpy()
    np.testing.assert_allclose(jacfwd(jacrev(F))(x), expected2, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(jacrev(jacfwd(F))(x), expected2, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobians_and_hessians_of_float32_inputs_stay_float32(vectorize):
    """float32 in, float32 out, as torch.func gives (checked here) and as grad and vmap
    already did: the Jacobians and Hessians were float64, every transformation having
    taken its input as a float64 array."""
    torch = pytest.importorskip("torch")
    x = np.array([0.3, -0.5, 1.2], np.float32)
    s, t = float(x.sum()), np.tanh(x.astype(float))
    want_j = np.diag((1 - t**2) * s) + np.outer(t, np.ones(3))  # d(tanh(x_i) Σx)/dx_j
    want_h = np.diag(6 * x.astype(float))  # of Σ x³
    xt = torch.tensor(x)  # (float32: torch.tensor keeps numpy's dtype)
    torch_j = torch.func.jacrev(lambda x: torch.tanh(x) * x.sum())(xt)
    torch_h = torch.func.hessian(lambda x: (x**3).sum())(xt)
    assert torch_j.dtype == torch_h.dtype == torch.float32
    for jac in (jacfwd, jacrev):
        J = jac(lambda x: tanh(x) * x.sum(), vectorize=vectorize)(x)
        assert J.dtype == np.float32
        np.testing.assert_allclose(J, want_j, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(J, torch_j.numpy(), rtol=1e-6, atol=1e-6)
    for mode in ("fwd-rev", "rev-rev"):
        H = hessian(lambda x: (x**3).sum(), mode=mode)(x)
        assert H.dtype == np.float32
        np.testing.assert_allclose(H, want_h, rtol=1e-6)
        np.testing.assert_allclose(H, torch_h.numpy(), rtol=1e-6)
    assert jacrev(lambda x: x * 2.0)(np.arange(3)).dtype == np.float64  # integers: float64


# --- perturbation confusion -----------------------------------------------------------------


def derivative(f, x):
    """d f / dx by forward mode, with a fresh tag (as jvp does)."""
    return jvp(f, (x,), (1.0,))[1]


def naive_derivative(f, x):
    """The same with every dual sharing tag 0: the textbook mistake."""
    return f(Dual(x, 1.0)).tangent


def test_nested_forward_mode_has_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1
    got = derivative(lambda x: x * derivative(lambda y: x + y, 1.0), 1.0)
    assert got == 1.0


def test_naive_untagged_nesting_gets_the_famous_wrong_answer():
    # the inner derivative also sees x's perturbation: d/dy (x + y) "= 2", so the result is 2
    got = naive_derivative(lambda x: x * naive_derivative(lambda y: x + y, 1.0), 1.0)
    assert got == 2.0


def test_no_perturbation_confusion_when_mixing_modes_through_closures():
    # d/dx [x * d/dy (x y)] = d/dx x^2 = 2x, whichever modes do the outer and inner work
    x0 = 1.5
    inner_rev = lambda x: x * grad(lambda y: x * y)(1.0)  # noqa: E731
    inner_fwd = lambda x: x * derivative(lambda y: x * y, 1.0)  # noqa: E731
    assert float(grad(inner_rev)(x0)) == pytest.approx(2 * x0)
    assert float(derivative(inner_rev, x0)) == pytest.approx(2 * x0)
    assert float(derivative(inner_fwd, x0)) == pytest.approx(2 * x0)
    # and the classic one with a reverse-mode inner derivative: 1, not 2
    assert derivative(lambda x: x * grad(lambda y: x + y)(1.0), 1.0) == 1.0


def test_reverse_over_forward_through_a_closure_on_tensors():
    # f(x) = sum(x * d/de sum(x * (1 + e))) = sum(x) * sum(x)  ->  grad = 2 sum(x) everywhere
    def f(x):
        inner = jvp(lambda y: (x * y).sum(), (np.ones(3),), (np.ones(3),))[1]
        return (x * inner).sum()

    x0 = np.array([1.0, 2.0, -0.5])
    np.testing.assert_allclose(grad(f)(x0), np.full(3, 2 * x0.sum()))


def test_nested_tangents_of_vectors_give_the_hessian():
    ours, theirs = random_function(5, n=4)
    x = np.linspace(-0.5, 0.8, 4)
    expected = torch.func.hessian(theirs)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(jacfwd(jacfwd(ours))(x), expected, rtol=1e-9, atol=1e-12)


# --- the replay and the errors ---------------------------------------------------------------


def test_replay_recomputes_only_what_depends_on_the_substituted_leaf():
    a, b = Value(2.0), Value(3.0)
    unrelated = b * b
    out = a * a + unrelated
    cache = {}
    result = replay(out, {a: Dual(2.0, 1.0, tag=99)}, cache)
    assert out in cache and unrelated not in cache and b not in cache
    assert isinstance(result, Dual) and result.tag == 99
    assert result.primal == pytest.approx(13.0) and result.tangent == pytest.approx(4.0)
    assert replay((out, unrelated, 5.0), {}) == (13.0, 9.0, 5.0)


def test_bad_mode_and_shape_errors_name_the_function():
    f = lambda x: (x * x).sum()  # noqa: E731
    with pytest.raises(ValueError, match=r"hessian: mode must be one of .*'sideways'"):
        hessian(f, mode="sideways")
    with pytest.raises(ValueError, match=r"hvp: v has shape \(2,\), but x has shape \(3,\)"):
        hvp(f, np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match=r"hvp: mode must be one of"):
        hvp(f, np.ones(3), np.ones(3), mode="x")
