"""Capstone 7.5, "From a trace to a derivative program": the generated source is judged in
the grader (parsed, checked, run where only ``math`` exists) against forward mode on dual
numbers, at points the student's process never sees: drawn from a hash of the program and
the source itself, so that a table of constants for points computed beforehand cannot match.

A right answer written here (independently of the solutions notebook: its own IR of
tuples, adjoints named ``g``, local derivatives recomputed from the inputs) scores full
marks on several seeds; each of its one-mistake variants loses points with the hint that
names the mistake; the shortcuts (a closure over the trace, a library call, a loop over a
tape, a symbolic expansion of the expression tree, finite differences written out as code,
a table of values interpolated through points computed from the program) score under half,
most nothing; the points are the same for the same source and differ between sources; the
reference agrees with closed forms, finite differences and PyTorch (float64); the programs
have the promised shape (depth, fan-out, an expression tree that doubles per step); and
through ``autodiff-lab grade`` the solution scores full marks while an answer that traces
with the library's ``Value`` scores nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch07_source as source
from autodiff_lab.grading.runners.source import source_run, traced_function
from autodiff_lab.grading.spec import case_seed

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (None, 7, 123)  # the notebook's cases and two of the grader's draws
MORE_SEEDS = (None, 1, 2, 3, 7, 123)


def _check(answer, seed=None):
    return check("7.5", answer, seed=seed, show=False, record=False)


def _solution():
    """gradient_source as the chapter's solution notebook writes it (its cell is whole)."""
    import nbformat

    nb = nbformat.read(ROOT / "solutions" / "07_memory_and_control.ipynb", as_version=4)
    (cell,) = [c.source for c in nb.cells if c.source.startswith("def gradient_source(")]
    namespace: dict = {}
    exec(compile(cell, "<solution 7.5>", "exec"), namespace)  # noqa: S102 (the course's own)
    return namespace["gradient_source"]


# --- a right answer and its one-mistake variants ------------------------------------------

_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}


