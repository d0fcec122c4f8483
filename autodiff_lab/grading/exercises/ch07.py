"""Chapter 07 exercises: memory and control of gradients.

7.1 a norm whose gradient is finite at 0 (the double-``where`` fix), 7.2 a stable
``logsumexp`` as a custom jvp (graded on inputs where the naive rule overflows), 7.3 the
gradient of a long chain under a memory budget (checkpointing; the student's process
measures its peak memory with ``tracemalloc``), 7.4 a planted exploding training run, tamed
by clipping the gradient norm, whose step is skipped when a poisoned batch makes the
gradient non-finite (the chapter's training loop clips but has no such guard: pasted, it
turns every weight into NaN at the first poisoned batch).

7.3 is a variant the chapter did not write: the chapter splits the chain into about √n
segments (memory that grows like √n); the budget here grows like log n, which no segment
count from 10 to 75 meets at n = 1024 (measured): it takes checkpoints nested inside
checkpoints (recursive bisection, or several levels).

References are closed forms and plain numpy (never the engine): the norm and its gradient,
the stable log-sum-exp and the softmax, the chain rule of an elementwise chain as a product
of local derivatives, and the two-layer network's training written out by hand.

Trust note for 7.3: the peak memory is measured in the student's process (the only place it
can be), so a student who edits the runner could report any number; the gradient is still
judged here. The short ways of lying (stopping, clearing or resetting tracemalloc, patching
its functions or ``round``, running the chain in a forked child) give no reading, which
scores nothing (:mod:`autodiff_lab.grading.runners.ch07`; tests/test_grading_attacks_new.py).
"""

from __future__ import annotations

import math

import numpy as np

from ..runners.ch07 import (
    _chain_run,
    _clipped_run,
    _logsumexp_run,
    _safe_norm_run,
    finite_or_inf,
    poisoned_targets,
)
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, finite, is_error

__all__ = ["EXERCISES", "MEMORY_BUDGET", "train_reference"]


# --- 7.1 a norm whose gradient is finite at 0 -------------------------------------------------


def _norm_cases(rng):
    cases = []
    for _ in range(5):
        size = int(rng.integers(2, 6))
        x = [draw(rng, -3.0, 3.0) for _ in range(size)]
        cases.append(Case(f"random: x = {x}", (x,)))
    cases += [
        Case("edge: x = 0 (three zeros)", ([0.0, 0.0, 0.0],)),
        Case("edge: x = 0 (one zero)", ([0.0],)),
        Case("edge: one non-zero entry", ([0.0, -2.5, 0.0],)),
        Case("edge: large entries", ([3.0e5, -4.0e5],)),
    ]
    return cases


def _norm_reference(inputs):
    x = np.array(inputs[0], dtype=np.float64)
    norm = float(np.sqrt(np.sum(x * x)))
    grad = x / norm if norm > 0 else np.zeros_like(x)
    return {"value": norm, "grad": grad.tolist()}


def _is_zero_case(case) -> bool:
    return not any(case.inputs[0])


def _grad_has_nan(got) -> bool:
    return got["grad"] is not None and not finite(got["grad"])


