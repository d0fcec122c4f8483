"""Exercise 2.5 (medium by the rubric in spec.py): ``vjp`` and ``jacrev`` on top of a
reverse pass.

The student writes a class ``ReverseMode`` with ``vjp(f, x, u) -> (f(x), uᵀJ)`` and
``jacrev(f, x) -> J`` (shape ``(m, n)``), both from reverse passes of the library's
``Tensor`` engine (record ``f`` on ``Tensor(x, requires_grad=True)``, ``backward`` with a
cotangent), not from its ready-made ``autodiff_lab.functional`` transforms. Each case is a
random function Rⁿ → Rᵐ written as a program (see
:func:`autodiff_lab.grading.runners.capstones.function_from`): linear maps, entrywise
``tanh``, ``sin``, ``exp``, products and squares, with n and m from 1 to 5. The reference
is the library's ``functional.vjp`` and ``jacrev``, run here. An answer only counts when
``f`` was called on a recording input at least once (finite differences or forward-mode
``Dual`` s get the right numbers another way and a hint saying so).
"""

from __future__ import annotations

import numpy as np

from ... import functional
from ..runners.capstones import function_from, reverse_run
from ..spec import Case, Exercise, Mistake, close
from ._common import is_error

__all__ = ["EXERCISES", "random_function", "reverse_reference"]

_ENTRYWISE = ("tanh", "sin", "sq", "tanh", "sin")


def random_function(rng, n: int, m: int, steps: int) -> list:
    """A random program Rⁿ → Rᵐ: ``steps`` instructions, then a linear map to m outputs."""
    dims: list[int] = [n]
    after_bounded: list[bool] = [False]
    program: list[tuple] = []
    for _ in range(steps):
        i = len(dims) - 1 if rng.random() < 0.7 else int(rng.integers(0, len(dims)))
        same = [j for j, d in enumerate(dims) if d == dims[i]]
        choice = int(rng.integers(0, 5))
        if choice == 0:
            k = int(rng.integers(1, 5))
            matrix = np.round(rng.normal(0, 1 / np.sqrt(dims[i]), size=(k, dims[i])), 3)
            program.append(("lin", i, matrix.tolist()))
            dims.append(k)
            after_bounded.append(False)
            continue
        if choice == 1 and len(same) > 1:
            program.append((str(rng.choice(["add", "mul"])), i, int(rng.choice(same))))
        elif choice == 2 and after_bounded[i]:
            program.append(("exp", i))  # only of tanh/sin outputs: no overflow
        else:
            program.append((str(rng.choice(_ENTRYWISE)), i))
        dims.append(dims[i])
        after_bounded.append(program[-1][0] in ("tanh", "sin"))
    last = len(dims) - 1
    matrix = np.round(rng.normal(0, 1 / np.sqrt(dims[last]), size=(m, dims[last])), 3)
    program.append(("lin", last, matrix.tolist()))
    return program


def reverse_reference(inputs) -> dict:
    """The library's ``functional.vjp`` / ``jacrev`` of the case's function."""
    kind, program, x, *rest = inputs
    f = function_from(program)
    x = np.array(x, dtype=np.float64)
    if kind == "vjp":
        value, pull = functional.vjp(f, x)
        (pulled,) = pull(np.array(rest[0], dtype=np.float64))
        return {"value": np.asarray(value), "vjp": np.asarray(pulled), "reverse": True}
    return {"jacobian": np.asarray(functional.jacrev(f)(x)), "reverse": True}


def _reverse_cases(rng):
    cases = []
    for n, m in ((3, 2), (1, 3), (4, 1), (5, 4)):
        program = random_function(rng, n, m, int(rng.integers(3, 7)))
        x = np.round(rng.uniform(-1.5, 1.5, size=n), 4)
        u = np.round(rng.normal(size=m), 4)
        cases.append(Case(f"vjp of a random f: R^{n} -> R^{m}", ("vjp", program, x, u)))
    for n, m in ((2, 3), (4, 2), (3, 3), (1, 1)):
        program = random_function(rng, n, m, int(rng.integers(3, 7)))
        x = np.round(rng.uniform(-1.5, 1.5, size=n), 4)
        cases.append(Case(f"jacrev of a random f: R^{n} -> R^{m}", ("jacrev", program, x)))
    return cases


