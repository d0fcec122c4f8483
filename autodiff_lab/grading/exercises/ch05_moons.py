"""Capstone 5.6 (hard): an MLP and its training loop of your own, graded on the *training*.

The student writes ``train_mlp(weights, X, y, lr, steps)``: build an MLP of their own from
the given initial weights (``x @ W + b`` per layer, tanh between layers, none after the
last), then run ``steps`` steps of full-batch SGD on the mean cross-entropy of the two
logits — forward, loss, reset the gradients, backward, ``p -= lr * grad`` — and return
``(losses, weights)``: the loss before each step and the final weights.

Why the process and not only the outcome: an accuracy threshold is met by a
nearest-neighbour classifier (no model, no training) and by a loop that never resets its
gradients. Here every case starts from weights and data the grader drew, so the trajectory
is determined: the losses and the final parameters must equal the reference's (computed
below in plain numpy, with the backward written out by hand). One more case trains on two
moons and classifies held-out points *with the returned weights*, through the grader's own
forward pass. Each classic slip — no gradient reset, a wrong sign, the learning rate
ignored or squared, a summed loss — is simulated here and names itself in a hint.
"""

from __future__ import annotations

import numpy as np

from ...data import make_moons
from ..runners.capstones import train_run
from ..spec import Case, Exercise, Mistake, close
from ._common import is_error

__all__ = ["EXERCISES", "HELD_OUT", "reference_training"]

HELD_OUT = 300  # held-out points of the accuracy case
NOISE = 0.1
RTOL = 1e-5  # float64 throughout; the student's engine may sum in another order

_LABELS: dict[bytes, np.ndarray] = {}  # held-out points -> their labels, grader side only