SAFE_NORM = Exercise(
    id="7.1",
    title="Fix a NaN gradient: a norm that is safe at 0",
    level="easy",
    minutes=10,
    task="safe_norm(x): the Euclidean norm of a 1-D Tensor x, recorded, whose gradient is "
    "x/||x|| for x != 0 and 0 (not NaN) at x = 0",
    answer="safe_norm",
    cases=_norm_cases,
    run=_safe_norm_run,
    reference=_norm_reference,
    mistakes=(
        Mistake(
            "NaN in the gradient at x = 0: sqrt's rule 1/(2 sqrt(s)) is infinite at s = 0, and "
            "0 · ∞ is NaN — a where/select after the sqrt does not stop it. Feed sqrt a safe "
            "input where its result is not used (the double-where trick), then select the "
            "output.",
            lambda got, exp, case: _grad_has_nan(got),
        ),
        Mistake(
            "At x = 0 the value is wrong: the safe input leaked into the result. Select the "
            "output too (the second where): the norm of 0 is 0.",
            lambda got, exp, case: (
                _is_zero_case(case)
                and not math.isclose(got["value"], 0.0, abs_tol=1e-8)
                and got["value"] > 1e-3
                and got["grad"] is not None  # the double where's gradient at 0: all zeros
                and finite(got["grad"])
                and not np.any(np.asarray(got["grad"], dtype=float))
            ),
        ),
        Mistake(
            "An epsilon under the square root (sqrt(s + eps)) makes the gradient finite but "
            "the value wrong: sqrt(eps) at 0, and every norm a little off. Use the double "
            "where: exact values, exact gradients.",
            lambda got, exp, case: (
                _is_zero_case(case) and 0 < got["value"] <= 1e-3 and finite(got["grad"])
            ),
        ),
        Mistake(
            "No gradient reached x (it is None or 0 everywhere): compute the norm with the "
            "engine's operations on x ((x * x).sum(), sqrt), not with numpy on x.data, and do "
            "not stop_gradient it.",
            lambda got, exp, case: (
                not _is_zero_case(case)
                and (got["grad"] is None or not np.any(np.asarray(got["grad"], dtype=float)))
            ),
        ),
    ),
    nudges=("The trouble is sqrt at 0, and it happens even when the branch is not used: make "
        "its input harmless where x is 0.",),
    reveal="s = (x * x).sum(); safe = where(s > 0, s, 1.0); out = where(s > 0, sqrt(safe), 0.0) "
        "— with the three-line where of the chapter, or with a Python if on s.data.",
)


# --- 7.2 a stable logsumexp with a custom jvp -------------------------------------------------
# The chapter writes logsumexp's *vjp* rule (custom_vjp); here the student writes its *jvp*
# rule (custom_jvp): the tangent is a dot product, softmax(x) · t, and reverse mode is what
# the package derives from it. The chapter's cell, pasted, is a custom_vjp and scores 0.


def _lse_cases(rng):
    cases = []
    for _ in range(4):
        size = int(rng.integers(2, 6))
        x = [draw(rng, -5.0, 5.0) for _ in range(size)]
        t = [draw(rng, -2.0, 2.0) for _ in range(size)]
        scale = draw(rng, 0.5, 3.0)
        cases.append(Case(f"random: x = {x}, tangent {t}, incoming gradient {scale}", (x, scale, t)))
    cases += [
        Case(
            "extreme: x = [1000, 999, -1000] (e^1000 overflows)",
            ([1000.0, 999.0, -1000.0], 2.0, [0.5, -1.0, 3.0]),
        ),
        Case(
            "extreme: x = [-1000, -1001, -1002] (e^-1000 is 0)",
            ([-1000.0, -1001.0, -1002.0], 1.5, [1.0, 2.0, -1.0]),
        ),
        Case("extreme: x = [710, 0] (just past float64's e^709)", ([710.0, 0.0], 1.0, [2.0, 5.0])),
        Case("edge: one entry, x = [800]", ([800.0], 3.0, [-1.5])),
        Case(
            "edge: four equal entries (log 4, tangent the mean of t)",
            ([0.0, 0.0, 0.0, 0.0], 1.0, [1.0, 2.0, 3.0, -2.0]),
        ),
    ]
    return cases


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _lse_reference(inputs):
    x, scale, t = np.array(inputs[0], dtype=np.float64), float(inputs[1]), np.array(inputs[2])
    value = float(x.max() + np.log(np.sum(np.exp(x - x.max()))))
    p = _softmax(x)
    return {"value": value, "tangent": float(p @ t), "grad": (scale * p).tolist(), "nodes": 2}


