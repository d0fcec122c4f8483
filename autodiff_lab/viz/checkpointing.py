"""``CheckpointExplorer``: what checkpointing keeps, what it recomputes, and what it costs.

A chain of ``n`` steps ``h ← 0.9 tanh(h) + 0.1`` on a vector is split into ``k`` segments
(the slider). Every segment but the last is wrapped in :func:`autodiff_lab.checkpoint`, so
the forward pass records one node per segment and the backward pass runs the segment again;
the last segment is recorded as usual (as ``torch.utils.checkpoint.checkpoint_sequential``
does). ``k = 1`` is plain backprop.

The widget shows

1. the chain as a graph in rows of :data:`ROW_LENGTH` values (as tall at every ``k``):
   values the graph **keeps** (segment boundaries, and every value of the last segment)
   filled blue, values **recomputed** in the backward pass orange with dashed borders, the
   steps run twice as orange dashed arrows, each segment's input with a thick border; its
   first line states the counts and the next two the key, so the static picture says them.
   The SVG carries a text alternative (``<title>``/``<desc>``, ``role="img"``,
   ``aria-labelledby``) naming what is drawn;
2. peak memory (``tracemalloc``) and the time of one gradient, measured live on this machine
   for every segment count up to the slider's, as a plot (the current ``k`` marked);
3. a caption with the counts (exact) and the measurements (this machine, this run).

Memory follows ``k + 3n/k`` arrays up to a constant factor (the boundaries, plus segment
graphs of three arrays per step), lowest near ``k = √(3n)`` (``k = 4`` or ``8`` for ``n = 16``);
the steps run twice, ``n - ⌈n/k⌉``, grow with ``k``, and so does the time.

Headless use::

    explorer = CheckpointExplorer(n=16)
    explorer.slider.value = 4
    explorer.results[4]          # {"peak_bytes": ..., "seconds": ..., "recomputed": 12}
    explorer.svg                 # the drawing shown

The slider is an ipywidgets ``SelectionSlider`` (keyboard operable: focus it, then the
arrow keys). Where no kernel runs, the cell's output shows the drawing as a static picture.
"""

from __future__ import annotations

import gc
import html
import math
import tracemalloc
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np

from ..extend import checkpoint
from ..ops import tanh
from ..tensor import Tensor
from .explorers import Picture, best_time, figure_png
from .render import render_svg, static_fallback, svg_img_tag, widget_view_bundle

#: Okabe–Ito colours: kept values (blue), recomputed steps (vermillion/orange).
KEPT_FILL, KEPT_LINE = "#cfe3f3", "#0072B2"
RECOMPUTED_FILL, RECOMPUTED_LINE = "#fbe3cf", "#D55E00"
MEMORY_COLOR, TIME_COLOR = "#0072B2", "#D55E00"


def chain_step(h):
    """One step of the chain: ``0.9 tanh(h) + 0.1`` (three recorded operations)."""
    return 0.9 * tanh(h) + 0.1


def segment_lengths(n: int, segments: int) -> list[int]:
    """Steps per segment: ``⌈n/k⌉`` each, the last one taking what is left."""
    if n < 1 or not 1 <= segments <= n:
        raise ValueError(
            f"CheckpointExplorer: need 1 <= segments <= n steps, got segments={segments}, n={n}"
        )
    size = math.ceil(n / segments)
    return [min(size, n - start) for start in range(0, n, size)]


def _run(h, steps: int):
    for _ in range(steps):
        h = chain_step(h)
    return h


def checkpointed_gradient(x: np.ndarray, n: int, segments: int) -> np.ndarray:
    """d sum(chain(x)) / dx with every segment but the last under :func:`checkpoint`."""
    lengths = segment_lengths(n, segments)
    leaf = h = Tensor(x, requires_grad=True)
    for steps in lengths[:-1]:
        h = checkpoint(lambda h, steps=steps: _run(h, steps))(h)
    _run(h, lengths[-1]).sum().backward()
    return leaf.grad


