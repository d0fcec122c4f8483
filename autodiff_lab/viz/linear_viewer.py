"""The linearize/transpose viewer: one jvp recorded as a linear graph, and its transpose.

:func:`~autodiff_lab.linear.linearize` records the jvp of ``f`` at a point as a graph of
linear operations (a :class:`~autodiff_lab.linear.LinearGraph`). This module draws it in
two directions, at the same positions:

- **jvp**: tangents flow left to right; every edge carries the tangent of the node it
  leaves, every operation is what the jvp rules applied (``× 0.8776``, ``+``, ``sum``);
- **vjp**: the same edges reversed, every operation replaced by its transpose (``+``
  becomes a fan-out, ``sum`` a broadcast, ``@ B`` becomes ``@ Bᵀ``); every edge carries
  the share of the cotangent sent back along it, and a node read twice adds its two
  shares up.

The values come from the engine: :meth:`LinearGraph.apply` and
:meth:`LinearGraph.transpose_apply` with ``record=True`` give every node's tangent and
cotangent, and each edge's share is that node's
:meth:`~autodiff_lab.primitives.Primitive.transpose` of its cotangent.

:func:`draw_linear_graph` gives one picture (a
:class:`~autodiff_lab.viz.drawing.GraphDrawing`); :class:`LinearizeViewer` is the widget:
a toggle (``ToggleButtons``, operable with the keyboard) between the two directions, the
picture with a text alternative (SVG ``<title>``/``<desc>``), and the values as a table.
"""

from __future__ import annotations

import html as html_lib
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any

import graphviz
import ipywidgets as widgets
import numpy as np

from ..linear import LinearNode, linearize
from .drawing import (
    FILL_INPUT,
    FILL_OP,
    FILL_OUTPUT,
    FONT,
    INK,
    OKABE_ITO,
    GraphDrawing,
    escape_record,
    fmt_number,
    summarize,
    with_text_alternative,
)
from .render import render_svg, static_fallback, svg_img_tag, widget_view_bundle

DIRECTIONS = ("jvp", "vjp")
_ARROW = {"jvp": OKABE_ITO["orange"], "vjp": OKABE_ITO["blue"]}


def _text(x: Any) -> str:
    """A tangent or cotangent as the drawing prints it (4 decimals; arrays summarised)."""
    arr = np.asarray(x)
    return fmt_number(arr) if arr.ndim == 0 else summarize(arr)


def _constant_text(node: LinearNode) -> str:
    """The op's constant operand, shortly: ``0.8776``, ``[1.0000, 2.0000]`` or ``B (3, 2)``."""
    constants = [c for a, c in zip(node.args, node.constants, strict=True) if a is None]
    if len(constants) != 1 or constants[0] is None:
        return ""
    c = np.asarray(constants[0])
    if c.size <= 2:
        return _text(c)
    return f"c{tuple(c.shape)}"


def op_label(node: LinearNode, direction: str) -> str:
    """What the drawing writes in an operation: the op (jvp) or its transpose (vjp),
    with a constant factor filled in (``× 0.8776``; the transpose of ``× c`` is ``× c``)."""
    constant = _constant_text(node)
    if direction == "jvp":
        text = node.text
        return f"{text} {constant}" if constant and text in ("×", "÷", "@") else text
    text = node.transposed or f"{node.op}ᵀ"
    return text.replace(" c", f" {constant}", 1) if constant else text


