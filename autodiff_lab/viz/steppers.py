"""Step through reverse mode and forward mode one node at a time.

:class:`BackwardStepper` replays ``loss.backward()``: it walks the graph in the order
``backward()`` uses (reversed :func:`~autodiff_lab.graph.topological_order`) and at each
step runs one node's local rules, showing ``upstream grad × local derivative =
contribution`` on every input edge and the gradients accumulated so far.

:class:`ForwardStepper` walks the same kind of graph in forward (topological) order,
pushing a tangent along with each value: ``tangent = Σ local derivative × input tangent``.

Both compute every number with the engine's own rules (``fn.vjp`` / ``fn.jvp`` in
:mod:`autodiff_lab.primitives`), applied to the nodes' data, and never touch the nodes'
``.grad``. They are ipywidgets (a ``VBox``): buttons, a slider over the steps and an
``html`` panel with the picture and the explanation. Drive them from Python too::

    stepper = BackwardStepper(loss)
    stepper.slider.value = 4      # or stepper.step(), stepper.back(), stepper.reset()
    stepper.current               # the node whose rule ran at this step

Where no kernel runs (GitHub, nbviewer, an HTML export) the output shows the current
picture and explanation as static HTML instead of a slider.
"""

from __future__ import annotations

import bisect
import html as html_lib
import inspect
import numbers
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..graph import backpropagate, topological_order
from ..kinds import is_node
from ..tensor import Tensor
from ..value import Value
from .drawing import (
    GraphView,
    combined_order,
    fmt_number,
    is_tensor,
    op_text,
    summarize,
)
from .render import render_svg, static_fallback, svg_img_tag, widget_view_bundle


def name_nodes(order, limit: int = 28) -> dict:
    """A short name for every node: its label, else the expression that computed it.

    ``order`` must list each node after its inputs (a topological order), so every
    expression is built from names already known: no recursion, any depth. Expressions
    longer than ``limit`` become ``op#i`` (the operation and the node's position).
    """
    names = {}
    for i, node in enumerate(order):
        if node.label:
            names[node] = node.label
            continue
        if node._fn is None:
            shape = getattr(node.data, "shape", ())
            names[node] = f"const{shape}" if is_tensor(node) else fmt_number(node.data)
            continue
        args = [names[p] for p in node._prev]
        symbol = op_text(node)
        notation = node._fn.notation
        if notation == "infix" and len(args) == 2:
            text = f"({args[0]} {symbol} {args[1]})"
        elif notation == "power":
            text = f"{args[0]}{symbol}"
        elif notation == "prefix":
            text = f"{symbol[0]}{args[0]}"
        else:  # a function call: its arguments need no extra parentheses
            args = [a[1:-1] if a.startswith("(") and a.endswith(")") else a for a in args]
            text = f"{symbol}({', '.join(args)})"
        names[node] = text if len(text) <= limit else f"{symbol}#{i}"
    return names


def _fmt(x) -> str:
    return summarize(x) if isinstance(x, np.ndarray) and x.ndim > 0 else fmt_number(x)


def _sum_text(terms) -> str:
    """``a + b − c`` for scalars (a negative term is subtracted); tensors joined by ``+``."""
    text = _fmt(terms[0])
    for t in terms[1:]:
        if isinstance(t, float) and t < 0:
            text += f" − {_fmt(-t)}"
        else:
            text += f" + {_fmt(t)}"
    return text


