"""Short seeded training runs reach a stated accuracy; fit() records what it claims."""

import numpy as np
import pytest

from autodiff_lab import data, nn, optim
from autodiff_lab.training import accuracy, fit, grad_norms, predict


def test_tensor_mlp_learns_moons_within_100_steps():
    X, y = data.make_moons(200, noise=0.1, seed=0)
    model = nn.TensorMLP(2, [16, 16, 2], rng=0)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    history = fit(model, X, y, optimizer=opt, epochs=100, batch_size=None, progress=False)
    assert history.steps == 100
    assert accuracy(predict(model, X), y) >= 0.95
    assert history.step_loss[-1] < 0.5 * history.step_loss[0]
    assert history.epoch_accuracy[-1] == accuracy(predict(model, X), y)


def test_scalar_mlp_learns_a_small_moons_set():
    """micrograd's demo MLP on the scalar engine (kept small: 16 points, 30 steps)."""
    X, y = data.make_moons(16, noise=0.05, seed=1)
    labels = 2 * y - 1
    model = nn.MLP(2, [16, 16, 1], rng=1)

    def hinge(scores, yb):
        return nn.svm_hinge(scores, yb, model.parameters(), alpha=1e-4)

    opt = optim.SGD(model.parameters(), lr=0.3, momentum=0.5)
    history = fit(
        model, X, labels, optimizer=opt, loss_fn=hinge, epochs=30, batch_size=None, progress=False
    )
    assert history.epoch_accuracy[-1] >= 0.9 and history.step_accuracy[0] <= 0.5
    assert history.step_loss[-1] < 0.5 * history.step_loss[0]
    scores = predict(model, X)
    assert scores.shape == (16,) and accuracy(scores, labels) == history.epoch_accuracy[-1]


def test_fit_minibatches_history_and_validation():
    X, y = data.make_spirals(90, n_classes=3, seed=0)
    model = nn.TensorMLP(2, [8, 3], rng=0)
    opt = optim.Adam(model.parameters(), lr=0.01)
    calls = []
    history = fit(
        model, X, y, optimizer=opt, epochs=2, batch_size=32, validation=(X[:30], y[:30]),
        track_grad_norms=True, progress=False, on_step=lambda step, loss: calls.append(step),
    )  # fmt: skip
    assert history.steps == 6 and calls == [1, 2, 3, 4, 5, 6]  # ceil(90 / 32) = 3 per epoch
    assert len(history.epoch_loss) == len(history.val_accuracy) == 2
    assert history.epoch_loss[0] == pytest.approx(np.mean(history.step_loss[:3]))
    assert sorted(history.grad_norms) == ["layers.0.W", "layers.2.W"]
    assert all(len(v) == 6 and min(v) > 0 for v in history.grad_norms.values())


def test_grad_norms_are_frobenius_norms():
    model = nn.TensorMLP(3, [4, 2], rng=0)
    model(np.ones((5, 3))).sum().backward()
    norms = grad_norms(model)
    assert norms["layers.0.W"] == pytest.approx(np.sqrt((model[0].W.grad ** 2).sum()))
    assert norms["layers.2.W"] == pytest.approx(np.linalg.norm(model[2].W.grad))


def test_accuracy_rules():
    assert accuracy(np.array([[0.1, 0.9], [2.0, 1.0]]), [1, 1]) == 0.5  # argmax
    assert accuracy(np.array([0.3, -0.2, 0.1]), [1, -1, -1]) == pytest.approx(2 / 3)  # sign
    assert accuracy(np.array([0.3, -0.2]), [1, 0]) == 1.0


def test_fit_reports_divergence_and_bad_input():
    X, y = data.make_moons(20, seed=0)
    model = nn.TensorMLP(2, [4, 2], rng=0)
    with pytest.raises(ValueError, match="fit: X has 20 rows but y has 3"):
        fit(model, X, y[:3], optimizer=optim.SGD(model.parameters(), lr=0.1), progress=False)
    big = optim.SGD(model.parameters(), lr=1e6)
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError, match="too large"):
        fit(model, X * 1e3, y, optimizer=big, epochs=50, batch_size=None, progress=False)


def test_fit_shows_a_tqdm_progress_bar(capsys):
    X, y = data.make_moons(40, seed=0)
    model = nn.TensorMLP(2, [4, 2], rng=0)
    fit(model, X, y, optimizer=optim.SGD(model.parameters(), lr=0.1), epochs=2, batch_size=20)
    err = capsys.readouterr().err
    assert "training" in err and "4/4" in err and "loss=" in err
