"""Capstone 7.5 (hard): from a trace to a derivative program — source transformation.

The student writes ``gradient_source(f, n)``: it runs ``f`` (a straight-line Python function
of ``n`` scalars) on placeholders of their own design, records what it does into a small
IR of their own, and returns the *source code* of a new function ``grad_f(x0, …, x{n-1})``
that returns ``(value, (df/dx0, …))``: reverse mode written out as code.

How it is graded, here in the grader (:func:`evaluate`), never in the student's process:

- the cases are programs drawn fresh from the case seed (3.6's instruction format, with
  ``log``, ``sin`` and ``cos``): one family of operations per small program, fan-out, an
  input used at the top and deep down, an unused input, random DAGs with reused
  subexpressions (depth at least 20), a chain whose expression tree doubles at every step,
  and a program of 16 inputs;
- the source is parsed and checked with :mod:`ast`: one ``def grad_f`` with ``n``
  parameters, straight-line (assignments, ``+=``/``-=``, one ``return``: no loop, branch,
  comprehension, lambda, import, attribute or subscript), the only calls ``math.<name>``,
  every name read a parameter or a variable assigned before; and its size — the operations
  in it, each ``+ - * / **``, unary minus, ``math.`` call and augmented assignment — at most
  :func:`size_bound` (10 per operation of ``f``, 2 per input, 10 more: linear in the program,
  independent of how often anything is reused, so a symbolic expansion of the expression
  tree does not fit, nor code written out once per input — forward mode, finite
  differences — on the 16-input program);
- it is executed here in a namespace holding only :mod:`math` (no builtins), its integer
  constants made floats first (so ``10 ** 10 ** 9`` overflows instead of running), at three
  points the student's process never sees, and its value and gradient compared with the
  reference: forward mode on dual numbers (:func:`reference_gradient`, one tangent per
  input) — a different algorithm from the one asked for, checked in tests against closed
  forms, finite differences and PyTorch.

The points are drawn near the program's example point from a SHA-256 hash of the program
*and the source the student returned* (:func:`points`, :func:`_target`). The program reaches
the student's process (it must, to be traced) and this code is open, so points drawn from the
program alone could be computed there, and a table of constants for them (interpolated in
``x0``, say) written out as "code"; salted with the source, the points are fixed only once the
source is, and a table would have to be a fixed point of the hash. It stays deterministic
(the same source gets the same points, and the same grade on a regrade) and needs no secret.

The hints come from wrong reverse sweeps simulated here on the same program
(:func:`simulate`): adjoints assigned instead of accumulated, adjoints emitted in forward
order, a forgotten incoming adjoint, a forgotten second operand, the constants' rules
(``c * x``, ``c - x``, ``c / x``) and the usual wrong local rules; and from what the checks of
the source found (a loop, a call, a name it does not define, too many operations).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..runners.source import source_run
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error
from .ch03_value import _constant, _with_root, depth

__all__ = [
    "EXERCISES",
    "Evaluation",
    "evaluate",
    "forward_values",
    "random_program",
    "reference_gradient",
    "simulate",
    "size_bound",
    "swell_chain",
]

SIZE_PER_OP, SIZE_PER_INPUT, SIZE_BASE = 10, 2, 10
MATH_FUNCTIONS = frozenset(
    {"exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "sqrt", "pow", "fabs"}
)
N_POINTS = 3
SWELL_INPUTS = 6
MIN_DEPTH = 20
_BINARY = ("+", "-", "*", "/")


def n_inputs(program) -> int:
    return sum(1 for op, *_ in program if op == "leaf")


def size_bound(program) -> int:
    """The most operations grad_f may hold for ``program`` (see the module docstring)."""
    n = n_inputs(program)
    return SIZE_PER_OP * (len(program) - n) + SIZE_PER_INPUT * n + SIZE_BASE


# --- the program in floats: values, local derivatives (right or one mistake) -------------


def _parents(instr) -> list[int]:
    op, *a = instr
    if op == "leaf":
        return []
    if op in _BINARY:
        return [a[0], a[1]]
    if op.startswith("n") and op != "neg":
        return [a[1]]
    return [a[0]]


def _apply(op: str, a, v) -> float:
    """Instruction ``op`` with arguments ``a`` on the node values ``v`` (floats)."""
    if op == "+":
        return v[a[0]] + v[a[1]]
    if op == "-":
        return v[a[0]] - v[a[1]]
    if op == "*":
        return v[a[0]] * v[a[1]]
    if op == "/":
        return v[a[0]] / v[a[1]]
    if op in ("+n", "-n", "*n", "/n"):
        x, c = v[a[0]], float(a[1])
        return {"+n": x + c, "-n": x - c, "*n": x * c, "/n": x / c}[op]
    if op in ("n+", "n-", "n*", "n/"):
        c, x = float(a[0]), v[a[1]]
        return c + x if op == "n+" else c - x if op == "n-" else c * x if op == "n*" else c / x
    if op == "**":
        return v[a[0]] ** float(a[1])
    if op == "neg":
        return -v[a[0]]
    return getattr(math, op)(v[a[0]])  # exp log sin cos tanh


def forward_values(program, point) -> list[float]:
    """Every node's value at ``point`` (the leaves' values, in order)."""
    values: list[float] = []
    leaves = iter(point)
    for op, *a in program:
        values.append(float(next(leaves)) if op == "leaf" else _apply(op, a, values))
    return values


#: Wrong local rules: name -> (op it changes, local(x, y, out, c) -> derivatives).
WRONG_RULES: dict[str, tuple[str, Callable]] = {
    "log divides by the output": ("log", lambda x, y, out, c: (1.0 / out,)),
    "cos without the minus": ("cos", lambda x, y, out, c: (math.sin(x),)),
    "sin gives minus cos": ("sin", lambda x, y, out, c: (-math.cos(x),)),
    "tanh uses x": ("tanh", lambda x, y, out, c: (1.0 - x * x,)),
    "exp uses x": ("exp", lambda x, y, out, c: (x,)),
    "** drops the factor": ("**", lambda x, y, out, c: (x ** (c - 1),)),
    "/ denominator sign": ("/", lambda x, y, out, c: (1.0 / y, x / (y * y))),
    "c * x without c": ("n*", lambda x, y, out, c: (1.0,)),
    "x * c without c": ("*n", lambda x, y, out, c: (1.0,)),
    "c - x without the minus": ("n-", lambda x, y, out, c: (1.0,)),
    "c / x as x / c": ("n/", lambda x, y, out, c: (1.0 / c,)),
}


def _local(instr, values, out: float, wrong: str | None) -> tuple[float, ...]:
    """d out / d parent for each parent of ``instr`` (in :func:`_parents` order)."""
    op, *a = instr
    ps = _parents(instr)
    x = values[ps[0]]
    y = values[ps[1]] if len(ps) == 2 else 0.0
    c = float(a[1]) if op in ("+n", "-n", "*n", "/n", "**") else 0.0
    if op in ("n+", "n-", "n*", "n/"):
        c = float(a[0])
    if wrong is not None and WRONG_RULES[wrong][0] == op:
        return WRONG_RULES[wrong][1](x, y, out, c)
    rules: dict[str, Callable[[], tuple[float, ...]]] = {
        "+": lambda: (1.0, 1.0), "-": lambda: (1.0, -1.0), "*": lambda: (y, x),
        "/": lambda: (1.0 / y, -x / (y * y)), "+n": lambda: (1.0,), "-n": lambda: (1.0,),
        "*n": lambda: (c,), "/n": lambda: (1.0 / c,), "n+": lambda: (1.0,),
        "n-": lambda: (-1.0,), "n*": lambda: (c,), "n/": lambda: (-c / (x * x),),
        "neg": lambda: (-1.0,), "exp": lambda: (out,), "log": lambda: (1.0 / x,),
        "sin": lambda: (math.cos(x),), "cos": lambda: (-math.sin(x),),
        "tanh": lambda: (1.0 - out * out,), "**": lambda: (c * x ** (c - 1),),
    }  # fmt: skip
    return rules[op]()


def simulate(
    program,
    point,
    *,
    accumulate: bool = True,
    order: str = "reverse",
    wrong: str | None = None,
    second_operand: bool = True,
    incoming: bool = True,
) -> list[float]:
    """The gradient a reverse sweep written out as code computes, right or with one mistake.

    ``accumulate=False``: each contribution *assigned* to the parent's adjoint (the last
    one written wins); ``order="forward"``: the adjoint statements in forward order, every
    adjoint starting at 0 (a node passes its adjoint on before it has received it);
    ``wrong``: one of :data:`WRONG_RULES`; ``second_operand=False``: the second operand of
    ``x op y`` gets nothing; ``incoming=False``: the local derivative without the incoming
    adjoint.
    """
    values = forward_values(program, point)
    adj = [0.0] * len(program)
    adj[-1] = 1.0
    ks = range(len(program) - 1, -1, -1) if order == "reverse" else range(len(program))
    for k in ks:
        instr = program[k]
        if instr[0] == "leaf":
            continue
        ps = _parents(instr)
        local = _local(instr, values, values[k], wrong)
        for slot, (p, d) in enumerate(zip(ps, local, strict=True)):
            if slot == 1 and not second_operand:
                continue
            share = d * adj[k] if incoming else d
            adj[p] = adj[p] + share if accumulate else share
    return [adj[k] for k, (op, *_) in enumerate(program) if op == "leaf"]


# --- the reference: forward mode on dual numbers (one tangent per input) ------------------


def reference_gradient(program, point) -> tuple[float, list[float]]:
    """(f(point), ∇f(point)) by forward mode: each node carries its value and its tangent
    vector (the derivatives with respect to every input), pushed through each instruction by
    the chain rule in the forward direction — not the reverse sweep the student writes."""
    n = n_inputs(program)
    vals: list[float] = []
    tans: list[np.ndarray] = []
    for k, instr in enumerate(program):
        op, *a = instr
        if op == "leaf":
            vals.append(float(point[k]))
            tans.append(np.eye(n)[k])
            continue
        out = _apply(op, a, vals)
        local = _local(instr, vals, out, None)
        tan = np.zeros(n)
        for p, d in zip(_parents(instr), local, strict=True):
            tan = tan + d * tans[p]
        vals.append(out)
        tans.append(tan)
    return vals[-1], [float(t) for t in tans[-1]]


# --- the points, drawn here from the program (never sent to the student's process) ---------


def _safe(program, values, margin: float) -> bool:
    for instr, out in zip(program, values, strict=True):
        op, *a = instr
        if isinstance(out, complex) or not math.isfinite(out) or abs(out) > 1e3:
            return False
        if op == "log" and values[a[0]] < margin:
            return False
        if op == "/" and abs(values[a[1]]) < margin:
            return False
        if op == "n/" and abs(values[a[1]]) < margin:
            return False
        if op == "**" and abs(values[a[0]]) < margin:
            return False
        if op == "**" and float(a[1]) != int(float(a[1])) and values[a[0]] <= 0:
            return False
    return True


def _search(program, rng) -> list[tuple[float, ...]] | None:
    """Three points near the program's example point (its leaves' numbers), drawn by
    ``rng``, where every log, division and power is well away from its pole; None if 400
    draws (the spread halved every 100) do not find them."""
    base = [float(a[0]) for op, *a in program if op == "leaf"]
    found: list[tuple[float, ...]] = []
    spread = 0.05
    for attempt in range(400):
        if attempt and attempt % 100 == 0:
            spread /= 2
        point = tuple(round(b + float(rng.uniform(-spread, spread)), 6) for b in base)
        try:
            values = forward_values(program, point)
        except (ArithmeticError, ValueError, TypeError):  # TypeError: a complex into math
            continue
        if _safe(program, values, 0.1) and all(
            math.isfinite(g) for g in reference_gradient(program, point)[1]
        ):
            found.append(point)
        if len(found) == N_POINTS:
            return found
    return None


#: Salted searches tried before the unsalted points (see :func:`points`).
SALTED_SEARCHES = 8


def _salted_seed(program, source: str, k: int) -> int:
    text = f"{list(program)!r}\0{k}\0".encode() + source.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(text).digest()[:16], "big")


def points(program, source: str | None = None) -> list[tuple[float, ...]]:
    """The three points grad_f is evaluated at (:func:`_search`): drawn from a hash of the
    program and the student's ``source`` (see the module docstring), or, with ``source``
    None, of the program alone (the points :func:`_sound` requires a program to have)."""
    if source is not None:
        for k in range(SALTED_SEARCHES):
            found = _search(program, np.random.default_rng(_salted_seed(program, source, k)))
            if found:
                return found
        # Practically never reached for a program _sound accepted: the unsalted search,
        # from the same distribution, found its points, and each salted one draws up to 400
        # more. Should it happen, the unsalted points (which a student can compute) are the
        # fallback, rather than an error in the grader.
    found = _search(program, np.random.default_rng(zlib.crc32(repr(list(program)).encode()) + 75))
    if found is None:
        raise RuntimeError("7.5: no safe points near the program's example point")
    return found


def _reference(inputs) -> dict:
    """What does not depend on the student's source: the program and its size bound (the
    points and the values there come from :func:`_target`, once the source is known)."""
    (program,) = inputs
    return {
        "program": tuple(tuple(instr) for instr in program),
        "n": n_inputs(program),
        "bound": size_bound(program),
    }


@dataclass(frozen=True)
class _Target:
    """The points for one source, the reference's values and gradients there, and the
    absolute tolerance of the comparison (1e-9 of the largest derivative, at least 1e-9)."""

    points: tuple[tuple[float, ...], ...]
    values: tuple[float, ...]
    grads: tuple[tuple[float, ...], ...]
    tolerance: float


@functools.lru_cache(maxsize=64)  # a check's cases, each judged a few times
def _target(program: tuple, source: str | None) -> _Target:
    """The points for ``source`` (:func:`points`) and the reference there: the one place the
    judge functions (:func:`_compare`, :func:`_describe`, the mistake detectors) get them."""
    pts = points(program, source)
    pairs = [reference_gradient(program, p) for p in pts]
    grads = tuple(tuple(g) for _, g in pairs)
    scale = max([1.0, *(abs(g) for gs in grads for g in gs)])
    return _Target(tuple(pts), tuple(v for v, _ in pairs), grads, 1e-9 * scale)


# --- the student's source, checked and run here ----------------------------------------------


@dataclass(frozen=True)
class Evaluation:
    """What the grader found in a source: ``kind`` is "" when it ran at every point, else
    one of "missing", "syntax", "shape", "loop", "branch", "call", "name", "size", "run",
    "return" (``problem`` says it in words)."""

    kind: str = ""
    problem: str = ""
    size: int = 0
    values: tuple = ()
    grads: tuple = ()

    @property
    def ran(self) -> bool:
        return not self.kind


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)  # fmt: skip
_BRANCHES = (ast.If, ast.IfExp, ast.Try, ast.With, ast.AsyncWith, ast.Match, ast.Lambda,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.BoolOp, ast.Compare,
             ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr,
             ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.Raise, ast.Assert,
             ast.Delete)  # fmt: skip
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


class _Refused(Exception):
    def __init__(self, kind: str, problem: str) -> None:
        super().__init__(problem)
        self.kind, self.problem = kind, problem


def _line(node: ast.AST) -> str:
    return f"line {getattr(node, 'lineno', '?')}"


class _Checker:
    """Walks grad_f's body in order: what is allowed, what each name refers to, the size."""

    def __init__(self, params: list[str]) -> None:
        if "math" in params:
            raise _Refused("shape", "a parameter of grad_f is named `math`, which it needs")
        self.defined = set(params)
        self.size = 0

    def statement(self, node: ast.stmt, last: bool) -> None:
        if isinstance(node, _LOOPS):
            raise _Refused("loop", f"a `{type(node).__name__.lower()}` loop at {_line(node)}")
        if isinstance(node, _BRANCHES):
            what = type(node).__name__
            raise _Refused("branch", f"a `{what}` statement at {_line(node)}")
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                return  # a docstring
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Return):
            if not last or node.value is None:
                raise _Refused("shape", "grad_f must end with one `return value, (dx0, …)`")
            self.expression(node.value, tuples=2)
            return
        if last:
            raise _Refused("shape", "grad_f must end with `return value, (dx0, …)`")
        if isinstance(node, ast.Assign):
            self.expression(node.value)
            for target in node.targets:
                self._targets(target)
            return
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if not isinstance(node.op, _OPERATORS):
                raise _Refused("call", f"the operator at {_line(node)} is not + - * / **")
            self.expression(node.value)
            self._read(node.target)
            self.size += 1
            return
        raise _Refused("branch", f"a `{type(node).__name__}` statement at {_line(node)}")

    def _targets(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if target.id == "math":
                raise _Refused("call", f"an assignment to `math` at {_line(target)}")
            self.defined.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.elts:
                self._targets(item)
        else:
            raise _Refused("call", f"an assignment to {ast.unparse(target)!r} at {_line(target)}")

    def _read(self, node: ast.Name) -> None:
        if node.id not in self.defined:
            raise _Refused(
                "name", f"grad_f reads `{node.id}` ({_line(node)}), which it never assigned"
            )

    def expression(self, node: ast.expr, tuples: int = 0) -> None:
        """Check an expression; ``tuples``: how deep tuples may nest here (the return's)."""
        if isinstance(node, _LOOPS):
            raise _Refused("loop", f"a comprehension at {_line(node)}")
        if isinstance(node, _BRANCHES):
            what = type(node).__name__
            raise _Refused("branch", f"a `{what}` expression at {_line(node)}")
        if isinstance(node, (ast.Tuple, ast.List)) and tuples:
            for item in node.elts:
                self.expression(item, tuples=tuples - 1)
            return
        if isinstance(node, ast.Name):
            if node.id == "math":
                raise _Refused("call", f"`math` used as a value at {_line(node)}")
            self._read(node)
            return
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _Refused("call", f"the constant {value!r} at {_line(node)} is not a number")
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
            self.size += 1
            self.expression(node.left)
            self.expression(node.right)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self.size += isinstance(node.op, ast.USub)
            self.expression(node.operand)
            return
        if isinstance(node, ast.Call):
            func = node.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "math"
                and func.attr in MATH_FUNCTIONS
                and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)
            ):
                called = ast.unparse(func)
                raise _Refused("call", f"a call of `{called}` at {_line(node)}")
            self.size += 1
            for arg in node.args:
                self.expression(arg)
            return
        if isinstance(node, ast.Attribute):
            raise _Refused("call", f"the attribute `{ast.unparse(node)}` at {_line(node)}")
        what = type(node).__name__
        raise _Refused("branch", f"a `{what}` expression at {_line(node)}")


