"""``vmap`` (chapter 08): every primitive's batching rule, nesting, per-example gradients.

- Every registered primitive has a batching rule, and for every case of
  ``tests/primitive_cases.py`` the batched op equals a Python loop over the examples
  (each input batched or shared, the batch at a random axis) — so a new primitive fails
  here until its entry has a rule. The same for its jvp and vjp rules run on batches
  (``vmap(jvp)``, ``vmap(vjp)``, and a batch of cotangents through one ``vjp_fn``).
- Per-example gradients ``vmap(grad(loss), in_axes=(None, 0, 0))`` against a loop and
  ``torch.func.vmap(torch.func.grad(...))``; nesting with ``vmap``, ``grad``, ``jvp``,
  ``vjp``; ``jacfwd``/``jacrev`` with ``vectorize=True`` against the loop versions,
  closed forms and ``torch.func``.
- Clear errors (bad in_axes, different batch sizes, a primitive without a rule).
"""

from __future__ import annotations

import numpy as np
import pytest
from primitive_cases import CASES, over_floats

from autodiff_lab import Tensor, concatenate, cross_entropy, ops, stack
from autodiff_lab.functional import (
    grad,
    hessian,
    hvp,
    jacfwd,
    jacrev,
    jvp,
    value_and_grad,
    vjp,
    vmap,
)
from autodiff_lab.primitives import EVERYWHERE, PRIMITIVES, Primitive, bind

RTOL, ATOL = 1e-10, 1e-12
BATCH = 3

ALL_CASES = [
    pytest.param(name, case, id=f"{name}[{case.id}]" if case.id else name)
    for name in PRIMITIVES
    for case in CASES.get(name, ())
]


def call(name, params):
    return lambda *xs: bind(PRIMITIVES[name], *xs, **params)


def batch_patterns(n: int) -> list[tuple[bool, ...]]:
    """Which inputs are batched: all of them, and (for several inputs) each one alone."""
    patterns = [(True,) * n]
    if n > 1:
        patterns += [tuple(i == j for i in range(n)) for j in range(n)]
    return patterns


def draw_batch(case, rng, pattern):
    """Per-example inputs (a list per example) and the batched arguments with in_axes:
    each batched input stacked at a random axis, shared inputs drawn once."""
    shared = case.draw(rng)
    examples = [case.draw(rng) for _ in range(BATCH)]
    examples = [
        [ex[i] if batched else shared[i] for i, batched in enumerate(pattern)] for ex in examples
    ]
    args, in_axes = [], []
    for i, batched in enumerate(pattern):
        if not batched:
            args.append(shared[i])
            in_axes.append(None)
            continue
        axis = int(rng.integers(0, np.ndim(shared[i]) + 1))
        args.append(np.stack([ex[i] for ex in examples], axis=axis))
        in_axes.append(axis)
    return examples, args, tuple(in_axes)


