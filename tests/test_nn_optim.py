"""Optimizer trajectories step for step against torch.optim (float64, 1e-10).

Each test minimises the same function twice: with our optimizer (gradients from our engine)
and with PyTorch's (gradients from torch autograd), from the same start, and compares the
parameters after every step.
"""

import numpy as np
import pytest

from autodiff_lab import Tensor, Value, optim

torch = pytest.importorskip("torch")

STEPS = 25
RNG = np.random.default_rng(7)
A = RNG.normal(size=(6, 3))
B = RNG.normal(size=(6, 2))
W0 = RNG.normal(size=(3, 2))
C0 = RNG.normal(size=(2,))


def _tensor_loss(w, c, lib):
    """mean((A w + c - B)^2) + sum(tanh(w)): one matrix and one vector parameter."""
    if lib == "torch":
        a, b = torch.tensor(A), torch.tensor(B)
        return ((a @ w + c - b) ** 2).mean() + torch.tanh(w).sum()
    return ((Tensor(A) @ w + c - B) ** 2).mean() + w.tanh().sum()


def _scalar_loss(x, y, z):
    """A Rosenbrock valley plus a coupling term: works for Values and torch scalars alike."""
    return (1 - x) ** 2 + 5 * (y - x * x) ** 2 + 0.5 * (z * x) ** 2 + 0.1 * z


def _torch_trajectory(make_opt, starts, loss_fn):
    params = [torch.tensor(s, dtype=torch.float64, requires_grad=True) for s in starts]
    opt = make_opt(params)
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(*params).backward()
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out


CONFIGS = [
    ("sgd plain", optim.SGD, torch.optim.SGD, dict(lr=0.05)),
    ("sgd momentum", optim.SGD, torch.optim.SGD, dict(lr=0.03, momentum=0.9)),
    ("sgd nesterov", optim.SGD, torch.optim.SGD, dict(lr=0.03, momentum=0.8, nesterov=True)),
    (
        "sgd momentum+dampening+wd",
        optim.SGD,
        torch.optim.SGD,
        dict(lr=0.04, momentum=0.7, dampening=0.3, weight_decay=0.1),
    ),
    ("adam", optim.Adam, torch.optim.Adam, dict(lr=0.05)),
    (
        "adam betas+wd",
        optim.Adam,
        torch.optim.Adam,
        dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
    ),
]


@pytest.mark.parametrize("name,ours,theirs,kw", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_tensor_trajectory_matches_torch(name, ours, theirs, kw):
    w, c = Tensor(W0.copy(), requires_grad=True), Tensor(C0.copy(), requires_grad=True)
    opt = ours([w, c], **kw)
    expected = _torch_trajectory(
        lambda ps: theirs(ps, **kw), [W0, C0], lambda w_, c_: _tensor_loss(w_, c_, "torch")
    )
    moved = 0.0
    for step in range(STEPS):
        opt.zero_grad()
        _tensor_loss(w, c, "ours").backward()
        opt.step()
        np.testing.assert_allclose(w.data, expected[step][0], rtol=0, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(c.data, expected[step][1], rtol=0, atol=1e-10, err_msg=name)
        moved = np.abs(w.data - W0).max()
    assert moved > 0.05  # the parameters really travelled


@pytest.mark.parametrize("name,ours,theirs,kw", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_scalar_trajectory_matches_torch(name, ours, theirs, kw):
    starts = [-0.5, 0.8, 0.3]
    params = [Value(s) for s in starts]
    opt = ours(params, **{**kw, "lr": kw["lr"] / 5})
    expected = _torch_trajectory(
        lambda ps: theirs(ps, **{**kw, "lr": kw["lr"] / 5}),
        [np.array(s) for s in starts],
        _scalar_loss,
    )
    for step in range(STEPS):
        opt.zero_grad()
        _scalar_loss(*params).backward()
        opt.step()
        got = [p.data for p in params]
        np.testing.assert_allclose(got, [float(e) for e in expected[step]], rtol=0, atol=1e-10)
        assert all(type(p.data) is float for p in params)
    assert abs(params[0].data - starts[0]) > 1e-3


def test_zero_grad_semantics():
    v, t = Value(2.0), Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([v, t], lr=0.1)
    for _ in range(2):  # two backward passes without zero_grad: gradients add up
        (v * v).backward()
        (t * t).sum().backward()
    assert v.grad == 8.0  # 2 * (2v) at v = 2
    np.testing.assert_array_equal(t.grad, [4.0, 8.0])
    opt.zero_grad()
    assert v.grad == 0.0 and t.grad is None  # None like PyTorch: "no gradient yet"


def test_step_skips_tensors_without_grad():
    used, unused = Tensor([1.0], requires_grad=True), Tensor([5.0], requires_grad=True)
    opt = optim.Adam([used, unused], lr=0.1)
    (used * 3).sum().backward()
    opt.step()
    assert unused.data[0] == 5.0 and used.data[0] == pytest.approx(0.9)  # Adam's first step = lr


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="SGD: lr must be > 0"):
        optim.SGD([Value(1.0)], lr=0)
    with pytest.raises(ValueError, match="SGD: nesterov needs momentum"):
        optim.SGD([Value(1.0)], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Adam: betas"):
        optim.Adam([Value(1.0)], betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="Adam: parameters must be Value or Tensor, got ndarray"):
        optim.Adam([np.zeros(2)])
    with pytest.raises(ValueError, match="empty list"):
        optim.SGD([], lr=0.1)
