"""Chapter 02 exercises: reverse mode (cost of a Jacobian, vjp, backprop by hand, topo sort)."""

from __future__ import annotations

import math

import numpy as np

from ..runners.ch02 import _manual_run, _passes_run, _topo_run, _vjp_run, build_graph
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error

__all__ = ["EXERCISES", "build_graph"]


# --- 2.1 how many passes for a full Jacobian? -----------------------------------------


def _passes_cases(rng):
    cases = []
    for _ in range(4):
        n, m = int(rng.integers(1, 2000)), int(rng.integers(1, 2000))
        cases.append(Case(f"random n_inputs={n}, n_outputs={m}", (n, m)))
    cases += [
        Case("edge: a scalar loss of a million parameters", (1_000_000, 1)),
        Case("edge: one input, many outputs (a curve)", (1, 500)),
        Case("edge: square, n = m = 7", (7, 7)),
    ]
    return cases


def _passes_reference(inputs):
    n, m = inputs
    cheaper = "forward" if n < m else "reverse" if m < n else "either"
    return [n, m, cheaper]


PASSES = Exercise(
    id="2.1",
    title="Forward or reverse? Count the passes",
    level="trivial",
    minutes=5,
    parts=("forward passes", "reverse passes", "cheaper mode"),
    task="jacobian_passes(n_inputs, n_outputs): return (forward passes, reverse passes, "
    "'forward' | 'reverse' | 'either')",
    answer="jacobian_passes",
    cases=_passes_cases,
    run=_passes_run,
    reference=_passes_reference,
    mistakes=(
        Mistake(
            "The counts are swapped. A forward pass (jvp) gives one *column* of the Jacobian "
            "(one input direction): n passes. A reverse pass (vjp) gives one *row* (one "
            "output): m passes.",
            lambda got, exp, case: got[:2] == exp[1::-1] and exp[0] != exp[1],
        ),
        Mistake(
            "The pass counts are right but the choice is not: the cheaper mode is the one "
            "with fewer passes ('either' when they are equal).",
            lambda got, exp, case: got[:2] == exp[:2] and got[2] != exp[2],
        ),
    ),
    nudges=(
        "A Jacobian of f: Rⁿ → Rᵐ has m rows and n columns.",
        "One jvp = one column, one vjp = one row.",
    ),
)


# --- 2.2 a vjp by hand -------------------------------------------------------------------
# f(x, y) = (x·y, exp(x) - y²)    J = [[y, x], [e^x, -2y]]


def _vjp_cases(rng):
    cases = []
    for _ in range(5):
        x, y, u, v = (draw(rng, -2.0, 2.0) for _ in range(4))
        cases.append(Case(f"random x={x}, y={y}, u={u}, v={v}", (x, y, u, v)))
    cases += [
        Case("edge: cotangent (1, 0) picks row 1 of J", (0.5, -1.5, 1.0, 0.0)),
        Case("edge: cotangent (0, 1) picks row 2 of J", (0.5, -1.5, 0.0, 1.0)),
        Case("edge: x = y = 0", (0.0, 0.0, 2.0, -3.0)),
    ]
    return cases


def _jac(x, y):
    return np.array([[y, x], [math.exp(x), -2 * y]])


def _vjp_reference(inputs):
    x, y, u, v = inputs
    return [[x * y, math.exp(x) - y * y], list(np.array([u, v]) @ _jac(x, y))]


def _cotangent_is(got, case, make) -> bool:
    x, y, u, v = case.inputs
    return close(got[1], make(x, y, u, v)) and not close(got[1], _vjp_reference(case.inputs)[1])


VJP = Exercise(
    id="2.2",
    title="A vjp by hand",
    level="easy",
    minutes=10,
    parts=("f(x, y)", "(u, v) @ J"),
    task="vjp_f(x, y, u, v): for f(x, y) = (x*y, exp(x) - y**2) return (f(x, y), (u, v) @ J)",
    answer="vjp_f",
    cases=_vjp_cases,
    run=_vjp_run,
    reference=_vjp_reference,
    mistakes=(
        Mistake(
            "That is J·(u, v), a jvp. A vjp pulls the cotangent back: input j gets "
            "Σ_i u_i ∂f_i/∂x_j — sum down a *column* of J.",
            lambda got, exp, case: _cotangent_is(
                got, case, lambda x, y, u, v: _jac(x, y) @ np.array([u, v])
            ),
        ),
        Mistake(
            "Only the first output's cotangent u was used: every output sends gradient "
            "back, so add v·∂f₂/∂x and v·∂f₂/∂y as well.",
            lambda got, exp, case: (
                case.inputs[3] != 0 and _cotangent_is(got, case, lambda x, y, u, v: [u * y, u * x])
            ),
        ),
        Mistake(
            "Sign error in ∂f₂/∂y: d(exp(x) - y²)/dy = -2y.",
            lambda got, exp, case: _cotangent_is(
                got, case, lambda x, y, u, v: [u * y + v * math.exp(x), u * x + 2 * y * v]
            ),
        ),
        Mistake(
            "The value part should be f(x, y) = (x·y, exp(x) - y²).",
            lambda got, exp, case: not close(got[0], exp[0]),
        ),
    ),
    nudges=("Write the 2×2 Jacobian first; the answer is the row vector (u, v) times it.",),
    reveal="x̄ = u·y + v·eˣ, ȳ = u·x - 2·v·y.",
)


