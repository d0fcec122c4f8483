"""Capstone 3.6 (hard): your own ``Value``, differentiable twice, graded on random programs.

The student writes a class ``MyValue`` with ``+ - * /``, ``**`` (number exponent),
negation, the reflected forms (``2 - x``), ``tanh``, ``exp``, ``relu``, ``backward()`` in
topological order and ``zero_grad()`` — and what chapter 03's engine does not have:
``backward(create_graph=True)``, whose gradients are ``MyValue`` nodes recorded by the local
rules themselves (written with ``MyValue`` operations, not floats), so that a gradient can
be differentiated again. Most cases (every one but ``zero_grad`` and the long chain) grade a
row of second derivatives too, so chapter 03's engine, pasted and renamed, scores only
those two (3 of 15 points). Each case is a program (a list of plain-data
instructions, see :mod:`autodiff_lab.grading.runners.capstones`) drawn fresh from the
case seed: single ops with a factor above them, fan-out, two paths of different lengths,
random DAGs with reused subexpressions (depth up to about 50), ``zero_grad`` between two
backward passes, and a chain of 5,000 operations. The student's process runs the program
on ``MyValue`` and returns every node's value and every leaf's gradient; the reference
is the library's :class:`~autodiff_lab.Value`, run here in the grader.

The hints come from simulated wrong implementations, run here on the same program by a
small plain-float interpreter (:func:`simulate`): ``=`` instead of ``+=``, visiting nodes in
a non-topological order (breadth first, depth-first pre-order, forward order, every path),
a ``_backward`` that forgets to multiply by ``out.grad``, the common wrong local rules.
A RecursionError on the long chain, a missing reflected method and a ``zero_grad`` that
only resets the root are recognised from the answer itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from ...value import Value
from ..runners.capstones import build_program, second_derivatives, value_run
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error

__all__ = ["EXERCISES", "simulate", "value_reference", "random_dag", "long_chain"]

CHAIN_PAIRS = 2500  # the long chain: 2 instructions per pair, 5,001 in all

_FAMILY = {
    "+": "+", "+n": "+", "n+": "+", "-": "-", "-n": "-", "n-": "-", "*": "*", "*n": "*",
    "n*": "*", "/": "/", "/n": "/", "n/": "/", "**": "**", "neg": "neg", "tanh": "tanh",
    "exp": "exp", "relu": "relu",
}  # fmt: skip
FAMILIES = ("+", "-", "*", "/", "**", "neg", "tanh", "exp", "relu")


# --- the reference: the library's Value ---------------------------------------------------


def value_reference(inputs) -> dict:
    """Values and leaf gradients of the program on :class:`autodiff_lab.Value`.

    ``zero_grad`` mode (backward, zero_grad, backward) must give one pass's gradients;
    ``second`` mode adds the second derivatives of :func:`second_derivatives`.
    """
    program, mode = inputs
    nodes, leaves = build_program(Value, program)
    nodes[-1].backward(create_graph=mode == "second")
    result: dict = {
        "values": [n.data for n in nodes],
        "grads": [float(nodes[k].grad) for k in leaves],
    }
    if mode == "zero_grad":
        result["after_zero_grad"] = [0.0] * len(nodes)
    if mode == "second":
        result["second"] = second_derivatives(nodes, leaves)
    return result


# --- a plain-float interpreter for the wrong implementations ----------------------------

# Wrong local rules students write: family -> (x, y, out, const) -> local derivatives.
WRONG_RULES: dict[str, Callable] = {
    "tanh uses x": lambda x, y, out, c: (1.0 - x * x,),
    "/ denominator sign": lambda x, y, out, c: (1.0 / y, x / (y * y)),
    "** keeps the power": lambda x, y, out, c: (c * x**c,),
    "** drops the factor": lambda x, y, out, c: (x ** (c - 1),),
    "relu passes all": lambda x, y, out, c: (1.0,),
    "exp uses x": lambda x, y, out, c: (x,),
}
_WRONG_RULE_FAMILY = {
    "tanh uses x": "tanh", "/ denominator sign": "/", "** keeps the power": "**",
    "** drops the factor": "**",
    "relu passes all": "relu", "exp uses x": "exp",
}  # fmt: skip


def _forward(program, wrong_rule: str | None = None):
    """Every node's value, parents and local derivatives (one wrong rule if named)."""
    vals: list[float] = []
    parents: list[tuple[int, ...]] = []
    locs: list[tuple[float, ...]] = []
    for op, *a in program:
        fam = _FAMILY.get(op)
        x = y = c = 0.0
        if op == "leaf":
            vals.append(float(a[0]))
            parents.append(())
            locs.append(())
            continue
        ps: tuple[int, ...]
        if op in ("+", "-", "*", "/"):
            ps, (x, y) = (a[0], a[1]), (vals[a[0]], vals[a[1]])
        elif op.endswith("n"):  # node op number
            ps, x, c = (a[0],), vals[a[0]], float(a[1])
        elif op.startswith("n") and op != "neg":  # number op node
            ps, x, c = (a[1],), vals[a[1]], float(a[0])
        elif op == "**":
            ps, x, c = (a[0],), vals[a[0]], float(a[1])
        else:
            ps, x = (a[0],), vals[a[0]]
        out, loc = _rule(op, x, y, c)
        if wrong_rule == "** drops the factor" and op in ("/", "n/"):
            # a / b written as a * b ** -1 (the chapter's way) inherits the slip: the
            # derivative of b ** -1 loses its factor -1
            loc = (1.0 / y, x / (y * y)) if op == "/" else (c / (x * x),)
        if (
            wrong_rule is not None
            and _WRONG_RULE_FAMILY[wrong_rule] == fam
            and op in ("/", "**", "tanh", "relu", "exp")
        ):
            loc = WRONG_RULES[wrong_rule](x, y, out, c)
        vals.append(out)
        parents.append(ps)
        locs.append(loc)
    return vals, parents, locs


