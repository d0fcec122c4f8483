"""Capstone 4.7 (hard): a gradient-check bug hunt.

The student writes ``find_wrong_rules(table)``: ``table[name] = (forward, vjp, xs)`` for
eight anonymous primitives (``forward(x)`` entrywise, ``vjp(x, g)`` its backward rule,
``xs`` the points to check at); it returns the names whose rule is wrong. The grader
plants a fresh random set of wrong rules in every table (from none to four of eight),
drawn from the mistakes rules really have: a missing product-rule term, a missing
chain-rule factor, a sign, the input used where the output belongs, a power not lowered.
The tables also hold traps for a careless checker: rules that are right but have kinks
at a point to check (``abs``, ``maximum(x, 0)`` at 0), huge gradients (``exp(3x)`` near 4,
where an absolute tolerance fails a right rule) and tiny ones (``1e-4·cos x``, where an
absolute tolerance passes a wrong rule). A good checker uses float64 central differences,
the *relative* error, and skips points where the one-sided differences disagree (kinks).
"""

from __future__ import annotations

import numpy as np

from ..runners.capstones import bug_hunt_run
from ..spec import Case, Exercise, Mistake
from ._common import is_error

__all__ = ["CATALOG", "EXERCISES"]

# forward, right rule, wrong rules, (lo, hi) of the points, kinks (points always checked)
CATALOG = [
    ("sin(x)*x", "g*(cos(x)*x + sin(x))", ["g*cos(x)*x", "g*(cos(x)*x - sin(x))"], (-2, 2), ()),
    ("exp(2*x)", "g*2*exp(2*x)", ["g*exp(2*x)", "-g*2*exp(2*x)"], (-1, 1), ()),
    ("tanh(x)", "g*(1 - tanh(x)**2)", ["g*(1 - x**2)", "g*(1 + tanh(x)**2)"], (-2, 2), ()),
    ("log(1 + x**2)", "g*2*x/(1 + x**2)", ["g/(1 + x**2)", "g*2*x/(1 + x)**2"], (-2, 2), ()),
    ("sqrt(1 + x**2)", "g*x/sqrt(1 + x**2)", ["g*0.5/sqrt(1 + x**2)"], (-2, 2), ()),
    ("x**3", "g*3*x**2", ["g*3*x**3", "g*x**2"], (-1.5, 1.5), ()),
    ("abs(x)", "g*sign(x)", ["g*x"], (-1, 1), (0.0,)),
    ("maximum(x, 0)", "g*(x > 0)", ["g"], (-1, 1), (0.0,)),
    ("1e-4*cos(x)", "-g*1e-4*sin(x)", ["g*1e-4*sin(x)", "-g*1e-4*cos(x)"], (-2, 2), ()),
    ("exp(3*x)", "g*3*exp(3*x)", ["g*3.03*exp(3*x)"], (3.5, 4), ()),
]
TABLE_SIZE = 8
KINKED = {fwd for fwd, *_rest, kinks in CATALOG if kinks}
TINY = {"1e-4*cos(x)"}
HUGE = {"exp(3*x)"}


def _table(rng, n_wrong: int, trap: str) -> tuple[list, list[str]]:
    """Eight primitives under anonymous names, ``n_wrong`` of them with a planted bug.

    Returns (rows, the names of the wrong ones). A kinked primitive is always among the
    eight, left right (a trap, not a bug); ``trap`` "tiny" adds the tiny one with a wrong
    rule (counted in ``n_wrong``), "huge" adds the huge one with its right rule.
    """
    kinked = [i for i, e in enumerate(CATALOG) if e[4]]
    special = {"tiny": TINY, "huge": HUGE}[trap]
    must = [int(rng.choice(kinked)), next(i for i, e in enumerate(CATALOG) if e[0] in special)]
    rest = [i for i, e in enumerate(CATALOG) if i not in must and e[0] not in TINY | HUGE]
    chosen = must + [int(i) for i in rng.choice(rest, size=TABLE_SIZE - 2, replace=False)]
    chosen = [chosen[k] for k in rng.permutation(TABLE_SIZE)]
    forced = {k for k, i in enumerate(chosen) if trap == "tiny" and CATALOG[i][0] in TINY}
    free = [k for k, i in enumerate(chosen) if not CATALOG[i][4] and CATALOG[i][0] not in special]
    wrong_at = forced | {
        int(k) for k in rng.choice(free, size=n_wrong - len(forced), replace=False)
    }
    rows, wrong = [], []
    for k, i in enumerate(chosen):
        fwd, right, wrongs, (lo, hi), kinks = CATALOG[i]
        name = f"p{k + 1}"
        rule = str(rng.choice(wrongs)) if k in wrong_at else right
        xs = sorted(np.round(rng.uniform(lo, hi, size=4), 3).tolist() + list(kinks))
        rows.append((name, fwd, rule, xs))
        if k in wrong_at:
            wrong.append(name)
    return rows, sorted(wrong)


_PLANTED: dict[str, list[str]] = {}  # table text -> the planted names (grader side only)