# --- 2.3 backprop through a given graph by hand ------------------------------------------
# d = a·b;  e = d + c;  t = tanh(d);  g = e·t;  f = g·c
# Unlike the chapter's example (where a *leaf* is used twice), here an *intermediate* node,
# d, feeds two nodes, and the leaf c is used twice too: both collect two shares, and d's
# must be complete before it passes anything on to a and b.


def _manual_cases(rng):
    cases = []
    for _ in range(5):
        a, b, c = (draw(rng, -2.0, 2.0) for _ in range(3))
        cases.append(Case(f"random a={a}, b={b}, c={c}", (a, b, c)))
    cases += [
        Case("edge: a = 0 (d = 0, tanh(d) = 0: only one of d's shares survives)", (0.0, 1.5, -0.5)),
        Case("edge: c = 0 (f = 0, yet df/dc is not)", (0.9, -1.2, 0.0)),
    ]
    return cases


def _manual_parts(a, b, c):
    """Forward values: d, e, t and g of the graph above."""
    d = a * b
    t = math.tanh(d)
    e = d + c
    return d, e, t, e * t


def _manual_grads(a, b, c, *, via_e=1.0, via_t=1.0, dtanh=None, c_from_e=1.0, c_from_f=1.0):
    """(df/da, df/db, df/dc), with switches that drop one share or change tanh's rule."""
    _d, e, t, g = _manual_parts(a, b, c)
    local = 1 - t * t if dtanh is None else dtanh(t)
    e_bar, t_bar = c * t, c * e  # g = e·t, and g's gradient is c (f = g·c)
    d_bar = via_e * e_bar + via_t * t_bar * local  # d feeds e AND t
    c_bar = c_from_f * g + c_from_e * e_bar  # c feeds f AND e
    return [d_bar * b, d_bar * a, c_bar]


def _manual_reference(inputs):
    a, b, c = inputs
    return [_manual_parts(a, b, c)[3] * c, _manual_grads(a, b, c)]


def _grads_are(got, case, **wrong) -> bool:
    a, b, c = case.inputs
    return close(got[1], _manual_grads(a, b, c, **wrong)) and not close(
        got[1], _manual_grads(a, b, c)
    )


MANUAL = Exercise(
    id="2.3",
    title="Backpropagate through a small graph by hand",
    level="medium",
    minutes=20,
    parts=("f", "(df/da, df/db, df/dc)"),
    task="backward_by_hand(a, b, c): f = (a*b + c) * tanh(a*b) * c; "
    "return (f, (df/da, df/db, df/dc))",
    answer="backward_by_hand",
    cases=_manual_cases,
    run=_manual_run,
    reference=_manual_reference,
    mistakes=(
        Mistake(
            "d = a·b is used twice (in e = d + c and in t = tanh(d)), so d̄ is the *sum* of "
            "two shares, ē + t̄·(1 - t²), and must be complete before it is passed on to "
            "a and b — one share is missing.",
            lambda got, exp, case: (
                _grads_are(got, case, via_e=0.0) or _grads_are(got, case, via_t=0.0)
            ),
        ),
        Mistake(
            "c is used twice (in e = d + c and in f = g·c), so c̄ = g + ē: one of its two "
            "shares is missing.",
            lambda got, exp, case: (
                _grads_are(got, case, c_from_e=0.0) or _grads_are(got, case, c_from_f=0.0)
            ),
        ),
        Mistake(
            "d tanh(d)/dd = 1 - tanh(d)², not 1 - tanh(d).",
            lambda got, exp, case: _grads_are(got, case, dtanh=lambda t: 1 - t),
        ),
        Mistake(
            "The value part should be f = (a·b + c)·tanh(a·b)·c itself.",
            lambda got, exp, case: not close(got[0], exp[0]),
        ),
    ),
    nudges=("Name the nodes d = a·b, e = d + c, t = tanh(d), g = e·t, f = g·c and work "
        "backwards from f̄ = 1: ḡ and c̄'s first share, then ē and t̄, then d̄ (two shares) "
        "and c̄'s second share, then ā and b̄.",),
    reveal="ḡ = c; ē = c·t; t̄ = c·e; d̄ = ē + t̄·(1 - t²); ā = d̄·b; b̄ = d̄·a; c̄ = g + ē.",
)