class LinearView:
    """A linearized function at one point, with its tangents and cotangents recorded.

    ``f``, ``primals``: the function and the point (numbers or arrays; ``names`` names
    them, default ``x0, x1, …`` or the parameter names). ``tangents``: one per primal
    (default ones); ``cotangent``: shaped like ``f``'s output (default ones).

    - ``linear``: the :class:`~autodiff_lab.linear.LinearGraph`; ``out``: ``f(*primals)``;
    - ``jvp_out`` = ``J t`` and ``tangent_at[i]`` the tangent at node i;
    - ``vjp_out`` = ``Jᵀ ct`` (one per primal) and ``cotangent_at[i]`` the cotangent at
      node i;
    - ``edges``: ``(source, target, position)`` for each linear argument (the node
      ``source`` is argument ``position`` of ``target``);
    - ``edge_value(edge, direction)``: the tangent along it (jvp) or the cotangent share
      sent back along it (vjp).
    """

    def __init__(
        self,
        f: Callable,
        primals: Sequence,
        *,
        tangents: Sequence | None = None,
        cotangent: Any = None,
        names: Sequence[str] | None = None,
    ):
        if not callable(f):
            raise TypeError(f"LinearizeViewer: f must be a function, got {f!r:.40}")
        if not primals:
            raise ValueError("LinearizeViewer: give the point, one primal per argument of f")
        self.f = f
        self.primals = tuple(primals)
        self.names = tuple(names) if names is not None else _parameter_names(f, len(primals))
        if len(self.names) != len(self.primals):
            raise ValueError(
                f"LinearizeViewer: {len(self.names)} names for {len(self.primals)} primals"
            )
        self.out, self.linear = linearize(f, *self.primals)
        if isinstance(self.out, tuple | list):
            raise ValueError(
                "LinearizeViewer: f returned several outputs; draw a function with one output"
            )
        if tangents is None:
            tangents = [_ones_like(p) for p in self.primals]
        if len(tangents) != len(self.primals):
            raise ValueError(
                f"LinearizeViewer: {len(tangents)} tangents for {len(self.primals)} primals"
            )
        self.tangents = tuple(tangents)
        self.cotangent = _ones_like(self.out) if cotangent is None else cotangent
        self.jvp_out, self.tangent_at = self.linear.apply(*self.tangents, record=True)
        self.vjp_out, self.cotangent_at = self.linear.transpose_apply(self.cotangent, record=True)
        self.edges = [
            (source, node.index, position)
            for node in self.linear.nodes
            for position, source in enumerate(node.args)
            if source is not None
        ]
        self._shares = self._cotangent_shares()

    def _cotangent_shares(self) -> dict:
        """Each edge's share of its target's cotangent: the target op's transpose, applied
        to the cotangent the engine recorded at the target."""
        shares = {}
        for node in self.linear.nodes:
            if node.prim is None:
                continue
            linear = [a is not None for a in node.args]
            stand_ins = [
                self.linear.nodes[a].zeros() if a is not None else c
                for a, c in zip(node.args, node.constants, strict=True)
            ]
            sent = node.prim.transpose(
                self.cotangent_at[node.index], node.zeros(), stand_ins, node.params, linear
            )
            for position, (a, share) in enumerate(zip(node.args, sent, strict=True)):
                if a is not None:
                    shares[a, node.index, position] = share
        return shares

    @property
    def output(self) -> int:
        """The index of the output node."""
        return self.linear.outputs[0]

    def edge_value(self, edge: tuple[int, int, int], direction: str) -> Any:
        """The tangent along ``edge`` (jvp) or the cotangent share sent back along it (vjp)."""
        _check_direction(direction)
        source, target, position = edge
        if direction == "jvp":
            return self.tangent_at[source]
        return self._shares[source, target, position]

    def shares_into(self, index: int) -> list:
        """The cotangent shares sent back to node ``index``, one per use (vjp direction);
        their sum is its cotangent."""
        return [self._shares[e] for e in self.edges if e[0] == index]

    def node_value(self, index: int, direction: str) -> Any:
        """The tangent (jvp) or cotangent (vjp) at node ``index``."""
        _check_direction(direction)
        return (self.tangent_at if direction == "jvp" else self.cotangent_at)[index]

    def node_name(self, index: int) -> str:
        """``ṫ x`` for the tangent input of primal x, ``op k`` for the k-th operation."""
        if index in self.linear.inputs:
            return f"ṫ {self.names[self.linear.inputs.index(index)]}"
        return f"op {index - len(self.linear.inputs) + 1}"

    # --- drawing ---------------------------------------------------------------------

    def dot(self, direction: str, *, large: bool = False) -> str:
        """DOT source of the linear graph in ``direction``: same nodes and positions both
        ways; in ``vjp`` the arrows point back and the ops are transposed."""
        _check_direction(direction)
        font = 20 if large else 12
        pen = 1.6 if large else 1.0
        what = "tangent" if direction == "jvp" else "cotangent"
        g = graphviz.Digraph(
            graph_attr={"rankdir": "LR", "bgcolor": "white", "pad": "0.15", "nodesep": "0.3",
                        "ranksep": "0.45", "fontname": FONT, "fontcolor": INK},
            node_attr={"fontname": FONT, "fontsize": str(font), "fontcolor": INK,
                       "color": INK, "penwidth": str(pen)},
            edge_attr={"fontname": FONT, "fontsize": str(font - 1), "penwidth": str(pen),
                       "color": _ARROW[direction], "fontcolor": INK, "arrowsize": "0.7"},
        )  # fmt: skip
        for node in self.linear.nodes:
            value = _text(self.node_value(node.index, direction))
            if node.op == "input":
                k = self.linear.inputs.index(node.index)
                shares = self.shares_into(node.index) if direction == "vjp" else []
                if len(shares) > 1:  # fan-out in the graph: the transpose adds the shares
                    value += " = " + " + ".join(_text(s) for s in shares)
                label = f"{{{escape_record(self.names[k])} | {what} {escape_record(value)}}}"
                g.node(f"n{node.index}", label=label, shape="record", style="filled",
                       fillcolor=FILL_INPUT, id=f"n{node.index}")  # fmt: skip
                continue
            text = "0" if node.op == "zeros" else op_label(node, direction)
            g.node(f"n{node.index}", label=text, shape="ellipse", style="filled",
                   fillcolor=FILL_OP, margin="0.04", id=f"n{node.index}")  # fmt: skip
        out_value = _text(self.jvp_out if direction == "jvp" else self.cotangent)
        out_label = "J·t =" if direction == "jvp" else "seed ct ="
        g.node("out", label=f"{{output | {out_label} {escape_record(out_value)}}}",
               shape="record", style="filled", fillcolor=FILL_OUTPUT, id="out")  # fmt: skip
        back = {"dir": "back"} if direction == "vjp" else {}
        for edge in self.edges:
            source, target, _ = edge
            g.edge(f"n{source}", f"n{target}", label=_text(self.edge_value(edge, direction)),
                   **back)  # fmt: skip
        g.edge(f"n{self.output}", "out", label=out_value, **back)
        return g.source

    def describe(self, direction: str) -> tuple[str, str]:
        """The text alternative of the drawing in ``direction``: (title, description)."""
        _check_direction(direction)
        n_ops = sum(1 for n in self.linear.nodes if n.op != "input")
        point = ", ".join(f"{n} = {_text(p)}" for n, p in zip(self.names, self.primals))
        if direction == "jvp":
            title = (
                f"linear graph of the jvp at {point}: {len(self.linear.inputs)} tangent "
                f"inputs, {n_ops} linear operations, tangents flowing left to right"
            )
        else:
            title = (
                f"the same graph transposed (the vjp) at {point}: edges reversed, each "
                "operation replaced by its transpose, cotangents flowing right to left"
            )
        parts = []
        for edge in self.edges:
            source, target, _ = edge
            arrow = (
                f"{self.node_name(source)} to {self.node_name(target)}"
                f" ({op_label(self.linear.nodes[target], direction)})"
                if direction == "jvp"
                else f"{self.node_name(target)} ({op_label(self.linear.nodes[target], direction)})"
                f" back to {self.node_name(source)}"
            )
            parts.append(f"{arrow}: {_text(self.edge_value(edge, direction))}")
        if direction == "jvp":
            ends = ", ".join(f"{n} {_text(t)}" for n, t in zip(self.names, self.tangents))
            summary = f"Tangents in: {ends}; J t = {_text(self.jvp_out)}."
        else:
            ends = ", ".join(f"{n} {_text(c)}" for n, c in zip(self.names, self.vjp_out))
            summary = f"Seed cotangent {_text(self.cotangent)}; Jᵀ ct: {ends}."
        return title, f"{summary} Edges: " + "; ".join(parts) + "."

    def drawing(self, direction: str, *, large: bool = False) -> GraphDrawing:
        """The picture in ``direction`` (shown as SVG in Jupyter)."""
        title, desc = self.describe(direction)
        return GraphDrawing(
            self.dot(direction, large=large),
            len(self.linear.nodes) + 1,
            alt_title=title,
            alt_description=desc,
        )

    def side_by_side(self, *, large: bool = False) -> SideBySide:
        """Both pictures next to each other: the linear graph, then its transpose."""
        return SideBySide([self.drawing(d, large=large) for d in DIRECTIONS])

    def table_rows(self, direction: str) -> list[tuple[str, str, str]]:
        """The text readout: (node, operation in this direction, value) for every node."""
        rows = []
        for node in self.linear.nodes:
            op = "input" if node.op == "input" else op_label(node, direction)
            rows.append(
                (self.node_name(node.index), op, _text(self.node_value(node.index, direction)))
            )
        return rows


