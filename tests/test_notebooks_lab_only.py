"""Every chapter and solution notebook runs top to bottom under what ``make lab`` installs.

``make lab`` installs ``.[lab]``; PyTorch, micrograd and the other packages of the ``test``
extra are missing on a student's machine. This test executes every notebook in a kernel that
cannot import any package the test extra adds (a folder first on ``PYTHONPATH`` holds a stub
for each, whose import raises ``ImportError``) and asserts that no cell ends in an error. The
stored outputs are not compared here: cells that compare with PyTorch print a one-line hint
instead (``autodiff_lab.optional.import_torch``); strict nbval checks the stored outputs.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("solutions/*.ipynb")])


def _name(requirement: Requirement) -> str:
    return re.sub(r"[-_.]+", "-", requirement.name).lower()


def _requirements(dist: str, extras: set[str]) -> list[Requirement]:
    found = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
            found.append(req)
    return found


def installed_by(dist: str, extras: set[str]) -> set[str]:
    """Names of the distributions ``pip install dist[extras]`` brings, transitively."""
    seen: set[str] = set()
    todo = _requirements(dist, extras)
    while todo:
        req = todo.pop()
        name = _name(req)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += _requirements(name, set(req.extras))
        except metadata.PackageNotFoundError:
            pass  # an optional dependency not installed here: nothing further to follow
    return seen


def top_level_modules(dist: str) -> set[str]:
    """The importable top-level names a distribution installs (from its RECORD)."""
    modules = set()
    for file in metadata.distribution(dist).files or []:
        parts = file.parts
        if len(parts) == 1 and parts[0].endswith(".py"):
            modules.add(parts[0][:-3])
        elif len(parts) > 1 and parts[1] == "__init__.py":
            modules.add(parts[0])
    return {m for m in modules if m.isidentifier() and not m.startswith("_")}


def hidden_modules() -> list[str]:
    """Top-level modules of the distributions the test extra adds to ``.[lab]``.

    pip and setuptools are left alone: every venv starts with them.
    """
    extra = installed_by("autodiff-lab", {"lab", "test"}) - installed_by("autodiff-lab", {"lab"})
    modules: set[str] = set()
    for name in extra - {"pip", "setuptools"}:
        try:
            modules |= top_level_modules(name)
        except metadata.PackageNotFoundError:
            continue
    return sorted(modules)


def test_the_test_extra_adds_torch_and_micrograd():
    """The hidden set is computed, not listed: make sure it holds what the course must survive."""
    hidden = hidden_modules()
    assert {"torch", "micrograd", "hypothesis", "pytest"} <= set(hidden), hidden
    assert not {"numpy", "matplotlib", "ipywidgets", "sklearn", "graphviz"} & set(hidden)


@pytest.fixture(scope="module")
def without_test_extra(tmp_path_factory, monkeypatch_module):
    stubs = tmp_path_factory.mktemp("hidden-test-extra")
    for module in hidden_modules():
        (stubs / module).mkdir()
        (stubs / module / "__init__.py").write_text(
            f"raise ImportError('{module} is not installed by make lab (hidden by this test)')\n"
        )
    monkeypatch_module.setenv("PYTHONPATH", str(stubs))  # the kernel inherits it
    return stubs


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def first_error(path: str) -> str:
    """Execute one notebook in a fresh kernel; '' if no cell ends in an error, else which."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as exc:  # the first error stops the notebook, as for a student
        return str(exc)[-2000:]
    return ""


@pytest.fixture(scope="module")
def errors_without_test_extra(without_test_extra) -> dict[Path, str]:
    """Every notebook executed once, two at a time (a kernel each: both cores busy)."""
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("fork")) as pool:
        return dict(zip(NOTEBOOKS, pool.map(first_error, map(str, NOTEBOOKS))))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_runs_with_lab_extra_only(path, errors_without_test_extra):
    error = errors_without_test_extra[path]
    assert not error, f"{path.name}: a cell ended in an error without the test extra:\n{error}"
