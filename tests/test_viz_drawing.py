"""draw_graph and the DOT -> SVG renderer, checked on the rendered SVG.

Expected numbers come from closed forms (math module), never from the drawing code.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import stat
import warnings

import numpy as np
import pytest
from svg_helpers import svg_boxes

from autodiff_lab import Tensor, Value
from autodiff_lab.viz import draw_graph, render
from autodiff_lab.viz import drawing as drawing_module

OP_CIRCLE = re.compile(r'<g id="(o\d+)" class="node op (\w+)">(.*?)</g>', re.S)
pytestmark = pytest.mark.usefixtures("wasm_renderer")


def small_graph():
    """d = tanh(a*b + a) with a used twice (fan-out)."""
    a, b = Value(0.5, label="a"), Value(-0.75, label="b")
    c = a * b
    c.label = "c"
    d = (c + a).tanh()
    d.label = "d"
    return a, b, c, d


def test_value_graph_has_a_box_per_value_and_a_circle_per_operation():
    a, b, c, d = small_graph()
    d.backward()
    drawing = draw_graph(d)
    svg = drawing.svg
    found = svg_boxes(svg)
    assert drawing.node_count == 5 and len(found) == 5  # a, b, c, c+a, d
    assert len(OP_CIRCLE.findall(svg)) == 3  # *, +, tanh
    texts = {text.split(" | ")[0]: text for _, text in found.values()}
    # closed forms: d = tanh(ab + a); dd/da = (1 - d^2)(b + 1), dd/db = (1 - d^2) a
    s = 1 - math.tanh(0.5 * -0.75 + 0.5) ** 2
    assert f"grad {s * (-0.75 + 1):.4f}" in texts["a"]
    assert f"grad {s * 0.5:.4f}" in texts["b"]
    assert "data -0.3750" in texts["c"]
    assert f"data {math.tanh(0.125):.4f}" in texts["d"] and "grad 1.0000" in texts["d"]
    assert svg.startswith("<svg") and "<!--" not in svg  # embeddable, no version stamp


def test_drawing_is_deterministic():
    first = draw_graph(small_graph()[3])
    second = draw_graph(small_graph()[3])  # a new graph with the same structure
    assert first.dot == second.dot
    assert first.svg == second.svg


def test_left_to_right_inputs_before_output():
    a, b, c, d = small_graph()
    svg = draw_graph(d).svg

    def x_of(node_id):
        block = re.search(rf'<g id="{node_id}" .*?</g>', svg, re.S).group(0)
        xs = [float(v) for v in re.findall(r'x="(-?[\d.]+)"', block)]
        return min(xs)

    assert x_of("v0") < x_of("v2") < x_of("v4")  # a, then c, then d further right


def test_highlight_marks_the_chosen_value():
    a, b, c, d = small_graph()
    drawing = draw_graph(d, highlight=c)
    states = {text.split(" | ")[0]: state for state, text in svg_boxes(drawing.svg).values()}
    assert states["c"] == "active"
    assert all(state == "normal" for name, state in states.items() if name != "c")


def test_a_state_that_is_no_node_style_is_refused_with_the_styles_named():
    a, b, c, d = small_graph()
    view = drawing_module.GraphView(d)
    with pytest.raises(ValueError, match=r"gave 'glowing' for .*one of normal, active, touched"):
        view.dot(state=lambda node: "glowing")


def test_title_large_font_and_no_grad():
    drawing = draw_graph(small_graph()[3], title="tanh of a sum", large=True, show_grad=False)
    assert "tanh of a sum" in drawing.svg
    assert 'font-size="20.00"' in drawing.svg  # lecture font
    assert "grad" not in " ".join(t for _, t in svg_boxes(drawing.svg).values())


def test_tensor_graph_shows_shape_dtype_and_summary():
    W = Tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]) / 10, requires_grad=True, label="W")
    x = Tensor([1.0, -1.0, 2.0], label="x")
    loss = (W @ x).sum()
    loss.label = "L"
    loss.backward()
    texts = {t.split(" | ")[0]: t for _, t in svg_boxes(draw_graph(loss).svg).values()}
    assert "shape (2, 3) float64" in texts["W"]
    # dL/dW = 1 x^T: every row is x; mean 2/3, range [-1, 2]
    assert "grad mean 0.6667, range [-1.0000, 2.0000]" in texts["W"]
    assert "data [1.0000, -1.0000, 2.0000]" in texts["x"] and "constant (no grad)" in texts["x"]
    assert "shape () float64" in texts["L"]


def mlp_graph(n_in=40, widths=(30, 30, 1), seed=0):
    """A scalar-engine MLP forward pass: thousands of Value nodes."""
    rng = np.random.default_rng(seed)
    h = [Value(float(v)) for v in rng.uniform(-1, 1, n_in)]
    for width in widths:
        h = [
            sum((Value(float(w)) * hi for w, hi in zip(rng.uniform(-1, 1, len(h)), h, strict=True)),
                Value(0.0)).tanh()
            for _ in range(width)
        ]  # fmt: skip
    return h[0]


def count_nodes(root) -> int:
    """All values the root depends on (an independent walk, not the engine's)."""
    seen, todo = {root}, [root]
    while todo:
        for p in todo.pop()._prev:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return len(seen)


def test_5000_node_graph_is_cut_to_the_budget_and_small():
    root = mlp_graph()
    total = count_nodes(root)
    assert total > 5000
    drawing = draw_graph(root)  # how fast: make bench (benchmarks/bench_claims.py)
    svg = drawing.svg
    assert len(svg.encode()) < 2_000_000
    assert drawing.node_count == 150 and len(svg_boxes(svg)) == 150
    hidden = total - 150
    assert f"{hidden:,} earlier values" in drawing.collapsed_note
    assert f"out of {total:,}" in drawing.collapsed_note
    assert 'id="collapsed"' in svg and "collapsed" in svg


def test_max_nodes_none_draws_everything():
    root = mlp_graph(n_in=3, widths=(2, 1))
    drawing = draw_graph(root, max_nodes=None)
    assert drawing.node_count == count_nodes(root) and drawing.collapsed_note == ""


def test_save_svg_and_dot(tmp_path):
    drawing = draw_graph(small_graph()[3])
    assert (drawing.save(tmp_path / "g.svg")).read_text().startswith("<svg")
    assert (drawing.save(tmp_path / "g.dot")).read_text().startswith("digraph")
    with pytest.raises(ValueError, match=r"unsupported file type '\.png'"):
        drawing.save(tmp_path / "g.png")


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="draw_graph: expected a Value or Tensor.*float"):
        draw_graph(3.0)
    with pytest.raises(ValueError, match="max_nodes must be a positive int"):
        draw_graph(small_graph()[3], max_nodes=0)


