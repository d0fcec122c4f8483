"""Chapter 05 exercises: training (accuracy, cross-entropy, SGD with momentum, a Linear layer,
a training loop)."""

from __future__ import annotations

import numpy as np

from ..runners.ch05 import _accuracy_run, _ce_run, _linear_run, _momentum_run, _train_run
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, finite

__all__ = ["EXERCISES"]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


# --- 5.1 accuracy ----------------------------------------------------------------------


def _accuracy_cases(rng):
    cases = []
    for n, c in [(6, 3), (10, 4), (5, 5)]:
        logits = draw(rng, -3, 3, (n, c))
        targets = rng.integers(0, c, size=n)
        hits = rng.random(n) < 0.6  # make ~60 % of the rows right
        targets[hits] = logits[hits].argmax(axis=1)
        cases.append(Case(f"random batch of {n}, {c} classes", (logits, targets)))
    cases += [
        Case("edge: every prediction right", (np.eye(3) * 2.0, np.array([0, 1, 2]))),
        Case("edge: every prediction wrong", (np.eye(3), np.array([1, 2, 0]))),
        Case("edge: one example", (np.array([[0.1, 0.7, 0.2]]), np.array([1]))),
    ]
    return cases


def _accuracy_reference(inputs):
    logits, targets = inputs
    right = sum(int(np.argmax(row)) == int(t) for row, t in zip(logits, targets, strict=True))
    return right / len(targets)


ACCURACY = Exercise(
    id="5.1",
    title="Accuracy of a batch of predictions",
    level="trivial",
    minutes=5,
    task="accuracy(logits, targets): the fraction of rows whose largest logit is at the "
    "target class",
    answer="accuracy",
    cases=_accuracy_cases,
    run=_accuracy_run,
    reference=_accuracy_reference,
    mistakes=(
        Mistake(
            "That is a count of correct rows: divide by the number of examples to get a "
            "fraction between 0 and 1.",
            lambda got, exp, case: np.isclose(got, exp * len(case.inputs[1])) and exp != 0,
        ),
        Mistake(
            "That looks like a percentage: return a fraction between 0 and 1.",
            lambda got, exp, case: np.isclose(got, 100 * exp) and exp != 0,
        ),
        Mistake(
            "The argmax must run along the classes (axis=1, one prediction per row), "
            "not down the batch (axis=0).",
            lambda got, exp, case: (
                not np.isclose(got, exp)
                and np.isclose(
                    got,
                    np.mean(
                        np.argmax(case.inputs[0], axis=0)[: len(case.inputs[1])]
                        == case.inputs[1][: case.inputs[0].shape[1]]
                    ),
                )
            ),
        ),
    ),
    nudges=("Predicted class of each row = argmax over its logits.",),
    reveal="np.mean(logits.argmax(axis=1) == targets)",
)


# --- 5.2 cross-entropy and its gradient ------------------------------------------------


def _ce_cases(rng):
    cases = []
    for n, c in [(4, 3), (6, 5), (3, 2)]:
        logits = draw(rng, -3, 3, (n, c))
        cases.append(
            Case(f"random batch of {n}, {c} classes", (logits, rng.integers(0, c, size=n)))
        )
    cases += [
        Case(
            "edge: huge logits (exp overflows)",
            (np.array([[1000.0, 0.0, -1000.0], [5.0, 800.0, 5.0]]), np.array([0, 2])),
            points=2.0,
        ),
        Case("edge: one example, all logits equal", (np.zeros((1, 4)), np.array([3]))),
    ]
    return cases


def _ce_reference(inputs):
    """loss = mean_i -log softmax(z_i)[y_i];  dL/dz = (softmax(z) - onehot(y)) / N."""
    logits, targets = np.asarray(inputs[0], dtype=float), np.asarray(inputs[1])
    n = len(targets)
    logp = _log_softmax(logits)
    one_hot = np.zeros_like(logits)
    one_hot[np.arange(n), targets] = 1.0
    return [float(-logp[np.arange(n), targets].mean()), (np.exp(logp) - one_hot) / n]


