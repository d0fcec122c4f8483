"""BackwardStepper and ForwardStepper driven from Python, checked on what they render.

Expected gradients and tangents come from closed forms or from the engine's own
``backward()`` (the stepper replays it with the primitive rules and must agree).
"""

from __future__ import annotations

import base64
import html
import math
import re

import numpy as np
import pytest
from svg_helpers import svg_boxes, svg_edge_labels

from autodiff_lab import Tensor, Value, ops, sin, tanh
from autodiff_lab.primitives import ELEMENTWISE
from autodiff_lab.viz import BackwardStepper, ForwardStepper

pytestmark = pytest.mark.usefixtures("wasm_renderer")


def boxes(svg: str) -> dict[str, tuple[str, str]]:
    """Each value box by its first text (the node's name) -> (state, all its texts)."""
    return svg_boxes(svg, key="label")


def fan_out_graph():
    """L = tanh(a*b + a): ``a`` is used twice, so it receives two contributions."""
    a, b = Value(0.5, label="a"), Value(-0.75, label="b")
    c = a * b
    c.label = "c"
    s = c + a
    s.label = "s"
    L = s.tanh()
    L.label = "L"
    return a, b, c, s, L


def test_order_is_reversed_topological_and_step_button_highlights_each_node():
    a, b, c, s, L = fan_out_graph()
    stepper = BackwardStepper(L)
    # every node after all the nodes that use it (checked independently of the engine)
    position = {node: i for i, node in enumerate(stepper.order)}
    for node in stepper.order:
        for parent in node._prev:
            assert position[parent] > position[node]
    assert stepper.order[0] is L and stepper.steps == 5
    assert stepper.slider.max == 5 and stepper.slider.value == 0
    for expected in stepper.order:
        stepper.step_button.click()
        assert stepper.current is expected
        states = boxes(stepper.html.value)
        active = [name for name, (state, _) in states.items() if state == "active"]
        assert active == [expected.label]


def test_final_step_shows_exactly_the_gradients_of_backward():
    a, b, c, s, L = fan_out_graph()
    stepper = BackwardStepper(L)
    stepper.slider.value = stepper.steps
    shown = stepper.grads
    assert a.grad == 0.0 and b.grad == 0.0  # the stepper never touches .grad
    L.backward()
    for node in (a, b, c, s, L):
        assert shown[node] == pytest.approx(node.grad, abs=0, rel=1e-15)
    # closed form: dL/da = (1 - tanh^2(ab + a)) (b + 1), dL/db = (1 - tanh^2) a
    d = 1 - math.tanh(0.5 * -0.75 + 0.5) ** 2
    assert shown[a] == pytest.approx(d * (1 - 0.75)) and shown[b] == pytest.approx(d * 0.5)
    texts = boxes(stepper.html.value)
    assert f"grad {d * 0.25:.4f}" in texts["a"][1]


def test_fan_out_shows_two_contributions_adding_up():
    a, b, c, s, L = fan_out_graph()
    stepper = BackwardStepper(L)
    d = 1 - math.tanh(0.5 * -0.75 + 0.5) ** 2
    # step 2 runs s = c + a: a gets its first share d * 1
    stepper.slider.value = 2
    assert stepper.current is s
    assert boxes(stepper.html.value)["a"][0] == "touched"
    assert f"{d:.4f} × 1.0000 = {d:.4f}" in svg_edge_labels(stepper.html.value)
    # step 3 runs c = a * b: a gets its second share d * b, added to the first
    stepper.step()
    assert stepper.current is c
    state, text = boxes(stepper.html.value)["a"]
    assert state == "touched"
    assert f"grad {d:.4f} − {d * 0.75:.4f} = {d * 0.25:.4f}" in text
    assert f"{d:.4f} × {-0.75:.4f} = {d * -0.75:.4f}" in svg_edge_labels(stepper.html.value)
    assert "add up" in stepper.html.value


