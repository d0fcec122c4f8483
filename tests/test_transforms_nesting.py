"""Two transformations meeting: the six classes of bug of issue 23, each on its reproducer.

Every case here once returned a wrong number, leaked a tracer or raised an unrelated
error. Each is now checked against a closed form and, where one exists, ``torch.func``
(float64), or finite differences:

- A: two tracers meeting in a binary operator or ``@`` (the newest must apply it, as
  ``bind`` does): ``vmap(jacfwd(y * x))``, the mask idiom ``(x > 0) * x`` under
  ``vmap(jvp)``, ``jvp(vmap(y / x))``;
- B: ``custom_vjp``/``custom_jvp`` under a batch of tangents or cotangents
  (``jacrev(vectorize=True)``, ``vmap(jacrev)``, ``vmap(hessian)``, ``vmap(vmap)``);
- C: ``checkpoint`` closing over a batched value (and over a dual number);
- D: 0-d arrays in ``hessian``, ``hvp``, ``jacfwd(jacrev)``;
- E: a float primal's tangent broadcast by ``add``/``sub``;
- F: a numpy bool in arithmetic with a ``Dual``.
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor, checkpoint, custom_jvp, custom_vjp, ops
from autodiff_lab.batching import Batched
from autodiff_lab.functional import grad, hessian, hvp, jacfwd, jacrev, jvp, linearize, vjp, vmap
from autodiff_lab.kinds import Boxed

RTOL, ATOL = 1e-10, 1e-12


def plain(x):
    """The result as a float64 array, after checking nothing traced leaked out of it."""
    if isinstance(x, tuple | list):
        return type(x)(plain(v) for v in x)
    assert not isinstance(x, Boxed), f"a {type(x).__name__} leaked out: {x!r:.80}"
    arr = np.asarray(x)
    assert arr.dtype == np.float64, f"dtype {arr.dtype}: {arr!r:.80}"
    return arr


def close(got, want, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(plain(got), want, rtol=rtol, atol=atol)


FD = {"rtol": 1e-7, "atol": 1e-8}  # central differences: error O(h²) + O(eps/h)


def central_difference(f, x, h=1e-6):
    """d f / d x for a scalar x (f may return an array)."""
    return (np.asarray(f(x + h)) - np.asarray(f(x - h))) / (2 * h)


# --- A: the newest tracer applies a binary operator ------------------------------------------


X2 = np.array([0.5, -1.0])
Y22 = np.array([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("order", ["y * x", "x * y"])
def test_A_vmap_of_jacfwd_of_a_product_either_order(order, torch):
    f = (lambda x, y: y * x) if order == "y * x" else (lambda x, y: x * y)
    got = vmap(jacfwd(f), in_axes=(None, 0))(X2, Y22)
    close(got, np.stack([np.diag(Y22[0]), np.diag(Y22[1])]))  # d(y x)/dx = diag(y)
    tf = torch.func
    want = tf.vmap(tf.jacfwd(lambda x, y: y * x), in_dims=(None, 0))(
        torch.tensor(X2), torch.tensor(Y22)
    )
    close(got, want.numpy())


def test_A_matmul_between_tracers_goes_to_the_newest(torch):
    A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    xs = np.array([[0.5, -1.0], [2.0, 0.25]])

    def f(a, x):
        return a @ x

    got = vmap(jacfwd(f, argnums=1), in_axes=(None, 0))(A, xs)
    close(got, np.stack([A, A]))
    got_rev = vmap(jacfwd(lambda x, a: (a @ x).sum()), in_axes=(0, None))(xs, A)
    close(got_rev, np.tile(A.sum(0), (2, 1)))


def test_A_mask_idiom_under_vmap_of_jvp():
    x = np.array([0.5, -1.0, 2.0])
    t = np.array([1.0, 1.0, 3.0])
    out, tangent = vmap(lambda x, t: jvp(lambda x: (x > 0) * x, (x,), (t,)))(x, t)
    close(out, np.maximum(x, 0))
    close(tangent, (x > 0) * t)


def test_A_jvp_of_vmap_divides_by_the_batch():
    x, tx = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    out, tangent = jvp(vmap(lambda x, y: y / x, in_axes=(0, None)), (x, 3.0), (tx, 1.0))
    close(out, 3.0 / x)
    close(tangent, 1.0 / x - 3.0 * tx / x**2)  # d(y/x) = dy/x - y dx/x²


# --- B: custom rules under a batch of tangents or cotangents ---------------------------------


@custom_jvp
def twice_sin_jvp(x):
    return 2 * ops.sin(x)


@twice_sin_jvp.defjvp
def _twice_sin_jvp_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return twice_sin_jvp(x), 2 * ops.cos(x) * t


@custom_vjp
def twice_sin_vjp(x):
    return 2 * ops.sin(x)


twice_sin_vjp.defvjp(lambda x: (twice_sin_vjp(x), x), lambda x, g: (2 * ops.cos(x) * g,))

X3 = np.array([0.3, -0.7, 1.1])
XS = np.array([[0.3, -0.7, 1.1], [0.2, 0.9, -1.5]])


@pytest.mark.parametrize("fn", [twice_sin_jvp, twice_sin_vjp], ids=["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize(
    "jac",
    [
        lambda f: jacrev(f),
        lambda f: jacrev(f, vectorize=True),
        lambda f: jacfwd(f),
        lambda f: jacfwd(f, vectorize=True),
    ],
    ids=["jacrev", "jacrev-vectorized", "jacfwd", "jacfwd-vectorized"],
)
def test_B_jacobians_of_custom_rules(fn, jac):
    close(jac(fn)(X3), np.diag(2 * np.cos(X3)))
    close(vmap(jac(fn))(XS), np.stack([np.diag(2 * np.cos(x)) for x in XS]))


@pytest.mark.parametrize("fn", [twice_sin_jvp, twice_sin_vjp], ids=["custom_jvp", "custom_vjp"])
def test_B_vmap_of_jvp_and_hessian_and_vmap_of_vmap(fn, torch):
    out, tangent = vmap(lambda x, t: jvp(fn, (x,), (t,)))(XS, XS * 0 + 1)
    close(out, 2 * np.sin(XS))
    close(tangent, 2 * np.cos(XS))
    got = vmap(hessian(lambda x: fn(x).sum()))(XS)
    close(got, np.stack([np.diag(-2 * np.sin(x)) for x in XS]))
    want = torch.func.vmap(torch.func.hessian(lambda x: (2 * torch.sin(x)).sum()))(torch.tensor(XS))
    close(got, want.numpy())
    close(vmap(vmap(fn))(XS), 2 * np.sin(XS))
    close(vmap(vmap(grad(fn)))(XS), 2 * np.cos(XS))


# --- C: checkpoint closing over a batched value ----------------------------------------------

B2 = np.array([1.0, 2.0])


def _batched_checkpoint(a, B):
    return vmap(lambda a, b: checkpoint(lambda u: u * b)(a), in_axes=(None, 0))(a, B)


def test_C_grad_through_a_checkpoint_closing_over_a_batch(torch):
    got = grad(lambda a: _batched_checkpoint(a, B2).sum())(np.array(0.5))
    close(got, 3.0)  # d/da (a·1 + a·2)
    fd = central_difference(lambda a: _batched_checkpoint(np.array(a), B2).sum(), 0.5)
    close(got, fd, **FD)


def test_C_vjp_of_vmap_of_checkpoint():
    out, vjp_fn = vjp(lambda a, B: _batched_checkpoint(a, B), np.array(0.5), B2)
    close(out, 0.5 * B2)
    ct_a, ct_b = vjp_fn(np.array([1.0, 10.0]))
    close(ct_a, 1.0 * 1 + 10.0 * 2)
    close(ct_b, 0.5 * np.array([1.0, 10.0]))


def test_C_checkpoint_of_a_batch_argument_and_of_a_closed_over_dual():
    per_example = vmap(grad(lambda x: checkpoint(lambda u: ops.sin(u) * u)(x)))(X3)
    close(per_example, np.cos(X3) * X3 + np.sin(X3))

    def f(s):  # the checkpointed function closes over the jvp's dual number s
        return grad(lambda a: checkpoint(lambda u: u * u * s)(a))(np.array(1.5))

    out, tangent = jvp(f, (np.array(2.0),), (np.array(1.0),))
    close(out, 2 * 1.5 * 2.0)
    close(tangent, 2 * 1.5)


# --- D: 0-d arrays stay arrays ----------------------------------------------------------------


def _square_sum(x):
    return (x * x).sum()


@pytest.mark.parametrize(
    "second",
    [
        lambda x: hessian(_square_sum)(x),
        lambda x: hessian(_square_sum, mode="rev-rev")(x),
        lambda x: jacfwd(jacrev(_square_sum))(x),
        lambda x: jacrev(jacfwd(_square_sum))(x),
        lambda x: hvp(_square_sum, x, np.array(1.0)),
        lambda x: hvp(_square_sum, x, np.array(1.0), mode="rev-rev"),
    ],
    ids=["hessian", "hessian-rev-rev", "jacfwd-jacrev", "jacrev-jacfwd", "hvp", "hvp-rev-rev"],
)
def test_D_second_derivatives_of_a_0d_array(second, torch):
    got = second(np.array(2.0))
    close(got, 2.0)
    assert np.shape(got) == ()
    want = torch.func.hessian(lambda x: (x * x).sum())(torch.tensor(2.0, dtype=torch.float64))
    close(got, want.numpy())


def test_D_a_python_number_still_uses_the_scalar_engine():
    assert hessian(lambda x: x * x * x)(2.0) == pytest.approx(12.0)
    assert hvp(lambda x: x * x * x, 2.0, 1.0) == pytest.approx(12.0)


# --- E: a float primal's tangent broadcast ---------------------------------------------------

X0 = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "f, torch_f, slope",
    [
        (lambda x: X0 + x, lambda t, x: t + x, 1.0),
        (lambda x: x + X0, lambda t, x: x + t, 1.0),
        (lambda x: X0 - x, lambda t, x: t - x, -1.0),
        (lambda x: x - X0, lambda t, x: x - t, 1.0),
    ],
    ids=["x0 + x", "x + x0", "x0 - x", "x - x0"],
)
def test_E_float_tangent_is_broadcast(f, torch_f, slope, torch):
    close(jvp(lambda x: f(x).sum(), (0.5,), (1.0,))[1], 3 * slope)
    close(grad(lambda x: f(x).sum())(np.array(0.5)), 3 * slope)
    close(jacfwd(f)(0.5), np.full(3, slope))
    close(jacfwd(f)(0.5), central_difference(f, 0.5), **FD)
    x0 = torch.tensor(X0)
    want = torch.func.jacfwd(lambda x: torch_f(x0, x))(torch.tensor(0.5, dtype=torch.float64))
    close(jacfwd(f)(0.5), want.numpy())


# --- F: numpy bools are constants ------------------------------------------------------------


@pytest.mark.parametrize("x, slope", [(0.7, 1.0), (-0.7, 0.0)])
def test_F_numpy_bool_times_a_dual(x, slope):
    out, tangent = jvp(lambda x: (x > 0) * x, (np.array(x),), (np.array(1.0),))
    close(out, max(x, 0.0))
    close(tangent, slope)
    out, tangent = jvp(lambda x: x * (x > 0) + np.True_, (np.array(x),), (np.array(1.0),))
    close(tangent, slope)
    d = Dual(np.array(x), np.array(1.0)) * np.bool_(True)
    assert isinstance(d, Dual)
    close(d.tangent, 1.0)


def test_tensor_and_batched_take_numpy_bools_too():
    t = Tensor(np.array([1.0, -2.0]), requires_grad=True)
    close((t * np.bool_(True)).data, [1.0, -2.0])
    out = vmap(lambda x: x * np.bool_(False) + x)(X3)
    close(out, X3)
    assert not isinstance(out, Batched)


# --- found by the composition test: a gradient closing over its own argument --------------


def _grad_closing_over(x):
    """d/dy sum(sin(y · x)) at y = x, x also closed over: cos(x²) · x."""
    return grad(lambda y: ops.sin(y * x).sum())(x)


def test_reverse_over_reverse_keeps_a_closed_over_argument_apart(torch):
    """The inner grad differentiates a fresh node made from the outer leaf, not the leaf
    itself (else d/dy picked up the closure's dependence too: twice the answer)."""
    x = np.array([0.4, -0.9, 1.3])
    close(_grad_closing_over(x), np.cos(x * x) * x)
    got = grad(lambda x: _grad_closing_over(x).sum())(x)
    close(got, np.cos(x * x) - 2 * x * x * np.sin(x * x))  # d/dx [cos(x²) x]
    tf = torch.func
    want = tf.grad(lambda x: tf.grad(lambda y: torch.sin(y * x).sum())(x).sum())(torch.tensor(x))
    close(got, want.numpy())
    close(jacrev(_grad_closing_over)(x), np.diag(np.cos(x * x) - 2 * x * x * np.sin(x * x)))


def test_forward_over_reverse_replays_a_closed_over_dual(torch):
    """jvp of a gradient whose function closes over the jvp's own dual: the recorded
    gradient is a dual of graphs, both parts replayed (no Tensor left in the result)."""
    X = np.array([[0.3, -0.5], [1.0, 2.0]])
    T = np.ones_like(X)

    def g(x):
        return grad(lambda y: (ops.sin(y) * x).sum())(x)

    want = (-np.sin(X) * X + np.cos(X)) * T
    close(jvp(vmap(g), (X,), (T,))[1], want)
    close(jvp(g, (X[0],), (T[0],))[1], want[0])
    x = X[1]
    got = hessian(lambda x: g(x).sum())(x)  # of sum(x cos x): diag(-x cos x - 2 sin x)
    close(got, np.diag(-x * np.cos(x) - 2 * np.sin(x)))
    tf = torch.func
    want = tf.hessian(lambda x: tf.grad(lambda y: (torch.sin(y) * x).sum())(x).sum())
    close(got, want(torch.tensor(x)).numpy())


def test_jvp_of_vmap_of_vjp_with_a_dual_cotangent():
    X = np.array([[0.3, -0.5], [1.0, 2.0]])
    out, tangent = jvp(vmap(lambda x: vjp(ops.sin, x)[1](x)[0]), (X,), (X,))
    close(out, np.cos(X) * X)
    close(tangent, (-np.sin(X) * X + np.cos(X)) * X)


# --- found by the fuzzer against torch.func: a gradient closing over graph values made ------
# around it (the leaves that stand for an outer jvp's duals, linearize's tangents) once
# dropped them as constants: half the second derivative, or a zero linear map.

K = 1.156


def _closing_grad(x):
    """x · d/dy (x y²) at y = K: 2 K x², closing over x (the jvp's or jacfwd's dual)."""
    return grad(lambda y: x * y**2)(K) * x


def test_forward_over_forward_over_a_closing_gradient(torch):
    x = 0.655
    got = jacfwd(jacfwd(_closing_grad))(x)
    close(got, 4 * K)  # d²/dx² 2 K x²
    close(got, central_difference(jacfwd(_closing_grad), x), **FD)
    tf = torch.func
    want = tf.jacfwd(tf.jacfwd(lambda x: tf.grad(lambda y: x * y**2)(torch.tensor(K)) * x))
    close(got, want(torch.tensor(x)).numpy())
    primal, tangent = jvp(jacfwd(_closing_grad), (x,), (0.578,))
    close((primal, tangent), (4 * K * x, 4 * K * 0.578))


def _closing_grad_of_a_sum(x):
    """d/dy Σ (x y)² at y = k: 2 x² k, closing over x."""
    return grad(lambda y: ((x * y) ** 2).sum())(np.array([0.4, 0.6]))


def test_linearize_of_a_gradient_closing_over_the_tangent(torch):
    x, k, t = np.array([0.3, 0.5]), np.array([0.4, 0.6]), np.array([1.0, -2.0])
    out, f_jvp = linearize(_closing_grad_of_a_sum, x)
    close(out, 2 * x * x * k)
    close(f_jvp(t), 4 * x * k * t)  # J = diag(4 x k)
    close(f_jvp(t), jvp(_closing_grad_of_a_sum, (x,), (t,))[1])
    tf = torch.func
    _, want = tf.linearize(lambda x: tf.grad(lambda y: ((x * y) ** 2).sum())(torch.tensor(k)),
                           torch.tensor(x))  # fmt: skip
    close(f_jvp(t), want(torch.tensor(t)).numpy())


@pytest.mark.parametrize("x", [1.5, np.asarray(1.5)], ids=["number", "0-d array"])
def test_linearize_of_a_gradient_closing_over_its_own_argument_refuses_clearly(x):
    """grad(lambda y: x y²)(x) = 2x², closing over x: linearize's tangent graph would
    multiply its tangent into itself, so it refuses, as for arrays (docs/design.md's table),
    and says to use jvp. For a Python number it raised Tensor's "cannot combine a Tensor
    with Value" (a number's leaf was a Value, its recorded tangent a Tensor)."""

    def f(x):
        return grad(lambda y: x * y**2)(x)

    with pytest.raises(ValueError, match="closes over linearize's own argument.*use jvp"):
        linearize(f, x)
    close(jvp(f, (x,), (1.0,)), (2 * 1.5**2, 4 * 1.5))  # d(2x²)/dx = 4x


def test_linearize_of_a_function_closing_over_a_graph_value():
    """A Tensor that requires grad, closed over, stays differentiable (the map is jvp)."""
    W, t = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, -1.0])
    w = Tensor(W, requires_grad=True)
    _, f_jvp = linearize(lambda x: w @ x, np.array([0.3, 0.5]))
    y = f_jvp(t)
    np.testing.assert_allclose(y.data, W @ t)
    y.sum().backward()
    np.testing.assert_allclose(w.grad, np.outer(np.ones(2), t))  # d/dW Σ W t = 1 tᵀ