def make(
    *,
    assign=False,
    forward_order=False,
    incoming=True,
    second=True,
    wrong: str = "",
    swapped_rsub=False,
    reflected=True,
    verbose=False,
    methods=("exp", "log", "sin", "cos", "tanh"),
    name="right",
):
    """A gradient_source: the tape is a list of (op, parent indices, constant); ops with a
    number are "+n" (number on the right) and "n+" (number on the left)."""

    reflected_ops = reflected

    def gradient_source(f, n):
        tape: list = []

        class T:
            def __init__(self, k):
                self.k = k

        def rec(op, parents, c=None):
            tape.append((op, parents, c))
            return T(len(tape) - 1)

        def binary(op):
            def forward(a, b):
                return rec(op, (a.k, b.k)) if isinstance(b, T) else rec(op + "n", (a.k,), b)

            return forward, lambda a, b: rec("n" + op, (a.k,), b)

        for dunder, op in _BINARY.items():
            forward, reflected = binary(op)
            setattr(T, f"__{dunder}__", forward)
            if reflected_ops:
                setattr(T, f"__r{dunder}__", reflected)
        T.__pow__ = lambda a, c: rec("**", (a.k,), c)
        T.__neg__ = lambda a: rec("neg", (a.k,))
        for fn in methods:
            setattr(T, fn, lambda a, fn=fn: rec(fn, (a.k,)))
        out = f(*[rec("x", ()) for _ in range(n)])
        lines = [f"def grad_f({', '.join(f't{k}' for k in range(n))}):"]
        for k, (op, ps, c) in enumerate(tape):
            a = f"t{ps[0]}" if ps else ""
            b = f"t{ps[1]}" if len(ps) == 2 else ""
            if op == "x":
                continue
            if op in _BINARY.values():
                expr = f"{a} {op} {b}"
            elif op in ("+n", "-n", "*n", "/n"):
                expr = f"{a} {op[0]} {float(c)!r}"
            elif op in ("n+", "n-", "n*", "n/"):
                expr = f"{float(c)!r} {op[1]} {a}"
                if swapped_rsub and op == "n-":
                    expr = f"{a} - {float(c)!r}"
            elif op == "**":
                expr = f"{a} ** {float(c)!r}"
            elif op == "neg":
                expr = f"-{a}"
            else:
                expr = f"math.{op}({a})"
            lines.append(f"    t{k} = {expr}")
        lines += [f"    g{k} = 0.0" for k in range(len(tape))]
        if verbose:  # an adjoint for every constant too, never used
            lines += [f"    gc{k} = 0.0" for k, (_, _, c) in enumerate(tape) if c is not None]
        lines.append(f"    g{out.k} = 1.0")
        ks = range(n, len(tape)) if forward_order else range(len(tape) - 1, n - 1, -1)
        for k in ks:
            op, ps, c = tape[k]
            a = f"t{ps[0]}"
            b = f"t{ps[1]}" if len(ps) == 2 else ""
            c = float(c) if c is not None else 0.0
            rules = {
                "+": ["1.0", "1.0"], "-": ["1.0", "-1.0"], "*": [b, a],
                "/": [f"1.0 / {b}", f"-{a} / ({b} * {b})"], "+n": ["1.0"], "-n": ["1.0"],
                "*n": [repr(c)], "/n": [f"1.0 / {c!r}"], "n+": ["1.0"], "n-": ["-1.0"],
                "n*": [repr(c)], "n/": [f"-{c!r} / ({a} * {a})"],
                "**": [f"{c!r} * {a} ** ({c!r} - 1.0)"], "neg": ["-1.0"],
                "exp": [f"math.exp({a})"], "log": [f"1.0 / {a}"], "sin": [f"math.cos({a})"],
                "cos": [f"-math.sin({a})"], "tanh": [f"(1.0 - math.tanh({a}) ** 2)"],
            }  # fmt: skip
            mistaken = {
                "log": {"log": [f"1.0 / t{k}"]},
                "cos": {"cos": [f"math.sin({a})"]},
                "sin": {"sin": [f"-math.cos({a})"]},
                "tanh": {"tanh": [f"(1.0 - {a} * {a})"]},
                "exp": {"exp": [a]},
                "power": {"**": [f"{a} ** ({c!r} - 1.0)"]},
                "division": {"/": [f"1.0 / {b}", f"{a} / ({b} * {b})"]},
                "c*x": {"n*": ["1.0"]},
                "x*c": {"*n": ["1.0"]},
                "c-x": {"n-": ["1.0"]},
                "c/x": {"n/": [f"1.0 / {c!r}"]},
            }.get(wrong, {})
            local = {**rules, **mistaken}[op]
            for slot, (p, d) in enumerate(zip(ps, local, strict=True)):
                if slot == 1 and not second:
                    continue
                share = f"g{k} * ({d})" if incoming else f"({d})"
                if verbose:
                    lines.append(f"    g{p} = g{p} + {share}")
                    continue
                lines.append(f"    g{p} = {share}" if assign else f"    g{p} += {share}")
            by_constant = {
                "+n": "1.0", "-n": "-1.0", "*n": a, "/n": f"-{a} / ({c!r} * {c!r})",
                "n+": "1.0", "n-": "1.0", "n*": a, "n/": f"1.0 / {a}",
            }  # fmt: skip
            if verbose and op in by_constant:
                lines.append(f"    gc{k} = gc{k} + g{k} * ({by_constant[op]})")
        lines.append(f"    return t{out.k}, ({''.join(f'g{k}, ' for k in range(n))})")
        return "\n".join(lines) + "\n"

    gradient_source.__name__ = gradient_source.__qualname__ = name
    return gradient_source


RIGHT = make()
#: Right, and wasteful: constants get adjoints of their own, `g = g + …` everywhere, exp and
#: tanh recomputed in the backward part — it fits the size bound all the same.
VERBOSE = make(verbose=True, name="verbose")

WRONG = [
    (make(assign=True, name="assigns"), "A node used more than once gets only one share"),
    (make(forward_order=True, name="forward_order"), "The adjoint statements come in forward"),
    (make(incoming=False, name="no_incoming"), "A forgotten chain-rule factor"),
    (make(second=False, name="no_second_operand"), "The second operand of `a op b`"),
    (make(wrong="log", name="log_by_output"), "d log(x)/dx is 1/x"),
    (make(wrong="cos", name="cos_sign"), "d cos(x)/dx is -sin(x)"),
    (make(wrong="sin", name="sin_minus_cos"), "d sin(x)/dx is cos(x)"),
    (make(wrong="tanh", name="tanh_uses_x"), "tanh's local derivative is 1 - t²"),
    (make(wrong="exp", name="exp_uses_x"), "exp's local derivative is e**x"),
    (make(wrong="power", name="power_no_factor"), "The power rule multiplies by the exponent"),
    (make(wrong="division", name="division_sign"), "The gradient for the denominator"),
    (make(wrong="c*x", name="c_times_x"), "`c * x` with a number c on the left"),
    (make(wrong="x*c", name="x_times_c"), "`x * c` with a number c on the right"),
    (make(wrong="c-x", name="c_minus_x"), "`c - x` with a number c on the left"),
    (make(wrong="c/x", name="c_over_x"), "`c / x` with a number c on the left"),
    (make(swapped_rsub=True, name="c_minus_x_swapped"), "The values are wrong, not only"),
    (make(reflected=False, name="no_reflected_operators"), "lacks an operator f uses"),
    (make(methods=("exp", "log", "sin", "tanh"), name="no_cos"), "f calls the methods .exp()"),
]


