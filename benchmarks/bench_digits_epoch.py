"""One training epoch on the digits: our ``Tensor`` vs PyTorch eager vs hand-written numpy.

The task: MLP 64-128-10 (ReLU), softmax cross-entropy, plain SGD (lr 0.05), mini-batches
of 32 over the 1438 training images (45 steps), float32. All three engines start from the
same weights and see the same batches, and the benchmark checks that they end at the same
weights — so they are timed doing the same arithmetic.

Fair conditions: one process, one BLAS thread (threadpoolctl; ``torch.set_num_threads(1)``),
engines alternated round by round (a busy neighbour on a shared machine slows all three
alike), median of the rounds, ratios to numpy taken within this one run.

``run()`` returns rows ``{"name", "seconds", "ratio_vs_numpy"}``; ``python -m
benchmarks.bench_digits_epoch`` prints them.
"""

from __future__ import annotations

from functools import partial

import numpy as np

LR = 0.05
BATCH = 32
DTYPE = np.float32
TASK = "digits epoch, MLP 64-128-10, batch 32, float32"


def _problem(seed: int = 0):
    from autodiff_lab import data, nn

    X_train, y_train, _, _ = data.load_digits(seed=seed)
    rng = np.random.default_rng(seed)
    W1 = nn.init_weights(64, 128, "kaiming", rng, DTYPE)
    W2 = nn.init_weights(128, 10, "kaiming", rng, DTYPE)
    weights = [W1, np.zeros(128, DTYPE), W2, np.zeros(10, DTYPE)]
    order = rng.permutation(len(X_train))
    batches = [
        (X_train[order[i : i + BATCH]].astype(DTYPE), y_train[order[i : i + BATCH]])
        for i in range(0, len(order), BATCH)
    ]
    return weights, batches


def epoch_numpy(weights, batches):
    """Forward, backward and SGD written out by hand: the floor the others are measured by."""
    W1, b1, W2, b2 = (w.copy() for w in weights)
    for x, y in batches:
        n = len(y)
        h = x @ W1 + b1
        a = np.maximum(h, 0)
        z = a @ W2 + b2
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        dz = p
        dz[np.arange(n), y] -= 1
        dz /= n
        dW2 = a.T @ dz
        db2 = dz.sum(axis=0)
        dh = (dz @ W2.T) * (h > 0)
        dW1 = x.T @ dh
        db1 = dh.sum(axis=0)
        W1 -= LR * dW1
        b1 -= LR * db1
        W2 -= LR * dW2
        b2 -= LR * db2
    return [W1, b1, W2, b2]


def epoch_ours(weights, batches):
    """The same epoch with autodiff_lab: nn.Linear layers, cross_entropy, optim.SGD."""
    from autodiff_lab import Tensor, nn, optim

    model = nn.TensorMLP(64, [128, 10], dtype=DTYPE, rng=0)
    for p, w in zip(model.parameters(), weights):
        p.data = w.copy()
    opt = optim.SGD(model.parameters(), lr=LR)
    for x, y in batches:
        opt.zero_grad()
        nn.cross_entropy(model(Tensor(x)), y).backward()
        opt.step()
    return [p.data for p in model.parameters()]


def epoch_torch(weights, batches):
    """The same epoch in PyTorch eager mode (autograd + torch.optim.SGD)."""
    import torch

    params = [torch.tensor(w.copy(), requires_grad=True) for w in weights]
    W1, b1, W2, b2 = params
    opt = torch.optim.SGD(params, lr=LR)
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    for x, y in data:
        opt.zero_grad()
        logits = torch.relu(x @ W1 + b1) @ W2 + b2
        torch.nn.functional.cross_entropy(logits, y).backward()
        opt.step()
    return [p.detach().numpy() for p in params]


def run(rounds: int = 9) -> list[dict]:
    """Time each engine ``rounds`` times, alternating; print and return rows with medians
    and ratios to numpy."""
    from .common import one_blas_thread, print_table, time_alternating

    weights, batches = _problem()
    engines = {"numpy (hand-written)": epoch_numpy, "autodiff_lab Tensor": epoch_ours}
    try:
        import torch  # noqa: F401  (a test dependency; without it, compare the other two)

        engines["PyTorch eager"] = epoch_torch
    except ImportError:
        pass
    with one_blas_thread():
        reference = epoch_numpy(weights, batches)
        for name, epoch in engines.items():  # check they all compute the same epoch
            result = epoch(weights, batches)
            worst = max(float(np.abs(r - e).max()) for r, e in zip(result, reference))
            if worst > 1e-4:
                raise AssertionError(f"{name} ends {worst:.2e} away from numpy's weights")
        medians = time_alternating(
            {name: partial(epoch, weights, batches) for name, epoch in engines.items()},
            rounds=rounds,
        )
    base = medians["numpy (hand-written)"]
    rows = [
        {"name": f"{TASK}: {name}", "seconds": seconds, "ratio_vs_numpy": seconds / base}
        for name, seconds in medians.items()
    ]
    print_table(f"One training epoch ({TASK}, 1 thread)", rows, list(rows[0]))
    return rows


if __name__ == "__main__":
    run()
