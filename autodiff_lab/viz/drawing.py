"""Draw a recorded computation graph: a box per value, a circle per operation.

``draw_graph(loss)`` walks the graph with the engine's own
:func:`~autodiff_lab.graph.topological_order` (the walk ``backward()`` uses) and returns a
:class:`GraphDrawing` that Jupyter shows as SVG. Values flow left to right: inputs on the
left, the output on the right. Each value box shows its label, its data and its gradient
(tensors: shape, dtype and a short summary). The drawing is deterministic: the same graph
gives the same DOT text and the same picture every run.

Big graphs (an MLP on the scalar engine has thousands of nodes) are cut to a *node
budget*: the ``max_nodes`` values nearest the output are drawn and everything earlier is
collapsed into one grey box, with a note saying how many nodes of which kind it hides.

Every drawing carries a text alternative (:func:`describe_graph`): the SVG gets a
``<title>`` ("computation graph of L = tanh(a × b + a): 5 values, 3 operations") and a
``<desc>`` listing each value's data and gradient when the graph is small, tied to the
picture by ``role="img"`` and ``aria-labelledby``; the HTML image's ``alt`` says the same.

Colours come from the Okabe–Ito palette (distinguishable with every common colour-vision
deficiency); every shape has an explicit fill on a white background, so the picture reads
the same in JupyterLab's light and dark themes and on a projector (``large=True``).
"""

from __future__ import annotations

import hashlib
import html
import math
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable
from pathlib import Path

import graphviz
import numpy as np

from ..graph import topological_order
from ..kinds import is_node
from ..tensor import Tensor
from . import render

# Okabe–Ito colours (strong, for borders) and light tints of them (for fills).
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}
FILL_INPUT = "#DCEFFB"  # sky blue tint: leaves (inputs, parameters)
FILL_OUTPUT = "#FBE6B8"  # orange tint: the value the graph was drawn from
FILL_VALUE = "#FFFFFF"  # intermediate values
FILL_OP = "#FFF9D6"  # yellow tint: operations
FILL_ACTIVE = "#E59470"  # vermillion tint: the node whose rule runs now (dark enough to
#   stay apart from the output's orange tint under deuteranopia and protanopia)
FILL_PENDING = "#F0F0F0"  # grey: not reached yet
FILL_COLLAPSED = "#E6E6E6"
INK = "#1A1A1A"
INK_PENDING = "#6B6B6B"  # greyed-out text, still 4.6:1 on FILL_PENDING (WCAG AA)
#: Graphviz estimates text widths from Arial's metrics (no font files are needed); browsers
#: draw it with Arial or a metric-compatible font (Liberation Sans), so text fits its box.
FONT = "Arial"

#: Node styles the steppers use. ``normal``: as in a plain drawing; ``active``: the node
#: being processed; ``touched``: received a contribution at this step; ``done``: finished;
#: ``pending``: not reached yet (greyed out).
NODE_STATES = ("normal", "active", "touched", "done", "pending")

_RECORD_SPECIALS = str.maketrans({c: "\\" + c for c in "{}|<>"})


def fmt_number(x) -> str:
    """A number as the drawings print it: 4 decimals, or scientific when tiny or huge."""
    x = float(x)
    if x == 0:
        return "0.0000"  # also turns -0.0 into 0
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4f}"


def summarize(x) -> str:
    """A short text for a number or an array (all entries when there are at most 4)."""
    if x is None:
        return "None"
    arr = np.asarray(x)
    if arr.ndim == 0:
        return fmt_number(arr)
    if arr.size == 0:
        return "[]"
    if arr.size <= 4:
        return "[" + ", ".join(fmt_number(v) for v in arr.ravel()) + "]"
    return (
        f"mean {fmt_number(arr.mean())}, range [{fmt_number(arr.min())}, {fmt_number(arr.max())}]"
    )


def escape_record(text: str) -> str:
    """Escape the characters that structure a Graphviz record label."""
    return text.translate(_RECORD_SPECIALS)


def is_tensor(node) -> bool:
    """True for a ``Tensor`` (its data is always an ndarray: 0-d after a full reduction)."""
    return isinstance(node, Tensor)