def _ce_grad_is(got, case, scale) -> bool:
    exp = _ce_reference(case.inputs)
    return close(got[1], scale * exp[1]) and not close(got[1], exp[1])


CROSS_ENTROPY = Exercise(
    id="5.2",
    title="Cross-entropy and its gradient",
    level="medium",
    minutes=20,
    parts=("loss", "dloss/dlogits"),
    task="cross_entropy(logits, targets): return (mean cross-entropy loss, dloss/dlogits), "
    "stable for large logits",
    answer="cross_entropy",
    cases=_ce_cases,
    run=_ce_run,
    reference=_ce_reference,
    mistakes=(
        Mistake(
            "inf or NaN for large logits: compute log-softmax with the log-sum-exp trick "
            "(subtract each row's max before exp).",
            lambda got, exp, case: not (finite(got[0]) and finite(got[1])),
        ),
        Mistake(
            "The loss is a *mean* over the batch, so its gradient carries a factor 1/N: "
            "(softmax - one_hot) / N.",
            lambda got, exp, case: _ce_grad_is(got, case, len(case.inputs[1])),
        ),
        Mistake(
            "The gradient has the wrong sign: d loss/d logits = softmax - one_hot "
            "(it pushes the target logit *up* when you step against it).",
            lambda got, exp, case: _ce_grad_is(got, case, -1.0),
        ),
        Mistake(
            "The loss is the mean, not the sum, of the per-example losses.",
            lambda got, exp, case: (
                np.isclose(got[0], exp[0] * len(case.inputs[1])) and not np.isclose(got[0], exp[0])
            ),
        ),
    ),
    nudges=("loss_i = logsumexp(z_i) - z_i[y_i]; average over i.",),
    reveal="grad = (softmax(z) - one_hot(y)) / N",
)


# --- 5.3 SGD with momentum --------------------------------------------------------------


def _momentum_cases(rng):
    cases = []
    for k, (shape, steps) in enumerate([((3,), 4), ((2, 3), 3), ((4,), 6)]):
        lr, mu = round(float(rng.uniform(0.01, 0.3)), 3), round(float(rng.uniform(0.5, 0.95)), 2)
        grads = [draw(rng, -2.0, 2.0, shape) for _ in range(steps)]
        cases.append(
            Case(
                f"random {shape} parameter, {steps} steps, lr={lr}, momentum={mu}",
                (draw(rng, -2.0, 2.0, shape), grads, lr, mu),
            )
        )
        del k
    cases += [
        Case(
            "edge: momentum 0 is plain SGD",
            (np.array([1.0, -1.0]), [np.array([0.5, 2.0])] * 3, 0.1, 0.0),
        ),
        Case("edge: one step from rest", (np.array([2.0]), [np.array([1.0])], 0.5, 0.9)),
        Case(
            "edge: a constant gradient builds up speed",
            (np.array([0.0]), [np.array([1.0])] * 5, 0.1, 0.9),
        ),
    ]
    return cases


def _momentum_reference(inputs, *, variant: str = "pytorch"):
    """PyTorch's convention: v ← μ v + g;  p ← p - lr v (velocity starts at 0)."""
    param, grads, lr, mu = inputs
    p = np.array(param, dtype=float)
    v = np.zeros_like(p)
    for g in grads:
        g = np.asarray(g, dtype=float)
        if variant == "no momentum":
            v = g
        elif variant == "old velocity":  # step with v before it is updated
            p = p - lr * v
            v = mu * v + g
            continue
        elif variant == "scaled velocity":  # v ← μ v - lr g;  p ← p + v
            v = mu * v - lr * g
            p = p + v
            continue
        else:
            v = mu * v + g
        p = p - lr * v
    return [p, v]


def _momentum_is(got, case, variant) -> bool:
    exp = _momentum_reference(case.inputs)
    return close(got, _momentum_reference(case.inputs, variant=variant)) and not close(got, exp)


