"""``autodiff-lab build-exercises``: write the students' notebooks from the solutions.

``solutions/NN_name.ipynb`` is the single source. In its code cells each answer sits
between two marker lines::

    def dual_mul(x, y):
        ### BEGIN SOLUTION  # Exercise 1.1
        ...
        ### END SOLUTION

The generator replaces each region (markers included) with a stub at the BEGIN line's
indentation, ``raise NotImplementedError("Exercise 1.1: <task>")`` (a long task is wrapped
over several lines of at most 88 characters, see :func:`stub_line`), clears every output,
drops cells tagged ``solution-only``, and writes ``exercises/NN_name.ipynb``. The exercise
id comes from ``# Exercise N.M`` on the BEGIN line, else from the first ``check("N.M", …)``
call after the region; the task line from the exercise registry.

A student's work is never destroyed: ``exercises/.manifest.json`` records the hash of what
was last generated for each file. If an exercise notebook on disk differs from that (the
student edited it), it is kept and the new version is written beside it as
``NN_name.new.ipynb`` — unless ``--force``, which first backs the student's file up as
``NN_name.backup-<time>.ipynb``. ``--check`` writes nothing and exits 1 when any exercise
notebook (or the manifest) is out of date with ``solutions/``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import registry
from .notebook_facts import CHECK_CALL_RE, EXERCISE_COMMENT_RE, NotANotebook, parse_notebook
from .notebook_facts import code_sources as code_sources

MANIFEST_NAME = ".manifest.json"
SOLUTION_ONLY_TAG = "solution-only"
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)###\s*BEGIN SOLUTION\b(?P<rest>.*)$")
END_RE = re.compile(r"^[ \t]*###\s*END SOLUTION\b")


class BuildError(ValueError):
    """A solutions notebook that cannot be turned into an exercise notebook."""


@dataclass
class Generated:
    """One generated exercise notebook, in memory."""

    source: Path
    name: str  # file name inside exercises/
    text: str
    exercise_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: No line of a generated stub is longer than this (ruff's and black's default, 88): the
#: task text stays inside a notebook cell's width instead of running past its right edge.
STUB_WIDTH = 88


def stub_line(indent: str, exercise_id: str) -> str:
    """The statement that replaces an answer: it raises with the exercise's number and task.

    One line when it fits in :data:`STUB_WIDTH` characters; otherwise the message is split
    at spaces into adjacent string literals inside the brackets (Python joins them into
    the same message), each line at most :data:`STUB_WIDTH` characters::

        raise NotImplementedError(
            "Exercise 1.4: jvp_f(x, y, dx, dy): for f(x, y) = (sin(x*y), x + y**2) "
            "return (f(x, y), J @ (dx, dy))"
        )
    """
    message = registry.get(exercise_id).stub_message()
    one_line = f"{indent}raise NotImplementedError({_literal(message)})"
    if len(one_line) <= STUB_WIDTH:
        return one_line
    inner = indent + "    "
    pieces = _split_message(message, STUB_WIDTH - len(inner))
    body = "\n".join(inner + _literal(piece) for piece in pieces)
    return f"{indent}raise NotImplementedError(\n{body}\n{indent})"


def _literal(text: str) -> str:
    """``text`` as a double-quoted Python string literal (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def _split_message(message: str, width: int) -> list[str]:
    """``message`` cut at spaces into pieces whose literals fit ``width`` characters; every
    piece but the last keeps its trailing space, so the pieces join back to ``message``.
    A single word longer than ``width`` stays whole (nothing else can be done)."""
    pieces: list[str] = []
    current: str | None = None  # the piece being filled (None: nothing yet)
    for word in message.split(" "):
        if current is None:
            current = word
        elif len(_literal(f"{current} {word} ")) > width and current.strip():
            pieces.append(current + " ")
            current = word
        else:
            current = f"{current} {word}"
    pieces.append(current or "")
    assert "".join(pieces) == message  # the split only moves text between lines
    return pieces


def replace_regions(
    source: str, later_sources: list[str], where: str
) -> tuple[str, list[str], list[str]]:
    """Replace every marked region of one cell's source; return (new source, ids, warnings).

    ``later_sources`` are the following cells' sources, searched for the ``check("N.M", …)``
    call that names a region's exercise when its BEGIN line does not.
    """
    lines = source.split("\n")
    out: list[str] = []
    ids: list[str] = []
    warnings: list[str] = []
    i = 0
    while i < len(lines):
        begin = BEGIN_RE.match(lines[i])
        if END_RE.match(lines[i]):
            raise BuildError(f"{where}, line {i + 1}: '### END SOLUTION' without a BEGIN")
        if not begin:
            out.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if END_RE.match(lines[j])), None)
        nested = next(
            (j for j in range(i + 1, end or len(lines)) if BEGIN_RE.match(lines[j])), None
        )
        if end is None or nested is not None:
            raise BuildError(f"{where}, line {i + 1}: '### BEGIN SOLUTION' has no matching END")
        found = EXERCISE_COMMENT_RE.search(begin["rest"])
        if found is None:
            rest_of_cell = "\n".join(lines[end + 1 :])
            found = next(
                (m for text in [rest_of_cell, *later_sources] if (m := CHECK_CALL_RE.search(text))),
                None,
            )
        if found is None:
            raise BuildError(
                f"{where}, line {i + 1}: cannot tell which exercise this answer belongs to — "
                "write '### BEGIN SOLUTION  # Exercise N.M' or call check(\"N.M\", ...) after it"
            )
        exercise_id = found.group(1)
        try:
            out.append(stub_line(begin["indent"], exercise_id))
        except KeyError as exc:
            raise BuildError(f"{where}, line {i + 1}: {exc.args[0]}") from None
        if not begin["indent"]:
            warnings.append(
                f"{where}, line {i + 1}: exercise {exercise_id}'s region is at the top level of "
                "the cell, so its stub raises when the cell runs and stops 'Run All'"
            )
        ids.append(exercise_id)
        i = end + 1
    return "\n".join(out), ids, warnings


