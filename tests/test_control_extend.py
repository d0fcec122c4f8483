"""The extension API (autodiff_lab.extend): define_primitive, custom_vjp, custom_jvp.

Every expected number is a closed form, a central finite difference or PyTorch's
(``torch.autograd.Function``, ``torch.nn.functional``), never the code under test.
"""

from __future__ import annotations

import html

import numpy as np
import pytest

import autodiff_lab as adl
from autodiff_lab import Dual, Tensor, Value, ops
from autodiff_lab.extend import USER_PRIMITIVES, custom_jvp, custom_vjp, define_primitive
from autodiff_lab.functional import grad, hessian, jacfwd, jacrev, jvp, vjp
from autodiff_lab.graph import topological_order
from autodiff_lab.primitives import PRIMITIVES


def softsign_closed(x):
    return x / (1 + np.abs(x))


def softsign_slope(x):  # d/dx x/(1+|x|) = 1/(1+|x|)^2
    return 1 / (1 + np.abs(x)) ** 2


def softsign_curvature(x):  # d²/dx² = -2 sign(x)/(1+|x|)^3
    return -2 * np.sign(x) / (1 + np.abs(x)) ** 3


def central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.fixture(scope="module")
def softsign():
    return define_primitive(
        "softsign_test",
        lambda x: x / (1 + abs(x)) if isinstance(x, float) else x / (1 + np.abs(x)),
        vjp=lambda g, out, x: g / (1 + ops.abs(x)) ** 2,
        jvp=lambda t, out, x: t / (1 + ops.abs(x)) ** 2,
        rule="d softsign(x)/dx = 1/(1 + |x|)²",
        display="softsign",
    )


@pytest.fixture(scope="module")
def hypot():
    """A binary primitive with broadcasting: its rules sum back with ops.unbroadcast."""
    return define_primitive(
        "hypot_test",
        lambda a, b: np.hypot(a, b),
        vjp=(
            lambda g, out, a, b: ops.unbroadcast(g * a / out, a),
            lambda g, out, a, b: ops.unbroadcast(g * b / out, b),
        ),
        jvp=(lambda t, out, a, b: t * a / out, lambda t, out, a, b: t * b / out),
        rule="d hypot/da = a/hypot,  d hypot/db = b/hypot",
    )


# --- define_primitive -----------------------------------------------------------------------


@pytest.mark.parametrize("x", [-2.5, -0.3, 0.4, 3.0])
def test_user_primitive_on_every_kind_of_number(softsign, x):
    expected = softsign_closed(x)
    assert softsign(x) == pytest.approx(expected, rel=1e-15)
    assert type(softsign(x)) is float  # a float for a float, as the built-ins
    v = Value(x)
    y = softsign(v)
    assert isinstance(y, Value) and y.data == pytest.approx(expected, rel=1e-15)
    y.backward()
    assert v.grad == pytest.approx(softsign_slope(x), rel=1e-12)
    d = softsign(Dual(x, 1.0))
    assert d.primal == pytest.approx(expected) and d.tangent == pytest.approx(softsign_slope(x))
    assert grad(softsign)(x) == pytest.approx(central(softsign_closed, x), rel=1e-7)
    assert grad(grad(softsign))(x) == pytest.approx(softsign_curvature(x), rel=1e-12)
    assert jvp(grad(softsign), (x,), (1.0,))[1] == pytest.approx(softsign_curvature(x), rel=1e-12)


def test_user_primitive_on_tensors_against_torch(softsign, torch, rng):
    x = rng.normal(size=(3, 4))
    g = rng.normal(size=(3, 4))
    t = Tensor(x, requires_grad=True)
    softsign(t).backward(g)
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.softsign(tx).backward(torch.tensor(g))
    np.testing.assert_allclose(t.grad, tx.grad.numpy(), rtol=1e-12)
    # forward mode and the Hessian of a sum (diagonal: the closed-form curvature)
    _, tangent = jvp(softsign, (x,), (g,))
    np.testing.assert_allclose(tangent, g * softsign_slope(x), rtol=1e-12)
    h = hessian(lambda v: softsign(v).sum())(x[0])
    np.testing.assert_allclose(h, np.diag(softsign_curvature(x[0])), rtol=1e-12, atol=1e-15)
    h2 = hessian(lambda v: softsign(v).sum(), mode="rev-rev")(x[0])
    np.testing.assert_allclose(h2, np.diag(softsign_curvature(x[0])), rtol=1e-12, atol=1e-15)


