"""Every primitive's derivative rules are themselves differentiable (create_graph).

For each entry of :data:`autodiff_lab.primitives.PRIMITIVES` we take a scalar loss
``L(xs) = sum(W * prim(xs))`` and check, against PyTorch's double backward in float64:

- the gradient ``dL/dx`` (first order);
- the Hessian-vector product ``H v``, both reverse-over-reverse (grad of ``<grad L, v>``)
  and forward-over-reverse (jvp of ``grad L``: the vjp rules' graph replayed with duals,
  which exercises the jvp rules of every op the vjp rules use).

A primitive added to the registry without a case here makes
``test_every_primitive_has_a_second_order_case`` fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import primitives as P
from autodiff_lab.functional import grad, jvp
from autodiff_lab.primitives import PRIMITIVES, bind

torch = pytest.importorskip("torch")
F64 = torch.float64


def _scatter_add_torch(g, index, shape):
    return torch.zeros(shape, dtype=F64).index_add(0, torch.as_tensor(index), g)


def _positive(rng, shape):
    return rng.uniform(0.5, 2.0, size=shape)


def _away_from_zero(rng, shape):
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.3, 2.0, size=shape)


# name -> list of (case label, make inputs(rng) -> list of arrays, params, torch function)
CASES = {
    "add": [("broadcast", lambda r: [r.normal(size=(3, 1)), r.normal(size=4)], {}, torch.add)],
    "sub": [("broadcast", lambda r: [r.normal(size=(2, 3)), r.normal(size=3)], {}, torch.sub)],
    "mul": [("broadcast", lambda r: [r.normal(size=(2, 3)), r.normal(size=(1, 3))], {}, torch.mul)],
    "div": [("broadcast", lambda r: [r.normal(size=(2, 3)), _positive(r, 3)], {}, torch.div)],
    "neg": [("", lambda r: [r.normal(size=4)], {}, torch.neg)],
    "pow": [("a^b", lambda r: [_positive(r, 4), r.uniform(-1.5, 2.5, 4)], {}, torch.pow)],
    "pow_const": [
        ("x^3", lambda r: [r.normal(size=4)], {"exponent": 3.0}, lambda x: x**3.0),
        ("x^-1.5", lambda r: [_positive(r, 4)], {"exponent": -1.5}, lambda x: x**-1.5),
    ],
    "exp": [("", lambda r: [r.normal(size=4)], {}, torch.exp)],
    "log": [("", lambda r: [_positive(r, 4)], {}, torch.log)],
    "tanh": [("", lambda r: [r.normal(size=4)], {}, torch.tanh)],
    "sigmoid": [("", lambda r: [r.normal(size=4)], {}, torch.sigmoid)],
    "softplus": [("", lambda r: [r.normal(size=4)], {}, torch.nn.functional.softplus)],
    "relu": [("", lambda r: [_away_from_zero(r, 5)], {}, torch.relu)],
    "sin": [("", lambda r: [r.normal(size=4)], {}, torch.sin)],
    "cos": [("", lambda r: [r.normal(size=4)], {}, torch.cos)],
    "sqrt": [("", lambda r: [_positive(r, 4)], {}, torch.sqrt)],
    "abs": [("", lambda r: [_away_from_zero(r, 5)], {}, torch.abs)],
    "sum": [
        ("axis=1", lambda r: [r.normal(size=(2, 3))], {"axis": 1}, lambda x: x.sum(1)),
        ("all", lambda r: [r.normal(size=(2, 3))], {}, lambda x: x.sum()),
    ],
    "mean": [
        (
            "axis=0 keepdims",
            lambda r: [r.normal(size=(2, 3))],
            {"axis": 0, "keepdims": True},
            lambda x: x.mean(0, keepdim=True),
        )
    ],
    "max": [("axis=1", lambda r: [r.normal(size=(3, 4))], {"axis": 1}, lambda x: x.amax(1))],
    "reshape": [
        (
            "(2,3)->(3,2)",
            lambda r: [r.normal(size=(2, 3))],
            {"shape": (3, 2)},
            lambda x: x.reshape(3, 2),
        )
    ],
    "transpose": [
        (
            "axes=(1,0,2)",
            lambda r: [r.normal(size=(2, 3, 4))],
            {"axes": (1, 0, 2)},
            lambda x: x.permute(1, 0, 2),
        )
    ],
    "broadcast_to": [
        (
            "(2,1)->(4,2,3)",
            lambda r: [r.normal(size=(2, 1))],
            {"shape": (4, 2, 3)},
            lambda x: x.expand(4, 2, 3),
        )
    ],
    "getitem": [
        (
            "repeated rows",
            lambda r: [r.normal(size=(3, 4))],
            {"index": np.array([0, 2, 0])},
            lambda x: x[torch.tensor([0, 2, 0])],
        )
    ],
    "scatter_add": [
        (
            "repeated rows",
            lambda r: [r.normal(size=(3, 4))],
            {"index": np.array([0, 2, 0]), "shape": (4, 4)},
            lambda g: _scatter_add_torch(g, [0, 2, 0], (4, 4)),
        )
    ],
    "concatenate": [
        (
            "axis=1",
            lambda r: [r.normal(size=(2, 3)), r.normal(size=(2, 2))],
            {"axis": 1},
            lambda a, b: torch.cat([a, b], 1),
        )
    ],
    "matmul": [
        ("2d@2d", lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))], {}, torch.matmul),
        ("1d@2d", lambda r: [r.normal(size=3), r.normal(size=(3, 4))], {}, torch.matmul),
        ("2d@1d", lambda r: [r.normal(size=(2, 3)), r.normal(size=3)], {}, torch.matmul),
        ("1d@1d", lambda r: [r.normal(size=3), r.normal(size=3)], {}, torch.matmul),
        ("batched", lambda r: [r.normal(size=(2, 2, 3)), r.normal(size=(3, 4))], {}, torch.matmul),
    ],
    "softmax": [
        ("axis=-1", lambda r: [r.normal(size=(2, 4))], {"axis": -1}, lambda x: x.softmax(-1))
    ],
    "log_softmax": [
        ("axis=0", lambda r: [r.normal(size=(3, 2))], {"axis": 0}, lambda x: x.log_softmax(0))
    ],
    "cross_entropy": [
        (
            "N=3, C=4",
            lambda r: [r.normal(size=(3, 4))],
            {"targets": np.array([1, 0, 3])},
            lambda z: torch.nn.functional.cross_entropy(z, torch.tensor([1, 0, 3])),
        )
    ],
}

# Primitives of the scalar engine taking any number of Value inputs.
SCALAR_CASES = {
    "add_n": (4, lambda *xs: sum(xs[1:], xs[0])),
    "dot": (6, lambda *xs: sum((w * v for w, v in zip(xs[:3], xs[3:], strict=True)), 0.0)),
}


def test_every_primitive_has_a_second_order_case():
    missing = set(PRIMITIVES) - set(CASES) - set(SCALAR_CASES)
    assert not missing, f"add second-order cases for the new primitives {sorted(missing)}"


def _torch_hvp(torch_fn, xs, W, vs):
    ts = [torch.tensor(x, dtype=F64, requires_grad=True) for x in xs]
    loss = (torch_fn(*ts) * torch.tensor(W, dtype=F64)).sum()
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
    pytest.param(name, i, id=f"{name}-{label}" if label else name)
    for name, cases in CASES.items()
    for i, (label, *_rest) in enumerate(cases)
]


@pytest.mark.parametrize("name, i", PARAMS)
def test_primitive_second_derivatives_match_torch_double_backward(name, i):
    _label, make_inputs, params, torch_fn = CASES[name][i]
    prim = PRIMITIVES[name]
    rng = np.random.default_rng(sum(map(ord, name)) + i)
    xs = make_inputs(rng)
    out_shape = np.shape(prim.forward(*xs, **params))
    W = rng.normal(size=out_shape)
    vs = [rng.normal(size=np.shape(x)) for x in xs]
    every_input = tuple(range(len(xs)))

    def loss(*inputs):
        return (bind(prim, *inputs, **params) * W).sum()

    def gradient_along_v(*inputs):
        gs = grad(loss, every_input)(*inputs)
        return sum((g * v).sum() for g, v in zip(gs, vs, strict=True))

    expected_grads, expected_hv = _torch_hvp(torch_fn, xs, W, vs)

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
    n, torch_fn = SCALAR_CASES[name]
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
