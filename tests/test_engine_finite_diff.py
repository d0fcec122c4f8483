"""Every primitive's derivative rules against central finite differences.

The primitive table (:data:`autodiff_lab.primitives.PRIMITIVES`) is iterated, so a newly
registered primitive is tested automatically — and ``test_every_primitive_has_cases``
fails until it gets an entry in ``CASES`` below (how to draw its inputs: the domain where
it is differentiable).

For each case, with float64 inputs:

- vjp rules: for a random cotangent ``g``, the rule for input ``x`` must equal the
  gradient of ``<g, f(x)>`` estimated entry by entry as
  ``(<g, f(x + h e_j)> - <g, f(x - h e_j)>) / 2h``;
- jvp rules: for a random tangent ``t``, the rule must equal
  ``(f(x + h t) - f(x - h t)) / 2h``;
- both rules return arrays shaped like (vjp) their input and (jvp) the output, and keep
  float32 as float32.

The expected values come only from the primitive's *forward* function, never from its
rules. Central differences have error O(h^2) + O(eps/h); with h = 1e-6 that is ~1e-9.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from autodiff_lab.primitives import PRIMITIVES, Domain

STEP = 1e-6
RTOL, ATOL = 1e-5, 1e-6


# --- input generators (the domain each primitive is differentiable on) -----------------


def anywhere(*shape):
    """Standard normal entries: for functions smooth everywhere."""
    return lambda rng: rng.standard_normal(shape)


def positive(*shape, low=0.3, high=2.5):
    """Entries in [low, high]: log, sqrt, the base of a power."""
    return lambda rng: rng.uniform(low, high, shape)


def away_from_zero(*shape):
    """Entries with |x| in [0.2, 2]: kinks at 0 (relu, abs) and denominators."""
    return lambda rng: rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


@dataclass
class Case:
    """One way to call a primitive: how to draw its array inputs, and its parameters."""

    inputs: tuple[Callable[[np.random.Generator], np.ndarray], ...]
    params: dict = field(default_factory=dict)
    id: str = ""

    def draw(self, rng, dtype=np.float64) -> list[np.ndarray]:
        return [np.asarray(make(rng), dtype=dtype) for make in self.inputs]


def binary(make_a, make_b):
    """Cases for an elementwise binary op: same shapes, broadcasting both ways, scalars."""
    return [
        Case((make_a(3, 4), make_b(3, 4)), id="same shape"),
        Case((make_a(3, 1), make_b(4)), id="(3,1) with (4,)"),
        Case((make_a(2, 1, 3), make_b(4, 1)), id="(2,1,3) with (4,1)"),
        Case((make_a(), make_b(2, 3)), id="0-d with (2,3)"),
        Case((make_a(), make_b()), id="0-d with 0-d"),
    ]


CASES: dict[str, list[Case]] = {
    "add": binary(anywhere, anywhere),
    "sub": binary(anywhere, anywhere),
    "mul": binary(anywhere, anywhere),
    "div": binary(anywhere, away_from_zero),
    "pow": binary(positive, anywhere),
    "neg": [Case((anywhere(3, 4),)), Case((anywhere(),), id="0-d")],
    "pow_const": [
        Case((anywhere(3, 4),), {"exponent": 3}, id="x^3"),
        Case((anywhere(3, 4),), {"exponent": 2.0}, id="x^2.0"),
        Case((positive(3, 4),), {"exponent": 0.5}, id="x^0.5"),
        Case((positive(5),), {"exponent": -1.5}, id="x^-1.5"),
    ],
    "exp": [Case((anywhere(3, 4),))],
    "log": [Case((positive(3, 4),))],
    "tanh": [Case((anywhere(3, 4),))],
    "sigmoid": [Case((anywhere(3, 4),))],
    "softplus": [Case((anywhere(3, 4),))],
    "relu": [Case((away_from_zero(3, 4),))],
    "sin": [Case((anywhere(3, 4),))],
    "cos": [Case((anywhere(3, 4),))],
    "sqrt": [Case((positive(3, 4),))],
    "abs": [Case((away_from_zero(3, 4),))],
    **{
        name: [
            Case((anywhere(2, 3, 4),), {"axis": axis, "keepdims": keepdims}, id=f"{axis}-{keep}")
            for axis in (None, 0, -1, (0, 2))
            for keepdims, keep in ((False, "drop"), (True, "keep"))
        ]
        for name in ("sum", "mean", "max")  # random normals: no ties, max is smooth there
    },
    "reshape": [
        Case((anywhere(2, 3, 4),), {"shape": (6, 4)}),
        Case((anywhere(2, 3, 4),), {"shape": (-1,)}, id="flatten"),
        Case((anywhere(6),), {"shape": (1, 2, 3)}, id="add axes"),
    ],
    "transpose": [
        Case((anywhere(3, 4),), {"axes": None}, id="matrix .T"),
        Case((anywhere(2, 3, 4),), {"axes": (1, 2, 0)}, id="permutation"),
        Case((anywhere(2, 3, 4),), {"axes": None}, id="reverse axes"),
        Case((anywhere(2, 3, 4),), {"axes": (-1, 0, -2)}, id="negative axes"),
    ],
    "broadcast_to": [
        Case((anywhere(3, 1),), {"shape": (2, 3, 4)}),
        Case((anywhere(),), {"shape": (2, 2)}, id="from 0-d"),
        Case((anywhere(4),), {"shape": (3, 4)}, id="new leading axis"),
    ],
    "getitem": [
        Case((anywhere(4, 3),), {"index": 1}, id="int"),
        Case((anywhere(4, 3),), {"index": (slice(None), slice(1, 3))}, id="slices"),
        Case((anywhere(4, 3),), {"index": np.array([0, 2, 0, 0])}, id="repeated rows"),
        Case(
            (anywhere(4, 3),),
            {"index": (np.array([0, 1, 1, 0]), np.array([2, 0, 0, 2]))},
            id="repeated entries",
        ),
        Case((anywhere(4, 3),), {"index": (Ellipsis, -1)}, id="ellipsis"),
    ],
    "scatter_add": [
        Case((anywhere(4, 3),), {"index": np.array([0, 2, 0, 1]), "shape": (3, 3)}, id="rows"),
        Case((anywhere(3),), {"index": (1, np.array([0, 2, 2])), "shape": (2, 3)}, id="mixed"),
    ],
    "concatenate": [
        Case((anywhere(2, 3), anywhere(4, 3)), {"axis": 0}, id="axis 0"),
        Case((anywhere(2, 1), anywhere(2, 3), anywhere(2, 2)), {"axis": 1}, id="three, axis 1"),
        Case((anywhere(2, 3), anywhere(2, 3)), {"axis": -1}, id="axis -1"),
    ],
    "matmul": [
        Case((anywhere(3, 4), anywhere(4, 2)), id="2-D @ 2-D"),
        Case((anywhere(4), anywhere(4, 2)), id="1-D @ 2-D"),
        Case((anywhere(3, 4), anywhere(4)), id="2-D @ 1-D"),
        Case((anywhere(4), anywhere(4)), id="1-D @ 1-D"),
        Case((anywhere(2, 3, 4), anywhere(2, 4, 2)), id="batched"),
        Case((anywhere(2, 3, 4), anywhere(4, 2)), id="batched @ 2-D"),
        Case((anywhere(1, 3, 4), anywhere(2, 4, 2)), id="broadcast batch"),
        Case((anywhere(4), anywhere(2, 4, 3)), id="1-D @ batched"),
        Case((anywhere(2, 3, 4), anywhere(4)), id="batched @ 1-D"),
    ],
    "softmax": [
        Case((anywhere(3, 4),), {"axis": -1}),
        Case((anywhere(3, 4),), {"axis": 0}, id="axis 0"),
        Case((anywhere(2, 3, 4),), {"axis": 1}, id="3-D axis 1"),
    ],
    "log_softmax": [
        Case((anywhere(3, 4),), {"axis": -1}),
        Case((anywhere(3, 4),), {"axis": 0}, id="axis 0"),
        Case((anywhere(2, 3, 4),), {"axis": 1}, id="3-D axis 1"),
    ],
    "cross_entropy": [
        Case((anywhere(5, 4),), {"targets": np.array([0, 3, 3, 1, 2])}),
        Case((anywhere(1, 3),), {"targets": np.array([2])}, id="batch of one"),
    ],
    # many-input scalar ops (a neuron's weighted sum as one Value node)
    "add_n": [
        Case(tuple(anywhere() for _ in range(5)), id="five scalars"),
        Case((anywhere(),), id="one scalar"),
        Case((anywhere(3), anywhere(3), anywhere(3)), id="same-shape arrays"),
    ],
    "dot": [
        Case(tuple(anywhere() for _ in range(8)), id="w1..w4, x1..x4"),
        Case((anywhere(), anywhere()), id="w1, x1"),
    ],
}

ALL_CASES = [  # registered primitives only (a missing entry fails the coverage test)
    pytest.param(name, case, id=f"{name}[{case.id}]" if case.id else name)
    for name in PRIMITIVES
    for case in CASES.get(name, ())
]


# --- applying a primitive's rules --------------------------------------------------------


def vjp_shares(prim, g, out, inputs, params) -> list:
    """Every input's share of the gradient, as the primitive's pullback gives it."""
    return prim.pullback(g, out, inputs, params, [True] * len(inputs))


def jvp_share(prim, i, t, out, inputs, params):
    """The output's tangent when only input ``i`` moves, with tangent ``t``."""
    tangents = [None] * len(inputs)
    tangents[i] = t
    return prim.pushforward(tangents, out, inputs, params)