def _plain(x):
    """A number from a rule's result (numpy scalars and 0-d arrays become floats)."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return x
    return float(x)


@dataclass
class Contribution:
    """What one input edge receives at one step."""

    position: int  # which input of the node (index into node._prev)
    parent: Any
    incoming: Any  # reverse: the upstream grad; forward: the input's tangent
    local: float | None  # the local derivative (scalars), None for tensors
    share: Any  # incoming × local (reverse: what the input receives)
    before: Any = None  # reverse: the input's gradient before this share
    after: Any = None  # reverse: … and after it


@dataclass
class Event:
    """One step: the node processed and what flowed along its edges."""

    node: Any
    amount: Any  # reverse: the node's complete gradient; forward: its tangent
    contributions: list[Contribution] = field(default_factory=list)


_BOX_STYLE = (
    "background:#ffffff;color:#1a1a1a;border:1px solid #cccccc;border-radius:4px;"
    "padding:8px 10px;font-family:Arial,Helvetica,sans-serif;font-size:{size}px;"
    "line-height:1.4;max-width:100%;overflow-x:auto"
)
#: The play toggle's two labels. Every glyph is in DejaVu Sans, the font Debian's Chromium
#: falls back to (U+23F8 "⏸" is in none of Debian's default fonts and shows as a box).
PLAY_LABEL, PAUSE_LABEL = "▶ play", "❚❚ pause"

_TABLE_STYLE = "border-collapse:collapse;margin:6px 0;color:#1a1a1a"
_CELL = "border:1px solid #cccccc;padding:2px 8px;text-align:right"


class _Stepper(widgets.VBox):
    """Buttons, a slider over the steps and an HTML panel; subclasses fill in the steps."""

    _kind = "stepper"

    def __init__(self, view: GraphView, events: list[Event], *, large: bool):
        self.view = view
        self.events = events
        self.large = large
        self._names = name_nodes(combined_order(view.roots))
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=len(events),
            step=1,
            description="step",
            continuous_update=False,
            layout=widgets.Layout(width="360px"),
        )
        self.back_button = widgets.Button(description="◀ step back", tooltip="previous step")
        self.step_button = widgets.Button(description="step ▶", tooltip="next step")
        self.reset_button = widgets.Button(description="⟲ reset", tooltip="back to step 0")
        # A named toggle (not ipywidgets' Play, whose icon-only buttons have no accessible
        # name): the kernel steps every `play_interval` seconds until the end or a press.
        self.play_button = widgets.ToggleButton(
            value=False,
            description=PLAY_LABEL,
            tooltip="play the steps one by one (press to pause)",
        )
        self.play_interval = 0.9
        self.play_button.observe(self._on_play, names="value")
        for button in (self.back_button, self.step_button, self.reset_button, self.play_button):
            button.layout = widgets.Layout(width="auto")
        self.back_button.on_click(lambda _: self.back())
        self.step_button.on_click(lambda _: self.step())
        self.reset_button.on_click(lambda _: self.reset())
        self.html = widgets.HTML()
        self.step_of = {event.node: i + 1 for i, event in enumerate(events)}
        self._layout = self._make_layout()
        self.slider.observe(lambda change: self._show(change["new"]), names="value")
        controls = widgets.HBox(
            [self.reset_button, self.back_button, self.play_button, self.step_button, self.slider]
        )
        super().__init__([controls, self.html])
        self._show(0)

    # --- driving ---------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """The number of steps (the slider goes from 0, before any, to ``steps``)."""
        return len(self.events)

    def step(self):
        """Go one step forward (stays at the last step)."""
        self.slider.value = min(self.slider.value + 1, self.slider.max)

    def back(self):
        """Go one step back (stays at step 0)."""
        self.slider.value = max(self.slider.value - 1, 0)

    def reset(self):
        """Go back to step 0."""
        self.slider.value = 0

    def _on_play(self, change) -> None:
        """The play toggle: start stepping in the background (from 0 when at the end)."""
        if not change["new"]:
            self.play_button.description = PLAY_LABEL
            return
        if self.slider.value >= self.slider.max:
            self.slider.value = 0
        self.play_button.description = PAUSE_LABEL
        threading.Thread(target=self._play_steps, daemon=True).start()

    def _play_steps(self) -> None:
        while self.play_button.value and self.slider.value < self.slider.max:
            time.sleep(self.play_interval)
            if self.play_button.value:
                self.step()
        self.play_button.value = False

    @property
    def current(self):
        """The node processed at the current step (None at step 0)."""
        k = self.slider.value
        return self.events[k - 1].node if k > 0 else None

    def name(self, node) -> str:
        """The name the explanations use for ``node`` (its label or its expression)."""
        if node not in self._names:  # not in this graph: name it on its own
            return name_nodes(topological_order(node))[node]
        return self._names[node]

    # --- drawing ---------------------------------------------------------------------

    def _frames_changing(self, node) -> set:
        """The steps at which ``node``'s text may change (subclasses say which)."""
        return {0, self.steps}

    def _make_layout(self):
        """Lay the graph out once, with each box as wide as its widest text at any step.

        Every step is then drawn at these positions: boxes stay put while stepping.
        """
        widest = {}
        for node in self.view.nodes:
            lines_by_step = [self._value_text(node, k) for k in sorted(self._frames_changing(node))]
            widest[node] = [max(column, key=len) for column in zip(*lines_by_step, strict=True)]
        edge_text = {}
        for node in self.view.nodes:
            if node._fn is not None and node in self.step_of:
                for position in range(len(node._prev)):
                    edge_text[node, position] = self._edge_label(node, position, self.step_of[node])
        return self.view.layout(
            stacked=True,
            value_text=widest.__getitem__,
            edge_label=lambda node, position: edge_text.get((node, position), ""),
        )

    def frame_dot(self, k: int) -> str:
        """DOT source of the picture at step ``k`` (pinned positions: engine ``nop2``)."""
        return self.view.dot(
            state=lambda node: self._state(node, k),
            value_text=lambda node: self._value_text(node, k),
            edge_label=lambda node, position: self._edge_label(node, position, k),
            layout=self._layout,
            stacked=True,
        )

    def frame_svg(self, k: int) -> str:
        """The picture at step ``k`` as SVG."""
        return render_svg(self.frame_dot(k), engine="nop2")

    def _show(self, k: int):
        self.html.value = self.frame_html(k)

    def frame_html(self, k: int, *, inline: bool = True) -> str:
        """The HTML panel for step ``k``: explanation above, picture below.

        ``inline``: the SVG as markup (the live widget: crisp, and its nodes can be found
        by CSS class); otherwise as an ``<img>`` data URI (the static fallback, which
        survives the HTML sanitizing of untrusted notebooks).
        """
        size = 18 if self.large else 13
        # shrink to the panel's width when wider (the whole graph stays in view)
        fit = "max-width:100%;height:auto"
        svg = self.frame_svg(k)
        if inline:
            picture = svg.replace("<svg ", f'<svg style="{fit}" ', 1)
        else:
            picture = svg_img_tag(svg, f"{type(self).__name__} at step {k}", fit)
        return (
            f'<div class="autodiff-lab-{self._kind}" style="{_BOX_STYLE.format(size=size)}">'
            f"{self.explain(k)}<div>{picture}</div></div>"
        )

    _ipython_display_ = None  # ipywidgets 7.8: display through _repr_mimebundle_ (fallback)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the current frame as static HTML for viewers without a
        kernel (GitHub, nbviewer, a notebook opened before running it)."""
        data = widget_view_bundle(self)
        picture = self.frame_html(self.slider.value, inline=False)
        return static_fallback(data, self._summary(), picture)

    def _summary(self) -> str:
        k = self.slider.value
        where = f" — {self.name(self.current)}" if self.current is not None else ""
        return f"{type(self).__name__}: step {k} of {self.steps}{where}"

    def __repr__(self) -> str:
        return f"<{self._summary()}>"

    def _table(self, header: list[str], rows: list[list[str]]) -> str:
        head = "".join(f'<th style="{_CELL};text-align:center">{h}</th>' for h in header)
        body = "".join(
            "<tr>" + "".join(f'<td style="{_CELL}">{c}</td>' for c in row) + "</tr>" for row in rows
        )
        return f'<table style="{_TABLE_STYLE}"><tr>{head}</tr>{body}</table>'

    def explain(self, k: int) -> str:
        """The explanation (HTML) of step ``k``: the start, or what the step's node did."""
        if k == 0:
            return self._explain_start()
        return self._explain_step(k, self.events[k - 1], self._head(k))

    def _head(self, k: int) -> str:
        """The title of step ``k`` (k >= 1): its number and the node processed."""
        node = self.events[k - 1].node
        head = f"<b>Step {k} of {self.steps}: {self._code(node)}</b>"
        if node not in self.view.index:
            head += " <i>(not drawn: outside the node budget)</i>"
        return head

    def _code(self, node) -> str:
        return f"<code>{html_lib.escape(self.name(node))}</code>"

    def _edge_label(self, node, position: int, k: int) -> str:
        """The text on input edge ``position`` of ``node`` at step ``k`` (its share)."""
        if k == 0 or self.events[k - 1].node is not node:
            return ""
        for c in self.events[k - 1].contributions:
            if c.position == position:
                if c.local is None:
                    return f"→ {_fmt(c.share)}"
                return f"{self._product(c)}\\n= {_fmt(c.share)}"
        return ""