def _rule(op: str, x: float, y: float, c: float) -> tuple[float, tuple[float, ...]]:
    """(value, local derivatives) of one instruction."""
    if op == "+":
        return x + y, (1.0, 1.0)
    if op == "-":
        return x - y, (1.0, -1.0)
    if op == "*":
        return x * y, (y, x)
    if op == "/":
        return x / y, (1.0 / y, -x / (y * y))
    if op in ("+n", "n+"):
        return x + c, (1.0,)
    if op == "-n":
        return x - c, (1.0,)
    if op == "n-":
        return c - x, (-1.0,)
    if op in ("*n", "n*"):
        return x * c, (c,)
    if op == "/n":
        return x / c, (1.0 / c,)
    if op == "n/":
        return c / x, (-c / (x * x),)
    if op == "**":
        return x**c, (c * x ** (c - 1),)
    if op == "neg":
        return -x, (-1.0,)
    if op == "tanh":
        t = math.tanh(x)
        return t, (1.0 - t * t,)
    if op == "exp":
        e = math.exp(x)
        return e, (e,)
    if op == "relu":
        return max(x, 0.0), (1.0 if x > 0 else 0.0,)
    raise ValueError(f"unknown instruction {op!r}")


def _postorder(parents, root: int, flips=frozenset()) -> list[int]:
    """Depth-first post-order from ``root`` (parents before children), iteratively."""
    order, done, stack = [], set(), [(root, False)]
    while stack:
        k, expanded = stack.pop()
        if k in done:
            continue
        if expanded:
            done.add(k)
            order.append(k)
            continue
        stack.append((k, True))
        ps = parents[k][::-1] if k in flips else parents[k]
        stack.extend((p, False) for p in reversed(ps) if p not in done)
    return order


def _visit_order(parents, root: int, how: str, flips=frozenset()) -> list[int]:
    """The order a (right or wrong) backward visits nodes in; "paths" may repeat nodes."""
    if how == "topo":
        return _postorder(parents, root, flips)[::-1]
    if how == "forward":
        return _postorder(parents, root, flips)

    def children(k):
        return parents[k][::-1] if k in flips else parents[k]

    if how == "bfs":
        order, seen, queue = [], {root}, [root]
        while queue:
            k = queue.pop(0)
            order.append(k)
            for p in children(k):
                if p not in seen:
                    seen.add(p)
                    queue.append(p)
        return order
    if how == "preorder":
        order, seen, stack = [], set(), [root]
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            order.append(k)
            stack.extend(reversed(children(k)))
        return order
    if how == "paths":  # recursion with no visited set: a node once per path to it
        order, stack = [], [root]
        while stack and len(order) < 10_000:
            k = stack.pop()
            order.append(k)
            stack.extend(reversed(children(k)))
        return order
    raise ValueError(how)


