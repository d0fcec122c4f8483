"""``linearize`` and ``linear_transpose`` (chapter 08) against closed forms and torch.func.

- For every primitive case of ``tests/primitive_cases.py``: the recorded linear map
  ``f_jvp`` equals ``torch.func.jvp``, and its transpose equals ``torch.func.vjp`` and the
  package's own reverse mode (so a new primitive is covered as soon as it has cases).
- The primitives declared linear really are linear (``f(a x + b y) = a f(x) + b f(y)``).
- The transpose is the adjoint: ``<ct, J t> = <Jᵀ ct, t>`` for random ``t`` and ``ct``.
- Composite functions against closed forms and ``torch.func.linearize``; ``f`` runs once.
- Clear errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from primitive_cases import CASES, over_floats, torch_twins

from autodiff_lab import Tensor, no_grad, ops
from autodiff_lab.functional import (
    LinearGraph,
    grad,
    jvp,
    linear_transpose,
    linearize,
    vjp,
    vmap,
)
from autodiff_lab.primitives import EXP, PRIMITIVES, Primitive, bind

RTOL, ATOL = 1e-10, 1e-12

ALL_CASES = [
    pytest.param(name, case, id=f"{name}[{case.id}]" if case.id else name)
    for name in PRIMITIVES
    for case in CASES.get(name, ())
]


def call(name, params):
    """The primitive as a function of its array inputs."""
    return lambda *xs: bind(PRIMITIVES[name], *xs, **params)


def random_like(rng, x):
    return rng.standard_normal(np.shape(x))


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_every_primitive_linearized_and_transposed_matches_torch_func(name, case, rng, torch):
    """f_jvp(t) = torch.func.jvp; linear_transpose(f_jvp)(ct) = torch.func.vjp = our vjp."""
    drawn = case.draw(rng)
    f, inputs = over_floats(call(name, case.params), drawn)  # (where's condition held fixed)
    out, f_jvp = linearize(f, *inputs)
    assert isinstance(f_jvp, LinearGraph)
    twin = over_floats(lambda *xs: torch_twins()[name](*xs, **case.params), drawn)[0]
    primals = tuple(torch.tensor(x) for x in inputs)
    torch_out = twin(*primals)
    np.testing.assert_allclose(out, torch_out.detach().numpy(), rtol=RTOL, atol=ATOL)

    for _ in range(2):  # the same recorded map, applied to several tangents
        tangents = [random_like(rng, x) for x in inputs]
        ours = f_jvp(*tangents)
        _, theirs = torch.func.jvp(twin, primals, tuple(map(torch.tensor, tangents)))
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=RTOL, atol=ATOL)

    ct = random_like(rng, out)
    by_transpose = linear_transpose(f_jvp)(ct)
    _, torch_vjp = torch.func.vjp(twin, *primals)
    by_torch = torch_vjp(torch.tensor(ct))
    by_reverse = vjp(f, *inputs)[1](ct)
    assert len(by_transpose) == len(inputs)
    for ours, theirs, reverse in zip(by_transpose, by_torch, by_reverse, strict=True):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours, reverse, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_transpose_is_the_adjoint(name, case, rng):
    """<ct, J t> = Σ_i <(Jᵀ ct)_i, t_i> for random t and ct (the definition of Jᵀ)."""
    f, inputs = over_floats(call(name, case.params), case.draw(rng))
    out, f_jvp = linearize(f, *inputs)
    tangents = [random_like(rng, x) for x in inputs]
    ct = random_like(rng, out)
    left = np.sum(ct * f_jvp(*tangents))
    right = sum(np.sum(c * t) for c, t in zip(linear_transpose(f_jvp)(ct), tangents))
    assert math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-10)


LINEAR_CASES = [p for p in ALL_CASES if PRIMITIVES[p.values[0]].linear]


@pytest.mark.parametrize("name, case", LINEAR_CASES)
def test_primitives_declared_linear_are_linear(name, case, rng):
    """f(a x + b y) = a f(x) + b f(y) in the inputs the declaration names (others fixed)."""
    prim = PRIMITIVES[name]
    assert prim.transposed, f"{name}: a linear primitive says what its transpose is"
    xs, ys = case.draw(rng), case.draw(rng)
    a, b = 0.7, -1.9
    n = len(xs)
    groups = {
        "all": [range(n)],
        "each": [[i] for i in range(n)],
        "first": [[0]],
        "rest": [range(1, n)],
    }[prim.linear]
    for moving in groups:
        mixed = [a * x + b * y if i in moving else x for i, (x, y) in enumerate(zip(xs, ys))]
        only_x = list(xs)
        only_y = [y if i in moving else x for i, (x, y) in enumerate(zip(xs, ys))]
        left = prim.forward(*mixed, **case.params)
        right = a * prim.forward(*only_x, **case.params) + b * prim.forward(*only_y, **case.params)
        np.testing.assert_allclose(left, right, rtol=1e-10, atol=1e-12)


def test_every_primitive_declares_linearity_correctly():
    """Primitives whose jvp leaves them on tangents are declared linear; others are not."""
    linear = {name for name, prim in PRIMITIVES.items() if prim.linear}
    assert {"add", "sub", "neg", "mul", "div", "sum", "mean", "matmul", "reshape"} <= linear
    assert {"getitem", "scatter_add", "broadcast_to", "transpose", "concatenate"} <= linear
    assert "where" in linear  # in its two branches, the condition held fixed
    assert not linear & {"exp", "tanh", "max", "softmax", "pow", "relu", "cross_entropy"}
    assert not linear & {"maximum", "minimum"}
    for name in linear:
        assert PRIMITIVES[name].linear in ("all", "each", "first", "rest"), name


# --- composite functions ---------------------------------------------------------------


def test_scalar_function_against_closed_form():
    """f(x) = sin(x) x²: f'(x) = cos(x) x² + 2x sin(x); the transpose multiplies by f'."""
    x = 0.8
    out, f_jvp = linearize(lambda x: ops.sin(x) * x**2, x)
    slope = math.cos(x) * x**2 + 2 * x * math.sin(x)
    assert out == pytest.approx(math.sin(x) * x**2, rel=1e-15)
    assert isinstance(f_jvp(1.0), float)
    assert f_jvp(1.0) == pytest.approx(slope, rel=1e-14)
    assert f_jvp(-3.0) == pytest.approx(-3.0 * slope, rel=1e-14)
    (back,) = linear_transpose(f_jvp)(2.0)
    assert isinstance(back, float) and back == pytest.approx(2.0 * slope, rel=1e-14)


def test_matrix_function_against_closed_form(rng):
    """f(W, x) = tanh(W x): J(dW, dx) = (1 - y²) ⊙ (dW x + W dx); Jᵀ ct = (u xᵀ, Wᵀ u)
    with u = (1 - y²) ⊙ ct."""
    W, x = rng.standard_normal((3, 4)), rng.standard_normal(4)
    y, f_jvp = linearize(lambda W, x: ops.tanh(W @ x), W, x)
    np.testing.assert_allclose(y, np.tanh(W @ x), rtol=1e-15)
    dW, dx = rng.standard_normal((3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(f_jvp(dW, dx), (1 - y**2) * (dW @ x + W @ dx), rtol=1e-12)
    ct = rng.standard_normal(3)
    u = (1 - y**2) * ct
    gW, gx = linear_transpose(f_jvp)(ct)
    np.testing.assert_allclose(gW, np.outer(u, x), rtol=1e-12)
    np.testing.assert_allclose(gx, W.T @ u, rtol=1e-12)


def mlp_loss(W1, b1, W2, x):
    """A small network's loss: mean(log_softmax(W2 relu(W1 x + b1)))² summed."""
    h = ops.relu(x @ W1 + b1)
    z = ops.log_softmax(h @ W2, -1)
    return (z * z).sum(axis=-1).mean()