def test_binary_user_primitive_broadcasts_like_torch(hypot, torch, rng):
    a, b = rng.normal(size=(3, 1)), rng.normal(size=(4,))
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    (hypot(ta, tb) * 2.0).sum().backward()
    qa, qb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.hypot(qa, qb) * 2.0).sum().backward()
    np.testing.assert_allclose(ta.grad, qa.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(tb.grad, qb.grad.numpy(), rtol=1e-12)
    assert hypot(3.0, 4.0) == 5.0
    assert grad(hypot, argnums=(0, 1))(3.0, 4.0) == pytest.approx((0.6, 0.8))
    # d²/da² hypot = b²/hypot³ = 16/125
    assert grad(grad(hypot))(3.0, 4.0) == pytest.approx(16 / 125, rel=1e-12)
    jac = jacfwd(lambda v: hypot(v, 4.0))(np.array([3.0, 0.0]))
    np.testing.assert_allclose(jac, np.diag([0.6, 0.0]), atol=1e-15)
    np.testing.assert_allclose(jacrev(lambda v: hypot(v, 4.0))(np.array([3.0, 0.0])), jac)


def test_user_primitives_stay_out_of_the_builtin_table(softsign):
    assert "softsign_test" not in PRIMITIVES
    assert USER_PRIMITIVES["softsign_test"] is softsign.primitive


def test_redefining_a_user_primitive_replaces_it():
    first = define_primitive("twice_test", lambda x: 2 * x, vjp=lambda g, out, x: 2 * g)
    second = define_primitive("twice_test", lambda x: 3 * x, vjp=lambda g, out, x: 3 * g)
    assert USER_PRIMITIVES["twice_test"] is second.primitive is not first.primitive
    assert grad(second)(1.0) == 3.0


def test_builtin_name_is_refused():
    with pytest.raises(ValueError, match=r"'exp' is a built-in primitive"):
        define_primitive("exp", np.exp, vjp=lambda g, out, x: g * out)


def test_missing_rules_are_named_when_needed():
    cube = define_primitive("cube_test", lambda x: x**3, vjp=lambda g, out, x: 3 * x * x * g)
    assert grad(cube)(2.0) == 12.0  # reverse mode works
    with pytest.raises(NotImplementedError, match=r"'cube_test'.*without a jvp rule.*jvp="):
        jvp(cube, (2.0,), (1.0,))
    with pytest.raises(NotImplementedError, match=r"'cube_test'.*jvp"):
        jacfwd(cube)(np.array([1.0, 2.0]))
    # the gradient's graph (3·x·x·g) holds no cube node: forward over reverse needs no jvp
    assert hessian(cube)(2.0) == 12.0  # d²x³/dx² = 6x
    fwd_only = define_primitive(
        "cube_fwd_test", lambda x: x**3, jvp=lambda t, out, x: 3 * x * x * t
    )
    assert jvp(fwd_only, (2.0,), (1.0,))[1] == 12.0
    with pytest.raises(NotImplementedError, match=r"'cube_fwd_test'.*without a vjp rule"):
        grad(fwd_only)(2.0)
    with pytest.raises(ValueError, match=r"'nothing_test'.*at least one of vjp"):
        define_primitive("nothing_test", lambda x: x)


def test_rule_count_and_shape_errors_name_the_op(rng):
    with pytest.raises(ValueError, match=r"'pair_test': 1 vjp rule\(s\) given, but the op has 2"):
        define_primitive("pair_test", lambda a, b: a * b, vjp=(lambda g, out, a, b: g * b,))
    bad = define_primitive(
        "bad_test", lambda x: x.sum(), vjp=lambda g, out, x: g
    )  # forgot x's shape
    t = Tensor(rng.normal(size=(2, 3)), requires_grad=True)
    with pytest.raises(ValueError, match=r"bad_test: .*input 0 has shape \(\), .*shape \(2, 3\)"):
        bad(t).backward()
    with pytest.raises(ValueError, match="identifier"):
        define_primitive("not a name", lambda x: x, vjp=lambda g, out, x: g)


def test_user_primitive_is_drawn_and_stepped(softsign):
    from autodiff_lab.viz import draw_graph
    from autodiff_lab.viz.steppers import BackwardStepper

    x = Value(0.5, label="x")
    y = softsign(x)
    assert "softsign" in draw_graph(y).dot
    stepper = BackwardStepper(y)
    text = html.unescape(stepper.explain(1))
    assert "1/(1 + |x|)²" in text
    (shown,) = stepper.events[0].contributions
    assert shown.local == pytest.approx(softsign_slope(0.5), rel=1e-12)


# --- custom_vjp -----------------------------------------------------------------------------


@custom_vjp
def logsumexp(x):
    """log Σ exp(x), its rule stable at any magnitude: the gradient is softmax(x)."""
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def _lse_fwd(x):
    out = logsumexp(x)
    return out, (x, out)


def _lse_bwd(res, g):
    x, out = res
    return (g * ops.exp(x - out),)


logsumexp.defvjp(_lse_fwd, _lse_bwd)


def test_custom_vjp_logsumexp_against_torch_on_extreme_inputs(torch):
    x = np.array([1000.0, 999.0, -1000.0, 998.5])
    t = Tensor(x, requires_grad=True)
    y = logsumexp(t)
    y.backward()
    q = torch.tensor(x, requires_grad=True)
    torch.logsumexp(q, 0).backward()
    assert y.item() == pytest.approx(torch.logsumexp(q, 0).item(), rel=1e-15)
    np.testing.assert_allclose(t.grad, q.grad.numpy(), rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(t.grad))
    assert len(topological_order(y)) == 2  # one node for the whole function, and x


def test_custom_vjp_grad_of_grad_is_the_softmax_jacobian(torch, rng):
    x = rng.normal(size=4)
    h = hessian(lambda v: logsumexp(v), mode="rev-rev")(x)
    q = torch.tensor(x)
    expected = torch.autograd.functional.hessian(lambda v: torch.logsumexp(v, 0), q).numpy()
    np.testing.assert_allclose(h, expected, rtol=1e-10, atol=1e-14)
    # forward mode: J·t built from one bwd call per output entry (one here)
    t = rng.normal(size=4)
    p = np.exp(x - np.log(np.sum(np.exp(x))))
    assert jvp(logsumexp, (x,), (t,))[1] == pytest.approx(float(p @ t), rel=1e-12)
    np.testing.assert_allclose(hessian(logsumexp)(x), expected, rtol=1e-10, atol=1e-14)


@custom_vjp
def clipped(x, bound):
    """The identity, with its gradient clipped to [-bound, bound] in the backward pass."""
    return x


clipped.defvjp(
    lambda x, bound: (x, bound),
    lambda bound, g: (np.clip(g, -bound, bound), None),
)


def test_gradient_clipping_inside_a_rule_against_torch_function(torch, rng):
    class ClipGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, bound):
            ctx.bound = bound
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clamp(-ctx.bound, ctx.bound), None

    x = rng.normal(size=5)
    g = np.array([-3.0, -0.5, 0.0, 0.7, 4.0])
    t = Tensor(x, requires_grad=True)
    (clipped(t, 1.0) * 1.0).backward(g)
    q = torch.tensor(x, requires_grad=True)
    ClipGradient.apply(q, 1.0).backward(torch.tensor(g))
    np.testing.assert_array_equal(t.grad, q.grad.numpy())
    np.testing.assert_array_equal(t.grad, [-1.0, -0.5, 0.0, 0.7, 1.0])