class _BackwardRecorder:
    """Records what :func:`~autodiff_lab.graph.backpropagate` does (it is the engine's
    ``trace``): one :class:`Event` per node, one :class:`Contribution` per share sent."""

    def __init__(self):
        self.events: list[Event] = []

    def visit(self, node, grad) -> None:
        amount = None if grad is None else _shown(grad, node)
        self.events.append(Event(node, amount))
        self._locals = None
        if grad is not None and node._fn is not None and not is_tensor(node):
            # scalar rules are linear in g: the pullback of 1 is each local derivative
            inputs = [p.data for p in node._prev]
            wanted = [p.requires_grad for p in node._prev]
            self._locals = node._fn.pullback(1.0, node.data, inputs, node._params or {}, wanted)

    def share(self, node, position: int, share, before, after) -> None:
        parent = node._prev[position]
        local = None if self._locals is None else _plain(self._locals[position])
        self.events[-1].contributions.append(
            Contribution(
                position,
                parent,
                self.events[-1].amount,
                local,
                _shown(share, parent),
                None if before is None else _shown(before, parent),
                _shown(after, parent),
            )
        )


def _shown(x, node):
    """A gradient as the explanations show it: an array for a tensor, else a float."""
    return np.asarray(x) if is_tensor(node) else _plain(x)