def test_what_jupyter_shows_svg_and_an_html_image():
    drawing = draw_graph(small_graph()[3])
    bundle = drawing._repr_mimebundle_()
    assert bundle["image/svg+xml"] == drawing.svg == drawing._repr_svg_()
    encoded = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', bundle["text/html"])
    assert base64.b64decode(encoded.group(1)).decode() == drawing.svg
    alt = re.search(r'alt="([^"]*)"', bundle["text/html"]).group(1)
    assert html.unescape(alt) == drawing.alt_text
    assert alt.startswith("computation graph of d = tanh(a × b + a): 5 values, 3 operations. ")
    assert bundle["text/plain"] == repr(drawing) == "<GraphDrawing: 5 values>"


# --- renderer choice ---------------------------------------------------------------------


def fake_dot(directory, script: str):
    path = directory / "dot"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_without_dot_binary_auto_uses_wasm(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `dot` anywhere
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "auto")
    assert render.renderer_name() == "wasm"
    svg = draw_graph(small_graph()[3], title="no dot here").svg
    assert "no dot here" in svg and len(svg_boxes(svg)) == 5


def test_forcing_dot_without_the_binary_warns_and_still_draws(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "dot")
    with pytest.warns(RuntimeWarning, match="no `dot` binary"):
        assert render.renderer_name() == "wasm"


def test_auto_uses_the_dot_binary_when_present(monkeypatch, tmp_path):
    fake_dot(tmp_path, 'cat > /dev/null\necho \'<?xml version="1.0"?><svg id="from-dot"/>\'\n')
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "auto")
    assert render.renderer_name() == "dot"
    assert render.render_svg("digraph { from_dot_test }") == '<svg id="from-dot"/>\n'
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "wasm")  # wasm wins when asked for
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert render.renderer_name() == "wasm"


