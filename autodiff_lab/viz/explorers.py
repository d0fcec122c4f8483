"""Two small explorers the chapters use: finite-difference error, and the cost of each mode.

- :class:`FiniteDifferenceExplorer`: how wrong are ``(f(x+h) - f(x))/h`` and
  ``(f(x+h) - f(x-h))/(2h)`` as the step h shrinks? Truncation error falls with h,
  round-off error grows as h gets tiny: the log-log plot is a V. Autodiff has neither.
- :class:`CostExplorer`: measured time for a full gradient of f: Rⁿ→R (n forward passes
  vs one reverse pass) and a full Jacobian of g: R→Rᵐ (one forward pass vs m reverse
  passes), as n and m grow.

Plots are drawn with matplotlib into PNG images inside ``widgets.Image`` (no
``widgets.Output``, so nothing leaks into a notebook's stored outputs), and the current
image is also part of the output as ``image/png`` for viewers without a kernel.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import numpy as np

from .. import ops
from ..dual import Dual
from ..graph import backpropagate
from ..value import Value
from .render import png_img_tag, static_fallback, widget_view_bundle

#: Line colours (Okabe–Ito): forward mode / forward differences, reverse mode / central.
COLOR_FORWARD = "#E69F00"
COLOR_REVERSE = "#0072B2"
COLOR_GUIDE = "#999999"
COLOR_EXACT = "#009E73"


def figure_png(
    draw: Callable, *, size=(7.5, 4.2), large: bool = False, margins: dict | None = None
) -> bytes:
    """Run ``draw(fig)`` on a fresh matplotlib Figure and return it as PNG bytes.

    Uses the Agg canvas directly (no pyplot), so nothing is shown by accident. Fixed
    ``margins`` (``Figure.subplots_adjust`` arguments) instead of ``tight_layout``: this
    is redrawn at every slider move and must be quick.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fontsize = 15 if large else 10
    import matplotlib as mpl

    with mpl.rc_context({"font.size": fontsize, "axes.titlesize": fontsize + 1}):
        fig = Figure(figsize=size, dpi=100, facecolor="white")
        FigureCanvasAgg(fig)
        fig.subplots_adjust(**(margins or {"left": 0.1, "right": 0.97, "bottom": 0.14, "top": 0.9}))
        draw(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", facecolor="white", metadata={"Software": None})
    return buffer.getvalue()


class Picture(widgets.HTML):
    """A PNG picture with its text alternative: ``<img alt="…">`` inside an HTML widget.

    ipywidgets' ``Image`` cannot carry alt text the same way in the two versions the course
    runs under (8.1 only shows a tooltip as the image's title; 7.8, which the live slideshow
    needs, has no tooltip on an Image at all), so the picture is an ``<img>`` with a data
    URI, which every version and the static fallback render alike. ``png`` holds the bytes,
    ``alt`` the text; :meth:`show` sets both.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.png = b""
        self.alt = ""
        # the class ipywidgets gives an Image: page styles and tests find the picture by it
        self.add_class("widget-image")

    def show(self, png: bytes, alt: str) -> None:
        """Show ``png`` with the text alternative ``alt`` (one update of the view)."""
        self.png, self.alt = bytes(png), alt
        self.value = png_img_tag(self.png, alt, "max-width:100%;height:auto;display:block")


class _PlotWidget(widgets.VBox):
    """A VBox whose picture is a PNG in ``self.image``; static fallback in the output."""

    _ipython_display_ = None  # ipywidgets 7.8: display through _repr_mimebundle_ (fallback)
    image: Picture

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the current plot as a PNG for viewers without a kernel."""
        data = widget_view_bundle(self)
        png = self.image.png
        data["image/png"] = png
        return static_fallback(data, self._summary(), png_img_tag(png, self._summary()))

    def __repr__(self) -> str:
        return f"<{self._summary()}>"

    def alt_text(self) -> str:
        """The plot in words: what it shows and its key numbers (its text alternative)."""
        return f"Plot: {self._summary()}"


def _powers_of_ten(ax, axis: str, every: int = 2):
    """Log-axis ticks at every ``every``-th power of ten, labelled 1e-8 (no math text)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    exponents = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ticks = [10.0**e for e in exponents if e % every == 0]
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"1e{round(math.log10(v)):d}"))
    target.set_minor_locator(NullLocator())


def autodiff_derivative(f: Callable, x: float) -> float:
    """df/dx at x by reverse mode: evaluate f on a Value and run backward()."""
    leaf = Value(float(x))
    out = f(leaf)
    if not isinstance(out, Value):
        return 0.0  # f did not depend on x
    out.backward()
    return float(leaf.grad)


class FiniteDifferenceExplorer(_PlotWidget):
    """Error of finite differences vs the step h, next to the exact autodiff derivative.

    ``f``: a function of one number, written with the course's math functions
    (``autodiff_lab.sin``, ``exp``…) so it also runs on a ``Value``. ``x``: where to
    differentiate (a slider moves it). ``exact``: the derivative as a function, if you
    know it; otherwise reverse-mode autodiff computes it (exact up to float rounding).

    The plot shows |estimate − exact| for the forward difference (f(x+h) − f(x))/h and
    the central difference (f(x+h) − f(x−h))/(2h), h from 1 down to 1e-16. Right of the
    best h truncation error dominates (slope 1 and 2); left of it round-off: f(x+h) and
    f(x) agree in almost all digits, and dividing their difference by h magnifies the
    rounding error ~ ε/h.
    """

    def __init__(
        self,
        f: Callable,
        x: float = 1.0,
        exact: Callable | None = None,
        *,
        x_range: tuple[float, float] | None = None,
        hs: Sequence[float] | None = None,
        large: bool = False,
    ):
        if not callable(f):
            raise TypeError(f"FiniteDifferenceExplorer: f must be a function, got {f!r:.40}")
        self.f = f
        self.exact = exact
        self.large = large
        self.hs = np.logspace(0, -16, 97) if hs is None else np.asarray(hs, dtype=float)
        if np.any(self.hs <= 0):
            raise ValueError("FiniteDifferenceExplorer: every step h must be > 0")
        x = float(x)
        lo, hi = x_range if x_range is not None else (x - 2.0, x + 2.0)
        if not lo <= x <= hi:
            raise ValueError(f"FiniteDifferenceExplorer: x = {x} is outside x_range {(lo, hi)}")
        self.slider = widgets.FloatSlider(
            value=x,
            min=lo,
            max=hi,
            step=(hi - lo) / 200,
            description="x",
            continuous_update=False,
            readout_format=".3f",
            layout=widgets.Layout(width="420px"),
        )
        self.image = Picture()
        self.caption = widgets.HTML()
        self.slider.observe(lambda change: self.update(), names="value")
        super().__init__([self.slider, self.caption, self.image])
        self.update()

    @property
    def x(self) -> float:
        return float(self.slider.value)

    def derivative(self, x: float) -> float:
        """The exact derivative at x (given, or by autodiff)."""
        return float(self.exact(x)) if self.exact is not None else autodiff_derivative(self.f, x)

    def errors(self, x: float) -> dict[str, np.ndarray]:
        """|estimate − exact| for each h, for the forward and the central difference."""
        f, exact = self.f, self.derivative(x)
        fx = float(f(x))
        forward = np.array([(float(f(x + h)) - fx) / h for h in self.hs])
        central = np.array([(float(f(x + h)) - float(f(x - h))) / (2 * h) for h in self.hs])
        return {"forward": np.abs(forward - exact), "central": np.abs(central - exact)}

    def update(self):
        """Recompute for the slider's x and redraw."""
        x = self.x
        self.exact_derivative = self.derivative(x)
        self.current_errors = self.errors(x)
        self.best = {}
        for name, err in self.current_errors.items():
            i = int(np.argmin(np.where(err > 0, err, np.inf))) if np.any(err > 0) else 0
            self.best[name] = (float(self.hs[i]), float(err[i]))
        png = figure_png(
            self._draw,
            size=(9.5, 4.2),
            large=self.large,
            margins={"left": 0.09, "right": 0.69, "bottom": 0.13, "top": 0.9},
        )
        (hf, ef), (hc, ec) = self.best["forward"], self.best["central"]
        self.caption.value = (
            f"<div style='font-family:Arial,sans-serif'>x = {x:.3f}: exact derivative "
            f"<b>{self.exact_derivative:.12g}</b> "
            f"({'given' if self.exact else 'reverse-mode autodiff'}). Best forward difference: "
            f"error {ef:.1e} at h = {hf:.0e}; best central difference: error {ec:.1e} at "
            f"h = {hc:.0e}. Smaller h is <i>not</i> better.</div>"
        )
        self.image.show(png, self.alt_text())

    def _draw(self, fig):
        ax = fig.add_subplot(1, 1, 1)
        hs = self.hs
        for name, color, marker in (
            ("forward", COLOR_FORWARD, "o"),
            ("central", COLOR_REVERSE, "s"),
        ):
            err = self.current_errors[name]
            shown = np.where(err > 0, err, np.nan)  # an exact 0 has no place on a log axis
            ax.loglog(hs, shown, marker=marker, ms=3, lw=1.5, color=color,
                      label=f"{name} difference")  # fmt: skip
            h_best, e_best = self.best[name]
            ax.loglog([h_best], [e_best], marker=marker, ms=10, mfc="none", mec=color, mew=2)
        eps = np.finfo(float).eps
        scale = max(abs(self.exact_derivative), 1.0)
        ax.loglog(hs, eps * scale / hs, ls=":", color=COLOR_GUIDE, label="round-off ~ ε/h")
        ax.loglog(hs, scale * hs, ls="--", color=COLOR_GUIDE, lw=1, label="truncation ~ h")
        ax.loglog(hs, scale * hs**2, ls="-.", color=COLOR_GUIDE, lw=1, label="truncation ~ h²")
        ax.axhline(eps * scale, color=COLOR_EXACT, lw=2,
                   label="autodiff: exact up to rounding (ε)")  # fmt: skip
        ax.set_xlabel("step h")
        ax.set_ylabel("|estimate − exact|")
        ax.set_ylim(1e-18, 1e2)
        ax.set_xlim(2.0, 0.5e-16)  # h shrinks to the right
        _powers_of_ten(ax, "x")
        _powers_of_ten(ax, "y", every=3)
        ax.set_title(f"Finite differences at x = {self.x:.3f}: f'(x) = {self.exact_derivative:.6g}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))

    def alt_text(self) -> str:
        """The plot in words: the axes, the curves and where each difference is best."""
        (hf, ef), (hc, ec) = self.best["forward"], self.best["central"]
        return (
            f"Log-log plot of |estimate − exact| against the step h (1 down to 1e-16) at "
            f"x = {self.x:.3f}: the forward difference is best at h = {hf:.0e} (error "
            f"{ef:.1e}), the central difference at h = {hc:.0e} (error {ec:.1e}); both errors "
            "grow again for smaller h (round-off), while autodiff stays at rounding level."
        )

    def _summary(self) -> str:
        return (
            f"FiniteDifferenceExplorer at x = {self.x:.3f}: exact derivative "
            f"{self.exact_derivative:.6g}; error of forward and central differences vs h"
        )


# --- cost of forward vs reverse mode -------------------------------------------------------


def chain_of_products(xs):
    """f: Rⁿ → R,  f(x) = Σᵢ tanh(xᵢ · xᵢ₊₁)  (each input used twice; cost ∝ n)."""
    total = 0.0
    for a, b in zip(xs, list(xs[1:]) + list(xs[:1]), strict=True):
        total = total + ops.tanh(a * b)
    return total


def recurrence(t, m: int):
    """g: R → Rᵐ,  y₁ = sin(2t),  yₖ = sin(yₖ₋₁ + t)  (each output builds on the one before).

    Every output depends on a chain as long as its index, as the layers of a network do.
    """
    outputs, y = [], t
    for _ in range(m):
        y = ops.sin(y + t)
        outputs.append(y)
    return outputs


def gradient_forward_mode(f: Callable, x: Sequence[float]) -> list[float]:
    """∇f by forward mode: one pass per input, seeding that input's tangent with 1."""
    n = len(x)
    grad = []
    for i in range(n):
        duals = [Dual(float(v), 1.0 if j == i else 0.0) for j, v in enumerate(x)]
        out = f(duals)
        grad.append(float(out.tangent) if isinstance(out, Dual) else 0.0)
    return grad


def gradient_reverse_mode(f: Callable, x: Sequence[float]) -> list[float]:
    """∇f by reverse mode: one forward recording and one backward pass, for all inputs."""
    leaves = [Value(float(v)) for v in x]
    out = f(leaves)
    if isinstance(out, Value):
        out.backward()
    return [leaf.grad for leaf in leaves]


def jacobian_forward_mode(g: Callable, t: float, m: int) -> list[float]:
    """dg/dt for g: R → Rᵐ by forward mode: one pass gives every output's derivative."""
    outs = g(Dual(float(t), 1.0), m)
    return [float(o.tangent) if isinstance(o, Dual) else 0.0 for o in outs]


def jacobian_reverse_mode(g: Callable, t: float, m: int) -> list[float]:
    """dg/dt for g: R → Rᵐ by reverse mode: record g once, then one backward pass per output."""
    leaf = Value(float(t))
    outs = g(leaf, m)
    column = []
    for out in outs:
        found = (
            backpropagate(out, 1.0, accumulate=False, wanted=[leaf])
            if isinstance(out, Value)
            else {}
        )
        column.append(float(found.get(leaf, 0.0)))
    return column


def best_time(fn: Callable, repeats: int) -> float:
    """The fastest of ``repeats`` runs (seconds): the least disturbed by other work."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


class CostExplorer(_PlotWidget):
    """Measured cost of forward vs reverse mode as the number of inputs/outputs grows.

    Left: the full gradient of f: Rⁿ → R — forward mode needs n passes (one per input),
    reverse mode one. Right: the full Jacobian (a column) of g: R → Rᵐ — forward mode
    needs one pass, reverse mode m (one per output). Both grow the same way with the
    problem size, so the ratio tracks n (or m): reverse mode wins for a scalar loss of
    many parameters, forward mode for few inputs and many outputs.

    ``f(xs)`` takes a list of numbers and ``g(t, m)`` returns a list of m numbers, both
    written with the course's math functions (defaults: :func:`chain_of_products` and
    :func:`recurrence`). ``sizes``: the n (and m) values measured; the slider picks the
    largest. Press *measure* to time again. Results are in :attr:`results`.
    """

    def __init__(
        self,
        f: Callable | None = None,
        g: Callable | None = None,
        *,
        sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
        repeats: int = 3,
        large: bool = False,
        seed: int = 0,
    ):
        self.f = f or chain_of_products
        self.g = g or recurrence
        self.sizes = sorted({int(s) for s in sizes})
        if not self.sizes or self.sizes[0] < 1:
            raise ValueError(f"CostExplorer: sizes must be positive ints, got {sizes!r}")
        self.repeats = int(repeats)
        self.large = large
        self.rng = np.random.default_rng(seed)
        self.slider = widgets.SelectionSlider(
            options=self.sizes,
            value=self.sizes[-1],
            description="up to n, m",
            continuous_update=False,
            style={"description_width": "initial"},
            layout=widgets.Layout(width="420px"),
        )
        self.measure_button = widgets.Button(description="measure again")
        self.measure_button.on_click(lambda _: self.measure())
        self.slider.observe(lambda change: self.measure(), names="value")
        self.caption = widgets.HTML()
        self.image = Picture()
        super().__init__(
            [widgets.HBox([self.slider, self.measure_button]), self.caption, self.image]
        )
        self.measure()

    def measure(self):
        """Time both modes for every size up to the slider's, check they agree, redraw."""
        sizes = [s for s in self.sizes if s <= self.slider.value]
        grad = {"size": sizes, "forward": [], "reverse": []}
        jac = {"size": sizes, "forward": [], "reverse": []}
        worst = 0.0
        for n in sizes:
            x = self.rng.uniform(-1, 1, n).tolist()
            fwd = gradient_forward_mode(self.f, x)
            rev = gradient_reverse_mode(self.f, x)
            worst = max(worst, float(np.max(np.abs(np.subtract(fwd, rev)))))
            grad["forward"].append(
                best_time(lambda x=x: gradient_forward_mode(self.f, x), self.repeats)
            )
            grad["reverse"].append(
                best_time(lambda x=x: gradient_reverse_mode(self.f, x), self.repeats)
            )
            t = float(self.rng.uniform(-1, 1))
            fwd = jacobian_forward_mode(self.g, t, n)
            rev = jacobian_reverse_mode(self.g, t, n)
            worst = max(worst, float(np.max(np.abs(np.subtract(fwd, rev)))))
            jac["forward"].append(
                best_time(lambda t=t, n=n: jacobian_forward_mode(self.g, t, n), self.repeats)
            )
            jac["reverse"].append(
                best_time(lambda t=t, n=n: jacobian_reverse_mode(self.g, t, n), self.repeats)
            )
        #: {"gradient": {...}, "jacobian": {...}}: sizes and best times (s) for each mode,
        #: and the largest difference between the two modes' derivatives.
        self.results = {"gradient": grad, "jacobian": jac, "max_difference": worst}
        png = figure_png(
            self._draw,
            size=(10, 4.2),
            large=self.large,
            margins={"left": 0.07, "right": 0.98, "bottom": 0.13, "top": 0.9, "wspace": 0.25},
        )
        n = sizes[-1]
        g_ratio = grad["forward"][-1] / grad["reverse"][-1]
        j_ratio = jac["reverse"][-1] / jac["forward"][-1]
        self.caption.value = (
            "<div style='font-family:Arial,sans-serif'>"
            f"At n = {n}: the gradient by forward mode took <b>{g_ratio:.1f}×</b> as long as "
            f"by reverse mode; at m = {n}: the Jacobian by reverse mode took "
            f"<b>{j_ratio:.1f}×</b> as long as by forward mode. Both modes agree to "
            f"{worst:.0e}. Times: best of {self.repeats}, measured on this machine. Read the "
            "slopes: the n-pass curves grow like n² (n passes, each through a graph of size "
            "~n), the one-pass curves like n; the constant per operation differs between "
            "the two engines.</div>"
        )
        self.image.show(png, self.alt_text())

    def _draw(self, fig):
        from matplotlib.ticker import NullLocator

        panels = (
            ("gradient", "gradient of f: Rⁿ → R", "n inputs",
             ("n forward passes", "1 reverse pass")),
            ("jacobian", "Jacobian of g: R → Rᵐ", "m outputs",
             ("1 forward pass", "m reverse passes")),
        )  # fmt: skip
        for i, (key, title, xlabel, (fwd_label, rev_label)) in enumerate(panels, start=1):
            ax = fig.add_subplot(1, 2, i)
            data = self.results[key]
            ms = np.array(data["forward"]) * 1e3
            mr = np.array(data["reverse"]) * 1e3
            ax.loglog(
                data["size"], ms, "o-", color=COLOR_FORWARD, label=f"forward mode: {fwd_label}"
            )
            ax.loglog(
                data["size"], mr, "s-", color=COLOR_REVERSE, label=f"reverse mode: {rev_label}"
            )
            ax.set_xscale("log", base=2)
            ax.set_xticks(data["size"], [str(s) for s in data["size"]])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_minor_locator(NullLocator())
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("time (ms)")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize="small", loc="upper left", framealpha=0.9)

    def _summary(self) -> str:
        return (
            "CostExplorer: measured time of forward vs reverse mode for a gradient "
            "(f: Rⁿ → R) and a Jacobian (g: R → Rᵐ)"
        )
