"""A small training loop, :func:`fit`, and the numbers it records (:class:`History`).

``fit`` runs the loop every chapter writes by hand (zero_grad, forward, loss, backward,
step) over mini-batches, with a progress bar from ``tqdm.auto`` (a widget in Jupyter, text
in a terminal; ``progress=False`` turns it off). It works for tensor models
(``nn.Linear``/``nn.Sequential``…) and for the scalar ``nn.MLP``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import data as _data
from . import nn
from .graph import no_grad
from .tensor import Tensor
from .value import Value

__all__ = ["History", "fit", "predict", "accuracy", "grad_norms"]


@dataclass
class History:
    """What happened during training, one entry per optimizer step or per epoch."""

    step_loss: list[float] = field(default_factory=list)
    step_accuracy: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)  # mean of the epoch's step losses
    epoch_accuracy: list[float] = field(default_factory=list)  # on the whole training set
    val_accuracy: list[float] = field(default_factory=list)  # per epoch, if validation given
    grad_norms: dict[str, list[float]] = field(default_factory=dict)  # per step, per weight

    @property
    def steps(self) -> int:
        return len(self.step_loss)


def _is_scalar_model(model) -> bool:
    params = model.parameters()
    return bool(params) and isinstance(params[0], Value)


def predict(model, X) -> np.ndarray:
    """The model's raw outputs on ``X`` as a float array (no graph is recorded)."""
    X = np.asarray(X, dtype=np.float64)
    with no_grad():
        if _is_scalar_model(model):
            out = [model(row) for row in X.tolist()]
            return np.array([[v.data for v in o] if isinstance(o, list) else o.data for o in out])
        return model(Tensor(X)).data


def accuracy(scores, labels) -> float:
    """Fraction classified right. Scores with several columns: the largest one wins
    (labels are class indices). One score per example: its sign is the class (labels 0/1
    or -1/+1)."""
    scores = np.asarray(scores.data if isinstance(scores, Tensor) else scores, dtype=np.float64)
    labels = np.asarray(labels).ravel()
    if scores.ndim == 2 and scores.shape[1] > 1:
        predicted = scores.argmax(axis=1)
        return float(np.mean(predicted == labels))
    positive = scores.ravel() > 0
    return float(np.mean(positive == (labels > 0)))


def grad_norms(model) -> dict[str, float]:
    """The L2 norm of the gradient of every weight matrix (``W``) of a tensor model: small
    values in early layers mean vanishing gradients, huge ones exploding."""
    norms = {}
    for name, p in model.named_parameters():
        if isinstance(p, Tensor) and p.ndim == 2:
            norms[name] = 0.0 if p.grad is None else float(np.sqrt(np.sum(p.grad * p.grad)))
    return norms


def _loss_on_batch(model, loss_fn, Xb, yb, scalar: bool):
    if scalar:
        scores = [model(row) for row in Xb.tolist()]
        loss = loss_fn(scores, yb)
        raw = np.array([[v.data for v in s] if isinstance(s, list) else s.data for s in scores])
    else:
        scores = model(Tensor(Xb))
        loss = loss_fn(scores, yb)
        raw = scores.data
    return loss, raw


def fit(
    model: nn.Module,
    X,
    y,
    *,
    optimizer,
    loss_fn: Callable = nn.cross_entropy,
    epochs: int = 1,
    batch_size: int | None = 32,
    seed: int = 0,
    validation: tuple | None = None,
    track_grad_norms: bool = False,
    progress: bool = True,
    on_step: Callable | None = None,
) -> History:
    """Train ``model`` on ``(X, y)`` and return its :class:`History`.

    Each step: ``optimizer.zero_grad()``, forward on one mini-batch, ``loss_fn(scores,
    labels)``, ``backward()``, ``optimizer.step()``. ``batch_size=None`` uses the whole set
    each step. Batches are shuffled from ``seed``. ``validation=(X_val, y_val)`` records
    accuracy on it after each epoch. ``on_step(step, loss)`` is called after every step.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"fit: X has {len(X)} rows but y has {len(y)} labels")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"fit: epochs must be a positive int, got {epochs!r}")
    from tqdm.auto import tqdm  # a widget in notebooks, a text bar in terminals

    scalar = _is_scalar_model(model)
    size = len(X) if batch_size is None else batch_size
    steps_per_epoch = math.ceil(len(X) / size)
    history = History()
    rng = np.random.default_rng(seed)
    bar = tqdm(total=epochs * steps_per_epoch, disable=not progress, desc="training", unit="step")
    try:
        for _ in range(epochs):
            epoch_losses = []
            for Xb, yb in _data.batches(X, y, size, shuffle=batch_size is not None, seed=rng):
                optimizer.zero_grad()
                loss, raw = _loss_on_batch(model, loss_fn, Xb, yb, scalar)
                loss.backward()
                if track_grad_norms and not scalar:
                    for name, value in grad_norms(model).items():
                        history.grad_norms.setdefault(name, []).append(value)
                optimizer.step()
                loss_value = float(loss.data if scalar else loss.item())
                if not math.isfinite(loss_value):
                    raise FloatingPointError(
                        f"fit: the loss became {loss_value} at step {history.steps + 1} "
                        f"(learning rate {optimizer.lr} too large?)"
                    )
                history.step_loss.append(loss_value)
                history.step_accuracy.append(accuracy(raw, yb))
                epoch_losses.append(loss_value)
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.4f}", refresh=False)
                if on_step is not None:
                    on_step(history.steps, loss_value)
            history.epoch_loss.append(float(np.mean(epoch_losses)))
            history.epoch_accuracy.append(accuracy(predict(model, X), y))
            if validation is not None:
                history.val_accuracy.append(accuracy(predict(model, validation[0]), validation[1]))
    finally:
        bar.close()
    return history