def peak_bytes(fn) -> int:
    """The most memory Python allocated while ``fn()`` ran (``tracemalloc``), in bytes.

    The garbage collector starts from zero counts, so it runs at the same points of every
    run; what exists already is frozen for that collection (it is not traced either way), so
    it costs milliseconds even in a large process, where a full collection can take a second.
    """
    gc.freeze()
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.unfreeze()


def describe(n: int, segments: int) -> tuple[str, str]:
    """(title, description) of the drawing for ``n`` steps in ``segments`` segments."""
    lengths = segment_lengths(n, segments)
    k = len(lengths)
    recomputed = n - lengths[-1]
    kept = k + lengths[-1]  # the input of every segment, and the last segment's values
    title = (
        f"Checkpointed chain of {n} steps in {k} segment{'s' if k > 1 else ''}: "
        f"{kept} values kept, {recomputed} steps recomputed"
    )
    if k == 1:
        desc = (
            f"One segment: plain backprop. All {n} steps are recorded and kept; none is recomputed."
        )
    else:
        desc = (
            f"Segments 1 to {k - 1} ({', '.join(str(s) for s in lengths[:-1])} steps) are "
            f"checkpointed: only their inputs are kept (blue), and their {recomputed} steps "
            f"are recomputed in the backward pass (orange, dashed). The last segment "
            f"({lengths[-1]} steps) is recorded and kept as usual (blue)."
        )
    return title, desc


#: Values per row of the drawing: the chain wraps, so its height depends on n, never on k
#: (one row per segment made k = 16 sixteen rows tall).
ROW_LENGTH = 9


def counts_line(n: int, segments: int) -> str:
    """The drawing's first line: what is kept and what runs twice, counted exactly."""
    lengths = segment_lengths(n, segments)
    k, recomputed = len(lengths), n - lengths[-1]
    kept = k + lengths[-1]
    return (
        f"{k} segment{'s' if k > 1 else ''}: {kept} of {n + 1} values kept, "
        f"{recomputed} of {n} steps run twice"
    )


#: The drawing's key, one line each (the static picture carries it: no caption there).
LEGEND = (
    "blue: kept until the backward pass · orange, dashed: recomputed in it",
    "orange arrow: a step run twice · thick border: a segment's input",
)


def chain_dot(n: int, segments: int, row_length: int = ROW_LENGTH) -> str:
    """DOT source of the chain x, h1 … hn in rows of ``row_length`` values: kept values blue,
    recomputed values orange and dashed; each arrow is a step, orange and dashed when the
    backward pass runs it again; a segment's input (its checkpoint) has a thick border. The
    graph's label states the counts and the legend, so the static picture says them too."""
    if row_length < 2:
        raise ValueError(f"chain_dot: row_length must be at least 2, got {row_length}")
    lengths = segment_lengths(n, segments)
    k = len(lengths)
    label = counts_line(n, k)
    key = "\\l".join(LEGEND)
    lines = [
        "digraph checkpointing {",
        '  graph [rankdir=TB, nodesep=0.22, ranksep=0.3, fontname="Helvetica", fontsize=14,'
        f' bgcolor="white", labelloc=t, labeljust=l, label="{label}\\l{key}\\l"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=14,'
        " height=0.4, width=0.6, margin=0.04];",
        "  edge [arrowsize=0.6];",
    ]
    kept = f'fillcolor="{KEPT_FILL}", color="{KEPT_LINE}"'
    again = (
        f'fillcolor="{RECOMPUTED_FILL}", color="{RECOMPUTED_LINE}", style="rounded,filled,dashed"'
    )
    names, styles, steps = ["x"], [kept], []  # steps: (from, to, run twice?)
    inputs = {"x"} if k > 1 else set()
    for s, length in enumerate(lengths):
        checkpointed = s < k - 1
        for i in range(length):
            name = f"h{len(names)}"
            boundary = checkpointed and i == length - 1  # the next segment's input: kept
            styles.append(kept if not checkpointed or boundary else again)
            steps.append((names[-1], name, checkpointed))
            names.append(name)
            if boundary:
                inputs.add(name)
    for name, style in zip(names, styles):
        width = 3.5 if name in inputs else 1.5
        lines.append(f'  {name} [label="{name}", {style}, penwidth={width}];')
    rows = [names[i : i + row_length] for i in range(0, len(names), row_length)]
    for r, row in enumerate(rows):
        lines.append("  { rank=same; " + "; ".join(row) + "; }")
        if r:  # rows stacked, left-aligned; the real step bends down to the next row
            lines.append(f"  {rows[r - 1][0]} -> {row[0]} [style=invis, weight=10];")
    for a, b, twice in steps:
        wrap = " constraint=false," if any(b == row[0] for row in rows) else ""
        look = (
            f'color="{RECOMPUTED_LINE}", style=dashed, penwidth=2' if twice else 'color="#333333"'
        )
        lines.append(f"  {a} -> {b} [{wrap.strip()} {look}];".replace("[ ", "["))
    lines.append("}")
    return "\n".join(lines)


