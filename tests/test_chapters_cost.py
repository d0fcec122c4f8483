"""The cost claims of chapters 00 and 02: the programs timed are right, their counts exact.

The timings themselves (forward/reverse ratios growing with n inputs and m outputs in chapter
02; value and derivative at a constant multiple of the recorded pass in chapter 00) are
measured, and the claims asserted, by ``make bench`` (benchmarks/bench_cost.py): a timed test
fails on a busy machine. The programs and the ways of differentiating them live there; this
file checks that they compute the closed-form derivatives and how many operations each runs.
"""

from __future__ import annotations

import pytest

from autodiff_lab import Dual, Value, topological_order
from benchmarks.bench_cost import (
    chain_loss,
    chain_loss_gradient,
    derivatives_by_forward_mode,
    derivatives_by_reverse_mode,
    gradient_by_forward_mode,
    gradient_by_reverse_mode,
    points,
    trajectory,
)

# --- correctness of what is being timed -------------------------------------------------------


@pytest.mark.parametrize("n", [4, 64])
def test_both_modes_give_the_closed_form_gradient(n):
    xs = points(n)
    expected = chain_loss_gradient(xs)
    assert gradient_by_forward_mode(chain_loss, xs) == pytest.approx(expected, abs=1e-12)
    assert gradient_by_reverse_mode(chain_loss, xs) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("m", [4, 64])
def test_both_modes_give_the_trajectory_derivatives(m):
    h, t = 1e-6, 0.7
    plus, minus = trajectory(t + h, m), trajectory(t - h, m)
    central = [(p - q) / (2 * h) for p, q in zip(plus, minus)]
    forward = derivatives_by_forward_mode(t, m)
    reverse = derivatives_by_reverse_mode(t, m)
    assert forward == pytest.approx(reverse, rel=1e-12, abs=1e-12)
    assert forward == pytest.approx(central, rel=1e-6, abs=1e-8)


# --- operation counts: the cost model, exactly ------------------------------------------------


def test_forward_mode_runs_n_times_the_operations_reverse_mode_records(monkeypatch):
    """n inputs: n jvp passes of 3(n-1) dual operations vs one graph of 3(n-1) operations."""
    dual_ops = [0]
    apply = Dual._apply

    def counting_apply(cls, fn, *inputs, **params):
        dual_ops[0] += 1
        return apply(fn, *inputs, **params)

    monkeypatch.setattr(Dual, "_apply", classmethod(counting_apply))
    for n in (4, 16, 64):
        dual_ops[0] = 0
        gradient_by_forward_mode(chain_loss, points(n))
        assert dual_ops[0] == n * 3 * (n - 1)

        loss = chain_loss(*(Value(x) for x in points(n)))
        recorded = [node for node in topological_order(loss) if node._fn is not None]
        assert len(recorded) == 3 * (n - 1)
