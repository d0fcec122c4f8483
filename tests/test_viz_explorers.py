"""FiniteDifferenceExplorer and CostExplorer driven from Python.

Expected derivatives are closed forms; the finite-difference error is checked against
the textbook behaviour (truncation error ~ h for forward, ~ h^2 for central differences).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff_lab import exp, sin
from autodiff_lab.viz import CostExplorer, FiniteDifferenceExplorer
from autodiff_lab.viz.explorers import jacobian_forward_mode, jacobian_reverse_mode, recurrence

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def f(x):
    return sin(x) * exp(x)


def dfdx(x):
    return (math.cos(x) + math.sin(x)) * math.exp(x)


def test_exact_derivative_is_autodiff_and_matches_the_closed_form():
    explorer = FiniteDifferenceExplorer(f, x=1.0)
    assert explorer.exact_derivative == pytest.approx(dfdx(1.0), rel=1e-15)
    assert f"{dfdx(1.0):.12g}" in explorer.caption.value
    assert explorer.image.png[:8] == PNG_MAGIC


def test_error_curves_show_truncation_then_round_off():
    explorer = FiniteDifferenceExplorer(f, x=1.0, exact=dfdx)
    hs, err = explorer.hs, explorer.current_errors
    # truncation regime: halving h halves the forward error and quarters the central one
    i = int(np.argmin(np.abs(hs - 1e-2)))
    j = int(np.argmin(np.abs(hs - 1e-3)))
    assert err["forward"][i] / err["forward"][j] == pytest.approx(hs[i] / hs[j], rel=0.05)
    assert err["central"][i] / err["central"][j] == pytest.approx((hs[i] / hs[j]) ** 2, rel=0.05)
    # the best step is neither the largest nor the smallest: the V shape
    h_fwd, e_fwd = explorer.best["forward"]
    h_cen, e_cen = explorer.best["central"]
    assert 1e-10 < h_fwd < 1e-6 and 1e-8 < h_cen < 1e-3
    assert e_cen < e_fwd < 1e-6
    assert err["forward"][-1] > 1e-4  # h = 1e-16: round-off swamps everything


def test_slider_moves_x():
    explorer = FiniteDifferenceExplorer(f, x=1.0, x_range=(-1.0, 2.0))
    before = explorer.image.png
    explorer.slider.value = -0.5
    assert explorer.x == -0.5
    assert explorer.exact_derivative == pytest.approx(dfdx(-0.5), rel=1e-15)
    assert "x = -0.500" in explorer.caption.value and explorer.image.png != before


def test_static_fallback_is_the_plot():
    explorer = FiniteDifferenceExplorer(f, x=0.3)
    bundle = explorer._repr_mimebundle_()
    assert bundle["image/png"] == explorer.image.png
    assert bundle["text/plain"].startswith("FiniteDifferenceExplorer at x = 0.300")
    assert "run this cell to make the controls live" in bundle["text/plain"]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"x = 5.0 is outside x_range \(0.0, 1.0\)"):
        FiniteDifferenceExplorer(f, x=5.0, x_range=(0.0, 1.0))
    with pytest.raises(TypeError, match="FiniteDifferenceExplorer: f must be a function"):
        FiniteDifferenceExplorer(3.0)


def test_cost_explorer_agrees_on_derivatives_and_shows_the_asymmetry():
    explorer = CostExplorer(sizes=(4, 32), repeats=3)
    results = explorer.results
    assert results["max_difference"] < 1e-12  # both modes compute the same derivatives
    grad, jac = results["gradient"], results["jacobian"]
    assert grad["size"] == jac["size"] == [4, 32]

    def growth(times):
        return times[1] / times[0]

    # From n = 4 to 32 (8x): n passes through a graph of size ~n grow ~64x, one pass ~8x.
    # Asking for a 2x difference in growth leaves room for a busy machine.
    assert growth(grad["forward"]) > 2 * growth(grad["reverse"])
    assert growth(jac["reverse"]) > 2 * growth(jac["forward"])
    assert grad["forward"][-1] > grad["reverse"][-1]  # reverse mode wins the gradient
    assert explorer.image.png[:8] == PNG_MAGIC
    assert "At n = 32" in explorer.caption.value


def test_reverse_and_forward_jacobians_match_the_closed_form():
    t = 0.4  # y1 = sin(2t), yk = sin(y(k-1) + t):  yk' = cos(y(k-1) + t) (y(k-1)' + 1)
    y, dy, expected = t, 1.0, []
    for _ in range(5):
        y, dy = math.sin(y + t), math.cos(y + t) * (dy + 1)
        expected.append(dy)
    assert jacobian_forward_mode(recurrence, t, 5) == pytest.approx(expected, rel=1e-14)
    assert jacobian_reverse_mode(recurrence, t, 5) == pytest.approx(expected, rel=1e-14)


def test_cost_explorer_slider_and_button_remeasure():
    explorer = CostExplorer(sizes=(1, 2, 4), repeats=1)
    explorer.slider.value = 2
    assert explorer.results["gradient"]["size"] == [1, 2]
    explorer.measure_button.click()
    assert explorer.results["jacobian"]["size"] == [1, 2]
    assert "image/png" in explorer._repr_mimebundle_()


def test_cost_explorer_with_custom_functions():
    def f_sum_of_squares(xs):
        total = 0.0
        for x in xs:
            total = total + x * x
        return total

    def g_powers(t, m):
        return [t ** (k + 1) for k in range(m)]

    explorer = CostExplorer(f_sum_of_squares, g_powers, sizes=(3,), repeats=1)
    assert explorer.results["max_difference"] < 1e-12
