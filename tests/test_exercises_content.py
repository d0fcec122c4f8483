"""The graded exercises of chapters 01–05: right answers score full marks, plausible wrong
answers score less and get the hint that explains them, and the references agree with
PyTorch (float64) where PyTorch can compute the same thing.

The right answers here are written independently of the exercise modules (they mirror the
solution notebooks); the wrong ones are the mistakes students actually make.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor, Value, topological_order
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch01, ch03, ch04, ch05

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = (1, 2, 3, 4, 5)

# --- right answers -------------------------------------------------------------------------


def dual_mul(x, y):
    (a, da), (b, db) = x, y
    return a * b, a * db + da * b


def dual_sin(x):
    return math.sin(x[0]), math.cos(x[0]) * x[1]


def dual_div(x, y):
    (a, da), (b, db) = x, y
    return a / b, (da * b - a * db) / b**2


def jvp_f(x, y, dx, dy):
    c = math.cos(x * y)
    return (math.sin(x * y), x + y**2), (c * (y * dx + x * dy), dx + 2 * y * dy)


def jacobian_column(f, x, j):
    tangent = np.zeros_like(x)
    tangent[j] = 1.0
    return f(Dual(x, tangent)).tangent


def sqrt_heron(a, steps):
    x, dx = a, 1.0  # x_0 = a, and a moves with tangent 1
    for _ in range(steps):
        x, dx = (x + a / x) / 2, (dx + (x - a * dx) / x**2) / 2
    return x, dx


def _heron_wrong(dx0=1.0, da=1.0, sign=1.0):
    """Heron's iteration with one of the plausible slips (start tangent, a's tangent, sign)."""

    def answer(a, steps):
        x, dx = a, dx0
        for _ in range(steps):
            x, dx = (x + a / x) / 2, (dx + (da * x - sign * a * dx) / x**2) / 2
        return x, dx

    return answer


def jacobian_passes(n_inputs, n_outputs):
    if n_inputs == n_outputs:
        return n_inputs, n_outputs, "either"
    return n_inputs, n_outputs, "forward" if n_inputs < n_outputs else "reverse"


def vjp_f(x, y, u, v):
    return (x * y, math.exp(x) - y**2), (u * y + v * math.exp(x), u * x - 2 * v * y)


def _backward_by_hand(a, b, c, *, d_shares=(1.0, 1.0), c_shares=(1.0, 1.0), dtanh=None):
    """f = (a·b + c)·tanh(a·b)·c backwards by hand; the keywords drop shares (wrong answers)."""
    d = a * b
    e, t = d + c, math.tanh(d)
    g = e * t
    g_bar = c  # f = g·c
    e_bar, t_bar = g_bar * t, g_bar * e  # g = e·t
    local = 1 - t * t if dtanh is None else dtanh(t)
    d_bar = d_shares[0] * e_bar + d_shares[1] * t_bar * local  # d feeds e and t
    c_bar = c_shares[0] * g + c_shares[1] * e_bar  # c feeds f and e
    return g * c, (d_bar * b, d_bar * a, c_bar)


def backward_by_hand(a, b, c):
    return _backward_by_hand(a, b, c)


def topological_sort(root):
    order, done, stack = [], set(), [(root, False)]
    while stack:
        node, parents_pushed = stack.pop()
        if node in done:
            continue
        if parents_pushed:  # every parent was finished above it on the stack
            done.add(node)
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((parent, False) for parent in node._prev if parent not in done)
    return order


def _topological_sort_marking_too_early(root):
    """Marks a node visited when it is pushed: a parent reached twice can come out late."""
    order, visited, stack = [], {root}, [(root, False)]
    while stack:
        node, parents_pushed = stack.pop()
        if parents_pushed:
            order.append(node)
            continue
        stack.append((node, True))
        for parent in node._prev:
            if parent not in visited:
                visited.add(parent)
                stack.append((parent, False))
    return order


def exp_op(x):
    out = math.exp(x)
    return out, lambda g: g * out


def pow_op(a, b):
    out = a**b
    return out, lambda g: (g * b * a ** (b - 1), g * out * math.log(a))


def sigmoid_op(x):
    s = 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
    return s, lambda g: g * s * (1 - s)


def backward(root, local_grads):
    root.grad = 1.0
    for node in reversed(topological_order(root)):
        for parent, local in zip(node._prev, local_grads(node), strict=True):
            parent.grad += local * node.grad


def fit(xs, ys, lr, steps):
    w, b = Value(0.0), Value(0.0)
    for _ in range(steps):
        loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys, strict=True)) / len(xs)
        w.grad = b.grad = 0.0
        loss.backward()
        w.data -= lr * w.grad
        b.data -= lr * b.grad
    return w.data, b.data


def _tile_backward(
    x, g, reps, *, copies_last=False, reps_at_end=False, promote_x=True, keep_promoted=False
):
    """np.tile's backward by one reshape; the keywords make the plausible wrong versions."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    if reps_at_end:
        reps = reps + (1,) * (x.ndim - len(reps))
    d = max(x.ndim, len(reps))
    shape = (1,) * (d - x.ndim) + x.shape if promote_x else x.shape
    reps = (1,) * (d - len(reps)) + reps
    pairs = [n for r, s in zip(reps, shape) for n in ((s, r) if copies_last else (r, s))]
    out = g.reshape(pairs).sum(axis=tuple(range(int(copies_last), 2 * len(shape), 2)))
    return out if keep_promoted else out.reshape(x.shape)


