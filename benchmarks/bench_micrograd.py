"""Scalar engine vs PyPI ``micrograd``: the demo training step and long chains.

1. micrograd's demo step: MLP 2-16-16-1 on 100 two-moons points, SVM max-margin loss
   + L2, forward + backward + SGD. Engines: micrograd; our ``Value`` building exactly
   micrograd's graph (a ``*`` and a ``+`` node per weight); our ``nn.MLP`` (one ``·`` node
   per neuron). Same data, same starting weights. Target: <= 0.08x micrograd's time.
2. A chain of N ops, backward time per node for N = 10^3 ... 10^6 (flat = linear total).
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time

import numpy as np

from autodiff_lab import Value, nn

from .common import print_table, time_alternating


def moons(n=100, seed=1):
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=n, noise=0.1, random_state=seed)
    return x.tolist(), (y * 2 - 1).tolist()


class ElementwiseMLP:
    """micrograd's graph with our Value: each neuron is b + w1*x1 + ... (2n nodes)."""

    def __init__(self, weights):  # weights: per layer, per neuron (w list, b)
        self.layers = [[([Value(w) for w in ws], Value(b)) for ws, b in layer] for layer in weights]

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            outs = []
            for ws, b in layer:
                act = sum((wi * xi for wi, xi in zip(ws, x)), b)
                outs.append(act.relu() if i < len(self.layers) - 1 else act)
            x = outs
        return x[0]

    def parameters(self):
        return [p for layer in self.layers for ws, b in layer for p in (*ws, b)]


def micrograd_weights(model):
    return [[([w.data for w in n.w], n.b.data) for n in layer.neurons] for layer in model.layers]


def load_weights(model: nn.MLP, weights):
    params = [v for layer in weights for ws, b in layer for v in (*ws, b)]
    for p, v in zip(model.parameters(), params, strict=True):
        p.data = v


def demo_step(value_cls, model, xs, ys, k):
    """One step of micrograd's demo: SVM max-margin loss + L2, backward, SGD."""
    inputs = [[value_cls(v) for v in row] for row in xs]
    scores = [model(x) for x in inputs]
    losses = [(1 + -yi * si).relu() for yi, si in zip(ys, scores)]
    data_loss = sum(losses) * (1.0 / len(losses))
    reg_loss = 1e-4 * sum(p * p for p in model.parameters())
    total = data_loss + reg_loss
    for p in model.parameters():
        p.grad = 0.0
    total.backward()
    lr = 1.0 - 0.9 * k / 100
    for p in model.parameters():
        p.data -= lr * p.grad
    return total.data


def run_demo(rounds: int = 15) -> list[dict]:
    from micrograd import nn as mnn
    from micrograd.engine import Value as MValue

    random.seed(1337)
    mg_model = mnn.MLP(2, [16, 16, 1])
    weights = micrograd_weights(mg_model)
    ours_elementwise = ElementwiseMLP(weights)
    ours_nn = nn.MLP(2, [16, 16, 1])
    load_weights(ours_nn, weights)
    xs, ys = moons()
    # Same start, same data: the three engines must agree on the first loss.
    losses = [demo_step(MValue, mg_model, xs, ys, 0), demo_step(Value, ours_elementwise, xs, ys, 0),
              demo_step(Value, ours_nn, xs, ys, 0)]  # fmt: skip
    assert np.allclose(losses, losses[0]), losses
    med = time_alternating(
        {
            "micrograd": lambda: demo_step(MValue, mg_model, xs, ys, 1),
            "autodiff_lab Value, micrograd's graph": lambda: demo_step(
                Value, ours_elementwise, xs, ys, 1
            ),
            "autodiff_lab nn.MLP": lambda: demo_step(Value, ours_nn, xs, ys, 1),
        },
        rounds=rounds,
    )
    base = med["micrograd"]
    rows = [
        {"engine": name, "ms/step": s * 1e3, "× micrograd": s / base} for name, s in med.items()
    ]
    print_table("micrograd demo step (MLP 2-16-16-1, 100 moons)", rows, list(rows[0]))
    return rows


def _chain(value_cls, n):
    x = value_cls(0.5)
    y = x
    for _ in range(n):
        y = y * 1.0
    return x, y


def run_chain(sizes=(10**3, 10**4, 10**5, 10**6)) -> list[dict]:
    """Backward time per op through a chain of N multiplications: the median over fresh
    chains (100 of 10³ ops … 3 of 10⁶), engines alternated, the garbage collector run
    before each."""
    from micrograd.engine import Value as MValue

    rows = []
    limit = sys.getrecursionlimit()
    for n in sizes:
        samples: dict[str, list[float]] = {"autodiff_lab": [], "micrograd": []}
        for _ in range(max(3, 10**5 // n)):
            for name, cls in (("autodiff_lab", Value), ("micrograd", MValue)):
                x, y = _chain(cls, n)
                if cls is MValue:
                    sys.setrecursionlimit(max(limit, 4 * n + 100))  # its topological sort recurses
                gc.collect()
                start = time.perf_counter()
                try:
                    y.backward()
                    samples[name].append((time.perf_counter() - start) / n * 1e6)
                except RecursionError:
                    pass  # (no sample: the row says so)
                finally:
                    sys.setrecursionlimit(limit)
                del x, y
        row: dict = {"N ops": n}
        for name, times in samples.items():
            row[f"{name} µs/op"] = statistics.median(times) if times else "RecursionError"
        rows.append(row)
    print_table("Backward through a chain of N multiplications", rows, list(rows[0]))
    return rows


if __name__ == "__main__":
    run_demo()
    run_chain()