def test_same_input_twice_in_one_operation_gets_two_shares():
    x = Value(3.0, label="x")
    y = x * x
    y.label = "y"
    stepper = BackwardStepper(y)
    stepper.step()  # y = x * x runs: two edges from x, each 1 × 3 = 3
    assert svg_edge_labels(stepper.html.value).count("1.0000 × 3.0000 = 3.0000") == 2
    assert "grad 3.0000 + 3.0000 = 6.0000" in boxes(stepper.html.value)["x"][1]


def test_not_yet_reached_nodes_are_grey_with_unknown_grad():
    a, b, c, s, L = fan_out_graph()
    stepper = BackwardStepper(L)
    states = boxes(stepper.html.value)
    assert states["L"][0] == "touched" and "grad 1.0000" in states["L"][1]  # the seed
    for name in "abcs":
        assert states[name][0] == "pending" and "grad ?" in states[name][1]
    stepper.slider.value = 1  # L runs: s receives, c/a/b still unreached
    states = boxes(stepper.html.value)
    assert states["s"][0] == "touched"
    assert [states[n][0] for n in "abc"] == ["pending"] * 3


def test_back_and_reset_buttons():
    stepper = BackwardStepper(fan_out_graph()[-1])
    stepper.slider.value = 4
    stepper.back_button.click()
    assert stepper.slider.value == 3
    stepper.reset_button.click()
    assert stepper.slider.value == 0 and "Step 0 of 5" in stepper.html.value
    stepper.back()
    assert stepper.slider.value == 0  # stays at the start
    stepper.slider.value = 5
    stepper.step()
    assert stepper.slider.value == 5  # stays at the end


def test_boxes_stay_in_place_between_steps():
    stepper = BackwardStepper(fan_out_graph()[-1])

    def geometry(svg, node_id):
        """The outline of the node's box (the field dividers inside may shift)."""
        block = re.search(rf'<g id="{node_id}" .*?</g>', svg, re.S).group(0)
        return re.findall(r'<(?:polygon|path) [^>]*(?:points|d)="([^"]+)"', block)[0]

    frames = [stepper.frame_svg(k) for k in range(stepper.steps + 1)]
    for node_id in ("v0", "v1", "v4"):
        assert len({geometry(f, node_id) for f in frames}) == 1


def test_static_fallback_shows_the_current_picture():
    stepper = BackwardStepper(fan_out_graph()[-1])
    stepper.slider.value = 2
    bundle = stepper._repr_mimebundle_()
    fallback = bundle["text/html"]
    assert "Step 2 of 5" in fallback and "<svg" not in fallback  # sanitizers strip inline SVG
    encoded = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', fallback).group(1)
    assert base64.b64decode(encoded).decode() == stepper.frame_svg(2)
    assert bundle["text/plain"] == (
        "BackwardStepper: step 2 of 5 — s "
        "(Static picture: run this cell to make the controls live.)"
    )
    assert "run this cell to make the controls live" in fallback
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_tensor_graph_shows_shapes_and_matches_backward():
    rng = np.random.default_rng(3)
    W = Tensor(rng.normal(size=(2, 3)), requires_grad=True, label="W")
    x = Tensor(rng.normal(size=3), label="x")
    b = Tensor(rng.normal(size=2), requires_grad=True, label="b")
    loss = ((W @ x + b).tanh()).sum()
    loss.label = "L"
    stepper = BackwardStepper(loss)
    stepper.slider.value = stepper.steps
    texts = boxes(stepper.html.value)
    assert "shape (2, 3)" in texts["W"][1] and "constant (no grad)" in texts["x"][1]
    # closed form: dL/dW = (1 - tanh^2(Wx + b)) x^T, dL/db = 1 - tanh^2(Wx + b)
    d = 1 - np.tanh(W.data @ x.data + b.data) ** 2
    np.testing.assert_allclose(stepper.grads[W], np.outer(d, x.data), rtol=1e-12)
    np.testing.assert_allclose(stepper.grads[b], d, rtol=1e-12)
    assert x not in stepper.grads


def test_bad_losses_are_named():
    with pytest.raises(ValueError, match=r"BackwardStepper: the loss must be a scalar.*\(2,\)"):
        BackwardStepper(Tensor([1.0, 2.0], requires_grad=True) * 2)
    with pytest.raises(TypeError, match="BackwardStepper: expected the loss"):
        BackwardStepper(1.5)