def torch_mlp_loss(torch, W1, b1, W2, x):
    h = torch.relu(x @ W1 + b1)
    z = torch.log_softmax(h @ W2, -1)
    return (z * z).sum(-1).mean()


def test_mlp_against_torch_func_linearize(rng, torch):
    """The recorded map of a small network equals torch.func.linearize's, for several
    tangents, and its transpose equals torch.func.vjp."""
    args = [
        rng.standard_normal((5, 8)),
        rng.standard_normal(8),
        rng.standard_normal((8, 3)),
        rng.standard_normal((6, 5)),
    ]
    out, f_jvp = linearize(mlp_loss, *args)
    targs = tuple(torch.tensor(a) for a in args)
    torch_out, torch_jvp = torch.func.linearize(lambda *a: torch_mlp_loss(torch, *a), *targs)
    assert out == pytest.approx(torch_out.item(), rel=1e-12)
    for _ in range(3):
        tangents = [rng.standard_normal(a.shape) for a in args]
        expected = torch_jvp(*map(torch.tensor, tangents)).item()
        assert float(f_jvp(*tangents)) == pytest.approx(expected, rel=1e-10)
    _, torch_vjp = torch.func.vjp(lambda *a: torch_mlp_loss(torch, *a), *targs)
    for ours, theirs in zip(
        linear_transpose(f_jvp)(1.0), torch_vjp(torch.tensor(1.0)), strict=True
    ):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_f_runs_once_and_the_map_is_reused(rng):
    """linearize calls f once; each f_jvp call replays the recorded graph only."""
    calls = []

    def f(x):
        calls.append(1)
        return ops.exp(x).sum() * x

    x = rng.standard_normal(4)
    _, f_jvp = linearize(f, x)
    for _ in range(5):
        t = rng.standard_normal(4)
        np.testing.assert_allclose(f_jvp(t), jvp(f, (x,), (t,))[1], rtol=1e-12)
    assert len(calls) == 1 + 5  # once by linearize, once per jvp used as the reference


