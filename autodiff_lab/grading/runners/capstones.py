"""What the student's process runs for the capstone exercises (build it yourself).

A capstone case is a *program*: a list of plain-data instructions the grader drew at
random. The runner executes it on the student's own class or functions and hands back
plain data (values, gradients). Nothing here knows a right result: references, the
simulated wrong implementations behind the hints, and every verdict live in the grader
(:mod:`autodiff_lab.grading.exercises.ch03_value` and friends).

Before running anything, :func:`provenance_problem` checks that the answer was written by
the student: a class from a library (``autodiff_lab``, ``micrograd``, ``torch``, ``jax``,
``tinygrad``), one that subclasses such a class, borrows its methods or wraps its
objects does not score on a build-it-yourself exercise. (This check runs in the
student's process: it stops copying, not someone who rewrites the grader's runner.)
It is the practice ``check`` in a student's kernel that needs it: there the library is
loaded. The batch grader computes these capstones' answers where the library cannot be
imported or read at all (``own_code=True``, :mod:`autodiff_lab.grading.own_code`), so
there these checks find nothing; the guarantee is that one.

Program instructions for :func:`value_run` (``i``, ``j`` index earlier instructions,
``c`` is a plain number)::

    ("leaf", c)                       MyValue(c)
    ("+", i, j) ("-", i, j) ("*", i, j) ("/", i, j)      node op node
    ("+n", i, c) ("-n", i, c) ("*n", i, c) ("/n", i, c)  node op number
    ("n+", c, i) ("n-", c, i) ("n*", c, i) ("n/", c, i)  number op node (reflected)
    ("**", i, c)                      node ** number
    ("neg", i) ("tanh", i) ("exp", i) ("relu", i)
    ("log", i) ("sin", i) ("cos", i)  (7.5's programs; 3.6's never use them)

The last instruction is the root. In mode "second" the root's gradient is recorded
(``backward(create_graph=True)``) and the gradient of the first leaf is differentiated
again: :func:`second_derivatives`, one definition for the runner and the reference.
"""

from __future__ import annotations

import ast
import dis
import operator
import os
import sys
import types

import numpy as np

from .common import as_array, error_result, number

LIBRARY_PACKAGES = ("autodiff_lab", "micrograd", "torch", "jax", "tinygrad")

_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_UNARY_METHODS = ("tanh", "exp", "relu", "log", "sin", "cos")  # the last three: 7.5


def _from_library(obj) -> str | None:
    """The library package ``obj`` (a class, function or object) comes from, or None."""
    module = getattr(obj, "__module__", None) or ""
    top = module.split(".")[0]
    if top in LIBRARY_PACKAGES:
        return top
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):  # a function copied out of an imported library
        filename = os.path.realpath(code.co_filename)
        for package in LIBRARY_PACKAGES:
            module_file = getattr(sys.modules.get(package), "__file__", None)
            if module_file:
                folder = os.path.dirname(os.path.realpath(module_file))
                if filename.startswith(folder + os.sep):
                    return package
    return None


def provenance_problem(answer, what: str) -> str | None:
    """Why ``answer`` (a class or function) is not the student's own work, or None.

    ``what`` names it in the message (e.g. "MyValue").
    """
    if isinstance(answer, type):
        for cls in answer.__mro__[:-1]:  # everything but object
            package = _from_library(cls)
            if package:
                how = "is" if cls is answer else f"subclasses {cls.__module__}.{cls.__name__}:"
                return f"{what} {how} {package}'s class; this exercise needs your own"
        for name, attr in vars(answer).items():
            fn = getattr(attr, "__func__", attr)
            package = _from_library(fn)
            if package and callable(fn):
                return f"{what}.{name} is {package}'s function; this exercise needs your own"
        return None
    fn = getattr(answer, "__func__", answer)
    package = _from_library(fn)
    if package is None and not isinstance(fn, types.FunctionType):
        package = _from_library(type(fn))  # a callable object: judge its class
    if package:
        return f"{what} comes from {package}; this exercise needs your own"
    return None


def wrapped_library_object(obj) -> str | None:
    """The library package of an object ``obj`` holds in its attributes (one level), or None."""
    try:
        attrs = list(vars(obj).values())
    except TypeError:
        attrs = [getattr(obj, s, None) for s in getattr(type(obj), "__slots__", ())]
    for attr in attrs:
        items = attr if isinstance(attr, (list, tuple, set, frozenset)) else (attr,)
        for item in items:
            if isinstance(item, (int, float, str, bool)) or item is None:
                continue
            package = _from_library(type(item))
            if package:
                return package
    return None


