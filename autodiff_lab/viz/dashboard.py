"""``TrainingDashboard``: watch a small network learn a 2-D classification problem.

Three live panels, redrawn every few optimizer steps:

1. the **decision boundary** — the model's class probabilities over the plane, with the
   training points on top;
2. the **loss and accuracy** curves, step by step;
3. the **gradient norm of each layer's weights** on a log scale — when the first layers'
   norms sit orders of magnitude below the last layer's, gradients are vanishing (try
   sigmoid); when they shoot up, they are exploding (try a large learning rate).

Controls: learning rate, hidden width, number of hidden layers, activation, "steps per
Start" (how many MORE steps each press of Start trains, from wherever the network is now;
the line under the controls says it in words), and Start / Stop / Step / Reset buttons.
A new dashboard is untrained, so a first press of Start shows the boundary form and the
loss fall. The controls wrap and keep a minimum width, and the picture shrinks to the
panel, so it stays usable in a ~600 px panel (e.g. beside a slideshow).

(Six sigmoid layers show vanishing gradients: at the start the first layer's norm is
thousands of times below the last's (tests/test_chapters_05.py) and the loss stalls at
ln 2.) The model is a tensor MLP
(2 → hidden × depth → classes) trained full-batch with SGD + momentum on the cross-entropy
loss; the tensor engine keeps a frame (several steps plus a redraw) well under 200 ms.

Headless use (tests, scripts)::

    dash = TrainingDashboard(seed=0)
    dash.run(100)               # 100 steps, synchronously
    dash.history["loss"][-1]    # what the curves show
    dash.image.png              # the current picture (PNG bytes)

The picture is a PNG inside ``widgets.Image`` (no ``widgets.Output``), and it is also in
the cell's output as a static image, so the dashboard still shows something on GitHub, in
nbviewer or in exported HTML.
"""

from __future__ import annotations

import io
import math
import threading
import time

import ipywidgets as widgets
import numpy as np

from .. import data as _data
from .. import nn, optim
from ..graph import no_grad
from ..tensor import Tensor, cross_entropy
from .explorers import Picture
from .render import png_img_tag, static_fallback, widget_view_bundle

#: What the gradient panel (log scale: no room for 0) and the status say when every weight
#: gradient is exactly 0.
ZERO_GRADIENTS_NOTE = "every weight gradient is 0\n(no unit passes a gradient on)"


def nice_limit(top: float) -> float:
    """The smallest 5 × (1, 2 or 5 × 10^k) at or above ``top``: 5 round tick intervals."""
    step = top / 5
    decade = 10 ** math.floor(math.log10(step))
    return 5 * decade * next(m for m in (1, 2, 5, 10) if m * decade >= step * (1 - 1e-12))


#: Okabe–Ito colours (safe for the common colour-vision deficiencies), one per class.
CLASS_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
LOSS_COLOR, ACCURACY_COLOR = "#0072B2", "#D55E00"
#: What the steps slider controls: each press of Start trains this many MORE steps.
STEPS_LABEL = "steps per Start"


def _hex_to_rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)])