def _floats(fn: ast.FunctionDef) -> None:
    """Every integer constant made a float, in place (so ``10 ** 10 ** 9`` overflows at
    once instead of computing an integer for hours); :func:`ast.walk` does not recurse."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            node.value = float(node.value)


def _function(tree: ast.Module, n: int) -> ast.FunctionDef:
    body = [
        s
        for s in tree.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        and not (
            isinstance(s, ast.Import) and [(a.name, a.asname) for a in s.names] == [("math", None)]
        )
    ]
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef) or body[0].name != "grad_f":
        raise _Refused("shape", "the source must define one function, `def grad_f(...)`, only")
    fn = body[0]
    args = fn.args
    params = [a.arg for a in (*args.posonlyargs, *args.args)]
    extras = args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.kw_defaults
    if extras or fn.decorator_list or fn.returns or getattr(fn, "type_params", None):
        raise _Refused("shape", "grad_f takes plain parameters only (no defaults, *args, "
                       "decorators or annotations)")  # fmt: skip
    if any(a.annotation for a in (*args.posonlyargs, *args.args)):
        raise _Refused("shape", "grad_f's parameters take no annotations")
    if len(params) != n:
        raise _Refused("shape", f"grad_f takes {len(params)} parameters; f has {n} inputs")
    if not fn.body or not isinstance(fn.body[-1], ast.Return):
        raise _Refused("shape", "grad_f must end with `return value, (dx0, …)`")
    return fn


def _size(fn: ast.FunctionDef) -> int:
    """The operations in grad_f: ``+ - * / **``, unary minus, calls, ``+=``-like statements
    (:func:`ast.walk` visits the tree without recursion)."""
    return sum(
        isinstance(node, (ast.BinOp, ast.Call, ast.AugAssign))
        or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub))
        for node in ast.walk(fn)
    )


def _plain_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@functools.lru_cache(maxsize=64)  # a check's cases, each judged a few times
def evaluate(source: str | None, n: int, pts: tuple, bound: int) -> Evaluation:
    """Check ``source`` and run its grad_f at ``pts`` (see the module docstring)."""
    if source is None or len(source) > 200 * bound + 4000:
        return Evaluation("size", f"the source is too long for a program of this size (the "
                          f"bound is {bound} operations)")  # fmt: skip
    try:
        tree = ast.parse(source)
        fn = _function(tree, n)
        size = _size(fn)  # first, and without recursion: a swollen expression is too big
        if size > bound:
            message = f"grad_f has {size} operations, over the bound of {bound}"
            return Evaluation("size", message, size)
        checker = _Checker([a.arg for a in (*fn.args.posonlyargs, *fn.args.args)])
        for k, statement in enumerate(fn.body):
            checker.statement(statement, last=k == len(fn.body) - 1)
    except _Refused as refused:
        return Evaluation(refused.kind, refused.problem)
    except (RecursionError, MemoryError):
        return Evaluation("size", "an expression of the source is nested too deeply to check "
                          "(write one operation per line)")  # fmt: skip
    except (SyntaxError, ValueError) as exc:
        return Evaluation("syntax", f"the source does not parse ({type(exc).__name__}: {exc})")
    if checker.size > bound:
        return Evaluation(
            "size", f"grad_f has {checker.size} operations, over the bound of {bound}",
            checker.size,
        )  # fmt: skip
    _floats(fn)
    namespace: dict = {"math": math, "__builtins__": {}}
    try:
        module = ast.Module(body=[fn], type_ignores=[])
        exec(compile(module, "<grad_f>", "exec"), namespace)  # noqa: S102 (checked above)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return Evaluation("syntax", f"the source does not compile ({type(exc).__name__})")
    grad_f = namespace["grad_f"]
    values, grads = [], []
    for point in pts:
        where = "at (" + ", ".join(f"{x:g}" for x in point) + ")"
        try:
            result = grad_f(*point)
        except Exception as exc:  # checked code: arithmetic, math's functions, names only
            message = f"grad_f failed {where}: {type(exc).__name__}: {str(exc)[:120]}"
            return Evaluation("run", message, checker.size)
        if (
            not isinstance(result, (tuple, list))
            or len(result) != 2
            or not isinstance(result[1], (tuple, list))
            or len(result[1]) != n
            or not all(_plain_number(x) for x in (result[0], *result[1]))
        ):
            return Evaluation(
                "return", f"grad_f returned {str(result)[:80]} {where}, not (value, "
                f"(dx0, …, dx{n - 1})) of real numbers", checker.size,
            )  # fmt: skip
        values.append(float(result[0]))
        grads.append([float(g) for g in result[1]])
    return Evaluation("", "", checker.size, tuple(values), tuple(map(tuple, grads)))


def _judged(got, exp) -> tuple[Evaluation, _Target | None]:
    """The source's evaluation at its own points, and the reference there (None when there
    is no source to evaluate)."""
    if not isinstance(got, dict) or "error" in got or "source" not in got:
        return Evaluation("missing", "no source"), None
    text = got["source"] if isinstance(got["source"], str) else None
    target = _target(exp["program"], text)
    return evaluate(text, int(exp["n"]), target.points, int(exp["bound"])), target


def _same(got_grads, exp_grads, target: _Target) -> bool:
    return close([list(g) for g in got_grads], exp_grads, rtol=1e-7, atol=target.tolerance)


def _right_values(ev: Evaluation, target: _Target | None) -> bool:
    return (
        target is not None
        and ev.ran
        and close(list(ev.values), target.values, rtol=1e-7, atol=target.tolerance)
    )


def _compare(got, exp) -> bool:
    ev, target = _judged(got, exp)
    return (
        _right_values(ev, target) and target is not None and _same(ev.grads, target.grads, target)
    )


def _describe(got, exp) -> str:
    ev, target = _judged(got, exp)
    if not ev.ran or target is None:
        return ev.problem
    tol = target.tolerance
    for point, v, g, ev_v, ev_g in zip(
        target.points, target.values, target.grads, ev.values, ev.grads, strict=True
    ):
        where = "at (" + ", ".join(f"{x:g}" for x in point) + ")"
        if not close(ev_v, v, rtol=1e-7, atol=tol):
            return f"{where} the value is {ev_v:.6g}, expected {v:.6g}"
        wrong = [k for k in range(len(g)) if not close(ev_g[k], g[k], rtol=1e-7, atol=tol)]
        if wrong:
            k = wrong[0]
            return (
                f"{where} the value is right; df/dx{k} is {ev_g[k]:.6g}, expected {g[k]:.6g} "
                f"({len(wrong)} of {len(g)} derivatives wrong)"
            )
    return "right at every point"


# --- the mistakes, recognised by simulating them ---------------------------------------------


def _simulated(how: dict):
    """A detector: the values are right and every gradient equals the reverse sweep with the
    mistake ``how`` (:func:`simulate`), which differs from the right one on this case."""

    def detect(got, exp, case) -> bool:
        ev, target = _judged(got, exp)
        if target is None or not _right_values(ev, target):
            return False
        (program,) = case.inputs
        sims = [simulate(program, p, **how) for p in target.points]
        if _same(sims, target.grads, target):
            return False  # the mistake changes nothing on this program
        return _same(ev.grads, sims, target)

    return detect


def _refused(*kinds: str):
    def detect(got, exp, case) -> bool:
        return _judged(got, exp)[0].kind in kinds

    return detect


def _wrong_values(got, exp, case) -> bool:
    ev, target = _judged(got, exp)
    return ev.ran and not _right_values(ev, target)


def _rule(name: str, hint: str) -> Mistake:
    return Mistake(hint, _simulated({"wrong": name}))


MISTAKES = (
    Mistake(
        "This exercise is graded on your own code: gradient_source must not be a library's "
        "function.",
        lambda got, exp, case: is_error(got, "LibraryCode"),
    ),
    Mistake(
        "Tracing f failed: your placeholder class lacks an operator f uses. With a number on "
        "the left (`2 + x`, `2 - x`, `2 * x`, `3 / x`) Python calls __radd__, __rsub__, "
        "__rmul__, __rtruediv__ with the number as the other operand; `x ** c` calls "
        "__pow__, `-x` __neg__. Define every one of them.",
        lambda got, exp, case: (
            is_error(got, "TypeError") and "unsupported operand" in got.get("message", "")
        ),
    ),
    Mistake(
        "Tracing f failed: f calls the methods .exp(), .log(), .sin(), .cos(), .tanh() of "
        "its inputs, so the objects you pass it (your placeholders, not floats) need each "
        "one, recording the operation.",
        lambda got, exp, case: (
            is_error(got, "AttributeError")
            and re.search(r"has no attribute '(exp|log|sin|cos|tanh)'", got.get("message", ""))
            is not None
        ),
    ),
    Mistake(
        "The source is not one function `def grad_f(x0, …, x{n-1}):` (n parameters, no "
        "defaults) ending in `return value, (dx0, …, dx{n-1})` with real numbers: the "
        "failing case says what the grader found.",
        _refused("syntax", "shape", "return"),
    ),
    Mistake(
        "The generated code is not straight-line: it has a loop, a comprehension, a branch "
        "or a function of its own. Write one statement per recorded operation instead — the "
        "code must not replay a tape.",
        _refused("loop", "branch"),
    ),
    Mistake(
        "The generated code calls something other than math's functions, or reads an "
        "attribute: it runs where only `math` exists, so a library, your tracer's objects or "
        "a helper of yours are not there. Emit arithmetic and math.exp, math.log, … only.",
        _refused("call"),
    ),
    Mistake(
        "The generated code reads a name it never assigns: grad_f runs in a namespace that "
        "holds only `math` (no builtins, none of your objects, no tape), so every variable it "
        "uses must be a parameter or assigned earlier in grad_f, in order.",
        _refused("name"),
    ),
    Mistake(
        "The generated code is too big: its size must be linear in the program — at most 10 "
        "operations (+ - * / **, unary minus, math calls, += and -=) per operation of f, 2 "
        "per input, 10 more. Name every intermediate result once and refer to it; an "
        "expression written out as a tree doubles at every reuse, and code repeated once per "
        "input is forward mode, not one reverse sweep.",
        _refused("size"),
    ),
    Mistake(
        "The values are wrong, not only the gradient: check the forward part of grad_f first "
        "(each recorded operation once, in the order f performed it, constants included, "
        "and `c - x`, `c / x` with the number first).",
        _wrong_values,
    ),
    Mistake(
        "A node used more than once gets only one share of its adjoint: accumulate (`dv3 += "
        "…`, every adjoint starting at 0.0), do not assign, when a node feeds several "
        "operations (or the same one twice, as in x * x).",
        _simulated({"accumulate": False}),
    ),
    Mistake(
        "The adjoint statements come in forward order: an operation passes its adjoint on "
        "before the operations that use its result have added theirs. Emit them for the "
        "recorded operations in reverse, from the output back to the inputs.",
        _simulated({"order": "forward"}),
    ),
    Mistake(
        "A forgotten chain-rule factor: each adjoint statement multiplies the local "
        "derivative by the adjoint of the operation's output.",
        _simulated({"incoming": False}),
    ),
    Mistake(
        "The second operand of `a op b` (two recorded values) gets no adjoint: both operands "
        "of + - * / receive their share.",
        _simulated({"second_operand": False}),
    ),
    _rule(
        "log divides by the output",
        "d log(x)/dx is 1/x: divide by the input x, not by the output log(x).",
    ),  # fmt: skip
    _rule("cos without the minus", "d cos(x)/dx is -sin(x) (mind the minus)."),
    _rule("sin gives minus cos", "d sin(x)/dx is cos(x), without a minus."),
    _rule(
        "tanh uses x",
        "tanh's local derivative is 1 - t² with t = tanh(x), the output (not 1 - x²).",
    ),  # fmt: skip
    _rule("exp uses x", "exp's local derivative is e**x, the output itself."),
    _rule(
        "** drops the factor", "The power rule multiplies by the exponent: d(x**c)/dx = c·x**(c-1)."
    ),  # fmt: skip
    _rule(
        "/ denominator sign",
        "The gradient for the denominator of a / b is -a / b² (mind the minus sign).",
    ),  # fmt: skip
    _rule(
        "c * x without c",
        "`c * x` with a number c on the left: x's adjoint gets c times "
        "the output's adjoint (the constant is not dropped).",
    ),  # fmt: skip
    _rule(
        "x * c without c",
        "`x * c` with a number c on the right: x's adjoint gets c times "
        "the output's adjoint (the constant is not dropped).",
    ),  # fmt: skip
    _rule(
        "c - x without the minus",
        "`c - x` with a number c on the left: x's adjoint gets minus the output's adjoint.",
    ),  # fmt: skip
    _rule(
        "c / x as x / c",
        "`c / x` with a number c on the left is not `x / c`: its derivative is -c / x².",
    ),  # fmt: skip
)


# --- the programs ---------------------------------------------------------------------------


def _leaf(rng) -> float:
    return round(float(rng.choice([-1.0, 1.0])) * draw(rng, 0.4, 1.5), 4)


def _safe_at_base(program, instr) -> bool:
    try:
        values = forward_values([*program, instr], [a[0] for op, *a in program if op == "leaf"])
    except (ArithmeticError, ValueError):
        return False
    if isinstance(values[-1], complex) or abs(values[-1]) > 20:
        return False
    op, *a = instr
    if op == "exp" and values[a[0]] > 2.5:
        return False
    return _safe(program + [instr], values, 0.3)


_OPS = ("+", "-", "*", "/", "+n", "-n", "*n", "/n", "n+", "n-", "n*", "n/", "**",
        "neg", "exp", "log", "sin", "cos", "tanh")  # fmt: skip
_POWERS = (2.0, 3.0, -1.0, 0.5, 1.5, -0.5)


def _instruction(rng, op: str, i: int, j: int) -> tuple:
    if op in _BINARY:
        return (op, i, j)
    if op in ("+n", "-n", "*n", "/n"):
        return (op, i, _constant(rng))
    if op in ("n+", "n-", "n*", "n/"):
        return (op, _constant(rng), i)
    if op == "**":
        return (op, i, float(rng.choice(_POWERS)))
    return (op, i)


def random_program(rng, n: int, n_ops: int) -> list:
    """A random DAG: mostly extends the newest node (depth), often reuses a recent or an
    old one (fan-out); every input used; the sinks summed into the root."""
    program: list = [("leaf", _leaf(rng)) for _ in range(n)]
    unused = list(range(n))
    while len(program) < n + n_ops:
        k = len(program)
        i = k - 1 if rng.random() < 0.85 or k == n else int(rng.integers(0, k))
        if unused:
            j = unused[0]
        else:
            j = (
                int(rng.integers(max(0, k - 8), k))
                if rng.random() < 0.7
                else int(rng.integers(0, k))
            )
        op = str(rng.choice(_OPS))
        instr = _instruction(rng, op, i, j)
        if not _safe_at_base(program, instr):
            instr = ("sin", i) if rng.random() < 0.5 else ("tanh", i)  # always safe
        program.append(instr)
        for p in _parents(instr):
            if p in unused:
                unused.remove(p)
    return _with_root(program)


def swell_chain(rng, steps: int = 22) -> list:
    """y ← sin(c·y)·y + d·x_j, ``steps`` times, with y = x0 at first and j = 1 … 5 in turn:
    y is used twice per step, so the expression tree of the output doubles at every step
    (about 2**steps nodes), while the program has 5 operations per step; six inputs, so code
    written out once per input (finite differences, forward mode) does not fit either."""
    program: list = [("leaf", _leaf(rng)) for _ in range(SWELL_INPUTS)]
    y = 0
    for step in range(steps):
        c, d = round(draw(rng, 0.3, 1.2), 4), round(draw(rng, 0.2, 0.6), 4)
        a, x = len(program), 1 + step % (SWELL_INPUTS - 1)
        program += [("*n", y, c), ("sin", a), ("*", a + 1, y), ("n*", d, x), ("+", a + 2, a + 3)]
        y = a + 4
    return program


def _families(rng) -> list[tuple[str, list]]:
    """Small programs, one family of operations each, every piece scaled by its own number."""
    x, y, p = _leaf(rng), _leaf(rng), draw(rng, 0.5, 1.5)
    groups: dict[str, list[tuple]] = {
        "x + y, x - y, -x": [("+", 0, 1), ("-", 0, 1), ("neg", 0)],
        "x * y, x / y, x * x": [("*", 0, 1), ("/", 0, 1), ("*", 0, 0)],
        "x ** 2, x ** 3, y ** -1, p ** 0.5, p ** 1.5": [
            ("**", 0, 2.0), ("**", 0, 3.0), ("**", 1, -1.0), ("**", 2, 0.5), ("**", 2, 1.5)
        ],
        "exp(x) and log(p)": [("exp", 0), ("log", 2)],
        "sin(x) and cos(y)": [("sin", 0), ("cos", 1)],
        "tanh(x) and tanh(y)": [("tanh", 0), ("tanh", 1)],
        "numbers on the right: x + c, x - c, x * c, y / c": [
            ("+n", 0, _constant(rng)), ("-n", 0, _constant(rng)), ("*n", 0, _constant(rng)),
            ("/n", 1, _constant(rng)),
        ],
        "numbers on the left: c + x, c - x, c * x, c / y": [
            ("n+", _constant(rng), 0), ("n-", _constant(rng), 0), ("n*", _constant(rng), 0),
            ("n/", _constant(rng), 1),
        ],
    }  # fmt: skip
    out = []
    for name, pieces in groups.items():
        program: list = [("leaf", x), ("leaf", y), ("leaf", p)]
        for piece in pieces:
            program.append(piece)
            program.append(("*n", len(program) - 1, _constant(rng)))  # a factor above it
        out.append((name, _with_root(program)))
    return out


def _top_and_deep(rng) -> list:
    """x0 used by the output directly and again at the bottom of a chain of 6 operations;
    x1 likewise: the output's parents include the inputs (forward order shows)."""
    program: list = [("leaf", _leaf(rng)), ("leaf", _leaf(rng))]
    program += [("*", 0, 1), ("sin", 2), ("*n", 3, _constant(rng)), ("tanh", 4),
                ("exp", 5), ("*", 6, 0), ("+", 7, 1)]  # fmt: skip
    return program


