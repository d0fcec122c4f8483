"""The chapters' matplotlib figures, one call each on a slide (the drawing code lives here).

A chapter computes what it teaches on the slide — the timings, the Jacobian — and hands the
numbers to one of these functions, so that a presented code cell stays short enough for a
1280×720 projector. Each function draws into a new pyplot figure and returns it (the inline
backend shows it at the end of the cell; :mod:`autodiff_lab.viz.figures` gives it its text
alternative). Text is never smaller than matplotlib's default 10 pt, readable from the back
of a room; forward and reverse mode have the colours the widgets give them
(:data:`~autodiff_lab.viz.explorers.COLOR_FORWARD`, ``COLOR_REVERSE``).

- :func:`plot_error_vs_step` — the V of a finite difference's error against its step h, with
  the best step of the sweep circled and the truncation and round-off guides dashed.
- :func:`plot_memory_race` — the peak memory of reverse and forward mode as a chain or a
  network grows.
- :func:`plot_checkpoint_costs` — the peak memory and time of a checkpointed gradient against
  the number of segments (the drawing of the checkpoint explorer).
- :func:`plot_moons_training` — a 2-D classifier's decision regions over its data, next to
  its training curves.
- :func:`plot_learning_rates` — the loss curves of one network trained at several learning
  rates, on a log axis, each labelled with its verdict.
- :func:`plot_gradient_norms_by_layer` — each layer's gradient norm during training and the
  last layer's over the first's (vanishing gradients).
- :func:`plot_one_image_per_class` — the first image of each class, side by side.
- :func:`plot_confusion_and_mistakes` — a classifier's confusion matrix and the images it
  got wrong.
- :func:`plot_mode_race` — the CPU time of forward and reverse mode as the inputs (a
  gradient) or the outputs (a Jacobian column) grow, and the ratio of the two.
- :func:`plot_jacobian_passes` — which pass finds each entry of a Jacobian: forward mode a
  column per pass, reverse mode a row per pass.
- :func:`plot_broadcast_gradients` — the upstream gradient of a broadcast sum, with the sums
  that a column bias and a row bias receive under and beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .checkpointing import draw_checkpoint_costs
from .explorers import COLOR_FORWARD, COLOR_GUIDE, COLOR_REVERSE

#: Colours of the error curves, in order: forward difference, central difference (as in
#: :class:`~autodiff_lab.viz.explorers.FiniteDifferenceExplorer`), then any others.
_CURVE_COLOURS = [COLOR_FORWARD, COLOR_REVERSE, "#CC79A7", "#009E73"]
#: Where each curve's best-step label sits, from the circled point (points): below left for
#: the first curve (its V is the higher one), right for the second.
_LABEL_OFFSETS = [(-100, -30), (14, -6), (14, 10), (-100, 10)]

#: The smallest font size (points) a figure drawn here uses.
MIN_FONT_SIZE = 10.0

# What each race is: the size that grows, the passes each mode makes, which mode wins.
_RACES = {
    "inputs": {
        "size": "number of inputs n",
        "time": "CPU time for the gradient (ms)",
        "title": "gradient of a scalar loss Rⁿ → R",
        "forward": "forward mode: n jvp passes",
        "reverse": "reverse mode: 1 backward pass",
        "slower": "forward",
        "win": "reverse wins by a factor ∝ n",
        "guide": "∝ n",
    },
    "outputs": {
        "size": "number of outputs m",
        "time": "CPU time for all dy_k/dt (ms)",
        "title": "one input, many outputs R → Rᵐ",
        "forward": "forward mode: 1 jvp pass",
        "reverse": "reverse mode: m backward passes",
        "slower": "reverse",
        "win": "forward wins by a factor ∝ m",
        "guide": "∝ m",
    },
}


def _measured(name: str, values: Any, n: int) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.shape != (n,) or not np.all(array > 0):
        raise ValueError(
            f"plot_mode_race: {name} must be {n} positive times (one per size), got shape "
            f"{array.shape}"
        )
    return array


def plot_error_vs_step(
    hs: Sequence[float],
    errors: dict[str, Any],
    guides: dict[str, Any] | None = None,
    *,
    ylabel: str = "|error|",
    ylim: tuple[float, float] = (1e-13, 1e1),
) -> Any:
    """|error| of each finite difference in ``errors`` (name -> one error per step of
    ``hs``) against the step h on log–log axes, the best step of the sweep circled and
    labelled with its h and error; ``guides`` (label -> one value per step, e.g. the
    truncation and round-off estimates) drawn as thin black lines. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator

    steps = np.asarray(hs, dtype=float)
    if steps.ndim != 1 or not np.all(steps > 0):
        raise ValueError(f"plot_error_vs_step: hs must be positive steps, got shape {steps.shape}")
    if not 1 <= len(errors) <= len(_CURVE_COLOURS):
        raise ValueError(
            f"plot_error_vs_step: expected 1 to {len(_CURVE_COLOURS)} error curves, got "
            f"{len(errors)}"
        )
    fig, ax = plt.subplots(figsize=(10, 4.4))
    curves = {}
    for name, values in errors.items():
        curve = np.asarray(values, dtype=float)
        if curve.shape != steps.shape:
            raise ValueError(
                f"plot_error_vs_step: {name!r} has {curve.shape} errors for {steps.shape} steps"
            )
        curves[name] = curve
    for (name, curve), colour in zip(curves.items(), _CURVE_COLOURS):
        ax.loglog(steps, curve, ".-", ms=3, color=colour, label=name)
    for (label, values), style in zip((guides or {}).items(), ["--", ":", "-.", "-"]):
        ax.loglog(steps, np.asarray(values, dtype=float), style, color="k", lw=1, label=label)
    for (name, curve), colour, offset in zip(curves.items(), _CURVE_COLOURS, _LABEL_OFFSETS):
        i = int(np.argmin(curve))  # the best step of the sweep, circled: its exact figures
        ax.loglog(steps[i], curve[i], "o", ms=11, mfc="none", mew=1.5, color=colour,
                  label=f"best step, {name}")  # fmt: skip
        ax.annotate(f"h = {steps[i]:.0e}\nerror {curve[i]:.0e}", (steps[i], curve[i]),
                    color=colour, xytext=offset, textcoords="offset points",
                    fontsize=MIN_FONT_SIZE, bbox={"fc": "white", "ec": "none", "alpha": 0.85,
                                                  "pad": 1})  # fmt: skip
    ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(LogLocator(numticks=7))  # every few decades: labels stay apart
    ax.set_xlabel("step $h$")
    ax.set_ylabel(ylabel)
    ax.set_title("Finite differences: the V of truncation vs round-off")
    ax.legend(fontsize=MIN_FONT_SIZE, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig


def plot_mode_race(
    sizes: Sequence[int], forward: Sequence[float], reverse: Sequence[float], *, grows: str
) -> Any:
    """Two panels: the seconds ``forward`` and ``reverse`` mode took at each of ``sizes``
    (log–log, in ms), and the slower mode's time over the faster's with a line ∝ size.

    ``grows="inputs"``: a gradient of f: Rⁿ → R (n jvp passes against one backward pass,
    reverse wins); ``grows="outputs"``: all m derivatives of g: R → Rᵐ (one jvp pass against
    m backward passes, forward wins). Returns the figure.
    """
    import matplotlib.pyplot as plt

    if grows not in _RACES:
        raise ValueError(f"plot_mode_race: grows must be 'inputs' or 'outputs', got {grows!r}")
    race = _RACES[grows]
    sizes = [int(s) for s in sizes]
    t_forward = _measured("forward", forward, len(sizes))
    t_reverse = _measured("reverse", reverse, len(sizes))
    slow, fast = (t_forward, t_reverse) if race["slower"] == "forward" else (t_reverse, t_forward)
    ratio = slow / fast
    fig, (times, ratios) = plt.subplots(1, 2, figsize=(10, 3.8))
    times.loglog(sizes, t_forward * 1e3, "o-", color=COLOR_FORWARD, label=race["forward"])
    times.loglog(sizes, t_reverse * 1e3, "s-", color=COLOR_REVERSE, label=race["reverse"])
    times.set_ylabel(race["time"])
    times.set_title(race["title"])
    name = f"{race['slower']} / {'reverse' if race['slower'] == 'forward' else 'forward'}"
    ratios.loglog(sizes, ratio, "o-", color="#1a1a1a", label=f"measured {name}")
    guide = ratio[0] * np.array(sizes) / sizes[0]
    ratios.loglog(sizes, guide, "--", color=COLOR_GUIDE, lw=1.5, label=race["guide"])
    ratios.set_ylabel(f"{name.replace(' / ', ' time / ')} time")
    ratios.set_title(race["win"])
    for ax in (times, ratios):
        ax.set_xlabel(race["size"])
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.tick_params(axis="x", which="minor", labelbottom=False)
        ax.legend(fontsize=MIN_FONT_SIZE)
    fig.tight_layout()
    return fig


def plot_memory_race(
    sizes: Sequence[int],
    reverse_bytes: Sequence[float],
    forward_bytes: Sequence[float],
    *,
    xlabel: str,
    title: str,
) -> Any:
    """The peak memory (MB) of a reverse-mode and a forward-mode derivative, measured at
    each of ``sizes`` (a chain's length, a network's depth). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for name, values, style, colour in (
        ("reverse mode (grad)", reverse_bytes, "s-", COLOR_REVERSE),
        ("forward mode (jvp)", forward_bytes, "o-", COLOR_FORWARD),
    ):
        if len(values) != len(sizes):
            raise ValueError(
                f"plot_memory_race: {len(values)} {name.split()[0]} peaks for {len(sizes)} sizes"
            )
        ax.plot(sizes, np.asarray(values, dtype=float) / 1e6, style, color=colour, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("peak memory (MB)")
    ax.set_title(title)
    ax.legend(fontsize=MIN_FONT_SIZE)
    return fig


def plot_checkpoint_costs(
    segments: Sequence[int],
    peak_bytes: Sequence[float],
    seconds: Sequence[float],
    *,
    guide: tuple[float, str] | None = None,
) -> Any:
    """:func:`~autodiff_lab.viz.checkpointing.draw_checkpoint_costs` (the checkpoint
    explorer's picture) as a figure of its own. Returns the figure."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(10, 3.8))
    draw_checkpoint_costs(fig, segments, peak_bytes, seconds, guide=guide)
    fig.tight_layout()
    return fig


#: Colours of two classes (Okabe–Ito blue and orange: colour-blind safe).
CLASS_COLOURS = np.array(["#0072B2", "#E69F00"])


def plot_moons_training(
    score_fn: Any,
    X: Any,
    labels01: Any,
    title: str,
    losses: Sequence[float],
    accuracies: Sequence[float],
    *,
    grid: int = 60,
) -> Any:
    """Left: the plane coloured by the class ``score_fn`` predicts (score > 0: class 1) on a
    ``grid`` × ``grid`` mesh around the points ``X`` (n × 2), the points on top in the colour
    of their 0/1 label. Right: the loss and the accuracy of each training step. Returns the
    figure."""
    import matplotlib.pyplot as plt

    X = np.asarray(X, dtype=float)
    labels = np.asarray(labels01, dtype=int)
    if X.ndim != 2 or X.shape[1] != 2 or labels.shape != (len(X),):
        raise ValueError(
            f"plot_moons_training: expected n × 2 points and n labels, got {X.shape} and "
            f"{labels.shape}"
        )
    (x0, y0), (x1, y1) = X.min(axis=0) - 0.5, X.max(axis=0) + 0.5
    gx, gy = np.meshgrid(np.linspace(x0, x1, grid), np.linspace(y0, y1, grid))
    scores = np.asarray(score_fn(np.column_stack([gx.ravel(), gy.ravel()]))).reshape(gx.shape)
    fig, (plane, curves) = plt.subplots(1, 2, figsize=(10, 3.8))
    plane.contourf(gx, gy, scores > 0, levels=[-0.5, 0.5, 1.5], colors=CLASS_COLOURS, alpha=0.3)
    plane.scatter(X[:, 0], X[:, 1], c=CLASS_COLOURS[labels], s=20, edgecolors="black",
                  linewidths=0.5)  # fmt: skip
    plane.set_title(title)
    curves.plot(losses, color="#0072B2", label="loss")
    curves.plot(accuracies, color="#D55E00", linestyle="--", label="accuracy")
    curves.set_xlabel("step")
    curves.legend(fontsize=MIN_FONT_SIZE)
    curves.set_title("training curves")
    fig.tight_layout()
    return fig


#: Colours of the learning-rate curves, smallest rate first (Okabe–Ito: colour-blind safe).
_RATE_COLOURS = ["#56B4E9", "#009E73", "#0072B2", "#E69F00", "#D55E00", "#CC79A7", "#000000"]


def plot_learning_rates(
    losses: Any, verdicts: Any, *, title: str = "the same network trained at several rates"
) -> Any:
    """The loss of each training step for each learning rate (``losses``: rate -> losses),
    on a log axis, the legend naming each rate and its ``verdicts[rate]``. Returns the
    figure."""
    import matplotlib.pyplot as plt

    rates = list(losses)
    if not rates or len(rates) > len(_RATE_COLOURS) or set(verdicts) != set(rates):
        raise ValueError(
            f"plot_learning_rates: 1 to {len(_RATE_COLOURS)} rates, each with a verdict; got "
            f"rates {rates} and verdicts for {list(verdicts)}"
        )
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for rate, colour in zip(rates, _RATE_COLOURS):
        curve = np.asarray(losses[rate], dtype=float)
        ax.plot(range(1, len(curve) + 1), curve, color=colour, label=f"lr {rate}: {verdicts[rate]}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (log scale)")
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=MIN_FONT_SIZE)
    fig.tight_layout()
    return fig


def plot_one_image_per_class(images: Any, labels: Any, *, shape: tuple[int, int]) -> Any:
    """The first of ``images`` (each reshaped to ``shape``) of every class in ``labels``,
    side by side in class order, each titled with its class. Returns the figure."""
    import matplotlib.pyplot as plt

    labels = np.asarray(labels, dtype=int)
    if labels.ndim != 1 or len(images) != len(labels) or not len(labels):
        raise ValueError(
            f"plot_one_image_per_class: one label per image, got {len(images)} images and "
            f"labels of shape {labels.shape}"
        )
    classes = np.unique(labels)
    fig, axes = plt.subplots(1, len(classes), figsize=(0.9 * len(classes) + 1, 1.4))
    for ax, label in zip(np.atleast_1d(axes), classes):
        first = int(np.flatnonzero(labels == label)[0])
        ax.imshow(np.asarray(images[first]).reshape(shape), cmap="gray_r")
        ax.set_title(str(label))
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_gradient_norms_by_layer(norms: Any, *, title: str) -> Any:
    """Left: the gradient norm of each layer's weights at every step (``norms``: steps ×
    layers, the last column the output layer), log scale. Right: the last layer's norm over
    the first's. Returns the figure."""
    import matplotlib.pyplot as plt

    norms = np.asarray(norms, dtype=float)
    if norms.ndim != 2 or norms.shape[1] < 2:
        raise ValueError(
            f"plot_gradient_norms_by_layer: expected steps × layers (2 or more), got {norms.shape}"
        )
    layers = norms.shape[1]
    names = [f"layer {k + 1}" for k in range(layers - 1)] + ["output"]
    fig, (each, ratio) = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, colour in enumerate(plt.cm.viridis(np.linspace(0, 0.9, layers))):
        each.plot(norms[:, k], color=colour, label=names[k])
    each.set_yscale("log")
    each.set_xlabel("step")
    each.set_title(title)
    each.legend(fontsize=MIN_FONT_SIZE, ncol=2)
    ratio.plot(norms[:, -1] / norms[:, 0], color="#D55E00")
    ratio.set_yscale("log")
    ratio.set_xlabel("step")
    ratio.set_title("last layer's ‖dL/dW‖ ÷ first layer's")
    fig.tight_layout()
    return fig


def plot_confusion_and_mistakes(
    true: Any, predicted: Any, images: Any, *, shape: tuple[int, int], show: int = 18
) -> Any:
    """Left: the confusion matrix of ``true`` against ``predicted`` labels (row = true,
    column = predicted, counts written in). Right: the first ``show`` misclassified
    ``images`` (each reshaped to ``shape``), titled "true → predicted". Returns the figure."""
    import matplotlib.pyplot as plt

    true, predicted = np.asarray(true, dtype=int), np.asarray(predicted, dtype=int)
    if true.shape != predicted.shape or len(images) != len(true):
        raise ValueError(
            f"plot_confusion_and_mistakes: {true.shape} true labels, {predicted.shape} "
            f"predicted, {len(images)} images: one of each per example"
        )
    classes = int(max(true.max(), predicted.max())) + 1
    confusion = np.zeros((classes, classes), dtype=int)
    np.add.at(confusion, (true, predicted), 1)
    wrong = np.flatnonzero(true != predicted)
    fig, (matrix, gallery) = plt.subplots(
        1, 2, figsize=(10, 4.4), gridspec_kw={"width_ratios": [1, 1.1]}
    )
    matrix.imshow(confusion, cmap="Blues")
    dark = confusion.max() / 2
    for (i, j), count in np.ndenumerate(confusion):
        if count:
            matrix.text(j, i, count, ha="center", va="center", fontsize=MIN_FONT_SIZE,
                        color="white" if count > dark else "black")  # fmt: skip
    matrix.set_xticks(range(classes))
    matrix.set_yticks(range(classes))
    matrix.set_xlabel("predicted")
    matrix.set_ylabel("true")
    matrix.set_title("confusion matrix")
    gallery.axis("off")
    gallery.set_title(f"the {len(wrong)} misclassified images" if len(wrong) <= show
                      else f"{show} of the {len(wrong)} misclassified images")  # fmt: skip
    cols, rows = 6, 3
    for k, i in enumerate(wrong[:show]):
        box = [
            (k % cols) / cols,
            1 - (k // cols + 1) / (rows + 0.2),
            0.9 / cols,
            0.8 / (rows + 0.2),
        ]
        inset = gallery.inset_axes(box)
        inset.imshow(np.asarray(images[i]).reshape(shape), cmap="gray_r")
        inset.set_title(f"{true[i]} → {predicted[i]}", fontsize=MIN_FONT_SIZE)
        inset.axis("off")
    fig.tight_layout()
    return fig


def plot_jacobian_passes(jacobian: Any) -> Any:
    """The entries of an m×n ``jacobian`` twice, each coloured by the pass that finds it:
    forward mode (a column per pass, n passes) and reverse mode (a row per pass, m passes).
    Returns the figure."""
    import matplotlib.pyplot as plt

    J = np.asarray(jacobian, dtype=float)
    if J.ndim != 2:
        raise ValueError(f"plot_jacobian_passes: expected an m×n matrix, got shape {J.shape}")
    m, n = J.shape
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 2.6 * n + 1), 0.6 * m + 1.4))
    panels = [
        (axes[0], f"forward mode: {n} passes, one column each", np.indices(J.shape)[1]),
        (axes[1], f"reverse mode: {m} passes, one row each", np.indices(J.shape)[0]),
    ]
    for ax, title, which_pass in panels:
        ax.imshow(which_pass, cmap="Pastel2", vmin=0, vmax=7)
        for (i, j), value in np.ndenumerate(J):
            ax.text(j, i, f"{value:.2f}\npass {which_pass[i, j] + 1}", ha="center", va="center")
        ax.set_xticks(range(n), [f"∂x{_subscript(j + 1)}" for j in range(n)])
        ax.set_yticks(range(m), [f"f{_subscript(i + 1)}" for i in range(m)])
        ax.grid(False)
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_broadcast_gradients(
    upstream: Any,
    column_sums: Any,
    row_sums: Any,
    *,
    names: tuple[str, str, str] = ("dL/dY", "b.grad", "c.grad"),
) -> Any:
    """Heat maps of the m×n ``upstream`` gradient of a broadcast sum, each entry written in;
    under it the gradient of the operand broadcast down the rows (``column_sums``: n values,
    the sum over axis 0), beside it that of the operand broadcast across the columns
    (``row_sums``: m values, the sum over axis 1). ``names`` title the three panels (each
    with its array's shape). One colour scale, symmetric about 0. Returns the figure."""
    import matplotlib.pyplot as plt

    G = np.asarray(upstream, dtype=float)
    down, across = np.asarray(column_sums, dtype=float), np.asarray(row_sums, dtype=float)
    if G.ndim != 2 or down.size != G.shape[1] or across.size != G.shape[0]:
        raise ValueError(
            f"plot_broadcast_gradients: an m×n upstream gradient, n column sums and m row "
            f"sums; got shapes {G.shape}, {down.shape} and {across.shape}"
        )
    limit = max(float(np.abs(np.concatenate([G.ravel(), down.ravel(), across.ravel()])).max()),
                1e-12)  # fmt: skip
    ratios = {"width_ratios": [G.shape[1], 1], "height_ratios": [G.shape[0], 1]}
    fig, axes = plt.subplots(2, 2, figsize=(6, 5), gridspec_kw=ratios)
    panels = [
        (axes[0, 0], G, f"{names[0]} {G.shape}: the upstream gradient"),
        (axes[0, 1], across.reshape(-1, 1), f"{names[2]} {across.shape}\nsum over axis 1 →"),
        (axes[1, 0], down.reshape(1, -1), f"{names[1]} {down.shape}: sum over axis 0 ↓"),
    ]
    for ax, values, title in panels:
        ax.imshow(values, cmap="coolwarm", vmin=-limit, vmax=limit)
        for (i, j), value in np.ndenumerate(values):
            ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=MIN_FONT_SIZE)
        ax.set_title(title, fontsize=MIN_FONT_SIZE)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[1, 1].axis("off")
    fig.tight_layout()
    return fig


def _subscript(k: int) -> str:
    return str(k).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


__all__ = [
    "CLASS_COLOURS",
    "MIN_FONT_SIZE",
    "plot_broadcast_gradients",
    "plot_confusion_and_mistakes",
    "plot_gradient_norms_by_layer",
    "plot_learning_rates",
    "plot_moons_training",
    "plot_one_image_per_class",
    "plot_checkpoint_costs",
    "plot_error_vs_step",
    "plot_jacobian_passes",
    "plot_memory_race",
    "plot_mode_race",
]