# --- notebooks as plain JSON ----------------------------------------------------------------
# Notebooks are JSON; reading and writing them with ``json`` keeps this module (and the
# ``make test`` check) free of nbformat, whose schema validator takes seconds to import.
# One reader for every notebook, the course's and the students': notebook_facts.


def read_notebook(path: Path) -> dict:
    """A notebook file as a dict, with every cell's ``source`` as one string (outputs kept)."""
    try:
        return parse_notebook(Path(path).read_bytes(), keep_outputs=True)
    except OSError as exc:
        raise BuildError(f"{path} is not a readable notebook: {exc}") from None
    except NotANotebook as exc:
        raise BuildError(f"{path} is not a readable notebook: {exc}") from None


def dumps_notebook(nb: dict) -> str:
    """Notebook JSON as Jupyter writes it (sorted keys, indent 1, sources as lists of lines)."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def generate(solution_path: Path) -> Generated:
    """The exercise notebook for one solutions notebook (nothing is written)."""
    nb = read_notebook(solution_path)
    nb.get("metadata", {}).pop("widgets", None)
    cells = [c for c in nb["cells"] if SOLUTION_ONLY_TAG not in c["metadata"].get("tags", [])]
    ids: list[str] = []
    warnings: list[str] = []
    for index, cell in enumerate(cells):
        cell["metadata"].pop("execution", None)
        if cell["cell_type"] != "code":
            continue
        cell["outputs"] = []
        cell["execution_count"] = None
        later = [c["source"] for c in cells[index + 1 :] if c["cell_type"] == "code"]
        where = f"{solution_path.name} code cell {index + 1}"
        cell["source"], cell_ids, cell_warnings = replace_regions(cell["source"], later, where)
        ids += cell_ids
        warnings += cell_warnings
    nb["cells"] = cells
    return Generated(solution_path, solution_path.name, dumps_notebook(nb), ids, warnings)


# --- the manifest ------------------------------------------------------------------------


def read_manifest(exercises_dir: Path) -> dict:
    path = exercises_dir / MANIFEST_NAME
    if not path.exists():
        return {"files": {}}
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BuildError(f"{path} is not valid JSON ({exc}); delete it to start afresh") from None
    manifest.setdefault("files", {})
    return manifest


def write_manifest(exercises_dir: Path, manifest: dict) -> None:
    manifest["generator"] = "autodiff-lab build-exercises (do not edit: hashes of generated files)"
    manifest["files"] = dict(sorted(manifest["files"].items()))
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    (exercises_dir / MANIFEST_NAME).write_text(text)


# --- build and check -----------------------------------------------------------------------


def solution_notebooks(solutions_dir: Path) -> list[Path]:
    return sorted(p for p in solutions_dir.glob("*.ipynb") if p.is_file())


def _backup_path(target: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = target.with_name(f"{target.stem}.backup-{stamp}.ipynb")
    n = 1
    while candidate.exists():
        n += 1
        candidate = target.with_name(f"{target.stem}.backup-{stamp}-{n}.ipynb")
    return candidate


def build(solutions_dir: Path, exercises_dir: Path, *, force: bool = False, out=None) -> int:
    """Generate every exercise notebook; keep students' edits (see module docstring)."""
    out = out or sys.stdout
    sources = solution_notebooks(solutions_dir)
    if not sources:
        print(f"no {solutions_dir}/*.ipynb yet: nothing to build", file=out)
        return 0
    generated = [generate(p) for p in sources]  # all or nothing: fail before writing
    exercises_dir.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(exercises_dir)
    for gen in generated:
        for warning in gen.warnings:
            print(f"warning: {warning}", file=out)
        entry = {"sha256": gen.sha256, "source": f"{solutions_dir.name}/{gen.name}"}
        if write_keeping_edits(exercises_dir / gen.name, gen.text, manifest, force=force, out=out):
            manifest["files"][gen.name] = entry
    write_manifest(exercises_dir, manifest)
    return 0