@custom_vjp
def straight_through_round(x):
    return np.round(x)


straight_through_round.defvjp(lambda x: (np.round(x), None), lambda res, g: (g,))


def test_straight_through_estimator_against_torch_detach_trick(torch):
    x = np.array([0.2, 1.7, -2.4])
    t = Tensor(x, requires_grad=True)
    (straight_through_round(t) ** 2).sum().backward()
    q = torch.tensor(x, requires_grad=True)
    r = q + (torch.round(q) - q).detach()
    (r**2).sum().backward()
    np.testing.assert_array_equal(t.grad, q.grad.numpy())
    np.testing.assert_array_equal(t.grad, 2 * np.round(x))  # closed form: 2 round(x) · 1


@custom_vjp
def my_exp(x):
    return np.exp(x) if isinstance(x, np.ndarray) else float(np.exp(x))


my_exp.defvjp(lambda x: (ops.exp(x), ops.exp(x)), lambda e, g: (g * e,))


def test_custom_vjp_on_values_composes_to_third_order():
    x = 0.3
    assert my_exp(x) == pytest.approx(np.exp(x), rel=1e-15)
    assert grad(my_exp)(x) == pytest.approx(np.exp(x), rel=1e-15)
    assert grad(grad(my_exp))(x) == pytest.approx(np.exp(x), rel=1e-15)
    assert grad(grad(grad(my_exp)))(x) == pytest.approx(np.exp(x), rel=1e-15)
    v = Value(x)
    y = my_exp(v) * v  # d/dx x e^x = (1 + x) e^x
    y.backward()
    assert v.grad == pytest.approx((1 + x) * np.exp(x), rel=1e-14)
    out, pull = vjp(lambda a: my_exp(a), np.array([0.0, 1.0]))
    np.testing.assert_allclose(pull(np.array([2.0, 3.0]))[0], [2.0, 3 * np.e], rtol=1e-15)