def test_a_200_node_graph_steps_quickly():
    x = Value(0.3, label="x")
    y = x
    for i in range(49):  # 4 values per round: a constant, a product, a constant, a sum
        y = y * 0.99 + 0.01 * i
    stepper = BackwardStepper(y)
    assert stepper.steps == len(stepper.order) == 197
    stepper.slider.value = stepper.steps
    assert stepper.grads[x] == pytest.approx(0.99**49)  # d/dx of 49 scalings
    assert len(svg_boxes(stepper.html.value)) == 197  # all drawn, none collapsed
    assert boxes(stepper.html.value)["x"][0] == "active"


# --- forward mode ------------------------------------------------------------------------


def f_scalar(x, y):
    return tanh(x * y) + x * x


def test_forward_stepper_walks_forward_and_ends_with_the_directional_derivative():
    stepper = ForwardStepper(f_scalar, [0.5, 2.0], [1.0, 0.0])
    position = {node: i for i, node in enumerate(stepper.order)}
    for node in stepper.order:
        for parent in node._prev:
            assert position[parent] < position[node]
    for expected in stepper.order:
        stepper.step_button.click()
        assert stepper.current is expected
    out = stepper.outputs[0]
    # d/dx [tanh(xy) + x^2] = y (1 - tanh^2(xy)) + 2x
    dfdx = 2.0 * (1 - math.tanh(1.0) ** 2) + 1.0
    assert stepper.tangents[out] == pytest.approx(dfdx, rel=1e-14)
    assert f"tangent {dfdx:.4f}" in stepper.html.value
    assert "one forward pass" in stepper.html.value.lower()


def test_forward_stepper_other_direction_and_pending_nodes():
    stepper = ForwardStepper(f_scalar, [0.5, 2.0], [0.0, 1.0])
    stepper.slider.value = 2  # x and y are known, the rest is not computed yet
    states = boxes(stepper.html.value)
    assert states["y"][0] == "active" and "tangent 1.0000" in states["y"][1]
    pending = [text for state, text in svg_boxes(stepper.html.value).values() if state == "pending"]
    assert len(pending) == 4 and all("tangent ?" in text for text in pending)
    stepper.slider.value = stepper.steps
    # d/dy = x (1 - tanh^2(xy))
    assert stepper.tangents[stepper.outputs[0]] == pytest.approx(0.5 * (1 - math.tanh(1.0) ** 2))


def test_forward_stepper_gives_every_output_in_one_pass():
    def two_outputs(x, y):
        return sin(x) * y, x * y

    stepper = ForwardStepper(two_outputs, [0.3, 4.0], [1.0, 0.0])
    stepper.slider.value = stepper.steps
    first, second = stepper.outputs
    assert stepper.tangents[first] == pytest.approx(math.cos(0.3) * 4.0)
    assert stepper.tangents[second] == pytest.approx(4.0)


def test_forward_stepper_on_a_small_tensor():
    w = np.array([1.0, -2.0, 0.5])
    v = np.array([0.1, 0.2, 0.3])
    stepper = ForwardStepper(lambda w: (w * w).sum(), [w], [v])
    stepper.slider.value = stepper.steps
    assert stepper.tangents[stepper.outputs[0]] == pytest.approx(2 * w @ v)  # d(w.w) = 2 w.v
    assert "shape (3,)" in stepper.html.value


def test_forward_stepper_bad_arguments():
    with pytest.raises(ValueError, match="2 inputs but 1 tangents"):
        ForwardStepper(f_scalar, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match=r"shape \(3,\) but its tangent has shape \(2,\)"):
        ForwardStepper(lambda w: w.sum(), [np.ones(3)], [np.ones(2)])


def test_deep_chain_needs_no_recursion_and_is_cut_to_the_budget():
    x = Value(0.5, label="x")
    y = x
    for _ in range(1500):  # 3001 nodes: deeper than Python's recursion limit
        y = y * 1.001
    stepper = BackwardStepper(y, max_nodes=50)
    assert stepper.steps == 3001
    stepper.slider.value = stepper.steps
    assert stepper.grads[x] == pytest.approx(1.001**1500, rel=1e-12)
    assert len(svg_boxes(stepper.html.value)) == 50  # the budget holds
    assert "not drawn: outside the node budget" in stepper.html.value  # x is collapsed