# --- shortcuts ----------------------------------------------------------------------------


def closure_over_the_trace(f, n):
    """Records f once (with the right answer's tracer) and hands back code that calls a
    function of the notebook's, which replays the recording: not there when grad_f runs."""
    text = RIGHT(f, n)
    namespace: dict = {"math": math}
    exec(text, namespace)  # noqa: S102 (the shortcut under test)
    globals()["_replay"] = namespace["grad_f"]
    params = ", ".join(f"x{k}" for k in range(n))
    return f"def grad_f({params}):\n    return _replay({params})\n"


def reads_the_tape(f, n):
    """Code that reads the recording as a global name instead of writing it out."""
    params = ", ".join(f"x{k}" for k in range(n))
    return f"def grad_f({params}):\n    return TAPE_VALUE, TAPE_GRADS\n"


def library_call(f, n):
    """Code that hands f to a library's automatic differentiation."""
    params = ", ".join(f"x{k}" for k in range(n))
    return (
        f"def grad_f({params}):\n"
        f"    value, grads = autodiff_lab.functional.value_and_grad(F)({params})\n"
        "    return value, grads\n"
    )


def loop_over_a_tape(f, n):
    """Code holding the tape as data and a loop that replays it (an interpreter)."""
    tape = []

    class T:
        def __init__(self, k):
            self.k = k

    def rec(op, a, b):
        tape.append((op, a.k, b.k if isinstance(b, T) else float(b)))
        return T(len(tape) - 1 + n)

    for dunder in ("add", "sub", "mul", "truediv", "radd", "rsub", "rmul", "rtruediv", "pow"):
        setattr(T, f"__{dunder}__", lambda a, b, dunder=dunder: rec(dunder, a, b))
    T.__neg__ = lambda a: rec("neg", a, 0.0)
    for fn in ("exp", "log", "sin", "cos", "tanh"):
        setattr(T, fn, lambda a, fn=fn: rec(fn, a, 0.0))
    out = f(*[T(k) for k in range(n)])
    params = ", ".join(f"x{k}" for k in range(n))
    return (
        f"def grad_f({params}):\n"
        f"    v = [{params}]\n"
        f"    for op, i, j in {tape!r}:\n"
        "        v.append(OPS[op](v[i], v[j] if isinstance(j, int) else j))\n"
        f"    return v[{out.k}], ({'0.0, ' * n})\n"
    )


class _TooBig(Exception):
    pass


def symbolic_expansion(f, n, limit=1_000_000):
    """Every value and derivative written as one expression of the inputs (symbolic
    differentiation of the expression tree, no names for intermediate results). Gives up
    past ``limit`` characters, where a student's would run out of memory."""

    class S:
        def __init__(self, text, grads):
            if len(text) > limit or any(len(g) > limit for g in grads):
                raise _TooBig("the expansion passed a million characters")
            self.text, self.grads = text, grads

    def lift(b):
        return b if isinstance(b, S) else S(f"({float(b)!r})", ["0.0"] * n)

    def add(a, b, sign="+"):
        a, b = lift(a), lift(b)
        return S(f"({a.text} {sign} {b.text})",
                 [f"({x} {sign} {y})" for x, y in zip(a.grads, b.grads, strict=True)])  # fmt: skip

    def mul(a, b):
        a, b = lift(a), lift(b)
        grads = [
            f"({x} * {b.text} + {a.text} * {y})" for x, y in zip(a.grads, b.grads, strict=True)
        ]
        return S(f"({a.text} * {b.text})", grads)

    def div(a, b):
        a, b = lift(a), lift(b)
        grads = [
            f"(({x} * {b.text} - {a.text} * {y}) / ({b.text} ** 2))"
            for x, y in zip(a.grads, b.grads, strict=True)
        ]
        return S(f"({a.text} / {b.text})", grads)

    def unary(a, text, local):
        return S(text, [f"({g} * {local})" for g in a.grads])

    S.__add__ = S.__radd__ = lambda a, b: add(a, b)
    S.__sub__ = lambda a, b: add(a, b, "-")
    S.__rsub__ = lambda a, b: add(b, a, "-")
    S.__mul__ = S.__rmul__ = mul
    S.__truediv__ = div
    S.__rtruediv__ = lambda a, b: div(b, a)
    S.__neg__ = lambda a: mul(a, -1.0)
    S.__pow__ = lambda a, c: unary(a, f"({a.text} ** {c!r})", f"({c!r} * {a.text} ** {c - 1!r})")
    S.exp = lambda a: unary(a, f"math.exp({a.text})", f"math.exp({a.text})")
    S.log = lambda a: unary(a, f"math.log({a.text})", f"(1.0 / {a.text})")
    S.sin = lambda a: unary(a, f"math.sin({a.text})", f"math.cos({a.text})")
    S.cos = lambda a: unary(a, f"math.cos({a.text})", f"(-math.sin({a.text}))")
    S.tanh = lambda a: unary(a, f"math.tanh({a.text})", f"(1.0 - math.tanh({a.text}) ** 2)")
    xs = [S(f"x{k}", ["1.0" if j == k else "0.0" for j in range(n)]) for k in range(n)]
    out = f(*xs)
    params = ", ".join(f"x{k}" for k in range(n))
    return f"def grad_f({params}):\n    return {out.text}, ({', '.join(out.grads)},)\n"