def test_custom_vjp_bwd_errors_name_the_function_and_shapes(rng):
    @custom_vjp
    def product(x, y):
        return x * y

    product.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1],))
    with pytest.raises(
        ValueError, match=r"custom_vjp product: bwd returned 1 cotangent\(s\) for 2"
    ):
        grad(product)(2.0, 3.0)
    product.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1], np.ones(3)))
    with pytest.raises(
        ValueError, match=r"product: bwd's cotangent for argument 1 has shape \(3,\), .*\(2,\)"
    ):
        grad(lambda a: product(a, np.ones(2)).sum())(np.ones(2))
    product.defvjp(lambda x, y: (x * y, None), lambda r, g: {"x": g})
    with pytest.raises(TypeError, match=r"product: bwd must return a tuple of 2 cotangents"):
        grad(product)(2.0, 3.0)

    @custom_vjp
    def undefined(x):
        return x

    with pytest.raises(RuntimeError, match=r"undefined: no rule defined yet.*defvjp"):
        undefined(Value(1.0))


# --- custom_jvp -----------------------------------------------------------------------------


@custom_jvp
def safe_log1pexp(x):
    """softplus written naively (it overflows in np.exp for big x); the jvp rule is stable."""
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


@safe_log1pexp.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return safe_log1pexp(x), t * ops.sigmoid(x)


def test_custom_jvp_forward_and_derived_reverse_against_torch(torch, rng):
    x = np.array([-40.0, -1.0, 0.0, 2.0, 800.0])
    t = rng.normal(size=5)
    out, tangent = jvp(safe_log1pexp, (x,), (t,))
    sig = 1 / (1 + np.exp(-np.clip(x, -700, 700)))
    np.testing.assert_allclose(tangent, t * sig, rtol=1e-14)
    q = torch.tensor(x, requires_grad=True)
    torch.nn.functional.softplus(q).backward(torch.tensor(t))
    a = Tensor(x, requires_grad=True)
    safe_log1pexp(a).backward(t)  # gᵀJ from one jvp per input entry
    np.testing.assert_allclose(a.grad, q.grad.numpy(), rtol=1e-12)
    # grad of grad (rules written with ops.sigmoid): sigmoid' = s(1 - s)
    assert grad(grad(safe_log1pexp))(0.5) == pytest.approx(
        1 / (1 + np.exp(-0.5)) * (1 - 1 / (1 + np.exp(-0.5))), rel=1e-12
    )


def test_custom_jvp_tangent_shape_error():
    @custom_jvp
    def f(x):
        return x * 2

    f.defjvp(lambda primals, tangents: (primals[0] * 2, np.ones(3)))
    with pytest.raises(ValueError, match=r"custom_jvp f: the jvp rule returned a tangent of shape"):
        jvp(f, (np.ones(2),), (np.ones(2),))


def test_top_level_exports():
    for name in ("custom_vjp", "custom_jvp", "define_primitive", "stop_gradient", "checkpoint"):
        assert getattr(adl, name) is getattr(adl.extend, name)
    assert adl.graph_memory is adl.memory.graph_memory


def test_custom_and_checkpoint_nodes_are_drawn_and_stepped():
    from autodiff_lab.viz import draw_graph
    from autodiff_lab.viz.steppers import BackwardStepper

    @custom_vjp
    def square(x):
        return x * x

    square.defvjp(lambda x: (x * x, x), lambda x, g: (2 * x * g,))

    def segment(t):
        return (t * 2.0).tanh()

    a = Value(1.5, label="a")
    y = adl.checkpoint(segment)(square(a))
    dot = draw_graph(y).dot
    assert "checkpoint(segment)" in dot and "square" in dot
    stepper = BackwardStepper(y)
    assert stepper.steps == 3  # the checkpoint node, the custom node, the leaf
    text = html.unescape(stepper.explain(2))
    assert "square" in text and "custom_vjp" in text
    # the gradient the stepper reached at a: d tanh(2a²)/da = 4a (1 - tanh²(2a²))
    stepper.slider.value = stepper.steps
    assert a.grad == 0.0  # stepping does not touch .grad
    y.backward()
    assert a.grad == pytest.approx(4 * 1.5 * (1 - np.tanh(2 * 1.5**2) ** 2), rel=1e-12)