MOMENTUM = Exercise(
    id="5.3",
    title="One step of SGD with momentum",
    level="trivial",
    minutes=5,
    parts=("new param", "new velocity"),
    task="sgd_momentum_step(param, grad, velocity, lr, momentum): return (new param, new "
    "velocity) with v = momentum*v + grad, param - lr*v",
    answer="sgd_momentum_step",
    cases=_momentum_cases,
    run=_momentum_run,
    reference=_momentum_reference,
    mistakes=(
        Mistake(
            "The update ignores the velocity: that is plain SGD. Update the velocity first "
            "(v = momentum·v + grad) and step along it.",
            lambda got, exp, case: (
                close(got[0], _momentum_reference(case.inputs, variant="no momentum")[0])
                and not close(got[0], exp[0])
            ),
        ),
        Mistake(
            "The step used the *old* velocity: update v first, then take param - lr·v "
            "with the new v.",
            lambda got, exp, case: _momentum_is(got, case, "old velocity"),
        ),
        Mistake(
            "The parameters are right, but the velocity is stored in the other convention "
            "(v = μv - lr·g). Use PyTorch's: v = μv + g, then param - lr·v.",
            lambda got, exp, case: (
                close(got[0], exp[0])
                and close(got[1], -case.inputs[2] * exp[1])
                and not close(got[1], exp[1])
            ),
        ),
    ),
    nudges=("Two lines: update the velocity, then the parameter.",),
    reveal="v = momentum * velocity + grad; return param - lr * v, v",
)


# --- 5.4 a Linear layer, forward and backward -------------------------------------------


def _linear_cases(rng):
    cases = []
    for n, i, o in [(4, 3, 2), (5, 2, 3), (3, 4, 4)]:
        cases.append(
            Case(
                f"random batch {n}, {i} → {o}",
                (
                    draw(rng, -2.0, 2.0, (n, i)),
                    draw(rng, -2.0, 2.0, (i, o)),
                    draw(rng, -2.0, 2.0, (o,)),
                    draw(rng, -2.0, 2.0, (n, o)),
                ),
            )
        )
    cases += [
        Case(
            "edge: batch of one",
            (
                draw(rng, -2.0, 2.0, (1, 3)),
                draw(rng, -2.0, 2.0, (3, 2)),
                draw(rng, -2.0, 2.0, (2,)),
                draw(rng, -2.0, 2.0, (1, 2)),
            ),
        ),
        Case(
            "edge: upstream gradient of ones",
            (
                draw(rng, -2.0, 2.0, (3, 2)),
                draw(rng, -2.0, 2.0, (2, 2)),
                np.zeros(2),
                np.ones((3, 2)),
            ),
        ),
    ]
    return cases


def _linear_reference(inputs):
    """Y = X W + b;  dX = G Wᵀ;  dW = Xᵀ G;  db = Σ_rows G (written with einsum)."""
    x, w, b, g = (np.asarray(v, dtype=float) for v in inputs)
    return [
        np.einsum("ni,io->no", x, w) + b,
        np.einsum("no,io->ni", g, w),
        np.einsum("ni,no->io", x, g),
        g.sum(axis=0),
    ]


def _linear_part_is(got, case, which, make) -> bool:
    x, w, b, g = (np.asarray(v, dtype=float) for v in case.inputs)
    exp = _linear_reference(case.inputs)
    return close(got[which], make(x, w, b, g)) and not close(got[which], exp[which])


LINEAR = Exercise(
    id="5.4",
    title="A Linear layer: forward and backward",
    level="easy",
    minutes=10,
    parts=("Y", "dX", "dW", "db"),
    task="linear_forward_backward(X, W, b, G): return (Y = X @ W + b, dX, dW, db) for "
    "upstream gradient G = dL/dY",
    answer="linear_forward_backward",
    cases=_linear_cases,
    run=_linear_run,
    reference=_linear_reference,
    mistakes=(
        Mistake(
            "The bias is added to every row, so its gradient *sums* G over the batch: "
            "db = G.sum(axis=0) (not the mean).",
            lambda got, exp, case: _linear_part_is(got, case, 3, lambda x, w, b, g: g.mean(0)),
        ),
        Mistake(
            "db must have b's shape (out,): sum G over the batch axis (axis=0).",
            lambda got, exp, case: (
                not isinstance(got, dict)
                and len(got) == 4
                and all(np.shape(got[k]) == np.shape(exp[k]) for k in range(3))
                and np.shape(got[3]) != np.shape(exp[3])
            ),
        ),
        Mistake(
            "A matmul's shapes do not fit (ValueError). Each gradient has the shape of what it "
            "is the gradient of: dX like X (N×in), dW like W (in×out); G is N×out.",
            lambda got, exp, case: isinstance(got, dict) and got.get("error") == "ValueError",
        ),
        Mistake(
            "dW = Xᵀ @ G sums over the batch already; do not divide it by the batch size.",
            lambda got, exp, case: _linear_part_is(
                got, case, 2, lambda x, w, b, g: x.T @ g / len(x)
            ),
        ),
    ),
    nudges=("Each gradient has the shape of what it is the gradient of.",),
    reveal="dX = G @ W.T, dW = X.T @ G, db = G.sum(axis=0)",
)