# --- 2.4 an iterative topological sort ---------------------------------------------------


def _random_dag(rng, n: int, prefix: str = "n"):
    spec = []
    for k in range(n):
        arity = 0 if k < 2 else int(rng.choice([0, 1, 2, 2], p=[0.15, 0.3, 0.3, 0.25]))
        if arity == 2 and k >= 2:
            i, j = rng.choice(k, size=2, replace=False)
            parents = [f"{prefix}{i}", f"{prefix}{j}"]
        elif arity >= 1:
            parents = [f"{prefix}{int(rng.integers(0, k))}"]
        else:
            parents = []
        spec.append((f"{prefix}{k}", parents))
    return spec


def _topo_cases(rng):
    cases = [
        Case(f"random graph {k + 1} ({n} nodes)", (_random_dag(rng, n),))
        for k, n in enumerate(rng.integers(8, 16, size=3))
    ]
    diamond = [("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"])]
    cases += [
        Case("edge: a diamond (a reaches d along two paths)", (diamond,)),
        Case(
            "edge: x = p + tanh(p) (p is a parent of x and of x's other parent)",
            ([("p", []), ("q", ["p"]), ("x", ["p", "q"])],),
        ),
        Case("edge: the root is a leaf", ([("x", [])],)),
        Case("edge: x + x (the same parent twice)", ([("x", []), ("y", ["x", "x"])],)),
        Case(
            "edge: a chain of 3000 tanh (recursion would overflow)",
            ([("c0", [])] + [(f"c{k}", [f"c{k - 1}"]) for k in range(1, 3000)],),
            points=2.0,
        ),
    ]
    return cases


def _topo_reference(inputs):
    parents = {name: list(ps) for name, ps in inputs[0]}
    root = inputs[0][-1][0]
    ancestors, todo = {root}, [root]
    while todo:
        for p in parents[todo.pop()]:
            if p not in ancestors:
                ancestors.add(p)
                todo.append(p)
    return {"nodes": sorted(ancestors), "parents": {n: parents[n] for n in sorted(ancestors)}}


def _is_topological(got, expected) -> bool:
    """Every node the root depends on exactly once, each after all of its parents."""
    if not isinstance(got, list) or sorted(got) != expected["nodes"]:
        return False
    position = {name: i for i, name in enumerate(got)}
    return all(position[p] < position[n] for n, ps in expected["parents"].items() for p in ps)


TOPO = Exercise(
    id="2.4",
    title="An iterative topological sort",
    level="medium",
    minutes=25,
    task="topological_sort(root): every node root depends on, each after its parents "
    "(node._prev), root last, without recursion",
    answer="topological_sort",
    cases=_topo_cases,
    run=_topo_run,
    reference=_topo_reference,
    compare=_is_topological,
    mistakes=(
        Mistake(
            "RecursionError: a recursive walk is limited to ~1000 nested calls. Keep your "
            "own stack (a list of nodes still to finish) instead of calling yourself.",
            lambda got, exp, case: is_error(got, "RecursionError"),
        ),
        Mistake(
            "The order is reversed: parents must come *before* the nodes computed from them "
            "(the root comes last). Reverse it, or append a node only after its parents.",
            lambda got, exp, case: _is_topological(got[::-1], exp),
        ),
        Mistake(
            "Every node is there once, but some node comes before one of its parents. A "
            "parent reached along another path may still be waiting lower on the stack: "
            "append a node only when all of its parents are already in the list.",
            lambda got, exp, case: (
                isinstance(got, list)
                and sorted(got) == exp["nodes"]
                and not _is_topological(got, exp)
                and not _is_topological(got[::-1], exp)
            ),
        ),
        Mistake(
            "A node appears more than once: keep a `visited` set so a node reached along "
            "two paths is listed only once.",
            lambda got, exp, case: isinstance(got, list) and len(got) > len(set(got)),
        ),
        Mistake(
            "Some nodes are missing: the order must hold every node the root depends on "
            "(and the root itself).",
            lambda got, exp, case: isinstance(got, list) and not set(exp["nodes"]) <= set(got),
        ),
        Mistake(
            "The list has nodes the root does not depend on: walk only from root via _prev.",
            lambda got, exp, case: isinstance(got, list) and not set(got) <= set(exp["nodes"]),
        ),
        Mistake(
            "This exercise asks for your own sort: the package's topological_order (or any "
            "library's) scores nothing here.",
            lambda got, exp, case: is_error(got, "LibraryCode"),
        ),
    ),
    nudges=(
        "Depth-first search from the root; a node goes into the list once all its parents "
        "are in it.",
        "Use a stack of (node, parents_done) entries: push a node's unvisited parents first, "
        "append the node when you pop it the second time.",
    ),
)


EXERCISES: list[Exercise] = [PASSES, VJP, MANUAL, TOPO]
