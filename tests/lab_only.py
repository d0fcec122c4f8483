"""A Python that has only what ``make lab`` installs: the test extra's packages hidden.

``make lab`` installs ``.[lab]``; PyTorch, micrograd and the other packages of the ``test``
extra are missing on a student's machine. :func:`hide_test_extra` writes a folder holding a
stub for each top-level module the test extra adds (computed from the installed metadata,
never listed by hand), whose import raises ``ImportError``; a kernel with that folder first
on ``PYTHONPATH`` is a student's kernel, and :func:`student_kernel` writes its kernelspec.
Used by the browser tests' JupyterLab server, whose kernels all run this way (so the chapter
walk runs every chapter as a student would), by ``tools/run_pytest.py``'s nbval pass over
``solutions/``, and by tests/test_notebooks_lab_only.py where no browser walks the chapters.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement


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


def hide_test_extra(folder: Path) -> Path:
    """Write a stub into ``folder`` for each of :func:`hidden_modules`; returns ``folder``
    (put it first on a kernel's ``PYTHONPATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for module in hidden_modules():
        (folder / module).mkdir(exist_ok=True)
        (folder / module / "__init__.py").write_text(
            f"raise ImportError('{module} is not installed by make lab (hidden by the tests)')\n"
        )
    return folder


#: The PYTHONPATH this process was started with (a student's kernel keeps it, behind the stubs).
PYTHONPATH = os.environ.get("PYTHONPATH", "")


def student_kernel(folder: Path) -> Path:
    """A Jupyter data folder, under ``folder``, whose ``python3`` kernel is a student's: this
    Python with the test extra hidden. Put it first on ``JUPYTER_PATH``: the Jupyter server
    or nbval finds that kernel, and only the kernel loses the test extra."""
    data = folder / "jupyter-data"
    spec = data / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    hidden = hide_test_extra(folder / "hidden-test-extra")
    kernel = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        # the hidden stubs first; then what PYTHONPATH already named (a work tree whose
        # autodiff_lab must win over the editable install, as in every other kernel)
        "env": {"PYTHONPATH": os.pathsep.join(filter(None, [str(hidden), PYTHONPATH]))},
        "metadata": {"debugger": True},
    }
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1), encoding="utf-8")
    return data
