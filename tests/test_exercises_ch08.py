"""Chapter 08 exercises: right answers get full marks, stubs are "not attempted", and
plausible wrong answers lose points with the hint that names their mistake.

The references are independent of the engine: 8.1's gradients are written out by hand
(and checked here against finite differences and PyTorch), 8.2's is a Python loop over
the examples, 8.3's builds each Jacobian block by running the program on unit vectors
(checked here against a dense matrix written out by hand).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import assert_solutions_score_full_marks

from autodiff_lab.functional import grad
from autodiff_lab.grading import check
from autodiff_lab.grading.exercises import ch08
from autodiff_lab.grading.runners.ch08 import lines_run, mlp_loss

ROOT = Path(__file__).resolve().parent.parent


# --- right answers ---------------------------------------------------------------------------


def norms_by_loop(loss, theta, X, Y, *, argnums=0, reduce=np.linalg.norm):
    return np.array([reduce(grad(loss, argnums)(theta, x, y)) for x, y in zip(X, Y)])


def sum_batch_rule(x, bdim, axis):
    moved = np.moveaxis(x, bdim, 0)  # batch first: example axis a is axis a + 1
    if axis is None:
        return moved.reshape(moved.shape[0], -1).sum(axis=1), 0
    return moved.sum(axis=axis % (moved.ndim - 1) + 1), 0


def sum_batch_rule_in_place(x, bdim, axis):
    """Another right rule: leave the batch axis where it is and shift the summed one."""
    if axis is None:
        return x.sum(axis=tuple(a for a in range(x.ndim) if a != bdim)), 0
    a = axis % (x.ndim - 1)
    a = a + 1 if a >= bdim else a
    return x.sum(axis=a), bdim if a > bdim else bdim - 1


def transpose_program(program, input_sizes, ct, *, fault=""):
    return ch08.faulty_transpose(program, input_sizes, ct, fault=fault)


def transpose_by_hand(program, input_sizes, ct):
    """A student-style transposer: a dict of cotangents, the program walked backwards."""
    sizes = dict(input_sizes)
    for op, out, *args in program:
        if op == "matvec":
            sizes[out] = len(args[0])
        elif op == "slice":
            sizes[out] = args[2] - args[1]
        else:
            sizes[out] = sizes[args[0]]
    cts = {program[-1][1]: np.asarray(ct, float)}

    def add(name, value):
        cts[name] = cts.get(name, 0) + value

    for op, out, *args in reversed(program):
        g = cts.pop(out, np.zeros(sizes[out]))
        if op == "scale":
            add(args[0], args[1] * g)
        elif op in ("add", "sub"):
            add(args[0], g)
            add(args[1], g if op == "add" else -g)
        elif op == "neg":
            add(args[0], -g)
        elif op == "matvec":
            add(args[1], np.asarray(args[0]).T @ g)
        else:
            a, start, stop = args
            full = np.zeros(sizes[a])
            full[start:stop] = g
            add(a, full)
    return {name: cts.get(name, np.zeros(n)) for name, n in input_sizes.items()}


RIGHT = {
    "8.1": norms_by_loop,
    "8.2": sum_batch_rule,
    "8.3": transpose_by_hand,
}


# --- wrong answers, each with the hint it must get ---------------------------------------------


def _mean_gradient_norm(loss, theta, X, Y):
    mean = np.mean([grad(loss)(theta, x, y) for x, y in zip(X, Y)], axis=0)
    return np.full(len(X), np.linalg.norm(mean))


def _missing_unused(program, input_sizes, ct):
    got = transpose_by_hand(program, input_sizes, ct)
    read = {a for _, _, *args in program for a in args if isinstance(a, str)}
    return {k: v for k, v in got.items() if k in read}


WRONG = [
    ("8.1", _mean_gradient_norm, "the same number"),
    ("8.1", lambda *a: norms_by_loop(*a, reduce=lambda g: float(g @ g)), "squared norms"),
    ("8.1", lambda *a: norms_by_loop(*a) / len(a[2]), "divided by the batch size"),
    ("8.1", lambda *a: norms_by_loop(*a, argnums=1), "with respect to the inputs"),
    ("8.2", ch08._no_shift, "used as an axis of the batched array"),
    ("8.2", ch08._no_shift_bdim_kept, "used as an axis of the batched array"),
    ("8.2", ch08._bdim_kept, "out_bdim is off by one"),
    ("8.2", ch08._negative_not_normalised, "A negative axis"),
    ("8.2", ch08._none_sums_batch, "axis=None sums every axis of one example"),
    ("8.3", lambda *a: transpose_program(*a, fault="overwrite"), "add into the cotangent"),
    ("8.3", lambda *a: transpose_program(*a, fault="forward"), "walked first to last"),
    ("8.3", lambda *a: transpose_program(*a, fault="matvec"), "M.T @ ct"),
    ("8.3", lambda *a: transpose_program(*a, fault="sub"), "sign of b"),
    ("8.3", lambda *a: transpose_program(*a, fault="slice"), "transpose of a slice"),
    ("8.3", _missing_unused, "zeros for an input"),
]


def test_chapter_08_has_three_exercises_all_answered_here_and_ends_medium():
    ids = [e.id for e in ch08.EXERCISES]
    assert ids == sorted(RIGHT)
    assert ch08.EXERCISES[-1].level in ("medium", "hard")


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_scores_full_marks(exercise_id):
    result = check(exercise_id, RIGHT[exercise_id], show=False)
    assert result.status == "passed", result.to_text()
    assert result.score == result.max_score > 0 and len(result.cases) >= 8
    assert result.hints == []


def test_a_second_right_batching_rule_also_scores_full_marks():
    result = check("8.2", sum_batch_rule_in_place, show=False)
    assert result.status == "passed", result.to_text()


def test_the_graders_own_transposer_without_a_fault_scores_full_marks():
    result = check("8.3", transpose_program, show=False)
    assert result.status == "passed", result.to_text()


@pytest.mark.parametrize(("exercise_id", "wrong", "hint"), WRONG, ids=[h for _, _, h in WRONG])
def test_wrong_answer_loses_points_and_gets_the_right_hint(exercise_id, wrong, hint):
    result = check(exercise_id, wrong, show=False)
    assert result.status == "failed" and result.score < result.max_score, result.to_text()
    assert any(hint in h for h in result.hints), result.to_text()


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_stub_is_not_attempted(exercise_id):
    def stub(*args):
        raise NotImplementedError(f"Exercise {exercise_id}")

    result = check(exercise_id, stub, show=False)
    assert result.status == "not attempted" and result.score == 0


@pytest.mark.parametrize("exercise", ch08.EXERCISES, ids=lambda e: e.id)
def test_hard_coded_answer_does_not_pass(exercise):
    cases = exercise.cases(np.random.default_rng(0))
    first = exercise.run(RIGHT[exercise.id], cases[0].inputs)
    passed = sum(bool(exercise.compare(first, exercise.reference(c.inputs))) for c in cases)
    assert passed <= 1


# --- the references are right ----------------------------------------------------------------


def test_hand_written_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    d, h, n = 3, 4, 5
    theta, X, Y = rng.normal(size=h * d + 2 * h + 1), rng.normal(size=(n, d)), rng.normal(size=n)
    grads, grads_x = ch08.mlp_gradients(theta, X, Y)
    eps = 1e-6
    for i in range(n):
        for j in range(theta.size):
            e = np.zeros(theta.size)
            e[j] = eps
            fd = (mlp_loss(theta + e, X[i], Y[i]) - mlp_loss(theta - e, X[i], Y[i])) / (2 * eps)
            assert grads[i, j] == pytest.approx(fd, rel=1e-6, abs=1e-8)
        for j in range(d):
            e = np.zeros(d)
            e[j] = eps
            fd = (mlp_loss(theta, X[i] + e, Y[i]) - mlp_loss(theta, X[i] - e, Y[i])) / (2 * eps)
            assert grads_x[i, j] == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_hand_written_gradients_match_torch_func_per_example_gradients():
    torch = pytest.importorskip("torch")
    from torch.func import grad as tgrad
    from torch.func import vmap as tvmap

    rng = np.random.default_rng(4)
    d, h, n = 2, 3, 6
    theta, X, Y = rng.normal(size=h * d + 2 * h + 1), rng.normal(size=(n, d)), rng.normal(size=n)

    def loss(t, x, y):
        W1, b1 = t[: h * d].reshape(h, d), t[h * d : h * d + h]
        w2, b2 = t[h * d + h : h * d + 2 * h], t[-1]
        return 0.5 * ((w2 * torch.tanh(W1 @ x + b1)).sum() + b2 - y) ** 2

    expected = tvmap(tgrad(loss), in_dims=(None, 0, 0))(*map(torch.tensor, (theta, X, Y)))
    np.testing.assert_allclose(ch08.mlp_gradients(theta, X, Y)[0], expected.numpy(), rtol=1e-12)


def test_batch_sum_reference_by_hand():
    x = np.arange(24.0).reshape(2, 3, 4)
    # batch axis 1 (3 examples of shape (2, 4)), example axis -1: example i is x[:, i, :]
    got = ch08._batch_sum_reference((x, 1, -1))
    assert got["shape"] == [3, 2]
    assert got["values"] == [[6.0, 54.0], [22.0, 70.0], [38.0, 86.0]]


def test_transpose_reference_is_the_transposed_matrix_by_hand():
    # out = 2*(M x0) - x1[0:2]  with M = [[1, 2], [3, 4]]:  J0 = 2M,  J1 = -[I 0]
    program = [
        ["matvec", "v0", [[1.0, 2.0], [3.0, 4.0]], "x0"],
        ["scale", "v1", "v0", 2.0],
        ["slice", "v2", "x1", 0, 2],
        ["sub", "out", "v1", "v2"],
    ]
    got = ch08.transpose_reference((program, {"x0": 2, "x1": 3}, [1.0, -1.0]))
    assert got == {"x0": [-4.0, -4.0], "x1": [-1.0, 1.0, 0.0]}


def test_random_programs_reuse_values_and_mix_every_instruction():
    rng = np.random.default_rng(0)
    ops, reused = set(), 0
    for _ in range(30):
        program, sizes, m = ch08.random_program(rng, 2, 6)
        ops |= {ins[0] for ins in program}
        reads = [a for _, _, *args in program for a in args if isinstance(a, str)]
        reused += len(reads) > len(set(reads))
        x = {k: rng.normal(size=n) for k, n in sizes.items()}
        assert ch08.run_program(program, x).shape == (m,)
    assert ops == {"scale", "add", "sub", "neg", "matvec", "slice"}
    assert reused >= 20


def test_solution_notebook_shows_full_marks_for_every_exercise():
    assert_solutions_score_full_marks(
        ROOT / "solutions" / "08_transformations.ipynb", ch08.EXERCISES
    )


def test_batch_sum_reference_agrees_with_the_librarys_vmap_on_every_case():
    """The loop reference and the engine's batching rule (vmap with the case's batch axis)."""
    from autodiff_lab import Tensor
    from autodiff_lab.functional import vmap

    for case in ch08.BATCH_SUM.cases(np.random.default_rng(7)):
        x, bdim, axis = case.inputs
        got = vmap(lambda e, axis=axis: e.sum(axis=axis), in_axes=bdim)(Tensor(np.asarray(x)))
        expected = ch08._batch_sum_reference(case.inputs)
        np.testing.assert_allclose(got.data, expected["values"], rtol=1e-14, err_msg=case.name)


def _program_as_function(program, names):
    """The linear program as a Python function of its inputs (for the library's transpose)."""

    def f(*xs):
        env = dict(zip(names, xs, strict=True))
        for op, out, *args in program:
            if op == "scale":
                env[out] = args[1] * env[args[0]]
            elif op in ("add", "sub"):
                a, b = env[args[0]], env[args[1]]
                env[out] = a + b if op == "add" else a - b
            elif op == "neg":
                env[out] = -env[args[0]]
            elif op == "matvec":
                env[out] = np.asarray(args[0]) @ env[args[1]]
            else:
                env[out] = env[args[0]][args[1] : args[2]]
        return env[program[-1][1]]

    return f


def test_transpose_reference_agrees_with_the_librarys_linear_transpose():
    from autodiff_lab.functional import linear_transpose

    for case in ch08.TRANSPOSE.cases(np.random.default_rng(11)):
        program, sizes, ct = case.inputs
        names = list(sizes)
        f = _program_as_function(program, names)
        got = linear_transpose(f, *(np.zeros(sizes[n]) for n in names))(np.asarray(ct, float))
        expected = ch08.transpose_reference(case.inputs)
        for name, g in zip(names, got, strict=True):
            np.testing.assert_allclose(g, expected[name], rtol=1e-12, atol=1e-12)


def _garbage_that_runs_python_when_collected(n=50):
    """Reference cycles holding suspended generators: collecting one closes its generator,
    which runs the lines of its ``finally`` clause."""

    def suspended():
        try:
            yield 1
        finally:
            closed = True  # noqa: F841  (a line the collector runs)

    for _ in range(n):
        generator = suspended()
        next(generator)
        cycle = [generator]
        cycle.append(cycle)


def test_the_loop_probe_counts_only_the_rules_own_lines():
    """8.2's loop probe counts the Python lines a rule runs. A collection during the count
    once finalized other code's garbage and a right answer was marked as looping."""

    def rule_that_allocates():  # enough containers for the collector to run, were it on
        return len([[] for _ in range(20_000)])

    _, clean = lines_run(rule_that_allocates)
    _garbage_that_runs_python_when_collected()
    _, with_garbage = lines_run(rule_that_allocates)
    assert with_garbage == clean