def test_custom_rules_inside_vmap_run_example_by_example():
    """vmap over a custom_vjp function (its entry's batching rule loops over the
    examples): each row's value and gradient against the closed forms (log Σ eˣ and
    softmax), including a row where exp overflows."""
    from autodiff_lab import batching  # vmap

    xs = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1.0]])
    np.testing.assert_allclose(
        batching.vmap(logsumexp)(xs), [np.log(np.exp(xs[0]).sum()), 1000.0], rtol=1e-15
    )
    softmax0 = np.exp(xs[0]) / np.exp(xs[0]).sum()
    np.testing.assert_allclose(
        batching.vmap(grad(logsumexp))(xs), [softmax0, [1.0, 0.0, 0.0]], rtol=1e-14, atol=1e-300
    )


def test_the_design_guides_example_of_extending_the_engine():
    """docs/design.md "Extending the engine": the softsign example and the numbers its comments
    state (closed forms: 1/(1+|x|)² = 1/9 and -2/(1+|x|)³ = -2/27 at x = 2)."""
    softsign = define_primitive(
        "softsign",
        lambda x: x / (1 + np.abs(x)),
        vjp=lambda g, out, x: g / (1 + ops.abs(x)) ** 2,
        jvp=lambda t, out, x: t / (1 + ops.abs(x)) ** 2,
        rule="d softsign(x)/dx = 1/(1 + |x|)²",
    )
    x = Value(2.0)
    y = softsign(x)
    y.backward()
    assert len(topological_order(y)) == 2 and y._op == "softsign"
    assert x.grad == pytest.approx(1 / 9, rel=1e-15)
    assert grad(grad(softsign))(2.0) == pytest.approx(-2 / 27, rel=1e-15)
    assert jvp(softsign, (2.0,), (1.0,)) == pytest.approx((2 / 3, 1 / 9), rel=1e-15)


def test_a_domain_is_checked_by_every_engine():
    """log2 is defined for x > 0: the check names the op and the bad value or entry."""
    log2 = define_primitive(
        "log2_test",
        np.log2,
        vjp=lambda g, out, x: g / (x * np.log(2.0)),
        jvp=lambda t, out, x: t / (x * np.log(2.0)),
        domain=("x > 0", lambda x: x <= 0),
    )
    assert log2(8.0) == 3.0 and grad(log2)(2.0) == pytest.approx(1 / (2 * np.log(2)), rel=1e-15)
    with pytest.raises(ValueError, match=r"Value log2_test: .* defined for x > 0, got -1"):
        log2(Value(-1.0))
    with pytest.raises(ValueError, match=r"Tensor log2_test: .*1 entries .*first at index \(1,\)"):
        log2(Tensor([1.0, 0.0, 2.0], requires_grad=True))
    with pytest.raises(ValueError, match=r"Dual log2_test: log2_test is defined for x > 0"):
        log2(Dual(-2.0, 1.0))
    with pytest.raises(TypeError, match=r"'bad_domain_test': domain must be"):
        define_primitive("bad_domain_test", np.log2, vjp=lambda g, o, x: g, domain="x > 0")


def test_a_user_primitive_with_a_batching_rule_under_vmap():
    """batch="broadcasting": vmap runs the op on the whole batch at once; without a rule
    vmap refuses it, naming the op. Values and per-example gradients in closed form."""
    from autodiff_lab import batching  # vmap

    batched = define_primitive(
        "softsign_batched_test",
        lambda x: x / (1 + np.abs(x)),
        vjp=lambda g, out, x: g / (1 + ops.abs(x)) ** 2,
        jvp=lambda t, out, x: t / (1 + ops.abs(x)) ** 2,
        batch="broadcasting",
    )
    xs = np.array([[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_allclose(batching.vmap(batched)(xs), softsign_closed(xs), rtol=1e-15)
    per_example = batching.vmap(grad(lambda v: batched(v).sum()))(xs)
    np.testing.assert_allclose(per_example, softsign_slope(xs), rtol=1e-15)
    unbatched = define_primitive(
        "softsign_unbatched_test", lambda x: x / (1 + np.abs(x)), vjp=lambda g, out, x: g
    )
    with pytest.raises(NotImplementedError, match=r"'softsign_unbatched_test' has no batching"):
        batching.vmap(unbatched)(xs)
