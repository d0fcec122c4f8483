"""Own-code exercises: the answer is computed where the library cannot be imported or read.

A build-it-yourself exercise (``Exercise(own_code=True)``: 2.5, 3.6, 4.6, 4.7, 5.6, 6.4, 7.5)
is not graded from the notebook's process. The grader runs it in a worker of its own
(``{"own_code": True}`` in the request, :mod:`.isolation`) that runs no student code
itself: per exercise, it starts a fresh child interpreter (this file, run as a script with
``python -P -s``, inside the same sandbox and resource limits) and hands it only

- the notebook's top-level statements the answer needs (:func:`chosen_statements`: the
  statements binding the answer's name, then those binding every global name they use,
  to a fixed point — a cell's ``check(...)`` or another exercise's imports are left out);
- the cases as plain data, and the exercise's runner, loaded from its file under a private
  package name (``_own_code_grading``), so the ``autodiff_lab`` package is never imported.

Before any student statement runs, the child installs

1. a ``sys.meta_path`` finder that refuses every switched-off module (:func:`switched_off`)
   by name *and* by location (a module found on disk inside a switched-off package, under
   any name), with ``ImportError: exercise 3.6 must be your own code: importing
   autodiff_lab is switched off here``;
2. an audit hook (:func:`sys.addaudithook`, which cannot be removed) that refuses to open
   any file inside those packages (every copy on ``sys.path``), to start programs
   (``subprocess``, ``os.system``, ``exec*``, ``posix_spawn``, ``fork``), to create links,
   to use ``ctypes``, and to walk the interpreter's objects (``gc.get_objects`` and
   friends) or rewrite a function's code or defaults (how the hook itself could be undone).

Switched off: ``autodiff_lab`` whole (engine, ``nn``, ``optim``, ``functional``, the grading
catalogs), ``torch``, ``functorch``, ``jax``, ``autograd``, ``micrograd``, ``tinygrad``,
``tensorflow``, ``keras``, ``sklearn``. An exercise that *builds on* the engine
(``builds_on_engine=True``: 2.5 records ``f`` on the library's ``Tensor``, 5.6 trains
with it, 6.4 tags its ``Dual``) keeps ``autodiff_lab``'s engine importable and loses its
transforms and ready-made parts
(``functional``, ``batching``, ``linear``, ``tangents``, ``nn``, ``optim``, ``training``,
``grading``).

A needed statement that fails because it imports a switched-off module scores the exercise
zero: every case gets the ``LibraryCode`` record naming the rule and the cell (the report's
feedback line and the exercise's hint say it); other exercises of the notebook are graded
as before, in the usual worker.

What this guarantees: whatever the answer's code is spelled like (``import autodiff_lab``
then ``autodiff_lab.functional.vjp``, ``importlib.import_module("autodiff_" + "lab")``,
``__import__``, a helper function, a library object kept in a dict, a class attribute, a
file of the package opened and ``exec``-ed, ``torch``), the switched-off libraries are not
in the process that computes the answer, cannot be imported there and their files cannot be
read there, so the numbers the grader compares were computed by code in the notebook or
its folder's helper modules (with numpy, the standard library, and for 2.5, 5.6 and 6.4
the engine). Nothing of the grader's references is in that process either.

What it does not guarantee: that the code in the notebook is the student's *own* — code
copied into a cell (the chapter's engine pasted and renamed, a solution from a classmate)
runs like any other; that is judged by the exercises themselves (variants the chapter did
not write) and by the lecturer. Run without the sandbox (``--sandbox none``), the machine's
other copies of the library outside ``sys.path`` (a course checkout, a wheel) are not
known to the child and could be read; with the sandbox only the package the worker runs is
there. A grader running as root does not change what the child may import or open, but
code that defeats CPython's own audit hooks (a native library loaded some way the hook does
not see) is outside what an in-process guard can promise. The practice ``check(...)`` in a
student's kernel uses the same child when it can (``isolation.outcomes_in_child``: the kernel's
``In`` history gives the cells, and ``check`` was handed the object the notebook's answer
name holds); otherwise — outside IPython, or an answer made some way its cells do not
show — it runs the answer in the kernel, where the library is loaded, and only the
runners' object checks stand in the way. The batch grader (``autodiff-lab grade``) is
what guarantees the above.
"""

from __future__ import annotations

import ast
import json
import os
import sys

#: Other automatic-differentiation and ready-made model libraries, switched off for every
#: own-code exercise.
FOREIGN = ("torch", "functorch", "jax", "jaxlib", "autograd", "micrograd", "tinygrad",
           "tensorflow", "keras", "sklearn")  # fmt: skip