def finite_differences_written_out(f, n, h=1e-5):
    """The trace written out 2n + 1 times (central differences): accurate to about 1e-10
    here, but code repeated once per input, not one reverse sweep."""
    import re

    text = RIGHT(f, n).splitlines()
    forward = [line for line in text[1:] if re.match(r"    t\d+ = ", line)]
    out = re.search(r"return (t\d+),", text[-1]).group(1)

    def copy(suffix, shift):
        lines = [f"    t{k}{suffix} = t{k} + {shift[k]!r}" for k in range(n)]
        return lines + [re.sub(r"t(\d+)", rf"t\g<1>{suffix}", line) for line in forward]

    lines = [text[0], *copy("_0", [0.0] * n)]
    for k in range(n):
        lines += copy(f"_p{k}", [h if j == k else 0.0 for j in range(n)])
        lines += copy(f"_m{k}", [-h if j == k else 0.0 for j in range(n)])
    grads = ", ".join(f"({out}_p{k} - {out}_m{k}) / {2 * h!r}" for k in range(n))
    return "\n".join([*lines, f"    return {out}_0, ({grads},)"]) + "\n"


def _program_of(f):
    """The program f performs, read from its closure: it is in the student's process (f must
    be, to be traced), and so is the grader's open code."""
    cells = dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__)))
    return cells["program"]


def _table(program, n, pts):
    """Straight-line code returning the reference's value and gradient at ``pts``,
    interpolated in x0 (Lagrange, through the three points): right at ``pts``, and nothing
    else (the basis polynomials ``b{i}`` once, each output 3 products and 2 sums)."""
    pairs = [source.reference_gradient(program, p) for p in pts]  # or any other means
    xs = [p[0] for p in pts]
    lines = [f"def grad_f({', '.join(f'x{k}' for k in range(n))}):"]
    for i in range(3):
        a, b = (xs[j] for j in range(3) if j != i)
        lines.append(f"    b{i} = (x0 - {a!r}) * (x0 - {b!r})")
    weights = [math.prod(xs[i] - xs[j] for j in range(3) if j != i) for i in range(3)]

    def through(ys):
        terms = [f"{abs(y / w)!r} * b{i}" for i, (y, w) in enumerate(zip(ys, weights))]
        signs = ["-" if y / w < 0 else "+" for y, w in zip(ys, weights)]
        text = f"{terms[0]}" if signs[0] == "+" else f"0.0 - {terms[0]}"
        return text + "".join(f" {sg} {t}" for sg, t in zip(signs[1:], terms[1:]))

    grads = [through([g[k] for _, g in pairs]) for k in range(n)]
    lines.append(f"    return {through([v for v, _ in pairs])}, ({', '.join(grads)},)")
    return "\n".join(lines) + "\n"


def table_at_the_programs_points(f, n):
    """The attack on points drawn from the program alone (before the points were salted with
    the source; :func:`points` with no source still draws them): computes them here, and
    hands back a table of the right values and gradients there, interpolated in x0."""
    program = _program_of(f)
    return _table(program, n, source.points(program))


