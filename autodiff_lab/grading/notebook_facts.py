"""What a notebook's code says, read with the standard library only (so it runs in a child).

A submitted file is the student's: its JSON, its code and its size are chosen to hurt.
The grader therefore never parses it in its own process. :func:`main` runs as
``python -I -S notebook_facts.py FILE`` under limits the grader sets (memory, CPU time,
wall time; see :mod:`autodiff_lab.grading.reading`) and prints one JSON object: the code
cells' sources and the facts the plan needs. The same functions serve the grader's tests
and ``build-exercises`` in-process, on files the course wrote.

Bounds, so the analysis is linear in what it reads and never grows with what a file claims:

- outputs, attachments and metadata are dropped as soon as the JSON is read: they play
  no part in grading (a notebook with 50 MB of stored output is graded like its code);
- only the code counts against the size limit (``max_code_bytes``);
- every regular expression here is linear: no pattern has a repeat that can match the
  same text two ways (``^[ \\t]*``, never ``^\\s*`` under ``re.M``, which re-scans every
  following blank line from every line start: minutes for 60 000 blank lines);
- syntax trees (a parse costs ~500 bytes of memory per byte of code) are built only for
  the first ``max_parsed_bytes`` of code; the cells past it are listed in
  ``not_analysed``, for the report to say so.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import warnings

CHAPTER_FILE_RE = re.compile(r"^(\d+)_")  # a course notebook's file name: 03_backprop.ipynb
CHECK_CALL_RE = re.compile(r"""\bcheck\([ \t\r\n]*["'](\d+\.\d+)["']""")
EXERCISE_COMMENT_RE = re.compile(r"#[ \t]*Exercise[ \t]+(\d+\.\d+)\b")
STUB_RE = re.compile(r"NotImplementedError\([ \t\r\n]*[\"']Exercise (\d+\.\d+):")
DEFINED_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)
# Outside a sandbox the references can be read from disk: flag notebooks that mention them.
INTERNALS_RE = re.compile(r"\.reference\b|grading\.exercises|grading\.registry|import registry")
#: Automatic-differentiation packages other than this course's, noted when an answer uses them.
OTHER_AUTODIFF = ("torch", "jax", "tensorflow", "autograd", "micrograd")
MAX_CODE_BYTES = 16 * 2**20
MAX_PARSED_BYTES = 512 * 2**10
MAX_NAMES = 2000  # chains and names kept per function (a longer body is cut, not stored)


class NotANotebook(ValueError):
    """A file that is not a version 4 Jupyter notebook; the message says why, in one line."""


def parse_notebook(data: bytes | str, *, keep_outputs: bool = False) -> dict:
    """A notebook's JSON as a dict, each cell's ``source`` one string; outputs dropped unless
    ``keep_outputs`` (the course's own files keep them). Raises :class:`NotANotebook`."""
    try:
        nb = json.loads(data)
    except UnicodeDecodeError:
        raise NotANotebook("it is not text (UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise NotANotebook(
            f"it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise NotANotebook("it is nested too deeply to be a notebook") from None
    del data
    if not isinstance(nb, dict) or nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        version = nb.get("nbformat") if isinstance(nb, dict) else None
        raise NotANotebook(
            f"it is a version {version} notebook; only version 4 can be graded "
            "(open it in Jupyter and save it again)"
        )
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotANotebook("it has a malformed cell")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            cell["source"] = "".join(source)
        elif isinstance(source, str):
            cell["source"] = source
        else:
            raise NotANotebook("it has a malformed cell")
        if not keep_outputs:
            cell.pop("outputs", None)
            cell.pop("attachments", None)
        cell.setdefault("metadata", {})
    return nb


def code_sources(nb: dict) -> list[str]:
    """The source of every code cell, in order."""
    return [c["source"] for c in nb["cells"] if c["cell_type"] == "code"]


def code_facts(cells: list[str], max_parsed_bytes: int = MAX_PARSED_BYTES) -> dict:
    """What the plan needs from the code, as plain data (see the module docstring).

    ``mentioned``: exercise ids in ``check("N.M", …)``, ``# Exercise N.M`` or a stub;
    ``defined``: names of every ``def``/``class``; ``internals``: the code names the
    grader's references; ``imports``: local name -> [module, attribute or None] for the
    course library; ``foreign``: local names bound to another autodiff library;
    ``aliases``: local name -> the dotted chain assigned to it (``j = F.jacfwd``);
    ``functions``: per function name, the dotted chains its body uses and the names it
    refers to; ``not_analysed``: [cell number, bytes] of cells past the parse budget.
    """
    text = "\n".join(cells)
    mentioned: set[str] = set()
    for pattern in (CHECK_CALL_RE, EXERCISE_COMMENT_RE, STUB_RE):
        mentioned.update(pattern.findall(text))
    facts: dict = {
        "mentioned": sorted(mentioned),
        "defined": sorted(set(DEFINED_RE.findall(text))),
        "internals": INTERNALS_RE.search(text) is not None,
        "imports": {},
        "foreign": [],
        "aliases": {},
        "functions": {},
        "not_analysed": [],
    }
    foreign: set[str] = set()
    budget = max_parsed_bytes
    with warnings.catch_warnings():  # SyntaxWarnings quote the code, escapes and all
        warnings.simplefilter("ignore")
        for number, source in enumerate(cells, 1):
            size = len(source.encode("utf-8", "surrogatepass"))
            if size > budget:
                if source.strip():
                    facts["not_analysed"].append([number, size])
                continue
            budget -= size
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            _read_tree(tree, facts, foreign)
    facts["foreign"] = sorted(foreign)
    return facts


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else None


def _read_tree(tree: ast.AST, facts: dict, foreign: set[str]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                module = node.module if isinstance(node, ast.ImportFrom) else alias.name
                if (module or "").split(".")[0] in OTHER_AUTODIFF:
                    foreign.add(alias.asname or alias.name.split(".")[0])
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autodiff_lab"):
            for alias in node.names:
                facts["imports"][alias.asname or alias.name] = [node.module, alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autodiff_lab"):
                    local = alias.asname or alias.name.split(".")[0]
                    facts["imports"][local] = [alias.name if alias.asname else local, None]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, chain = node.targets[0], _chain(node.value)
            if isinstance(target, ast.Name) and chain is not None:
                facts["aliases"][target.id] = chain
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            chains: set[tuple[str, ...]] = set()
            names: set[str] = set()
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Attribute, ast.Name)):
                    chain = _chain(inner)
                    if chain is not None and len(chains) < MAX_NAMES:
                        chains.add(tuple(chain))
                    if isinstance(inner, ast.Name) and len(names) < MAX_NAMES:
                        names.add(inner.id)
            facts["functions"][node.name] = {
                "chains": sorted(map(list, chains)),
                "names": sorted(names),
            }


def file_facts(data: bytes, max_code_bytes: int = MAX_CODE_BYTES) -> dict:
    """:func:`code_facts` of a notebook file's bytes, with its ``cells``; or ``{"problem": why}``
    when it is not a notebook or its code is over ``max_code_bytes``."""
    try:
        cells = code_sources(parse_notebook(data))
    except NotANotebook as exc:
        return {"problem": f"could not read the notebook: {exc}"}
    del data
    size = sum(len(c.encode("utf-8", "surrogatepass")) for c in cells)
    if size > max_code_bytes:
        return {
            "problem": f"too large to grade ({size / 2**20:.1f} MB of code; at most "
            f"{max_code_bytes / 2**20:g} MB)"
        }
    return {"cells": cells, **code_facts(cells)}


def main(argv: list[str]) -> int:
    """``notebook_facts.py FILE MAX_CODE_BYTES MEMORY_MB CPU_SECONDS``: limit this process's
    address space and CPU time, then print :func:`file_facts` of FILE as JSON."""
    import resource

    memory, seconds = int(float(argv[3]) * 2**20), max(1, round(float(argv[4])))
    for limit, value in (("RLIMIT_AS", memory), ("RLIMIT_CPU", seconds), ("RLIMIT_CORE", 0)):
        try:  # where the system offers it (macOS refuses some); the wall clock stays
            resource.setrlimit(getattr(resource, limit), (value, value))
        except (AttributeError, ValueError, OSError):
            pass
    with open(argv[1], "rb") as f:
        data = f.read()
    facts = file_facts(data, int(argv[2]))
    del data
    # ensure_ascii: lone surrogates (a cell may hold "\ud800") travel as escapes
    sys.stdout.write(json.dumps(facts, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