class BackwardStepper(_Stepper):
    """``loss.backward()`` one node at a time: see the chain rule run through the graph.

    The slider goes over the nodes in the order ``backward()`` processes them (reversed
    topological order: a node comes after every node that uses it, so its gradient is
    complete when its turn comes). At step k the k-th node (vermillion) applies its local
    rule: each input edge is labelled ``upstream grad × local derivative = contribution``;
    inputs that just received a share have a blue border; a value used twice shows its two
    contributions adding up; nodes no gradient has reached yet are grey. The last step
    shows exactly the gradients ``loss.backward()`` computes.

    ``loss``: a ``Value``, or a ``Tensor`` with one entry (small tensor graphs show shapes).
    ``max_nodes``: node budget of the drawing (bigger graphs are partly collapsed).
    ``large``: lecture fonts.
    """

    _kind = "backward-stepper"

    def __init__(self, loss, *, max_nodes: int | None = 200, large: bool = False):
        if not is_node(loss):
            raise TypeError(
                "BackwardStepper: expected the loss as a Value or Tensor (a value of a "
                f"recorded graph), got {type(loss).__name__} {loss!r:.60}"
            )
        if is_tensor(loss):
            if loss.data.size != 1:
                raise ValueError(
                    f"BackwardStepper: the loss must be a scalar, got a tensor of shape "
                    f"{loss.data.shape}; reduce it first (.sum() or .mean())"
                )
            if not loss.requires_grad:
                raise ValueError(
                    "BackwardStepper: this tensor does not require grad (no input had "
                    "requires_grad=True), so backward has nothing to do"
                )
        self.loss = loss
        #: The nodes in the order they are processed: reversed ``topological_order(loss)``.
        self.order = list(reversed(topological_order(loss)))
        self.seed = np.ones_like(loss.data) if is_tensor(loss) else 1.0
        self.events = self._run_backward()
        self._index_history()
        view = GraphView(loss, max_nodes=max_nodes, large=large)
        super().__init__(view, self.events, large=large)

    def _run_backward(self) -> list[Event]:
        """Run the engine's backpropagation, recording what every node sends to its inputs.

        :func:`autodiff_lab.graph.backpropagate` itself runs (without touching ``.grad``)
        and reports each step to a :class:`_BackwardRecorder`.
        """
        recorder = _BackwardRecorder()
        backpropagate(self.loss, self.seed, accumulate=False, trace=recorder)
        return recorder.events

    # --- state at a step -------------------------------------------------------------

    def _index_history(self):
        """For each node: the steps at which its gradient changed, and the shares received."""
        self._grad_steps = {self.loss: [0]}
        self._grad_values = {self.loss: [self.seed]}
        self._received = {}
        for k, event in enumerate(self.events, start=1):
            for c in event.contributions:
                self._grad_steps.setdefault(c.parent, []).append(k)
                self._grad_values.setdefault(c.parent, []).append(c.after)
                self._received.setdefault((c.parent, k), []).append(c)

    def grad_at(self, node, k: int):
        """``node``'s gradient after ``k`` steps (a partial sum until the node is processed;
        None when no gradient has reached it yet)."""
        steps = self._grad_steps.get(node)
        if not steps:
            return None
        i = bisect.bisect_right(steps, k) - 1
        return self._grad_values[node][i] if i >= 0 else None

    def grads_at(self, k: int) -> dict:
        """Every reached node's gradient after ``k`` steps (see :meth:`grad_at`)."""
        found = {node: self.grad_at(node, k) for node in self.order}
        return {node: g for node, g in found.items() if g is not None}

    @property
    def grads(self) -> dict:
        """:meth:`grads_at` the current step."""
        return self.grads_at(self.slider.value)

    def _frames_changing(self, node) -> set:
        steps = set(self._grad_steps.get(node, ()))
        return {0, self.steps} | steps | {k + 1 for k in steps if k < self.steps}

    def _state(self, node, k: int) -> str:
        step = self.step_of.get(node, 0)
        if step == k and k > 0:
            return "active"
        if (node, k) in self._received or (k == 0 and node is self.loss):
            return "touched"
        if step < k:
            return "done"
        return "normal" if self.grad_at(node, k) is not None else "pending"

    def _value_text(self, node, k: int) -> list[str]:
        lines = []
        if is_tensor(node):
            lines.append(f"shape {node.data.shape}")
            lines.append(f"data {summarize(node.data)}")
        else:
            lines.append(f"data {fmt_number(node.data)}")
        received = self._received.get((node, k))
        if not node.requires_grad:
            lines.append("constant (no grad)")
        elif received:
            first = received[0].before
            parts = ([] if first is None else [first]) + [c.share for c in received]
            total = _fmt(received[-1].after)
            lines.append("grad " + (f"{_sum_text(parts)} = {total}" if len(parts) > 1 else total))
        else:
            g = self.grad_at(node, k)
            lines.append("grad ?" if g is None else f"grad {_fmt(g)}")
        return lines

    def _product(self, c: Contribution) -> str:
        """The edge's product in this mode's reading order: upstream grad × local derivative."""
        return f"{_fmt(c.incoming)} × {_fmt(c.local)}"

    def _explain_start(self) -> str:
        return (
            f"<b>Step 0 of {self.steps}: the seed.</b> d{self._code(self.loss)}/d"
            f"{self._code(self.loss)} = {_fmt(self.seed)}. backward() now visits the "
            "nodes in <i>reversed topological order</i>: every node comes after all the "
            "nodes that use it, so its gradient is complete when its turn comes. "
            "Press <b>step ▶</b>."
        )

    def _explain_step(self, k: int, event: Event, head: str) -> str:
        node = event.node
        if event.amount is None:
            return head + ": no gradient reaches this node (it is a constant): skipped."
        grad_line = (
            f" — its gradient is complete: d{self._code(self.loss)}/d{self._code(node)} = "
            f"<b>{_fmt(event.amount)}</b>."
        )
        if node._fn is None:
            return head + grad_line + " It is a leaf (an input or parameter): nothing to pass on."
        rule = node._fn.rule
        text = (
            head
            + grad_line
            + f" Its operation <b>{html_lib.escape(op_text(node))}</b> runs its local rule "
            f"(<i>{html_lib.escape(rule)}</i>) and sends each input a share:"
        )
        rows = []
        for c in event.contributions:
            so_far = (
                _fmt(c.after)
                if c.before is None
                else f"{_sum_text([c.before, c.share])} = <b>{_fmt(c.after)}</b>"
            )
            local = _fmt(c.local) if c.local is not None else "(vjp rule)"
            rows.append([self._code(c.parent), _fmt(c.incoming), local, _fmt(c.share), so_far])
        header = ["input", "upstream grad", "× local derivative", "= contribution"]
        text += self._table([*header, "input's grad so far"], rows)
        repeated = {c.parent for c in event.contributions if c.before is not None}
        if repeated:
            names = ", ".join(self._code(p) for p in repeated)
            text += (
                f"{names} already had a gradient from another use: the contributions "
                "<b>add up</b> (a value used twice gets two shares)."
            )
        return text