def test_several_outputs_and_unused_inputs(rng):
    """Tuple outputs give tuple tangents; an output that does not depend on the inputs
    has a zero tangent; an unused input gets a zero cotangent."""
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    out, f_jvp = linearize(lambda x, y: (x * 2.0, np.ones(2), ops.sin(x).sum()), x, y)
    assert isinstance(out, tuple) and len(out) == 3
    tx, ty = rng.standard_normal(3), rng.standard_normal(2)
    a, b, c = f_jvp(tx, ty)
    np.testing.assert_allclose(a, 2.0 * tx)
    np.testing.assert_array_equal(b, np.zeros(2))
    assert c == pytest.approx(np.sum(np.cos(x) * tx), rel=1e-12)
    gx, gy = linear_transpose(f_jvp)((np.ones(3), np.ones(2), 2.0))
    np.testing.assert_allclose(gx, 2.0 + 2.0 * np.cos(x), rtol=1e-12)
    np.testing.assert_array_equal(gy, np.zeros(2))


def test_linear_transpose_of_a_linear_python_function(rng):
    """As in JAX: linear_transpose(fn, *primals) for a linear fn, e.g. x ↦ A x + 3 x."""
    A = rng.standard_normal((3, 4))
    ct = rng.standard_normal(3)
    (back,) = linear_transpose(lambda x: A @ x, np.zeros(4))(ct)
    np.testing.assert_allclose(back, A.T @ ct, rtol=1e-14)
    (back,) = linear_transpose(lambda x: (x[:, None] * A.T).sum(axis=0), np.zeros(4))(ct)
    np.testing.assert_allclose(back, A.T @ ct, rtol=1e-14)


# --- the recorded graph, as the viewer reads it ---------------------------------------


def test_recorded_graph_lists_linear_nodes_with_values(rng):
    """nodes in order (inputs first, each after what it reads), op names, per-node
    tangents (jvp direction) and cotangents (transposed direction)."""
    A = rng.standard_normal((3, 4))
    x = rng.standard_normal(4)
    _, f_jvp = linearize(lambda x: ops.sin(A @ x).sum(), x)
    assert [n.op for n in f_jvp.nodes] == ["input", "matmul", "mul", "sum"]
    assert [n.transposed for n in f_jvp.nodes[1:]] == ["@ cᵀ", "× c", "broadcast"]
    for node in f_jvp.nodes:
        assert node.index == f_jvp.nodes.index(node)
        assert all(i < node.index for i in node.inputs)
    assert f_jvp.inputs == (0,) and f_jvp.outputs == (3,)
    matmul = f_jvp.nodes[1]
    assert matmul.args == (None, 0) and matmul.constants[1] is None
    np.testing.assert_array_equal(matmul.constants[0], A)

    t = rng.standard_normal(4)
    out, values = f_jvp.apply(t, record=True)
    np.testing.assert_allclose(values[1], A @ t, rtol=1e-14)
    np.testing.assert_allclose(values[2], np.cos(A @ x) * (A @ t), rtol=1e-14)
    assert values[3] == out
    (back,), cts = f_jvp.transpose_apply(2.0, record=True)
    np.testing.assert_array_equal(cts[3], 2.0)
    np.testing.assert_allclose(cts[2], np.full(3, 2.0))  # sum -> broadcast
    np.testing.assert_allclose(cts[1], 2.0 * np.cos(A @ x), rtol=1e-14)  # × c -> × c
    np.testing.assert_allclose(cts[0], A.T @ (2.0 * np.cos(A @ x)), rtol=1e-14)  # @ Aᵀ
    np.testing.assert_array_equal(back, cts[0])