#: With ``builds_on_engine``: what stays switched off of the course library.
READY_MADE = tuple(
    f"autodiff_lab.{m}"
    for m in ("functional", "batching", "linear", "tangents", "nn", "optim", "training", "grading")
)
MAX_LINE_BYTES = 16 * 2**20 + 2**10  # one event from the child: an answer at most (worker's)
PRIVATE = "_own_code_grading"  # the name the child loads the grading modules under
CHILD_MODULES = ("plaindata", "spec", "scoring", "checking", "importing", "worker", "runners",
                 "runners.common")  # fmt: skip


def switched_off(exercise) -> list[str] | None:
    """The modules switched off for ``exercise``'s answer, or None for an ordinary one."""
    if not getattr(exercise, "own_code", False):
        return None
    library = READY_MADE if getattr(exercise, "builds_on_engine", False) else ("autodiff_lab",)
    return [*library, *FOREIGN]


def rule(exercise_id: str, module: str) -> str:
    """The sentence every refusal says."""
    return f"exercise {exercise_id} must be your own code: importing {module} is switched off here"


# --- which statements the answer needs (run in the worker; standard library only) ----------


def _python_source(cell: str) -> str:
    """A cell's code as Python (IPython's transforms: ``%magic`` lines become calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(cell)
    except Exception:  # no IPython, or a cell its transforms refuse: as written
        return cell


def _names(statement: ast.stmt, source: str) -> tuple[set[str], set[str]]:
    """(global names ``statement`` binds or modifies, global names it reads)."""
    import symtable

    binds: set[str] = set()
    uses: set[str] = set()
    segment = ast.unparse(statement)
    try:
        table = symtable.symtable(segment, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return binds, uses
    for symbol in table.get_symbols():
        name = symbol.get_name()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace():
            binds.add(name)
        if symbol.is_referenced():
            uses.add(name)
    todo = list(table.get_children())
    while todo:
        scope = todo.pop()
        todo += scope.get_children()
        for symbol in scope.get_symbols():
            if symbol.is_global():
                uses.add(symbol.get_name())
                if symbol.is_declared_global() and symbol.is_assigned():
                    binds.add(symbol.get_name())
    # ``MyValue.relu = f``, ``MyValue.table[k] = v``, ``setattr(MyValue, ...)`` modify MyValue
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        targets = [statement.target]
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Name) and call.func.id in ("setattr", "delattr"):
            targets = call.args[:1]
    for target in targets:
        while isinstance(target, (ast.Attribute, ast.Subscript)):
            target = target.value
        if isinstance(target, ast.Name):
            binds.add(target.id)
    return binds, uses


def _rebinds(statement: ast.stmt) -> set[str]:
    """Names a top-level statement binds afresh, whatever they held before: a ``def``, a
    ``class``, an ``import``, ``name = ...`` (not inside ``if``/``try``/loops)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"}
    if isinstance(statement, ast.Assign):  # ``MyValue = patched(MyValue)`` builds on it
        read = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
        return {t.id for t in statement.targets if isinstance(t, ast.Name)} - read
    return set()


def chosen_statements(cells: list[str], answer: str) -> list[list]:
    """``[[cell index, Python source, [statement numbers]], ...]``: the top-level statements
    the answer needs, in notebook order (see the module docstring). For each name, only the
    statements from the last one that binds it afresh on count (an earlier attempt at the
    class, redefined further down, is not run). Cells that do not parse are left out."""
    found = []
    for index, cell in enumerate(cells):
        source = _python_source(cell)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for number, statement in enumerate(tree.body):
            binds, uses = _names(statement, source)
            found.append((index, source, number, binds, uses, _rebinds(statement)))
    last: dict[str, int] = {}  # name -> the last statement that binds it afresh
    for k, entry in enumerate(found):
        last.update(dict.fromkeys(entry[5], k))
    needed, chosen = {answer}, set()
    changed = True
    while changed:
        changed = False
        for k, (_i, _s, _n, binds, uses, _r) in enumerate(found):
            live = {name for name in binds & needed if k >= last.get(name, 0)}
            if k not in chosen and live:
                chosen.add(k)
                needed |= uses
                changed = True
    result: list[list] = []
    for k in sorted(chosen):
        index, source, number, _b, _u, _r = found[k]
        if result and result[-1][0] == index:
            result[-1][2].append(number)
        else:
            result.append([index, source, [number]])
    return result