# --- 5.5 fix a mini-batch training loop --------------------------------------------------


def _train_cases(rng):
    cases = []
    for n, d, batch, epochs in [(12, 2, 4, 3), (10, 3, 3, 4), (9, 1, 2, 2)]:
        x = draw(rng, -1.5, 1.5, (n, d))
        y = np.round(x @ draw(rng, -2.0, 2.0, (d,)) + 0.5 + 0.1 * rng.normal(size=n), 4)
        lr, seed = round(float(rng.uniform(0.05, 0.2)), 3), int(rng.integers(0, 1000))
        cases.append(
            Case(
                f"random {n}×{d} data, batch {batch}, {epochs} epochs, lr={lr}, seed={seed}",
                (x, y, lr, epochs, batch, seed),
            )
        )
    x = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    cases += [
        Case("edge: one batch holds the whole data set", (x, 2 * x[:, 0] + 1, 0.05, 5, 5, 1)),
        Case("edge: batch size 1", (x, 3 - x[:, 0], 0.02, 2, 1, 7)),
    ]
    return cases


def _minibatch_sgd(x, y, lr, epochs, batch_size, seed, *, bug: str = ""):
    """Mini-batch gradient descent on the batch-mean squared error of x @ w + b, from 0."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    w, b = np.zeros(x.shape[1]), 0.0
    acc_w, acc_b = np.zeros_like(w), 0.0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            rows = order[start : start + batch_size]
            targets = y[start : start + batch_size] if bug == "targets" else y[rows]
            residual = x[rows] @ w + b - targets
            grad_w = 2 * x[rows].T @ residual / len(rows)
            grad_b = 2 * residual.sum() / len(rows)
            if bug == "accumulate":
                acc_w, acc_b = acc_w + grad_w, acc_b + grad_b
                grad_w, grad_b = acc_w, acc_b
            w, b = w - lr * grad_w, b - lr * grad_b
    return [w, b]


def _train_reference(inputs):
    return _minibatch_sgd(*inputs)


TRAIN = Exercise(
    id="5.5",
    title="Fix the mini-batch training loop",
    level="easy",
    minutes=15,
    parts=("w", "b"),
    task="train(X, y, lr, epochs, batch_size, seed): buggy_train with its bug fixed; return (w, b)",
    answer="train",
    cases=_train_cases,
    run=_train_run,
    reference=_train_reference,
    mistakes=(
        Mistake(
            "The inputs are shuffled but the targets are not: each batch pairs X[rows] "
            "with the wrong y. Index y with the same rows as X.",
            lambda got, exp, case: close(got, _minibatch_sgd(*case.inputs, bug="targets")),
        ),
        Mistake(
            "Gradients add up across backward() calls: reset w.grad and b.grad before each "
            "backward.",
            lambda got, exp, case: close(got, _minibatch_sgd(*case.inputs, bug="accumulate")),
        ),
    ),
    nudges=(
        "Print the rows and the targets of the first batch in buggy_train: do they belong "
        "together?",
        "X and y must be indexed by the same shuffled rows.",
    ),
)


EXERCISES: list[Exercise] = [ACCURACY, CROSS_ENTROPY, MOMENTUM, LINEAR, TRAIN]