def _closing_linearize(x, k0=0.7, k1=0.9):
    """The jvp at y = k0, along k1, of y ↦ (x y)³ - x y, closing over x: (3x³k0² - x) k1."""
    return linearize(lambda y: (x * y) ** 3 - x * y, k0)[1](k1)


def _closing_linearize_slope(x, k0=0.7, k1=0.9):
    return (9 * x**2 * k0**2 - 1) * k1


@pytest.mark.parametrize(
    "outer",
    [
        lambda x: grad(_closing_linearize)(x),
        lambda x: jvp(_closing_linearize, (x,), (1.0,))[1],
        lambda x: jacfwd(_closing_linearize)(x),
        lambda x: jacrev(_closing_linearize, vectorize=True)(x),
        lambda x: vmap(lambda c: jacfwd(_closing_linearize)(x * c))(np.array([1.0]))[0],
    ],
    ids=["grad", "jvp", "jacfwd", "jacrev(vectorize)", "vmap(jacfwd)"],
)
def test_linearize_closing_over_an_outer_transformations_value(outer):
    """linearize of a function closing over a graph value, a dual or a batch gave the zero
    map (those were constants of its graph); the map is then jvp itself."""
    x = 0.643
    got = outer(x)
    close(got, _closing_linearize_slope(x))
    close(got, central_difference(lambda x: np.asarray(_closing_linearize(x)), x), **FD)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacfwd_of_a_tuple_valued_function_gives_one_jacobian_per_output(vectorize, torch):
    """As reverse mode's error message says, jacfwd accepts tuples (it raised numpy's
    "setting an array element with a sequence")."""
    x = np.array([0.3, -0.5, 1.2])
    got = jacfwd(lambda x: (ops.sin(x), x.sum() * x), vectorize=vectorize)(x)
    assert isinstance(got, tuple) and len(got) == 2
    close(got[0], np.diag(np.cos(x)))
    close(got[1], x.sum() * np.eye(3) + np.outer(x, np.ones(3)))  # d(s x)/dx = s I + x 1ᵀ
    want = torch.func.jacfwd(lambda x: (torch.sin(x), x.sum() * x))(torch.tensor(x))
    close(got, tuple(w.numpy() for w in want))


