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

from autodiff_lab.viz.checkpointing import MEMORY_COLOR, TIME_COLOR  # noqa: E402
from autodiff_lab.viz.explorers import COLOR_FORWARD, COLOR_REVERSE  # noqa: E402
from autodiff_lab.viz.figures import alt_text  # noqa: E402
from autodiff_lab.viz.plots import (  # noqa: E402
    CLASS_COLOURS,
    MIN_FONT_SIZE,
    plot_broadcast_gradients,
    plot_checkpoint_costs,
    plot_confusion_and_mistakes,
    plot_error_vs_step,
    plot_gradient_norms_by_layer,
    plot_jacobian_passes,
    plot_learning_rates,
    plot_memory_race,
    plot_mode_race,
    plot_moons_training,
    plot_one_image_per_class,
)


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


def _v_sweep():
    hs = np.array([1e-12, 1e-8, 1e-4, 1.0])
    forward = np.array([1e-4, 1e-8, 1e-4, 1.0])  # best at h = 1e-8
    central = np.array([1e-4, 1e-8, 1e-11, 1.0])  # best at h = 1e-4
    return hs, forward, central


def test_error_vs_step_draws_each_curve_its_guides_and_circles_the_best_step():
    hs, forward, central = _v_sweep()
    fig = plot_error_vs_step(
        hs,
        {"forward difference": forward, "central difference": central},
        {"truncation ~ h": hs, "round-off ~ eps/h": 1e-16 / hs},
        ylabel="|error| in $f'(x_0)$",
    )
    (ax,) = fig.get_axes()
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == [
        "forward difference",
        "central difference",
        "truncation ~ h",
        "round-off ~ eps/h",
        "best step, forward difference",
        "best step, central difference",
    ]
    assert lines[0].get_color() == COLOR_FORWARD and lines[1].get_color() == COLOR_REVERSE
    np.testing.assert_allclose(lines[3].get_ydata(), [1e-4, 1e-8, 1e-12, 1e-16])
    # the circles sit on each curve's smallest error, and their labels say where
    assert (lines[4].get_xdata()[0], lines[4].get_ydata()[0]) == (1e-8, 1e-8)
    assert (lines[5].get_xdata()[0], lines[5].get_ydata()[0]) == (1e-4, 1e-11)
    assert [t.get_text() for t in ax.texts] == [
        "h = 1e-08\nerror 1e-08",
        "h = 1e-04\nerror 1e-11",
    ]
    assert ax.get_ylabel() == "|error| in $f'(x_0)$" and ax.get_xlabel() == "step $h$"
    assert ax.get_ylim() == pytest.approx((1e-13, 1e1))
    assert alt_text(fig) == (
        "Plot: “Finite differences: the V of truncation vs round-off”: 6 lines of |error| in "
        "f'(x₀) against step h, both axes on log scales; legend: forward difference; central "
        "difference; truncation ~ h; round-off ~ eps/h; best step, forward difference; best "
        "step, central difference."
    )


def test_error_vs_step_refuses_mismatched_sweeps():
    hs, forward, _ = _v_sweep()
    with pytest.raises(ValueError, match=r"'forward' has \(3,\) errors for \(4,\) steps"):
        plot_error_vs_step(hs, {"forward": forward[:3]})
    with pytest.raises(ValueError, match="hs must be positive steps"):
        plot_error_vs_step(-hs, {"forward": forward})
    with pytest.raises(ValueError, match="expected 1 to 4 error curves, got 0"):
        plot_error_vs_step(hs, {})


def test_memory_race_draws_reverse_and_forward_in_megabytes():
    fig = plot_memory_race(
        [10, 20], [2e6, 4e6], [1e5, 1e5], xlabel="chain length n", title="memory of a chain"
    )
    (ax,) = fig.get_axes()
    reverse, forward = ax.get_lines()
    assert (reverse.get_label(), forward.get_label()) == (
        "reverse mode (grad)",
        "forward mode (jvp)",
    )
    assert reverse.get_color() == COLOR_REVERSE and forward.get_color() == COLOR_FORWARD
    np.testing.assert_allclose(reverse.get_ydata(), [2.0, 4.0])  # MB
    np.testing.assert_allclose(forward.get_ydata(), [0.1, 0.1])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("chain length n", "peak memory (MB)")
    assert alt_text(fig) == (
        "Plot: “memory of a chain”: 2 lines of peak memory (MB) against chain length n; "
        "legend: reverse mode (grad); forward mode (jvp)."
    )
    with pytest.raises(ValueError, match="plot_memory_race: 1 forward peaks for 2 sizes"):
        plot_memory_race([10, 20], [1.0, 2.0], [1.0], xlabel="n", title="t")


