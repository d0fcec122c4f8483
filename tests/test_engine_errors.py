"""Bad input gets a clear error: the right exception type, and a message that names the
operation and the offending shapes or values.

One table, one parametrized test. Each row: what the user did, the exception expected,
and the fragments the message must contain (the op, then the shapes/values involved).
"""

from __future__ import annotations

import numpy as np
import pytest

from autodiff_lab import Dual, Tensor, Value, concatenate, cross_entropy, stack
from autodiff_lab.functional import grad, jacrev, jvp, vjp


def ones(*shape):
    return Tensor(np.ones(shape))


def needs_grad(*shape):
    return Tensor(np.ones(shape), requires_grad=True)


ERRORS = [
    # (case, action, exception, fragments the message must contain)
    # --- Value: operands that are not numbers
    ("Value + str", lambda: Value(1) + "a", TypeError, ["Value +", "str", "'a'"]),
    ("str + Value", lambda: "a" + Value(1), TypeError, ["Value +", "str"]),
    ("Value * list", lambda: Value(2.0) * [1, 2], TypeError, ["Value *", "list", "Tensor"]),
    ("Value(array)", lambda: Value(np.ones(3)), TypeError, ["Value", "shape (3,)", "Tensor"]),
    # --- Value: outside a function's domain
    ("Value(-1).log()", lambda: Value(-1).log(), ValueError, ["log", "x > 0", "-1.0"]),
    ("Value(0).log()", lambda: Value(0).log(), ValueError, ["log", "x > 0", "0.0"]),
    ("Value(-4).sqrt()", lambda: Value(-4).sqrt(), ValueError, ["sqrt", "x >= 0", "-4.0"]),
    ("Value / 0", lambda: Value(1.0) / 0, ZeroDivisionError, ["Value /", "division by zero"]),
    (
        "negative base ** Value",
        lambda: Value(-2.0) ** Value(0.5),
        ValueError,
        ["Value **", "positive base", "-2.0"],
    ),
    # --- Tensor: construction
    ("ragged list", lambda: Tensor([[1, 2], [3]]), ValueError, ["Tensor", "ragged"]),
    ("strings", lambda: Tensor(["a"]), TypeError, ["Tensor", "numbers", "<U1"]),
    ("None entries", lambda: Tensor([None, 1.0]), TypeError, ["Tensor", "numbers", "object"]),
    ("complex", lambda: Tensor([1j]), TypeError, ["Tensor", "numbers", "complex"]),
    # --- Tensor: shapes
    (
        "(3,4) @ (3,4)",
        lambda: ones(3, 4) @ ones(3, 4),
        ValueError,
        ["@", "(3, 4) and (3, 4)", "(4)", "(3)"],
    ),
    ("(5,) @ (4,)", lambda: ones(5) @ ones(4), ValueError, ["@", "(5,) and (4,)"]),
    ("0-d @ vector", lambda: Tensor(2.0) @ ones(3), ValueError, ["@", "()", "(3,)"]),
    ("(3,) + (4,)", lambda: ones(3) + ones(4), ValueError, ["+", "(3,) and (4,)", "broadcast"]),
    ("(2,3) * (4,)", lambda: ones(2, 3) * np.ones(4), ValueError, ["*", "(2, 3) and (4,)"]),
    ("array - Tensor", lambda: np.ones(4) - ones(3), ValueError, ["-", "(4,) and (3,)"]),
    ("Tensor + str", lambda: ones(2) + "a", TypeError, ["Tensor +", "str", "'a'"]),
    (
        "reshape (2,3) -> (4,2)",
        lambda: ones(2, 3).reshape(4, 2),
        ValueError,
        ["reshape", "(2, 3)", "(4, 2)", "6 entries"],
    ),
    ("sum axis 2", lambda: ones(2, 3).sum(axis=2), ValueError, ["sum", "axis 2", "(2, 3)"]),
    ("mean axis -3", lambda: ones(2, 3).mean(axis=-3), ValueError, ["mean", "axis -3", "(2, 3)"]),
    ("max axis (0, 5)", lambda: ones(2, 3).max(axis=(0, 5)), ValueError, ["max", "axis 5"]),
    ("softmax axis 2", lambda: ones(2, 3).softmax(axis=2), ValueError, ["softmax", "axis 2"]),
    ("log_softmax axis", lambda: ones(4).log_softmax(axis=1), ValueError, ["log_softmax", "(4,)"]),
    (
        "transpose axes",
        lambda: ones(2, 3).transpose(0, 2),
        ValueError,
        ["transpose", "(0, 2)", "(2, 3)", "permutation"],
    ),
    (
        "max of an empty axis",
        lambda: Tensor(np.zeros((0, 3))).max(axis=0),
        ValueError,
        ["max", "(0, 3)", "axis 0"],
    ),
    ("item of a vector", lambda: ones(2).item(), ValueError, ["item", "one entry", "(2,)"]),
    ("index out of range", lambda: ones(2, 3)[5], IndexError, ["Tensor []", "5", "(2, 3)"]),
    (
        "concatenate shapes",
        lambda: concatenate([ones(2, 3), ones(2, 4)], axis=0),
        ValueError,
        ["concatenate", "(2, 3)", "(2, 4)", "axis 0"],
    ),
    (
        "concatenate axis",
        lambda: concatenate([ones(2, 3), ones(2, 3)], axis=2),
        ValueError,
        ["concatenate", "axis 2", "(2, 3)"],
    ),
    ("stack shapes", lambda: stack([ones(3), ones(4)]), ValueError, ["stack", "(3,)", "(4,)"]),
    # --- Tensor: domains
    (
        "Tensor log of a negative",
        lambda: Tensor([1.0, -1.0]).log(),
        ValueError,
        ["log", "x > 0", "(2,)", "(1,)", "-1.0"],
    ),
    (
        "Tensor sqrt of a negative",
        lambda: Tensor([[4.0, -4.0]]).sqrt(),
        ValueError,
        ["sqrt", "x >= 0", "(1, 2)", "(0, 1)", "-4.0"],
    ),
    # --- Tensor: backward
    (
        "backward() on a non-scalar",
        lambda: (needs_grad(3) * 2).backward(),
        RuntimeError,
        ["backward", "shape (3,)", "scalar", ".sum()"],
    ),
    (
        "backward() grad of the wrong shape",
        lambda: (needs_grad(3) * 2).backward(np.ones(4)),
        ValueError,
        ["backward", "(4,)", "(3,)"],
    ),
    (
        "backward() without requires_grad",
        lambda: ones(1).sum().backward(),
        RuntimeError,
        ["backward", "requires_grad"],
    ),
    # --- cross_entropy
    (
        "cross_entropy float targets",
        lambda: cross_entropy(needs_grad(2, 3), np.array([0.0, 1.0])),
        ValueError,
        ["cross_entropy", "integer", "float64"],
    ),
    (
        "cross_entropy target too large",
        lambda: cross_entropy(needs_grad(2, 3), np.array([0, 3])),
        ValueError,
        ["cross_entropy", "[0, 3)", "3"],
    ),
    (
        "cross_entropy negative target",
        lambda: cross_entropy(needs_grad(2, 3), [0, -1]),
        ValueError,
        ["cross_entropy", "[0, 3)", "-1"],
    ),
    (
        "cross_entropy wrong number of targets",
        lambda: cross_entropy(needs_grad(2, 3), np.array([0])),
        ValueError,
        ["cross_entropy", "2", "shape (1,)"],
    ),
    (
        "cross_entropy 1-D logits",
        lambda: cross_entropy(needs_grad(3), np.array([0])),
        ValueError,
        ["cross_entropy", "(N, C)", "(3,)"],
    ),
    # --- Dual (forward mode)
    (
        "Dual tangent shape",
        lambda: Dual(np.ones(3), np.ones(4)),
        ValueError,
        ["Dual", "tangent shape (4,)", "primal shape (3,)"],
    ),
    ("Dual + str", lambda: Dual(1.0, 1.0) + "a", TypeError, ["Dual +", "str"]),
    (
        "Dual (3,4) @ (3,4)",
        lambda: Dual(np.ones((3, 4)), np.ones((3, 4))) @ np.ones((3, 4)),
        ValueError,
        ["Dual @", "(3, 4) and (3, 4)"],
    ),
    (
        "Dual (3,) + (4,)",
        lambda: Dual(np.ones(3), np.ones(3)) + np.ones(4),
        ValueError,
        ["Dual +", "(3,) and (4,)"],
    ),
    ("Dual log of a negative", lambda: Dual(-1.0, 1.0).log(), ValueError, ["Dual log", "-1.0"]),
    # --- function transformations
    (
        "grad of a vector-valued f",
        lambda: grad(lambda x: x * 2)(np.ones(3)),
        ValueError,
        ["grad", "scalar", "shape (3,)", "jacrev"],
    ),
    (
        "grad of f returning a str",
        lambda: grad(lambda x: "a")(1.0),
        TypeError,
        ["grad", "number", "str"],
    ),
    (
        "grad argnums out of range",
        lambda: grad(lambda x: x * x, argnums=2)(1.0),
        ValueError,
        ["argnums", "2", "1 positional"],
    ),
    (
        "vjp cotangent of the wrong shape",
        lambda: vjp(lambda x: x * 2, np.ones(3))[1](np.ones(4)),
        ValueError,
        ["vjp", "cotangent", "(4,)", "(3,)"],
    ),
    (
        "vjp of a function returning a list",
        lambda: vjp(lambda a: [a * 2, a * 3], 1.0),
        TypeError,
        ["vjp", "list of 2 outputs", "stack"],
    ),
    (
        "jacrev of a function returning a list",
        lambda: jacrev(lambda a: [a * 2, a * 3])(1.0),
        TypeError,
        ["jacrev", "list of 2 outputs", "stack"],
    ),
    (
        "jvp with fewer tangents than primals",
        lambda: jvp(lambda x, y: x * y, (1.0, 2.0), (1.0,)),
        ValueError,
        ["jvp", "2 primals", "1 tangent"],
    ),
    (
        "jvp tangent of the wrong shape",
        lambda: jvp(lambda x: x * 2, (np.ones(3),), (np.ones(4),)),
        ValueError,
        ["(4,)", "(3,)"],
    ),
]


@pytest.mark.parametrize(
    "action, exception, fragments",
    [pytest.param(action, exc, frags, id=case) for case, action, exc, frags in ERRORS],
)
def test_bad_input_gets_a_clear_error(action, exception, fragments):
    with pytest.raises(exception) as info:
        action()
    message = str(info.value)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"message {message!r} lacks {missing}"


def test_error_messages_do_not_leak_numpy_internals():
    """Shape errors are reported in the course's words, not numpy's gufunc signatures."""
    for action in (lambda: ones(3, 4) @ ones(3, 4), lambda: ones(3) + ones(4)):
        with pytest.raises(ValueError) as info:
            action()
        assert "gufunc" not in str(info.value) and "operands could not" not in str(info.value)


def test_a_failed_op_leaves_no_half_built_graph():
    """After an error the inputs are untouched and still usable."""
    x = needs_grad(3)
    with pytest.raises(ValueError):
        x + ones(4)
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])