def simulate(
    program,
    *,
    how: str = "topo",
    assign: bool = False,
    no_factor: frozenset[str] = frozenset(),
    wrong_rule: str | None = None,
    flips=frozenset(),
    start: list[float] | None = None,
) -> list[float]:
    """Leaf gradients of ``program`` as a (possibly wrong) implementation computes them.

    ``how``: the visiting order; ``assign``: ``grad = share`` instead of ``+=``;
    ``no_factor``: op families whose ``_backward`` forgets ``* out.grad``; ``wrong_rule``:
    one of :data:`WRONG_RULES`; ``flips``: nodes whose two parents are visited in reverse;
    ``start``: every node's ``.grad`` before the pass (then all of them are returned).
    """
    vals, parents, locs = _forward(program, wrong_rule)
    fams = [_FAMILY.get(op) for op, *_ in program]
    grads = [0.0] * len(program) if start is None else list(start)
    root = len(program) - 1
    grads[root] = 1.0
    for k in _visit_order(parents, root, how, flips):
        g = grads[k]
        for p, d in zip(parents[k], locs[k], strict=True):
            share = d if fams[k] in no_factor else d * g
            grads[p] = share if assign else grads[p] + share
    if start is not None:
        return grads
    return [grads[k] for k, (op, *_) in enumerate(program) if op == "leaf"]


SIMULATED_UP_TO = 500  # longer programs (the chain) get no simulated-mistake hints: speed


def _grads_match(got, grads) -> bool:
    return close(got["grads"], grads)


def _wrong(got, exp) -> bool:
    return not close(got, exp)


def _small(case) -> bool:
    return len(case.inputs[0]) <= SIMULATED_UP_TO


def _is_assign(got, exp, case) -> bool:
    return (
        _small(case)
        and _wrong(got["grads"], exp["grads"])
        and _grads_match(got, simulate(case.inputs[0], assign=True))
    )


def _two_parent_nodes(program) -> list[int]:
    return [k for k, (op, *a) in enumerate(program) if op in ("+", "-", "*", "/")]


def _is_wrong_order(got, exp, case) -> bool:
    if not _small(case) or not _wrong(got["grads"], exp["grads"]):
        return False
    program = case.inputs[0]
    binary = _two_parent_nodes(program)
    if len(binary) <= 6:
        flip_sets = [
            frozenset(k for k, bit in zip(binary, bits, strict=True) if bit)
            for bits in itertools.product((0, 1), repeat=len(binary))
        ]
    else:
        flip_sets = [frozenset(), frozenset(binary)]
    hows = ("bfs", "preorder", "forward") + (("paths",) if len(program) <= 40 else ())
    return any(
        _grads_match(got, simulate(program, how=how, flips=flips))
        for how in hows
        for flips in flip_sets
    )


def _forgot_factor(got, exp, case) -> bool:
    if not _small(case) or not _wrong(got["grads"], exp["grads"]):
        return False
    program = case.inputs[0]
    used = {_FAMILY[op] for op, *_ in program if op != "leaf"}
    options = [frozenset({f}) for f in sorted(used)] + [frozenset(used)]
    return any(_grads_match(got, simulate(program, no_factor=o)) for o in options)


def _wrong_rule(name: str):
    def detect(got, exp, case) -> bool:
        return (
            _small(case)
            and _wrong(got["grads"], exp["grads"])
            and _grads_match(got, simulate(case.inputs[0], wrong_rule=name))
        )

    return detect


def _missing(method: str, op: str):
    def detect(got, exp, case) -> bool:
        return is_error(got, "TypeError") and got.get("at") == op

    return Mistake(
        f"`{_REFLECTED_EXAMPLE[op]}` failed: with a number on the left Python calls "
        f"MyValue.{method}; define it (it gets the number as `other`).",
        detect,
    )


_REFLECTED_EXAMPLE = {"n+": "2 + x", "n-": "2 - x", "n*": "2 * x", "n/": "2 / x"}


def _swapped_reflected(got, exp, case) -> bool:
    """A value wrong at a ``c - x`` or ``c / x`` instruction equals ``x - c`` or ``x / c``."""
    program = case.inputs[0]
    for k, (op, *a) in enumerate(program):
        if op in ("n-", "n/") and not close(got["values"][k], exp["values"][k]):
            x, c = exp["values"][a[1]], float(a[0])
            swapped = x - c if op == "n-" else x / c
            if close(got["values"][k], swapped):
                return True
    return False