def test_checkpoint_costs_is_the_explorers_picture_with_a_guide():
    ks, peaks, seconds = [1, 4, 16], [8e6, 2e6, 3e6], [0.010, 0.012, 0.015]
    fig = plot_checkpoint_costs(ks, peaks, seconds, guide=(8.0, "k = √(3n)"))
    memory, time = fig.get_axes()
    (curve, guide) = memory.get_lines()
    np.testing.assert_allclose(curve.get_ydata(), [8.0, 2.0, 3.0])  # MB
    assert curve.get_color() == MEMORY_COLOR and guide.get_label() == "k = √(3n)"
    np.testing.assert_allclose(guide.get_xdata(), [8.0, 8.0])  # a vertical line at k = 8
    (times,) = time.get_lines()
    np.testing.assert_allclose(times.get_ydata(), [10.0, 12.0, 15.0])  # ms
    assert times.get_color() == TIME_COLOR
    assert [t.get_text() for t in time.get_xticklabels()] == ["1", "4", "16"]
    assert (memory.get_ylabel(), time.get_ylabel()) == (
        "peak memory (MB)",
        "time of one gradient (ms)",
    )
    assert memory.get_title() == "Memory: k boundaries + one segment of n/k"
    with pytest.raises(ValueError, match="3 segment counts, 2 peaks and 3 times"):
        plot_checkpoint_costs(ks, peaks[:2], seconds)


def test_the_checkpoint_explorer_draws_the_same_panels_and_circles_its_k():
    from matplotlib.figure import Figure

    from autodiff_lab.viz.checkpointing import draw_checkpoint_costs

    fig = Figure()
    memory, _ = draw_checkpoint_costs(fig, [1, 4, 16], [8e6, 2e6, 3e6], [1.0, 1.0, 1.0], current=4)
    curve, circle = memory.get_lines()
    assert (circle.get_xdata()[0], circle.get_ydata()[0]) == (4, 2.0)  # on the curve, at k = 4
    assert circle.get_marker() == "o" and circle.get_markerfacecolor() == "none"


def test_moons_training_colours_the_plane_by_the_sign_of_the_score():
    X = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    labels = np.array([0, 1, 1])
    seen = []

    def score(points):  # class 1 right of x = 0
        seen.append(points.shape)
        return points[:, 0]

    fig = plot_moons_training(score, X, labels, "a line", [1.0, 0.5], [0.5, 1.0], grid=10)
    plane, curves = fig.get_axes()
    assert seen == [(100, 2)]  # one call on the whole 10 × 10 grid
    (points,) = plane.collections[-1:]
    np.testing.assert_allclose(points.get_offsets(), X)
    np.testing.assert_allclose(
        points.get_facecolors()[:, :3], [matplotlib.colors.to_rgb(CLASS_COLOURS[k]) for k in labels]
    )
    assert plane.get_title() == "a line"
    assert [line.get_label() for line in curves.get_lines()] == ["loss", "accuracy"]
    np.testing.assert_allclose(curves.get_lines()[1].get_ydata(), [0.5, 1.0])
    with pytest.raises(ValueError, match=r"n × 2 points and n labels, got \(3, 2\) and \(2,\)"):
        plot_moons_training(score, X, labels[:2], "t", [], [])


def test_gradient_norms_by_layer_names_each_layer_and_the_ratio():
    norms = np.array([[1e-4, 1e-2, 1.0], [1e-3, 1e-2, 1e-1]])  # 2 steps, 2 layers + output
    fig = plot_gradient_norms_by_layer(norms, title="norms")
    each, ratio = fig.get_axes()
    assert [line.get_label() for line in each.get_lines()] == ["layer 1", "layer 2", "output"]
    np.testing.assert_allclose(ratio.get_lines()[0].get_ydata(), [1e4, 1e2])  # output ÷ first
    assert each.get_yscale() == ratio.get_yscale() == "log"
    assert ratio.get_title() == "last layer's ‖dL/dW‖ ÷ first layer's"
    with pytest.raises(ValueError, match=r"steps × layers \(2 or more\), got \(3,\)"):
        plot_gradient_norms_by_layer(np.ones(3), title="t")


def test_learning_rates_draws_one_log_curve_per_rate_with_its_verdict():
    losses = {0.1: [1.0, 0.5, 0.25], 10.0: [1.0, 100.0, 1e4]}
    fig = plot_learning_rates(losses, {0.1: "fine", 10.0: "diverges"}, title="rates")
    (ax,) = fig.get_axes()
    small, large = ax.get_lines()
    assert [small.get_label(), large.get_label()] == ["lr 0.1: fine", "lr 10.0: diverges"]
    np.testing.assert_allclose(small.get_xdata(), [1, 2, 3])  # steps count from 1
    np.testing.assert_allclose(large.get_ydata(), [1.0, 100.0, 1e4])
    assert small.get_color() != large.get_color()
    assert ax.get_yscale() == "log" and ax.get_title() == "rates"
    with pytest.raises(ValueError, match=r"each with a verdict; got rates \[0\.1, 10\.0\]"):
        plot_learning_rates(losses, {0.1: "fine"})


def test_one_image_per_class_shows_the_first_image_of_each_class_in_order():
    labels = np.array([2, 0, 2, 1, 0])
    images = np.arange(5 * 4).reshape(5, 4)  # image k holds 4k .. 4k + 3
    fig = plot_one_image_per_class(images, labels, shape=(2, 2))
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["0", "1", "2"]
    # the first image of class 0 is image 1, of class 1 image 3, of class 2 image 0
    for ax, first in zip(axes, (1, 3, 0)):
        np.testing.assert_array_equal(ax.images[0].get_array(), images[first].reshape(2, 2))
    with pytest.raises(ValueError, match=r"one label per image, got 5 images"):
        plot_one_image_per_class(images, labels[:4], shape=(2, 2))