def _with_text_alternative(svg: str, title: str, desc: str) -> str:
    """Put ``<title>``/``<desc>`` first in the SVG, tied to it by ``aria-labelledby``."""
    head_end = svg.index(">", svg.index("<svg")) + 1
    head = svg[:head_end]
    head = head.replace("<svg", '<svg role="img" aria-labelledby="ckpt-title ckpt-desc"', 1)
    alt = (
        f'<title id="ckpt-title">{html.escape(title)}</title>'
        f'<desc id="ckpt-desc">{html.escape(desc)}</desc>'
    )
    return head + alt + svg[head_end:]


def draw_checkpoint_costs(
    fig,
    segments: Sequence[int],
    peak_bytes: Sequence[float],
    seconds: Sequence[float],
    *,
    current: int | None = None,
    guide: tuple[float, str] | None = None,
) -> list:
    """Two panels on ``fig`` against the number of segments k: the peak memory (MB) and the
    time (ms) of one checkpointed gradient, as measured. ``current``: the k to circle (the
    explorer's slider); ``guide``: a k and its label, marked with a dashed line (e.g. √(3n),
    where the memory model is smallest). Returns the two axes. The explorer draws with it, and
    chapter 07 through :func:`~autodiff_lab.viz.plots.plot_checkpoint_costs`."""
    ks = [int(k) for k in segments]
    if not (len(ks) == len(peak_bytes) == len(seconds)) or not ks:
        raise ValueError(
            f"draw_checkpoint_costs: {len(ks)} segment counts, {len(peak_bytes)} peaks and "
            f"{len(seconds)} times: one of each per k"
        )
    panels = (
        (np.asarray(peak_bytes) / 1e6, "peak memory (MB)", MEMORY_COLOR, "s-",
         "Memory: k boundaries + one segment of n/k"),
        (np.asarray(seconds) * 1e3, "time of one gradient (ms)", TIME_COLOR, "o-",
         "Time: up to one extra forward pass"),
    )  # fmt: skip
    axes = []
    for i, (ys, label, color, style, title) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, 2, i)
        ax.plot(ks, ys, style, color=color)
        if current is not None:
            at = ks.index(current)
            ax.plot([ks[at]], [ys[at]], "o", ms=12, mfc="none", mec="black")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("segments k")
        ax.set_ylabel(label)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        axes.append(ax)
    if guide is not None:
        axes[0].axvline(guide[0], color="#999999", ls="--", label=guide[1])
        axes[0].legend()
    return axes