def _second_only_wrong(got, exp, case) -> bool:
    """Every first derivative right, some second derivative wrong (or not recorded)."""
    return (
        case.inputs[1] == "second"
        and got.get("second") is not None
        and close(got["grads"], exp["grads"])
        and not close(got.get("second"), exp["second"])
    )


def _not_recorded(got, exp, case) -> bool:
    return got.get("second") is None and "not recorded" in str(got.get("second_error", ""))


def _zero_grad_incomplete(got, exp, case) -> bool:
    if "zero_grad() left" in str(got.get("second_error", "")):
        return True  # seen before the second backward pass (runners.capstones)
    return case.inputs[1] == "zero_grad" and any(g != 0 for g in got["after_zero_grad"])


# --- the programs ---------------------------------------------------------------------------


def _constant(rng) -> float:
    """A number for an instruction: ±[0.5, 2.5), 4 decimals."""
    return round(float(rng.choice([-1.0, 1.0])) * draw(rng, 0.5, 2.5), 4)


def _leaf_value(rng) -> float:
    return round(float(rng.choice([-1.0, 1.0])) * draw(rng, 0.2, 1.5), 4)


def _with_root(program: list) -> list:
    """Sum every node nobody uses into one root, so every node counts."""
    used = set()
    for op, *a in program:
        if op in ("+", "-", "*", "/"):
            used.update(a)
        elif op.startswith("n") and op != "neg":
            used.add(a[1])
        elif op != "leaf":
            used.add(a[0])
    sinks = [k for k in range(len(program)) if k not in used]
    program = list(program)
    root = sinks[0]
    for k in sinks[1:]:
        program.append(("+", root, k))
        root = len(program) - 1
    return program


def _values(program) -> list[float]:
    return _forward(program)[0]


def _try(program, instr) -> float | None:
    """The value instruction ``instr`` would get, or None when unsafe (big, kink, pole)."""
    try:
        out = _values([*program, instr])[-1]
    except (OverflowError, ZeroDivisionError, ValueError):
        return None
    if isinstance(out, complex) or not math.isfinite(out) or abs(out) > 30:
        return None
    op, *a = instr
    vals = _values(program)
    if op in ("/",) and abs(vals[a[1]]) < 0.3:
        return None
    if op == "n/" and abs(vals[a[1]]) < 0.3:
        return None
    if op == "**" and (abs(vals[a[0]]) < 0.3 or (a[1] == 0.5 and vals[a[0]] <= 0)):
        return None
    if op == "relu" and abs(vals[a[0]]) < 1e-3:
        return None
    return out


_OPS = ("+", "-", "*", "/", "+n", "-n", "*n", "/n", "n+", "n-", "n*", "n/", "**",
        "neg", "tanh", "exp", "relu")  # fmt: skip


def random_dag(rng, n_leaves: int, n_ops: int) -> list:
    """A random program: mostly extends the newest node (depth), often reuses old ones."""
    program: list = [("leaf", _leaf_value(rng)) for _ in range(n_leaves)]
    while len(program) < n_leaves + n_ops:
        k = len(program)
        i = k - 1 if rng.random() < 0.85 else int(rng.integers(0, k))
        j = int(rng.integers(0, k))
        op = str(rng.choice(_OPS))
        instr: tuple
        if op in ("+", "-", "*", "/"):
            instr = (op, i, j)
        elif op in ("+n", "-n", "*n", "/n"):
            instr = (op, i, _constant(rng))
        elif op in ("n+", "n-", "n*", "n/"):
            instr = (op, _constant(rng), i)
        elif op == "**":
            instr = (op, i, float(rng.choice([2.0, 3.0, -1.0, 0.5])))
        else:
            instr = (op, i)
        if _try(program, instr) is None:
            instr = ("tanh", i)  # always safe
        program.append(instr)
    return _with_root(program)


def depth(program) -> int:
    """The longest path from a leaf to the root, in instructions."""
    d: list[int] = []
    for op, *a in program:
        if op == "leaf":
            d.append(0)
            continue
        ps = [x for x in a if isinstance(x, int) and not isinstance(x, bool)]
        if op.startswith("n") and op != "neg":
            ps = [a[1]]
        elif op in ("+n", "-n", "*n", "/n", "**"):
            ps = [a[0]]
        d.append(1 + max(d[p] for p in ps))
    return d[-1]


