"""Chapter 07 exercises: right answers get full marks, a stub is "not attempted", plausible
wrong answers lose points with the hint naming the mistake; the numpy references agree with
PyTorch; the solutions notebook shows full marks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import assert_solutions_score_full_marks

from autodiff_lab import Tensor, checkpoint, custom_jvp, custom_vjp, exp, log, ops, optim, sqrt
from autodiff_lab.grading import check
from autodiff_lab.grading.exercises import ch07

ROOT = Path(__file__).resolve().parent.parent


# --- right answers ------------------------------------------------------------------------


def where(condition, a, b):
    mask = np.asarray(condition, dtype=float)
    return mask * a + (1 - mask) * b


def safe_norm(x):
    s = (x * x).sum()
    safe = where(s.data > 0, s, 1.0)
    return where(s.data > 0, sqrt(safe), 0.0)


def make_logsumexp(*, stable_forward=True, rule="stable"):
    """7.2's answer (a custom_jvp) with one slip switched on: the forward, or the rule
    ("naive" softmax, "vector" tangent not summed, "no t" ignores the tangent, "unnormalised")."""

    @custom_jvp
    def logsumexp(x):
        if not stable_forward:
            return log(exp(x).sum())
        m = ops.max(x)
        return m + log(exp(x - m).sum())

    def jvp_rule(primals, tangents):
        (x,), (t,) = primals, tangents
        out = logsumexp(x)
        softmax = exp(x - out) if rule != "naive" else exp(x) / exp(x).sum()
        if rule == "vector":
            return out, softmax * t
        if rule == "no t":
            return out, softmax.sum()
        if rule == "unnormalised":
            return out, (exp(x - ops.max(x)) * t).sum()
        return out, (softmax * t).sum()

    logsumexp.defjvp(jvp_rule)
    return logsumexp


def chapter_logsumexp_vjp():
    """The chapter's cell: logsumexp with its *vjp* rule (what 7.2 asked before)."""

    @custom_vjp
    def logsumexp(x):
        m = ops.max(x)
        return m + log(exp(x - m).sum())

    def fwd(x):
        out = logsumexp(x)
        return out, (x, out)

    logsumexp.defvjp(fwd, lambda res, g: (g * exp(res[0] - res[1]),))
    return logsumexp


def _run(step, h, m):
    for _ in range(m):
        h = step(h)
    return h


def chain_gradient(step, x, n, segments=None):
    k = segments or max(1, round(math.sqrt(n)))
    size = math.ceil(n / k)
    lengths = [min(size, n - s) for s in range(0, n, size)]
    leaf = h = Tensor(x, requires_grad=True)
    for m in lengths[:-1]:
        h = checkpoint(lambda h, m=m: _run(step, h, m))(h)
    _run(step, h, lengths[-1]).sum().backward()
    return leaf.grad


def chain_nested(step, x, n):
    """7.3's answer: the first half of every run is a checkpoint, run the same way."""

    def run(h, m):
        if m == 1:
            return step(h)
        half = m // 2
        h = checkpoint(lambda h: run(h, half))(h)
        return run(h, m - half)

    leaf = Tensor(x, requires_grad=True)
    run(leaf, n).sum().backward()
    return leaf.grad


def clipped_step(
    model, optimizer, X, y, max_norm, *, zero=True, clip="norm", report="before", guard=True
):
    if zero:
        optimizer.zero_grad()
    loss = ((model(Tensor(X)) - y) ** 2).mean()
    loss.backward()
    before = optim.clip_grad_norm_(model.parameters(), math.inf)  # measures, clips nothing
    if clip == "norm":
        optim.clip_grad_norm_(model.parameters(), max_norm)
    elif clip == "value":
        optim.clip_grad_value_(model.parameters(), max_norm)
    after = math.sqrt(sum(float(np.sum(p.grad**2)) for p in model.parameters()))
    if math.isfinite(before) or not guard:
        optimizer.step()
    return before if report == "before" else after


def chapter_clipped_step(model, optimizer, X, y, max_norm):
    """The chapter's training step (its `train` cell), given 7.4's signature: no guard."""
    optimizer.zero_grad()
    loss = ((model(Tensor(X)) - y) ** 2).mean()
    loss.backward()
    norm = optim.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return norm


