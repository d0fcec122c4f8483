"""The package is layered one way: no import cycle between its modules, and the engine
imports only modules of the layers below it.

Every module of ``autodiff_lab`` is parsed with :mod:`ast`; every ``import`` and
``from … import`` in the file counts, at the top or inside a function, relative ones
resolved. ``from . import ops`` is an edge to ``autodiff_lab.ops``; a name that is not a
module (``from .kinds import Node``) is an edge to the module that holds it. Not edges:
the package ``__init__`` that Python runs before any of its submodules (it is the public
face: it imports everything), and imports under ``if TYPE_CHECKING:`` (annotations only,
never run: ``graph.Node`` names ``Primitive`` as the type of ``_fn``).

The engine's layers, lowest first (:data:`ENGINE_LAYERS`); a module imports only modules
of lower layers (and of its own layer, when the two are not a cycle):

0. ``types`` — the names of what the signatures pass around (``Operand``, ``Fn``…);
1. ``graph`` — the graph core: what a node is, grad mode, topological order, backpropagate;
2. ``kinds`` — what a tracer, a dual number and a batch are;
3. ``primitive`` — the :class:`Primitive` class, ``bind`` (which applies an entry), the
   registry, the arithmetic entries and the elementwise methods;
4. ``ops`` — the math functions of every kind of number (each applies its entry by name);
5. ``primitives`` — the other entries, whose rules are written with ``ops``;
6. ``methods``, ``memory`` — the methods the array types share; what a graph keeps alive;
7. ``value``, ``tensor``, ``dual`` — the three kinds of number;
8. ``tangents``, ``batching``, ``extend`` — replay, vmap's batches, user rules;
9. ``linear`` — linearize's graph of linear operations;
10. ``functional`` — the transformations.

Everything else (nn, optim, data, viz, grading, the command line…) sits above the engine;
among those modules only cycles are refused.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "autodiff_lab"

ENGINE_LAYERS: list[tuple[str, ...]] = [
    ("types",),
    ("graph",),
    ("kinds",),
    ("primitive",),
    ("ops",),
    ("primitives",),
    ("methods", "memory"),
    ("value", "tensor", "dual"),
    ("tangents", "batching", "extend"),
    ("linear",),
    ("functional",),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _owner(name: str) -> str | None:
    """The package module that defines ``name`` (a module or a prefix of one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> dict[str, int]:
    """The package modules ``module`` imports, each with the line of its first import."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped = _type_checking_only(tree)
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                source = base + (f".{node.module}" if node.module else "")
            else:
                source = node.module or ""
            submodules = [
                f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES
            ]
            targets = submodules if len(submodules) == len(node.names) else [source, *submodules]
        for target in targets:
            owner = _owner(target) if target.startswith("autodiff_lab") else None
            if owner is not None and owner != module and owner != "autodiff_lab":
                found.setdefault(owner, node.lineno)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def _cycles() -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return components


def test_the_graph_is_read():
    """The parser sees what is there: known imports at the top and inside functions."""
    assert len(MODULES) > 40
    assert "autodiff_lab.graph" in GRAPH["autodiff_lab.kinds"]  # a top-level import
    assert "autodiff_lab.primitives" in GRAPH["autodiff_lab.value"]  # `from . import primitives`
    assert "autodiff_lab.viz.render" in GRAPH["autodiff_lab.progress"]  # inside a function


def test_no_import_cycle():
    details = []
    for component in _cycles():
        members = set(component)
        edges = [
            f"{a} -> {b} (line {line})"
            for a in component
            for b, line in GRAPH[a].items()
            if b in members
        ]
        details.append("cycle " + ", ".join(component) + ":\n    " + "\n    ".join(edges))
    assert not details, "\n".join(details)


def _layer_of() -> dict[str, int]:
    return {f"autodiff_lab.{m}": i for i, layer in enumerate(ENGINE_LAYERS) for m in layer}


def test_every_engine_module_has_a_layer():
    """A new engine module must be given its place (and a stale name fails here)."""
    for module in _layer_of():
        assert module in MODULES, f"{module} is listed in ENGINE_LAYERS but does not exist"


@pytest.mark.parametrize("module", [m for layer in ENGINE_LAYERS for m in layer])
def test_engine_imports_only_lower_layers(module):
    layer = _layer_of()
    name = f"autodiff_lab.{module}"
    upward = [
        f"{target} (line {line}, layer {layer.get(target, 'above the engine')})"
        for target, line in GRAPH[name].items()
        if layer.get(target, len(ENGINE_LAYERS)) > layer[name]
    ]
    assert not upward, f"{name} (layer {layer[name]}) imports from above: {upward}"
