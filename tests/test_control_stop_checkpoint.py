"""stop_gradient / detach / no_grad, and checkpoint: closed forms, finite differences and
PyTorch (``detach``, ``torch.utils.checkpoint``)."""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor, Value, checkpoint, graph_memory, no_grad, stop_gradient
from autodiff_lab.functional import grad, hessian, hvp, jacfwd, jacrev, jvp, vjp
from autodiff_lab.graph import topological_order

# --- stop_gradient --------------------------------------------------------------------------


def test_stop_gradient_in_every_transformation():
    # f(x) = c·x with c = x held constant: df/dx = c = x, d²f/dx² = 0
    def f(x):
        return stop_gradient(x) * x

    assert grad(f)(3.0) == 3.0
    assert jvp(f, (3.0,), (1.0,)) == (9.0, 3.0)
    out, pull = vjp(f, 3.0)
    assert out == 9.0 and pull(2.0) == (6.0,)
    assert grad(grad(f))(3.0) == 0.0
    # g(x) = c·x² (c = x constant): g'' = 2c, per entry of an array
    x = np.array([1.0, -2.0, 0.5])
    h = hessian(lambda v: (stop_gradient(v) * v * v).sum())(x)
    np.testing.assert_array_equal(h, np.diag(2 * x))
    h2 = hessian(lambda v: (stop_gradient(v) * v * v).sum(), mode="rev-rev")(x)
    np.testing.assert_array_equal(h2, np.diag(2 * x))
    np.testing.assert_array_equal(jacfwd(lambda v: stop_gradient(v) * v)(x), np.diag(x))
    np.testing.assert_array_equal(jacrev(lambda v: stop_gradient(v) * v)(x), np.diag(x))
    np.testing.assert_array_equal(hvp(lambda v: (stop_gradient(v) * v * v).sum(), x, x), 2 * x * x)


def test_stop_gradient_on_each_kind():
    assert stop_gradient(2.5) == 2.5
    a = np.arange(3.0)
    assert stop_gradient(a) is a
    v = Value(2.0, label="v")
    s = stop_gradient(v)
    assert s is not v and s.data == 2.0 and s._prev == () and s.label == "v"
    t = Tensor([1.0, 2.0], requires_grad=True)
    st = stop_gradient(t)
    assert not st.requires_grad and st._prev == () and np.shares_memory(st.data, t.data)
    d = stop_gradient(Dual(2.0, 5.0, tag=3))
    assert (d.primal, d.tangent, d.tag) == (2.0, 0.0, 3)
    nested = Dual(Value(1.5), 1.0)  # forward over reverse: the primal is detached too
    assert nested.detach().primal._prev == ()
    pair = stop_gradient((v, 1.0))
    assert isinstance(pair, tuple) and pair[1] == 1.0 and pair[0]._prev == ()