def tile_backward(x, g, reps):
    return _tile_backward(x, g, reps)


def _tile_first_copy(x, g, reps):
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    return g[tuple(slice(0, s) for s in shape)].reshape(x.shape)


def _tile_int_reps_fails(x, g, reps):
    d = max(x.ndim, len(reps))  # len() of an int reps: TypeError
    return _tile_backward(x, g, reps[-d:])


def matmul_backward(a, b, g):
    return g @ b.T, a.T @ g


def stable_softmax(x, axis=-1):
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def log_softmax_backward(x, g, axis=-1):
    return g - stable_softmax(x, axis) * g.sum(axis=axis, keepdims=True)


def _numerical_jacobian(f, x, h, *, forward=False, restore=True, out_first=True):
    """Central differences J[o..., i...]; the keywords make the plausible wrong versions."""
    x = x if restore else x.copy()  # the non-restoring version nudges its own copy
    out_shape = np.shape(f(x))
    jac = np.zeros(out_shape + x.shape) if out_first else np.zeros(x.shape + out_shape)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + h
        up = np.asarray(f(x))
        x[i] = saved if forward else saved - h
        down = np.asarray(f(x))
        if restore:
            x[i] = saved
        slope = (up - down) / (h if forward else 2 * h)
        if out_first:
            jac[(...,) + i] = slope
        else:
            jac[i] = slope
    return jac


def numerical_jacobian(f, x, h):
    return _numerical_jacobian(f, x, h)


def accuracy(logits, targets):
    return float(np.mean(logits.argmax(axis=1) == targets))


def cross_entropy(logits, targets):
    n = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    one_hot = np.eye(logits.shape[1])[targets]
    return -logp[np.arange(n), targets].mean(), (np.exp(logp) - one_hot) / n


def sgd_momentum_step(param, grad, velocity, lr, momentum):
    velocity = momentum * velocity + grad
    return param - lr * velocity, velocity


def linear_forward_backward(x, w, b, g):
    return x @ w + b, g @ w.T, x.T @ g, g.sum(axis=0)


def _train(x, y, lr, epochs, batch_size, seed, *, shuffle_targets=True):
    rng = np.random.default_rng(seed)
    w = Tensor(np.zeros(x.shape[1]), requires_grad=True)
    b = Tensor(0.0, requires_grad=True)
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            rows = order[start : start + batch_size]
            targets = y[rows] if shuffle_targets else y[start : start + batch_size]
            loss = ((Tensor(x[rows]) @ w + b - targets) ** 2).mean()
            w.grad = b.grad = None
            loss.backward()
            w.data -= lr * w.grad
            b.data -= lr * b.grad
    return w.data.copy(), float(b.data)


def train(x, y, lr, epochs, batch_size, seed):
    return _train(x, y, lr, epochs, batch_size, seed)


