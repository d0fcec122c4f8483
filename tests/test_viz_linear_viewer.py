"""The linearize/transpose viewer, driven headless: the values drawn on its edges against
closed forms (and against the engine's own reverse mode), the toggle, the text alternative
and the static fallback."""

from __future__ import annotations

import math
import re

import ipywidgets as widgets
import numpy as np
import pytest

from autodiff_lab import Value, sin, tanh
from autodiff_lab.functional import vjp
from autodiff_lab.viz import LinearizeViewer, draw_linear_graph
from autodiff_lab.viz.linear_viewer import LinearView, op_label

X, Y = 0.5, 2.0
TX, TY = 0.3, -1.2  # the tangent pushed forward
CT = 1.5  # the cotangent pulled back


def f(x, y):
    return x * y + sin(x)


def labelled_edges(view: LinearView, direction: str) -> list[tuple[str, float]]:
    """(operation the edge enters or leaves, value on the edge), sorted, for comparison."""
    nodes = view.linear.nodes
    return sorted(
        (op_label(nodes[edge[1]], direction), round(float(view.edge_value(edge, direction)), 12))
        for edge in view.edges
    )


def expected(pairs):
    return sorted((label, round(value, 12)) for label, value in pairs)


@pytest.fixture
def view() -> LinearView:
    return LinearView(f, (X, Y), tangents=(TX, TY), cotangent=CT)


def test_jvp_edges_carry_the_tangents_of_the_closed_form(view):
    # J t = y·tx + x·ty + cos(x)·tx: the jvp rules of x*y and sin(x), with constants y, x, cos x
    c = f"{math.cos(X):.4f}"
    assert labelled_edges(view, "jvp") == expected(
        [
            ("× 2.0000", TX),  # ṫx into (× y)
            ("× 0.5000", TY),  # ṫy into (× x)
            (f"× {c}", TX),  # ṫx into (× cos x)
            ("+", Y * TX),  # y·tx into the product's sum
            ("+", X * TY),  # x·ty into the product's sum
            ("+", Y * TX + X * TY),  # the product's tangent into the last sum
            ("+", math.cos(X) * TX),  # sin's tangent into the last sum
        ]
    )
    assert view.jvp_out == pytest.approx(Y * TX + X * TY + math.cos(X) * TX, rel=1e-15)


def test_vjp_edges_carry_the_cotangent_shares_of_the_closed_form(view):
    # the transpose: fan-out (from +) copies ct, × c multiplies it by c
    c = f"{math.cos(X):.4f}"
    assert labelled_edges(view, "vjp") == expected(
        [
            ("× 2.0000", CT * Y),  # back to ṫx through (× y)
            ("× 0.5000", CT * X),  # back to ṫy through (× x)
            (f"× {c}", CT * math.cos(X)),  # back to ṫx through (× cos x)
            ("fan-out", CT),
            ("fan-out", CT),
            ("fan-out", CT),
            ("fan-out", CT),
        ]
    )
    dx, dy = view.vjp_out
    assert dx == pytest.approx(CT * (Y + math.cos(X)), rel=1e-15)
    assert dy == pytest.approx(CT * X, rel=1e-15)
    x_input = view.linear.inputs[0]
    shares = sorted(float(s) for s in view.shares_into(x_input))
    assert shares == pytest.approx(sorted([CT * Y, CT * math.cos(X)]), rel=1e-15)


def test_transposed_graph_agrees_with_backward(view):
    x, y = Value(X), Value(Y)
    out = f(x, y)
    out.backward()
    assert view.vjp_out[0] == pytest.approx(CT * x.grad, rel=1e-15)
    assert view.vjp_out[1] == pytest.approx(CT * y.grad, rel=1e-15)