def test_every_primitive_has_a_batching_rule():
    missing = [name for name, prim in PRIMITIVES.items() if prim.batch is None]
    assert not missing, f"give these primitives a batching rule (batch=...): {missing}"


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_every_batching_rule_equals_a_loop(name, case, rng):
    """vmap(op)(batch) = stack([op(example) for example in batch]), batch at any axis."""
    f = call(name, case.params)
    for pattern in batch_patterns(len(case.inputs)):
        examples, args, in_axes = draw_batch(case, rng, pattern)
        expected = np.stack([PRIMITIVES[name].forward(*ex, **case.params) for ex in examples])
        out_axis = int(rng.integers(0, expected.ndim))
        got = vmap(f, in_axes=in_axes, out_axes=out_axis)(*args)
        np.testing.assert_allclose(got, np.moveaxis(expected, 0, out_axis), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_jvp_and_vjp_rules_run_on_batches(name, case, rng):
    """vmap(jvp(op)) and vmap(vjp(op)) equal loops (the rules' masks, signs and shapes
    work per example), and one vjp_fn pulls back a batch of cotangents at once."""
    # (where's boolean condition is held fixed, the same for every example: batched
    # conditions are in test_every_batching_rule_equals_a_loop)
    f, first = over_floats(call(name, case.params), case.draw(rng))
    n = len(first)
    examples = [first] + [
        over_floats(call(name, case.params), case.draw(rng))[1] for _ in range(BATCH - 1)
    ]
    tangents = [[rng.standard_normal(np.shape(x)) for x in ex] for ex in examples]
    xs = [np.stack([ex[i] for ex in examples]) for i in range(n)]
    ts = [np.stack([t[i] for t in tangents]) for i in range(n)]

    def push(*xt):
        return jvp(f, tuple(xt[:n]), tuple(xt[n:]))

    outs, tans = vmap(push)(*xs, *ts)
    for k in range(BATCH):
        out_k, tan_k = push(*examples[k], *tangents[k])
        np.testing.assert_allclose(outs[k], out_k, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(tans[k], tan_k, rtol=RTOL, atol=ATOL)

    cts = rng.standard_normal(np.shape(outs))

    def pull(*xc):
        return vjp(f, *xc[:n])[1](xc[n])

    grads = vmap(pull)(*xs, cts)
    for k in range(BATCH):
        for got, want in zip(grads, pull(*examples[k], cts[k]), strict=True):
            np.testing.assert_allclose(got[k], want, rtol=RTOL, atol=ATOL)

    _, vjp_fn = vjp(f, *examples[0])  # one recorded graph, a batch of cotangents
    rows = vmap(vjp_fn)(cts)
    for k in range(BATCH):
        for got, want in zip(rows, vjp_fn(cts[k]), strict=True):
            np.testing.assert_allclose(got[k], want, rtol=RTOL, atol=ATOL)


# --- functions of several ops --------------------------------------------------------------


def mlp_loss(W1, b1, W2, x, y):
    """One example's loss: squared error of a 2-layer tanh network."""
    h = ops.tanh(x @ W1 + b1)
    return ((h @ W2 - y) ** 2).sum()


def torch_mlp_loss(torch, W1, b1, W2, x, y):
    h = torch.tanh(x @ W1 + b1)
    return ((h @ W2 - y) ** 2).sum()


def random_mlp(rng):
    n_in, hidden, n_out, batch = (int(v) for v in rng.integers(2, 7, size=4))
    params = [
        rng.standard_normal((n_in, hidden)),
        rng.standard_normal(hidden),
        rng.standard_normal((hidden, n_out)),
    ]
    return params, rng.standard_normal((batch, n_in)), rng.standard_normal((batch, n_out))


def batch_loss_sum(*args):
    return vmap(mlp_loss, (None, None, None, 0, 0))(*args).sum()


def test_per_example_gradients_against_a_loop_and_torch_func(rng, torch):
    """vmap(grad(loss), in_axes=(None, None, None, 0, 0)): one gradient per example."""
    for _ in range(3):  # random shapes
        params, X, Y = random_mlp(rng)
        per_example = vmap(grad(mlp_loss, argnums=(0, 1, 2)), in_axes=(None, None, None, 0, 0))
        grads = per_example(*params, X, Y)
        loop = [grad(mlp_loss, argnums=(0, 1, 2))(*params, x, y) for x, y in zip(X, Y)]
        t_grad = torch.func.grad(lambda *a: torch_mlp_loss(torch, *a), argnums=(0, 1, 2))
        theirs = torch.func.vmap(t_grad, in_dims=(None, None, None, 0, 0))(
            *(torch.tensor(p) for p in params), torch.tensor(X), torch.tensor(Y)
        )
        for j, (g, p) in enumerate(zip(grads, params, strict=True)):
            assert g.shape == (len(X), *p.shape)
            np.testing.assert_allclose(g, np.stack([lp[j] for lp in loop]), rtol=1e-12)
            np.testing.assert_allclose(g, theirs[j].numpy(), rtol=1e-10, atol=1e-12)
        # the batch's gradient is the sum of the examples' (the loss is a sum)
        total = grad(batch_loss_sum, (0, 1, 2, 3, 4))(*params, X, Y)
        for g, t in zip(grads, total[:3], strict=True):
            np.testing.assert_allclose(g.sum(axis=0), t, rtol=1e-10)


def test_per_example_gradients_with_the_loss_closing_over_the_batch(rng):
    """The batch enters through a closure, not an argument: still per example."""
    params, X, Y = random_mlp(rng)

    def example_grad(x, y):
        return grad(lambda W2: mlp_loss(params[0], params[1], W2, x, y))(params[2])

    got = vmap(example_grad)(X, Y)
    np.testing.assert_allclose(got, np.stack([example_grad(x, y) for x, y in zip(X, Y)]))


def test_value_and_grad_and_vjp_inside_vmap(rng, torch):
    params, X, Y = random_mlp(rng)
    values, g = vmap(value_and_grad(mlp_loss, argnums=3), (None, None, None, 0, 0))(*params, X, Y)
    for k, (x, y) in enumerate(zip(X, Y)):
        assert values[k] == pytest.approx(mlp_loss(*params, x, y), rel=1e-14)
        np.testing.assert_allclose(g[k], grad(mlp_loss, argnums=3)(*params, x, y), rtol=1e-12)

    def features(x):
        return ops.tanh(x @ params[0] + params[1])

    cts = rng.standard_normal((len(X), params[0].shape[1]))
    got = vmap(lambda x, ct: vjp(features, x)[1](ct)[0])(X, cts)
    _, t_vjp = torch.func.vjp(
        lambda x: torch.tanh(x @ torch.tensor(params[0]) + torch.tensor(params[1])),
        torch.tensor(X),
    )  # rows are independent, so the batch's vjp is the per-example vjps side by side
    np.testing.assert_allclose(got, t_vjp(torch.tensor(cts))[0].numpy(), rtol=1e-10)


def composite(x, A):
    """A function touching many primitives: x is one example of shape (4, 3)."""
    z = ops.softmax(x @ A, axis=-1)  # (4, 2)
    w = concatenate([z, x[:, :1] * 2.0], axis=1).T  # (3, 4)
    return ops.log(1 + ops.exp(w.reshape(12))).max() + w.mean(axis=1).sum() + x[1:3].sum(axis=0)


def torch_composite(torch, x, A):
    z = torch.softmax(x @ A, -1)
    w = torch.cat([z, x[:, :1] * 2.0], 1).T
    return torch.log(1 + torch.exp(w.reshape(12))).amax() + w.mean(1).sum() + x[1:3].sum(0)


def test_composite_function_against_torch_func_vmap(rng, torch):
    X, A = rng.standard_normal((5, 4, 3)), rng.standard_normal((3, 2))
    got = vmap(composite, in_axes=(0, None))(X, A)
    theirs = torch.func.vmap(lambda x: torch_composite(torch, x, torch.tensor(A)))(torch.tensor(X))
    np.testing.assert_allclose(got, theirs.numpy(), rtol=1e-12)
    # in_axes picks another axis; out_axes moves the batch in the result
    got = vmap(composite, in_axes=(2, None), out_axes=1)(np.moveaxis(X, 0, 2), A)
    np.testing.assert_allclose(got, theirs.numpy().T, rtol=1e-12)
    # jvp inside vmap against torch.func
    T = rng.standard_normal(X.shape)
    _, tans = vmap(lambda x, t: jvp(lambda x: composite(x, A), (x,), (t,)))(X, T)
    _, t_tans = torch.func.vmap(
        lambda x, t: torch.func.jvp(
            lambda x: torch_composite(torch, x, torch.tensor(A)), (x,), (t,)
        )
    )(torch.tensor(X), torch.tensor(T))
    np.testing.assert_allclose(tans, t_tans.numpy(), rtol=1e-10)


def test_vmap_nests_with_itself_and_with_grad_and_jvp(rng):
    A = rng.standard_normal((4, 3))
    X = rng.standard_normal((2, 5, 4))

    def f(x):  # one example: shape (4,) -> scalar
        return ops.sin(x @ A).sum() * x[0]

    want = np.array([[f(x) for x in row] for row in X])
    np.testing.assert_allclose(vmap(vmap(f))(X), want, rtol=1e-14)
    np.testing.assert_allclose(vmap(vmap(f), in_axes=1)(X.transpose(1, 0, 2)), want, rtol=1e-14)
    # per-example gradients, twice batched; and the gradient of a batched sum
    G = vmap(vmap(grad(f)))(X)
    np.testing.assert_allclose(G, np.array([[grad(f)(x) for x in row] for row in X]), rtol=1e-12)
    np.testing.assert_allclose(grad(lambda X: vmap(vmap(f))(X).sum())(X), G, rtol=1e-12)
    # forward mode outside and inside
    T = rng.standard_normal(X.shape)
    _, outer = jvp(vmap(vmap(f)), (X,), (T,))
    _, inner = vmap(vmap(lambda x, t: jvp(f, (x,), (t,))))(X, T)
    loop = np.array([[jvp(f, (x,), (t,))[1] for x, t in zip(xr, tr)] for xr, tr in zip(X, T)])
    np.testing.assert_allclose(outer, loop, rtol=1e-12)
    np.testing.assert_allclose(inner, loop, rtol=1e-12)


def test_in_axes_and_out_axes_forms(rng):
    """in_axes: an int for all, None for shared, a tuple per argument, a tuple argument
    batched item by item; out_axes per output; a shared output with out_axes=None."""
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))
    c = rng.standard_normal(4)
    np.testing.assert_allclose(vmap(lambda x, y: x * y, in_axes=(0, 1))(X, Y), X * Y.T)
    np.testing.assert_allclose(vmap(lambda x, c: x + c, in_axes=(0, None))(X, c), X + c)
    np.testing.assert_allclose(vmap(lambda p: p[0] - p[1], in_axes=((0, 1),))((X, Y)), X - Y.T)
    a, b = vmap(lambda x: (x.sum(), c), out_axes=(0, None))(X)
    np.testing.assert_allclose(a, X.sum(axis=1))
    assert b is c
    a, b = vmap(lambda x: (x.sum(), c))(X)  # a shared output is repeated along the batch
    np.testing.assert_array_equal(b, np.broadcast_to(c, (3, 4)))
    stacked = vmap(lambda x: stack([x, 2 * x], axis=0), out_axes=2)(X)
    assert stacked.shape == (2, 4, 3)
    np.testing.assert_allclose(stacked[1], 2 * X.T)