def test_lecture_mode_uses_larger_fonts():
    small = BackwardStepper(fan_out_graph()[-1])
    large = BackwardStepper(fan_out_graph()[-1], large=True)
    assert 'font-size="12.00"' in small.frame_svg(1) and "font-size:13px" in small.html.value
    assert 'font-size="20.00"' in large.frame_svg(1) and "font-size:18px" in large.html.value


def test_n_ary_nodes_show_each_inputs_local_derivative():
    """Value.dot (a neuron's weighted sum as one node) and Value.sum have many inputs."""
    w1, w2 = Value(0.5, label="w1"), Value(-1.0, label="w2")
    x1, x2 = Value(2.0, label="x1"), Value(3.0, label="x2")
    y = Value.sum([Value.dot([w1, w2], [x1, x2]), w1])
    y.label = "y"
    stepper = BackwardStepper(y)
    stepper.slider.value = 2  # the dot node: d/dwi = xi, d/dxi = wi
    locals_ = {c.parent.label: c.local for c in stepper.events[1].contributions}
    assert locals_ == {"w1": 2.0, "w2": 3.0, "x1": 0.5, "x2": -1.0}
    stepper.slider.value = stepper.steps
    assert stepper.grads[w1] == pytest.approx(2.0 + 1.0)  # through dot and directly
    assert stepper.grads[x2] == pytest.approx(-1.0)

    def f(a, b):
        return Value.dot([a, b], [b, a])  # 2ab: d/da = 2b

    forward = ForwardStepper(f, [1.0, 2.0], [1.0, 0.0])
    forward.slider.value = forward.steps
    assert forward.tangents[forward.outputs[0]] == pytest.approx(4.0)
    shares = [c.share for c in forward.events[-1].contributions]
    assert shares == [2.0, 0.0, 0.0, 2.0]  # a moves in both of its slots


@pytest.mark.parametrize("prim", ELEMENTWISE, ids=lambda p: p.name)
def test_every_elementwise_primitive_is_explained_from_its_entry(prim):
    """A primitive's entry is all the steppers need: its rule text, its display form and
    its local derivative (from its own vjp/jvp rules, checked here against the rule's
    value computed by central differences)."""
    x = Value(0.7, label="x")
    y = getattr(x, prim.name)()
    backward = BackwardStepper(y)
    forward = ForwardStepper(getattr(ops, prim.name), [0.7])
    h = 1e-6
    slope = (prim.forward(0.7 + h) - prim.forward(0.7 - h)) / (2 * h)
    for stepper, step in [(backward, 1), (forward, 2)]:
        text = html.unescape(stepper.explain(step))
        assert prim.rule in text and f"{prim.text(None)}(x)" in text
    (shown,) = backward.events[0].contributions
    assert shown.local == pytest.approx(slope, rel=1e-6)
    (pushed,) = forward.events[1].contributions
    assert pushed.local == pytest.approx(slope, rel=1e-6)


def test_play_toggle_labels_use_glyphs_debian_fonts_have():
    """U+23F8 (⏸) is in no font Debian's Chromium has and showed as a box: every character
    of the play/pause labels must be in DejaVu Sans (matplotlib ships the same font)."""
    import os

    import matplotlib
    from fontTools.ttLib import TTFont

    from autodiff_lab.viz.steppers import PAUSE_LABEL, PLAY_LABEL

    font = TTFont(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"))
    covered = set(font.getBestCmap())
    assert ord("⏸") not in covered  # the premise: the old glyph is missing
    for label in (PLAY_LABEL, PAUSE_LABEL):
        missing = [ch for ch in label if ord(ch) not in covered]
        assert not missing, f"{label!r}: {missing} not in DejaVu Sans"
    assert "pause" in PAUSE_LABEL and "play" in PLAY_LABEL