def test_a_tensor_function_matches_its_closed_form_and_the_vjp():
    W = np.array([[1.0, -2.0, 0.5], [0.3, 0.8, -1.0]])
    x0 = np.array([0.2, -0.4, 0.7])
    t = np.array([1.0, 0.5, -2.0])
    ct = np.array([0.7, -1.3])

    def g(x):
        return tanh(W @ x)

    view = LinearView(g, (x0,), tangents=(t,), cotangent=ct)
    slope = 1 - np.tanh(W @ x0) ** 2
    np.testing.assert_allclose(view.jvp_out, slope * (W @ t), rtol=1e-14)
    np.testing.assert_allclose(view.vjp_out[0], W.T @ (slope * ct), rtol=1e-14)
    np.testing.assert_allclose(view.vjp_out[0], vjp(g, x0)[1](ct)[0], rtol=1e-14)
    # the edge into the output carries J t (jvp) and the seed (vjp): both in the drawing
    svg = view.drawing("jvp").svg
    assert "J·t =" in svg and "seed ct =" in view.drawing("vjp").svg


def test_the_svg_shows_the_edge_values_and_has_a_text_alternative(view):
    svg = view.drawing("vjp").svg
    assert re.search(r'<svg\b[^>]*role="img"[^>]*aria-labelledby="', svg)
    title = re.search(r"<title[^>]*>(.*?)</title>", svg, re.S).group(1)
    assert "transposed" in title and "x = 0.5000, y = 2.0000" in title
    desc = re.search(r"<desc[^>]*>(.*?)</desc>", svg, re.S).group(1)
    assert f"x {CT * (Y + math.cos(X)):.4f}" in desc and f"y {CT * X:.4f}" in desc
    for value in (CT * Y, CT * X, CT * math.cos(X)):
        assert f">{value:.4f}<" in svg  # an edge label
    # x is read twice: its box shows the sum of its two shares
    assert f"{CT * (Y + math.cos(X)):.4f} = " in svg


def test_toggle_switches_direction_and_the_readout_follows():
    viewer = LinearizeViewer(f, X, Y, tangents=(TX, TY), cotangent=CT)
    assert isinstance(viewer.direction, widgets.ToggleButtons)  # focusable, arrow keys
    assert "<b>jvp</b>" in viewer.html.value and "tangent at every node" in viewer.html.value
    assert f"J t = {Y * TX + X * TY + math.cos(X) * TX:.4f}" in viewer.html.value
    viewer.direction.value = "vjp"
    html = viewer.html.value
    assert "<b>vjp</b>" in html and "cotangent at every node" in html
    assert f"x {CT * (Y + math.cos(X)):.4f}, y {CT * X:.4f}" in html
    assert "fan-out" in html and "<svg" in html and 'role="img"' in html


def test_fold_table_puts_the_same_table_under_one_closed_line():
    """For a slide (chapter 08): the table folded in a closed <details>, the same rows in it,
    in the live panel and the static fallback alike, after a new tangent too."""
    open_viewer = LinearizeViewer(f, X, Y, tangents=(TX, TY))
    folded = LinearizeViewer(f, X, Y, tangents=(TX, TY), fold_table=True)
    assert "<details" not in open_viewer.html.value
    table = re.search(r"<table.*</table>", open_viewer.html.value).group(0)
    for viewer_html in (folded.html.value, folded._repr_mimebundle_()["text/html"]):
        details = re.search(r"<details[^>]*>(.*)</details>", viewer_html).group(1)
        assert " open" not in re.search(r"<details[^>]*>", viewer_html).group(0)
        assert details.startswith("<summary>the tangent at every node, as a table</summary>")
        assert table in details
    folded.direction.value = "vjp"
    folded.tangent.value = 1  # only y moves: linearized again, still folded
    assert "<summary>the cotangent at every node, as a table</summary>" in folded.html.value


