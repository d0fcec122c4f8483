"""Tensor MLP SGD step (softmax cross-entropy, float32): ours vs hand-written numpy vs PyTorch.

Targets: <= 1.25x numpy for 64-128-10 batch 32, <= 1.05x numpy for 784-256-10 batch 256.
"""

from __future__ import annotations

import statistics
import time
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


def _case(n_in, n_hidden, n_out, batch):
    """A case's batch (float32 inputs, integer labels), numpy's weights and ours (the same)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    y = rng.integers(0, n_out, batch)
    ours = [Tensor(w, requires_grad=True) for w in _weights(n_in, n_hidden, n_out)]
    return x, y, _weights(n_in, n_hidden, n_out), ours


def numpy_forward(params, x):
    """The hand-written forward, to the softmax (it never computes the loss itself)."""
    w1, b1, w2, b2 = params
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ w2 + b2
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return h_pre, h, p


def numpy_backward(params, x, y, h_pre, h, p):
    """The hand-written backward, from the softmax the forward kept."""
    n = x.shape[0]
    dlogits = p
    dlogits[np.arange(n), y] -= 1
    dlogits /= n
    dw2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ params[2].T
    dh[h_pre <= 0] = 0
    dw1 = x.T @ dh
    db1 = dh.sum(axis=0)
    return dw1, db1, dw2, db2


def numpy_update(params, grads):
    for param, grad in zip(params, grads):
        param -= LR * grad


def numpy_step(params, x, y):
    """Forward, backward and SGD written by hand with numpy (the speed anchor)."""
    numpy_update(params, numpy_backward(params, x, y, *numpy_forward(params, x)))


def ours_forward(params, x, y):
    w1, b1, w2, b2 = params
    return cross_entropy((x @ w1 + b1).relu() @ w2 + b2, y)


def ours_backward(params, loss):
    for p in params:
        p.grad = None
    loss.backward()


def ours_update(params):
    for p in params:
        p.data -= LR * p.grad


def ours_step(params, x, y):
    loss = ours_forward(params, x, y)
    ours_backward(params, loss)
    ours_update(params)


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
            x, y, np_params, our_params = _case(n_in, n_hidden, n_out, batch)
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


def run_phases(steps: int = 6000) -> list[dict]:
    """Where the time of a batch-32 step goes: forward, backward and update of each engine,
    timed with ``perf_counter`` around each phase, engines interleaved step by step, the
    median of ``steps`` steps (after 500 to warm up)."""
    x, y, np_params, params = _case(*CASES[0][1:])
    xt = Tensor(x)
    times: dict[str, list[list[float]]] = {"numpy": [[], [], []], "autodiff_lab": [[], [], []]}
    clock = time.perf_counter
    with one_blas_thread():
        for step in range(steps + 500):
            t0 = clock()
            kept = numpy_forward(np_params, x)
            t1 = clock()
            grads = numpy_backward(np_params, x, y, *kept)
            t2 = clock()
            numpy_update(np_params, grads)
            t3 = clock()
            loss = ours_forward(params, xt, y)
            t4 = clock()
            ours_backward(params, loss)
            t5 = clock()
            ours_update(params)
            t6 = clock()
            if step >= 500:
                for engine, ts in (("numpy", (t0, t1, t2, t3)), ("autodiff_lab", (t3, t4, t5, t6))):
                    for i in range(3):
                        times[engine][i].append(ts[i + 1] - ts[i])
    rows = [
        {"engine": name}
        | {
            f"{phase} µs": statistics.median(ts) * 1e6
            for phase, ts in zip(("forward", "backward", "update"), phase_times)
        }
        for name, phase_times in times.items()
    ]
    print_table("Where a batch-32 step's time goes (64-128-10, float32)", rows, list(rows[0]))
    return rows


if __name__ == "__main__":
    run()
    run_phases()