def test_confusion_and_mistakes_counts_and_shows_each_wrong_image():
    true = np.array([0, 0, 1, 2, 2, 2])
    predicted = np.array([0, 1, 1, 2, 0, 2])  # two mistakes: 0 -> 1 and 2 -> 0
    images = np.arange(6 * 4).reshape(6, 4)
    fig = plot_confusion_and_mistakes(true, predicted, images, shape=(2, 2))
    matrix, gallery = fig.get_axes()[:2]
    np.testing.assert_array_equal(
        matrix.images[0].get_array(), [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    )  # row = true, column = predicted
    assert sorted(t.get_text() for t in matrix.texts) == ["1", "1", "1", "1", "2"]
    assert gallery.get_title() == "the 2 misclassified images"
    insets = gallery.child_axes
    assert [a.get_title() for a in insets] == ["0 → 1", "2 → 0"]
    np.testing.assert_array_equal(insets[1].images[0].get_array(), [[16, 17], [18, 19]])
    with pytest.raises(ValueError, match=r"\(6,\) true labels.*5 images"):
        plot_confusion_and_mistakes(true, predicted, images[:5], shape=(2, 2))


def test_broadcast_gradients_shows_the_upstream_gradient_and_both_sums():
    upstream = np.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.0]])  # 3 × 2
    down = np.array([0.5, 1.0])  # the columns' sums, by hand: 1 + 0.5 - 1, -2 + 3 + 0
    across = np.array([[-1.0], [3.5], [-1.0]])  # the rows' sums, by hand
    fig = plot_broadcast_gradients(upstream, down, across)
    grid, beside, under, empty = fig.get_axes()
    assert grid.get_title() == "dL/dY (3, 2): the upstream gradient"
    assert beside.get_title() == "c.grad (3, 1)\nsum over axis 1 →"
    assert under.get_title() == "b.grad (2,): sum over axis 0 ↓"
    assert not empty.axison  # the fourth corner is blank
    np.testing.assert_array_equal(grid.images[0].get_array(), upstream)
    np.testing.assert_array_equal(beside.images[0].get_array(), [[-1.0], [3.5], [-1.0]])
    np.testing.assert_array_equal(under.images[0].get_array(), [[0.5, 1.0]])
    # each entry written in, row by row, on one colour scale symmetric about 0 (|3.5| largest)
    assert [t.get_text() for t in grid.texts] == ["1.0", "-2.0", "0.5", "3.0", "-1.0", "0.0"]
    assert [t.get_text() for t in beside.texts] == ["-1.0", "3.5", "-1.0"]
    assert [t.get_text() for t in under.texts] == ["0.5", "1.0"]
    for ax in (grid, beside, under):
        assert ax.images[0].get_clim() == (-3.5, 3.5)
    named = plot_broadcast_gradients(upstream, down, across, names=("G", "u", "v"))
    assert named.get_axes()[2].get_title().startswith("u (2,)")
    with pytest.raises(ValueError, match=r"got shapes \(3, 2\), \(3,\) and \(3, 1\)"):
        plot_broadcast_gradients(upstream, np.ones(3), across)


def test_no_text_smaller_than_the_stated_minimum():
    assert MIN_FONT_SIZE >= 10  # matplotlib's default: readable at 1280×720
    race = plot_mode_race([2, 4, 8], [1.0, 2.0, 4.0], [1.0, 1.5, 2.0], grows="inputs")
    passes = plot_jacobian_passes(np.eye(2))
    hs, forward, central = _v_sweep()
    v = plot_error_vs_step(hs, {"forward": forward, "central": central}, {"guide": hs})
    memory = plot_memory_race([1, 2], [2.0, 3.0], [1.0, 1.0], xlabel="n", title="memory")
    costs = plot_checkpoint_costs([1, 2, 4], [3.0, 2.0, 2.5], [1.0, 1.1, 1.2], guide=(2.0, "k"))
    moons = plot_moons_training(lambda p: p[:, 0], [[0.0, 0.0], [1.0, 1.0]], [0, 1], "t", [1], [1])
    norms = plot_gradient_norms_by_layer(np.ones((3, 3)), title="t")
    confusion = plot_confusion_and_mistakes([0, 1], [1, 1], np.ones((2, 4)), shape=(2, 2))
    rates = plot_learning_rates({0.1: [1.0, 0.5]}, {0.1: "about right"})
    digits = plot_one_image_per_class(np.ones((2, 4)), [0, 1], shape=(2, 2))
    sums = plot_broadcast_gradients(np.ones((4, 3)), np.full(3, 4.0), np.full((4, 1), 3.0))
    figures = (race, passes, v, memory, costs, moons, norms, confusion, rates, digits, sums)
    for fig in figures:
        assert _smallest_text(fig) >= MIN_FONT_SIZE