RIGHT = {
    "1.1": dual_mul, "1.2": dual_sin, "1.3": dual_div, "1.4": jvp_f, "1.5": jacobian_column,
    "1.6": sqrt_heron,
    "2.1": jacobian_passes, "2.2": vjp_f, "2.3": backward_by_hand, "2.4": topological_sort,
    "3.1": exp_op, "3.2": pow_op, "3.3": sigmoid_op, "3.4": backward, "3.5": fit,
    "4.1": tile_backward, "4.2": matmul_backward, "4.3": stable_softmax,
    "4.4": log_softmax_backward, "4.5": numerical_jacobian,
    "5.1": accuracy, "5.2": cross_entropy, "5.3": sgd_momentum_step,
    "5.4": linear_forward_backward, "5.5": train,
}  # fmt: skip


# --- wrong answers: (exercise, implementation, substring of the hint it must get) ----------


def _recursive_topological_sort(root):
    order, seen = [], set()

    def visit(node):
        if node not in seen:
            seen.add(node)
            for parent in node._prev:
                visit(parent)
            order.append(node)

    visit(root)
    return order


def _backward_overwriting(root, local_grads):
    root.grad = 1.0
    for node in reversed(topological_order(root)):
        for parent, local in zip(node._prev, local_grads(node), strict=True):
            parent.grad = local * node.grad  # the planted bug: = instead of +=


def _backward_unseeded(root, local_grads):
    for node in reversed(topological_order(root)):
        for parent, local in zip(node._prev, local_grads(node), strict=True):
            parent.grad += local * node.grad


def _fit_without_zero_grad(xs, ys, lr, steps):
    w, b = Value(0.0), Value(0.0)
    for _ in range(steps):
        loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys, strict=True)) / len(xs)
        loss.backward()
        w.data -= lr * w.grad
        b.data -= lr * b.grad
    return w.data, b.data


def _naive_sigmoid(x):
    s = 1 / (1 + math.exp(-x))
    return s, lambda g: g * s * (1 - s)


def _naive_cross_entropy(logits, targets):
    n = len(targets)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return -np.log(p[np.arange(n), targets]).mean(), (p - np.eye(logits.shape[1])[targets]) / n