def test_a_gradient_of_a_python_number_inside_a_transformation_of_arrays_says_what_to_do():
    """grad makes a Python number a scalar-engine Value, which cannot meet a Tensor: the error
    says so and what to pass instead, and that advice gives the right number (d²/dx² x² = 2)."""
    with pytest.raises(TypeError, match=r"Value.*np\.asarray\(x\)"):
        jacrev(jacfwd(lambda x: grad(lambda y: x * x * y)(1.0)))(0.7)
    close(jacrev(jacfwd(lambda x: grad(lambda y: x * x * y)(np.asarray(1.0))))(0.7), 2.0)


def test_grad_closing_over_a_dual_of_batches_refuses_clearly():
    """It raised "grad: f must return a number, got Batched" (the batch was under a dual)."""
    with pytest.raises(NotImplementedError, match="not supported"):
        vmap(jacfwd(lambda x: grad(lambda y: x * x * y)(np.asarray(1.0))))(np.array([0.3, 0.5]))


def test_the_nesting_table_in_the_comment_is_the_one_in_the_code():
    """functional.py states its nesting table twice: as ``NESTING`` (what runs) and as a
    comment a reader scans. Each row of the comment names the adapters of that row of
    ``NESTING``, and no adapter the code does not use."""
    import inspect
    import re

    from autodiff_lab import functional

    source = inspect.getsource(functional)
    rows: dict[str, set[str]] = {}
    inner = ""
    for line in source[
        source.index("#   inner \\ outer") : source.index("#   hessian")
    ].splitlines():
        cells = [c.strip() for c in line.lstrip("# ").split("|")]
        if cells[0] and not cells[0].startswith("-"):
            inner = cells[0]
        rows.setdefault(inner, set()).update(re.findall(r"_[a-z_]+", " ".join(cells[1:])))
    rows.pop("inner \\ outer")
    in_code = {
        inner: {adapter.__name__ for _, adapter in cells}
        for inner, cells in functional.NESTING.items()
    }
    assert rows == in_code
    for name in set().union(*in_code.values()):
        assert callable(getattr(functional, name))