def long_chain(rng, pairs: int = CHAIN_PAIRS) -> list:
    """y ← c·y + x, ``pairs`` times (2 instructions each): deep, and x fans out to all."""
    program: list = [("leaf", _leaf_value(rng))]
    for _ in range(pairs):
        c = round(float(rng.uniform(0.99, 0.999)), 4)
        program.append(("*n", len(program) - 1, c))
        program.append(("+", len(program) - 1, 0))
    return program


def _single_ops(rng) -> list[tuple[str, list]]:
    """Small programs, one family of ops each, every piece scaled by its own number."""
    x, y = _leaf_value(rng), _leaf_value(rng)
    pos = draw(rng, 0.4, 1.5)
    groups: dict[str, list[tuple]] = {
        "x + y, x - y, -x": [("+", 0, 1), ("-", 0, 1), ("neg", 0)],
        "x * y and x / y": [("*", 0, 1), ("/", 0, 1)],
        "x ** 2, x ** 3, x ** -1, p ** 0.5": [
            ("**", 0, 2.0), ("**", 0, 3.0), ("**", 1, -1.0), ("**", 2, 0.5)
        ],
        "tanh and exp": [("tanh", 0), ("exp", 1)],
        "relu on both sides of 0": [("relu", 0), ("relu", 1)],
        "numbers on the right: x + c, x - c, x * c, x / c": [
            ("+n", 0, _constant(rng)), ("-n", 0, _constant(rng)), ("*n", 1, _constant(rng)),
            ("/n", 1, _constant(rng)),
        ],
        "numbers on the left: c + x, c - x, c * x, c / x": [
            ("n+", _constant(rng), 0), ("n-", _constant(rng), 0), ("n*", _constant(rng), 1),
            ("n/", _constant(rng), 1),
        ],
    }  # fmt: skip
    out = []
    for name, pieces in groups.items():
        program: list[tuple]
        if name.startswith("relu"):
            program = [("leaf", abs(x)), ("leaf", -abs(y)), ("leaf", pos)]
        else:
            program = [("leaf", x), ("leaf", y), ("leaf", pos)]
        ends = []
        for piece in pieces:
            program.append(piece)
            program.append(("*n", len(program) - 1, _constant(rng)))  # a factor above it
            ends.append(len(program) - 1)
        out.append((name, _with_root(program)))
    return out


def _order_program(rng) -> list:
    """root = a·d + d'·a': a is used by the root directly and again 4 steps down."""
    program: list = [("leaf", _leaf_value(rng)), ("leaf", _leaf_value(rng))]
    tops = []
    for leaf, a_first in ((0, True), (1, False)):
        program.append(("tanh", leaf))
        a = len(program) - 1
        program += [("exp", a), ("tanh", a + 1), ("*n", a + 2, _constant(rng))]
        d = len(program) - 1
        program.append(("*", a, d) if a_first else ("*", d, a))
        tops.append(len(program) - 1)
    program.append(("+", tops[0], tops[1]))
    return program


def _plus_square_of_first_leaf(program: list) -> list:
    """root + x0 * x0: the first leaf's gradient is then never 0 (relu may cut its other
    paths), so its second derivatives are always there to grade."""
    program = [*program, ("*", 0, 0)]
    return [*program, ("+", len(program) - 2, len(program) - 1)]


def _second(name: str, program: list) -> Case:
    return Case(f"{name} (+ x0², second derivatives too)",
                (_plus_square_of_first_leaf(program), "second"))  # fmt: skip


def _value_cases(rng):
    cases = [_second(f"ops: {name}", program) for name, program in _single_ops(rng)]
    x = _leaf_value(rng)
    cases.append(_second("fan-out: x * x + x", [("leaf", x), ("*", 0, 0), ("+", 1, 0)]))
    cases.append(_second("two paths of different lengths", _order_program(rng)))
    for k, (n_leaves, n_ops) in enumerate([(3, 30), (4, 45), (4, 80)]):
        program = random_dag(rng, n_leaves, n_ops)
        name = f"random DAG {k + 1}: {len(program)} nodes, depth {depth(program)}"
        cases.append(_second(name, program))
    program = random_dag(rng, 3, 15)
    cases.append(Case("zero_grad(), then backward() again", (program, "zero_grad")))
    program = long_chain(rng)
    cases.append(Case(f"a chain of {len(program) - 1:,} ops", (program, "backward"), points=2.0))
    return cases