def test_linearize_records_inside_no_grad(rng):
    with no_grad():
        _, f_jvp = linearize(lambda x: x * x, np.arange(3.0))
    np.testing.assert_allclose(f_jvp(np.ones(3)), 2 * np.arange(3.0))


# --- errors ------------------------------------------------------------------------------


def test_clear_errors(rng):
    _, f_jvp = linearize(lambda x, y: x @ y, np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="takes 2 tangent"):
        f_jvp(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"tangent 1 has shape \(4,\), expected \(3,\)"):
        f_jvp(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match=r"cotangent 0 has shape \(3,\), expected \(2,\)"):
        linear_transpose(f_jvp)(np.ones(3))
    with pytest.raises(TypeError, match="needs example primals"):
        linear_transpose(lambda x: 2 * x)
    with pytest.raises(TypeError, match="either a LinearGraph"):
        linear_transpose(f_jvp, np.ones(3))
    with pytest.raises(ValueError, match="not linear in its input"):
        PRIMITIVES["exp"].transpose(1.0, 1.0, [1.0], {}, [True])


def test_linearize_inside_other_transformations_is_jvp_and_its_transpose_vjp(rng, torch):
    """With traced primals (inside vmap, jvp, grad) the map is jvp and its transpose vjp:
    per-example linear maps under vmap, a gradient through f_jvp(t) under grad."""
    xs = rng.standard_normal((4, 3))
    t, ct = rng.standard_normal(3), rng.standard_normal(3)

    def f(x):
        return ops.sin(x) * x

    def jvp_at(x):
        return linearize(f, x)[1](t)

    def vjp_at(x):
        return linear_transpose(linearize(f, x)[1])(ct)[0]

    np.testing.assert_allclose(vmap(jvp_at)(xs), (np.cos(xs) * xs + np.sin(xs)) * t)
    np.testing.assert_allclose(vmap(vjp_at)(xs), (np.cos(xs) * xs + np.sin(xs)) * ct)
    tf = torch.func
    want = tf.grad(lambda x: tf.jvp(lambda x: torch.sin(x) * x, (x,), (torch.tensor(t),))[1].sum())
    got = grad(lambda x: jvp_at(x).sum())(xs[0])
    np.testing.assert_allclose(got, want(torch.tensor(xs[0])).numpy(), rtol=1e-12)
    out, f_jvp = linearize(f, Tensor(xs[0], requires_grad=True))
    assert "TracedLinearMap" in repr(f_jvp)
    np.testing.assert_allclose(out.data, f(xs[0]))


def test_a_non_linear_jvp_rule_is_caught():
    """A jvp rule that is not linear in the tangent (here exp(t)) is a bug: named."""
    wrong = Primitive(
        "wrong_exp",
        np.exp,
        vjp=(lambda g, out, x: g * out,),
        jvp=(lambda t, out, x: bind(EXP, t),),
        rule="wrong on purpose",
        domain=PRIMITIVES["exp"].domain,
    )
    with pytest.raises(ValueError, match="non-linear operation 'exp'"):
        linearize(lambda x: bind(wrong, x), np.ones(2))


def test_linear_graph_applies_to_batches(rng):
    """vmap(f_jvp) over the unit vectors is the Jacobian column by column, vmap of its
    transpose row by row (closed form J = diag(1 − y²) A)."""
    A, x = rng.standard_normal((3, 4)), rng.standard_normal(4)
    y, f_jvp = linearize(lambda x: ops.tanh(A @ x), x)
    J = (1 - y**2)[:, None] * A
    np.testing.assert_allclose(vmap(f_jvp, out_axes=1)(np.eye(4)), J, rtol=1e-14)
    (rows,) = vmap(linear_transpose(f_jvp))(np.eye(3))
    np.testing.assert_allclose(rows, J, rtol=1e-14)