class TrainingDashboard(widgets.VBox):
    """Live training of a tensor MLP on 2-D data (moons by default), with controls.

    ``X`` (n, 2) and integer labels ``y`` may be any 2-D problem (e.g.
    ``data.make_spirals()``). ``steps`` is how many more steps each press of Start runs;
    ``steps_per_frame`` how many steps pass between redraws.
    """

    def __init__(
        self,
        X=None,
        y=None,
        *,
        hidden: int = 16,
        depth: int = 2,
        activation: str = "relu",
        lr: float = 0.1,
        momentum: float = 0.9,
        steps: int = 300,
        steps_per_frame: int = 5,
        seed: int = 0,
        grid: int = 60,
        size: tuple[float, float] = (11.0, 3.4),
    ):
        if X is None:
            X, y = _data.make_moons(200, noise=0.15, seed=seed)
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
        if X.ndim != 2 or X.shape[1] != 2 or len(X) != len(y):
            raise ValueError(
                f"TrainingDashboard: needs 2-D points X of shape (n, 2) and n labels, got X "
                f"{X.shape} and y {y.shape}"
            )
        if y.dtype.kind not in "iu" or y.min() < 0:
            raise ValueError("TrainingDashboard: labels y must be class indices 0, 1, 2, ...")
        self.X, self.y = X, y.astype(np.int64)
        self.n_classes = max(int(self.y.max()) + 1, 2)
        self.seed = seed
        self.momentum = momentum
        self.steps_per_frame = steps_per_frame
        self._size = size
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.frame_seconds: list[float] = []  # how long each redraw took (with its steps)

        # the plane the decision boundary is evaluated on
        pad = 0.5
        (x0, y0), (x1, y1) = X.min(axis=0) - pad, X.max(axis=0) + pad
        self._extent = (x0, x1, y0, y1)
        gx, gy = np.meshgrid(np.linspace(x0, x1, grid), np.linspace(y0, y1, grid))
        self._grid_points = np.column_stack([gx.ravel(), gy.ravel()])
        self._grid_shape = gx.shape
        self._class_rgb = np.array(
            [_hex_to_rgb(CLASS_COLORS[k % len(CLASS_COLORS)]) for k in range(self.n_classes)]
        )

        # controls: each keeps a readable minimum width and the rows wrap, so the
        # dashboard stays usable in a narrow panel (~600 px, e.g. beside slides)
        style = {"description_width": "initial"}

        def box() -> widgets.Layout:
            return widgets.Layout(width="auto", min_width="250px", flex="1 1 250px")

        self.lr_slider = widgets.FloatLogSlider(
            value=lr, base=10, min=-3, max=1, step=0.1, description="learning rate",
            readout_format=".3g", style=style, layout=box(),
        )  # fmt: skip
        self.hidden_slider = widgets.IntSlider(
            value=hidden, min=2, max=64, step=1, description="hidden width", style=style,
            layout=box(),
        )  # fmt: skip
        self.depth_slider = widgets.IntSlider(
            value=depth, min=1, max=8, step=1, description="hidden layers", style=style,
            layout=box(),
        )  # fmt: skip
        self.activation_dropdown = widgets.Dropdown(
            options=["relu", "tanh", "sigmoid"], value=activation, description="activation",
            style=style, layout=box(),
        )  # fmt: skip
        self.steps_slider = widgets.IntSlider(
            value=steps, min=10, max=2000, step=10, description=STEPS_LABEL, style=style,
            layout=box(),
        )  # fmt: skip
        self.start_button = widgets.Button(description="Start", icon="play", button_style="success")
        # Stop is greyed out (disabled) while nothing runs: it only looks pressable when it does
        self.stop_button = widgets.Button(
            description="Stop", icon="stop", button_style="warning", disabled=True
        )
        self.step_button = widgets.Button(
            description="Step", icon="step-forward", tooltip="train 1 more step"
        )
        self.reset_button = widgets.Button(
            description="Reset", icon="refresh", tooltip="a fresh, untrained network"
        )
        self.status = widgets.HTML()
        # the picture shrinks with the panel (never wider than it), keeping its proportions
        self.image = Picture(layout=widgets.Layout(max_width="100%", height="auto"))

        self.start_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())
        self.step_button.on_click(lambda _: self.run(1))
        self.reset_button.on_click(lambda _: self.reset())
        self.lr_slider.observe(self._on_lr, names="value")
        self.hidden_slider.observe(lambda _: self.reset(), names="value")
        self.depth_slider.observe(lambda _: self.reset(), names="value")
        self.activation_dropdown.observe(lambda _: self.reset(), names="value")
        self.steps_slider.observe(lambda _: self._describe_start(), names="value")

        wrap = widgets.Layout(flex_flow="row wrap", align_items="center", width="100%")
        controls = widgets.VBox(
            [
                widgets.HBox([self.lr_slider, self.hidden_slider, self.depth_slider], layout=wrap),
                widgets.HBox([self.activation_dropdown, self.steps_slider], layout=wrap),
                widgets.HBox(
                    [self.start_button, self.stop_button, self.step_button, self.reset_button],
                    layout=widgets.Layout(flex_flow="row wrap"),
                ),
            ]
        )
        super().__init__([controls, self.status, self.image])
        self._build_figure()
        self.reset()

    # --- model and training ------------------------------------------------------------

    def reset(self):
        """A fresh model (current width and activation, same seed) and empty history."""
        self.stop()
        with self._lock:
            self.model = nn.TensorMLP(
                2,
                [self.hidden_slider.value] * self.depth_slider.value + [self.n_classes],
                activation=self.activation_dropdown.value,
                rng=self.seed,
            )
            self.optimizer = optim.SGD(
                self.model.parameters(), lr=self.lr_slider.value, momentum=self.momentum
            )
            self._layer_names = [name for name, p in self.model.named_parameters() if p.ndim == 2]
            self.history = {"loss": [], "accuracy": [], "grad_norms": []}
            self.frame_seconds = []
            self._background = None
            self._render()

    def _on_lr(self, change):
        with self._lock:
            self.optimizer.lr = float(change["new"])

    def _train_step(self):
        """One full-batch step: zero_grad, forward, cross-entropy, backward, SGD update."""
        self.optimizer.zero_grad()
        logits = self.model(Tensor(self.X))
        loss = cross_entropy(logits, self.y)
        loss.backward()
        norms = [
            float(np.linalg.norm(p.grad)) if p.grad is not None else 0.0
            for p in self.model.parameters()
            if p.ndim == 2
        ]
        self.optimizer.step()
        self.history["loss"].append(loss.item())
        self.history["accuracy"].append(float(np.mean(logits.data.argmax(axis=1) == self.y)))
        self.history["grad_norms"].append(norms)

    def gradients_vanished(self) -> bool:
        """Whether every weight gradient of the latest step is exactly 0 (e.g. every ReLU
        is dead after a too-large step: nothing can learn any more)."""
        latest = self.history["grad_norms"][-1:]
        return bool(latest) and not any(latest[0])

    @property
    def step_count(self) -> int:
        return len(self.history["loss"])

    def step(self):
        """One optimizer step, then redraw."""
        self.run(1)

    def run(self, steps: int | None = None):
        """Train ``steps`` steps (default: the steps slider) synchronously, redrawing every
        ``steps_per_frame`` steps and at the end."""
        steps = self.steps_slider.value if steps is None else int(steps)
        done = 0
        while done < steps:
            n = min(self.steps_per_frame, steps - done)
            self._frame(n)
            done += n

    def _frame(self, n: int):
        start = time.perf_counter()
        with self._lock:
            for _ in range(n):
                self._train_step()
            self._render()
        self.frame_seconds.append(time.perf_counter() - start)

    def start(self):
        """Train in the background (the kernel stays free for the Stop button)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.stop_button.disabled = False
        target = self.steps_slider.value
        self._thread = threading.Thread(target=self._run_in_background, args=(target,), daemon=True)
        self._thread.start()

    def _run_in_background(self, steps: int):
        done = 0
        while done < steps and not self._stop.is_set():
            n = min(self.steps_per_frame, steps - done)
            self._frame(n)
            done += n
            time.sleep(0.01)  # let button clicks and slider moves through
        self.stop_button.disabled = True

    def stop(self):
        """Stop a background run (waits for the current frame to finish)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None
        self.stop_button.disabled = True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def fps(self) -> float:
        """Frames per second over the recent redraws (each frame = ``steps_per_frame`` steps)."""
        recent = self.frame_seconds[-20:]
        return len(recent) / sum(recent) if recent else 0.0

    # --- drawing -------------------------------------------------------------------------

    def _build_figure(self):
        """Create the figure and its artists once; frames only update their data."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=self._size, dpi=80, facecolor="white")
        self._canvas = FigureCanvasAgg(fig)
        fig.subplots_adjust(left=0.02, right=0.96, bottom=0.15, top=0.88, wspace=0.45)
        ax_plane, ax_curves, ax_grads = fig.subplots(1, 3)
        # "animated" artists are left out of the cached background and drawn every frame
        self._boundary = ax_plane.imshow(
            np.ones(self._grid_shape + (3,)), origin="lower", extent=self._extent,
            aspect="auto", interpolation="bilinear", animated=True,
        )  # fmt: skip
        self._points = ax_plane.scatter(
            self.X[:, 0], self.X[:, 1], c=self._class_rgb[self.y], s=14, edgecolors="black",
            linewidths=0.5, animated=True,
        )  # fmt: skip
        ax_plane.set_xticks([])
        ax_plane.set_yticks([])
        ax_plane.set_title("decision boundary")
        (self._loss_line,) = ax_curves.plot([], [], color=LOSS_COLOR, animated=True)
        ax_curves.set_xlabel("step")
        ax_curves.set_ylabel("cross-entropy loss", color=LOSS_COLOR)
        ax_curves.set_title("loss and accuracy")
        ax_acc = ax_curves.twinx()
        (self._acc_line,) = ax_acc.plot([], [], color=ACCURACY_COLOR, linestyle="--", animated=True)
        # the accuracy axis (0 to 1) shares the loss axis' 5 tick intervals: one set of grid
        # lines serves both
        ax_acc.set_ylim(0, 1)
        ax_acc.set_yticks(np.linspace(0, 1, 6))
        ax_acc.set_ylabel("accuracy", color=ACCURACY_COLOR)
        ax_grads.set_yscale("log")
        ax_grads.set_xlabel("step")
        ax_grads.set_title("gradient norm per layer (weights)")
        # a log axis cannot show a norm of 0: when every gradient is 0 the panel says so
        self._zero_note = ax_grads.text(
            0.5, 0.5, "", transform=ax_grads.transAxes, ha="center", va="center",
            fontsize=11, color="#1a1a1a", animated=True,
        )  # fmt: skip
        self._fig, self._ax_plane = fig, ax_plane
        self._ax_curves, self._ax_acc, self._ax_grads = ax_curves, ax_acc, ax_grads
        self._grad_lines: list = []
        self._background = None  # the cached picture of everything that is not animated

    def _set_up_axes(self):
        """Choose axis limits for the coming frames and cache the static background.

        Limits change rarely (the run outgrows the step axis, the loss jumps above its
        axis, or a gradient norm leaves its decade range); only then is the whole figure
        redrawn. Every other frame redraws just the animated artists (blitting).
        """
        ax = self._ax_grads
        if len(self._grad_lines) != len(self._layer_names):
            for line in self._grad_lines:
                line.remove()
            from matplotlib import colormaps

            shades = colormaps["viridis"](np.linspace(0.0, 0.85, len(self._layer_names)))
            self._grad_lines = []
            for k in range(len(self._layer_names)):
                last = k == len(self._layer_names) - 1
                (line,) = ax.plot(
                    [], [], color=shades[k], animated=True,
                    label=f"layer {k + 1}" + (" (output)" if last else ""),
                )  # fmt: skip
                self._grad_lines.append(line)
            ax.legend(
                handles=self._grad_lines, loc="upper right", fontsize=8, frameon=False,
                ncol=1 if len(self._grad_lines) <= 4 else 2,
            )  # fmt: skip
        self._step_limit = max(self.steps_slider.value, self.step_count, 10)
        self._step_limit = int(np.ceil(self._step_limit * 1.25 / 10) * 10)
        for axis in (self._ax_curves, ax):
            axis.set_xlim(0, self._step_limit)
        top = max(self.history["loss"], default=1.0)
        self._loss_limit = nice_limit(1.15 * top) if np.isfinite(top) and top > 0 else 10.0
        self._ax_curves.set_ylim(0, self._loss_limit)
        self._ax_curves.set_yticks(np.linspace(0, self._loss_limit, 6))
        norms = np.asarray(self.history["grad_norms"], dtype=float)
        norms = norms[np.isfinite(norms) & (norms > 0)]
        lo, hi = (norms.min(), norms.max()) if norms.size else (1e-3, 1.0)
        self._norm_limits = (10 ** np.floor(np.log10(lo) - 1), 10 ** np.ceil(np.log10(hi) + 1))
        ax.set_ylim(*self._norm_limits)
        self._canvas.draw()
        self._background = self._canvas.copy_from_bbox(self._fig.bbox)

    def _limits_outgrown(self) -> bool:
        if self._background is None or self.step_count > self._step_limit:
            return True
        latest = self.history["loss"][-1:] or [0.0]
        if not np.isfinite(latest[0]) or latest[0] > self._loss_limit:
            return True
        norms = np.asarray(self.history["grad_norms"][-1:], dtype=float)
        norms = norms[np.isfinite(norms) & (norms > 0)]
        lo, hi = self._norm_limits
        return bool(norms.size and (norms.min() < lo or norms.max() > hi))

    def _probabilities(self) -> np.ndarray:
        with no_grad():
            logits = self.model(Tensor(self._grid_points)).data
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def _render(self):
        """Update the animated artists from the model and history; encode the PNG."""
        from PIL import Image

        probs = self._probabilities()
        rgb = probs @ self._class_rgb  # each pixel mixes the class colours by probability
        self._boundary.set_data((0.55 + 0.45 * rgb).reshape(self._grid_shape + (3,)))
        steps = np.arange(1, self.step_count + 1)
        self._loss_line.set_data(steps, self.history["loss"])
        self._acc_line.set_data(steps, self.history["accuracy"])
        norms = np.array(self.history["grad_norms"], dtype=float).reshape(
            self.step_count, len(self._layer_names)
        )
        for k, line in enumerate(self._grad_lines):
            line.set_data(steps, norms[:, k])
        self._zero_note.set_text(ZERO_GRADIENTS_NOTE if self.gradients_vanished() else "")

        if self._limits_outgrown() or len(self._grad_lines) != len(self._layer_names):
            self._set_up_axes()
            for k, line in enumerate(self._grad_lines):
                line.set_data(steps, norms[:, k])
        self._canvas.restore_region(self._background)
        for axis, artist in [
            (self._ax_plane, self._boundary), (self._ax_plane, self._points),
            (self._ax_curves, self._loss_line), (self._ax_acc, self._acc_line),
            *((self._ax_grads, line) for line in self._grad_lines),
            (self._ax_grads, self._zero_note),
        ]:  # fmt: skip
            axis.draw_artist(artist)
        width, height = self._canvas.get_width_height()
        picture = Image.frombuffer("RGBA", (width, height), self._canvas.buffer_rgba())
        buffer = io.BytesIO()
        picture.convert("RGB").save(buffer, format="png", compress_level=1)
        self._png = buffer.getvalue()
        self._describe_start()

    def _summary(self) -> str:
        if not self.step_count:
            return f"TrainingDashboard: untrained {self.model_description} on {len(self.X)} points"
        return (
            f"TrainingDashboard: {self.model_description}, step {self.step_count}, "
            f"loss {self.history['loss'][-1]:.4f}, "
            f"accuracy {100 * self.history['accuracy'][-1]:.1f} %"
        )

    @property
    def model_description(self) -> str:
        sizes = [2] + [self.hidden_slider.value] * self.depth_slider.value + [self.n_classes]
        return f"MLP {'-'.join(map(str, sizes))} ({self.activation_dropdown.value})"

    def start_hint(self) -> str:
        """What the next press of Start does, in words (shown under the controls)."""
        more = "" if not self.step_count else " more"
        start = "from this untrained network" if not self.step_count else "from here"
        return f"Start trains {self.steps_slider.value}{more} steps {start}"

    def _describe_start(self):
        self.start_button.tooltip = self.start_hint()
        self.status.value = self._status_html()
        self.image.show(self._png, self.alt_text())

    def alt_text(self) -> str:
        """The picture in words: its three panels and the current numbers."""
        state = self._summary().replace("TrainingDashboard: ", "")
        return (
            "Three panels: the decision boundary over the plane with the training points "
            "coloured by class; the loss and accuracy curves by step; the gradient norm of "
            f"each layer's weights by step (log scale). Now: {state}."
        )

    def _status_html(self) -> str:
        text = self._summary().replace("TrainingDashboard: ", "")
        if self.gradients_vanished():
            text += "; " + ZERO_GRADIENTS_NOTE.replace("\n", " ")
        return (
            f"<span style='font-family: monospace'>{text}</span>"
            f"<br><span>{self.start_hint()} (Reset: back to untrained).</span>"
        )

    _ipython_display_ = None  # ipywidgets 7.8: display through _repr_mimebundle_ (fallback)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the current picture for viewers without a kernel."""
        bundle = widget_view_bundle(self)
        png = self.image.png
        bundle["image/png"] = png
        return static_fallback(bundle, self._summary(), png_img_tag(png, self._summary()))

    def __repr__(self) -> str:
        return f"<{self._summary()}>"