def forward_with(prim, inputs, i, x_i, params):
    """The primitive's output with input ``i`` replaced by ``x_i``."""
    inputs = list(inputs)
    inputs[i] = x_i
    return np.asarray(prim.forward(*inputs, **params), dtype=np.float64)


def numerical_vjp(prim, inputs, i, g, params) -> np.ndarray:
    """d <g, f(inputs)> / d inputs[i], one central difference per entry."""
    x = inputs[i]
    grad = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        bump = np.zeros_like(x)
        bump[j] = STEP
        up = np.sum(g * forward_with(prim, inputs, i, x + bump, params))
        down = np.sum(g * forward_with(prim, inputs, i, x - bump, params))
        grad[j] = (up - down) / (2 * STEP)
    return grad


def numerical_jvp(prim, inputs, i, t, params) -> np.ndarray:
    """(f(x + h t) - f(x - h t)) / 2h, moving input ``i`` only."""
    x = inputs[i]
    up = forward_with(prim, inputs, i, x + STEP * t, params)
    down = forward_with(prim, inputs, i, x - STEP * t, params)
    return (up - down) / (2 * STEP)


# --- the tests -----------------------------------------------------------------------------


def test_every_primitive_has_cases():
    """A registered primitive without an entry in CASES would go untested: fail loudly."""
    missing = sorted(set(PRIMITIVES) - set(CASES))
    assert not missing, f"add finite-difference cases for the new primitives {missing}"