def table_chasing_its_own_points(f, n, rounds=4):
    """The same table, rebuilt ``rounds`` times for the points the grader's own function
    draws for the previous table: each is right at its predecessor's points, never at its
    own (that would be a fixed point of the hash)."""
    program = _program_of(f)
    text = _table(program, n, source.points(program))
    for _ in range(rounds):
        text = _table(program, n, source.points(program, text))
    return text


SHORTCUTS = [
    (closure_over_the_trace, "a call of `_replay`", "calls something other than math"),
    (reads_the_tape, "which it never assigned", "reads a name it never assigns"),
    (library_call, "a call of `autodiff_lab.functional", "calls something other than math"),
    (loop_over_a_tape, "expression", "is not straight-line"),
    (symbolic_expansion, "operations, over the bound", "The generated code is too big"),
    (finite_differences_written_out, "operations, over the bound", "The generated code is too big"),
    (table_at_the_programs_points, "the value is", "The values are wrong, not only"),
    (table_chasing_its_own_points, "the value is", "The values are wrong, not only"),
]
#: Shortcuts that are right where they fit (the small programs), refused for their size; and
#: the tables, interpolated exactly where f is a quadratic in x0 alone (x * x + x).
RIGHT_WHERE_THEY_FIT = (
    symbolic_expansion,
    finite_differences_written_out,
    table_at_the_programs_points,
    table_chasing_its_own_points,
)


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_right_answer_scores_full_marks(seed):
    result = _check(RIGHT, seed)
    assert result.status == "passed" and result.score == result.max_score == 24, result.to_text()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_wasteful_right_answer_fits_the_bound(seed):
    result = _check(VERBOSE, seed)
    assert result.score == result.max_score == 24, result.to_text()
    for case in registry.get("7.5").cases(np.random.default_rng(seed or 0)):
        expected = source._reference(case.inputs)
        size = source._judged(source_run(VERBOSE, case.inputs), expected)[0].size
        assert size <= 0.8 * expected["bound"], (case.name, size, expected["bound"])


def test_the_task_text_states_what_the_grader_does():
    """The numbers of 7.5's task (exercise notebook) are the grader's."""
    import nbformat

    nb = nbformat.read(ROOT / "exercises" / "07_memory_and_control.ipynb", as_version=4)
    (task,) = [c.source for c in nb.cells if c.source.startswith("## Exercise 7.5")]
    task = " ".join(task.split())
    assert f"at most {source.SIZE_PER_OP} operations" in task
    assert f"{source.SIZE_PER_INPUT} per input and {source.SIZE_BASE} more" in task
    assert f"random graphs {source.MIN_DEPTH} or more operations deep" in task
    assert "(and `sqrt`, `pow`…)" in task and {"sqrt", "pow"} <= source.MATH_FUNCTIONS
    names = [c.name for c in registry.get("7.5").cases(np.random.default_rng(0))]
    assert any(name.startswith("16 inputs") for name in names)
    assert sum("random DAG" in name for name in names) == 3


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_one_mistake_loses_points_with_its_hint(wrong, hint):
    result = _check(wrong)
    assert result.score < result.max_score, result.to_text()
    assert any(hint in h for h in result.hints), result.to_text()


@pytest.mark.parametrize(
    ("shortcut", "message", "hint"), SHORTCUTS, ids=[s.__name__ for s, _, _ in SHORTCUTS]
)
@pytest.mark.parametrize("seed", SEEDS)
def test_shortcuts_score_under_half(shortcut, message, hint, seed):
    result = _check(shortcut, seed)
    assert result.score < result.max_score / 2, result.to_text()
    assert any(message in c.message for c in result.cases if not c.passed), result.to_text()
    assert any(hint in h for h in result.hints), result.to_text()
    if shortcut not in RIGHT_WHERE_THEY_FIT:
        assert result.score == 0, result.to_text()


def test_the_symbolic_expansion_is_right_where_it_fits():
    """The expansion is refused for its size, not for wrong numbers: on the small programs
    it scores, on the deep ones it is over the bound (or past a million characters)."""
    result = _check(symbolic_expansion)
    by_name = {c.name: c for c in result.cases}
    assert all(c.passed for name, c in by_name.items() if name.startswith("ops:"))
    big = [c for name, c in by_name.items() if "random DAG" in name or "doubles" in name]
    assert big and not any(c.passed for c in big)