def loss_guarded_step(model, optimizer, X, y, max_norm):
    """Another right answer: the guard looks at the loss (error_if_nonfinite is not used)."""
    optimizer.zero_grad()
    loss = ((model(Tensor(X)) - y) ** 2).mean()
    loss.backward()
    norm = optim.clip_grad_norm_(model.parameters(), max_norm)
    if np.isfinite(loss.item()):
        optimizer.step()
    return norm


RIGHT = {
    "7.1": safe_norm,
    "7.2": make_logsumexp(),
    "7.3": chain_nested,
    "7.4": clipped_step,
}
OTHER_RIGHT = {"7.4": loss_guarded_step}


# --- plausible wrong answers ----------------------------------------------------------------


def naive_norm(x):
    return sqrt((x * x).sum())


def norm_select_after(x):  # the single where: NaN at 0
    s = (x * x).sum()
    return where(s.data > 0, sqrt(s), 0.0)


def norm_leaky(x):  # forgot the second where: the value at 0 is sqrt(1) = 1
    s = (x * x).sum()
    return sqrt(where(s.data > 0, s, 1.0))


def norm_epsilon(x):
    return sqrt((x * x).sum() + 1e-12)


def norm_numpy(x):  # no graph: the gradient never reaches x
    return Tensor(np.sqrt(np.sum(x.data * x.data)))


def lse_composed(x):  # right numbers, but every operation recorded
    m = ops.max(x)
    return m + log(exp(x - m).sum())


def chain_plain(step, x, n):
    leaf = Tensor(x, requires_grad=True)
    _run(step, leaf, n).sum().backward()
    return leaf.grad


WRONG = [
    ("7.1", naive_norm, "NaN in the gradient"),
    ("7.1", norm_select_after, "NaN in the gradient"),
    ("7.1", norm_leaky, "the safe input leaked"),
    ("7.1", norm_epsilon, "An epsilon under the square root"),
    ("7.1", norm_numpy, "No gradient reached x"),
    ("7.2", make_logsumexp(stable_forward=False), "The value overflows"),
    ("7.2", make_logsumexp(rule="naive"), "the tangent has NaN or inf"),
    ("7.2", make_logsumexp(rule="vector"), "not the vector"),
    ("7.2", make_logsumexp(rule="no t"), "ignores the tangent"),
    ("7.2", make_logsumexp(rule="unnormalised"), "misses the normalisation"),
    ("7.2", chapter_logsumexp_vjp(), "must be a @custom_jvp"),
    ("7.2", lse_composed, "must be a @custom_jvp"),
    ("7.3", chain_plain, "over budget"),
    ("7.3", chain_gradient, "over budget"),  # the chapter's single level of sqrt(n) segments
    ("7.3", lambda step, x, n: chain_gradient(step, x, n, segments=min(n, 2)), "over budget"),
    ("7.4", lambda *a: clipped_step(*a, clip="none"), "No clipping took effect"),
    ("7.4", lambda *a: clipped_step(*a, zero=False), "never zeroed"),
    ("7.4", lambda *a: clipped_step(*a, clip="value"), "That is clip_grad_value_"),
    ("7.4", lambda *a: clipped_step(*a, report="after"), "after clipping"),
    ("7.4", lambda *a: clipped_step(*a, guard=False), "poisoned batch"),
    ("7.4", chapter_clipped_step, "poisoned batch"),
]


def test_chapter_07_has_four_exercises_all_answered_here_and_ends_medium_or_hard():
    ids = [e.id for e in ch07.EXERCISES]
    assert len(ids) >= 4 and sorted(ids) == sorted(RIGHT)
    assert ch07.EXERCISES[-1].level in ("medium", "hard")
    assert {e.id for e in ch07.EXERCISES} <= {e for e, _, _ in WRONG}


@pytest.mark.parametrize(
    ("exercise_id", "right"), [*RIGHT.items(), *OTHER_RIGHT.items()], ids=lambda v: str(v)[:12]
)
def test_right_answer_scores_full_marks(exercise_id, right):
    for seed in (None, 7):  # the notebook's fixed cases, and the grader's other draws
        result = check(exercise_id, right, seed=seed, show=False)
        assert result.status == "passed", result.to_text()
        assert result.score == result.max_score > 0 and len(result.cases) >= 5
        assert result.hints == []


