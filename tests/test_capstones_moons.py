"""Capstone 5.6, an MLP and its training loop: graded on the training, not only its outcome.

A right ``train_mlp`` written here (on the package's ``Tensor``) scores full marks; each
classic slip of a training loop loses points with its own hint; answers that do not train
(a nearest-neighbour classifier, returning the start) score nothing; a ready-made model
scores nothing. The grader's reference training (numpy, backward by hand) is checked
against PyTorch step by step.
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Tensor
from autodiff_lab.data import make_moons
from autodiff_lab.grading import check
from autodiff_lab.grading.exercises.ch05_moons import reference_training


def make_train(*, reset=True, sign=1.0, lr_power=1, reduce="mean", tanh_last=False):
    """``train_mlp`` on the package's Tensor, with one slip switched on by a keyword."""

    def train_mlp(weights, X, y, lr, steps):
        params = [
            (Tensor(W, requires_grad=True), Tensor(b, requires_grad=True)) for W, b in weights
        ]
        rows, losses = np.arange(len(y)), []
        for _ in range(steps):
            x = Tensor(X)
            for k, (W, b) in enumerate(params):
                x = x @ W + b
                if tanh_last or k < len(params) - 1:
                    x = x.tanh()
            nll = -x.log_softmax(axis=1)[rows, y]
            loss = nll.mean() if reduce == "mean" else nll.sum()
            losses.append(float(loss.data))
            if reset:
                for W, b in params:
                    W.grad = b.grad = None
            loss.backward()
            for W, b in params:
                W.data -= sign * lr**lr_power * W.grad
                b.data -= sign * lr**lr_power * b.grad
        return losses, [(W.data, b.data) for W, b in params]

    return train_mlp


right = make_train()


def nearest_neighbour(weights, X, y, lr, steps):
    """No model, no training: what scored 5/5 when only held-out accuracy was graded."""
    return [0.0] * steps, weights


def returns_the_start(weights, X, y, lr, steps):
    losses, _ = right([(W.copy(), b.copy()) for W, b in weights], X, y, lr, steps)
    return losses, weights


SLIPS = [
    (make_train(reset=False), "reset every parameter's gradient"),
    (make_train(sign=-1.0), "against the gradient"),
    (make_train(lr_power=0), "ignores the learning rate"),
    (make_train(lr_power=2), "uses lr twice"),
    (make_train(reduce="sum"), "mean cross-entropy"),
    (make_train(tanh_last=True), "tanh goes between layers only"),
]
SLIP_IDS = ["no zero_grad", "ascends", "lr ignored", "lr squared", "summed loss", "tanh last"]


@pytest.mark.parametrize("seed", [None, 7, 123])
def test_right_training_scores_full_marks(seed):
    result = check("5.6", right, seed=seed, show=False, record=False)
    assert result.status == "passed", result.to_text()


@pytest.mark.parametrize(("wrong", "hint"), SLIPS, ids=SLIP_IDS)
@pytest.mark.parametrize("seed", [None, 7])
def test_each_slip_loses_points_with_its_own_hint(wrong, hint, seed):
    result = check("5.6", wrong, seed=seed, show=False, record=False)
    assert result.score < result.max_score, result.to_text()
    assert len(result.hints) == 1 and hint in result.hints[0], result.to_text()


@pytest.mark.parametrize("fake", [nearest_neighbour, returns_the_start])
def test_answers_that_do_not_train_score_nothing(fake):
    result = check("5.6", fake, show=False, record=False)
    # losses computed by a real training run earn their points; the weights and the
    # accuracy they give must be the trained ones
    assert result.score < result.max_score / 2, result.to_text()
    if fake is nearest_neighbour:
        assert result.score == 0, result.to_text()


def test_a_ready_made_model_scores_nothing():
    def ready_made(weights, X, y, lr, steps):
        from autodiff_lab import nn

        model = nn.TensorMLP(2, [16, 2])
        return [0.0] * steps, [(p.data, p.data) for p in model.parameters()]

    result = check("5.6", ready_made, show=False, record=False)
    assert result.score == 0
    assert all("uses an import of autodiff_lab.nn" in c.message for c in result.cases)
    assert any("graded on your own model" in h for h in result.hints)


def test_reference_training_matches_pytorch_step_by_step():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    X, y = make_moons(40, 0.1, seed=3)
    sizes = [2, 5, 4, 2]
    weights = [(rng.normal(size=(a, b)), rng.normal(size=b)) for a, b in zip(sizes, sizes[1:])]
    losses, params = reference_training(weights, X, y, 0.3, 6)
    tparams = [torch.tensor(a, requires_grad=True) for pair in weights for a in pair]
    expected = []
    for _ in range(6):
        h = torch.tensor(X)
        for k in range(0, len(tparams), 2):
            h = h @ tparams[k] + tparams[k + 1]
            h = torch.tanh(h) if k < len(tparams) - 2 else h
        loss = torch.nn.functional.cross_entropy(h, torch.tensor(y, dtype=torch.long))
        expected.append(loss.item())
        for p in tparams:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in tparams:
                p -= 0.3 * p.grad
    np.testing.assert_allclose(losses, expected, rtol=1e-12)
    for got, want in zip(params, tparams, strict=True):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_reference_gradient_matches_finite_differences():
    from autodiff_lab.grading.exercises.ch05_moons import _loss_and_grads

    rng = np.random.default_rng(1)
    X, y = make_moons(20, 0.1, seed=5)
    params = [rng.normal(size=s) for s in [(2, 3), (3,), (3, 2), (2,)]]
    _, grads = _loss_and_grads(params, X, y)
    h = 1e-6
    for p, g in zip(params, grads, strict=True):
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up, _ = _loss_and_grads(params, X, y)
            p[idx] = old - h
            down, _ = _loss_and_grads(params, X, y)
            p[idx] = old
            assert abs((up - down) / (2 * h) - g[idx]) < 1e-7