class ForwardStepper(_Stepper):
    """Forward mode one node at a time: each value carries a tangent along with it.

    ``f`` is called once on ``inputs`` (numbers or arrays; they become graph leaves) to
    record its graph. The slider then walks that graph in forward (topological) order; at
    each step one node computes its tangent from its inputs' tangents with its jvp rule:
    ``tangent = Σ local derivative × input tangent``. ``tangents`` is the direction the
    inputs move in (default: the first input moves, the others stay).

    One forward pass gives the derivative of *every output* along *one* input direction;
    one reverse pass (:class:`BackwardStepper`) gives the derivative of *one output* with
    respect to *every input*. ``f`` may return several outputs (a tuple or list).
    """

    _kind = "forward-stepper"

    def __init__(
        self,
        f,
        inputs,
        tangents=None,
        *,
        max_nodes: int | None = 200,
        large: bool = False,
    ):
        inputs = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        if tangents is None:
            tangents = [1.0] + [0.0] * (len(inputs) - 1)
            tangents = [
                np.ones_like(np.asarray(x, float)) * t if not _is_number(x) else t
                for x, t in zip(inputs, tangents, strict=True)
            ]
        tangents = list(tangents) if isinstance(tangents, list | tuple) else [tangents]
        if len(tangents) != len(inputs):
            raise ValueError(
                f"ForwardStepper: got {len(inputs)} inputs but {len(tangents)} tangents "
                "(one tangent per input: the direction it moves in)"
            )
        names = _parameter_names(f, len(inputs))
        self.inputs: list[Value | Tensor] = []
        self.seed: dict = {}
        for name, x, t in zip(names, inputs, tangents, strict=True):
            if _is_number(x):
                if not _is_number(t):
                    raise ValueError(
                        f"ForwardStepper: input {name} is a number, so its tangent must be "
                        f"a number too, got {t!r:.40}"
                    )
                leaf: Value | Tensor = Value(float(x), label=name)
                self.seed[leaf] = float(t)
            else:
                leaf = Tensor(x, requires_grad=True, label=name)
                t = np.asarray(t, dtype=leaf.data.dtype)
                if t.shape != leaf.data.shape:
                    raise ValueError(
                        f"ForwardStepper: input {name} has shape {leaf.data.shape} but its "
                        f"tangent has shape {t.shape}"
                    )
                self.seed[leaf] = t
            self.inputs.append(leaf)
        out = f(*self.inputs)
        self.outputs = list(out) if isinstance(out, list | tuple) else [out]
        for o in self.outputs:
            if not is_node(o):
                raise TypeError(
                    "ForwardStepper: f must compute its outputs from its inputs with the "
                    f"course's operations (Value/Tensor), got {type(o).__name__} {o!r:.40}"
                )
        #: The nodes in the order they are computed: the topological order.
        self.order = combined_order(self.outputs)
        events = self._run_forward()
        view = GraphView(self.outputs, max_nodes=max_nodes, large=large)
        super().__init__(view, events, large=large)

    def _run_forward(self) -> list[Event]:
        """Push the tangents through the graph, node by node, with each primitive's
        :meth:`~autodiff_lab.primitives.Primitive.pushforward` (what ``Dual`` runs),
        recording every input's contribution."""
        tangent = {}
        events = []
        for node in self.order:
            if node._fn is None:
                t = self.seed.get(node)
                if t is None:  # a constant inside f: it does not move
                    t = np.zeros_like(node.data) if is_tensor(node) else 0.0
                tangent[node] = t
                events.append(Event(node, t))
                continue
            fn, ctx = node._fn, node._params or {}
            inputs = [p.data for p in node._prev]
            incoming = [tangent[p] for p in node._prev]
            total = fn.pushforward(incoming, node.data, inputs, ctx)
            contributions = []
            for position, parent in enumerate(node._prev):  # one input moving at a time
                alone: list = [None] * len(node._prev)
                alone[position] = incoming[position]
                share = fn.pushforward(alone, node.data, inputs, ctx)
                local: float | None = None
                if not is_tensor(node):  # scalar rules are linear in t: t = 1 gives d out/d in
                    share = _plain(share)
                    alone[position] = 1.0
                    local = _plain(fn.pushforward(alone, node.data, inputs, ctx))
                contributions.append(
                    Contribution(position, parent, incoming[position], local, share)
                )
            total = np.asarray(total) if is_tensor(node) else _plain(total)
            tangent[node] = total
            events.append(Event(node, total, contributions))
        return events

    def tangents_at(self, k: int) -> dict:
        """The tangent of every node computed in the first ``k`` steps."""
        return {e.node: e.amount for e in self.events[:k]}

    @property
    def tangents(self) -> dict:
        """:meth:`tangents_at` the current step."""
        return self.tangents_at(self.slider.value)

    def _frames_changing(self, node) -> set:
        return {0, self.steps, self.step_of.get(node, 0)}

    def _state(self, node, k: int) -> str:
        step = self.step_of.get(node, 0)
        if step == k and k > 0:
            return "active"
        if k > 0 and any(c.parent is node for c in self.events[k - 1].contributions):
            return "touched"
        return "done" if step < k else "pending"

    def _value_text(self, node, k: int) -> list[str]:
        step = self.step_of.get(node, 0)
        known = 0 < step <= k
        lines = [f"shape {node.data.shape}"] if is_tensor(node) else []
        lines.append(f"data {summarize(node.data) if known else '?'}")
        lines.append(f"tangent {_fmt(self.events[step - 1].amount) if known else '?'}")
        return lines

    def _product(self, c: Contribution) -> str:
        """The edge's product in this mode's reading order: local derivative × tangent."""
        return f"{_fmt(c.local)} × {_fmt(c.incoming)}"

    def _direction(self) -> str:
        return ", ".join(f"d{self._code(x)} = {_fmt(self.seed[x])}" for x in self.inputs)

    def _explain_start(self) -> str:
        return (
            f"<b>Step 0 of {self.steps}: choose a direction.</b> The inputs move by "
            f"{self._direction()}. Forward mode visits the nodes in topological order "
            "(each after the values it is computed from) and carries a "
            "<i>tangent</i> — how fast the value moves — along with every value. "
            "Press <b>step ▶</b>."
        )

    def _explain_step(self, k: int, event: Event, head: str) -> str:
        node = event.node
        if node._fn is None:
            kind = "an input" if node in self.seed else "a constant"
            text = f"{head} is {kind}: its tangent is <b>{_fmt(event.amount)}</b>."
        else:
            rule = node._fn.rule
            text = (
                f"{head} = {html_lib.escape(op_text(node))} of its inputs. Its jvp rule "
                f"(<i>{html_lib.escape(rule)}</i>) adds up local derivative × input tangent:"
            )
            rows = [
                [
                    self._code(c.parent),
                    _fmt(c.local) if c.local is not None else "(jvp rule)",
                    _fmt(c.incoming),
                    _fmt(c.share),
                ]
                for c in event.contributions
            ]
            if rows:
                text += self._table(
                    ["input", "local derivative", "× input tangent", "= contribution"], rows
                )
            text += f"tangent of {self._code(node)} = <b>{_fmt(event.amount)}</b>."
        if k == self.steps:
            text += self._conclusion()
        return text

    def _conclusion(self) -> str:
        known = self.tangents_at(self.steps)
        outs = ", ".join(
            f"d{self._code(o)} = <b>{_fmt(known[o])}</b>" for o in self.outputs if o in known
        )
        return (
            "<p><b>Done: one forward pass</b> gave the derivative of <i>every output</i> "
            f"along one input direction ({self._direction()}): {outs}. Another direction "
            "needs another pass. A reverse pass (BackwardStepper) is the other way round: "
            "the derivative of <i>one output</i> with respect to <i>every input</i> at once.</p>"
        )


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) or (isinstance(x, np.ndarray) and x.ndim == 0)


def _parameter_names(f, n: int) -> list[str]:
    """The names of ``f``'s first ``n`` parameters (x0, x1… when it takes ``*args``)."""
    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if len(params) >= n:
        return params[:n]
    return [f"x{i}" for i in range(n)]
