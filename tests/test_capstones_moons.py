"""Capstone 5.6, an MLP and its training loop on two moons: scored on held-out points.

A right ``train_moons`` written here scores full marks; wrong ones (a linear model, zero
initial weights, gradient ascent, scores instead of labels, swapped labels, a ready-made
``autodiff_lab.nn`` model) lose points with the hint that names the mistake; the held-out
labels never travel with the case.
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Tensor
from autodiff_lab.data import make_moons
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.plaindata import dumps


def _params(sizes, rng, scale=1.0):
    return [
        (
            Tensor(scale * rng.normal(0, 1 / np.sqrt(a), size=(a, b)), requires_grad=True),
            Tensor(np.zeros(b), requires_grad=True),
        )
        for a, b in zip(sizes, sizes[1:], strict=False)
    ]


def _forward(params, x):
    for k, (w, b) in enumerate(params):
        x = x @ w + b
        if k < len(params) - 1:
            x = x.tanh()
    return x


def _fit(seed, *, sizes=(2, 16, 16, 2), steps=300, lr=0.5, scale=1.0, flip=False):
    x, y = make_moons(200, noise=0.1, seed=seed)
    y = 1 - y if flip else y
    params = _params(sizes, np.random.default_rng(seed), scale)
    rows = np.arange(len(y))
    for _ in range(steps):
        loss = -_forward(params, Tensor(x)).log_softmax(axis=1)[rows, y].mean()
        for w, b in params:
            w.grad = b.grad = None
        loss.backward()
        for w, b in params:
            w.data -= lr * w.grad
            b.data -= lr * b.grad
    return params


def right(seed):
    params = _fit(seed)
    return lambda points: _forward(params, Tensor(points)).data.argmax(axis=1)


def linear(seed):
    params = _fit(seed, sizes=(2, 2))
    return lambda points: _forward(params, Tensor(points)).data.argmax(axis=1)


def zero_weights(seed):
    params = _fit(seed, scale=0.0)
    return lambda points: _forward(params, Tensor(points)).data.argmax(axis=1)


def ascends(seed):
    params = _fit(seed, lr=-0.5)
    return lambda points: _forward(params, Tensor(points)).data.argmax(axis=1)


def scores(seed):
    params = _fit(seed)
    return lambda points: _forward(params, Tensor(points)).softmax(axis=1).data[:, 1]


def swapped(seed):
    params = _fit(seed, flip=True)
    return lambda points: _forward(params, Tensor(points)).data.argmax(axis=1)


def ready_made(seed):
    from autodiff_lab import nn

    model = nn.TensorMLP(2, [16, 2])
    return lambda points: model(Tensor(points)).data.argmax(axis=1)


WRONG = [
    (linear, None),  # partial marks, a nudge
    (zero_weights, "Every point gets the same label"),
    (ascends, "the opposite class"),
    (scores, "not scores or probabilities"),
    (swapped, "the opposite class"),
]


def test_right_training_scores_full_marks():
    for seed in (None, 7):
        result = check("5.6", right, seed=seed, show=False)
        assert result.status == "passed", result.to_text()


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_wrong_training_loses_points_with_its_hint(wrong, hint):
    result = check("5.6", wrong, show=False)
    assert result.status == "failed" and result.score < result.max_score, result.to_text()
    if hint is not None:
        assert any(hint in h for h in result.hints), result.to_text()
    else:
        assert result.hints, result.to_text()


def test_a_linear_model_gets_partial_marks():
    result = check("5.6", linear, show=False)
    assert 0 < result.score < result.max_score, result.to_text()


def test_a_ready_made_model_scores_nothing():
    result = check("5.6", ready_made, show=False)
    assert result.score == 0
    assert all("uses an import of autodiff_lab.nn" in c.message for c in result.cases)
    assert any("graded on your own model" in h for h in result.hints)


def test_the_held_out_labels_do_not_travel_with_the_case():
    exercise = registry.get("5.6")
    for case in exercise.cases(np.random.default_rng(3)):
        sent = dumps(case.inputs)
        labels = exercise.reference(case.inputs)["labels"]
        assert dumps(labels.tolist()) not in sent and len(case.inputs) == 3
        assert len(labels) == len(case.inputs[1]) == 300
