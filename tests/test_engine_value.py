"""The scalar ``Value``: closed-form derivatives, micrograd compatibility and graph semantics.

Expected numbers come from calculus written out by hand (``d tanh = 1 - tanh^2``…), from
the PyPI ``micrograd`` package, or from plain arithmetic — never from the engine itself.
"""

from __future__ import annotations

import gc
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import autodiff_lab as adl
from autodiff_lab import Value, no_grad, topological_order


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# --- closed-form derivatives ---------------------------------------------------------------

UNARY = {  # name: (f on a Value, df/dx by calculus, points to check)
    "exp": (lambda v: v.exp(), math.exp, [-2.0, 0.0, 1.5]),
    "log": (lambda v: v.log(), lambda x: 1 / x, [0.1, 1.0, 7.0]),
    "tanh": (lambda v: v.tanh(), lambda x: 1 - math.tanh(x) ** 2, [-3.0, 0.0, 0.4]),
    "sigmoid": (lambda v: v.sigmoid(), lambda x: sigmoid(x) * (1 - sigmoid(x)), [-4.0, 0.0, 2.0]),
    "relu": (lambda v: v.relu(), lambda x: 1.0 if x > 0 else 0.0, [-1.0, 0.0, 2.5]),
    "sin": (lambda v: v.sin(), math.cos, [-1.0, 0.0, 2.0]),
    "cos": (lambda v: v.cos(), lambda x: -math.sin(x), [-1.0, 0.0, 2.0]),
    "sqrt": (lambda v: v.sqrt(), lambda x: 0.5 / math.sqrt(x), [0.25, 1.0, 9.0]),
    "abs": (lambda v: abs(v), lambda x: math.copysign(1.0, x) if x else 0.0, [-2.0, 0.0, 3.0]),
    "neg": (lambda v: -v, lambda x: -1.0, [-2.0, 3.0]),
    "x**3": (lambda v: v**3, lambda x: 3 * x**2, [-2.0, 0.0, 1.5]),
    "x**0.5": (lambda v: v**0.5, lambda x: 0.5 * x**-0.5, [0.25, 4.0]),
    "x**-2": (lambda v: v**-2, lambda x: -2 * x**-3, [-1.5, 0.5]),
    "1/x": (lambda v: 1 / v, lambda x: -1 / x**2, [-2.0, 0.5]),
    "2**x": (lambda v: 2**v, lambda x: 2**x * math.log(2), [-1.0, 0.0, 3.0]),
    "x*x (fan-out)": (lambda v: v * v, lambda x: 2 * x, [-3.0, 0.0, 1.25]),
    "x+x (fan-out)": (lambda v: v + v, lambda x: 2.0, [-3.0, 1.25]),
    "x used in 3 places": (
        lambda v: v * v.exp() + v.sin() - v,
        lambda x: math.exp(x) + x * math.exp(x) + math.cos(x) - 1,
        [-1.0, 0.3],
    ),
    "tanh(tanh(x))": (
        lambda v: v.tanh().tanh(),
        lambda x: (1 - math.tanh(math.tanh(x)) ** 2) * (1 - math.tanh(x) ** 2),
        [-0.7, 1.1],
    ),
}


@pytest.mark.parametrize(
    "name, x", [(name, x) for name, (_, _, points) in UNARY.items() for x in points]
)
def test_unary_derivative_matches_calculus(name, x):
    f, df, _ = UNARY[name]
    v = Value(x)
    out = f(v)
    out.backward()
    assert v.grad == pytest.approx(df(x), rel=1e-12, abs=1e-14)