def test_a_stub_and_a_wrong_kind_of_answer():
    def stub(f, n):
        raise NotImplementedError("Exercise 7.5: write gradient_source")

    assert _check(stub).status == "not attempted"
    result = _check(lambda f, n: f)
    assert result.score == 0 and "not the source code of grad_f" in result.cases[0].message


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("def grad_f(a, b):\n    import os\n    return a, (b, a)\n", "branch"),
        ("def grad_f(a, b):\n    return a.real, (1.0, 0.0)\n", "call"),
        ("def grad_f(a, b):\n    return (a, b)[0], (1.0, 0.0)\n", "branch"),
        ("def grad_f(a, b):\n    return __import__('os'), (1.0, 0.0)\n", "call"),
        ("def grad_f(a, b):\n    return [a] * 10, (1.0, 0.0)\n", "branch"),
        ("def grad_f(a, b):\n    return 'a' * 9, (1.0, 0.0)\n", "call"),
        ("def grad_f(a, b):\n    return 10 ** 10 ** 10, (1.0, 0.0)\n", "run"),
        ("def grad_f(a, b=1.0):\n    return a, (1.0, 0.0)\n", "shape"),
        ("def grad_f(a: print(1), b):\n    return a, (1.0, 0.0)\n", "shape"),
        ("@print\ndef grad_f(a, b):\n    return a, (1.0, 0.0)\n", "shape"),
        ("def grad_f(a, b):\n    c = a if a > 0 else b\n    return c, (1.0, 0.0)\n", "branch"),
        ("def grad_f(a, b):\n    return math, (1.0, 0.0)\n", "call"),
        ("def grad_f(a, b):\n    return math.__dict__, (1.0, 0.0)\n", "call"),
        ("def grad_f(a, b):\n    return math.exp(a), (1.0,)\n", "return"),
        ("def grad_f(a, b):\n    return a ** 0.5, (1.0, 0.0)\n", "return"),  # complex at a < 0
        ("def grad_f(a, b):\n    c += a\n    return c, (1.0, 0.0)\n", "name"),
        ("def grad_f(a, b):\n    return a, (1.0, 0.0)\ndef g():\n    pass\n", "shape"),
        ("def grad_f(a, b):\n    return a, (1.0, 0.0)\n", ""),
        ("def grad_f(a, b):\n    return " + "+".join(["a"] * 5000) + ", (1.0, 0.0)\n", "size"),
        ("def grad_f(a, b):\n    return " + "+".join(["a"] * 600) + ", (600, 0)\n", ""),
        ("import math\ndef grad_f(a, b):\n    '''doc'''\n    c = math.sin(a)\n    c += b\n"
         "    return c, (math.cos(a), 1)\n", ""),
    ],
)  # fmt: skip
def test_the_source_checks(text, kind):
    """What the grader refuses, before and while running a source (never anything but
    arithmetic and math's functions reaches the interpreter)."""
    got = source.evaluate(text, 2, ((-0.5, 0.7), (0.3, 0.2)), 1000)
    assert got.kind == kind, got


def test_the_size_counts_operations_and_the_bound_is_linear():
    text = (
        "def grad_f(a):\n    b = -a * 2 + math.exp(a) ** 2\n    b -= a / 3\n    return b, (1.0,)\n"
    )
    assert source.evaluate(text, 1, ((0.5,),), 100).size == 7  # neg * + exp ** -= /
    program = [("leaf", 0.5), ("leaf", 0.7), ("*", 0, 1), ("sin", 2)]
    assert source.size_bound(program) == 10 * 2 + 2 * 2 + 10


def test_programs_have_depth_fan_out_and_a_swelling_tree():
    cases = registry.get("7.5").cases(np.random.default_rng(0))
    dags = [c.inputs[0] for c in cases if "random DAG" in c.name]
    assert len(dags) == 3 and all(source.depth(p) >= 20 for p in dags)
    for program in dags:  # some node is used by two or more operations
        uses = [p for instr in program for p in source._parents(instr)]
        assert max(uses.count(k) for k in set(uses)) >= 2
    (chain,) = [c.inputs[0] for c in cases if "doubles" in c.name]

    def tree_size(k):  # nodes of the expression tree under node k
        parents = source._parents(chain[k])
        return 1 + sum(tree_size(p) for p in parents)

    assert tree_size(len(chain) - 6) > 2**21 * 0.99 and len(chain) < 120  # 22 steps


def _targets(seed, answer=RIGHT):
    """(case, program, the reference at the points of ``answer``'s source) for each case."""
    for case in registry.get("7.5").cases(np.random.default_rng(seed)):
        (program,) = case.inputs
        text = source_run(answer, case.inputs)["source"]
        yield case, program, source._target(source._reference(case.inputs)["program"], text)


def test_the_points_are_not_sent_to_the_students_process():
    for case, _program, target in _targets(1):
        sent = repr(case.inputs)
        assert not any(repr(x) in sent for p in target.points for x in p)


