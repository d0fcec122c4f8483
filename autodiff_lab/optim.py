"""Optimizers: turn gradients into parameter updates.

Each works on scalar ``Value`` parameters and ``Tensor`` parameters alike (the update
formulas are the same for a float and an array) and follows PyTorch's ``torch.optim``
update rules exactly, so a trajectory can be checked against PyTorch step for step.

The training loop is always::

    optimizer.zero_grad()      # gradients accumulate, so clear the last step's
    loss = loss_fn(model(x), y)
    loss.backward()            # fill p.grad for every parameter
    optimizer.step()           # move every parameter a little against its gradient
"""

from __future__ import annotations

import math

import numpy as np

from .tensor import Tensor
from .value import Value

__all__ = ["Optimizer", "SGD", "Adam", "clip_grad_norm_", "clip_grad_value_"]


class Optimizer:
    """Holds the parameters and a per-parameter ``state`` dict (momentum buffers, …)."""

    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty list of parameters")
        for p in self.params:
            if not isinstance(p, Value | Tensor):
                raise TypeError(
                    f"{type(self).__name__}: parameters must be Value or Tensor, got "
                    f"{type(p).__name__}"
                )
        if not lr > 0:
            raise ValueError(f"{type(self).__name__}: lr must be > 0, got {lr!r}")
        self.lr = float(lr)
        self.state: list[dict] = [{} for _ in self.params]

    def zero_grad(self):
        """Clear every parameter's gradient (``Value.grad = 0.0``, ``Tensor.grad = None``)."""
        for p in self.params:
            p.grad = None if isinstance(p, Tensor) else 0.0

    def step(self):
        """Update every parameter that has a gradient."""
        for p, state in zip(self.params, self.state):
            if p.grad is None:  # a Tensor no backward pass reached: leave it alone
                continue
            delta = self._delta(p.data, p.grad, state)
            if isinstance(p.data, np.ndarray):
                p.data -= delta  # in place: no new array per step
            else:
                p.data = float(p.data - delta)

    def _delta(self, data, grad, state: dict):
        """How much to subtract from ``data`` (rule of the subclass)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lr={self.lr}, {len(self.params)} parameters)"


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay.

    With ``g = grad + weight_decay * p``::

        buf = g                                    (first step)
        buf = momentum * buf + (1 - dampening) * g (later steps)
        p  -= lr * buf                  (or lr * (g + momentum * buf) with nesterov)

    ``momentum=0`` is plain gradient descent ``p -= lr * g``.
    """

    def __init__(
        self,
        params,
        lr: float,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
    ):
        super().__init__(params, lr)
        if momentum < 0 or weight_decay < 0:
            raise ValueError(
                f"SGD: momentum and weight_decay must be >= 0, got {momentum}, {weight_decay}"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def _delta(self, data, grad, state):
        g = grad + self.weight_decay * data if self.weight_decay else grad
        if self.momentum:
            if "momentum_buffer" not in state:
                buf = g.copy() if isinstance(g, np.ndarray) else g
            else:
                buf = self.momentum * state["momentum_buffer"] + (1 - self.dampening) * g
            state["momentum_buffer"] = buf
            g = g + self.momentum * buf if self.nesterov else buf
        return self.lr * g


class Adam(Optimizer):
    """Adam: a step per parameter scaled by running averages of the gradient and its square.

    With ``g = grad + weight_decay * p`` and step count t::

        m = b1 m + (1 - b1) g            (mean of gradients)
        v = b2 v + (1 - b2) g^2          (mean of squared gradients)
        p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

    The ``1 - b^t`` factors undo the bias of m and v towards their zero start.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"Adam: betas must lie in [0, 1), got {betas}")
        if eps < 0 or weight_decay < 0:
            raise ValueError(f"Adam: eps and weight_decay must be >= 0, got {eps}, {weight_decay}")
        self.betas = (float(b1), float(b2))
        self.eps = eps
        self.weight_decay = weight_decay

    def _delta(self, data, grad, state):
        b1, b2 = self.betas
        g = grad + self.weight_decay * data if self.weight_decay else grad
        t = state["step"] = state.get("step", 0) + 1
        m = state.get("exp_avg", 0.0)
        v = state.get("exp_avg_sq", 0.0)
        m = m + (1 - b1) * (g - m)
        v = b2 * v + (1 - b2) * g * g
        state["exp_avg"], state["exp_avg_sq"] = m, v
        step_size = self.lr / (1 - b1**t)
        denom = (v**0.5) / math.sqrt(1 - b2**t) + self.eps
        return step_size * (m / denom)


# --- gradient clipping (as torch.nn.utils) ------------------------------------------------


def _with_grads(params, where: str) -> list:
    """The parameters (one, or an iterable) whose ``.grad`` holds a gradient."""
    params = [params] if isinstance(params, Value | Tensor) else list(params)
    for p in params:
        if not isinstance(p, Value | Tensor):
            raise TypeError(f"{where}: parameters must be Value or Tensor, got {type(p).__name__}")
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(
    params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> float:
    """Scale all gradients together so that their joint norm is at most ``max_norm``.

    The joint norm is the ``norm_type``-norm of all gradient entries as one vector
    (``inf``: the largest ``|g|``). Every gradient is multiplied in place by
    ``min(1, max_norm / (norm + 1e-6))``, as PyTorch's ``torch.nn.utils.clip_grad_norm_``
    does; the direction of the joint gradient is unchanged. Returns the norm before
    clipping.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not max_norm >= 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm!r}")
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be > 0 (or inf), got {norm_type!r}")
    params = _with_grads(params, "clip_grad_norm_")
    if not params:
        return 0.0
    grads = [np.abs(np.asarray(p.grad, dtype=np.float64)).ravel() for p in params]
    if norm_type == math.inf:
        total = max(float(g.max()) if g.size else 0.0 for g in grads)
    else:
        per_param = [np.sum(g**norm_type) ** (1.0 / norm_type) for g in grads]
        total = float(np.sum(np.asarray(per_param) ** norm_type) ** (1.0 / norm_type))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            f"{total}; they cannot be clipped (set error_if_nonfinite=False to go on)"
        )
    coef = min(1.0, max_norm / (total + 1e-6))
    for p in params:
        if isinstance(p.grad, np.ndarray):
            p.grad *= np.asarray(coef, dtype=p.grad.dtype)
        else:
            p.grad = p.grad * coef
    return total


def clip_grad_value_(params, clip_value: float) -> None:
    """Clip every gradient entry into ``[-clip_value, clip_value]`` in place (PyTorch's
    ``torch.nn.utils.clip_grad_value_``)."""
    clip_value = float(clip_value)
    if not clip_value >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value!r}")
    for p in _with_grads(params, "clip_grad_value_"):
        if isinstance(p.grad, np.ndarray):
            np.clip(p.grad, -clip_value, clip_value, out=p.grad)
        else:
            p.grad = min(max(p.grad, -clip_value), clip_value)