def _tangent_is(got, case, make) -> bool:
    x, _scale, t = (np.array(v, dtype=np.float64) for v in case.inputs)
    wrong = make(x, t)
    right = float(_softmax(x) @ t)
    return close(got["tangent"], wrong) and not close(wrong, right)


STABLE_LSE = Exercise(
    id="7.2",
    title="A stable logsumexp with a custom jvp",
    level="medium",
    minutes=25,
    task="logsumexp: a custom_jvp function of a 1-D array, log(sum(exp(x))) without "
    "overflow, with defjvp(rule) giving its tangent along t, stably",
    answer="logsumexp",
    cases=_lse_cases,
    run=_logsumexp_run,
    reference=_lse_reference,
    mistakes=(
        Mistake(
            "logsumexp must be a @custom_jvp function with its rule set by "
            "logsumexp.defjvp(rule): this exercise is the forward-mode rule (the chapter "
            "wrote the reverse-mode one, custom_vjp).",
            lambda got, exp, case: is_error(got, "NotCustomJvp"),
        ),
        Mistake(
            "The value overflows (inf or nan) on large inputs: e^1000 is inf in float64. "
            "Subtract the largest entry first: m + log(sum(exp(x - m))).",
            lambda got, exp, case: not finite(got["value"]) and finite(exp["value"]),
        ),
        Mistake(
            "The value is right but the tangent has NaN or inf: exp(x) / sum(exp(x)) "
            "overflows to inf / inf. Write the softmax as exp(x - out), out being the value "
            "itself: every exponent is then <= 0.",
            lambda got, exp, case: finite(got["value"]) and not finite(got["tangent"]),
        ),
        Mistake(
            "The tangent of a scalar function is a number: the weighted sum of the input's "
            "tangent, sum(softmax(x) * t), not the vector softmax(x) * t.",
            lambda got, exp, case: (
                is_error(got, "ValueError") and "returned a tangent of shape" in got["message"]
            )
            or _tangent_is(got, case, lambda x, t: (_softmax(x) * t).tolist()),
        ),
        Mistake(
            "The rule ignores the tangent t: it must push t through, softmax(x) · t (the "
            "checks use t other than all ones).",
            lambda got, exp, case: _tangent_is(got, case, lambda x, t: float(_softmax(x).sum())),
        ),
        Mistake(
            "The tangent misses the normalisation: e^(x_i) / Σ_j e^(x_j) weighs t_i, not "
            "e^(x_i - max) alone.",
            lambda got, exp, case: _tangent_is(
                got, case, lambda x, t: float(np.exp(x - x.max()) @ t)
            ),
        ),
    ),
    nudges=(
        "The rule receives primals = (x,) and tangents = (t,) and returns (out, tangent_out); "
        "the derivative of logsumexp along t is a weighted sum of t.",
        "The weights are the softmax, which can be written with out alone: exp(x - out).",
    ),
    reveal="def rule(primals, tangents): (x,), (t,) = primals, tangents; out = logsumexp(x); "
    "return out, (exp(x - out) * t).sum()",
)


# --- 7.3 checkpointing under a memory budget --------------------------------------------------

WIDTH = 2000  # numbers per vector of the chain (one array is 16 kB)


def MEMORY_BUDGET(n: int) -> float:  # noqa: N802 (a formula, named like the constant it is)
    """Peak memory allowed for a chain of n steps, in arrays of the chain: 10 log2(n) + 75.

    Plain backprop keeps about 5 arrays per step here (three values and the engine's
    bookkeeping); the chapter's single level of k segments keeps k boundaries plus one
    segment's graph, which grows like √n whatever k: over this budget at n = 1024, the
    shortest long case, for every k from 10 to 75; checkpoints nested by bisection keep a
    few arrays per level and fit at 1024 and 2048. tests/test_exercises_ch07.py measures both.
    """
    return 10 * math.log2(n) + 75