def run_in_child(
    item: dict, cells: list[str], request: dict, events, flags: tuple[str, ...] = ("-P", "-s")
) -> None:
    """Grade one own-code exercise in a fresh child and pass its events on (the worker).

    ``item``: the request's exercise (``id``, ``answer``, ``run``, ``cases``, ``own_code``
    = the switched-off modules); ``events``: the worker's channel to the grader (anything
    with ``emit(**event)``); ``flags``: the child interpreter's (a student's kernel keeps
    the user's site-packages: :func:`~autodiff_lab.grading.isolation.outcomes_in_child`).
    """
    import subprocess

    child_request = {
        "id": item["id"],
        "answer": item["answer"],
        "run": item["run"],
        "cases": item["cases"],
        "switched_off": item["own_code"],
        "statements": chosen_statements(cells, item["answer"]),
        "timeout": request["timeout"],
        "memory_mb": request["memory_mb"],
        "grading": os.path.dirname(os.path.abspath(__file__)),
    }
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, *flags, os.path.abspath(__file__), str(write_fd)],
            stdin=subprocess.PIPE, pass_fds=(write_fd,), close_fds=True,
        )  # fmt: skip
    finally:
        os.close(write_fd)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(child_request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    count, limit = len(item["cases"]), MAX_LINE_BYTES
    seen: set = set()
    with os.fdopen(read_fd, "rb") as results:
        while line := results.readline(limit + 1):
            if len(line) > limit:  # an endless line: read no more of this child
                break
            try:
                event = json.loads(line)
            except ValueError:
                continue
            _relay(event, item["id"], count, seen, events)
    proc.kill()  # (it has said all it will; it may still be writing)
    proc.wait()
    if "answer_missing" not in seen and len(seen) < count:
        what = f"exited with code {proc.returncode}" if proc.returncode else "sent no answer"
        for index in range(count):
            if index not in seen:
                events.emit(
                    event="case", id=item["id"], index=index, kind="crashed", value=None,
                    message=f"the process computing this exercise {what}",
                )  # fmt: skip


def _relay(event, exercise_id: str, count: int, seen: set, events) -> None:
    """Pass one child event on, only in the shapes the worker itself sends (each case once)."""
    if not isinstance(event, dict):
        return
    kind = event.get("event")
    if kind == "answer_missing" and "answer_missing" not in seen:
        seen.add("answer_missing")
        events.emit(event="answer_missing", id=exercise_id)
    elif kind in ("case_start", "case"):
        index = event.get("index")
        if type(index) is not int or not 0 <= index < count or index in seen:
            return
        if kind == "case_start":
            events.emit(event="case_start", id=exercise_id, index=index)
            return
        seen.add(index)
        events.emit(
            event="case", id=exercise_id, index=index, kind=str(event.get("kind")),
            value=event.get("value"), message=event.get("message"),
        )  # fmt: skip


# --- the child (this file run as a script: nothing of autodiff_lab is imported) -------------


def _load_private(grading: str) -> dict:
    """The grading modules the child needs, from their files, under :data:`PRIVATE`."""
    import importlib.util
    import types

    package = types.ModuleType(PRIVATE)
    package.__path__ = [grading]
    sys.modules[PRIVATE] = package
    loaded = {}
    for name in CHILD_MODULES:
        folder = os.path.join(grading, *name.split("."))
        is_package = os.path.isdir(folder)
        file = os.path.join(folder, "__init__.py") if is_package else folder + ".py"
        spec = importlib.util.spec_from_file_location(
            f"{PRIVATE}.{name}", file, submodule_search_locations=[folder] if is_package else None
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        loaded[name] = module
    return loaded


def _load_runner(spec: dict, grading: str, import_file):
    """The exercise's ``run``: a course runner from its file under the private package, or
    a lecturer's runners module from its file (imported as the policy allows), with
    ``import_file`` (grading/importing.py, loaded privately)."""
    name, file = str(spec["module"]), spec.get("file")
    prefix = "autodiff_lab.grading."
    if name.startswith(prefix):
        name = PRIVATE + "." + name[len(prefix) :]
        file = os.path.join(grading, *name.split(".")[1:]) + ".py"
    module = import_file(name, file, f"the runners module {name!r}")
    return getattr(module, str(spec["name"]))


def _locations(modules: list[str]) -> tuple[str, ...]:
    """Every place on disk a switched-off module's code could be read from, as path prefixes
    (a package's folder, a module's file and its cached bytecode), found through every
    finder and ``sys.path`` entry without importing anything."""
    tops: dict[str, list[str]] = {}
    for module in modules:
        top, _, rest = module.partition(".")
        tops.setdefault(top, []).append(rest)
    places: set[str] = set()
    for top, rests in tops.items():
        folders: set[str] = set()
        for entry in sys.path:
            base = os.path.join(os.path.abspath(entry or "."), top)
            if os.path.isdir(base):
                folders.add(base)
            elif os.path.exists(base + ".py"):
                places.add(base + ".py")
        for finder in sys.meta_path:
            try:
                spec = finder.find_spec(top, None)  # type: ignore[attr-defined]
            except Exception:
                continue
            if spec is not None:
                folders.update(spec.submodule_search_locations or [])
                if spec.origin and not spec.submodule_search_locations:
                    places.add(spec.origin)
        for folder in {os.path.realpath(f) for f in folders} | folders:
            for rest in rests:
                if not rest:
                    places.add(folder + os.sep)
                    continue
                path = os.path.join(folder, *rest.split("."))
                places.update((path + os.sep, path + ".py"))
                head, last = os.path.split(path)
                places.add(os.path.join(head, "__pycache__", last + "."))
    return tuple(sorted(places))


class _SwitchedOff:
    """The ``sys.meta_path`` finder: switched-off modules, by name or by location, raise."""

    def __init__(self, exercise_id: str, names: tuple[str, ...], places: tuple[str, ...]):
        self.exercise_id, self.names, self.places = exercise_id, names, places
        self.refused: list[str] = []

    def _banned(self, name: str) -> str | None:
        if name == PRIVATE or name.startswith(PRIVATE + "."):
            return "the grader's modules"
        for banned in self.names:
            if name == banned or name.startswith(banned + "."):
                return banned
        return None

    def guard_attributes(self, module) -> None:
        """A package some of whose modules are switched off (``autodiff_lab`` for 2.5):
        reading one as an attribute (``autodiff_lab.functional``) says the rule too."""
        name, exercise_id = module.__name__, self.exercise_id
        off = {n[len(name) + 1 :].split(".")[0] for n in self.names if n.startswith(name + ".")}

        def __getattr__(attr):
            if attr in off:
                raise AttributeError(rule(exercise_id, f"{name}.{attr}"))
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__getattr__ = __getattr__

    def _guard_attributes(self, spec, name: str) -> None:
        """:meth:`guard_attributes` of the package ``spec`` loads, once it has run."""
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            self.guard_attributes(module)

        loader.exec_module = exec_module

    def find_spec(self, name, path=None, target=None):
        banned = self._banned(name)
        if banned is None:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is None:
                    continue
                where = [spec.origin or "", *(spec.submodule_search_locations or [])]
                if any(w.startswith(self.places) or w + os.sep in self.places for w in where if w):
                    banned = name
                elif any(n.startswith(name + ".") for n in self.names) and spec.loader:
                    self._guard_attributes(spec, name)
                    return spec
                break
        if banned is None:
            return None
        self.refused.append(banned)
        raise ImportError(rule(self.exercise_id, banned), name=name)


def _install_guard(exercise_id: str, modules: tuple[str, ...], places: tuple[str, ...]) -> None:
    """The audit hook of the module docstring (point 2). Every name it uses is bound as a
    default argument, so patching ``os``, ``builtins`` or its module changes nothing."""
    prefix = f"exercise {exercise_id} must be your own code"
    names = tuple(n for n in modules)
    dotted = tuple(n + "." for n in modules)

    def hook(
        event, args, _places=places, _prefix=prefix, _str=str, _bytes=bytes, _int=int,
        _type=type, _fspath=os.fspath, _getcwd=os.getcwd, _error=PermissionError,
        _names=names, _dotted=dotted,
    ):  # fmt: skip
        if event == "import":  # whatever became of the finder
            name = args[0]
            if _type(name) is _str and (name in _names or name.startswith(_dotted)):
                raise ImportError(f"{_prefix}: importing {name} is switched off here")
        elif event == "open":
            path = args[0]
            if _type(path) is _int:
                return
            if _type(path) is _bytes:
                path = path.decode("utf-8", "surrogateescape")
            elif _type(path) is not _str:
                path = _fspath(path)
                if _type(path) is _bytes:
                    path = path.decode("utf-8", "surrogateescape")
            if not path.startswith("/"):
                path = _getcwd() + "/" + path
            parts: list = []
            for part in path.split("/"):
                if part == "..":
                    if parts:
                        parts.pop()
                elif part and part != ".":
                    parts.append(part)
            path = "/" + "/".join(parts)
            if path.startswith(_places) or (path + "/") in _places or path.startswith("/proc/"):
                raise _error(f"{_prefix}: reading {path} is switched off here")
        elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents") or (
            event.startswith(("ctypes.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn"))
            or event in ("os.system", "os.fork", "os.forkpty", "os.symlink", "os.link")
        ):
            raise _error(f"{_prefix}: {event} is switched off here")
        elif event == "object.__setattr__" and args[1] in (
            "__code__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__",
        ):  # fmt: skip
            raise _error(f"{_prefix}: changing a function's {args[1]} is switched off here")

    sys.addaudithook(hook)


def _child_main(events_fd: int) -> None:
    """Read the request from stdin; set up, then run the statements and the cases."""
    request = json.loads(sys.stdin.buffer.read())
    sys.stdin = open(os.devnull)
    grading, exercise_id = request["grading"], str(request["id"])
    private = _load_private(grading)
    worker = private["worker"]
    events = worker.Events(events_fd)
    run = _load_runner(request["run"], grading, private["importing"].import_file)
    sys.path.append(os.getcwd())  # the notebook's helper modules, as in the worker
    names = tuple(str(m) for m in request["switched_off"])
    places = _locations(list(names))
    for module in list(sys.modules):  # nothing switched off may be loaded already
        if any(module == n or module.startswith(n + ".") for n in names):
            raise RuntimeError(f"{module} was loaded before the student's code")
    package = sys.modules[PRIVATE]
    package.__path__ = []  # nothing more of the grader can be imported through it
    private["runners"].__path__ = []
    finder = _SwitchedOff(exercise_id, names, places)
    sys.meta_path.insert(0, finder)
    for parent in {n.rpartition(".")[0] for n in names} & set(sys.modules):
        finder.guard_attributes(sys.modules[parent])  # loaded by the runner (6.4's ops)
    spawners = ("_posixsubprocess", "subprocess", "multiprocessing", "_multiprocessing")
    for cached in spawners:  # (how a program could be started without an audited call)
        sys.modules.pop(cached, None)
    finder.names = (*names, *spawners)
    _install_guard(exercise_id, finder.names, places)

    sys.stdout = worker.BoundedOutput(1)
    sys.stderr = worker.BoundedOutput(2)
    sys.argv = [""]
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    namespace = main.__dict__
    alarm = worker._CellAlarm(float(request["timeout"]))
    refused_in = None
    for index, source, numbers in request["statements"]:
        tree = ast.parse(source)
        for number in numbers:
            code = compile(
                ast.Module(body=[tree.body[number]], type_ignores=[]),
                f"<grading-cell {index + 1}>",
                "exec",
            )
            before = len(finder.refused)
            try:
                with alarm:
                    exec(code, namespace)
            except BaseException as exc:  # a cell's error: the next statement runs
                if len(finder.refused) > before or str(exc).startswith(f"exercise {exercise_id} "):
                    refused_in = refused_in or (index, str(exc))
    checking, scoring = private["checking"], private["scoring"]
    if refused_in is not None:
        note = f"{refused_in[1]} (code cell {refused_in[0] + 1})"
        for k in range(len(request["cases"])):
            events.emit(
                event="case", index=k, kind=str(scoring.VALUE), message=None,
                value=private["plaindata"].to_plain({"error": "LibraryCode", "message": note}),
            )  # fmt: skip
        return
    answer = namespace.get(request["answer"])
    if answer is None:
        events.emit(event="answer_missing")
        return
    plaindata = private["plaindata"]
    for k, encoded in enumerate(request["cases"]):
        events.emit(event="case_start", index=k)
        try:
            with alarm:
                outcome = checking.run_answer(
                    run, request["answer"], answer, plaindata.from_plain(encoded)
                )
            kind, value, message = str(outcome.kind), None, outcome.message
            if outcome.kind == scoring.CRASH and request["memory_mb"]:
                message = f"ran out of memory (the limit is {request['memory_mb']:g} MB)"
            elif outcome.kind == scoring.VALUE:
                value = plaindata.to_plain(outcome.value)
        except BaseException as exc:
            kind, value, message = str(scoring.ERROR), None, scoring.short_error(exc)
        try:
            events.emit(event="case", index=k, kind=kind, value=value, message=message)
        except Exception as exc:
            events.emit(event="case", index=k, kind=str(scoring.ERROR), value=None,
                        message=f"the answer could not be sent ({type(exc).__name__})")  # fmt: skip


if __name__ == "__main__":
    try:
        _child_main(int(sys.argv[1]))
    except BaseException:
        import traceback

        os.write(2, traceback.format_exc().encode())
        os._exit(3)
    os._exit(0)
