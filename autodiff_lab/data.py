"""Small data sets for training, all deterministic under a seed.

- :func:`make_moons`, :func:`make_spirals`: 2-D toy problems, generated with numpy alone.
- :func:`load_digits`: real handwritten digits (1797 images of 8x8 pixels) from the copy
  that ships inside scikit-learn — no download — split into train and test sets.
- :func:`batches`: a mini-batch iterator.

Features are float64 arrays of shape (n, d); labels are int64 arrays of shape (n,).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["make_moons", "make_spirals", "load_digits", "batches"]


def _check_count(n, where: str, minimum: int = 2) -> int:
    if not isinstance(n, int | np.integer) or n < minimum:
        raise ValueError(f"{where}: n must be an int >= {minimum}, got {n!r}")
    return int(n)


def make_moons(n: int = 100, noise: float = 0.1, seed: int = 0):
    """Two interleaving half circles: ``(X, y)`` with X (n, 2) and labels 0 / 1.

    Class 0 is the upper arc ``(cos t, sin t)``, class 1 the lower arc
    ``(1 - cos t, 0.5 - sin t)``, t in [0, pi]; Gaussian noise of std ``noise`` is added and
    the points are shuffled. Not linearly separable: a line cannot split them, an MLP can.
    """
    n = _check_count(n, "make_moons")
    if noise < 0:
        raise ValueError(f"make_moons: noise must be >= 0, got {noise}")
    rng = np.random.default_rng(seed)
    n_upper = n // 2
    n_lower = n - n_upper
    t_upper = np.linspace(0.0, np.pi, n_upper)
    t_lower = np.linspace(0.0, np.pi, n_lower)
    upper = np.column_stack([np.cos(t_upper), np.sin(t_upper)])
    lower = np.column_stack([1.0 - np.cos(t_lower), 0.5 - np.sin(t_lower)])
    X = np.vstack([upper, lower]) + rng.normal(0.0, noise, size=(n, 2))
    y = np.concatenate([np.zeros(n_upper, np.int64), np.ones(n_lower, np.int64)])
    order = rng.permutation(n)
    return X[order], y[order]


def make_spirals(n: int = 300, n_classes: int = 3, noise: float = 0.2, seed: int = 0):
    """``n_classes`` interleaved spiral arms: ``(X, y)`` with X (n, 2), labels 0..n_classes-1.

    Arm k: radius r from 0 to 1, angle ``4 r + 2 pi k / n_classes`` (plus Gaussian noise of
    std ``noise`` on the angle); points at ``r (sin angle, cos angle)``. Shuffled.
    """
    n = _check_count(n, "make_spirals")
    if not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"make_spirals: n_classes must be an int >= 2, got {n_classes!r}")
    rng = np.random.default_rng(seed)
    sizes = [n // n_classes + (1 if k < n % n_classes else 0) for k in range(n_classes)]
    xs, ys = [], []
    for k, m in enumerate(sizes):
        r = np.linspace(0.0, 1.0, m)
        angle = 4.0 * r + 2.0 * np.pi * k / n_classes + rng.normal(0.0, noise, size=m)
        xs.append(np.column_stack([r * np.sin(angle), r * np.cos(angle)]))
        ys.append(np.full(m, k, dtype=np.int64))
    X, y = np.vstack(xs), np.concatenate(ys)
    order = rng.permutation(n)
    return X[order], y[order]


def load_digits(seed: int = 0, test_fraction: float = 0.2):
    """Handwritten digits 0-9 as ``(X_train, y_train, X_test, y_test)``.

    Each image is 8x8 pixels with intensities 0..16, flattened to 64 features and scaled to
    [0, 1]. The split is stratified (each digit keeps its share in both sets) and fixed by
    ``seed``; with the default 20 % test set: 1438 training and 359 test images.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"load_digits: test_fraction must lie in (0, 1), got {test_fraction}")
    from sklearn.datasets import load_digits as _sklearn_digits  # imported on first use

    bunch = _sklearn_digits()
    X = bunch.data.astype(np.float64) / 16.0
    y = bunch.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test_idx = []
    for digit in range(10):
        idx = rng.permutation(np.flatnonzero(y == digit))
        test_idx.append(idx[: int(round(test_fraction * len(idx)))])
    is_test = np.zeros(len(y), dtype=bool)
    is_test[np.concatenate(test_idx)] = True
    train = rng.permutation(np.flatnonzero(~is_test))
    test = np.sort(np.flatnonzero(is_test))
    return X[train], y[train], X[test], y[test]


def batches(
    X, y, batch_size: int = 32, shuffle: bool = True, seed=0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(X_batch, y_batch)`` covering the data once (the last batch may be smaller).

    With ``shuffle`` the order is a random permutation drawn from ``seed`` (an int gives the
    same order every call; pass one ``numpy.random.Generator`` to get a new order each epoch).
    """
    X, y = np.asarray(X), np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"batches: X has {len(X)} rows but y has {len(y)}")
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive int, got {batch_size!r}")
    if shuffle:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        order = rng.permutation(len(X))
    else:
        order = np.arange(len(X))
    for start in range(0, len(X), batch_size):
        idx = order[start : start + batch_size]
        yield X[idx], y[idx]