def _cases(rng):
    cases = []
    for n_wrong, trap in ((2, "tiny"), (3, "huge"), (1, "tiny"), (4, "huge")):
        rows, wrong = _table(rng, n_wrong, trap)
        _PLANTED[repr(rows)] = wrong
        cases.append(Case(f"a table of {TABLE_SIZE} rules ({n_wrong} planted wrong)", (rows,)))
    # A table with no bug scores only beside the same eight with one planted: alone, any
    # answer that reports nothing would pass it.
    clean, _ = _table(rng, 0, "huge")
    buggy = [list(row) for row in clean]
    k = int(rng.choice([i for i, row in enumerate(clean) if _catalog(row[1])[4] == ()
                        and row[1] not in HUGE]))  # fmt: skip
    buggy[k][2] = str(rng.choice(_catalog(clean[k][1])[2]))
    buggy = [tuple(row) for row in buggy]
    _PLANTED[repr(clean)], _PLANTED[repr(buggy)] = [], [clean[k][0]]
    cases.append(
        Case(
            f"the same {TABLE_SIZE} rules twice: all right, then one planted wrong", (clean, buggy)
        )
    )
    return cases


def _catalog(forward: str):
    return next(entry for entry in CATALOG if entry[0] == forward)


def planted(inputs) -> list:
    """The names planted wrong in each table (kept when it was drawn); one table: a list."""
    found = [list(_PLANTED[repr(rows)]) for rows in inputs]
    return found[0] if len(found) == 1 else found


def _per_table(got, exp, case):
    """(answer, planted, rows) for each table of the case; nothing for a malformed answer."""
    tables = case.inputs
    if len(tables) == 1:
        got, exp = [got], [exp]
    if not isinstance(got, list) or len(got) != len(tables):
        return []
    # An answer that is not a list of names (the table handed back, say) tells nothing
    # about which rules it got wrong: no mistake is read from it.
    return [
        (g, e, rows)
        for g, e, rows in zip(got, exp, tables, strict=True)
        if isinstance(g, list) and all(isinstance(n, str) for n in g)
    ]


def _forward_of(rows, names) -> set[str]:
    forward = {name: fwd for name, fwd, _rule, _xs in rows}
    return {forward[n] for n in names if n in forward}


def _false_alarms(got, exp, case) -> set[str]:
    """The primitives of right rules the answer reported (none for a malformed answer)."""
    return {
        f for g, e, rows in _per_table(got, exp, case) for f in _forward_of(rows, set(g) - set(e))
    }


def _only_special_alarms(got, exp, case, special: set[str]) -> bool:
    """Right rules of ``special`` (kinked, or with huge gradients) were reported, and no
    ordinary right rule was: an ordinary false alarm (float32, a one-sided difference) is a
    precision problem that reports the special ones too, and has its own hint."""
    alarms = _false_alarms(got, exp, case)
    return bool(alarms & special) and not (alarms - KINKED - HUGE)


def _missed(got, exp, case) -> set[str]:
    """The primitives of wrong rules the answer did not report."""
    return {
        f for g, e, rows in _per_table(got, exp, case) for f in _forward_of(rows, set(e) - set(g))
    }


BUG_HUNT = Exercise(
    id="4.7",
    title="A gradient-check bug hunt",
    level="hard",
    minutes=40,
    task="find_wrong_rules(table): the names of the primitives whose vjp rule is wrong",
    answer="find_wrong_rules",
    cases=_cases,
    run=bug_hunt_run,
    own_code=True,
    reference=planted,
    mistakes=(
        Mistake(
            "A right rule was reported at a kink (|x| or max(x, 0) at x = 0): there the "
            "function has no derivative and finite differences mean nothing. Skip points "
            "where the one-sided differences (f(x+h) - f(x))/h and (f(x) - f(x-h))/h disagree.",
            lambda got, exp, case: _only_special_alarms(got, exp, case, KINKED),
        ),
        Mistake(
            "A right rule with large gradients (e^{3x} near x = 4) was reported: compare the "
            "*relative* error |a - b| / max(|a|, |b|, tiny), not the absolute difference.",
            lambda got, exp, case: _only_special_alarms(got, exp, case, HUGE),
        ),
        Mistake(
            "A wrong rule with tiny gradients (1e-4·cos x) slipped through: an absolute "
            "tolerance hides it. Compare the *relative* error.",
            lambda got, exp, case: bool(_missed(got, exp, case) & TINY),
        ),
        Mistake(
            "Right rules were reported wrong: use float64 and central differences "
            "(f(x+h) - f(x-h)) / 2h with h around 1e-5; the vjp with g = 1 is the derivative.",
            lambda got, exp, case: bool(_false_alarms(got, exp, case) - KINKED - HUGE),
        ),
        Mistake(
            "Wrong rules were missed: compare at every point of xs, and call the rule "
            "wrong when any point's relative error is above a tolerance such as 1e-6.",
            lambda got, exp, case: bool(_missed(got, exp, case) - TINY),
        ),
        Mistake(
            "find_wrong_rules must return a list of names (the keys of the table).",
            lambda got, exp, case: is_error(got),
        ),
    ),
    nudges=(
        "For each name: forward, vjp, xs = table[name]; compare vjp(x, 1.0) with a finite "
        "difference of forward at each x.",
    ),
)


EXERCISES: list[Exercise] = [BUG_HUNT]