WRONG = [
    ("1.1", lambda x, y: (x[0] * y[0], x[1] * y[1]), "ε² = 0"),
    ("1.1", lambda x, y: (x[0] * y[0], x[1] * y[0]), "Only one term of the product rule"),
    ("1.2", lambda x: (math.sin(x[0]), math.cos(x[0])), "multiply it by the incoming"),
    ("1.2", lambda x: (math.sin(x[0]), -math.cos(x[0]) * x[1]), "Sign error"),
    ("1.3", lambda x, y: (x[0] / y[0], (x[1] * y[0] + x[0] * y[1]) / y[0] ** 2), "minus sign"),
    ("1.3", lambda x, y: (x[0] / y[0], (x[1] * y[0] - x[0] * y[1]) / y[0]), "b squared"),
    (
        "1.4",
        lambda x, y, dx, dy: (
            (math.sin(x * y), x + y**2),
            (y * math.cos(x * y) * dx + dy, x * math.cos(x * y) * dx + 2 * y * dy),
        ),
        "(a vjp)",
    ),
    (
        "1.4",
        lambda x, y, dx, dy: (
            (math.sin(x * y), x + y**2),
            (math.cos(x * y) * (dx + dy), dx + 2 * y * dy),
        ),
        "Chain rule inside sin",
    ),
    ("1.5", lambda f, x, j: f(Dual(x, np.ones_like(x))).tangent, "sum of all columns"),
    (
        "1.5",
        lambda f, x, j: np.array([f(Dual(x, np.eye(len(x))[k])).tangent[j] for k in range(len(x))]),
        "row j",
    ),
    ("1.6", _heron_wrong(da=0.0), "a is held constant inside a / x"),
    ("1.6", _heron_wrong(dx0=0.0), "its tangent is 1, not 0"),
    ("1.6", _heron_wrong(sign=-1.0), "minus sign"),
    ("1.6", lambda a, steps: (sqrt_heron(a, steps)[0], 0.5 / math.sqrt(a)), "limit"),
    (
        "2.1",
        lambda n, m: (m, n, "forward" if n < m else "reverse" if n > m else "either"),
        "swapped",
    ),
    ("2.1", lambda n, m: (n, m, "forward"), "choice is not"),
    (
        "2.2",
        lambda x, y, u, v: (
            (x * y, math.exp(x) - y**2),
            (y * u + x * v, math.exp(x) * u - 2 * y * v),
        ),
        "a jvp",
    ),
    ("2.2", lambda x, y, u, v: ((x * y, math.exp(x) - y**2), (u * y, u * x)), "first output"),
    ("2.3", lambda a, b, c: _backward_by_hand(a, b, c, d_shares=(1, 0)), "d = a·b is used twice"),
    ("2.3", lambda a, b, c: _backward_by_hand(a, b, c, d_shares=(0, 1)), "d = a·b is used twice"),
    ("2.3", lambda a, b, c: _backward_by_hand(a, b, c, c_shares=(1, 0)), "c is used twice"),
    ("2.3", lambda a, b, c: _backward_by_hand(a, b, c, dtanh=lambda t: 1 - t), "1 - tanh(d)²"),
    ("2.4", _recursive_topological_sort, "RecursionError"),
    ("2.4", lambda root: topological_sort(root)[::-1], "reversed"),
    ("2.4", _topological_sort_marking_too_early, "before one of its parents"),
    ("3.1", lambda x: (math.exp(x), lambda g: math.exp(x)), "ignores the upstream gradient"),
    ("3.2", lambda a, b: (a**b, lambda g: (g * b * a ** (b - 1), g * a**b)), "missing log(a)"),
    ("3.2", lambda a, b: (a**b, lambda g: (g * a ** (b - 1), g * a**b * math.log(a))), "factor b"),
    ("3.3", _naive_sigmoid, "e^-x is too big for a float"),
    ("3.3", lambda x: (sigmoid_op(x)[0], lambda g: g * x * (1 - x)), "uses the input x"),
    ("3.4", _backward_overwriting, "`parent.grad += ...`, not `=`"),
    ("3.4", _backward_unseeded, "root.grad = 1.0"),
    ("3.5", _fit_without_zero_grad, "zero_grad"),
    ("4.1", lambda x, g, reps: g, "shape of the tiled output"),
    ("4.1", lambda x, g, reps: tile_backward(x, g, reps) / max(1, np.prod(reps)), "not mean"),
    ("4.1", _tile_first_copy, "first copy only"),
    ("4.1", lambda x, g, reps: _tile_backward(x, g, reps, copies_last=True), "wrong order"),
    (
        "4.1",
        lambda x, g, reps: g.reshape(-1, x.size).sum(axis=0).reshape(x.shape),
        "consecutive blocks of the flattened output",
    ),
    ("4.1", lambda x, g, reps: _tile_backward(x, g, reps, reps_at_end=True), "1s in front"),
    ("4.1", lambda x, g, reps: _tile_backward(x, g, reps, promote_x=False), "longer than x.ndim"),
    (
        "4.1",
        lambda x, g, reps: _tile_backward(x, g, reps, keep_promoted=True),
        "reshape it to x.shape",
    ),
    ("4.1", _tile_int_reps_fails, "a single int"),
    ("4.2", lambda a, b, g: (g @ b, a.T @ g), "The shapes do not fit"),
    ("4.2", lambda a, b, g: (g @ b.T, a @ g), "dB needs A *transposed*"),
    ("4.3", lambda x, axis: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True), "Overflow"),
    ("4.3", lambda x, axis: stable_softmax(x, 0), "wrong axis"),
    ("4.4", lambda x, g, axis: g - stable_softmax(x, axis), "upstream gradients sum to 1"),
    (
        "4.4",
        lambda x, g, axis: -log_softmax_backward(x, g, axis),
        "sign is flipped",
    ),
    ("4.5", lambda f, x, h: _numerical_jacobian(f, x, h, forward=True), "forward difference"),
    ("4.5", lambda f, x, h: _numerical_jacobian(f, x, h, restore=False), "back to its old value"),
    ("4.5", lambda f, x, h: _numerical_jacobian(f, x, h, out_first=False), "wrong order"),
    ("5.1", lambda z, y: float(np.sum(z.argmax(axis=1) == y)), "count of correct rows"),
    ("5.1", lambda z, y: float(np.mean(z.argmax(axis=0) == y)), "along the classes"),
    ("5.2", lambda z, y: (cross_entropy(z, y)[0], cross_entropy(z, y)[1] * len(y)), "1/N"),
    ("5.2", _naive_cross_entropy, "log-sum-exp"),
    ("5.3", lambda p, g, v, lr, mu: (p - lr * g, mu * v + g), "plain SGD"),
    ("5.3", lambda p, g, v, lr, mu: (p - lr * v, mu * v + g), "*old* velocity"),
    ("5.4", lambda x, w, b, g: (x @ w + b, g @ w.T, x.T @ g, g.mean(axis=0)), "not the mean"),
    ("5.4", lambda x, w, b, g: (x @ w + b, g @ w, x.T @ g, g.sum(axis=0)), "shapes do not fit"),
    ("5.5", lambda *a: _train(*a, shuffle_targets=False), "targets are not"),
]