def _loss_and_grads(params, X, y, reduce="mean", tanh_last=False):
    """Cross-entropy of the MLP's logits and its gradient for every parameter, by hand.

    ``params`` alternates W, b. Forward: h_{l+1} = tanh(h_l W_l + b_l) (no tanh on the last
    layer). Backward: d logits = (softmax - onehot) / N, then dW = hᵀ dz, db = Σ dz,
    dh = dz Wᵀ and dz = dh · (1 - h²) through each tanh.
    """
    hs = [X]
    for k in range(0, len(params), 2):
        z = hs[-1] @ params[k] + params[k + 1]
        last = k == len(params) - 2
        hs.append(np.tanh(z) if (tanh_last or not last) else z)
    logits = hs[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    n = len(y)
    rows = np.arange(n)
    losses = -logp[rows, y]
    loss = float(losses.mean() if reduce == "mean" else losses.sum())
    dz = np.exp(logp)
    dz[rows, y] -= 1.0
    if reduce == "mean":
        dz /= n
    if tanh_last:
        dz = dz * (1 - logits**2)
    grads = [np.zeros(0)] * len(params)
    for k in range(len(params) - 2, -1, -2):
        h = hs[k // 2]
        grads[k], grads[k + 1] = h.T @ dz, dz.sum(axis=0)
        if k:
            dz = (dz @ params[k].T) * (1 - h**2)
    return loss, grads


def reference_training(
    weights, X, y, lr, steps, *, reset=True, sign=1.0, step_size=None, **loss_kw
) -> tuple[list[float], list[np.ndarray]]:
    """Full-batch SGD from ``weights``: (loss before each step, final W, b, W, b, …).

    The keywords model the mistakes: ``reset=False`` never zeroes the gradients (they
    accumulate), ``sign=-1`` climbs the loss, ``step_size`` replaces ``lr`` in the update.
    """
    params = [np.array(a, dtype=np.float64) for pair in weights for a in pair]
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.intp)
    held = [np.zeros_like(p) for p in params]
    size = lr if step_size is None else step_size
    losses = []
    for _ in range(steps):
        loss, grads = _loss_and_grads(params, X, y, **loss_kw)
        losses.append(loss)
        held = grads if reset else [h + g for h, g in zip(held, grads, strict=True)]
        params = [p - sign * size * g for p, g in zip(params, held, strict=True)]
    return losses, params


def _init(rng, sizes):
    return [
        (
            np.round(rng.normal(0, 1 / np.sqrt(a), size=(a, b)), 6),
            np.round(rng.normal(0, 0.1, b), 6),
        )
        for a, b in zip(sizes[:-1], sizes[1:], strict=True)
    ]


def _moons_cases(rng):
    cases = []
    for steps, depth in ((1, 1), (15, 2)):
        sizes = [2] + [int(h) for h in rng.integers(3, 9, size=depth)] + [2]
        n = int(rng.integers(30, 80))
        X, y = make_moons(n, NOISE, seed=int(rng.integers(10_000)))
        lr = round(float(rng.uniform(0.1, 0.8)), 3)
        args = (_init(rng, sizes), X, y, lr, steps)
        arch = "-".join(map(str, sizes))
        what = "the loss before the step" if steps == 1 else f"the {steps} losses"
        cases.append(Case(f"MLP {arch}, {n} points, lr {lr}, {steps} step(s): {what}",
                          ("losses", *args)))  # fmt: skip
        cases.append(Case(f"MLP {arch}, {n} points, lr {lr}, {steps} step(s): final weights",
                          ("weights", *args)))  # fmt: skip
    X, y = make_moons(200, NOISE, seed=int(rng.integers(10_000)))
    points, labels = make_moons(HELD_OUT, NOISE, seed=int(rng.integers(10_000)))
    _LABELS[points.tobytes()] = labels.astype(np.float64)
    args = (_init(rng, [2, 16, 16, 2]), X, y, 0.5, 300)
    cases.append(
        Case(
            "MLP 2-16-16-2 trained 300 steps on 200 moons: held-out accuracy >= 95 % "
            "(the grader classifies with your final weights)",
            ("accuracy", *args, points),
        )
    )
    return cases


def moons_reference(inputs):
    """The losses, the final weights, or (accuracy case) the held-out labels to reach."""
    what, weights, X, y, lr, steps, *rest = inputs
    if what == "accuracy":
        labels = _LABELS[np.asarray(rest[0], dtype=np.float64).tobytes()]
        return {"labels": labels, "at_least": 0.95}
    losses, params = reference_training(weights, X, y, lr, steps)
    return np.array(losses) if what == "losses" else params


def accuracy(got, labels) -> float:
    """The fraction of points whose predicted label equals the true one (0 if malformed)."""
    got = np.asarray(got, dtype=np.float64)
    return float(np.mean(got == labels)) if got.shape == labels.shape else 0.0


def judge(got, expected) -> bool:
    """Losses and weights match the reference to 1e-5; the accuracy case reaches 95 %."""
    if isinstance(expected, dict):
        return not isinstance(got, dict) and accuracy(got, expected["labels"]) >= 0.95
    return close(got, expected, rtol=RTOL, atol=1e-9)


def describe(got, expected) -> str:
    """A failing case in words: the accuracy reached, or where the numbers part."""
    if isinstance(expected, dict):
        return f"{accuracy(got, expected['labels']):.0%} of the held-out points right, 95 % needed"
    if isinstance(expected, np.ndarray):
        got = np.asarray(got, dtype=np.float64)
        if got.shape != expected.shape:
            return f"{got.size} losses, expected {expected.size} (one per step)"
        k = int(np.argmax(np.abs(got - expected) > RTOL * np.abs(expected) + 1e-9))
        return f"loss before step {k + 1}: got {got[k]:.6g}, expected {expected[k]:.6g}"
    if len(got) != len(expected):
        return f"{len(got) // 2} (W, b) pairs, expected {len(expected) // 2}"
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        name = f"{'Wb'[k % 2]}{k // 2 + 1}"
        if np.shape(g) != e.shape:
            return f"{name} has shape {np.shape(g)}, expected {e.shape}"
        if not close(g, e, rtol=RTOL, atol=1e-9):
            return f"{name} differs from the reference by up to {np.max(np.abs(g - e)):.3g}"
    return "the weights differ from the reference"


def _is(**wrong):
    """A detector: the answer equals the reference training with this mistake planted."""

    def detect(got, expected, case) -> bool:
        what, weights, X, y, lr, steps, *_ = case.inputs
        if what == "accuracy" or isinstance(got, dict):
            return False
        losses, params = reference_training(weights, X, y, lr, steps, **wrong)
        planted = np.array(losses) if what == "losses" else params
        return judge(got, planted) and not judge(planted, expected)

    return detect


MOONS = Exercise(
    id="5.6",
    title="An MLP and its training loop, graded on the training",
    level="hard",
    minutes=60,
    task="train_mlp(weights, X, y, lr, steps): train your MLP by SGD; return (losses, weights)",
    answer="train_mlp",
    cases=_moons_cases,
    run=train_run,
    own_code=True, builds_on_engine=True,  # its Tensor engine only: grading/own_code.py
    reference=moons_reference,
    compare=judge,
    describe=describe,
    mistakes=(
        Mistake(
            "This exercise is graded on your own model and loop: no ready-made layers, models "
            "or optimizers (autodiff_lab.nn, autodiff_lab.optim, torch, scikit-learn…); the "
            "library's Tensor engine is fine.",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "The gradients accumulate from step to step: reset every parameter's gradient "
            "(zero_grad) before each backward.",
            _is(reset=False),
        ),
        Mistake(
            "The loss goes up: the step must go against the gradient, p -= lr * grad.",
            _is(sign=-1.0),
        ),
        Mistake(
            "Your step ignores the learning rate: p -= lr * grad, with the lr you were given.",
            lambda got, exp, case: _is(step_size=1.0)(got, exp, case),
        ),
        Mistake(
            "Your step uses lr twice (lr * lr * grad): multiply the gradient by lr once.",
            lambda got, exp, case: _is(step_size=case.inputs[4] ** 2)(got, exp, case),
        ),
        Mistake(
            "The loss is the mean cross-entropy over the points, not the sum.",
            _is(reduce="sum"),
        ),
        Mistake(
            "The last layer gives the logits as they are: tanh goes between layers only.",
            _is(tanh_last=True),
        ),
    ),
    nudges=(
        "Start with one step (the first two cases): the loss is the mean of "
        "-log softmax(logits)[i, y_i] over the points; record it before you update.",
    ),
    reveal="Each step in this order: forward, loss, reset the gradients, backward, then "
    "p.data -= lr * p.grad on every W and b. Return the weights as (W, b) pairs.",
)


EXERCISES: list[Exercise] = [MOONS]