def library_error(message: str) -> dict:
    """The plain-data answer of a submission that reuses a library."""
    return {"error": "LibraryCode", "message": message}


# --- 3.6: your own Value -------------------------------------------------------------------


def build_program(cls, program):
    """Execute ``program`` with leaves of class ``cls``; return (nodes, leaf indices)."""
    nodes = []
    for k in range(len(program)):
        nodes.append(_build_step(cls, program, nodes, k))
    return nodes, [k for k, (op, *_) in enumerate(program) if op == "leaf"]


SECOND = "backward(create_graph=True)"  # the step of mode "second", as error records name it


def second_derivatives(nodes, leaves) -> list[float] | str:
    """After ``root.backward(create_graph=True)``: d(d root / d leaf_0) / d leaf_j for every
    leaf j (a row of the Hessian), by ``backward()`` on the first leaf's gradient after
    ``root.zero_grad()`` (which must reset every node of the root's graph, the ones an op
    made inside itself too, e.g. ``b ** -1`` in ``a / b``). A message (str) when that
    gradient is not a node, or when zero_grad() left a program node's .grad not 0."""
    first = nodes[leaves[0]].grad
    if not callable(getattr(first, "backward", None)):
        return (
            f"after {SECOND} the first leaf's .grad is a {type(first).__name__}, not a "
            "node: the gradient was not recorded"
        )
    nodes[-1].zero_grad()
    if any(number(node.grad) != 0 for node in nodes):
        return "zero_grad() left some .grad not 0, so the second backward() cannot be read"
    first.backward()
    return [number(nodes[k].grad) for k in leaves]