# --- the capstones: their right and wrong answers live in tests/test_capstones_*.py ---------

from test_capstones_bughunt import WRONG as _HUNT_WRONG  # noqa: E402
from test_capstones_bughunt import careful as _careful_hunt  # noqa: E402
from test_capstones_moons import SLIPS as _MOONS_SLIPS  # noqa: E402
from test_capstones_moons import right as _moons_right  # noqa: E402
from test_capstones_reverse import Right as _ReverseRight  # noqa: E402
from test_capstones_reverse import Transposed as _ReverseTransposed  # noqa: E402
from test_capstones_rules import Overwrites as _RulesOverwrite  # noqa: E402
from test_capstones_rules import Right as _RulesRight  # noqa: E402
from test_capstones_value import Assigns as _ValueAssigns  # noqa: E402
from test_capstones_value import Right as _ValueRight  # noqa: E402

RIGHT["2.5"] = _ReverseRight
RIGHT["3.6"] = _ValueRight
RIGHT["4.6"] = _RulesRight
RIGHT["4.7"] = _careful_hunt
RIGHT["5.6"] = _moons_right
WRONG.append(("2.5", _ReverseTransposed, "The Jacobian is transposed"))
WRONG.append(("3.6", _ValueAssigns, "`self.grad += ...`, not `self.grad = ...`"))
WRONG.append(("4.6", _RulesOverwrite, "np.add.at"))
WRONG.append(("4.7", *_HUNT_WRONG[0]))
WRONG.append(("5.6", *_MOONS_SLIPS[0]))


# --- the tests -------------------------------------------------------------------------------


def _course_exercises():
    return [e for e in registry.all_exercises() if e.chapter in CHAPTERS]


def test_every_chapter_has_at_least_four_exercises_and_every_one_is_solved_here():
    ids = [e.id for e in _course_exercises()]
    for chapter in CHAPTERS:
        assert sum(i.startswith(f"{chapter}.") for i in ids) >= 4, chapter
    assert sorted(ids) == sorted(RIGHT), "every exercise needs a right answer in this test"


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_scores_full_marks(exercise_id):
    for seed in (None, 7):  # the notebook's fixed cases, and the grader's other draws
        result = check(exercise_id, RIGHT[exercise_id], seed=seed, show=False)
        assert result.status == "passed", result.to_text()
        assert result.score == result.max_score > 0
        assert len(result.cases) >= 5  # random cases and edge cases
        assert result.hints == []


@pytest.mark.parametrize(
    ("exercise_id", "wrong", "hint"),
    WRONG,
    ids=[f"{e}-{h[:24]}" for e, _, h in WRONG],
)
def test_wrong_answer_loses_points_and_gets_the_right_hint(exercise_id, wrong, hint):
    for seed in (None, 7):
        result = check(exercise_id, wrong, seed=seed, show=False)
        assert result.score < result.max_score, result.to_text()
        assert result.status == "failed"
        assert any(hint in h for h in result.hints), result.to_text()


@pytest.mark.parametrize("odd", [None, "text", {}, [], [1.0], float("nan"), {"error": "X"}])
def test_mistake_detectors_never_raise_on_odd_answers(odd):
    for exercise in _course_exercises():
        case = exercise.cases(np.random.default_rng(3))[0]
        expected = exercise.reference(case.inputs)
        for mistake in exercise.mistakes:
            assert mistake.matches(odd, expected, case) in (True, False)


def test_every_exercise_has_a_wrong_answer_in_the_table():
    assert {e.id for e in _course_exercises()} <= {e for e, _, _ in WRONG}


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_hard_coded_answer_does_not_pass(exercise_id):
    """Answering every case with the first case's right answer must fail (random cases)."""
    exercise = registry.get(exercise_id)
    cases = exercise.cases(np.random.default_rng(0))
    first = exercise.run(RIGHT[exercise_id], cases[0].inputs)
    passed = sum(bool(exercise.compare(first, exercise.reference(c.inputs))) for c in cases)
    assert passed < len(cases)


