"""Every primitive's derivative rules against central finite differences.

The primitive table (:data:`autodiff_lab.primitives.PRIMITIVES`) is iterated, so a newly
registered primitive is tested automatically — and ``test_every_primitive_has_cases``
fails until it gets an entry in ``CASES`` (``tests/primitive_cases.py``, the one table
of primitive cases that the PyTorch and higher-order tests share: how to draw its inputs,
the domain where it is differentiable).

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

import numpy as np
import pytest
from primitive_cases import CASES, is_condition

from autodiff_lab.primitives import PRIMITIVES, Domain

STEP = 1e-6
RTOL, ATOL = 1e-5, 1e-6


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
        if is_condition(inputs[i]):  # where's mask: a constant, nothing to compare
            continue
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
        if is_condition(x):
            continue
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