def test_an_index_that_differs_per_example(rng, torch):
    """Per-example class labels: loss = −log softmax(x W)[y], a label per example;
    per-example gradients against a loop and torch.func."""
    W, X = rng.standard_normal((4, 3)), rng.standard_normal((6, 4))
    y = rng.integers(0, 3, size=6)

    def loss(W, x, y):
        return -ops.log_softmax(x @ W)[y]

    np.testing.assert_allclose(vmap(loss, (None, 0, 0))(W, X, y), [loss(W, *e) for e in zip(X, y)])
    got = vmap(grad(loss), in_axes=(None, 0, 0))(W, X, y)
    np.testing.assert_allclose(got, np.stack([grad(loss)(W, *e) for e in zip(X, y)]), rtol=1e-14)
    theirs = torch.func.vmap(
        torch.func.grad(lambda W, x, y: -torch.log_softmax(x @ W, -1).gather(0, y[None])[0]),
        in_dims=(None, 0, 0),
    )(torch.tensor(W), torch.tensor(X), torch.tensor(y))
    np.testing.assert_allclose(got, theirs.numpy(), rtol=1e-10, atol=1e-12)
    # several labels per example, with an index shared by all examples beside them
    Z, Y = rng.standard_normal((5, 6, 3)), rng.integers(0, 3, size=(5, 6))

    def mean_logp(z, labels):
        return ops.log_softmax(z)[np.arange(6), labels].mean()

    np.testing.assert_allclose(vmap(mean_logp)(Z, Y), [mean_logp(*e) for e in zip(Z, Y)])