def test_stub_is_not_attempted():
    def stub(*args):
        raise NotImplementedError("Exercise 4.2: matmul_backward")

    result = check("4.2", stub, show=False)
    assert result.status == "not attempted" and result.score == 0


def test_exercise_inputs_are_plain_data():
    from autodiff_lab.grading.plaindata import to_plain

    for exercise in _course_exercises():
        for case in exercise.cases(np.random.default_rng(1)):
            to_plain(case.inputs)  # raises for anything that cannot travel to a kernel
            to_plain(exercise.reference(case.inputs))


# --- references against PyTorch (float64) ----------------------------------------------------


def test_jacobian_closed_forms_match_torch(torch, rng):
    fns = {
        "x * sum(x)": lambda x: x * x.sum(),
        "sin(x) * x[0] + x": lambda x: torch.sin(x) * x[0] + x,
        "tanh(M @ x)": lambda x: torch.tanh(torch.tensor(ch01._MIX[: len(x), : len(x)]) @ x),
    }
    for name, fn in fns.items():
        x = rng.uniform(-1.5, 1.5, size=4)
        expected = torch.autograd.functional.jacobian(fn, torch.tensor(x)).numpy()
        for j in range(4):
            np.testing.assert_allclose(ch01._column_reference((name, list(x), j)), expected[:, j])