_STEP_DERIVATIVES = {  # d step(h) / dh, closed form
    "0.9 tanh(h) + 0.1": lambda h: 0.9 * (1 - np.tanh(h) ** 2),
    "h + 0.1 sin(h)": lambda h: 1 + 0.1 * np.cos(h),
}
_STEPS = {
    "0.9 tanh(h) + 0.1": lambda h: 0.9 * np.tanh(h) + 0.1,
    "h + 0.1 sin(h)": lambda h: h + 0.1 * np.sin(h),
}


def _chain_gradient(name: str, x, n: int) -> np.ndarray:
    """d sum(h_n)/d x for an elementwise chain: the product of the local derivatives."""
    h = np.array(x, dtype=np.float64)
    total = np.ones_like(h)
    for _ in range(n):
        total *= _STEP_DERIVATIVES[name](h)
        h = _STEPS[name](h)
    return total


def _chain_cases(rng):
    cases = []
    for name, n in [
        ("0.9 tanh(h) + 0.1", 1024),
        ("h + 0.1 sin(h)", 1536),
        ("0.9 tanh(h) + 0.1", 1280),  # its gradient, about 0.67**n, underflows by n = 2048
        ("h + 0.1 sin(h)", 1280),
        ("h + 0.1 sin(h)", 2048),
    ]:
        x = np.round(rng.uniform(-2.0, 2.0, WIDTH), 4).tolist()
        cases.append(
            Case(
                f"random: step {name}, n = {n} steps, x of {WIDTH} numbers; budget "
                f"{MEMORY_BUDGET(n):.0f} arrays",
                (name, x, n),
            )
        )
    cases.append(
        Case(f"edge: n = 1 step; budget {MEMORY_BUDGET(1):.0f} arrays",
             ("h + 0.1 sin(h)", np.round(rng.uniform(-2, 2, WIDTH), 4).tolist(), 1))
    )  # fmt: skip
    return cases


def _chain_reference(inputs):
    name, x, n = inputs
    return {"peak_arrays_max": MEMORY_BUDGET(n), "grad": _chain_gradient(name, x, n).tolist()}


def _right_gradient(got, exp) -> bool:
    return close(got.get("grad"), exp["grad"], atol=0.0)


def _within_budget(got, exp) -> bool:
    peak = got.get("peak_arrays")
    return (
        isinstance(peak, int | float)
        and not isinstance(peak, bool)
        and (peak <= exp["peak_arrays_max"])
    )


def _chain_compare(got, expected) -> bool:
    """Right gradient (relative error only: the products of many factors below 1 are tiny,
    and an absolute tolerance would pass zeros) and peak memory within the budget (a
    number: the runner sends None when the answer kept it from being measured)."""
    return (
        isinstance(got, dict) and _right_gradient(got, expected) and _within_budget(got, expected)
    )


CHAIN = Exercise(
    id="7.3",
    title="Checkpoints inside checkpoints: a long chain in log n memory",
    level="medium",
    minutes=40,
    task="chain_gradient(step, x, n): d sum(h_n)/dx for h_0 = x, h_(t+1) = step(h_t), "
    "with peak memory under 10*log2(n) + 75 arrays of the chain",
    answer="chain_gradient",
    cases=_chain_cases,
    run=_chain_run,
    reference=_chain_reference,
    compare=_chain_compare,
    mistakes=(
        Mistake(
            "The gradient is right but the peak memory is over budget. Plain backprop keeps "
            "about 5 arrays per step, so memory grows with n; one level of k checkpointed "
            "segments keeps k boundaries plus a segment's graph of n/k steps, which grows like "
            "sqrt(n) whatever k. The budget grows like log n: the segment being "
            "recomputed must itself be checkpointed, and so on inside it.",
            lambda got, exp, case: (
                _right_gradient(got, exp) and got["peak_arrays"] > exp["peak_arrays_max"]
            ),
        ),
        Mistake(
            "The peak memory could not be measured (see 'memory' in the result): the answer "
            "stopped, restarted or cleared tracemalloc, or ran the chain's steps outside this "
            "process. Leave tracemalloc alone and call step here; the budget is met by "
            "checkpointing, not by hiding the memory.",
            lambda got, exp, case: got["peak_arrays"] is None,
        ),
    ),
    nudges=("checkpoint(f)(h) keeps only h and runs f again, recording, in the backward pass; "
        "f may itself call checkpoint. What if running m steps checkpoints its first half?",),
    reveal="def run(h, m): if m == 1: return step(h); else h = checkpoint(lambda h: "
        "run(h, m // 2))(h) and return run(h, m - m // 2). Then run(leaf, n).sum().backward().",
)