def test_cross_entropy_with_labels_per_example(rng, torch):
    """cross_entropy inside vmap: one example (logits[None], y[None]) or a small batch of
    its own per example; per-example gradients against a loop and torch.func."""
    W, X = rng.standard_normal((4, 3)), rng.standard_normal((6, 4))
    y = rng.integers(0, 3, size=6)

    def loss(W, x, y):
        return cross_entropy((x @ W)[None], y[None])

    got = vmap(grad(loss), in_axes=(None, 0, 0))(W, X, y)
    np.testing.assert_allclose(got, np.stack([grad(loss)(W, *e) for e in zip(X, y)]), rtol=1e-14)
    F = torch.nn.functional
    theirs = torch.func.vmap(
        torch.func.grad(lambda W, x, y: F.cross_entropy((x @ W)[None], y[None])),
        in_dims=(None, 0, 0),
    )(torch.tensor(W), torch.tensor(X), torch.tensor(y))
    np.testing.assert_allclose(got, theirs.numpy(), rtol=1e-10, atol=1e-12)
    XB, YB = rng.standard_normal((5, 2, 4)), rng.integers(0, 3, size=(5, 2))

    def batch_loss(W, x, y):
        return cross_entropy(x @ W, y)

    got = vmap(grad(batch_loss), in_axes=(None, 0, 0))(W, XB, YB)
    want = np.stack([grad(batch_loss)(W, *e) for e in zip(XB, YB)])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    shared = vmap(batch_loss, in_axes=(None, 0, None))(W, XB, YB[0])  # the same labels
    np.testing.assert_allclose(shared, [batch_loss(W, x, YB[0]).item() for x in XB], rtol=1e-14)
    with pytest.raises(ValueError, match="2 integer class indices per example, got shape"):
        vmap(batch_loss, in_axes=(None, 0, 0))(W, XB, YB[:, :1])


