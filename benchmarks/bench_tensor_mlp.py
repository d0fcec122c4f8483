"""Tensor MLP SGD step (softmax cross-entropy, float32): ours vs hand-written numpy vs PyTorch.

Targets: <= 1.25x numpy for 64-128-10 batch 32, <= 1.05x numpy for 784-256-10 batch 256.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from autodiff_lab import Tensor, cross_entropy

from .common import one_blas_thread, print_table, time_alternating

CASES = [("64-128-10, batch 32", 64, 128, 10, 32), ("784-256-10, batch 256", 784, 256, 10, 256)]
LR = np.float32(0.01)


def _weights(n_in, n_hidden, n_out, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((n_in, n_hidden)) * np.sqrt(2 / n_in)).astype(np.float32),
        np.zeros(n_hidden, np.float32),
        (rng.standard_normal((n_hidden, n_out)) * np.sqrt(2 / n_hidden)).astype(np.float32),
        np.zeros(n_out, np.float32),
    ]


def numpy_step(params, x, y):
    """Forward, backward and SGD written by hand with numpy (the speed anchor)."""
    w1, b1, w2, b2 = params
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ w2 + b2
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = x.shape[0]
    dlogits = p
    dlogits[np.arange(n), y] -= 1
    dlogits /= n
    dw2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ w2.T
    dh[h_pre <= 0] = 0
    dw1 = x.T @ dh
    db1 = dh.sum(axis=0)
    for param, grad in zip(params, (dw1, db1, dw2, db2)):
        param -= LR * grad


def ours_step(params, x, y):
    w1, b1, w2, b2 = params
    loss = cross_entropy((x @ w1 + b1).relu() @ w2 + b2, y)
    for p in params:
        p.grad = None
    loss.backward()
    for p in params:
        p.data -= LR * p.grad


def torch_step(params, x, y):
    import torch

    w1, b1, w2, b2 = params
    loss = torch.nn.functional.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)
    for p in params:
        p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= LR.item() * p.grad


def run(rounds: int = 30) -> list[dict]:
    import torch

    rows = []
    with one_blas_thread():
        for label, n_in, n_hidden, n_out, batch in CASES:
            rng = np.random.default_rng(1)
            x = rng.standard_normal((batch, n_in)).astype(np.float32)
            y = rng.integers(0, n_out, batch)
            np_params = _weights(n_in, n_hidden, n_out)
            our_params = [
                Tensor(w.copy(), requires_grad=True) for w in _weights(n_in, n_hidden, n_out)
            ]
            torch_params = [
                torch.tensor(w, requires_grad=True) for w in _weights(n_in, n_hidden, n_out)
            ]
            xt, yt = Tensor(x), y
            xtorch, ytorch = torch.from_numpy(x), torch.from_numpy(y)
            repeat = 20 if batch <= 32 else 2
            med = time_alternating(
                {
                    "numpy": partial(numpy_step, np_params, x, y),
                    "autodiff_lab": partial(ours_step, our_params, xt, yt),
                    "pytorch": partial(torch_step, torch_params, xtorch, ytorch),
                },
                rounds=rounds,
                repeat=repeat,
            )
            for name, seconds in med.items():
                rows.append(
                    {
                        "case": label,
                        "engine": name,
                        "µs/step": seconds * 1e6,
                        "× numpy": seconds / med["numpy"],
                    }  # fmt: skip
                )
    print_table(
        "Tensor MLP SGD step (float32, 1 thread)", rows, ["case", "engine", "µs/step", "× numpy"]
    )
    return rows


if __name__ == "__main__":
    run()