@pytest.mark.parametrize(
    ("exercise_id", "wrong", "hint"), WRONG, ids=[f"{e}-{h[:24]}" for e, _, h in WRONG]
)
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


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_hard_coded_answer_does_not_pass(exercise_id):
    exercise = next(e for e in ch07.EXERCISES if e.id == exercise_id)
    cases = exercise.cases(np.random.default_rng(0))
    first = exercise.run(RIGHT[exercise_id], cases[0].inputs)
    passed = sum(bool(exercise.compare(first, exercise.reference(c.inputs))) for c in cases)
    assert passed < len(cases)


@pytest.mark.parametrize("odd", [None, "text", {}, [], [1.0], float("nan"), {"error": "X"}])
def test_mistake_detectors_never_raise_on_odd_answers(odd):
    for exercise in ch07.EXERCISES:
        case = exercise.cases(np.random.default_rng(3))[0]
        expected = exercise.reference(case.inputs)
        for mistake in exercise.mistakes:
            assert mistake.matches(odd, expected, case) in (True, False)


def test_memory_budget_separates_nested_checkpoints_from_one_level_and_plain_backprop():
    """Measured in the runner (tracemalloc): bisection within budget on the longest chains;
    the chapter's one level of k segments over it at n = 1024 for every k from 10 to 75
    (the claim of MEMORY_BUDGET's docstring), plain backprop far over it."""
    from autodiff_lab.grading.runners.ch07 import _chain_run

    x = np.linspace(-1, 1, ch07.WIDTH).tolist()
    for n in (1024, 2048):
        budget = ch07.MEMORY_BUDGET(n)
        nested = _chain_run(chain_nested, ("0.9 tanh(h) + 0.1", x, n))["peak_arrays"]
        assert nested < 0.9 * budget, (n, nested, budget)
    n, budget = 1024, ch07.MEMORY_BUDGET(1024)
    plain = _chain_run(chain_plain, ("0.9 tanh(h) + 0.1", x, n))["peak_arrays"]
    assert plain > 10 * budget
    for k in range(10, 76, 5):
        one_level = _chain_run(
            lambda step, x, n, k=k: chain_gradient(step, x, n, segments=k),
            ("0.9 tanh(h) + 0.1", x, n),
        )["peak_arrays"]
        assert one_level > budget, (k, one_level, budget)


# --- the references against PyTorch ---------------------------------------------------------


def test_norm_and_logsumexp_references_match_torch(torch):
    x = np.array([0.3, -1.2, 2.0])
    t = torch.tensor(x, requires_grad=True)
    torch.linalg.vector_norm(t).backward()
    expected = ch07._norm_reference((x.tolist(),))
    np.testing.assert_allclose(expected["grad"], t.grad.numpy(), rtol=1e-12)
    assert expected["value"] == pytest.approx(float(np.linalg.norm(x)), rel=1e-14)
    cases = [
        ([1000.0, 999.0, -1000.0], 2.0, [0.5, -1.0, 3.0]),
        ([0.5, -0.3, 1.7, 0.0], 1.5, [1, 2, 0, -1]),
    ]
    for values, scale, tangent in cases:
        t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        out = torch.logsumexp(t, 0)
        (scale * out).backward()
        ref = ch07._lse_reference((values, scale, tangent))
        assert ref["value"] == pytest.approx(out.item(), rel=1e-14)
        np.testing.assert_allclose(ref["grad"], t.grad.numpy(), rtol=1e-12, atol=1e-300)
        _, pushed = torch.func.jvp(
            lambda v: torch.logsumexp(v, 0),
            (torch.tensor(values, dtype=torch.float64),),
            (torch.tensor(tangent, dtype=torch.float64),),
        )
        assert ref["tangent"] == pytest.approx(pushed.item(), rel=1e-12)


def test_chain_reference_matches_torch(torch):
    x = np.linspace(-2, 2, 7)
    steps = {
        "0.9 tanh(h) + 0.1": lambda h: 0.9 * torch.tanh(h) + 0.1,
        "h + 0.1 sin(h)": lambda h: h + 0.1 * torch.sin(h),
    }
    for name, step in steps.items():
        t = torch.tensor(x, requires_grad=True)
        h = t
        for _ in range(50):
            h = step(h)
        h.sum().backward()
        np.testing.assert_allclose(ch07._chain_gradient(name, x, 50), t.grad.numpy(), rtol=1e-12)