def test_batched_masks_and_data_dependent_ops(rng):
    """relu, abs and max decide per example (each has its own mask)."""
    X = rng.standard_normal((6, 5))

    def f(x):
        return ops.relu(x).sum() + ops.abs(x).max() * x.max()

    np.testing.assert_allclose(vmap(f)(X), [f(x) for x in X], rtol=1e-14)
    np.testing.assert_allclose(vmap(grad(f))(X), [grad(f)(x) for x in X], rtol=1e-14)


# --- Jacobians as vmap over jvp / vjp -----------------------------------------------------


def test_vectorized_jacobians_against_loops_closed_form_and_torch(rng, torch):
    for _ in range(3):
        n, m = (int(v) for v in rng.integers(1, 6, size=2))
        A, x = rng.standard_normal((m, n)), rng.standard_normal(n)

        def f(x, A=A):
            return ops.tanh(A @ x)

        closed = (1 - np.tanh(A @ x) ** 2)[:, None] * A  # J = diag(1 − y²) A
        A_t = torch.tensor(A)
        theirs = torch.func.jacrev(lambda x, A_t=A_t: torch.tanh(A_t @ x))(torch.tensor(x))
        for jac in (jacfwd, jacrev):
            vec, loop = jac(f, vectorize=True)(x), jac(f)(x)
            np.testing.assert_allclose(vec, closed, rtol=1e-12)
            np.testing.assert_allclose(vec, loop, rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(vec, theirs.numpy(), rtol=1e-12)


def test_vectorized_jacobians_of_matrices_scalars_and_hessians(rng, torch):
    W = rng.standard_normal((3, 2))

    def f(W):
        return ops.sin(W).T @ W  # (2, 2) from (3, 2)

    for jac in (jacfwd, jacrev):
        got = jac(f, vectorize=True)(W)
        assert got.shape == (2, 2, 3, 2)
        np.testing.assert_allclose(got, jac(f)(W), rtol=1e-14, atol=1e-15)
    x = 0.7  # a number in, a number out: the derivative
    d = np.cos(x) * x + np.sin(x)
    assert jacfwd(lambda s: ops.sin(s) * s, vectorize=True)(x) == pytest.approx(d, rel=1e-14)
    assert jacrev(lambda s: ops.sin(s) * s, vectorize=True)(x) == pytest.approx(d, rel=1e-14)

    v = rng.standard_normal(4)

    def g(v):
        return (ops.tanh(v) ** 3).sum()

    hessian_t = torch.func.hessian(lambda v: (torch.tanh(v) ** 3).sum())(torch.tensor(v))
    for outer in (jacfwd, jacrev):
        for inner in (jacfwd, jacrev):
            got = outer(inner(g, vectorize=True), vectorize=True)(v)
            np.testing.assert_allclose(got, hessian_t.numpy(), rtol=1e-10, atol=1e-12)
    # per-example Jacobians: vmap of a vectorized jacfwd
    X = rng.standard_normal((4, 3))
    np.testing.assert_allclose(
        vmap(jacfwd(lambda x: ops.sin(x @ W), vectorize=True))(X),
        np.stack([jacfwd(lambda x: ops.sin(x @ W))(x) for x in X]),
        rtol=1e-14,
    )


def test_jacobians_and_hessians_per_example(rng, torch):
    """vmap(jacrev(f)) (loop or vectorized rows), with the batch as argument or closure,
    and per-example Hessians by reverse over reverse, against loops and torch.func."""
    W, X = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))

    def f(x):
        return ops.sin(x @ W)

    loop = np.stack([jacfwd(f)(x) for x in X])
    for vectorize in (False, True):
        np.testing.assert_allclose(vmap(jacrev(f, vectorize=vectorize))(X), loop, rtol=1e-14)
    np.testing.assert_allclose(vmap(jacrev(f), out_axes=2)(X), np.moveaxis(loop, 0, 2), rtol=1e-14)

    def by_weights(x):  # the batch reaches jacrev through a closure
        return jacrev(lambda W: ops.sin(x @ W))(W)

    np.testing.assert_allclose(
        vmap(by_weights)(X),
        np.stack([jacfwd(ops.sin)(x @ W)[:, :, None] * x[None, None, :] for x in X]).transpose(
            0, 1, 3, 2
        ),
        rtol=1e-14,
    )

    def g(x):
        return (ops.tanh(x) ** 3).sum()

    theirs = torch.func.vmap(torch.func.hessian(lambda x: (torch.tanh(x) ** 3).sum()))(
        torch.tensor(X)
    ).numpy()
    for per_example in (
        jacrev(jacrev(g)),
        jacrev(grad(g)),
        hessian(g, mode="rev-rev"),
        hessian(g),  # forward over reverse: the batch's gradient graph replayed with duals
        jacfwd(jacrev(g), vectorize=True),
        jacfwd(grad(g)),
    ):
        np.testing.assert_allclose(vmap(per_example)(X), theirs, rtol=1e-10, atol=1e-12)