# --- 7.4 a planted exploding training run ----------------------------------------------------


def train_reference(inputs, *, clip: str = "norm", accumulate: bool = False,
                    report: str = "before", guard: bool = True) -> dict:  # fmt: skip
    """The run of 7.4 written out in numpy: tanh layer, linear layer, MSE, plain SGD.

    ``clip``: ``"norm"`` (the task: all gradients scaled by ``min(1, max_norm/(norm +
    1e-6))``, as PyTorch and ``optim.clip_grad_norm_``), ``"none"`` or ``"value"`` (each
    entry clipped to ±max_norm); ``accumulate``: gradients never zeroed; ``report``: the
    norm returned, ``"before"`` or ``"after"`` clipping; ``guard``: a step whose gradient
    norm is not finite (the poisoned batches) changes no weight. A norm that is not finite
    is recorded as inf, as the runner records it. Returns the norms and the final
    parameters (W1, b1, W2, b2 flattened), as the runner does.
    """
    W1, b1, W2, b2, X, y, lr, max_norm, steps, poisoned = inputs
    params = [np.array(p, dtype=np.float64) for p in (W1, b1, W2, b2)]
    X, y = np.array(X, dtype=np.float64), np.array(y, dtype=np.float64)
    bad = poisoned_targets(y)
    held = [np.zeros_like(p) for p in params]
    norms = []
    with np.errstate(all="ignore"):
        for k in range(steps):
            W1_, b1_, W2_, b2_ = params
            H = np.tanh(X @ W1_ + b1_)
            r = H @ W2_ + b2_ - (bad if k in poisoned else y)
            d_out = 2 * r / r.size  # d mean(r²) / d out
            d_z = (d_out @ W2_.T) * (1 - H * H)
            grads = [X.T @ d_z, d_z.sum(axis=0), H.T @ d_out, d_out.sum(axis=0)]
            held = [h + g for h, g in zip(held, grads)] if accumulate else grads
            total = math.sqrt(sum(float(np.sum(g * g)) for g in held))
            if clip == "norm":
                held = [g * min(1.0, max_norm / (total + 1e-6)) for g in held]
            elif clip == "value":
                held = [np.clip(g, -max_norm, max_norm) for g in held]
            after = math.sqrt(sum(float(np.sum(g * g)) for g in held))
            norms.append(finite_or_inf(total if report == "before" else after))
            if guard and not math.isfinite(total):
                continue  # the poisoned batch: no weight changes
            params = [p - lr * g for p, g in zip(params, held)]
    return {"norms": norms, "params": np.concatenate([p.ravel() for p in params]).tolist()}


def _planted_run(rng, scale: float, lr: float, steps: int, max_norm: float,
                 poisoned: tuple[int, ...] = ()) -> tuple:  # fmt: skip
    """Plain data for one planted run: weights ``scale`` times too large, a large lr; the
    batches of the steps in ``poisoned`` have an infinite target."""
    n_in, hidden, rows = 3, 8, 16
    X = np.round(rng.normal(size=(rows, n_in)), 4)
    y = np.round(np.sin(X @ np.array([1.0, -2.0, 0.5]))[:, None], 4)
    W1 = np.round(rng.normal(0, scale / math.sqrt(n_in), size=(n_in, hidden)), 4)
    W2 = np.round(rng.normal(0, scale / math.sqrt(hidden), size=(hidden, 1)), 4)
    return (W1.tolist(), [0.0] * hidden, W2.tolist(), [0.0], X.tolist(), y.tolist(), lr,
            max_norm, steps, list(poisoned))  # fmt: skip


