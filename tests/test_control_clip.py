"""optim.clip_grad_norm_ and clip_grad_value_ against torch.nn.utils and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff_lab import Tensor, Value
from autodiff_lab.optim import clip_grad_norm_, clip_grad_value_


def _params(rng, scale):
    shapes = [(3, 4), (4,), (2, 2, 2)]
    params = [Tensor(rng.normal(size=s), requires_grad=True) for s in shapes]
    for p in params:
        p.grad = rng.normal(size=p.shape) * scale
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("scale", [0.01, 10.0], ids=["below max_norm", "above max_norm"])
def test_clip_grad_norm_like_torch(torch, rng, norm_type, scale):
    params = _params(rng, scale)
    twins = [torch.tensor(p.data, requires_grad=True) for p in params]
    for p, q in zip(params, twins):
        q.grad = torch.tensor(p.grad.copy())
    total = clip_grad_norm_(params, max_norm=1.5, norm_type=norm_type)
    total_torch = torch.nn.utils.clip_grad_norm_(twins, max_norm=1.5, norm_type=norm_type)
    assert isinstance(total, float)
    assert total == pytest.approx(total_torch.item(), rel=1e-12)
    for p, q in zip(params, twins):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_closed_form_on_values():
    a, b = Value(1.0), Value(2.0)
    a.grad, b.grad = 3.0, 4.0  # joint 2-norm 5
    assert clip_grad_norm_([a, b], max_norm=1.0) == 5.0
    assert a.grad == pytest.approx(3.0 / (5.0 + 1e-6), rel=1e-12)
    assert b.grad == pytest.approx(4.0 / (5.0 + 1e-6), rel=1e-12)
    t = Tensor([1.0], requires_grad=True)  # one tensor (not a list), no gradient: norm 0
    assert clip_grad_norm_(t, 1.0) == 0.0 and t.grad is None


def test_clip_grad_value_like_torch(torch, rng):
    params = _params(rng, 2.0)
    twins = [torch.tensor(p.data) for p in params]
    for p, q in zip(params, twins):
        q.grad = torch.tensor(p.grad.copy())
    clip_grad_value_(params, 0.5)
    torch.nn.utils.clip_grad_value_(twins, 0.5)
    for p, q in zip(params, twins):
        np.testing.assert_array_equal(p.grad, q.grad.numpy())
    v = Value(0.0)
    v.grad = -3.0
    clip_grad_value_([v], 0.25)
    assert v.grad == -0.25


def test_clip_errors():
    p = Tensor([1.0], requires_grad=True)
    p.grad = np.array([np.inf])
    with pytest.raises(RuntimeError, match="clip_grad_norm_: the total norm of order 2.0"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="max_norm must be >= 0"):
        clip_grad_norm_([p], -1.0)
    with pytest.raises(TypeError, match="clip_grad_value_: parameters must be Value or Tensor"):
        clip_grad_value_([np.ones(2)], 1.0)
