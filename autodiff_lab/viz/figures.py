"""matplotlib figures with a text alternative, in every notebook that imports autodiff_lab.

A figure a notebook shows is, by default, an ``image/png`` output, and JupyterLab renders it
as an ``<img>`` with no ``alt``: a screen reader says "image" and nothing more (WCAG 2.1,
success criterion 1.1.1, non-text content). So importing :mod:`autodiff_lab` inside IPython
or Jupyter calls :func:`install`, which makes the shell show each ``matplotlib`` figure
(``plt.show()``, a figure left as a cell's last value, ``display(fig)``) as

- ``text/html``: the same PNG the inline backend draws, in an ``<img alt="…">``;
- ``text/plain``: the same words, for viewers that show no pictures.

The words come from what the figure already says — its title, each panel's title, axis
labels, log scales, legend entries and what is drawn (lines, points, bars, images) — so
they are the same on every machine, whatever the data's round-off. Say what the figure
*shows* (the finding a sighted reader takes from it) with :func:`describe`::

    fig, ax = plt.subplots()
    ax.loglog(hs, errors, label="forward difference")
    describe(fig, "The error falls with h until h is about 1e-8, then rises again.")

Only PNG is changed: ``%config InlineBackend.figure_formats = ["svg"]`` is not honoured
after the import (an SVG would need its own ``<title>``). :func:`uninstall` gives the
shell its own figure display back.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .render import png_img_tag

_SUMMARY = "_autodiff_lab_summary"

# mathtext in labels, said in words a screen reader reads out
_TEX_WORDS = {
    r"\partial": "∂", r"\nabla": "∇", r"\cdot": "·", r"\times": "×", r"\to": "→",
    r"\infty": "∞", r"\approx": "≈", r"\leq": "≤", r"\geq": "≥", r"\sqrt": "√",
    r"\sum": "Σ", r"\ell": "ℓ", r"\epsilon": "ε", r"\varepsilon": "ε", r"\alpha": "α",
    r"\beta": "β", r"\gamma": "γ", r"\delta": "δ", r"\Delta": "Δ", r"\eta": "η",
    r"\theta": "θ", r"\lambda": "λ", r"\mu": "μ", r"\sigma": "σ", r"\tau": "τ",
    r"\phi": "φ", r"\pi": "π", r"\log": "log", r"\exp": "exp", r"\tanh": "tanh",
    r"\sin": "sin", r"\cos": "cos", r"\|": "‖", r"\,": " ", r"\;": " ", r"\!": "",
}  # fmt: skip
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+ ?|\\[|,;!]")
_TEX_FORMAT = re.compile(r"\\(?:mathrm|mathbf|mathit|text|operatorname)\{([^{}]*)\}")


def _tex_word(match: re.Match) -> str:
    """A mathtext command in words; a symbol eats the space after it (as TeX does), a
    function name keeps it (``\\partial x`` is ``∂x``, ``\\log x`` is ``log x``)."""
    command = match.group(0).rstrip(" ")
    word = _TEX_WORDS.get(command, command[1:])
    return word + " " if match.group(0).endswith(" ") and len(word) > 1 else word


_SCRIPT = re.compile(r"([_^])(?:\{([^{}]*)\}|([-+]?[0-9A-Za-z]))")
_SUPERSCRIPTS = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")
_SUBSCRIPTS = str.maketrans("0123456789-+", "₀₁₂₃₄₅₆₇₈₉₋₊")


def _script(match: re.Match) -> str:
    """``x^{2}`` is ``x²`` and ``g_2`` is ``g₂``; a script that is not a number keeps its
    mark (``x_i``, ``e^{-x}`` as ``e^-x``)."""
    mark, body = match.group(1), match.group(2) if match.group(2) is not None else match.group(3)
    if re.fullmatch(r"[-+]?[0-9]+", body):
        return body.translate(_SUPERSCRIPTS if mark == "^" else _SUBSCRIPTS)
    return mark + body


def _math(tex: str) -> str:
    """One ``$…$`` segment of mathtext in words."""
    text = _TEX_FORMAT.sub(r"\1", tex)
    text = _TEX_COMMAND.sub(_tex_word, text)
    return _SCRIPT.sub(_script, text).replace("{", "").replace("}", "")


def plain(label: str) -> str:
    """``label`` without matplotlib's mathtext markup, in what a screen reader can say:
    ``$\\partial L/\\partial x$`` reads ``∂L/∂x``, ``$10^{-8}$`` reads ``10⁻⁸``; text outside
    ``$…$`` is kept as written."""
    segments = label.split("$")
    text = "".join(_math(s) if i % 2 else s for i, s in enumerate(segments))
    return " ".join(text.split())


def describe(fig: Any, summary: str) -> Any:
    """Give ``fig`` a sentence saying what it shows; it leads the figure's text alternative.

    Returns ``fig``. ``summary`` must be true on every machine: a finding, not a printout of
    round-off-sensitive numbers.
    """
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError(f"describe: summary must be a non-empty sentence, got {summary!r}")
    setattr(fig, _SUMMARY, " ".join(summary.split()))
    return fig


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _marks(ax: Any) -> list[str]:
    """What ``ax`` (with its inset axes) draws, in words: "2 lines", "200 points", "10 bars"."""
    from matplotlib.collections import PathCollection, PolyCollection, QuadMesh
    from matplotlib.container import BarContainer

    counts = dict.fromkeys(["line", "point", "bar", "shaded region", "image", "colour map"], 0)
    for a in [ax, *ax.child_axes]:
        counts["line"] += sum(1 for line in a.get_lines() if line.get_visible())
        counts["bar"] += sum(len(c) for c in a.containers if isinstance(c, BarContainer))
        counts["image"] += len(a.images)
        for c in a.collections:
            if isinstance(c, PathCollection):
                counts["point"] += np.shape(c.get_offsets())[0]
            elif isinstance(c, QuadMesh):
                counts["colour map"] += 1
            elif isinstance(c, PolyCollection):
                counts["shaded region"] += 1
    return [_count(n, word) for word, n in counts.items() if n]


def _axes_words(ax: Any) -> str:
    """ "of <y label> against <x label>", then which axes are logarithmic (unless the
    label says so already)."""
    y, x = plain(ax.get_ylabel()), plain(ax.get_xlabel())
    words = f" of {y} against {x}" if y and x else f" of {y}" if y else f" against {x}" if x else ""
    logs = [name for name, label in (("x", x), ("y", y))
            if getattr(ax, f"get_{name}scale")() != "linear" and "log" not in label]  # fmt: skip
    if len(logs) == 2:
        words += ", both axes on log scales"
    elif logs:
        words += f", {logs[0]} on a log scale"
    return words


def _panel(ax: Any, marks: list[str]) -> str:
    """One panel in words: its title, what it draws (``marks``), against which axes, and its
    legend."""
    title = " ".join(plain(ax.get_title(loc)) for loc in ("left", "center", "right")).strip()
    what = ", ".join(marks) or "nothing drawn"
    words = (f"“{title}”: " if title else "") + what + _axes_words(ax)
    legend = ax.get_legend()
    entries = [plain(t.get_text()) for t in legend.get_texts()] if legend is not None else []
    if any(entries):
        words += "; legend: " + "; ".join(e for e in entries if e)
    return words


def _is_blank(ax: Any, marks: list[str]) -> bool:
    """An axes that shows nothing a reader could miss: turned off, or empty and unlabelled."""
    return not ax.get_visible() or not (
        marks or ax.get_title() or (ax.axison and (ax.get_xlabel() or ax.get_ylabel()))
    )


def alt_text(fig: Any) -> str:
    """The figure's text alternative: :func:`describe`'s sentence, then the figure's title
    and each panel (colour bars are named by their label)."""
    marks = {ax: _marks(ax) for ax in fig.get_axes() if not hasattr(ax, "_colorbar")}
    panels = [ax for ax in marks if not _is_blank(ax, marks[ax])]
    colour_bars = [plain(ax.get_ylabel() or ax.get_xlabel()) for ax in fig.get_axes()
                   if hasattr(ax, "_colorbar")]  # fmt: skip
    words = []
    summary = getattr(fig, _SUMMARY, "")
    if summary:
        words.append(summary.rstrip(".") + ".")
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    kind = "Figure" if len(panels) != 1 else "Plot"
    head = f"{kind} “{plain(suptitle)}”" if suptitle else kind
    if len(panels) > 1:
        words.append(f"{head} with {len(panels)} panels.")
        words += [f"Panel {i}, {_panel(ax, marks[ax])}." for i, ax in enumerate(panels, 1)]
    elif panels:
        words.append(f"{head}: {_panel(panels[0], marks[panels[0]])}.")
    else:
        words.append(f"{head} with no axes.")
    words += [f"Colour bar: {label}." for label in colour_bars if label]
    return " ".join(words)


def figure_bundle(fig: Any) -> dict[str, str]:
    """The display bundle of ``fig``: ``text/html`` (the PNG in an ``<img alt>``) and
    ``text/plain`` (the alt text)."""
    from IPython.core.pylabtools import print_figure

    png = print_figure(fig, "png", bbox_inches="tight")
    if not png:  # an empty figure draws nothing, as the inline backend shows nothing
        return {}
    alt = alt_text(fig)
    return {"text/html": png_img_tag(png, alt), "text/plain": alt}


def show_figure(fig: Any) -> None:
    """Publish ``fig`` as :func:`figure_bundle` in the running shell."""
    from IPython.display import publish_display_data

    bundle = figure_bundle(fig)
    if bundle:
        publish_display_data(bundle)


def install(shell: Any) -> None:
    """Show ``matplotlib.figure.Figure`` through :func:`show_figure` in ``shell``.

    Registered by name (matplotlib is not imported until a figure is shown) on the shell's
    ``_ipython_display_`` formatter, which displays an object in place of every other
    format, so the figure is published once, as HTML with alt text, not also as ``image/png``.
    """
    formatter = shell.display_formatter.ipython_display_formatter
    formatter.for_type_by_name("matplotlib.figure", "Figure", show_figure)


def uninstall(shell: Any) -> None:
    """Undo :func:`install`: figures are ``image/png`` outputs again."""
    formatter = shell.display_formatter.ipython_display_formatter
    formatter.deferred_printers.pop(("matplotlib.figure", "Figure"), None)
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    if formatter.type_printers.get(Figure) is show_figure:
        formatter.type_printers.pop(Figure)