def test_static_fallback_is_the_current_panel_as_an_image():
    viewer = LinearizeViewer(f, X, Y)
    viewer.direction.value = "vjp"
    bundle = viewer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("LinearizeViewer (vjp direction)")
    assert "run this cell to make the controls live" in bundle["text/plain"]
    assert "<img" in bundle["text/html"] and "transposed" in bundle["text/html"]
    # as every widget's fallback (tests/test_viz_fallback.py): one line, no inline <svg>
    assert bundle["text/plain"].endswith(
        "(Static picture: run this cell to make the controls live.)"
    )
    assert "\n" not in bundle["text/plain"] and "<svg" not in bundle["text/html"]


def test_drawings_are_deterministic_and_named_by_parameters():
    a = draw_linear_graph(f, X, Y, direction="vjp")
    b = draw_linear_graph(f, X, Y, direction="vjp")
    assert a.dot == b.dot and a.svg == b.svg
    assert "{x |" in a.dot and "{y |" in a.dot  # the input boxes use f's parameter names


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="direction must be 'jvp' or 'vjp', got 'sideways'"):
        draw_linear_graph(f, X, Y, direction="sideways")
    with pytest.raises(ValueError, match="f returned several outputs"):
        LinearizeViewer(lambda x: (x, 2 * x), 1.0)
    with pytest.raises(ValueError, match="1 tangents for 2 primals"):
        LinearizeViewer(f, X, Y, tangents=(1.0,))
    with pytest.raises(TypeError, match="f must be a function"):
        LinearizeViewer(3.0, 1.0)


def test_side_by_side_shows_both_directions_as_captioned_images(view):
    bundle = view.side_by_side()._repr_mimebundle_()
    html = bundle["text/html"]
    assert html.count("<img") == 2 and html.count("<figcaption") == 2
    assert html.index("linear graph of the jvp") < html.index("the same graph transposed")
    assert "display:flex" in html and "flex-wrap:wrap" in html


def test_side_by_side_never_shrinks_a_picture_below_two_thirds_of_its_size(view):
    """Side by side, each picture may shrink to its flex basis only: 2/3 of the width graphviz
    gave it (pt -> px is 4/3), so its 12 pt labels stay >= 8 pt. (A fixed 480 px basis let
    chapter 08's transposed graph, over 1100 px wide, shrink to under half its size.)"""
    html = view.side_by_side()._repr_mimebundle_()["text/html"]
    bases = [int(b) for b in re.findall(r"flex:1 1 (\d+)px", html)]
    widths = [
        float(re.search(r'<svg\b[^>]*?\swidth="([\d.]+)pt"', view.drawing(d).svg).group(1))
        for d in ("jvp", "vjp")
    ]
    assert len(bases) == 2 and widths[1] > widths[0]  # the transpose's sums widen its inputs
    for basis, width_pt in zip(bases, widths):
        assert basis >= 2 / 3 * width_pt * 4 / 3 - 1
        assert 12 * basis / (width_pt * 4 / 3) >= 8 - 0.02


def test_the_tangent_menu_picks_a_column_of_the_jacobian():
    viewer = LinearizeViewer(f, X, Y, tangents=(TX, TY), cotangent=CT)
    assert isinstance(viewer.tangent, widgets.Dropdown)  # a <select>: keyboard operable
    viewer.tangent.value = 1  # only y moves: J t = d(xy + sin x)/dy = x
    assert viewer.view.tangents == (0.0, 1.0)
    assert viewer.view.jvp_out == pytest.approx(X, rel=1e-15)
    assert f"J t = {X:.4f}" in viewer.html.value
    viewer.tangent.value = 0  # only x moves: y + cos x
    assert viewer.view.jvp_out == pytest.approx(Y + math.cos(X), rel=1e-15)
    viewer.tangent.value = -1  # back to the tangent given
    assert viewer.view.jvp_out == pytest.approx(Y * TX + X * TY + math.cos(X) * TX)
    dx, dy = viewer.view.vjp_out  # the transpose does not depend on the tangent
    assert (dx, dy) == pytest.approx((CT * (Y + math.cos(X)), CT * X), rel=1e-15)