#: The smallest share of its natural size a picture of :class:`SideBySide` is shrunk to
#: while it still sits next to the other one (its 12 pt labels stay >= 8 pt, ~10.7 px).
MIN_SCALE = 2 / 3
_SVG_WIDTH = re.compile(r'<svg\b[^>]*?\swidth="([\d.]+)pt"')


def natural_width_px(svg: str) -> float:
    """The width graphviz gives the picture, in CSS pixels (1 pt = 4/3 px)."""
    found = _SVG_WIDTH.search(svg)
    if not found:
        raise ValueError("SideBySide: the drawing's SVG states no width in pt")
    return float(found.group(1)) * 4 / 3


class SideBySide:
    """Drawings next to each other, each with a caption that repeats its text alternative's
    title. Each may shrink to ``MIN_SCALE`` of its natural width (its flex basis); where the
    screen has no room for both at that size, they wrap, one above the other, so the labels
    stay legible. Shown as HTML images, so the picture survives the sanitizing of untrusted
    notebooks."""

    def __init__(self, drawings: Sequence[GraphDrawing]):
        self.drawings = list(drawings)

    def _repr_mimebundle_(self, include=None, exclude=None):
        figures = "".join(
            '<figure style="margin:0;min-width:0;'
            f'flex:1 1 {round(MIN_SCALE * natural_width_px(d.svg))}px">'
            f"{svg_img_tag(d.svg, d.alt_text)}"
            f'<figcaption style="font-size:12px;color:#1a1a1a">{html_lib.escape(d.alt_title)}'
            "</figcaption></figure>"
            for d in self.drawings
        )
        return {
            "text/html": f'<div style="display:flex;flex-wrap:wrap;gap:16px">{figures}</div>',
            "text/plain": repr(self),
        }

    def __repr__(self) -> str:
        return "<SideBySide: " + "; ".join(d.alt_title for d in self.drawings) + ">"


