"""Every chapter and solution notebook runs top to bottom under what ``make lab`` installs.

A notebook runs in a kernel that cannot import any package the test extra adds
(:mod:`lab_only`), and no cell may end in an error. Each notebook is run that way once, by
whichever test runs it anyway:

- the chapters in ``notebooks/``: by the browser walk (tests/browser/test_browser_chapters.py;
  the JupyterLab server's kernels are a student's), where the browser tests run — always
  with ``CI=true``; elsewhere by this file. Either way in ``make test-exhaustive`` (minutes of
  kernels; CI runs it): ``make test`` runs the chapters once, under strict nbval, with the test
  extra there (their PyTorch comparisons print what the committed outputs show);
- the solutions in ``solutions/``: by the nbval pass over them that ``make test``
  (tools/run_pytest.py) runs in a student's kernel — they use nothing of the test extra, so
  their stored outputs are compared there too.

Stored outputs are not compared here: chapter cells that compare with PyTorch print a
one-line hint instead (``autodiff_lab.optional.import_torch``); strict nbval checks them.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import nbformat
import pytest
from browser_support import browser_tests_run
from lab_only import hidden_modules, hide_test_extra
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent


#: The chapters, unless the browser walk runs them (where it can; CI requires it).
NOTEBOOKS = [] if browser_tests_run() else sorted(ROOT.glob("notebooks/*.ipynb"))


def test_the_test_extra_adds_torch_and_micrograd():
    """The hidden set is computed, not listed: make sure it holds what the course must survive."""
    hidden = hidden_modules()
    assert {"torch", "micrograd", "hypothesis", "pytest"} <= set(hidden), hidden
    assert not {"numpy", "matplotlib", "ipywidgets", "sklearn", "graphviz"} & set(hidden)


@pytest.fixture(scope="module")
def without_test_extra(tmp_path_factory, monkeypatch_module):
    stubs = hide_test_extra(tmp_path_factory.mktemp("hidden-test-extra"))
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
        startup_timeout=180,  # a loaded 2-core machine starts a kernel slowly
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


if NOTEBOOKS:  # else the browser walk runs them: no empty, skipped parametrization here

    @pytest.mark.exhaustive
    @pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
    def test_notebook_runs_with_lab_extra_only(path, errors_without_test_extra):
        error = errors_without_test_extra[path]
        assert not error, f"{path.name}: a cell ended in an error without the test extra:\n{error}"