def test_dot_binary_failure_is_a_clear_error(monkeypatch, tmp_path):
    fake_dot(tmp_path, "cat > /dev/null\necho 'syntax error in line 1' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "dot")
    with pytest.raises(render.RenderError, match="syntax error in line 1"):
        render.render_svg("digraph { failing_dot_test }")


def test_bad_renderer_setting_is_named(monkeypatch):
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "cairo")
    with pytest.raises(ValueError, match="AUTODIFF_LAB_RENDERER='cairo'"):
        render.renderer_name()


def test_bad_dot_source_raises_render_error():
    with pytest.raises(render.RenderError, match="wasm Graphviz could not render"):
        render.render_svg("digraph { a -> }")


# --- text alternative (title, desc, alt) ----------------------------------------------


def svg_title_and_desc(svg: str) -> tuple[str, str]:
    """The SVG's own <title> and <desc> (its first children), checked to be what the
    <svg> element's aria-labelledby names."""
    start = re.match(r"<svg\b[^>]*>", svg).group(0)
    assert ' role="img"' in start
    title_id, desc_id = re.search(r'aria-labelledby="([^" ]+) ([^" ]+)"', start).groups()
    rest = svg[len(start) :].lstrip()
    title = re.match(rf'<title id="{title_id}">(.*?)</title>\s*', rest, re.S)
    desc = re.match(rf'<desc id="{desc_id}">(.*?)</desc>', rest[title.end() :], re.S)
    return html.unescape(title.group(1)), html.unescape(desc.group(1))


def test_title_names_the_graph_by_its_formula_and_counts():
    a, b, c, d = small_graph()
    d.backward()
    drawing = draw_graph(d)
    title, desc = svg_title_and_desc(drawing.svg)
    assert title == "computation graph of d = tanh(a × b + a): 5 values, 3 operations"
    assert title == drawing.alt_title
    # closed forms, as in the first test: dd/dc = 1 - tanh(0.125)^2
    s = 1 - math.tanh(0.125) ** 2
    assert desc == (
        "Inputs on the left, the output on the right. "
        f"a: data 0.5000, grad {s * 0.25:.4f}; b: data -0.7500, grad {s * 0.5:.4f}; "
        f"c = a × b: data -0.3750, grad {s:.4f}; c + a: data 0.1250, grad {s:.4f}; "
        f"d = tanh(c + a): data {math.tanh(0.125):.4f}, grad 1.0000."
    )


def formula_title(y) -> str:
    return draw_graph(y, show_grad=False).alt_title


def test_title_brackets_only_where_the_operators_need_them():
    a, b, c = Value(2.0, label="a"), Value(3.0, label="b"), Value(0.5, label="c")
    y = (a + b) * (a - b)
    y.label = "y"
    assert formula_title(y) == "computation graph of y = (a + b) × (a − b): 5 values, 3 operations"
    assert formula_title(a - (b - c)).startswith("computation graph of a − (b − c): ")
    assert formula_title(a - b - c).startswith("computation graph of a − b − c: ")
    assert formula_title(a / (b * c)).startswith("computation graph of a ÷ (b × c): ")
    assert formula_title((a + b) ** 2).startswith("computation graph of (a + b)**2: ")
    assert formula_title(-(a + b)).startswith("computation graph of −(a + b): ")
    assert formula_title(a**b**c).startswith("computation graph of a ** b ** c: ")
    assert formula_title((a**b) ** c).startswith("computation graph of (a ** b) ** c: ")
    assert formula_title(a * -2).startswith("computation graph of a × −2: ")
    assert formula_title((a * b).exp().log()).startswith("computation graph of log(exp(a × b)): ")
    # one-node sums and dot products (Value.sum, Value.dot) are written out
    assert formula_title(Value.sum([a, b * c, a - b])).startswith(
        "computation graph of a + b × c + (a − b): "
    )
    x1, x2 = Value(1.0, label="x1"), Value(2.0, label="x2")
    neuron = (Value.dot([a, b], [x1, x2 + c]) + c).relu()
    assert formula_title(neuron).startswith(
        "computation graph of ReLU(a × x1 + b × (x2 + c) + c): "
    )


def test_title_of_a_leaf_several_outputs_and_tensors():
    assert formula_title(Value(3.0, label="x")) == "computation graph of x: 1 value, 0 operations"
    a, b = Value(1.0, label="a"), Value(2.0, label="b")
    u, v = a * b, a + b
    u.label, v.label = "u", "v"
    assert draw_graph([u, v]).alt_title == (
        "computation graph of 2 outputs: u = a × b; v = a + b: 4 values, 2 operations"
    )
    W = Tensor(np.ones((2, 3)), requires_grad=True, label="W")
    loss = (W @ Tensor([1.0, 2.0, 3.0])).sum()
    loss.label = "L"
    assert (
        formula_title(loss) == "computation graph of L = sum(W @ tensor[3]): 4 values, 2 operations"
    )