def value_run(answer, inputs):
    """Run one program on the student's class: values of every node and leaf gradients.

    ``inputs = (program, mode)``; mode "backward" runs ``root.backward()`` once,
    "zero_grad" runs backward, ``root.zero_grad()``, then backward again, "second" runs
    ``root.backward(create_graph=True)`` and then :func:`second_derivatives`.
    Returns ``{"values": [...], "grads": [...]}`` (in "zero_grad" mode also
    ``"after_zero_grad"``: every node's ``.grad`` right after ``zero_grad()``; in "second"
    mode also ``"second"``, or ``"second": None`` and ``"second_error"``) or an error
    record naming the instruction or step that failed (``"at"``).
    """
    program, mode = inputs
    problem = provenance_problem(answer, "MyValue")
    if problem:
        return library_error(problem)
    for name, attr in vars(answer).items():
        used = library_globals(attr) if callable(getattr(attr, "__func__", attr)) else None
        if used:
            return library_error(f"MyValue.{name} uses {used}; this exercise needs your own")
    nodes = []
    for k in range(len(program)):  # build one instruction at a time to name a failing one
        try:
            built = _build_step(answer, program, nodes, k)
        except (TypeError, AttributeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            return {**error_result(exc), "at": str(program[k][0])}
        nodes.append(built)
    leaves = [k for k, (op, *_) in enumerate(program) if op == "leaf"]
    for node in nodes:
        package = wrapped_library_object(node)
        if package:
            return library_error(f"MyValue objects hold {package}'s objects; build your own")
    root = nodes[-1]
    steps = {"zero_grad": ["backward", "zero_grad", "backward"], "second": [SECOND]}
    after_zero_grad = None
    for step in steps.get(mode, ["backward"]):
        try:
            if step == SECOND:
                root.backward(create_graph=True)
            else:
                getattr(root, step)()
            if step == "zero_grad":
                after_zero_grad = [number(node.grad) for node in nodes]
        except RecursionError as exc:
            return error_result(exc)
        except (TypeError, AttributeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            return {**error_result(exc), "at": step}
    result: dict = {
        "values": [number(node.data) for node in nodes],
        "grads": [number(nodes[k].grad) for k in leaves],
    }
    if after_zero_grad is not None:
        result["after_zero_grad"] = after_zero_grad
    if mode == "second":
        try:
            second = second_derivatives(nodes, leaves)
        except RecursionError as exc:
            return error_result(exc)
        except (TypeError, AttributeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            second = f"the second backward() failed: {type(exc).__name__}: {exc}"[:300]
        if isinstance(second, str):
            result.update(second=None, second_error=second)
        else:
            result["second"] = second
    return result


def _build_step(cls, program, nodes, k):
    """Instruction ``k`` of ``program`` on the nodes built so far."""
    op, *args = program[k]
    if op == "leaf":
        return cls(float(args[0]))
    if op in _BINARY:
        return _BINARY[op](nodes[args[0]], nodes[args[1]])
    if op.endswith("n") and op[:-1] in _BINARY:
        return _BINARY[op[:-1]](nodes[args[0]], float(args[1]))
    if op.startswith("n") and op[1:] in _BINARY:
        return _BINARY[op[1:]](float(args[0]), nodes[args[1]])
    if op == "**":
        return nodes[args[0]] ** float(args[1])
    if op == "neg":
        return -nodes[args[0]]
    if op in _UNARY_METHODS:
        return getattr(nodes[args[0]], op)()
    raise ValueError(f"unknown instruction {op!r}")


# --- 4.6: tensor backward rules ------------------------------------------------------------

RULES = ("sum", "mean", "max", "reshape", "transpose", "getitem")


def library_globals(fn) -> str | None:
    """A library module, class or function that ``fn``'s code names as a global, or None.

    Looks through nested functions too, so a rule that calls ``autodiff_lab``'s own
    ``Tensor`` (or ``torch``) to get its gradient is found.
    """
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    namespace = getattr(fn, "__globals__", {})
    codes = [code] if isinstance(code, types.CodeType) else []
    while codes:
        current = codes.pop()
        for name in current.co_names:
            obj = namespace.get(name)
            if obj is None:
                continue
            top = (
                getattr(obj, "__name__", "").split(".")[0]
                if isinstance(obj, types.ModuleType)
                else None
            )
            if top in LIBRARY_PACKAGES:
                return f"{name} ({top})"
            if not isinstance(obj, types.ModuleType) and _from_library(obj):
                return f"{name} ({_from_library(obj)})"
        codes += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return None


def _index(spec):
    """An index from plain data: a list of ints, or a tuple of such lists (one per axis)."""
    if isinstance(spec, tuple):
        return tuple(np.asarray(s, dtype=np.intp) for s in spec)
    return np.asarray(spec, dtype=np.intp)


def rules_run(answer, inputs):
    """``getattr(answer, op)(x, g, *params)``: the gradient for x, as a float array."""
    op, x, g, params = inputs
    problem = provenance_problem(answer, "BackwardRules")
    if problem:
        return library_error(problem)
    method = getattr(answer, op, None)
    if method is None:
        return {"error": "AttributeError", "message": f"BackwardRules has no {op}", "at": op}
    used = library_globals(method)
    if used:
        return library_error(f"BackwardRules.{op} uses {used}; this exercise needs your own")
    x, g = np.array(x, dtype=np.float64), np.array(g, dtype=np.float64)
    if op == "getitem":
        params = (_index(params[0]),)
    try:
        grad = method(x, g, *params)
    except (ValueError, IndexError, TypeError) as exc:
        return {**error_result(exc), "at": op}
    return as_array(grad)


# --- 5.6: an MLP and its training loop, graded on the training -----------------------------

READY_MADE = ("autodiff_lab.nn", "autodiff_lab.optim", "autodiff_lab.training", "torch", "jax",
              "sklearn", "micrograd", "tinygrad", "keras", "tensorflow")  # fmt: skip


def _ready_made(obj, banned_modules=READY_MADE) -> str | None:
    """The banned module ``obj`` (a module, class or function) comes from, or None."""
    if isinstance(obj, types.ModuleType):
        module = obj.__name__
    else:
        module = getattr(obj, "__module__", None) or ""
    return _ready_made_name(module, banned_modules)


def ready_made_parts(fn, limit: int = 200, banned_modules=READY_MADE) -> str | None:
    """A global that ``fn`` (or the student's functions and classes it uses) takes from a
    ready-made model or optimizer library, as ``"name (module)"``; None when all is home-made.

    Follows the student's own functions and classes (those defined in ``fn``'s namespace)
    through their code, up to ``limit`` of them.
    """
    namespace = getattr(getattr(fn, "__func__", fn), "__globals__", {})
    todo: list = [fn]
    seen: set[int] = set()
    while todo and len(seen) < limit:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, type):
            todo += [getattr(a, "__func__", a) for a in vars(current).values() if callable(a)]
            todo += [b for b in current.__bases__ if b is not object]
            continue
        code = getattr(getattr(current, "__func__", current), "__code__", None)
        codes = [code] if isinstance(code, types.CodeType) else []
        while codes:
            c = codes.pop()
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
            imported = _imports_in(c, banned_modules)
            if imported:
                return imported
            for name in c.co_names:
                obj = namespace.get(name)
                if obj is None:
                    continue
                banned = _ready_made(obj, banned_modules)
                if banned:
                    return f"{name} ({banned})"
                home = getattr(obj, "__module__", None) == namespace.get("__name__")
                if home and (isinstance(obj, type) or isinstance(obj, types.FunctionType)):
                    todo.append(obj)
    return None


def _imports_in(code: types.CodeType, banned_modules=READY_MADE) -> str | None:
    """A ready-made module an ``import`` inside ``code`` brings in, as "import name"."""
    module = None
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            module = str(ins.argval)
            found = _ready_made_name(module, banned_modules)
        elif ins.opname == "IMPORT_FROM" and module is not None:
            found = _ready_made_name(f"{module}.{ins.argval}", banned_modules)
        else:
            continue
        if found:
            return f"an import of {found}"
    return None


def _ready_made_name(module: str, banned_modules=READY_MADE) -> str | None:
    for banned in banned_modules:
        if module == banned or module.startswith(banned + "."):
            return banned
    return None


_trained: dict = {}  # (id(answer), training inputs) -> (answer, (losses, weights))


def mlp_forward(weights, x):
    """The grader's forward pass: ``x @ W + b`` per layer, tanh between layers."""
    for k, (w, b) in enumerate(weights):
        x = x @ w + b
        if k < len(weights) - 1:
            x = np.tanh(x)
    return x


def train_run(answer, inputs):
    """``answer(weights, X, y, lr, steps)`` (once per training): its losses, its final
    weights, or — the accuracy case — the labels the grader's forward pass gives the held-out
    points with those weights."""
    what, weights, X, y, lr, steps, *rest = inputs
    if isinstance(answer, type) or not callable(answer):
        return {"error": "TypeError", "message": "train_mlp must be a function"}
    problem = provenance_problem(answer, "train_mlp")
    used = problem or ready_made_parts(answer)
    if used:
        return library_error(problem or f"train_mlp uses {used}; build the model yourself")
    key = (id(answer), repr((weights, X.tobytes(), y.tobytes(), lr, steps)))
    if key not in _trained or _trained[key][0] is not answer:
        start = [(np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)) for w, b in weights]
        _trained[key] = (answer, answer(start, np.array(X), np.array(y), float(lr), int(steps)))
    result = _trained[key][1]
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        return {"error": "TypeError", "message": "train_mlp must return (losses, weights)"}
    losses, trained = result
    if what == "losses":
        return as_array([number(loss) for loss in losses])
    try:
        trained = [(as_array(w), as_array(b)) for w, b in trained]
    except (TypeError, ValueError):
        return {"error": "TypeError", "message": "weights must be a list of (W, b) pairs"}
    if what == "weights":
        return [a for pair in trained for a in pair]
    logits = mlp_forward(trained, np.array(rest[0], dtype=np.float64))
    return as_array(np.argmax(logits, axis=1))


# --- 2.5: vjp and jacrev on top of a reverse pass ------------------------------------------

TRANSFORMS = ("autodiff_lab.functional", "torch", "jax", "functorch", "autograd")


def function_from(program):
    """``f(x)`` for a program over a vector: ``[(op, i, ...), ...]``, node 0 being x.

    ``("lin", i, M)`` is ``M @ v_i``; ``("add", i, j)`` and ``("mul", i, j)`` act entrywise;
    ``("tanh", i)``, ``("sin", i)``, ``("exp", i)``, ``("sq", i)`` (``v * v``) too. The last
    node is f's output. Works on arrays, ``Tensor`` s and ``Dual`` s alike (it uses ``ops``).
    """
    from autodiff_lab import ops  # absolute: own_code.py loads this file outside the package

    def f(x):
        vals = [x]
        for op, *a in program:
            v = vals[a[0]]
            if op == "lin":
                vals.append(ops.matmul(np.asarray(a[1], dtype=np.float64), v))
            elif op == "add":
                vals.append(v + vals[a[1]])
            elif op == "mul":
                vals.append(v * vals[a[1]])
            elif op == "sq":
                vals.append(v * v)
            else:
                vals.append(getattr(ops, op)(v))
        return vals[-1]

    return f


def _mode_of(x) -> str:
    """How f was called: "reverse" (a recording Tensor/Value), "dual" (forward) or "plain"."""
    if getattr(x, "requires_grad", False) or type(x).__name__ == "Value":
        return "reverse"
    if hasattr(x, "tangent"):
        return "dual"
    return "plain"


def reverse_run(answer, inputs):
    """``answer.vjp(f, x, u)`` or ``answer.jacrev(f, x)`` on the case's function."""
    kind, program, x, *rest = inputs
    problem = provenance_problem(answer, "ReverseMode")
    method = getattr(answer, kind, None)
    used = problem or (method is not None and ready_made_parts(method, banned_modules=TRANSFORMS))
    if used:
        return library_error(problem or f"ReverseMode.{kind} uses {used}; write it yourself")
    if method is None:
        return {"error": "AttributeError", "message": f"ReverseMode has no {kind}", "at": kind}
    f, modes = function_from(program), []

    def recorded(z):
        modes.append(_mode_of(z))
        return f(z)

    x = np.array(x, dtype=np.float64)
    try:
        if kind == "vjp":
            value, pulled = method(recorded, x, np.array(rest[0], dtype=np.float64))
            result = {"value": as_array(value), "vjp": as_array(pulled)}
        else:
            result = {"jacobian": as_array(method(recorded, x))}
    except (ValueError, TypeError, IndexError) as exc:
        return {**error_result(exc), "at": kind}
    result["reverse"] = "reverse" in modes
    result["how"] = "reverse" if "reverse" in modes else ("dual" if "dual" in modes else "plain")
    return result


# --- 6.x: a gradient-check bug hunt --------------------------------------------------------

_FUNCTIONS = {
    "sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log, "tanh": np.tanh,
    "sqrt": np.sqrt, "abs": np.abs, "sign": np.sign, "maximum": np.maximum,
}  # fmt: skip
_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Gt: operator.gt,
}  # fmt: skip