def test_every_primitive_entry_is_complete():
    """One entry holds everything: forward, rules for both modes, rule text for the
    steppers, display form for the drawings, and domain (a missing piece fails here)."""
    for name, prim in PRIMITIVES.items():
        assert callable(prim.forward), name
        assert isinstance(prim.rule, str) and prim.rule.strip(), f"{name}: no rule text"
        assert prim.display and (callable(prim.display) or prim.display.strip()), name
        assert prim.notation in ("infix", "power", "prefix", "call"), f"{name}: notation"
        assert isinstance(prim.domain, Domain), f"{name}: no domain"


def test_every_primitive_has_rules_for_both_modes():
    for name, prim in PRIMITIVES.items():
        assert prim.vjp or (prim.vjp_all is not None), f"{name}: no vjp rules"
        assert prim.jvp or (prim.jvp_all is not None), f"{name}: no jvp rules"
        if prim.vjp and prim.jvp:
            assert len(prim.vjp) == len(prim.jvp), f"{name}: vjp and jvp arities differ"


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_vjp_rules_match_central_differences(name, case, rng):
    prim = PRIMITIVES[name]
    inputs = case.draw(rng)
    out = prim.forward(*inputs, **case.params)
    g = rng.standard_normal(np.shape(out))
    shares = vjp_shares(prim, g, out, inputs, case.params)
    assert len(shares) == len(inputs)
    for i, share in enumerate(shares):
        assert share is not None, f"{name}: input {i} has no vjp rule"
        share = np.asarray(share)
        assert share.shape == inputs[i].shape, f"{name}: input {i} gradient has wrong shape"
        expected = numerical_vjp(prim, inputs, i, g, case.params)
        np.testing.assert_allclose(share, expected, rtol=RTOL, atol=ATOL, err_msg=f"{name} #{i}")


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_jvp_rules_match_central_differences(name, case, rng):
    prim = PRIMITIVES[name]
    inputs = case.draw(rng)
    out = prim.forward(*inputs, **case.params)
    for i, x in enumerate(inputs):
        t = rng.standard_normal(x.shape)
        share = np.asarray(jvp_share(prim, i, t, out, inputs, case.params))
        assert share.shape == np.shape(out), f"{name}: tangent from input {i} has wrong shape"
        expected = numerical_jvp(prim, inputs, i, t, case.params)
        np.testing.assert_allclose(share, expected, rtol=RTOL, atol=ATOL, err_msg=f"{name} #{i}")


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_rules_keep_float32(name, case, rng):
    """float32 in, float32 out: forward value, every gradient share, every tangent."""
    prim = PRIMITIVES[name]
    inputs = case.draw(rng, dtype=np.float32)
    out = prim.forward(*inputs, **case.params)
    assert np.result_type(out) == np.float32, f"{name} forward gave {np.result_type(out)}"
    g = np.ones(np.shape(out), dtype=np.float32)
    for i, share in enumerate(vjp_shares(prim, g, out, inputs, case.params)):
        assert np.result_type(share) == np.float32, f"{name} vjp #{i}: {np.result_type(share)}"
    for i, x in enumerate(inputs):
        t = np.ones(x.shape, dtype=np.float32)
        share = jvp_share(prim, i, t, out, inputs, case.params)
        assert np.result_type(share) == np.float32, f"{name} jvp #{i}: {np.result_type(share)}"


def test_central_differences_catch_a_wrong_rule(rng):
    """The checker itself is sharp: a rule off by 1 % is rejected."""
    prim = PRIMITIVES["tanh"]
    x = rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    out = prim.forward(x)
    wrong = 1.01 * prim.vjp[0](g, out, x)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(wrong, numerical_vjp(prim, [x], 0, g, {}), rtol=RTOL, atol=ATOL)
