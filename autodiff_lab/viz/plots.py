"""The chapters' matplotlib figures, one call each on a slide (the drawing code lives here).

A chapter computes what it teaches on the slide — the timings, the Jacobian — and hands the
numbers to one of these functions, so that a presented code cell stays short enough for a
1280×720 projector. Each function draws into a new pyplot figure and returns it (the inline
backend shows it at the end of the cell; :mod:`autodiff_lab.viz.figures` gives it its text
alternative). Text is never smaller than matplotlib's default 10 pt, readable from the back
of a room; forward and reverse mode have the colours the widgets give them
(:data:`~autodiff_lab.viz.explorers.COLOR_FORWARD`, ``COLOR_REVERSE``).

- :func:`plot_mode_race` — the CPU time of forward and reverse mode as the inputs (a
  gradient) or the outputs (a Jacobian column) grow, and the ratio of the two.
- :func:`plot_jacobian_passes` — which pass finds each entry of a Jacobian: forward mode a
  column per pass, reverse mode a row per pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .explorers import COLOR_FORWARD, COLOR_GUIDE, COLOR_REVERSE

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


def _subscript(k: int) -> str:
    return str(k).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


__all__ = ["MIN_FONT_SIZE", "plot_jacobian_passes", "plot_mode_race"]
