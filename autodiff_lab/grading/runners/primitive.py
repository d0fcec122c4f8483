"""What the student's process runs for exercise 6.5: a new primitive, ``logaddexp``.

The student's answer is the operation :func:`autodiff_lab.extend.define_primitive`
returned. Each case is one program of a few lines, run here on the student's op; what
comes back is plain data (numbers, arrays, error records). Nothing here knows the right
result: the closed forms, the simulated wrong rules behind the hints and every verdict
live in :mod:`autodiff_lab.grading.exercises.ch06_primitive`.

Case kinds (``inputs[0]``)::

    ("value", a, b)                 op(a, b) on Python floats           -> float
    ("graph", a, b)                 op(Value(a), Value(b)).backward()   -> [out, da, db]
    ("tensor", a, b, g)             op(Tensor a, Tensor b).backward(g)  -> [out, da, db]
    ("jvp", a, b, ta, tb)           jvp(op, (a, b), (ta, tb))           -> tangent
    ("hessian", a, b)               grad of grad on floats              -> 2x2 matrix
    ("hvp", x, v)                   jvp(grad(x -> op(x[0], x[1])), x, v) -> H v
"""

from __future__ import annotations

import types

import numpy as np

from ...extend import USER_PRIMITIVES, define_primitive
from ...functional import grad, jvp
from ...primitives import PRIMITIVES, Primitive
from ...tensor import Tensor
from ...value import Value
from .common import as_array, error_result, number

#: The code of the op define_primitive returns (a nested function of it): the answer must
#: be that op, so the value cases grade the primitive, not any function given its entry.
_OP_CODES = tuple(
    c
    for c in define_primitive.__code__.co_consts
    if isinstance(c, types.CodeType) and c.co_name == "op"
)

_EXPECTED_ERRORS = (
    ValueError, TypeError, OverflowError, ZeroDivisionError, NotImplementedError,
    IndexError, FloatingPointError, AttributeError,
)  # fmt: skip


def _not_a_primitive(answer) -> dict | None:
    """An error record when ``answer`` was not made by define_primitive (None when it was)."""
    prim = getattr(answer, "primitive", None)
    if not isinstance(prim, Primitive):
        return {
            "error": "NotAPrimitive",
            "message": "logaddexp must be the op that define_primitive(...) returns "
            f"(got {type(answer).__name__} without a .primitive entry)",
        }
    if prim.name in PRIMITIVES or USER_PRIMITIVES.get(prim.name) is not prim:
        return {"error": "NotAPrimitive", "message": f"{prim.name!r} is not a user primitive"}
    if getattr(answer, "__code__", None) not in _OP_CODES:
        # a function of one's own (np.logaddexp, say) wearing another op's .primitive
        return {
            "error": "NotAPrimitive",
            "message": "logaddexp must be the op that define_primitive(...) returns, not a "
            f"{type(answer).__name__} that carries its .primitive",
        }
    return None


#: Ready-made functions that compute logaddexp whole: a forward calling one skips the task.
READY_MADE_FORWARDS = ("logaddexp", "logaddexp2", "logsumexp", "softplus")


def _borrowed_forward(answer) -> dict | None:
    """An error record when the forward calls a ready-made logaddexp (np.logaddexp, …).

    Looks at the names the forward's code uses, and those of the functions it holds in
    closures (define_primitive wraps the student's forward in one) or calls from its
    module (any depth, up to 50): ``np.logaddexp`` and ``from numpy import logaddexp``
    both name it.
    """
    todo: list = [answer.primitive.forward]
    seen: set[int] = set()
    while todo and len(seen) < 50:
        fn = todo.pop()
        if id(fn) in seen or not isinstance(getattr(fn, "__code__", None), types.CodeType):
            continue
        seen.add(id(fn))
        namespace = fn.__globals__
        todo += [c.cell_contents for c in fn.__closure__ or () if _holds_function(c)]
        codes = [fn.__code__]
        while codes:
            code = codes.pop()
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                if name in READY_MADE_FORWARDS:
                    return {
                        "error": "ReadyMade",
                        "message": f"the forward calls {name}: compute log(e^a + e^b) yourself",
                    }
                obj = namespace.get(name)
                if isinstance(obj, types.FunctionType):
                    todo.append(obj)
    return None


def _holds_function(cell) -> bool:
    try:
        return isinstance(cell.cell_contents, types.FunctionType)
    except ValueError:  # an empty cell
        return False


def _run(answer, inputs):
    kind = inputs[0]
    if kind == "value":
        _, a, b = inputs
        return number(answer(float(a), float(b)))
    if kind == "graph":
        _, a, b = inputs
        va, vb = Value(float(a)), Value(float(b))
        out = answer(va, vb)
        if not isinstance(out, Value) or out._fn is not answer.primitive:
            return {
                "error": "NotOneNode",
                "message": "op(Value, Value) must record ONE node of the new primitive, got "
                f"{type(out).__name__} made by {getattr(out, '_op', '?')!r}",
            }
        out.backward()
        return [number(out), number(va.grad), number(vb.grad)]
    if kind == "tensor":
        _, a, b, g = inputs
        ta = Tensor(np.array(a, dtype=np.float64), requires_grad=True)
        tb = Tensor(np.array(b, dtype=np.float64), requires_grad=True)
        out = answer(ta, tb)
        out.backward(np.array(g, dtype=np.float64))
        return [as_array(out), as_array(ta.grad), as_array(tb.grad)]
    if kind == "jvp":
        _, a, b, ta, tb = inputs
        arrays = [np.array(v, dtype=np.float64) for v in (a, b, ta, tb)]
        _out, tangent = jvp(answer, tuple(arrays[:2]), tuple(arrays[2:]))
        return as_array(tangent)
    if kind == "hessian":
        _, a, b = inputs
        rows = []
        for i in (0, 1):
            first = grad(answer, argnums=i)
            rows.append([number(grad(first, argnums=j)(float(a), float(b))) for j in (0, 1)])
        return rows
    if kind == "hvp":
        _, x, v = inputs

        def f(x):
            return answer(x[0], x[1])

        _g, hv = jvp(grad(f), (np.array(x, dtype=np.float64),), (np.array(v, dtype=np.float64),))
        return as_array(hv)
    raise ValueError(f"unknown case kind {kind!r}")


def primitive_run(answer, inputs):
    """Run one program on the student's op; plain data or an error record."""
    problem = _not_a_primitive(answer) or _borrowed_forward(answer)
    if problem:
        return problem
    with np.errstate(all="ignore"):  # an overflowing forward shows as inf, not as warnings
        try:
            return _run(answer, inputs)
        except _EXPECTED_ERRORS as exc:
            if isinstance(exc, NotImplementedError) and str(exc).startswith("Exercise "):
                raise  # the notebook's stub: "not attempted"
            return error_result(exc)