def write_keeping_edits(target: Path, text: str, manifest: dict, *, force: bool, out) -> bool:
    """Write ``text`` to ``target`` unless a person changed the file there since it was last
    written (its hash differs from the one ``manifest`` recorded): then keep their file, put
    ``text`` beside it as ``NAME.new.ipynb`` when it is newer than what was last written, and
    return False — the manifest keeps describing the file last written. ``force`` backs their
    file up first and replaces it. True when ``target`` now holds ``text``.
    ``autodiff-lab start`` copies the course by the same rule."""
    recorded = manifest["files"].get(target.name, {}).get("sha256")
    if not target.exists():
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}", file=out)
        return True
    on_disk = sha256_file(target)
    if on_disk == sha256_text(text):
        print(f"up to date: {target}", file=out)
    elif on_disk == recorded:  # untouched since we wrote it: safe to replace
        target.write_text(text, encoding="utf-8")
        print(f"updated {target}", file=out)
    elif force:
        backup = _backup_path(target)
        target.rename(backup)
        target.write_text(text, encoding="utf-8")
        print(f"replaced {target} (--force); the previous file is in {backup}", file=out)
    elif sha256_text(text) == recorded:  # changed by a person, and nothing newer to offer
        print(f"kept {target}: changed since it was written (your work?)", file=out)
        return False
    else:
        beside = target.with_name(f"{target.stem}.new{target.suffix}")
        beside.write_text(text, encoding="utf-8")
        print(
            f"kept {target}: it was changed since it was written (your work?). "
            f"The new version is {beside}; run with --force to replace it "
            "(your file is backed up first).",
            file=out,
        )
        return False
    return True


def check_up_to_date(solutions_dir: Path, exercises_dir: Path, *, out=None) -> int:
    """0 when every exercise notebook and the manifest match ``solutions/``, else 1."""
    out = out or sys.stdout
    sources = solution_notebooks(solutions_dir)
    if not sources:
        print(
            f"no {solutions_dir}/*.ipynb yet: nothing to check, exercises/ is up to date", file=out
        )
        return 0
    manifest = read_manifest(exercises_dir)
    stale: list[str] = []
    for gen in (generate(p) for p in sources):
        target = exercises_dir / gen.name
        if not target.exists():
            stale.append(f"{target}: missing")
        elif sha256_file(target) != gen.sha256:
            stale.append(f"{target}: differs from what {gen.source} generates")
        elif manifest["files"].get(gen.name, {}).get("sha256") != gen.sha256:
            stale.append(f"{exercises_dir / MANIFEST_NAME}: no up-to-date entry for {gen.name}")
    if stale:
        print(f"exercises/ is out of date with {solutions_dir}/:", file=out)
        for line in stale:
            print(f"  {line}", file=out)
        print(
            "run `autodiff-lab build-exercises` (or `make exercises`) and commit the result",
            file=out,
        )
        return 1
    print(f"exercises/ is up to date with {solutions_dir}/ ({len(sources)} notebooks)", file=out)
    return 0