def test_big_graph_title_counts_what_is_drawn_and_skips_the_formula():
    root = mlp_graph(n_in=40, widths=(30, 1))
    total = count_nodes(root)
    drawing = draw_graph(root)
    title, desc = svg_title_and_desc(drawing.svg)
    # the last operation only, and how much of the graph is drawn
    assert title.startswith(f"computation graph of tanh(…): 150 of {total:,} values drawn, ")
    assert title.endswith(" operations")
    assert desc.startswith("Inputs on the left, the output on the right. Too many values to list")
    assert desc.endswith(drawing.collapsed_note)


def test_text_alternative_ids_are_distinct_per_graph_and_stable():
    first = draw_graph(small_graph()[3])
    again = draw_graph(small_graph()[3])
    other = draw_graph(small_graph()[2])
    ids = re.compile(r'aria-labelledby="([^"]+)"')
    assert ids.search(first.svg).group(1) == ids.search(again.svg).group(1)
    assert ids.search(first.svg).group(1) != ids.search(other.svg).group(1)


def test_caption_is_in_the_description():
    drawing = draw_graph(small_graph()[3], title="tanh of a sum")
    assert svg_title_and_desc(drawing.svg)[1].startswith("Caption: tanh of a sum. Inputs on")


# --- colours: colour-vision deficiencies and text contrast -------------------------------

#: Machado, Oliveira & Fernandes (2009), severity 1.0: linear-RGB simulation matrices.
DEUTERANOPIA = np.array(
    [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
     [-0.011820, 0.042940, 0.968881]]
)  # fmt: skip
PROTANOPIA = np.array(
    [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
     [-0.003882, -0.048116, 1.051998]]
)  # fmt: skip


def _linear_rgb(colour: str) -> np.ndarray:
    c = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(rgb: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D65) of linear sRGB."""
    to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                       [0.0193, 0.1192, 0.9505]])  # fmt: skip
    xyz = to_xyz @ np.clip(rgb, 0, 1) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _delta_e(a: str, b: str, simulate=None) -> float:
    """CIE76 colour difference, optionally as seen with a simulated deficiency."""
    la, lb = _linear_rgb(a), _linear_rgb(b)
    if simulate is not None:
        la, lb = simulate @ la, simulate @ lb
    return float(np.linalg.norm(_lab(la) - _lab(lb)))


def _contrast(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio."""
    lum = [float(np.dot([0.2126, 0.7152, 0.0722], _linear_rgb(c))) for c in (a, b)]
    return (max(lum) + 0.05) / (min(lum) + 0.05)


def test_the_active_fill_stands_out_with_every_common_colour_deficiency():
    """The stepper's 'active' fill differs from every other fill by ΔE76 > 20 seen normally,
    with deuteranopia and with protanopia (the old #F6C9A8 was 7.5 from the output's tint)."""
    assert round(_delta_e("#F6C9A8", "#FBE6B8", DEUTERANOPIA), 1) == 7.5  # the finding
    d = drawing_module
    others = [d.FILL_INPUT, d.FILL_OUTPUT, d.FILL_VALUE, d.FILL_OP]
    others += [d.FILL_PENDING, d.FILL_COLLAPSED]
    for other in others:
        for simulate in (None, DEUTERANOPIA, PROTANOPIA):
            assert _delta_e(d.FILL_ACTIVE, other, simulate) > 20, other


def test_every_text_colour_has_aa_contrast_on_its_fill():
    d = drawing_module
    for fill in (d.FILL_INPUT, d.FILL_OUTPUT, d.FILL_VALUE, d.FILL_OP, d.FILL_ACTIVE, "#FFFFFF"):
        assert _contrast(d.INK, fill) >= 4.5, fill
    assert _contrast(d.INK_PENDING, d.FILL_PENDING) >= 4.5
    assert _contrast(d.INK, d.FILL_COLLAPSED) >= 4.5  # the collapsed box keeps the normal ink
    assert _contrast(d.OKABE_ITO["blue"], "#FFFFFF") >= 4.5  # edge labels
