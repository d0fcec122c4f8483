"""Every primitive's derivative rules are themselves differentiable (create_graph).

For each entry of :data:`autodiff_lab.primitives.PRIMITIVES` we take a scalar loss
``L(xs) = sum(W * prim(xs))`` and check, against PyTorch's double backward in float64:

- the gradient ``dL/dx`` (first order);
- the Hessian-vector product ``H v``, both reverse-over-reverse (grad of ``<grad L, v>``)
  and forward-over-reverse (jvp of ``grad L``: the vjp rules' graph replayed with duals,
  which exercises the jvp rules of every op the vjp rules use).

The cases and the PyTorch twins come from the shared table (``tests/primitive_cases.py``);
a primitive without them makes ``test_every_primitive_has_a_second_order_case`` fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from primitive_cases import CASES, over_floats, torch_twins

from autodiff_lab import primitives as P
from autodiff_lab.functional import grad, jvp
from autodiff_lab.primitives import PRIMITIVES, bind

torch = pytest.importorskip("torch")
F64 = torch.float64


TWINS = torch_twins()
# Primitives of the scalar engine taking any number of Value inputs: also checked on
# Python floats (how many inputs each gets).
SCALAR_CASES = {"add_n": 4, "dot": 6}


def test_every_primitive_has_a_second_order_case():
    missing = set(PRIMITIVES) - (set(CASES) & set(TWINS))
    assert not missing, f"add cases and a torch twin for the new primitives {sorted(missing)}"


def _torch_hvp(torch_fn, xs, params, W, vs):
    ts = [torch.tensor(x, dtype=F64, requires_grad=True) for x in xs]
    loss = (torch_fn(*ts, **params) * torch.tensor(W, dtype=F64)).sum()
    grads = torch.autograd.grad(loss, ts, create_graph=True)
    along_v = sum((g * torch.tensor(v, dtype=F64)).sum() for g, v in zip(grads, vs, strict=True))
    if not along_v.requires_grad:  # a linear op: its gradient does not depend on the inputs
        return [g.detach().numpy() for g in grads], [np.zeros_like(x) for x in xs]
    second = torch.autograd.grad(along_v, ts, allow_unused=True)
    hv = [
        np.zeros_like(x) if s is None else s.detach().numpy(force=True)
        for x, s in zip(xs, second, strict=True)
    ]
    return [g.detach().numpy() for g in grads], hv


PARAMS = [
    pytest.param(name, i, id=f"{name}[{case.id}]" if case.id else name)
    for name, cases in CASES.items()
    for i, case in enumerate(cases)
]


@pytest.mark.parametrize("name, i", PARAMS)
def test_primitive_second_derivatives_match_torch_double_backward(name, i):
    case = CASES[name][i]
    prim, twin = PRIMITIVES[name], TWINS[name]
    rng = np.random.default_rng(sum(map(ord, name)) + i)
    inputs = case.draw(rng)  # (where's boolean condition held fixed: not differentiated)
    op, xs = over_floats(lambda *inputs: bind(prim, *inputs, **case.params), inputs)
    torch_fn = over_floats(lambda *ts: twin(*ts, **case.params), inputs)[0]
    out_shape = np.shape(op(*xs))
    W = rng.normal(size=out_shape)
    vs = [rng.normal(size=np.shape(x)) for x in xs]
    every_input = tuple(range(len(xs)))

    def loss(*inputs):
        return (op(*inputs) * W).sum()

    def gradient_along_v(*inputs):
        gs = grad(loss, every_input)(*inputs)
        return sum((g * v).sum() for g, v in zip(gs, vs, strict=True))

    expected_grads, expected_hv = _torch_hvp(torch_fn, xs, {}, W, vs)

    for got, want in zip(grad(loss, every_input)(*xs), expected_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"{name} grad")
    rev_rev = grad(gradient_along_v, every_input)(*xs)
    _, fwd_rev = jvp(grad(loss, every_input), tuple(xs), tuple(vs))
    for got_rr, got_fr, want in zip(rev_rev, fwd_rev, expected_hv, strict=True):
        np.testing.assert_allclose(got_rr, want, rtol=1e-9, atol=1e-12, err_msg=f"{name} rev-rev")
        np.testing.assert_allclose(got_fr, want, rtol=1e-9, atol=1e-12, err_msg=f"{name} fwd-rev")


@pytest.mark.parametrize("name", list(SCALAR_CASES))
def test_scalar_many_input_primitive_second_derivatives(name):
    if name not in PRIMITIVES:
        pytest.skip(f"{name} is not in this version of the registry")
    n, torch_fn = SCALAR_CASES[name], TWINS[name]
    prim = PRIMITIVES[name]
    rng = np.random.default_rng(len(name))
    xs = [float(a) for a in rng.normal(size=n)]
    vs = [float(a) for a in rng.normal(size=n)]
    w = 1.7
    every_input = tuple(range(n))

    def loss(*inputs):  # a nonlinear wrapper, so the second derivatives are not all zero
        return P.ops.tanh(bind(prim, *inputs)) * w

    def gradient_along_v(*inputs):
        return sum(g * v for g, v in zip(grad(loss, every_input)(*inputs), vs, strict=True))

    ts = [torch.tensor(x, dtype=F64, requires_grad=True) for x in xs]
    tloss = torch.tanh(torch_fn(*ts)) * w
    tgrads = torch.autograd.grad(tloss, ts, create_graph=True)
    thv = torch.autograd.grad(sum(g * v for g, v in zip(tgrads, vs, strict=True)), ts)

    np.testing.assert_allclose(
        grad(loss, every_input)(*xs), [float(g.detach()) for g in tgrads], rtol=1e-12
    )
    np.testing.assert_allclose(
        grad(gradient_along_v, every_input)(*xs), [float(h) for h in thv], rtol=1e-10
    )
    _, fwd_rev = jvp(grad(loss, every_input), tuple(xs), tuple(vs))
    np.testing.assert_allclose(fwd_rev, [float(h) for h in thv], rtol=1e-10)