def test_backward_by_hand_reference_matches_torch(torch, rng):
    from autodiff_lab.grading.exercises import ch02

    for case in ch02.MANUAL.cases(rng):
        a, b, c = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in case.inputs)
        f = (a * b + c) * torch.tanh(a * b) * c
        f.backward()
        value, grads = ch02.MANUAL.reference(case.inputs)
        np.testing.assert_allclose(value, f.item(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(
            grads, [a.grad.item(), b.grad.item(), c.grad.item()], rtol=1e-12, atol=1e-15
        )


def test_directional_taylor_reference_matches_torch(torch, rng):
    """6.2's closed forms against PyTorch's nested autograd along the line x0 + t v."""
    from autodiff_lab.grading.exercises import ch06

    w = torch.tensor(ch06._W, dtype=torch.float64)
    fns = {
        "exp(w.x)": lambda x: torch.exp(w @ x),
        "sin(w.x)": lambda x: torch.sin(w @ x),
        "1/(1 - 0.2 w.x)": lambda x: 1 / (1 - 0.2 * (w @ x)),
        "x.x": lambda x: x @ x,
        "x[0]*x[1]": lambda x: x[0] * x[1],
    }
    for case in ch06.TAYLOR.cases(rng):
        name, x0, v, degree = case.inputs
        t = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
        y = fns[name](
            torch.tensor(x0, dtype=torch.float64) + t * torch.tensor(v, dtype=torch.float64)
        )
        derivatives = []
        for _ in range(degree + 1):
            derivatives.append(y.item())
            if not y.requires_grad:  # the rest are zero
                y = torch.zeros((), dtype=torch.float64)
                continue
            (y,) = torch.autograd.grad(y, t, create_graph=True)
        expected = [d / math.factorial(j) for j, d in enumerate(derivatives)]
        np.testing.assert_allclose(
            ch06.TAYLOR.reference(case.inputs), expected, rtol=1e-10, atol=1e-12
        )


def test_numerical_jacobian_reference_matches_torch(torch, rng):
    """4.5's reference (central differences) is within O(h²) of PyTorch's exact Jacobian."""
    fns = {
        "sum(x**3)": lambda x: (x**3).sum(),
        "softmax(x)": lambda x: torch.softmax(x, dim=0),
        "cumsum(x**2)": lambda x: torch.cumsum(x**2, dim=0),
        "tanh(x @ x.T)": lambda x: torch.tanh(x @ x.T),
        "x * sum(x)": lambda x: x * x.sum(),
        "sin(x)[:2] * x[-1]": lambda x: torch.sin(x)[:2] * x[-1],
    }
    for case in ch04.NUMERICAL_GRADIENT.cases(rng):
        name, x, h = case.inputs
        exact = torch.autograd.functional.jacobian(fns[name], torch.tensor(x, dtype=torch.float64))
        tolerance = 1e-6 if h < 1e-3 else 0.0  # cumsum(x**2) is quadratic: exact at any h
        np.testing.assert_allclose(
            ch04.NUMERICAL_GRADIENT.reference(case.inputs), exact.numpy(), atol=tolerance + 1e-8
        )


def test_pow_and_sigmoid_references_match_torch(torch):
    for a, b, g in [(0.7, -1.3, 0.4), (2.5, 2.0, -1.0)]:
        ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        (ta**tb * g).backward()
        _, grads = ch03._pow_reference((a, b, g))
        np.testing.assert_allclose(grads, [ta.grad.item(), tb.grad.item()])
    for x in (-30.0, -0.5, 3.0):
        tx = torch.tensor(x, requires_grad=True)
        torch.sigmoid(tx).backward()
        s, grad = ch03._sigmoid_reference((x, 1.0))
        np.testing.assert_allclose([s, grad], [torch.sigmoid(tx).item(), tx.grad.item()])


def test_tensor_references_match_torch(torch, rng):
    a, b, g = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (ta @ tb).backward(torch.tensor(g))
    da, db = ch04._matmul_reference((a, b, g))
    np.testing.assert_allclose(da, ta.grad.numpy())
    np.testing.assert_allclose(db, tb.grad.numpy())

    x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    for axis in (0, 1):
        tx = torch.tensor(x, requires_grad=True)
        torch.log_softmax(tx, dim=axis).backward(torch.tensor(g))
        np.testing.assert_allclose(ch04._logsm_reference((x, g, axis)), tx.grad.numpy())
        np.testing.assert_allclose(
            ch04._softmax_reference((x, axis)), torch.softmax(torch.tensor(x), dim=axis).numpy()
        )


def test_tile_reference_and_answer_match_torch(torch):
    """4.1: the grader's index-map reference and the one-reshape answer equal PyTorch's
    gradient of torch.tile (np.tile's semantics, short reps padded in front) and, when
    len(reps) >= x.ndim, of Tensor.repeat (np.tile's twin), on every case of many seeds."""
    cases = [c for seed in range(40) for c in ch04.TILE.cases(np.random.default_rng(seed))]
    shapes = set()
    for case in cases:
        x, g, reps = case.inputs
        x, g = np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)
        reps_tuple = (reps,) if np.ndim(reps) == 0 else tuple(reps)
        for by_repeat in (False, True) if len(reps_tuple) >= x.ndim else (False,):
            t = torch.tensor(x, requires_grad=True)
            out = t.repeat(*reps_tuple) if by_repeat else torch.tile(t, reps_tuple)
            assert tuple(out.shape) == g.shape == np.tile(x, reps).shape
            (out * torch.tensor(g)).sum().backward()
            np.testing.assert_allclose(ch04.TILE.reference(case.inputs), t.grad.numpy())
            np.testing.assert_allclose(tile_backward(x, g, reps), t.grad.numpy())
        shapes.add((x.ndim, len(reps_tuple)))
    # reps shorter than, as long as, and longer than x.ndim all occurred
    assert {(n > r) - (n < r) for n, r in shapes} == {-1, 0, 1}


def test_training_references_match_torch(torch, rng):
    logits, targets = rng.normal(size=(5, 4)) * 3, rng.integers(0, 4, size=5)
    tz = torch.tensor(logits, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(tz, torch.tensor(targets))
    loss.backward()
    ref_loss, ref_grad = ch05._ce_reference((logits, targets))
    np.testing.assert_allclose(ref_loss, loss.item())
    np.testing.assert_allclose(ref_grad, tz.grad.numpy())

    x, w, b, g = (rng.normal(size=s) for s in [(4, 3), (3, 2), (2,), (4, 2)])
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    y = tx @ tw + tb
    y.backward(torch.tensor(g))
    ref = ch05._linear_reference((x, w, b, g))
    for got, want in zip(ref, [y.detach(), tx.grad, tw.grad, tb.grad], strict=True):
        np.testing.assert_allclose(got, want.numpy())

    param, grads = rng.normal(size=3), [rng.normal(size=3) for _ in range(4)]
    tp = torch.tensor(param, requires_grad=True)
    opt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    for grad in grads:
        tp.grad = torch.tensor(grad)
        opt.step()
    np.testing.assert_allclose(ch05._momentum_reference((param, grads, 0.1, 0.9))[0], tp.detach())


# --- the solution notebooks ------------------------------------------------------------------

SOLUTIONS = {
    1: "01_forward_mode.ipynb",
    2: "02_reverse_mode.ipynb",
    3: "03_micrograd.ipynb",
    4: "04_tensors.ipynb",
    5: "05_training.ipynb",
}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solution_notebook_checks_every_exercise_with_full_marks(chapter):
    """The committed, executed solution notebook shows a full-marks scorecard per exercise."""
    path = ROOT / "solutions" / SOLUTIONS[chapter]
    nb = json.loads(path.read_text())
    texts = [
        "".join(out.get("data", {}).get("text/plain", "")) + "".join(out.get("text", ""))
        for cell in nb["cells"]
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
    ]
    sources = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for exercise in _course_exercises():
        if exercise.chapter != chapter:
            continue
        assert f"### BEGIN SOLUTION  # Exercise {exercise.id}" in sources
        card = next((t for t in texts if t.startswith(f"Exercise {exercise.id}:")), None)
        assert card is not None, f"no scorecard for {exercise.id} in {path.name}"
        assert "PASSED" in card.splitlines()[0], card


# --- levels, minutes and the one title --------------------------------------------------------


def _the_course() -> list:
    """The course's exercises (chapters 01–08), not the ones other tests register."""
    return [e for e in registry.all_exercises() if 1 <= e.chapter <= 8]


def _solution_headings() -> dict[str, str]:
    """Exercise id -> its '## Exercise N.M — …' heading line in solutions/ (backticks dropped)."""
    headings: dict[str, str] = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("## Exercise "):
                    exercise_id = line.split()[2]
                    assert exercise_id not in headings, f"two headings for {exercise_id}"
                    headings[exercise_id] = line.replace("`", "")
    return headings


def test_every_exercise_heading_in_solutions_shows_its_registry_title_level_and_minutes():
    headings = _solution_headings()
    exercises = _the_course()
    assert sorted(headings) == sorted(e.id for e in exercises)
    for exercise in exercises:
        heading = headings[exercise.id]
        assert heading == f"## Exercise {exercise.id} — {exercise.heading}", heading
        assert exercise.title in heading and exercise.level in heading
        assert f"about {exercise.minutes} minutes" in heading


def test_every_exercise_has_a_level_and_a_time_and_hard_means_capstone():
    for exercise in _the_course():
        assert exercise.level in ("trivial", "easy", "medium", "hard"), exercise.id
        assert 0 < exercise.minutes <= 90, exercise.id
        assert ("capstone" in exercise.label) == (exercise.level == "hard"), exercise.id


def test_every_chapter_ends_with_a_medium_or_hard_exercise():
    by_chapter: dict[int, list] = {}
    for exercise in _the_course():
        by_chapter.setdefault(exercise.chapter, []).append(exercise)
    assert sorted(by_chapter) == [1, 2, 3, 4, 5, 6, 7, 8]
    for chapter, exercises in by_chapter.items():
        last = max(exercises, key=lambda e: e.sort_key)
        assert last.level in ("medium", "hard"), (chapter, last.id, last.level)


def test_the_scorecard_title_is_the_registry_heading():
    result = check("1.1", dual_mul, show=False)
    assert (
        result.title
        == registry.get("1.1").heading
        == ("Multiply two dual numbers (trivial · about 5 minutes)")
    )
    assert "trivial · about 5 minutes" in result.to_text()


def test_every_stored_scorecard_title_is_the_registry_heading():
    """Stored scorecards (solutions/ and the start page) show the spec's one heading, as the
    notebook headings do: no title written twice that could drift apart."""
    paths = [*sorted((ROOT / "solutions").glob("*.ipynb")), ROOT / "notebooks/00_start_here.ipynb"]
    titles: list[tuple[str, str]] = []
    for path in paths:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for out in cell.get("outputs", []):
                text = out.get("data", {}).get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                found = re.match(r"Exercise (\d+\.\d+): (.*) — [A-Z ]+ \(", text)
                if found:
                    titles.append((found.group(1), found.group(2)))
    assert len({eid for eid, _ in titles}) >= 30  # every course exercise's scorecard
    for exercise_id, title in titles:
        assert title == registry.get(exercise_id).heading, (exercise_id, title)