class LinearizeViewer(widgets.VBox):
    """One jvp recorded as a linear graph, and the same graph transposed: the vjp.

    ``LinearizeViewer(f, *primals, tangents=..., cotangent=...)`` linearizes ``f`` at
    ``primals`` (:func:`~autodiff_lab.linear.linearize`) and draws the linear graph. The
    toggle switches between the **jvp** direction (tangents pushed forward, the value on
    each edge) and the **vjp** direction (the edges reversed, each operation replaced by
    its transpose, the share of the cotangent on each edge). A menu picks the tangent
    pushed forward: the one given, or one primal moving alone (ones in it, zeros in the
    others: that column block of J). Below the picture a table lists every node's value.
    ``large``: lecture fonts. ``fold_table``: the table folded under one line (a closed
    ``<details>``, opened by a click or Enter), so the picture and its sentence fit a
    1280×720 slide. Drive it from Python too::

        viewer.direction.value = "vjp"
        viewer.tangent.value = 1   # only the second primal moves
        viewer.view.vjp_out        # Jᵀ ct, one per primal
    """

    def __init__(
        self,
        f: Callable,
        *primals: Any,
        tangents: Sequence | None = None,
        cotangent: Any = None,
        names: Sequence[str] | None = None,
        large: bool = False,
        fold_table: bool = False,
    ):
        self.view = LinearView(f, primals, tangents=tangents, cotangent=cotangent, names=names)
        self.fold_table = fold_table
        self._given = self.view.tangents
        self.large = large
        given = ", ".join(_text(t) for t in self._given)
        self.tangent = widgets.Dropdown(
            options=[(f"as given: ({given})", -1)]
            + [(f"only {name} moves", k) for k, name in enumerate(self.view.names)],
            value=-1,
            description="tangent",
            layout=widgets.Layout(width="auto"),
        )
        self.direction = widgets.ToggleButtons(
            options=[("jvp: push a tangent forward", "jvp"),
                     ("vjp: the transpose, pull a cotangent back", "vjp")],
            value="jvp",
            description="direction",
            tooltips=["J t: the linear graph as linearize recorded it",
                      "Jᵀ ct: edges reversed, each operation transposed"],
            style={"button_width": "auto"},
        )  # fmt: skip
        self.html = widgets.HTML()
        self.direction.observe(lambda change: self._show(), names="value")
        self.tangent.observe(lambda change: self._retangent(change["new"]), names="value")
        super().__init__([widgets.HBox([self.direction, self.tangent]), self.html])
        self._show()

    def _retangent(self, choice: int) -> None:
        """Linearize again with the chosen tangent (-1: the one given; k: primal k alone)."""
        v = self.view
        if choice == -1:
            tangents = self._given
        else:
            tangents = tuple(
                _ones_like(p) if i == choice else _zeros_like(p) for i, p in enumerate(v.primals)
            )
        self.view = LinearView(
            v.f, v.primals, tangents=tangents, cotangent=v.cotangent, names=v.names
        )
        self._show()

    def _show(self) -> None:
        self.html.value = self.panel_html(self.direction.value)

    def explain(self, direction: str) -> str:
        """The sentence above the picture (HTML)."""
        v = self.view
        if direction == "jvp":
            tangents = ", ".join(f"{n} {_text(t)}" for n, t in zip(v.names, v.tangents))
            return (
                f"<b>jvp</b>: the tangents ({html_lib.escape(tangents)}) flow left to right "
                "through the operations the jvp rules recorded; each edge carries a tangent. "
                f"Out comes <b>J t = {html_lib.escape(_text(v.jvp_out))}</b>."
            )
        found = ", ".join(f"{n} {_text(c)}" for n, c in zip(v.names, v.vjp_out))
        return (
            f"<b>vjp</b>: the same graph transposed. The seed cotangent "
            f"{html_lib.escape(_text(v.cotangent))} flows right to left; every operation is "
            "replaced by its transpose, and a node read twice adds up the two shares it gets "
            f"back. Out comes <b>Jᵀ ct: {html_lib.escape(found)}</b>."
        )

    def table_html(self, direction: str) -> str:
        """The values as an HTML table (the text readout of the picture)."""
        what = "tangent" if direction == "jvp" else "cotangent"
        cell = "border:1px solid #cccccc;padding:2px 8px"
        head = "".join(f'<th style="{cell}">{h}</th>' for h in ("node", "operation", what))
        body = "".join(
            "<tr>" + "".join(f'<td style="{cell}">{html_lib.escape(c)}</td>' for c in row) + "</tr>"
            for row in self.view.table_rows(direction)
        )
        caption = f"<caption>{what} at every node of the linear graph</caption>"
        style = "border-collapse:collapse;margin:6px 0"
        table = f'<table style="{style}">{caption}<tr>{head}</tr>{body}</table>'
        if self.fold_table:
            summary = f"<summary>the {what} at every node, as a table</summary>"
            return f'<details style="margin:6px 0">{summary}{table}</details>'
        return table

    def svg(self, direction: str) -> str:
        """The picture in ``direction`` as SVG, with its text alternative."""
        title, desc = self.view.describe(direction)
        return with_text_alternative(
            render_svg(self.view.dot(direction, large=self.large)), title, desc
        )

    def panel_html(self, direction: str, *, inline: bool = True) -> str:
        """Explanation, picture and table. ``inline``: the SVG as markup (the live widget),
        else as an ``<img>`` (the static fallback, kept by untrusted-notebook viewers)."""
        svg = self.svg(direction)
        fit = "max-width:100%;height:auto"
        if inline:
            picture = svg.replace("<svg ", f'<svg style="{fit}" ', 1)
        else:
            title, desc = self.view.describe(direction)
            picture = svg_img_tag(svg, f"{title}. {desc}", fit)
        size = 18 if self.large else 13
        return (
            '<div class="autodiff-lab-linear-viewer" style="background:#ffffff;color:#1a1a1a;'
            "border:1px solid #cccccc;border-radius:4px;padding:8px 10px;"
            f"font-family:Arial,Helvetica,sans-serif;font-size:{size}px;line-height:1.4;"
            f'max-width:100%;overflow-x:auto">{self.explain(direction)}<div>{picture}</div>'
            f"{self.table_html(direction)}</div>"
        )

    _ipython_display_ = None  # ipywidgets 7.8: display through _repr_mimebundle_ (fallback)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the current picture as static HTML for viewers without a
        kernel (GitHub, nbviewer, a notebook opened before running it)."""
        data = widget_view_bundle(self)
        picture = self.panel_html(self.direction.value, inline=False)
        return static_fallback(data, self._summary(), picture)

    def _summary(self) -> str:
        v = self.view
        return (
            f"LinearizeViewer ({self.direction.value} direction): the linear graph of "
            f"{len(v.linear.nodes) - len(v.linear.inputs)} operations; J t = "
            f"{_text(v.jvp_out)}, Jᵀ ct = ({', '.join(_text(c) for c in v.vjp_out)})"
        )

    def __repr__(self) -> str:
        return f"<{self._summary()}>"


def draw_linear_graph(
    f: Callable,
    *primals: Any,
    direction: str = "jvp",
    tangents: Sequence | None = None,
    cotangent: Any = None,
    names: Sequence[str] | None = None,
    large: bool = False,
) -> GraphDrawing:
    """Draw the linear graph of ``f``'s jvp at ``primals`` (``direction="jvp"``) or its
    transpose (``"vjp"``), with the tangent or cotangent share on every edge."""
    view = LinearView(f, primals, tangents=tangents, cotangent=cotangent, names=names)
    return view.drawing(direction, large=large)


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"LinearizeViewer: direction must be 'jvp' or 'vjp', got {direction!r}")


def _ones_like(x: Any) -> Any:
    if isinstance(x, numbers.Real):
        return 1.0
    return np.ones(np.shape(x))


def _zeros_like(x: Any) -> Any:
    if isinstance(x, numbers.Real):
        return 0.0
    return np.zeros(np.shape(x))


def _parameter_names(f: Callable, n: int) -> tuple[str, ...]:
    """f's positional parameter names (``x, y``), or ``x0, x1, …`` when they are unknown."""
    import inspect

    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return tuple(params[:n]) if len(params) >= n else tuple(f"x{i}" for i in range(n))


__all__ = ["LinearizeViewer", "LinearView", "SideBySide", "draw_linear_graph", "op_label"]