def test_stop_gradient_matches_detach_no_grad_and_torch(torch, rng):
    x = rng.normal(size=4)
    w = rng.normal(size=4)

    def loss_with(stop):
        t = Tensor(x, requires_grad=True)
        p = (t * w).tanh()
        y = ((stop(p) - t) ** 2).sum() + (p * t).sum()
        y.backward()
        return t.grad

    def under_no_grad(p):
        with no_grad():
            return p * 1.0

    by_stop = loss_with(stop_gradient)
    by_detach = loss_with(lambda p: p.detach())
    by_no_grad = loss_with(under_no_grad)
    q = torch.tensor(x, requires_grad=True)
    pq = torch.tanh(q * torch.tensor(w))
    (((pq.detach() - q) ** 2).sum() + (pq * q).sum()).backward()
    np.testing.assert_allclose(by_stop, q.grad.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(by_stop, by_detach)
    np.testing.assert_array_equal(by_stop, by_no_grad)


# --- checkpoint -----------------------------------------------------------------------------


def _layers(rng, depth, width):
    return [rng.normal(size=(width, width)) / np.sqrt(width) for _ in range(depth)]


def test_checkpoint_gives_torch_checkpoint_gradients(torch, rng):
    """A tanh MLP whose layers close over their weights, one checkpoint per two layers,
    against torch.utils.checkpoint on the same network."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    depth, width = 6, 5
    ws = _layers(rng, depth, width)
    x = rng.normal(size=(3, width))
    ours = [Tensor(w, requires_grad=True) for w in ws]
    theirs = [torch.tensor(w, requires_grad=True) for w in ws]

    def segment(weights):
        def run(h):
            for w in weights:
                h = (h @ w).tanh()
            return h

        return run

    h = Tensor(x, requires_grad=True)
    out = h
    for k in range(0, depth, 2):
        out = checkpoint(segment(ours[k : k + 2]))(out)
    (out**2).sum().backward()
    hq = torch.tensor(x, requires_grad=True)
    outq = hq
    for k in range(0, depth, 2):
        outq = torch_checkpoint(segment(theirs[k : k + 2]), outq, use_reentrant=False)
    (outq**2).sum().backward()
    for w, wq in zip(ours, theirs):
        np.testing.assert_allclose(w.grad, wq.grad.numpy(), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(h.grad, hq.grad.numpy(), rtol=1e-11, atol=1e-14)
    # the graph holds 3 checkpoint nodes, the input and the 6 weights (found as captured),
    # plus the loss's ** and sum: nothing of the 12 matmul/tanh nodes inside
    ops = sorted(n._fn.name if n._fn else "leaf" for n in topological_order((out**2).sum()))
    assert ops == ["checkpoint"] * 3 + ["leaf"] * 7 + ["pow_const", "sum"]


def test_checkpoint_recomputes_once_per_backward_and_saves_memory(rng):
    calls = []

    def chain(x):
        calls.append(1)
        for _ in range(50):
            x = (x * 1.01).tanh()
        return x

    x0 = rng.normal(size=200)
    t = Tensor(x0, requires_grad=True)
    y = checkpoint(chain)(t).sum()
    assert len(calls) == 1  # forward: once
    y.backward()
    assert len(calls) == 2  # backward: once more
    full = Tensor(x0, requires_grad=True)
    z = chain(full).sum()
    z.backward()
    np.testing.assert_allclose(t.grad, full.grad, rtol=1e-13)
    # the plain graph keeps 101 arrays of 200 floats; the checkpointed one keeps 2 (+ grads)
    assert graph_memory(y).values < graph_memory(z).values / 20


def test_checkpoint_on_values_with_captured_weights_against_closed_form():
    w = Value(0.7)

    def f(a):
        return (a * w * 2.0).tanh() + 1.5

    a = Value(0.3)
    out = checkpoint(f)(a)
    assert len(out._prev) == 2  # a and w; the constant 2.0 made inside f is not kept
    out.backward()
    u = np.tanh(0.3 * 0.7 * 2.0)
    assert a.grad == pytest.approx((1 - u**2) * 1.4, rel=1e-14)
    assert w.grad == pytest.approx((1 - u**2) * 0.6, rel=1e-14)


def test_checkpoint_nested_and_higher_order(rng):
    def seg(x):
        return (x * x).tanh() * 3.0

    def outer(x):
        return checkpoint(seg)(checkpoint(seg)(x))

    def closed_grad(x):  # d/dx seg(seg(x)); seg'(x) = 6x (1 - tanh²(x²))
        def d(u):
            return 6 * u * (1 - np.tanh(u * u) ** 2)

        s = 3 * np.tanh(x * x)
        return d(s) * d(x)

    x = rng.normal(size=4)
    np.testing.assert_allclose(
        grad(lambda v: checkpoint(outer)(v).sum())(x), closed_grad(x), rtol=1e-12
    )
    np.testing.assert_allclose(jvp(checkpoint(outer), (x,), (np.ones(4),))[1], closed_grad(x))
    h = 1e-5  # the Hessian's diagonal against central differences of the closed gradient
    fd = (closed_grad(x + h) - closed_grad(x - h)) / (2 * h)
    for mode in ("fwd-rev", "rev-rev"):
        hess = hessian(lambda v: checkpoint(outer)(v).sum(), mode=mode)(x)
        np.testing.assert_allclose(np.diag(hess), fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(hess - np.diag(np.diag(hess)), 0.0, atol=1e-15)


def test_checkpoint_outside_recording_just_runs():
    def f(x):
        return x * 2.0

    assert checkpoint(f)(3.0) == 6.0
    with no_grad():
        y = checkpoint(f)(Tensor([1.0], requires_grad=True))
    assert y._fn is None
    d = checkpoint(f)(Dual(1.0, 1.0))
    assert (d.primal, d.tangent) == (2.0, 2.0)


def test_checkpoint_refuses_several_outputs():
    with pytest.raises(TypeError, match=r"checkpoint\(pair\): f must return one Value"):

        def pair(x):
            return x, x

        checkpoint(pair)(Tensor([1.0], requires_grad=True))


def test_stop_gradient_inside_vmap():
    """Per-example: d/dx [c·x²] with c = x held constant is 2x² (closed form)."""
    from autodiff_lab import batching  # vmap

    x = np.array([1.0, 2.0, 3.0])
    per_example = batching.vmap(grad(lambda v: stop_gradient(v) * v * v))(x)
    np.testing.assert_array_equal(per_example, 2 * x * x)
    tangents = batching.vmap(lambda v: jvp(lambda u: stop_gradient(u) * u, (v,), (1.0,))[1])(x)
    np.testing.assert_array_equal(tangents, x)