def op_text(node) -> str:
    """The text in an operation's circle: its primitive's display form, with parameters."""
    return node._fn.text(node._params)


def combined_order(roots: Iterable) -> list:
    """Topological order of everything the roots depend on (each root's walk, merged)."""
    seen: set = set()
    order = []
    for root in roots:
        for node in topological_order(root):
            if node not in seen:
                seen.add(node)
                order.append(node)
    return order


class GraphView:
    """The part of a graph that is drawn, and how to write it as DOT.

    Chooses the nodes once (all of them, or the ``max_nodes`` nearest the roots) and
    numbers them in topological order, so a stepper can redraw the same picture with
    different highlights at every step. Each value ``i`` is DOT node ``v{i}``, its operation
    ``o{i}``; the SVG keeps these as element ids.
    """

    def __init__(self, roots, *, max_nodes: int | None = 150, large: bool = False):
        roots = list(roots) if isinstance(roots, list | tuple) else [roots]
        for root in roots:
            if not is_node(root):
                raise TypeError(
                    "draw_graph: expected a Value or Tensor (a value of a recorded graph), "
                    f"got {type(root).__name__} {root!r:.60}"
                )
        if max_nodes is not None and (not isinstance(max_nodes, int) or max_nodes < 1):
            raise ValueError(
                f"draw_graph: max_nodes must be a positive int or None, got {max_nodes!r}"
            )
        self.roots = roots
        self.large = large
        self.order = combined_order(roots)
        self.nodes, self.hidden = self._apply_budget(max_nodes)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        self.collapsed_note = self._note()

    def _apply_budget(self, max_nodes):
        """Keep the ``max_nodes`` values nearest the roots (breadth-first), hide the rest."""
        if max_nodes is None or len(self.order) <= max_nodes:
            return list(self.order), []
        keep: set = set()
        queue = deque(self.roots)
        while queue and len(keep) < max_nodes:
            node = queue.popleft()
            if node in keep:
                continue
            keep.add(node)
            queue.extend(node._prev)
        nodes = [n for n in self.order if n in keep]
        hidden = [n for n in self.order if n not in keep]
        return nodes, hidden

    def _note(self) -> str:
        if not self.hidden:
            return ""
        kinds = Counter("leaf" if n._fn is None else op_text(n) for n in self.hidden)
        parts = ", ".join(
            f"{count:,} {'leaves' if kind == 'leaf' and count > 1 else kind}"
            for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return (
            f"Showing the {len(self.nodes):,} values nearest the output out of "
            f"{len(self.order):,}; {len(self.hidden):,} earlier values ({parts}) are "
            "collapsed into the grey box. Draw an intermediate value, or raise max_nodes, "
            "to see more."
        )

    # --- DOT --------------------------------------------------------------------------

    def dot(
        self,
        *,
        show_grad: bool = True,
        title: str | None = None,
        state: Callable | None = None,
        value_text: Callable | None = None,
        edge_label: Callable | None = None,
        highlight: Iterable = (),
        layout: Layout | None = None,
        stacked: bool = False,
    ) -> str:
        """DOT source of the drawing.

        ``state(node)`` gives a style from :data:`NODE_STATES`; ``value_text(node)`` the
        lines under the label (default: data and grad); ``edge_label(node, position)`` a
        label for the edge from ``node._prev[position]`` into ``node``'s operation.
        With a ``layout`` (see :meth:`layout`) every node and edge is pinned where that
        layout put it: render the result with ``engine="nop2"``. ``stacked`` puts a
        value's label, data and grad under each other instead of side by side.
        """
        highlight = set(highlight)
        font = 20 if self.large else 12
        pen = 1.6 if self.large else 1.0
        g = graphviz.Digraph(
            graph_attr={
                "rankdir": "LR",
                "bgcolor": "white",
                "pad": "0.15",
                "nodesep": "0.25",
                "ranksep": "0.35",
                "fontname": FONT,
                "fontsize": str(font + 2),
                "fontcolor": INK,
                "labelloc": "t",
                "labeljust": "l",
            },
            node_attr={
                "fontname": FONT,
                "fontsize": str(font),
                "fontcolor": INK,
                "color": INK,
                "penwidth": str(pen),
            },
            edge_attr={
                "fontname": FONT,
                "fontsize": str(font - 1),
                "fontcolor": OKABE_ITO["blue"],
                "color": "#555555",
                "penwidth": str(pen),
                "arrowsize": "0.7",
            },
        )
        label_lines = [t for t in (title, self._wrap(self.collapsed_note)) if t]
        if label_lines:
            g.attr(label="\\l".join(s.replace("\n", "\\l") for s in label_lines) + "\\l")
        if layout is not None:
            g.attr(**layout.graph)
        g = _Pinned(g, layout)
        roots = set(self.roots)
        for i, node in enumerate(self.nodes):
            node_state = state(node) if state else "normal"
            if node_state not in NODE_STATES:
                raise ValueError(
                    f"drawing: state(node) gave {node_state!r} for {node.label or 'a node'}; "
                    f"a node's state is one of {', '.join(NODE_STATES)}"
                )
            if node in highlight:
                node_state = "active"
            fields = [escape_record(node.label)] if node.label else []
            lines = value_text(node) if value_text else default_value_lines(node, show_grad)
            fields += [escape_record(line) for line in lines]
            # A Value's fields side by side (as micrograd draws them); stacked when asked
            # for (narrower boxes: the steppers' graphs carry extra text) and for tensors.
            side_by_side = not (stacked or is_tensor(node))
            label = "{" + " | ".join(fields) + "}" if side_by_side else " | ".join(fields)
            g.node(
                f"v{i}",
                label=label,
                shape="record",
                id=f"v{i}",
                **{"class": f"value {node_state}"},
                **self._value_style(node, node_state, node in roots, pen),
            )
            if node._fn is None:
                continue
            g.node(
                f"o{i}",
                label=op_text(node),
                shape="circle" if len(op_text(node)) <= 4 else "ellipse",
                id=f"o{i}",
                margin="0.02",
                **{"class": f"op {node_state}"},
                **self._op_style(node_state, pen),
            )
            g.edge(f"o{i}", f"v{i}", **self._edge_style(node_state, pen))
            for position, parent in enumerate(node._prev):
                attrs = self._edge_style(node_state, pen)
                if edge_label is not None:
                    text = edge_label(node, position)
                    if text:
                        attrs["label"] = text
                if parent not in self.index:
                    continue
                g.edge(f"v{self.index[parent]}", f"o{i}", **attrs)
        self._draw_collapsed(g, pen)
        return g.source

    def layout(self, **dot_kwargs) -> Layout:
        """Lay the graph out once (with the given texts) and keep every position."""
        return Layout(render.layout_json(self.dot(**dot_kwargs)))

    def _draw_collapsed(self, g, pen):
        """One grey box for the hidden values, with a dashed edge into each op that reads one."""
        if not self.hidden:
            return
        hidden = set(self.hidden)
        g.node(
            "collapsed",
            label=f"⋯ {len(self.hidden):,} earlier values\\n(collapsed)",
            shape="box",
            style="filled,dashed",
            fillcolor=FILL_COLLAPSED,
            color=INK_PENDING,
            id="collapsed",
        )
        for i, node in enumerate(self.nodes):
            if node._fn is not None and any(p in hidden for p in node._prev):
                g.edge("collapsed", f"o{i}", style="dashed", color=INK_PENDING)

    @staticmethod
    def _value_style(node, node_state, is_root, pen) -> dict:
        if node_state == "pending":
            return {
                "style": "filled,dashed",
                "fillcolor": FILL_PENDING,
                "color": INK_PENDING,
                "fontcolor": INK_PENDING,
            }
        if is_root:
            fill = FILL_OUTPUT
        elif node._fn is None and node.requires_grad:
            fill = FILL_INPUT  # an input or parameter: a leaf that gets a gradient
        else:
            fill = FILL_VALUE  # an intermediate value, or a constant
        if node_state == "active":
            return {
                "style": "filled",
                "fillcolor": FILL_ACTIVE,
                "color": OKABE_ITO["vermillion"],
                "penwidth": str(3 * pen),
            }
        if node_state == "touched":
            return {
                "style": "filled",
                "fillcolor": fill,
                "color": OKABE_ITO["blue"],
                "penwidth": str(2.5 * pen),
            }
        if node_state == "done":
            return {"style": "filled", "fillcolor": fill, "color": OKABE_ITO["bluish_green"]}
        return {"style": "filled", "fillcolor": fill}

    @staticmethod
    def _op_style(node_state, pen) -> dict:
        if node_state == "pending":
            return {"style": "filled", "fillcolor": FILL_PENDING, "color": INK_PENDING,
                    "fontcolor": INK_PENDING}  # fmt: skip
        if node_state == "active":
            return {"style": "filled", "fillcolor": FILL_ACTIVE,
                    "color": OKABE_ITO["vermillion"], "penwidth": str(3 * pen)}  # fmt: skip
        return {"style": "filled", "fillcolor": FILL_OP}

    @staticmethod
    def _edge_style(node_state, pen) -> dict:
        if node_state == "pending":
            return {"color": "#BBBBBB"}
        if node_state == "active":
            return {"color": OKABE_ITO["vermillion"], "penwidth": str(2 * pen)}
        return {}

    @staticmethod
    def _wrap(text: str, width: int = 90) -> str:
        words, lines, line = text.split(), [], ""
        for word in words:
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        if line:
            lines.append(line)
        return "\n".join(lines)


class Layout:
    """Where Graphviz put each node and edge, to pin them in later drawings.

    The steppers redraw the same graph at every step with different texts and colours;
    pinning keeps every box in place, so only what changed moves the eye.
    """

    def __init__(self, data: dict):
        self.graph = {k: data[k] for k in ("bb", "lp") if k in data}
        self.nodes = {
            obj["name"]: {"pos": obj["pos"], "width": obj["width"], "height": obj["height"]}
            for obj in data.get("objects", [])
            if "pos" in obj
        }
        names = {obj["_gvid"]: obj["name"] for obj in data.get("objects", [])}
        #: (tail, head) -> the positions of the edges between them, in creation order
        self.edges: dict[tuple[str, str], list[dict]] = {}
        for e in sorted(data.get("edges", []), key=lambda e: e["_gvid"]):
            key = (names[e["tail"]], names[e["head"]])
            self.edges.setdefault(key, []).append({k: e[k] for k in ("pos", "lp") if k in e})


class _Pinned:
    """Wraps a ``graphviz.Digraph``: adds the layout's positions to each node and edge."""

    def __init__(self, graph, layout: Layout | None):
        self.graph = graph
        self.layout = layout
        self.seen: dict[tuple[str, str], int] = {}

    def node(self, name, **attrs):
        if self.layout is not None and name in self.layout.nodes:
            attrs.update(self.layout.nodes[name])
        self.graph.node(name, **attrs)

    def edge(self, tail, head, **attrs):
        key = (tail, head)
        nth = self.seen.get(key, 0)
        self.seen[key] = nth + 1
        pinned = self.layout.edges.get(key, [])[nth : nth + 1] if self.layout else []
        if pinned:
            attrs["pos"] = pinned[0]["pos"]
            if "label" in attrs and "lp" in pinned[0]:
                attrs["lp"] = pinned[0]["lp"]
        self.graph.edge(tail, head, **attrs)

    @property
    def source(self) -> str:
        return self.graph.source


# --- text alternative ---------------------------------------------------------------------

#: Binding strength of the drawings' operation texts written between their operands;
#: calls, labels and numbers bind tightest (:data:`_ATOM`).
_INFIX_LEVEL = {"+": 1, "−": 1, "×": 2, "÷": 2, "@": 2, "**": 4}
_PREFIX_LEVEL = 3
_ATOM = 5
#: Expressions longer than this are not written out (a deep graph's formula is unreadable).
EXPRESSION_LIMIT = 100
#: Graphs with at most this many values list every value in the description.
DESCRIBE_ALL_LIMIT = 12


def _number_text(x) -> str:
    """A constant as a formula writes it: ``2``, ``0.5``, ``−3`` (4 significant digits)."""
    return f"{float(x):.4g}".replace("-", "−")


def _leaf_text(node) -> tuple[str, int]:
    """A leaf in a formula: its label, a constant's number, else its kind and shape."""
    if node.label:
        return node.label, _ATOM
    if is_tensor(node):
        if node.data.size == 1 and not node.requires_grad:
            x = float(node.data.item())
        else:
            return "tensor[" + "×".join(str(n) for n in node.data.shape) + "]", _ATOM
    else:
        x = float(node.data)
    return _number_text(x), (_PREFIX_LEVEL if x < 0 else _ATOM)


def _wrap_if(text_level: tuple[str, int], below: int) -> str:
    text, level = text_level
    return f"({text})" if level < below else text


def _op_expression(node, args: list[tuple[str, int]]) -> tuple[str, int]:
    """``node``'s operation applied to its arguments' texts, with only the needed brackets.

    ``args`` are (text, level) pairs; the result is one too. Left-associative infix
    operators bracket a right operand of equal level (``a − (b − c)``), powers bracket
    any base that is not an atom (``(a + b)**2``).
    """
    op = op_text(node)
    notation = node._fn.notation
    name = node._fn.name
    if name == "add_n" and len(args) >= 2:  # Σ of n inputs: written out as a sum
        return " + ".join(_wrap_if(a, _INFIX_LEVEL["+"] + 1) for a in args), _INFIX_LEVEL["+"]
    if name == "dot" and len(args) >= 2 and len(args) % 2 == 0:  # w1..wn, x1..xn
        n = len(args) // 2
        terms = [
            f"{_wrap_if(w, _INFIX_LEVEL['×'])} × {_wrap_if(x, _INFIX_LEVEL['×'] + 1)}"
            for w, x in zip(args[:n], args[n:], strict=True)
        ]
        return " + ".join(terms), _INFIX_LEVEL["+"] if n > 1 else _INFIX_LEVEL["×"]
    if notation == "infix" and len(args) == 2 and op in _INFIX_LEVEL:
        level = _INFIX_LEVEL[op]
        if op == "**":  # right-associative: a ** (b ** c) needs no brackets on the right
            left, right = _wrap_if(args[0], level + 1), _wrap_if(args[1], level)
        else:
            left, right = _wrap_if(args[0], level), _wrap_if(args[1], level + 1)
        return f"{left} {op} {right}", level
    if notation == "power" and len(args) == 1:
        return f"{_wrap_if(args[0], _ATOM)}{op}", _INFIX_LEVEL["**"]
    if notation == "prefix" and len(args) == 1:
        return f"{op[0]}{_wrap_if(args[0], _PREFIX_LEVEL)}", _PREFIX_LEVEL
    if op.startswith("[") and len(args) == 1:  # indexing: x[0]
        return f"{_wrap_if(args[0], _ATOM)}{op}", _ATOM
    texts = [text for text, _ in args]
    match = re.fullmatch(r"(.+?)\((.*)\)", op)  # sum(axis=0): the parameters go last
    if match:
        return f"{match.group(1)}({', '.join([*texts, match.group(2)])})", _ATOM
    return f"{op}({', '.join(texts)})", _ATOM


def expressions(order, *, keep_names: bool) -> dict:
    """Each node's formula, built in topological ``order``: node -> text (None: too long).

    A node's formula is its operation applied to its inputs. An input appears as its label
    when it is a leaf, or when ``keep_names`` is set and it has a label; otherwise as its
    own formula, expanded down to the leaves. Formulas longer than
    :data:`EXPRESSION_LIMIT` characters are None (as is anything built from one).
    """
    formula: dict = {}  # node -> (text, level) or None
    as_input: dict = {}  # how the node appears inside its consumers' formulas
    for node in order:
        if node._fn is None:
            formula[node] = as_input[node] = _leaf_text(node)
            continue
        args = [as_input[p] for p in node._prev]
        if any(a is None for a in args):
            formula[node] = None
        else:
            text_level = _op_expression(node, args)
            formula[node] = text_level if len(text_level[0]) <= EXPRESSION_LIMIT else None
        named = keep_names and node.label
        as_input[node] = (node.label, _ATOM) if named else formula[node]
    return {node: (f[0] if f is not None else None) for node, f in formula.items()}


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _root_text(root, full: dict, named: dict) -> str:
    """``L = tanh(a × b + a)``: the root's name and formula, as much of it as is readable
    (a formula too long to read shows only the last operation: ``tanh(…)``)."""
    if root._fn is None:
        return _leaf_text(root)[0]
    formula = full.get(root) or named.get(root)
    if formula is None:
        formula = _op_expression(root, [("…", _ATOM)] * len(root._prev))[0]
    return f"{root.label} = {formula}" if root.label else formula


def describe_graph(
    view: GraphView, *, show_grad: bool = True, value_text: Callable | None = None
) -> tuple[str, str]:
    """The text alternative of a drawing of ``view``: (title, description).

    The title names the graph by its output's formula and counts what is drawn ("computation
    graph of L = tanh(a × b + a): 5 values, 3 operations"). The description says how the
    picture reads, lists every value with the lines of its box (``value_text``, default
    data and grad) when there are at most :data:`DESCRIBE_ALL_LIMIT`, else only the
    outputs, and repeats the node budget's note.
    """
    full = expressions(view.order, keep_names=False)
    named = expressions(view.order, keep_names=True)
    roots = [_root_text(r, full, named) for r in view.roots]
    what = roots[0] if len(roots) == 1 else f"{len(roots)} outputs: " + "; ".join(roots)
    n_ops = sum(1 for node in view.nodes if node._fn is not None)
    counts = f"{_count(len(view.nodes), 'value')}, {_count(n_ops, 'operation')}"
    if view.hidden:
        counts = f"{len(view.nodes):,} of {len(view.order):,} values drawn, " + _count(
            n_ops, "operation"
        )
    title = f"computation graph of {what}: {counts}"

    def lines(node) -> str:
        shown = value_text(node) if value_text else default_value_lines(node, show_grad)
        return ", ".join(shown)

    def name(node) -> str:
        if node._fn is None:
            return _leaf_text(node)[0]
        formula = named.get(node)
        if node.label:
            return f"{node.label} = {formula}" if formula else node.label
        return formula or f"a {op_text(node)} value"

    parts = ["Inputs on the left, the output on the right."]
    if len(view.nodes) <= DESCRIBE_ALL_LIMIT:
        parts.append("; ".join(f"{name(n)}: {lines(n)}" for n in view.nodes) + ".")
    else:
        outputs = "; ".join(f"{name(r)}: {lines(r)}" for r in view.roots)
        parts.append(f"Too many values to list; the output {outputs}.")
    if view.collapsed_note:
        parts.append(view.collapsed_note)
    return title, " ".join(parts)


_SVG_OPEN = re.compile(r"<svg\b[^>]*>")


def with_text_alternative(svg: str, title: str, desc: str) -> str:
    """``svg`` with ``<title>`` and ``<desc>`` as its first children, named by the
    ``<svg>`` element's ``role="img"`` and ``aria-labelledby`` (screen readers read them
    instead of the boxes' scattered texts). The ids come from a hash of the texts, so the
    SVG stays deterministic and two different drawings in one page never share an id.
    """
    key = hashlib.sha256(f"{title}\n{desc}".encode()).hexdigest()[:12]
    title_id, desc_id = f"adl-{key}-title", f"adl-{key}-desc"
    match = _SVG_OPEN.search(svg)
    if match is None:
        raise ValueError("with_text_alternative: no <svg> element in the rendered picture")
    start = match.group(0)[:-1] + f' role="img" aria-labelledby="{title_id} {desc_id}">'
    inner = (
        f'\n<title id="{title_id}">{html.escape(title, quote=False)}</title>'
        f'\n<desc id="{desc_id}">{html.escape(desc, quote=False)}</desc>'
    )
    return svg[: match.start()] + start + inner + svg[match.end() :]


def default_value_lines(node, show_grad: bool = True) -> list[str]:
    """What a value box shows: data and grad (tensors: shape and dtype first)."""
    if is_tensor(node):
        if not node.requires_grad and node.data.size == 1 and not node.label:
            return [f"constant {fmt_number(node.data.item())}"]
        lines = [f"shape {node.data.shape} {node.data.dtype}", f"data {summarize(node.data)}"]
        if show_grad:
            lines.append(
                f"grad {summarize(node.grad)}" if node.requires_grad else "constant (no grad)"
            )
        return lines
    lines = [f"data {fmt_number(node.data)}"]
    if show_grad:
        lines.append(f"grad {fmt_number(node.grad)}")
    return lines


class GraphDrawing:
    """A drawn graph: ``.dot`` (DOT source), ``.svg``, shown as SVG in Jupyter.

    ``node_count`` is the number of value boxes drawn (operation circles not counted);
    ``collapsed_note`` says what the node budget left out ('' when nothing was).

    ``alt_title`` and ``alt_description`` are its text alternative (:func:`describe_graph`),
    written into the SVG and the HTML image's ``alt``.
    """

    def __init__(
        self,
        dot: str,
        node_count: int,
        collapsed_note: str = "",
        *,
        alt_title: str = "",
        alt_description: str = "",
    ):
        self.dot = dot
        self.node_count = node_count
        self.collapsed_note = collapsed_note
        self.alt_title = alt_title or f"computation graph with {node_count} values"
        self.alt_description = alt_description
        self._svg: str | None = None

    @property
    def alt_text(self) -> str:
        """Title and description in one text (the HTML image's ``alt``)."""
        return f"{self.alt_title}. {self.alt_description}".strip()

    @property
    def svg(self) -> str:
        """The SVG text with its text alternative (rendered on first use, then kept)."""
        if self._svg is None:
            self._svg = with_text_alternative(
                render.render_svg(self.dot), self.alt_title, self.alt_description
            )
        return self._svg

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_mimebundle_(self, include=None, exclude=None):
        """SVG, plus the same picture as an HTML image (shown even in untrusted notebooks,
        where JupyterLab will not render stored SVG or inline SVG)."""
        return {
            "image/svg+xml": self.svg,
            "text/html": render.svg_img_tag(self.svg, self.alt_text),
            "text/plain": repr(self),
        }

    def save(self, path) -> Path:
        """Write ``path``: ``.svg`` for the picture, ``.dot`` or ``.gv`` for the DOT source."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in (".dot", ".gv"):
            path.write_text(self.dot, encoding="utf-8")
        else:
            raise ValueError(
                f"GraphDrawing.save: unsupported file type {suffix or '(none)'!r} for {path}; "
                "use .svg (picture) or .dot/.gv (Graphviz source)"
            )
        return path

    def __repr__(self) -> str:
        extra = f", {self.collapsed_note.split(';')[0].lower()}" if self.collapsed_note else ""
        return f"<GraphDrawing: {self.node_count} values{extra}>"


def draw_graph(
    root,
    *,
    max_nodes: int | None = 150,
    show_grad: bool = True,
    large: bool = False,
    highlight=None,
    title: str | None = None,
) -> GraphDrawing:
    """Draw the graph that computed ``root`` (a ``Value`` or ``Tensor``), inputs on the left.

    - ``max_nodes``: node budget; bigger graphs show the values nearest ``root`` and collapse
      the rest into one box, explained in ``collapsed_note`` (``None``: draw everything).
    - ``show_grad``: print each value's ``.grad`` (run ``backward()`` first to fill them).
    - ``large``: bigger fonts and lines, for projecting in a lecture.
    - ``highlight``: a value (or a list of values) to emphasise in vermillion.
    - ``title``: a caption above the graph.

    ``root`` may also be a list of values (a function with several outputs).
    """
    view = GraphView(root, max_nodes=max_nodes, large=large)
    if highlight is None:
        highlight = ()
    elif is_node(highlight):
        highlight = (highlight,)
    dot = view.dot(show_grad=show_grad, title=title, highlight=highlight)
    alt_title, alt_description = describe_graph(view, show_grad=show_grad)
    if title:
        alt_description = f"Caption: {title}. {alt_description}"
    return GraphDrawing(
        dot,
        len(view.nodes),
        view.collapsed_note,
        alt_title=alt_title,
        alt_description=alt_description,
    )
