"""``Tensor``: construction, gradient semantics, shapes and dtypes, with closed-form answers.

Expected gradients are written out by hand (a broadcast gradient is a sum over the copied
axes, a repeated index adds up, ...) or computed with plain numpy formulas that do not go
through the engine. Cross-checks against PyTorch live in ``test_engine_vs_torch.py``.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import autodiff_lab as adl
from autodiff_lab import Tensor, concatenate, cross_entropy, no_grad, stack, topological_order

# --- construction and requires_grad -------------------------------------------------------


def test_construction_defaults():
    t = Tensor([[1, 2], [3, 4]])
    assert t.dtype == np.float64  # ints become float64
    assert t.shape == (2, 2) and t.ndim == 2 and t.size == 4 and len(t) == 2
    assert t.requires_grad is False and t.grad is None
    assert t._prev == () and t._op == ""
    assert Tensor(np.arange(3, dtype=np.float32)).dtype == np.float32
    assert Tensor([1.0, 2.0], dtype=np.float32).dtype == np.float32
    assert Tensor(2.5).shape == () and Tensor(2.5).item() == 2.5
    np.testing.assert_array_equal(Tensor([[1, 2]]).numpy(), [[1.0, 2.0]])


def test_grad_is_none_until_backward_reaches_the_tensor():
    x = Tensor([1.0, 2.0], requires_grad=True)
    unused = Tensor([5.0], requires_grad=True)
    y = (x * 3.0).sum()
    assert x.grad is None and y.grad is None
    y.backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    assert unused.grad is None


def test_requires_grad_propagates_and_constants_get_no_gradient():
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([10.0, 20.0])  # requires_grad=False
    y = x * c
    assert y.requires_grad and not (c * c).requires_grad
    assert (c * c)._prev == ()  # nothing is recorded for constants
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [10.0, 20.0])
    assert c.grad is None


def test_numpy_arrays_and_numbers_on_either_side():
    x = Tensor([1.0, 2.0], requires_grad=True)
    arr = np.array([3.0, 4.0])
    y = arr * x + x / 2.0 - 1.0 + (2.0 - x) * np.float64(5.0) + arr @ x
    assert isinstance(y, Tensor)
    y.sum().backward()
    # arr @ x is one number, broadcast to both entries of y: it is summed twice, so
    # d/dx_i sum(y) = arr_i + 1/2 - 5 + 2 arr_i
    np.testing.assert_allclose(x.grad, 3 * arr + 0.5 - 5.0)


# --- broadcasting: the gradient is summed back to each input's shape ----------------------


def test_broadcast_gradient_sums_over_copied_axes():
    a = Tensor(np.array([[1.0], [2.0], [3.0]]), requires_grad=True)  # (3, 1)
    b = Tensor(np.array([10.0, 20.0, 30.0, 40.0]), requires_grad=True)  # (4,)
    out = a * b  # (3, 4): out[i, j] = a[i] b[j]
    assert out.shape == (3, 4)
    out.sum().backward()
    # d/da_i sum_ij a_i b_j = sum_j b_j ;  d/db_j = sum_i a_i
    np.testing.assert_array_equal(a.grad, [[100.0], [100.0], [100.0]])
    np.testing.assert_array_equal(b.grad, [6.0, 6.0, 6.0, 6.0])


def test_scalar_tensor_broadcast_against_a_matrix():
    s = Tensor(2.0, requires_grad=True)
    m = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (s * m).sum().backward()
    assert s.grad.shape == () and s.grad == 15.0
    np.testing.assert_array_equal(m.grad, np.full((2, 3), 2.0))


def test_broadcast_to_gradient_adds_the_copies():
    x = Tensor([[1.0, 2.0]], requires_grad=True)  # (1, 2)
    y = x.broadcast_to((3, 4, 2))
    y.backward(np.ones((3, 4, 2)))
    np.testing.assert_array_equal(x.grad, [[12.0, 12.0]])


# --- reductions -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_shapes_and_gradients(axis, keepdims):
    x0 = np.arange(24.0).reshape(2, 3, 4)
    x = Tensor(x0, requires_grad=True)
    s = x.sum(axis=axis, keepdims=keepdims)
    m = x.mean(axis=axis, keepdims=keepdims)
    assert s.shape == np.sum(x0, axis=axis, keepdims=keepdims).shape == m.shape
    np.testing.assert_allclose(s.data, np.sum(x0, axis=axis, keepdims=keepdims))
    (s.sum() + m.sum()).backward()
    counted = 24 if axis is None else int(np.prod([x0.shape[a] for a in np.atleast_1d(axis)]))
    # every entry appears once in the sum and with weight 1/count in the mean
    np.testing.assert_allclose(x.grad, np.full(x0.shape, 1.0 + 1.0 / counted))


def test_max_gradient_goes_to_the_largest_entry_and_ties_share_it():
    x = Tensor([[1.0, 5.0, 5.0], [7.0, 2.0, 0.0]], requires_grad=True)
    top = x.max(axis=1)
    np.testing.assert_array_equal(top.data, [5.0, 7.0])
    top.sum().backward()
    # a tie shares the gradient equally (as torch.amax), so the total is still 1 per row
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    y = Tensor([[3.0, 1.0], [0.0, 3.0]], requires_grad=True)
    y.max().backward()
    np.testing.assert_array_equal(y.grad, [[0.5, 0.0], [0.0, 0.5]])
    z = Tensor([[3.0, 1.0], [0.0, 4.0]], requires_grad=True)
    m = z.max(axis=0, keepdims=True)
    assert m.shape == (1, 2)
    m.backward(np.array([[2.0, 3.0]]))
    np.testing.assert_array_equal(z.grad, [[2.0, 0.0], [0.0, 3.0]])


# --- shapes: reshape, transpose, indexing, concatenate, stack -----------------------------


def test_reshape_and_transpose_route_gradients_back():
    x0 = np.arange(6.0).reshape(2, 3)
    x = Tensor(x0, requires_grad=True)
    weights = np.arange(6.0).reshape(3, 2) * 10
    (x.T * weights).sum().backward()
    np.testing.assert_array_equal(x.grad, weights.T)
    x.grad = None
    (x.reshape(3, 2) * weights).sum().backward()
    np.testing.assert_array_equal(x.grad, weights.reshape(2, 3))
    x.grad = None
    (x.reshape((6,)) * np.arange(6.0)).sum().backward()
    np.testing.assert_array_equal(x.grad, np.arange(6.0).reshape(2, 3))
    y = Tensor(np.zeros((2, 3, 4)), requires_grad=True)
    w = np.arange(24.0).reshape(3, 4, 2)
    (y.transpose(1, 2, 0) * w).sum().backward()
    np.testing.assert_array_equal(y.grad, w.transpose(2, 0, 1))


def test_indexing_with_repeated_indices_accumulates():
    x = Tensor([10.0, 20.0, 30.0, 40.0], requires_grad=True)
    picked = x[[0, 0, 2, 0]]
    np.testing.assert_array_equal(picked.data, [10.0, 10.0, 30.0, 10.0])
    (picked * np.array([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0 + 2.0 + 4.0, 0.0, 3.0, 0.0])


def test_indexing_with_pairs_of_index_arrays_accumulates():
    m = Tensor(np.zeros((3, 3)), requires_grad=True)
    rows, cols = np.array([0, 2, 0, 0]), np.array([1, 2, 1, 0])
    m[rows, cols].sum().backward()
    expected = np.zeros((3, 3))
    expected[0, 1], expected[2, 2], expected[0, 0] = 2.0, 1.0, 1.0
    np.testing.assert_array_equal(m.grad, expected)


def test_indexing_with_ints_slices_and_tensors():
    m = Tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    parts = m[1].sum() + m[:, 1:3].sum() + m[-1, -1] + m[Tensor([2.0, 2.0])].sum()
    parts.backward()
    expected = np.zeros((3, 4))
    expected[1] += 1
    expected[:, 1:3] += 1
    expected[-1, -1] += 1
    expected[2] += 2
    np.testing.assert_array_equal(m.grad, expected)


def test_concatenate_and_stack_hand_each_input_its_slice():
    a = Tensor(np.ones((2, 3)), requires_grad=True)
    b = Tensor(np.ones((1, 3)), requires_grad=True)
    joined = concatenate([a, b], axis=0)
    assert joined.shape == (3, 3)
    cotangent = np.arange(9.0).reshape(3, 3)
    joined.backward(cotangent)
    np.testing.assert_array_equal(a.grad, cotangent[:2])
    np.testing.assert_array_equal(b.grad, cotangent[2:])

    u = Tensor([1.0, 2.0], requires_grad=True)
    v = Tensor([3.0, 4.0], requires_grad=True)
    for axis, shape in [(0, (2, 2)), (1, (2, 2)), (-1, (2, 2))]:
        u.grad = v.grad = None
        s = stack([u, v], axis=axis)
        assert s.shape == shape
        np.testing.assert_array_equal(s.data, np.stack([[1.0, 2.0], [3.0, 4.0]], axis=axis))
        g = np.array([[1.0, 2.0], [3.0, 4.0]])
        s.backward(g)
        picked = (g[0], g[1]) if axis == 0 else (g[:, 0], g[:, 1])
        np.testing.assert_array_equal(u.grad, picked[0])
        np.testing.assert_array_equal(v.grad, picked[1])


# --- matmul -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((5, 3, 4), (5, 4, 2))],
)
def test_matmul_gradients_by_the_index_formula(shape_a, shape_b, rng):
    """Check against the sum-over-k definition written with einsum (no engine involved)."""
    a0, b0 = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    a, b = Tensor(a0, requires_grad=True), Tensor(b0, requires_grad=True)
    out = a @ b
    np.testing.assert_allclose(out.data, np.matmul(a0, b0), rtol=1e-12)
    g = rng.standard_normal(out.shape)
    out.backward(g)
    spec = {
        (2, 2): ("ik,kj->ij", "ij,kj->ik", "ik,ij->kj"),
        (1, 2): ("k,kj->j", "j,kj->k", "k,j->kj"),
        (2, 1): ("ik,k->i", "i,k->ik", "ik,i->k"),
        (1, 1): ("k,k->", ",k->k", "k,->k"),
        (3, 3): ("bik,bkj->bij", "bij,bkj->bik", "bik,bij->bkj"),
    }[(a0.ndim, b0.ndim)]
    np.testing.assert_allclose(out.data, np.einsum(spec[0], a0, b0), rtol=1e-12)
    np.testing.assert_allclose(a.grad, np.einsum(spec[1], g, b0), rtol=1e-12)
    np.testing.assert_allclose(b.grad, np.einsum(spec[2], a0, g), rtol=1e-12)


# --- softmax, log_softmax, cross_entropy ----------------------------------------------------


def test_softmax_is_stable_for_huge_logits():
    x = Tensor([[1000.0, 1000.0, -1000.0], [-1000.0, -1001.0, -1002.0]], requires_grad=True)
    s = adl.softmax(x, axis=-1)
    e = np.exp([0.0, -1.0, -2.0])
    np.testing.assert_allclose(s.data, [[0.5, 0.5, 0.0], e / e.sum()], rtol=1e-12, atol=1e-300)
    ls = adl.log_softmax(x, axis=1)
    assert np.all(np.isfinite(ls.data))
    np.testing.assert_allclose(ls.data[1], np.log(e / e.sum()), rtol=1e-12)
    np.testing.assert_allclose(ls.data[0, :2], np.log(0.5), rtol=1e-12)
    (s[0, 0] + ls[1, 2]).backward()
    assert np.all(np.isfinite(x.grad))


def test_softmax_jacobian_by_hand():
    z0 = np.array([0.5, -1.0, 2.0])
    p = np.exp(z0) / np.exp(z0).sum()
    z = Tensor(z0, requires_grad=True)
    g = np.array([1.0, -2.0, 0.5])
    adl.softmax(z).backward(g)
    # d softmax_i / d z_j = p_i (delta_ij - p_j)
    jac = np.diag(p) - np.outer(p, p)
    np.testing.assert_allclose(z.grad, jac.T @ g, rtol=1e-12)


def test_cross_entropy_closed_form():
    n, c = 4, 5
    targets = np.array([0, 4, 4, 2])
    z = Tensor(np.zeros((n, c)), requires_grad=True)
    loss = cross_entropy(z, targets)
    assert loss.shape == ()
    assert loss.item() == pytest.approx(np.log(c), rel=1e-14)  # uniform prediction
    loss.backward()
    expected = np.full((n, c), 1.0 / c)
    expected[np.arange(n), targets] -= 1.0
    np.testing.assert_allclose(z.grad, expected / n, rtol=1e-14)


def test_cross_entropy_is_stable_for_huge_logits():
    z = Tensor([[1e4, 0.0], [0.0, 1e4]], requires_grad=True)
    right = cross_entropy(z, np.array([0, 1]))
    wrong = cross_entropy(z, [1, 0])
    assert right.item() == pytest.approx(0.0, abs=1e-300)
    assert wrong.item() == pytest.approx(1e4, rel=1e-12)
    wrong.backward()
    np.testing.assert_allclose(z.grad, [[0.5, -0.5], [-0.5, 0.5]], atol=1e-300)


# --- accumulation, intermediate gradients, order --------------------------------------------


def test_repeated_backward_accumulates_exactly_twice():
    x = Tensor([0.5, -1.0], requires_grad=True)
    h = x * x
    y = adl.tanh(h).sum()
    y.backward()
    x_once, h_once = x.grad.copy(), h.grad.copy()
    np.testing.assert_allclose(h_once, 1 - np.tanh([0.25, 1.0]) ** 2, rtol=1e-14)
    np.testing.assert_allclose(x_once, 2 * np.array([0.5, -1.0]) * h_once, rtol=1e-14)
    y.backward()
    np.testing.assert_array_equal(x.grad, 2 * x_once)
    np.testing.assert_array_equal(h.grad, 2 * h_once)  # documented: intermediates keep .grad


def test_fan_out_through_tensors():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = a + a
    c = (b * a).sum() + a.sum()  # 2 sum a^2 + sum a:  grad 4a + 1
    c.backward()
    np.testing.assert_array_equal(a.grad, [5.0, 9.0])


def test_topological_order_is_deterministic():
    def build():
        x = Tensor([1.0, 2.0], requires_grad=True, label="x")
        w = Tensor([[1.0], [2.0]], requires_grad=True, label="w")
        h = adl.relu(x @ w)
        return (h * h + h).sum()

    ops_a = [node._op for node in topological_order(build())]
    ops_b = [node._op for node in topological_order(build())]
    assert ops_a == ops_b == ["", "", "@", "ReLU", "*", "+", "sum"]


def test_no_grad_and_detach():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with no_grad():
        y = (x * 2.0).exp()
    assert not y.requires_grad and y._prev == ()
    z = x.detach()
    assert not z.requires_grad and z._prev == ()
    np.testing.assert_array_equal(z.data, x.data)
    (x * z).sum().backward()  # z is a constant
    np.testing.assert_array_equal(x.grad, [1.0, 2.0])


def test_backward_with_an_explicit_gradient():
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * x
    y.backward(np.array([[1.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_array_equal(x.grad, [[2.0, 0.0], [0.0, 16.0]])


# --- float32 -------------------------------------------------------------------------------


def test_float32_is_kept_through_forward_and_backward():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((4, 3)), dtype=np.float32, requires_grad=True)
    w = Tensor(rng.standard_normal((3, 5)), dtype=np.float32, requires_grad=True)
    b = Tensor(np.zeros(5), dtype=np.float32, requires_grad=True)
    hidden = adl.tanh(x @ w + b) * 0.5 + 1.0
    loss = cross_entropy(adl.relu(hidden) ** 2, np.array([0, 1, 2, 4])) + hidden.mean()
    loss = loss + adl.log_softmax(hidden, axis=0).max() / 3 + adl.sigmoid(hidden).sum()
    for node in topological_order(loss):
        assert node.dtype == np.float32, f"{node._op} produced {node.dtype}"
    loss.backward()
    for t in (x, w, b):
        assert t.grad.dtype == np.float32
    for node in topological_order(loss):
        if node.requires_grad:  # constants (the 0.5, the 1.0) get no gradient
            assert node.grad.dtype == np.float32, f"grad of {node._op} is {node.grad.dtype}"


def test_mixed_precision_gradient_has_the_inputs_dtype():
    a = Tensor(np.ones(3), dtype=np.float32, requires_grad=True)
    b = Tensor(np.ones(3), requires_grad=True)
    (a * b).sum().backward()
    assert b.grad.dtype == np.float64
    assert a.grad.dtype == np.float32


def test_tanh_and_sigmoid_of_huge_entries_are_finite():
    x = Tensor([1000.0, -1000.0, 750.0, -750.0], requires_grad=True)
    t, s = adl.tanh(x), adl.sigmoid(x)
    np.testing.assert_array_equal(t.data, [1.0, -1.0, 1.0, -1.0])
    np.testing.assert_array_equal(s.data, [1.0, 0.0, 1.0, 0.0])
    (t + s).sum().backward()
    assert np.all(np.isfinite(x.grad))
    np.testing.assert_allclose(x.grad, 0.0, atol=1e-300)


def test_a_finished_tensor_graph_leaves_no_reference_cycles():
    gc.collect()
    gc.disable()
    try:
        w = Tensor(np.ones((3, 4)), requires_grad=True)
        loss = cross_entropy(adl.relu(Tensor(np.ones((2, 3))) @ w), [0, 3])
        loss.backward()
        del loss
        assert gc.collect() == 0
        assert w.grad.shape == (3, 4)
    finally:
        gc.enable()