def test_the_points_are_drawn_from_the_source_and_the_same_for_the_same_source():
    """Two sources of one program (the right answer and a wasteful right one) get different
    points; the same source, given twice (as two equal strings), gets the same points, as
    does a regrade; the points without a source are the program's alone, and are neither."""
    for case in registry.get("7.5").cases(np.random.default_rng(2)):
        (program,) = case.inputs
        right, verbose = source_run(RIGHT, case.inputs), source_run(VERBOSE, case.inputs)
        assert right["source"] != verbose["source"]
        again = "".join(list(source_run(RIGHT, case.inputs)["source"]))  # another str object
        assert again == right["source"] and again is not right["source"]
        first = source.points(program, right["source"])
        assert source.points(program, again) == first, case.name
        assert source.points(program, verbose["source"]) != first, case.name
        assert source.points(program) not in (first, source.points(program, verbose["source"]))
        assert all(len(p) == source.n_inputs(program) for p in first) and len(first) == 3
    for seed in (None, 3):
        first, second = _check(RIGHT, seed), _check(RIGHT, seed)
        assert [c.message for c in first.cases] == [c.message for c in second.cases]


def test_a_point_where_a_power_turns_complex_is_skipped_not_a_crash():
    """Random DAG 3 of draw 13 has ``x ** 0.5`` of a value that turns negative near its
    example point, and a later math call then gets a complex number (a TypeError, not a
    ValueError): the search skips such points, for every source, instead of failing."""
    (case,) = [c for c in registry.get("7.5").cases(np.random.default_rng(13)) if "DAG 3" in c.name]
    (program,) = case.inputs
    base = [a[0] for op, *a in program if op == "leaf"]
    near = [tuple(b + d for b in base) for d in np.linspace(-0.05, 0.05, 41)]
    with pytest.raises(TypeError, match="complex"):  # what the search must survive
        [source.forward_values(program, p) for p in near]
    for text in ("", "a source", source_run(RIGHT, case.inputs)["source"]):
        pts = source.points(program, text)
        assert len(pts) == 3 and pts != source.points(program)
        assert all(source._safe(program, source.forward_values(program, p), 0.1) for p in pts)


def test_without_a_salted_point_the_program_s_own_points_are_the_fallback(monkeypatch):
    program = registry.get("7.5").cases(np.random.default_rng(0))[0].inputs[0]
    assert source.points(program, "a source") != source.points(program)
    monkeypatch.setattr(source, "SALTED_SEARCHES", 0)  # as if every salted search failed
    assert source.points(program, "a source") == source.points(program)


@pytest.mark.parametrize(
    "attack", [table_at_the_programs_points, table_chasing_its_own_points], ids=lambda a: a.__name__
)
@pytest.mark.parametrize("seed", MORE_SEEDS)
def test_a_table_for_points_computed_beforehand_scores_under_half(attack, seed):
    """The attack the salt closes: the table is right at the points it was made for (the
    program's own, which the grader drew before the salt; or the previous table's), so a
    grader using those would give it full marks; at its own points it is wrong."""
    for case in registry.get("7.5").cases(np.random.default_rng(case_seed("7.5", seed))):
        (program,) = case.inputs
        n, bound = source.n_inputs(program), source.size_bound(program)
        text = source_run(attack, case.inputs)["source"]
        aimed = source.points(program)
        if attack is table_chasing_its_own_points:
            previous = table_chasing_its_own_points(traced_function(program)[0], n, rounds=3)
            aimed = source.points(program, previous)
        ev = source.evaluate(text, n, tuple(aimed), bound)
        expected = [source.reference_gradient(program, p) for p in aimed]
        assert ev.ran and ev.size <= bound, (case.name, ev)
        np.testing.assert_allclose(ev.values, [v for v, _ in expected], rtol=1e-9)
        np.testing.assert_allclose(ev.grads, [g for _, g in expected], rtol=1e-7, atol=1e-9)
    result = _check(attack, seed)
    assert result.score < result.max_score / 2, result.to_text()
    assert result.score <= 1.0, result.to_text()  # at most x * x + x, a quadratic in x0
    assert any("The values are wrong, not only" in h for h in result.hints), result.to_text()


@pytest.mark.parametrize("seed", MORE_SEEDS)
def test_the_solution_and_the_right_answer_score_full_marks_at_their_own_points(seed):
    for answer in (RIGHT, _solution()):
        result = _check(answer, seed)
        assert result.score == result.max_score == 24, result.to_text()


