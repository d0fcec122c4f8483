"""The one table of primitive test cases, shared by the gradient tests.

``CASES`` says, for every primitive, how to call it: how to draw its array inputs (from
the domain where it is differentiable) and its parameters. ``torch_twins()`` gives the
same operation in PyTorch. The finite-difference tests (``test_engine_finite_diff``), the
PyTorch tests (``test_engine_vs_torch``) and the second-order tests
(``test_higher_primitives``) all read them, and each fails for a primitive that has no
entry here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

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


def small_integers(*shape):
    """Entries in {-2, …, 2}: two such inputs tie often (maximum/minimum split the gradient
    at a tie, and a central difference there gives the same half)."""
    return lambda rng: rng.integers(-2, 3, shape).astype(float)


def condition(*shape):
    """A boolean mask (where's condition): an input that is never differentiated."""
    return lambda rng: rng.random(shape) < 0.5


def is_condition(x) -> bool:
    """A boolean input: a constant of the op, never differentiated (nor given a tangent)."""
    return np.asarray(x).dtype.kind == "b"


def over_floats(f, inputs):
    """``(g, floats)``: ``g(*floats)`` is ``f(*inputs)`` with the boolean inputs held fixed,
    a function of the float inputs only (those the tests differentiate)."""
    fixed = {i: x for i, x in enumerate(inputs) if is_condition(x)}
    floats = [x for i, x in enumerate(inputs) if i not in fixed]

    def g(*xs):
        given = iter(xs)
        return f(*(fixed[i] if i in fixed else next(given) for i in range(len(inputs))))

    return g, floats


@dataclass
class Case:
    """One way to call a primitive: how to draw its array inputs, and its parameters."""

    inputs: tuple[Callable[[np.random.Generator], np.ndarray], ...]
    params: dict = field(default_factory=dict)
    id: str = ""

    def draw(self, rng, dtype=np.float64) -> list[np.ndarray]:
        """The inputs, float ``dtype`` (a boolean input, a condition, stays boolean)."""
        drawn = [np.asarray(make(rng)) for make in self.inputs]
        return [x if x.dtype == bool else x.astype(dtype) for x in drawn]


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
    "where": [
        Case((condition(3, 4), anywhere(3, 4), anywhere(3, 4)), id="same shape"),
        Case((condition(3, 1), anywhere(4), anywhere(3, 4)), id="broadcast"),
        Case((condition(), anywhere(2, 3), anywhere()), id="0-d condition"),
        Case((condition(2, 3), anywhere(), anywhere()), id="0-d branches"),
    ],
    "maximum": [*binary(anywhere, anywhere), Case((small_integers(4, 3),) * 2, id="ties")],
    "minimum": [*binary(anywhere, anywhere), Case((small_integers(4, 3),) * 2, id="ties")],
    "pow_const": [
        Case((anywhere(3, 4),), {"exponent": 3}, id="x^3"),
        Case((anywhere(3, 4),), {"exponent": 2.0}, id="x^2.0"),
        Case((positive(3, 4),), {"exponent": 0.5}, id="x^0.5"),
        Case((positive(5),), {"exponent": -1.5}, id="x^-1.5"),
    ],
    "exp": [Case((anywhere(3, 4),))],
    "log": [Case((positive(3, 4),))],
    "log1p": [Case((positive(3, 4, low=-0.7, high=2.0),))],
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


@functools.cache
def torch_twins() -> dict[str, Callable]:
    """Every primitive written with PyTorch: ``twin(*tensors, **params)`` (imports torch)."""
    import torch
    import torch.nn.functional as F

    def dims(x, axis):
        return tuple(range(x.ndim)) if axis is None else axis

    def as_index(i):
        if isinstance(i, tuple):
            return tuple(as_index(j) for j in i)
        return torch.as_tensor(i) if isinstance(i, np.ndarray) else i

    def scatter_add(g, index, shape):
        where = index if isinstance(index, tuple) else (index,)
        where = tuple(torch.as_tensor(i) for i in where)
        return torch.zeros(shape, dtype=g.dtype).index_put(where, g, accumulate=True)

    return {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "pow": lambda a, b: a**b,
        "neg": lambda a: -a,
        "where": lambda c, a, b: torch.where(torch.as_tensor(c).bool(), a, b),
        "maximum": torch.maximum,
        "minimum": torch.minimum,
        "pow_const": lambda a, exponent: a**exponent,
        "exp": torch.exp,
        "log": torch.log,
        "log1p": torch.log1p,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "softplus": F.softplus,
        "relu": torch.relu,
        "sin": torch.sin,
        "cos": torch.cos,
        "sqrt": torch.sqrt,
        "abs": torch.abs,
        "sum": lambda x, axis=None, keepdims=False: x.sum(dims(x, axis), keepdim=keepdims),
        "mean": lambda x, axis=None, keepdims=False: x.mean(dims(x, axis), keepdim=keepdims),
        "max": lambda x, axis=None, keepdims=False: x.amax(dims(x, axis), keepdim=keepdims),
        "reshape": lambda x, shape: x.reshape(shape),
        "transpose": lambda x, axes=None: x.permute(
            *(range(x.ndim - 1, -1, -1) if axes is None else axes)
        ),
        "broadcast_to": lambda x, shape: x.expand(*shape),
        "getitem": lambda x, index: x[as_index(index)],
        "scatter_add": scatter_add,
        "concatenate": lambda *xs, axis=0: torch.cat(xs, axis),
        "matmul": torch.matmul,
        "softmax": lambda x, axis=-1: x.softmax(axis),
        "log_softmax": lambda x, axis=-1: x.log_softmax(axis),
        "cross_entropy": lambda z, targets: F.cross_entropy(z, torch.as_tensor(targets)),
        "add_n": lambda *xs: sum(xs[1:], xs[0]),
        "dot": lambda *xs: sum(w * v for w, v in zip(xs[: len(xs) // 2], xs[len(xs) // 2 :])),
    }
