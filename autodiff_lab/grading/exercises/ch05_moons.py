"""Capstone 5.6 (hard): an MLP and its training loop from scratch, on two moons.

The student writes ``train_moons(seed)``: make the training set with
``make_moons(200, noise=0.1, seed=seed)``, build an MLP of their own (layers, parameters,
``zero_grad``), train it with their own loop (a loss, backward, a plain SGD step) on the
library's ``Tensor`` or ``Value`` engine, and return ``predict(points) -> labels``.
The student's process trains once per seed and predicts points the grader drew itself
(from the same distribution, a seed the student never sees); the labels stay here. Marks:
one point each for held-out accuracy >= 80 %, >= 90 % and >= 95 % on the first seed, and for
>= 90 % and >= 95 % on a second seed. Ready-made models, layers or optimizers (``autodiff_lab.nn``,
``autodiff_lab.optim``, ``autodiff_lab.training``, torch, scikit-learn…) score nothing.
"""

from __future__ import annotations

import numpy as np

from ...data import make_moons
from ..runners.capstones import moons_run
from ..spec import Case, Exercise, Mistake
from ._common import is_error

__all__ = ["EXERCISES", "HELD_OUT", "accurate_enough"]

HELD_OUT = 300  # points per held-out set
NOISE = 0.1


_LABELS: dict[bytes, np.ndarray] = {}  # held-out points -> their labels, grader side only


def _held_out(seed: int) -> np.ndarray:
    """Held-out points; their labels are kept here (they never travel with the case)."""
    points, labels = make_moons(HELD_OUT, NOISE, seed=seed)
    _LABELS[points.tobytes()] = labels.astype(np.float64)
    return points


def _moons_cases(rng):
    seeds = [int(s) for s in rng.integers(0, 10_000, size=4)]  # 2 training, 2 held-out
    first, second = _held_out(seeds[2]), _held_out(seeds[3])
    cases = [
        Case(f"train_moons({seeds[0]}): held-out accuracy >= {t:.0%}", (seeds[0], first, t))
        for t in (0.80, 0.90, 0.95)
    ]
    cases += [
        Case(f"train_moons({seeds[1]}): held-out accuracy >= {t:.0%}", (seeds[1], second, t))
        for t in (0.90, 0.95)
    ]
    return cases


def moons_reference(inputs) -> dict:
    """The held-out labels (kept when the case was drawn) and the accuracy to reach."""
    _seed, points, threshold = inputs
    labels = _LABELS[np.asarray(points, dtype=np.float64).tobytes()]
    return {"labels": labels, "at_least": float(threshold)}


def accuracy(got, expected) -> float:
    """The fraction of points whose predicted label equals the true one (0 if malformed)."""
    got = np.asarray(got, dtype=np.float64)
    labels = np.asarray(expected["labels"])
    if got.shape != labels.shape:
        return 0.0
    return float(np.mean(got == labels))


def accurate_enough(got, expected) -> bool:
    """True when the predictions reach the case's accuracy."""
    if isinstance(got, dict):
        return False
    return accuracy(got, expected) >= expected["at_least"]


def _labels_only(got) -> bool:
    return not isinstance(got, dict) and set(np.unique(np.asarray(got))) <= {0.0, 1.0}


MOONS = Exercise(
    id="5.6",
    title="An MLP and its training loop on two moons",
    level="hard",
    minutes=45,
    task="train_moons(seed): train your own MLP, return predict(points) -> labels",
    answer="train_moons",
    cases=_moons_cases,
    run=moons_run,
    reference=moons_reference,
    compare=accurate_enough,
    mistakes=(
        Mistake(
            "This exercise is graded on your own model: no ready-made layers, models or "
            "optimizers (autodiff_lab.nn, autodiff_lab.optim, torch, scikit-learn…); the "
            "library's Tensor or Value engine is fine.",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "predict must return one class label per point, 0 or 1 (e.g. the argmax of the "
            "two logits), not scores or probabilities.",
            lambda got, exp, case: (
                not _labels_only(got) or np.shape(got) != np.shape(exp["labels"])
            ),
        ),
        Mistake(
            "Every point gets the same label: the model did not learn. Check that the loss "
            "goes down: reset the gradients before each backward, step against the gradient "
            "(p.data -= lr * p.grad), and start from small random weights, not zeros.",
            lambda got, exp, case: _labels_only(got) and len(np.unique(got)) == 1,
        ),
        Mistake(
            "Most predictions are the opposite class: the model learned the labels backwards. "
            "Train on make_moons' labels as they are, and step against the gradient "
            "(p.data -= lr * p.grad).",
            lambda got, exp, case: _labels_only(got) and accuracy(got, exp) < 0.25,
        ),
    ),
    nudges=(
        "The model learned something, not enough: print the training loss and accuracy as "
        "you train; they should pass 95 % well before you stop.",
        "Try a hidden width of 16 or more, two hidden layers with tanh or relu, a few hundred "
        "full-batch steps and a learning rate between 0.1 and 1.",
    ),
)


EXERCISES: list[Exercise] = [MOONS]