def t_hessian(torch, X):
    """torch.func's Hessians of sum(tanh(x)³), one per row of X."""
    hess = torch.func.hessian(lambda x: (torch.tanh(x) ** 3).sum())
    return torch.func.vmap(hess)(torch.tensor(X)).numpy()


def test_hessian_vector_products_and_third_derivatives_per_example(rng, torch):
    """vmap(hvp) in both modes, vmap(jvp(grad)) against torch.func; third derivatives of
    each example against a loop."""
    X, V = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))

    def g(x):
        return (ops.tanh(x) ** 3).sum()

    def t_hvp(x, v):
        return torch.func.jvp(torch.func.grad(lambda x: (torch.tanh(x) ** 3).sum()), (x,), (v,))

    t_grads, t_hv = torch.func.vmap(t_hvp)(torch.tensor(X), torch.tensor(V))
    for mode in ("fwd-rev", "rev-rev"):
        got = vmap(lambda x, v, mode=mode: hvp(g, x, v, mode=mode))(X, V)
        np.testing.assert_allclose(got, t_hv.numpy(), rtol=1e-10, atol=1e-12)
    grads, hv = vmap(lambda x, v: jvp(grad(g), (x,), (v,)))(X, V)
    np.testing.assert_allclose(grads, t_grads.numpy(), rtol=1e-12)
    np.testing.assert_allclose(hv, t_hv.numpy(), rtol=1e-10, atol=1e-12)
    # forward mode outside vmap of reverse mode: the batch of gradients pushed forward
    for outer in (grad(g), jacrev(g)):
        grads, hv = jvp(vmap(outer), (X,), (V,))
        np.testing.assert_allclose(grads, t_grads.numpy(), rtol=1e-12)
        np.testing.assert_allclose(hv, t_hv.numpy(), rtol=1e-10, atol=1e-12)
    blocks = jacfwd(vmap(grad(g)))(X[:2])  # block diagonal: example b's Hessian at (b, b)
    hessians = t_hessian(torch, X[:2])
    np.testing.assert_allclose(blocks[0, :, 0], hessians[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(blocks[1, :, 1], hessians[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(blocks[0, :, 1], np.zeros((4, 4)))
    for third in (jacfwd(jacfwd(jacrev(g))), jacfwd(hessian(g)), jacrev(hessian(g))):
        got = vmap(third)(X[:, :2])
        np.testing.assert_allclose(got, np.stack([third(x) for x in X[:, :2]]), rtol=1e-12)


# --- errors ------------------------------------------------------------------------------


def test_clear_errors(rng):
    X, Y = np.ones((3, 4)), np.ones((5, 4))
    with pytest.raises(
        ValueError, match=r"argument 0 has batch size 3 \(axis 0\) but argument 1 has batch size 5"
    ):
        vmap(lambda x, y: x + y)(X, Y)
    with pytest.raises(ValueError, match=r"in_axes=\(0,\) has 1 entries but .* 2 positional"):
        vmap(lambda x, y: x + y, in_axes=(0,))(X, X)
    with pytest.raises(ValueError, match=r"axis 2 of argument 0, which has shape \(3, 4\)"):
        vmap(lambda x: x, in_axes=2)(X)
    with pytest.raises(TypeError, match="in_axes must be an int, None or a tuple"):
        vmap(lambda x: x, in_axes="0")(X)
    with pytest.raises(TypeError, match="each in_axes entry must be an int or None"):
        vmap(lambda x: x, in_axes=(0.5,))(X)
    with pytest.raises(ValueError, match="batches none of the 1 arguments"):
        vmap(lambda x: x, in_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes=None, but the output differs"):
        vmap(lambda x: x * 2, out_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes=3 is out of range"):
        vmap(lambda x: x * 2, out_axes=3)(X)
    with pytest.raises(ValueError, match=r"Batched @: shapes \(4,\) and \(3, 2\) do not line up"):
        vmap(lambda x: x @ np.ones((3, 2)))(X)
    with pytest.raises(ValueError, match=r"scalar \(one number\) per example, got shape \(4,\)"):
        vmap(grad(lambda x: x * 2))(X)
    with pytest.raises(NotImplementedError, match="tangent is a vmap batch"):
        jacfwd(lambda x: grad(lambda y: (ops.sin(y) * x).sum())(x), vectorize=True)(X[0])
    with pytest.raises(TypeError, match="no single truth value"):
        vmap(lambda x: x if x.sum() > 0 else -x)(X)
    with pytest.raises(NotImplementedError, match="integers and integer arrays only"):
        vmap(lambda x, i: x[i, :], in_axes=(0, 0))(np.ones((3, 4, 2)), np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="must hold integers"):
        vmap(lambda x, i: x[i], in_axes=(0, 0))(X, np.array([0.0, 1.0, 2.0]))


def test_a_primitive_without_a_batching_rule_is_named():
    bare = Primitive(
        "no_rule_yet", np.negative, vjp=(lambda g, out, x: -g,), rule="−x", domain=EVERYWHERE
    )
    with pytest.raises(NotImplementedError, match="primitive 'no_rule_yet' has no batching rule"):
        vmap(lambda x: bind(bare, x))(np.ones((2, 3)))


def test_a_wrong_batching_rule_is_caught():
    wrong = Primitive(
        "drops_batch",
        lambda x: x.sum(),
        vjp=(lambda g, out, x: g * np.ones_like(x),),
        rule="sum",
        domain=EVERYWHERE,
        batch=lambda args, batched: args[0].sum(),  # sums the batch away: a bug
    )
    with pytest.raises(RuntimeError, match=r"drops_batch: the batching rule returned shape \(\)"):
        vmap(lambda x: bind(wrong, x))(np.ones((2, 3)))


def test_tensor_and_batch_combine_either_way(rng):
    """A Tensor (a graph value) meets a batch from either side: the batch drives."""
    W = Tensor(rng.standard_normal((4, 2)), requires_grad=True)
    X = rng.standard_normal((3, 4))
    out = vmap(lambda x: (x @ W).sum() + (W.sum(axis=1) * x).sum())(X)
    assert isinstance(out, Tensor)
    out.sum().backward()
    np.testing.assert_allclose(W.grad, np.outer(X.sum(0), [2.0, 2.0]), rtol=1e-14)


def test_float32_stays_float32(rng):
    W = rng.standard_normal((4, 3)).astype(np.float32)
    X = rng.standard_normal((5, 4)).astype(np.float32)
    assert vmap(lambda x: ops.tanh(x @ W))(X).dtype == np.float32
    per_example = vmap(grad(lambda W, x: ops.tanh(x @ W).sum()), in_axes=(None, 0))(W, X)
    assert per_example.dtype == np.float32 and per_example.shape == (5, 4, 3)


def test_vectorized_jacrev_of_a_matrix_vector_product_stays_a_matrix_product():
    """The Jacobian of x -> A x (A 1000 x 200) as vmap over vjp is A itself; the vjp rule for
    the vector (Aᵀ g) must stay one matrix product under the batch of 1000 cotangents, not an
    elementwise (1000, 1000, 200) product (1.6 GB before this was fixed)."""
    import tracemalloc

    a = np.random.default_rng(3).standard_normal((1000, 200))
    tracemalloc.start()
    try:
        jac = jacrev(lambda x: a @ x, vectorize=True)(np.ones(200))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(np.asarray(jac), a)
    assert peak < 64e6, f"peak {peak / 1e6:.0f} MB"