def same_numbers(got, expected) -> bool:
    """Every key of the reference matches (the answer's extra "how" is ignored)."""
    return isinstance(got, dict) and all(k in got and close(got[k], v) for k, v in expected.items())


def _numbers_right_not_reverse(got, exp, case) -> bool:
    numbers = {k: v for k, v in exp.items() if k != "reverse"}
    return got.get("reverse") is False and same_numbers(got, numbers)


def _jac(got, exp, case, wrong) -> bool:
    return (
        case.inputs[0] == "jacrev"
        and not close(got["jacobian"], exp["jacobian"])
        and close(got["jacobian"], wrong(np.asarray(exp["jacobian"])))
    )


def _accumulated(jacobian: np.ndarray) -> np.ndarray:
    """What m backward passes give when x.grad is never reset: running sums of the rows."""
    return np.cumsum(jacobian, axis=0)


def _vjp_is(got, exp, case, wrong) -> bool:
    if case.inputs[0] != "vjp" or close(got["vjp"], exp["vjp"]):
        return False
    _kind, program, x, u = case.inputs
    jacobian = np.asarray(functional.jacrev(function_from(program))(np.asarray(x, float)))
    return close(got["vjp"], wrong(jacobian, np.asarray(u, float)))


REVERSE = Exercise(
    id="2.5",
    title="vjp and jacrev on top of a reverse pass",
    level="medium",
    minutes=30,
    task="write this function of ReverseMode (see the list above)",
    answer="ReverseMode",
    cases=_reverse_cases,
    run=reverse_run,
    own_code=True, builds_on_engine=True,  # its Tensor engine only: grading/own_code.py
    reference=reverse_reference,
    compare=same_numbers,
    mistakes=(
        Mistake(
            "This exercise is graded on your own transforms: build them from Tensor and "
            "backward(), not from autodiff_lab.functional (or torch.func / jax).",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "jacrev seeded a reverse pass with a vector of the input's size: one reverse "
            "pass per *output* entry, u = e_i of the output's size m (rows of J), so the "
            "loop runs over the outputs, not the inputs.",
            lambda got, exp, case: (
                is_error(got, "ValueError")
                and got.get("at") == "jacrev"
                and "grad has shape" in got.get("message", "")
            ),
        ),
        Mistake(
            "The numbers are right but f was never run on a recording Tensor: finite "
            "differences or forward-mode Duals are not a reverse pass. Call f on "
            "Tensor(x, requires_grad=True) and pull back with backward(u).",
            _numbers_right_not_reverse,
        ),
        Mistake(
            "The Jacobian is transposed: row i is the vjp with the i-th unit vector, so J has "
            "shape (m, n) — one row per output.",
            lambda got, exp, case: _jac(got, exp, case, np.transpose),
        ),
        Mistake(
            "Each row contains the rows before it: x.grad adds up across backward passes. "
            "Start every pass from a fresh leaf (or reset x.grad) before the next backward().",
            lambda got, exp, case: _jac(got, exp, case, _accumulated),
        ),
        Mistake(
            "The vjp ignores u: backward() seeded with ones gives 1ᵀJ. Seed the backward pass "
            "with the cotangent: y.backward(u).",
            lambda got, exp, case: _vjp_is(got, exp, case, lambda j, u: np.ones(len(u)) @ j),
        ),
        Mistake(
            "The vjp multiplies on the wrong side: uᵀJ has one entry per input (length n), "
            "J·u would need u of length n.",
            lambda got, exp, case: _vjp_is(got, exp, case, lambda j, u: j @ u[: j.shape[1]]),
        ),
    ),
    nudges=(
        "Look at which cases fail, vjp's or jacrev's. vjp: record f on an input that "
        "requires grad, run the reverse pass seeded with u (not with ones), and read the "
        "gradient that reached the input; jacrev: one such pass per output entry.",
    ),
    reveal="jacrev: one vjp per output entry, with the unit vectors e_0 … e_(m-1) as u; stack "
    "the rows.",
)


EXERCISES: list[Exercise] = [REVERSE]