def formula(text: str, names: tuple[str, ...]):
    """A numpy function of ``names`` from a formula such as ``"g*(cos(x)*x + sin(x))"``.

    Only numbers, the names, + - * / ** >, unary minus and the functions in ``_FUNCTIONS``
    are allowed: the text is parsed, never ``eval``-ed.
    """
    tree = ast.parse(text, mode="eval").body

    def run(node, env):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](run(node.left, env), run(node.right, env))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _BINOPS:
            value = _BINOPS[type(node.ops[0])](run(node.left, env), run(node.comparators[0], env))
            return np.asarray(value, dtype=np.float64)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -run(node.operand, env)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = _FUNCTIONS.get(node.func.id)
            if fn is not None and not node.keywords:
                return fn(*(run(a, env) for a in node.args))
        raise ValueError(f"formula: {ast.dump(node)[:60]} is not allowed")

    def f(*args):
        env = {n: np.asarray(a, dtype=np.float64) for n, a in zip(names, args, strict=True)}
        return run(tree, env)

    f.__doc__ = text
    return f


def bug_hunt_run(answer, inputs):
    """``answer(table)`` on each table of primitives: the sorted names it reports as wrong.

    ``inputs`` holds one table or more (a case with two judges an answer on both: a table
    with no bug only counts beside the same table with one). ``table[name] = (forward,
    vjp, xs)``: ``forward(x)`` acts entrywise on arrays, ``vjp(x, g)`` is the rule under
    test, ``xs`` the points to check it at. One table gives a list of names, several a
    list of such lists.
    """
    problem = provenance_problem(answer, "find_wrong_rules")
    if problem:
        return library_error(problem)
    found = []
    for rows in inputs:
        table = {
            name: (formula(fwd, ("x",)), formula(rule, ("x", "g")), np.array(xs, dtype=np.float64))
            for name, fwd, rule, xs in rows
        }
        names = answer(table)
        if isinstance(names, str) or not hasattr(names, "__iter__"):
            return {"error": "TypeError", "message": "return the names of the wrong rules (a list)"}
        found.append(sorted(str(n) for n in names))
    return found[0] if len(found) == 1 else found
