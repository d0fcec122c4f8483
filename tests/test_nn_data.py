"""Data sets: deterministic under a seed, right shapes, classes and geometry."""

import numpy as np
import pytest

from autodiff_lab import data


def test_moons_shapes_classes_and_determinism():
    X, y = data.make_moons(101, noise=0.1, seed=3)
    assert X.shape == (101, 2) and X.dtype == np.float64 and y.dtype == np.int64
    assert np.bincount(y).tolist() == [50, 51]
    X2, y2 = data.make_moons(101, noise=0.1, seed=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(X, data.make_moons(101, noise=0.1, seed=4)[0])


def test_noiseless_moons_lie_on_their_arcs():
    X, y = data.make_moons(40, noise=0.0, seed=0)
    upper, lower = X[y == 0], X[y == 1]
    np.testing.assert_allclose(np.hypot(*upper.T), 1.0)  # unit circle around (0, 0)
    np.testing.assert_allclose(np.hypot(lower[:, 0] - 1, lower[:, 1] - 0.5), 1.0)
    assert (upper[:, 1] >= -1e-12).all() and (lower[:, 1] <= 0.5 + 1e-12).all()


def test_spirals_shapes_classes_and_radius():
    X, y = data.make_spirals(301, n_classes=3, noise=0.0, seed=1)
    assert X.shape == (301, 2) and sorted(np.bincount(y).tolist()) == [100, 100, 101]
    assert np.hypot(*X.T).max() == pytest.approx(1.0)
    np.testing.assert_array_equal(X, data.make_spirals(301, n_classes=3, noise=0.0, seed=1)[0])
    with pytest.raises(ValueError, match="make_spirals: n_classes"):
        data.make_spirals(10, n_classes=1)


def test_digits_split_is_deterministic_stratified_and_normalised():
    X_train, y_train, X_test, y_test = data.load_digits(seed=0)
    assert X_train.shape[1] == 64 and len(X_train) + len(X_test) == 1797
    assert 350 <= len(X_test) <= 370
    assert X_train.min() == 0.0 and X_train.max() == 1.0
    assert set(y_train.tolist()) == set(y_test.tolist()) == set(range(10))
    # stratified: every digit has ~20 % of its images in the test set
    share = np.bincount(y_test) / (np.bincount(y_test) + np.bincount(y_train))
    assert np.all(np.abs(share - 0.2) < 0.01)
    again = data.load_digits(seed=0)
    np.testing.assert_array_equal(again[0], X_train)
    np.testing.assert_array_equal(again[3], y_test)
    # no image in both sets
    train_rows = {row.tobytes() for row in X_train}
    assert not any(row.tobytes() in train_rows for row in X_test)  # the 1797 images are distinct
    other = data.load_digits(seed=1)
    assert not np.array_equal(other[0], X_train)


def test_batches_cover_each_example_once():
    X, y = np.arange(20.0).reshape(10, 2), np.arange(10)
    got = list(data.batches(X, y, batch_size=4, shuffle=True, seed=0))
    assert [len(b[1]) for b in got] == [4, 4, 2]
    seen = np.concatenate([b[1] for b in got])
    assert sorted(seen.tolist()) == list(range(10)) and seen.tolist() != list(range(10))
    for Xb, yb in got:  # rows stay paired with their labels
        np.testing.assert_array_equal(Xb[:, 0], 2.0 * yb)
    same = np.concatenate([b[1] for b in data.batches(X, y, 4, seed=0)])
    np.testing.assert_array_equal(seen, same)
    ordered = [b[1].tolist() for b in data.batches(X, y, 5, shuffle=False)]
    assert ordered == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    with pytest.raises(ValueError, match="batches: X has 10 rows but y has 3"):
        list(data.batches(X, y[:3]))