def test_training_reference_matches_torch_with_clip_grad_norm(torch):
    case = ch07.CLIPPED.cases(np.random.default_rng(1))[0]
    W1, b1, W2, b2, X, y, lr, max_norm, steps, poisoned = case.inputs
    assert poisoned  # a step of this run has an infinite target
    params = [torch.tensor(np.array(p, dtype=np.float64), requires_grad=True)
              for p in (W1, b1, W2, b2)]  # fmt: skip
    X, y = torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    bad = y.clone()
    bad[0, 0] = math.inf
    opt = torch.optim.SGD(params, lr=lr)
    norms = []
    for k in range(steps):
        opt.zero_grad()
        out = torch.tanh(X @ params[0] + params[1]) @ params[2] + params[3]
        ((out - (bad if k in poisoned else y)) ** 2).mean().backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        norms.append(norm if math.isfinite(norm) else math.inf)
        if math.isfinite(norm):  # the guard: a poisoned batch changes no weight
            opt.step()
    ref = ch07.train_reference(case.inputs)
    np.testing.assert_allclose(ref["norms"], norms, rtol=1e-9)
    final = np.concatenate([p.detach().numpy().ravel() for p in params])
    np.testing.assert_allclose(ref["params"], final, rtol=1e-9, atol=1e-12)
    unclipped = ch07.train_reference(case.inputs, clip="none")
    assert unclipped["norms"][-1] > 1e6 * unclipped["norms"][0]  # the planted run explodes


# --- the solutions notebook -----------------------------------------------------------------


def test_solution_notebook_shows_full_marks_for_every_exercise():
    assert_solutions_score_full_marks(
        ROOT / "solutions" / "07_memory_and_control.ipynb", ch07.EXERCISES
    )


def test_the_chapters_checkpointing_adapted_to_the_task_scores_under_half():
    """7.3 is a variant: the chapter's two ways (no_grad + backward(g) by hand, and
    checkpoint() per segment), given 7.3's signature and sqrt(n) segments, fit only the
    one-step case's budget."""
    from autodiff_lab import no_grad

    def by_hand(step, x, n):
        k = max(1, round(math.sqrt(n)))
        size = math.ceil(n / k)
        lengths = [min(size, n - s) for s in range(0, n, size)]
        boundaries = [x]
        with no_grad():
            h = Tensor(x)
            for m in lengths[:-1]:
                h = _run(step, h, m)
                boundaries.append(h.data)
        leaf = Tensor(boundaries[-1], requires_grad=True)
        _run(step, leaf, lengths[-1]).sum().backward()
        g = leaf.grad
        for start, m in zip(reversed(boundaries[:-1]), reversed(lengths[:-1])):
            leaf = Tensor(start, requires_grad=True)
            _run(step, leaf, m).backward(g)
            g = leaf.grad
        return g

    for adapted in (by_hand, chain_gradient):
        result = check("7.3", adapted, show=False)
        assert result.score < result.max_score / 2, result.to_text()
        assert any("over budget" in h for h in result.hints), result.to_text()


def test_the_chapters_training_step_adapted_to_7_4_scores_under_half():
    """7.4 is a variant: the chapter's clipped step (its `train` cell) has no guard, so the
    first poisoned batch makes every weight NaN; only the clean run's case is left."""
    result = check("7.4", chapter_clipped_step, show=False)
    assert result.score < result.max_score / 2, result.to_text()
    assert any("poisoned batch" in h for h in result.hints), result.to_text()


def test_the_nan_of_exercise_7_1_comes_from_inf_times_zero_in_x_times_x():
    """The text's account: sqrt's rule at 0 sends ∞ to the sum and to every x_i·x_i, and
    x * x's rule multiplies ∞ by x_i = 0 (the NaN is made there, not in sqrt)."""
    x = Tensor(np.zeros(3), requires_grad=True)
    squares = x * x
    total = squares.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        sqrt(total).backward()
    assert np.isposinf(total.grad) and np.all(np.isposinf(squares.grad))
    assert np.all(np.isnan(x.grad))
    with np.errstate(invalid="ignore"):
        assert np.all(np.isnan(np.inf * np.zeros(3)))  # the product x * x's rule forms
    text = (ROOT / "solutions" / "07_memory_and_control.ipynb").read_text()
    assert "rule multiplies it by $x_i = 0$" in text and "times a gradient of 0" not in text