class CheckpointExplorer(widgets.VBox):
    """Slider over the number of segments of a checkpointed chain: drawing and live costs.

    ``n``: steps in the chain; ``width``: numbers in the vector each step works on (large,
    so that arrays dominate the memory); ``segments``: the slider's options (default: every
    ``k`` that splits ``n`` evenly); ``repeats``: timing runs per ``k`` (best one kept).
    Measurements are in :attr:`results`, keyed by ``k``.
    """

    def __init__(
        self,
        n: int = 16,
        *,
        width: int = 1_000,
        segments: Sequence[int] | None = None,
        repeats: int = 5,
        value: int | None = None,
        seed: int = 0,
    ):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"CheckpointExplorer: n must be a positive int, got {n!r}")
        options = sorted({int(k) for k in (segments or [k for k in range(1, n + 1) if n % k == 0])})
        for k in options:
            segment_lengths(n, k)  # each option must be valid
        self.n, self.width, self.repeats = n, int(width), int(repeats)
        self.x = np.random.default_rng(seed).uniform(-1.0, 1.0, self.width)
        #: k -> {"peak_bytes", "seconds", "recomputed", "kept"}: what was measured.
        self.results: dict[int, dict] = {}
        start = value if value is not None else options[min(len(options) - 1, len(options) // 2)]
        self.slider = widgets.SelectionSlider(
            options=options,
            value=start,
            description="segments k",
            continuous_update=False,
            style={"description_width": "initial"},
            layout=widgets.Layout(width="420px"),
        )
        self.drawing = widgets.HTML()
        self.caption = widgets.HTML()
        self.image = Picture(layout=widgets.Layout(max_width="100%"))
        self.slider.observe(lambda change: self.update(), names="value")
        super().__init__([self.slider, self.drawing, self.caption, self.image])
        self.update()

    @property
    def segments(self) -> int:
        return int(self.slider.value)

    def measure(self, k: int) -> dict:
        """Peak memory and time of one checkpointed gradient with ``k`` segments."""
        lengths = segment_lengths(self.n, k)

        def once():
            return checkpointed_gradient(self.x, self.n, k)

        once()  # warm up (first allocations, caches) before measuring
        result = {
            "peak_bytes": peak_bytes(once),
            "seconds": best_time(once, self.repeats),
            "recomputed": self.n - lengths[-1],
            "kept": len(lengths) + lengths[-1],
        }
        self.results[k] = result
        return result

    def update(self) -> None:
        """Draw the current ``k``, measure every option up to it not measured yet, replot."""
        k = self.segments
        for option in self.slider.options:
            if option <= k and option not in self.results:
                self.measure(option)
        title, desc = describe(self.n, k)
        self.title, self.description = title, desc
        self.svg = _with_text_alternative(render_svg(chain_dot(self.n, k)), title, desc)
        self.drawing.value = (
            f'<div aria-label="{html.escape(title)}">'
            f"{svg_img_tag(self.svg, title + '. ' + desc)}</div>"
        )
        now = self.results[k]
        base = self.results[min(self.results)]
        self.caption.value = (
            "<div style='font-family:Arial,sans-serif'>"
            f"<b>{k}</b> segment{'s' if k > 1 else ''}: {now['kept']} of {self.n + 1} values "
            f"kept, <b>{now['recomputed']}</b> of {self.n} steps run twice. Measured on this "
            f"machine: peak memory <b>{now['peak_bytes'] / 1e6:.2f} MB</b> "
            f"({now['peak_bytes'] / base['peak_bytes']:.2f}× plain backprop's), one gradient "
            f"in <b>{now['seconds'] * 1e3:.1f} ms</b> "
            f"({now['seconds'] / base['seconds']:.2f}× plain backprop's).</div>"
        )
        png = figure_png(
            self._draw,
            size=(8.5, 3.2),
            margins={"left": 0.09, "right": 0.98, "bottom": 0.16, "top": 0.88, "wspace": 0.3},
        )
        ks = sorted(self.results)
        self.image.show(
            png,
            "Two plots against the number of segments k ("
            + ", ".join(map(str, ks))
            + "): peak memory and the time of one gradient, both measured on this machine; "
            f"the current k = {k} is circled.",
        )

    def _draw(self, fig) -> None:
        ks = sorted(self.results)
        peaks = [self.results[k]["peak_bytes"] for k in ks]
        seconds = [self.results[k]["seconds"] for k in ks]
        draw_checkpoint_costs(fig, ks, peaks, seconds, current=self.segments)

    def _summary(self) -> str:
        return f"CheckpointExplorer: {self.title}"

    _ipython_display_ = None  # ipywidgets 7.8: display through _repr_mimebundle_ (fallback)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the drawing (no measurements) for viewers without a kernel."""
        bundle = widget_view_bundle(self)
        picture = svg_img_tag(self.svg, self.title + ". " + self.description)
        return static_fallback(bundle, self._summary(), picture)

    def __repr__(self) -> str:
        return f"<{self._summary()}>"