def _gradient_scale(program) -> float:
    pt = [a[0] for op, *a in program if op == "leaf"]
    return max(abs(g) for g in reference_gradient(program, pt)[1])


def _sound(program, min_depth: int = 0) -> bool:
    """Deep enough, every point safe, and a gradient of a gradable size (not ~0, not huge)."""
    try:
        points(program)
        scale = _gradient_scale(program)
    except (RuntimeError, ArithmeticError, ValueError):
        return False
    return depth(program) >= min_depth and 1e-2 <= scale <= 1e4


def _drawn(rng, make, min_depth: int = 0) -> list:
    for _ in range(200):
        program = make(rng)
        if _sound(program, min_depth):
            return program
    raise RuntimeError("7.5: no sound program drawn in 200 tries")


def _cases(rng) -> list[Case]:
    cases = [Case(f"ops: {name}", (program,)) for name, program in _families(rng)]
    x = _leaf(rng)
    cases.append(Case("fan-out: x * x + x", ([("leaf", x), ("*", 0, 0), ("+", 1, 0)],)))
    cases.append(Case("inputs used by the output and deep down", (_drawn(rng, _top_and_deep),)))
    unused: list = [("leaf", _leaf(rng)), ("leaf", _leaf(rng)), ("leaf", draw(rng, 0.5, 1.5))]
    unused += [("*", 0, 2), ("log", 2), ("*", 3, 4), ("n-", _constant(rng), 5)]
    cases.append(Case("x1 is never used (its derivative is 0)", (unused,)))
    for k, (n, n_ops) in enumerate([(5, 40), (6, 60), (8, 90)]):
        program = _drawn(rng, lambda r, n=n, n_ops=n_ops: random_program(r, n, n_ops), MIN_DEPTH)
        name = (
            f"random DAG {k + 1}: {n} inputs, {len(program) - n} operations, depth {depth(program)}"
        )
        cases.append(Case(name, (program,), points=3.0))
    program = _drawn(rng, swell_chain)
    steps = (len(program) - SWELL_INPUTS) // 5
    name = f"a chain whose expression tree doubles at each of {steps} steps"
    cases.append(Case(name, (program,), points=2.0))
    program = _drawn(rng, lambda r: random_program(r, 16, 48), MIN_DEPTH)
    cases.append(Case(f"16 inputs, {len(program) - 16} operations", (program,), points=2.0))
    return cases


SOURCE = Exercise(
    id="7.5",
    title="From a trace to a derivative program: source transformation",
    level="hard",
    minutes=90,
    task="write gradient_source (see the task above)",
    answer="gradient_source",
    cases=_cases,
    run=source_run,
    reference=_reference,
    compare=_compare,
    describe=_describe,
    own_code=True,
    mistakes=MISTAKES,
    nudges=(
        "Find the first failing case: the `ops:` cases test one family of operations each, "
        "and the message names the first derivative that is wrong.",
        "Print the source your gradient_source writes for a two-line f and read it as code: "
        "one forward statement per recorded operation, then the adjoints from the output back.",
    ),
    reveal="Trace: call f on n placeholder objects whose operators and methods append "
    "(op, parents, constant) to a shared list and return a placeholder naming the new entry. "
    "Emit: `def grad_f(x0, …):`, one `vK = …` line per entry in order; `dK = 0.0` for every "
    "entry, `d<out> = 1.0`; then for the entries in reverse, for each parent p, "
    "`dp += dK * <local derivative written with the v names>`; "
    "`return v<out>, (d0, …, d{n-1})`.",
)


EXERCISES: list[Exercise] = [SOURCE]
