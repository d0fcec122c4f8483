"""The chapters' plotting helpers (autodiff_lab.viz.plots): what each figure draws.

Expected labels, counts and data are written out by hand from the numbers passed in; the
text alternative is the one :mod:`autodiff_lab.viz.figures` builds for the returned figure.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from autodiff_lab.viz.explorers import COLOR_FORWARD, COLOR_REVERSE  # noqa: E402
from autodiff_lab.viz.figures import alt_text  # noqa: E402
from autodiff_lab.viz.plots import MIN_FONT_SIZE, plot_jacobian_passes, plot_mode_race  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _smallest_text(fig) -> float:
    """The smallest font size (pt) of any visible text the figure draws."""
    fig.canvas.draw()  # tick labels exist once drawn
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    return min(sizes)


def test_inputs_race_draws_both_modes_and_the_ratio_of_forward_to_reverse():
    sizes = [2, 4, 8]
    forward, reverse = [0.004, 0.016, 0.064], [0.002, 0.004, 0.008]  # ratio 2, 4, 8
    fig = plot_mode_race(sizes, forward, reverse, grows="inputs")
    times, ratios = fig.get_axes()
    assert [line.get_label() for line in times.get_lines()] == [
        "forward mode: n jvp passes",
        "reverse mode: 1 backward pass",
    ]
    fwd, rev = times.get_lines()
    assert fwd.get_color() == COLOR_FORWARD and rev.get_color() == COLOR_REVERSE
    np.testing.assert_allclose(fwd.get_ydata(), [4.0, 16.0, 64.0])  # in ms
    np.testing.assert_allclose(rev.get_ydata(), [2.0, 4.0, 8.0])
    measured, guide = ratios.get_lines()
    np.testing.assert_allclose(measured.get_ydata(), [2.0, 4.0, 8.0])  # forward / reverse
    np.testing.assert_allclose(guide.get_ydata(), [2.0, 4.0, 8.0])  # 2 at n = 2, then ∝ n
    assert (times.get_xlabel(), ratios.get_xlabel()) == ("number of inputs n",) * 2
    assert times.get_ylabel() == "CPU time for the gradient (ms)"
    assert ratios.get_ylabel() == "forward time / reverse time"
    assert ratios.get_title() == "reverse wins by a factor ∝ n"
    assert [t.get_text() for t in times.get_xticklabels()] == ["2", "4", "8"]
    assert (times.get_xscale(), times.get_yscale()) == ("log", "log")
    assert alt_text(fig) == (
        "Figure with 2 panels. Panel 1, “gradient of a scalar loss Rⁿ → R”: 2 lines of CPU "
        "time for the gradient (ms) against number of inputs n, both axes on log scales; "
        "legend: forward mode: n jvp passes; reverse mode: 1 backward pass. Panel 2, "
        "“reverse wins by a factor ∝ n”: 2 lines of forward time / reverse time against "
        "number of inputs n, both axes on log scales; legend: measured forward / reverse; ∝ n."
    )


def test_outputs_race_puts_reverse_over_forward():
    fig = plot_mode_race([1, 10], [0.001, 0.002], [0.001, 0.02], grows="outputs")
    times, ratios = fig.get_axes()
    assert times.get_title() == "one input, many outputs R → Rᵐ"
    assert [line.get_label() for line in times.get_lines()] == [
        "forward mode: 1 jvp pass",
        "reverse mode: m backward passes",
    ]
    measured, guide = ratios.get_lines()
    np.testing.assert_allclose(measured.get_ydata(), [1.0, 10.0])  # reverse / forward
    np.testing.assert_allclose(guide.get_ydata(), [1.0, 10.0])  # ∝ m from the first point
    assert ratios.get_ylabel() == "reverse time / forward time"
    assert measured.get_label() == "measured reverse / forward"
    assert ratios.get_title() == "forward wins by a factor ∝ m"


def test_race_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="grows must be 'inputs' or 'outputs', got 'both'"):
        plot_mode_race([1, 2], [1.0, 2.0], [1.0, 2.0], grows="both")
    with pytest.raises(
        ValueError, match=r"plot_mode_race: reverse must be 2 positive times.*\(3,\)"
    ):
        plot_mode_race([1, 2], [1.0, 2.0], [1.0, 2.0, 3.0], grows="inputs")
    with pytest.raises(ValueError, match="forward must be 2 positive times"):
        plot_mode_race([1, 2], [0.0, 2.0], [1.0, 2.0], grows="inputs")  # no place on a log axis


def test_jacobian_passes_label_each_entry_with_its_value_and_pass():
    J = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, 3.25]])
    fig = plot_jacobian_passes(J)
    forward, reverse = fig.get_axes()
    assert forward.get_title() == "forward mode: 3 passes, one column each"
    assert reverse.get_title() == "reverse mode: 2 passes, one row each"
    assert [t.get_text() for t in forward.texts] == [
        "1.00\npass 1", "2.00\npass 2", "-1.00\npass 3",
        "0.50\npass 1", "-1.00\npass 2", "3.25\npass 3",
    ]  # fmt: skip
    assert [t.get_text() for t in reverse.texts] == [
        "1.00\npass 1", "2.00\npass 1", "-1.00\npass 1",
        "0.50\npass 2", "-1.00\npass 2", "3.25\npass 2",
    ]  # fmt: skip
    assert [t.get_text() for t in forward.get_xticklabels()] == ["∂x₁", "∂x₂", "∂x₃"]
    assert [t.get_text() for t in reverse.get_yticklabels()] == ["f₁", "f₂"]
    assert alt_text(fig) == (
        "Figure with 2 panels. Panel 1, “forward mode: 3 passes, one column each”: 1 image. "
        "Panel 2, “reverse mode: 2 passes, one row each”: 1 image."
    )
    with pytest.raises(ValueError, match=r"plot_jacobian_passes: expected an m×n matrix.*\(3,\)"):
        plot_jacobian_passes(np.ones(3))


def test_no_text_smaller_than_the_stated_minimum():
    assert MIN_FONT_SIZE >= 10  # matplotlib's default: readable at 1280×720
    race = plot_mode_race([2, 4, 8], [1.0, 2.0, 4.0], [1.0, 1.5, 2.0], grows="inputs")
    passes = plot_jacobian_passes(np.eye(2))
    assert _smallest_text(race) >= MIN_FONT_SIZE
    assert _smallest_text(passes) >= MIN_FONT_SIZE