BINARY = {  # name: (f, d/da, d/db)
    "a + b": (lambda a, b: a + b, lambda a, b: 1.0, lambda a, b: 1.0),
    "a - b": (lambda a, b: a - b, lambda a, b: 1.0, lambda a, b: -1.0),
    "a * b": (lambda a, b: a * b, lambda a, b: b, lambda a, b: a),
    "a / b": (lambda a, b: a / b, lambda a, b: 1 / b, lambda a, b: -a / b**2),
    "a ** b": (
        lambda a, b: a**b,
        lambda a, b: b * a ** (b - 1),
        lambda a, b: a**b * math.log(a),
    ),
    "a * b + b": (lambda a, b: a * b + b, lambda a, b: b, lambda a, b: a + 1),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("a0, b0", [(1.5, -0.5), (0.3, 2.0), (2.0, 3.0)])
def test_binary_derivatives_match_calculus(name, a0, b0):
    f, da, db = BINARY[name]
    a, b = Value(a0), Value(b0)
    out = f(a, b)
    out.backward()
    assert out.data == pytest.approx(f(a0, b0), rel=1e-14)
    assert a.grad == pytest.approx(da(a0, b0), rel=1e-12)
    assert b.grad == pytest.approx(db(a0, b0), rel=1e-12)


@pytest.mark.parametrize("x", [1000.0, -1000.0, 710.0, -745.0])
def test_tanh_and_sigmoid_of_huge_inputs_are_finite(x):
    for f, value, slope in [
        (Value.tanh, math.copysign(1.0, x), 0.0),
        (Value.sigmoid, 1.0 if x > 0 else 0.0, 0.0),
    ]:
        v = Value(x)
        out = f(v)
        out.backward()
        assert out.data == pytest.approx(value, abs=1e-300)
        assert math.isfinite(v.grad) and v.grad == pytest.approx(slope, abs=1e-300)


def test_generic_math_functions_accept_values():
    x = Value(0.5)
    out = adl.exp(x) * adl.tanh(x) + adl.log(x) - adl.sqrt(x) + adl.sigmoid(x) + adl.relu(x)
    out.backward()
    t, s = math.tanh(0.5), sigmoid(0.5)
    expected = (
        math.exp(0.5) * t + math.exp(0.5) * (1 - t * t) + 2 - 0.5 / math.sqrt(0.5) + s * (1 - s) + 1
    )
    assert x.grad == pytest.approx(expected, rel=1e-12)


# --- micrograd compatibility ----------------------------------------------------------------


def test_micrograd_attributes():
    a = Value(2.0, label="a")
    b = Value(-3.0, label="b")
    c = a * b
    d = c + a
    e = d**2
    f = e.relu()
    assert (a.data, a.grad, a._prev, a._op, a.label) == (2.0, 0.0, (), "", "a")
    assert isinstance(a.grad, float)
    assert c._prev == (a, b) and c._op == "*"
    assert d._prev == (c, a) and d._op == "+"
    assert e._prev == (d,) and e._op == "**2"
    assert f._prev == (e,) and f._op == "ReLU"
    assert a.tanh()._op == "tanh" and a.exp()._op == "exp"


def test_micrograd_style_construction_with_children_and_op():
    """``Value(data, (a, b), '+')`` (how micrograd builds nodes) backpropagates too."""
    a, b = Value(2.0), Value(5.0)
    c = Value(a.data * b.data, (a, b), "*")
    c.backward()
    assert (a.grad, b.grad) == (5.0, 2.0)


def _micrograd_expression(a, b):
    """An expression micrograd's Value supports: + - * / ** relu, reflected forms."""
    c = a * b + b**3 - 2 / a
    d = (c - a).relu() * 0.5 + (b + 1) ** 2
    e = 3 - d / (a * a + 1)
    return e * e + (-e).relu()


@pytest.mark.parametrize("a0, b0", [(-4.0, 2.0), (1.5, -0.75), (0.5, 3.0)])
def test_same_values_and_gradients_as_micrograd(a0, b0):
    micrograd = pytest.importorskip("micrograd.engine")
    ours_a, ours_b = Value(a0), Value(b0)
    theirs_a, theirs_b = micrograd.Value(a0), micrograd.Value(b0)
    ours = _micrograd_expression(ours_a, ours_b)
    theirs = _micrograd_expression(theirs_a, theirs_b)
    ours.backward()
    theirs.backward()
    assert ours.data == pytest.approx(theirs.data, rel=1e-12)
    assert ours_a.grad == pytest.approx(theirs_a.grad, rel=1e-12)
    assert ours_b.grad == pytest.approx(theirs_b.grad, rel=1e-12)


# --- accumulation --------------------------------------------------------------------------


def test_fan_out_gradients_add_up():
    a = Value(3.0)
    b = a + a  # db/da = 2
    c = b * a  # c = 2a^2: dc/da = 4a
    c.backward()
    assert a.grad == 12.0 and b.grad == 3.0


def test_repeated_backward_doubles_every_grad_on_the_same_graph():
    """PyTorch semantics: gradients accumulate; leaves get exactly 2x after two calls.

    Documented behaviour of this engine: intermediate nodes keep a ``.grad`` too, and it
    accumulates the same way (PyTorch keeps leaf gradients only).
    """
    x, w = Value(0.8), Value(-1.3)
    h = x * w
    y = h.tanh()
    y.backward()
    once = {"x": x.grad, "w": w.grad, "h": h.grad, "y": y.grad}
    assert once["y"] == 1.0 and once["h"] == pytest.approx(1 - math.tanh(-1.04) ** 2)
    y.backward()
    assert {"x": x.grad, "w": w.grad, "h": h.grad, "y": y.grad} == {
        k: 2 * g for k, g in once.items()
    }


def test_zero_grad_resets_the_whole_graph():
    x = Value(0.5)
    y = (x * x).exp()
    y.backward()
    assert x.grad != 0.0
    y.zero_grad()
    assert all(node.grad == 0.0 for node in topological_order(y))
    y.backward()
    assert x.grad == pytest.approx(2 * 0.5 * math.exp(0.25), rel=1e-14)


def test_intermediate_nodes_keep_their_gradients():
    a, b = Value(0.3), Value(-2.0)
    c = a * b
    d = c.tanh()
    e = d * 3.0
    e.backward()
    assert e.grad == 1.0
    assert d.grad == 3.0
    assert c.grad == pytest.approx(3 * (1 - math.tanh(-0.6) ** 2), rel=1e-14)
    assert a.grad == pytest.approx(c.grad * -2.0, rel=1e-14)


# --- order: deterministic, topological ------------------------------------------------------


def test_prev_is_in_argument_order():
    a, b = Value(1.0), Value(2.0)
    assert (a * b)._prev == (a, b)
    assert (b * a)._prev == (b, a)
    assert (a - b)._prev == (a, b)
    left = 5.0 - a  # the number becomes a leaf on the left
    assert left._prev[1] is a and left._prev[0].data == 5.0
    assert (a**b)._prev == (a, b)


def _diamond_graph():
    x = Value(0.5, label="x")
    y = Value(-1.5, label="y")
    a = x * y
    a.label = "a"
    b = a.tanh() + x
    b.label = "b"
    c = b * a + y.exp()
    c.label = "c"
    return c


def test_topological_order_puts_every_node_after_its_inputs():
    root = _diamond_graph()
    order = topological_order(root)
    assert order[-1] is root
    position = {id(node): i for i, node in enumerate(order)}
    assert len(position) == len(order), "a node is listed twice"
    for node in order:
        for parent in node._prev:
            assert position[id(parent)] < position[id(node)]
    assert len(order) == 8  # x, y, a, tanh, b, the product, exp, c
    labels = [node.label for node in order if node.label]
    assert labels == ["x", "y", "a", "b", "c"]


_ORDER_SCRIPT = textwrap.dedent(
    """
    from autodiff_lab import Value, topological_order
    x, y = Value(0.5), Value(-1.5)
    for node, name in ((x, "x"), (y, "y")):
        node.label = name
    a = x * y; a.label = "a"
    b = a.tanh() + x; b.label = "b"
    c = b * a + y.exp(); c.label = "c"
    print([n.label or n._op for n in topological_order(c)])
    """
)


def test_topological_order_is_the_same_in_every_process():
    """Unlike a set (micrograd's _prev), the order does not depend on hashing or addresses."""
    runs = set()
    for seed in ("0", "12345"):
        result = subprocess.run(
            [sys.executable, "-c", _ORDER_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
            cwd=Path(__file__).resolve().parent.parent,
        )
        runs.add(result.stdout)
    assert len(runs) == 1
    (line,) = runs
    assert line.strip() == "['x', 'y', 'a', 'tanh', 'b', '*', 'exp', 'c']"


# --- no_grad and detach ---------------------------------------------------------------------


def test_no_grad_records_nothing():
    x = Value(2.0)
    with no_grad():
        assert not adl.is_grad_enabled()
        y = (x * 3.0).tanh() + x
    assert adl.is_grad_enabled()
    assert y._prev == () and y._op == ""
    assert y.data == pytest.approx(math.tanh(6.0) + 2.0)
    y.backward()
    assert x.grad == 0.0  # nothing connects y to x


def test_no_grad_is_restored_after_an_exception_and_when_nested():
    with pytest.raises(RuntimeError):
        with no_grad():
            raise RuntimeError("boom")
    assert adl.is_grad_enabled()
    with no_grad():
        with no_grad():
            pass
        assert not adl.is_grad_enabled()
    assert adl.is_grad_enabled()


def test_detach_cuts_the_graph():
    x = Value(1.5)
    y = x * x
    z = y.detach() * x  # y is treated as a constant 2.25
    z.backward()
    assert z.data == 1.5**3
    assert x.grad == 2.25
    assert y.detach()._prev == () and y.detach() is not y


# --- deep graphs ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_chain_of_a_million_ops_backpropagates():
    """No recursion: a chain 10^6 deep (micrograd's recursive sort fails at ~1000)."""
    x = Value(0.5)
    y = x
    for _ in range(1_000_000):
        y = -y
    y.backward()
    assert y.data == 0.5
    assert x.grad == 1.0  # (-1)^1000000


def test_a_chain_deeper_than_the_recursion_limit():
    x = Value(0.1)
    y = x
    for _ in range(3 * sys.getrecursionlimit()):
        y = y * 1.0 + 0.0
    y.backward()
    assert x.grad == 1.0
    assert len(topological_order(y)) == 1 + 3 * sys.getrecursionlimit() * 4


# --- small conveniences -------------------------------------------------------------------------


def test_numbers_and_numpy_scalars_become_floats():
    np = pytest.importorskip("numpy")
    for raw in (3, 3.0, np.float32(3.0), np.int64(3), np.float64(3.0)):
        v = Value(raw)
        assert type(v.data) is float and v.data == 3.0


def test_comparisons_give_plain_bools_and_values_are_hashable():
    a, b = Value(1.0), Value(2.0)
    assert (a < b) is True and (a >= 2.0) is False and (b > 1) is True
    assert len({a, b, a}) == 2
    assert float(b) == 2.0


def test_fused_sum_and_dot_nodes():
    """``Value.sum`` and ``Value.dot`` record one node: d/dv_i = 1; d/dw_i = x_i, d/dx_i = w_i."""
    ws = [Value(w) for w in (0.5, -1.0, 2.0)]
    xs = [Value(x) for x in (3.0, 0.25, -1.5)]
    bias = Value(0.1)
    out = Value.dot(ws, xs) + Value.sum([bias, ws[0]])
    assert out.data == pytest.approx(0.5 * 3.0 - 0.25 - 3.0 + 0.1 + 0.5)
    out.backward()
    assert [w.grad for w in ws] == [3.0 + 1.0, 0.25, -1.5]
    assert [x.grad for x in xs] == [0.5, -1.0, 2.0]
    assert bias.grad == 1.0


def test_a_finished_graph_leaves_no_reference_cycles():
    """Nodes hold no closures, so a graph is freed by reference counting alone (micrograd's
    closures make cycles that wait for the garbage collector)."""
    gc.collect()
    gc.disable()
    try:
        x = Value(0.5)
        y = (x * x).tanh() + x * 3.0
        y.backward()
        del y
        assert gc.collect() == 0  # nothing unreachable was left for the collector
    finally:
        gc.enable()