def _torch_value_and_grad(torch, program, point):
    """f run on float64 torch tensors (they have .exp(), .log(), … too), then backward()."""
    xs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in point]
    f, _n = traced_function(program)
    out = f(*xs)
    out.backward()
    return float(out.detach()), [float(x.grad) if x.grad is not None else 0.0 for x in xs]


def test_references_agree_with_torch():
    torch = pytest.importorskip("torch")
    for seed in (0, 1):
        for case, program, target in _targets(seed):
            for point, value, grads in zip(target.points, target.values, target.grads, strict=True):
                t_value, t_grads = _torch_value_and_grad(torch, program, point)
                assert math.isclose(value, t_value, rel_tol=1e-10, abs_tol=1e-12), case.name
                np.testing.assert_allclose(grads, t_grads, rtol=1e-9, atol=1e-12)


def test_references_agree_with_finite_differences():
    for case, program, target in _targets(3):
        point, grads = target.points[0], target.grads[0]
        for k in range(len(point)):
            h = 1e-6
            up, down = list(point), list(point)
            up[k] += h
            down[k] -= h
            fd = (
                source.forward_values(program, up)[-1] - source.forward_values(program, down)[-1]
            ) / (2 * h)
            assert math.isclose(grads[k], fd, rel_tol=1e-5, abs_tol=1e-6), (case.name, k)


def test_references_agree_with_closed_forms():
    x = 0.7
    fan_out = [("leaf", x), ("*", 0, 0), ("+", 1, 0)]  # x * x + x
    assert source.reference_gradient(fan_out, [x]) == (pytest.approx(x * x + x), [2 * x + 1])
    # f(x, y) = sin(x * y) + log(y) / x - 3 / y
    program = [("leaf", 0.0), ("leaf", 0.0), ("*", 0, 1), ("sin", 2), ("log", 1),
               ("/", 4, 0), ("+", 3, 5), ("n/", 3.0, 1), ("-", 6, 7)]  # fmt: skip
    x, y = 0.8, 1.3
    value, (dx, dy) = source.reference_gradient(program, [x, y])
    assert value == pytest.approx(math.sin(x * y) + math.log(y) / x - 3 / y, rel=1e-14)
    assert dx == pytest.approx(y * math.cos(x * y) - math.log(y) / x**2, rel=1e-14)
    assert dy == pytest.approx(x * math.cos(x * y) + 1 / (x * y) + 3 / y**2, rel=1e-14)
    # the simulator behind the hints, when right, agrees with the reference
    for case in registry.get("7.5").cases(np.random.default_rng(4)):
        (program,) = case.inputs
        point = source.points(program)[0]
        np.testing.assert_allclose(
            source.simulate(program, point), source.reference_gradient(program, point)[1],
            rtol=1e-10, atol=1e-12,
        )  # fmt: skip


def test_the_runner_sends_only_the_source():
    program = [("leaf", 0.5), ("leaf", 0.7), ("*", 0, 1), ("exp", 2)]
    got = source_run(RIGHT, (program,))
    assert set(got) == {"source"} and got["source"].startswith("def grad_f(t0, t1):")


@pytest.mark.slow
def test_through_the_batch_grader_the_solution_scores_and_the_librarys_value_does_not(tmp_path):
    """``autodiff-lab grade``: the chapter's solution notebook scores full marks on 7.5;
    tracing with the library's Value (its graph read back into code) scores nothing, the
    own-code rule named (the answer is computed where autodiff_lab cannot be imported)."""
    import shutil

    from grading_testkit import grade_folder, write_notebook

    subs = tmp_path / "subs"
    (subs / "solution").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "07_memory_and_control.ipynb", subs / "solution")
    library = """
import math
from autodiff_lab import Value
from autodiff_lab.graph import topological_order


def gradient_source(f, n):
    xs = [Value(0.0) for _ in range(n)]
    out = f(*xs)
    return "def grad_f(" + ", ".join(f"x{k}" for k in range(n)) + "):\\n    return 0.0, ()\\n"
"""
    write_notebook(subs / "library" / "answer.ipynb", [library])
    result = grade_folder(subs, tmp_path, "notes")
    assert result["rc"] == 0, result["err"]
    rows = {(r["student"], r["exercise"]): r for r in result["rows"]}
    solved = rows[("solution", "7.5")]
    assert float(solved["points"]) == float(solved["max_points"]) == 24, solved["feedback"]
    refused = rows[("library", "7.5")]
    assert float(refused["points"]) == 0.0
    assert "exercise 7.5 must be your own code: importing autodiff_lab" in refused["feedback"]