MY_VALUE = Exercise(
    id="3.6",
    title="Your Value, differentiable twice",
    level="hard",
    minutes=90,
    task="write this method of MyValue (see the list above)",
    answer="MyValue",
    cases=_value_cases,
    run=value_run,
    own_code=True,
    reference=value_reference,
    mistakes=(
        Mistake(
            "This exercise is graded on your own class: MyValue must not be, subclass, borrow "
            "methods from or wrap a library's Value (autodiff_lab, micrograd, torch…).",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
        Mistake(
            "backward(create_graph=True) failed: backward must take a create_graph argument "
            "(False by default) that records the gradients as MyValue nodes.",
            lambda got, exp, case: is_error(got, "TypeError")
            and got.get("at") == "backward(create_graph=True)"
            and "create_graph" in got.get("message", ""),
        ),
        Mistake(
            "After backward(create_graph=True) a leaf's .grad is a plain number, not a "
            "MyValue: seed the root with MyValue(1.0) and write every rule with MyValue "
            "operations (out.grad * other, not out.grad * other.data), so that the "
            "gradient is recorded.",
            _not_recorded,
        ),
        Mistake(
            "The first derivatives are right but the second ones are not: some rule still "
            "uses a plain number where a recorded value is needed (other.data, "
            "math.tanh(x.data), a local derivative computed in floats), so that factor is a "
            "constant to the second backward pass. Under create_graph every factor that "
            "depends on the inputs must be a MyValue.",
            _second_only_wrong,
        ),
        Mistake(
            "RecursionError on the long chain: a recursive build_topo goes one Python call "
            "deeper per node. Build the order with an explicit stack (a list you push to and "
            "pop from) instead.",
            lambda got, exp, case: is_error(got, "RecursionError"),
        ),
        Mistake(
            "A node used twice gets only one share: in every _backward write "
            "`self.grad += ...`, not `self.grad = ...` (gradients from all uses add up).",
            _is_assign,
        ),
        Mistake(
            "Nodes are visited in a non-topological order (breadth first, pre-order, or "
            "leaves first): a node must pass its gradient on only after every node that uses "
            "it has. Sort topologically (children after all their users) and walk it reversed.",
            _is_wrong_order,
        ),
        Mistake(
            "A forgotten chain-rule factor: each _backward must multiply its local derivative "
            "by out.grad, the gradient that arrived from above.",
            _forgot_factor,
        ),
        _missing("__radd__", "n+"),
        _missing("__rsub__", "n-"),
        _missing("__rmul__", "n*"),
        _missing("__rtruediv__", "n/"),
        Mistake(
            "`c - x` or `c / x` computed `x - c` or `x / c`: in __rsub__ and __rtruediv__ "
            "the number `other` comes first.",
            _swapped_reflected,
        ),
        Mistake(
            "tanh's local derivative is 1 - t² with t = tanh(x), the output (not 1 - x²).",
            _wrong_rule("tanh uses x"),
        ),
        Mistake(
            "The gradient for the denominator of a / b is -a / b² (mind the minus sign).",
            _wrong_rule("/ denominator sign"),
        ),
        Mistake(
            "The power rule lowers the power: d(x**n)/dx = n·x**(n-1).",
            _wrong_rule("** keeps the power"),
        ),
        Mistake(
            "The power rule multiplies by the exponent: d(x**n)/dx = n·x**(n-1), not "
            "x**(n-1) (and a / b written as a * b**-1 inherits that factor -1).",
            _wrong_rule("** drops the factor"),
        ),
        Mistake(
            "relu passes the gradient only where x > 0 (0 elsewhere).",
            _wrong_rule("relu passes all"),
        ),
        Mistake("exp's local derivative is e**x, the output itself.", _wrong_rule("exp uses x")),
        Mistake(
            "After zero_grad() some .grad was not 0: zero_grad must reset every node in the "
            "graph (walk your topological order), not just the root.",
            _zero_grad_incomplete,
        ),
        Mistake(
            "zero_grad() failed: define it to set .grad = 0 on the node and every node it "
            "depends on (reuse your topological order).",
            lambda got, exp, case: is_error(got) and got.get("at") == "zero_grad",
        ),
    ),
    nudges=("Find the first failing case: the `ops:` cases test one family of operations each.",),
    reveal="Each op: compute out, then define out._backward adding local derivative × out.grad "
    "to each input's .grad, the local derivative built from MyValue nodes (tanh: 1 - out * "
    "out); backward(create_graph): topological order, root.grad = MyValue(1.0) if "
    "create_graph else 1.0, reversed walk.",
)


EXERCISES: list[Exercise] = [MY_VALUE]