def _clip_cases(rng):
    cases = []
    for scale, lr, max_norm, poisoned in [(4.0, 1.5, 1.0, (3,)), (6.0, 1.0, 1.0, (0, 17)),
                                          (4.0, 2.0, 0.5, (12, 13)),
                                          (8.0, 1.2, 2.0, (29,))]:  # fmt: skip
        steps = ", ".join(str(k) for k in poisoned)
        cases.append(
            Case(
                f"planted: weights {scale:g}x too large, lr {lr:g}, max_norm {max_norm:g}, "
                f"30 steps; poisoned batch at step {steps} (counting from 0)",
                _planted_run(rng, scale, lr, 30, max_norm, poisoned),
            )
        )
    cases.append(
        Case("edge: a healthy run (norms below max_norm: clipping changes nothing)",
             _planted_run(rng, 1.0, 0.05, 20, 100.0))
    )  # fmt: skip
    return cases


def _run_is(got, case, **variant) -> bool:
    other = train_reference(case.inputs, **variant)
    right = train_reference(case.inputs)
    return close(got, other, rtol=1e-5, atol=1e-8) and not close(other, right)


CLIPPED = Exercise(
    id="7.4",
    title="Tame an exploding training run and survive a poisoned batch",
    level="medium",
    minutes=20,
    task="clipped_step(model, optimizer, X, y, max_norm): one SGD step on mean((model(X) - y)**2) "
    "with the gradient norm clipped to max_norm, skipped when that norm is not finite; "
    "return the norm before clipping",
    answer="clipped_step",
    cases=_clip_cases,
    run=_clipped_run,
    reference=train_reference,
    compare=lambda got, exp: close(got, exp, rtol=1e-5, atol=1e-8),
    mistakes=(
        Mistake(
            "A poisoned batch (an infinite target) was stepped on: its gradient is inf or NaN, "
            "and one such step turns every weight into NaN for good. Look at the norm before "
            "stepping: when it is not finite (math.isfinite), skip optimizer.step() and "
            "return the norm.",
            lambda got, exp, case: _run_is(got, case, guard=False),
        ),
        Mistake(
            "No clipping took effect: the norms grow step after step (the run explodes). "
            "Call optim.clip_grad_norm_(model.parameters(), max_norm) between backward() "
            "and optimizer.step().",
            lambda got, exp, case: _run_is(got, case, clip="none"),
        ),
        Mistake(
            "The gradients were never zeroed, so each step added to the last ones: call "
            "optimizer.zero_grad() first.",
            lambda got, exp, case: _run_is(got, case, accumulate=True),
        ),
        Mistake(
            "That is clip_grad_value_: each entry clipped separately changes the gradient's "
            "direction. Clip the joint norm (clip_grad_norm_): one factor for all.",
            lambda got, exp, case: _run_is(got, case, clip="value"),
        ),
        Mistake(
            "The training is right, but the norms returned are after clipping (never above "
            "max_norm). Return the norm before clipping — what clip_grad_norm_ returns, and "
            "what tells you the run is exploding.",
            lambda got, exp, case: _run_is(got, case, report="after"),
        ),
    ),
    nudges=(
        "Per step, in this order: reset the gradients, the mean squared error, backward, "
        "clip the gradients' total norm, then the optimizer's step — unless that norm is "
        "not finite.",
    ),
    reveal="norm = optim.clip_grad_norm_(model.parameters(), max_norm) scales the gradients "
        "in place and returns their norm before clipping; call optimizer.step() only if "
        "math.isfinite(norm).",
)


EXERCISES = [SAFE_NORM, STABLE_LSE, CHAIN, CLIPPED]
