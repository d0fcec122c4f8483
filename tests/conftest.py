"""Shared pytest setup for the whole test suite.

- Hypothesis profiles: ``default`` (25 examples, no deadline: the machine is shared, so
  wall-clock deadlines would only make tests flaky) and ``thorough`` (300 examples), chosen
  with the environment variable ``HYPOTHESIS_PROFILE=thorough``.
- ``torch``: PyTorch as the reference oracle, in float64 with one thread. Tests that use
  it are skipped where PyTorch is not installed — except with ``CI=true``, where such a
  skip is turned into a failure (as the browser tests do): CI must run every check.
- ``rng``: a seeded numpy random generator, fresh for each test.
- SVG helpers for the drawing and stepper tests: :func:`svg_boxes`, :func:`svg_edge_labels`
  and the ``wasm_renderer`` fixture (the renderer the stored notebook outputs use).
- How pytest-xdist groups the tests: one process per test file or notebook, the browser
  tests in two (:func:`pytest_xdist_make_scheduler`).
- The ``slow`` marker for the few tests that take seconds (``pytest -m "not slow"`` skips
  them while iterating).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# check() records a learner's progress (autodiff_lab.progress): tests never touch the user's
# own file. (tools/run_pytest.py sets the same for its nbval-only pass, which loads no conftest.)
os.environ.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-test-"))

settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("thorough", max_examples=300, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


pytest_plugins = ["pytester"]  # (tests/test_ci_requirements.py runs pytest on small files)

IN_CI = os.environ.get("CI", "").lower() == "true"
#: Modules whose absence fails (instead of skipping) a test with CI=true.
REQUIRED_IN_CI = ("torch",)


def _fail_if_required(report) -> None:
    """With CI=true, a skip because a required module is missing becomes a failure."""
    if not (IN_CI and report.skipped):
        return
    reason = str(report.longrepr)
    missing = [m for m in REQUIRED_IN_CI if f"could not import '{m}'" in reason]
    if missing:
        report.outcome = "failed"
        report.longrepr = f"CI=true requires {', '.join(missing)} (skipped because: {reason})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_required(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield  # (a module-level importorskip skips at collection)
    _fail_if_required(outcome.get_result())


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds (deselect with -m 'not slow')")
    config.addinivalue_line(
        "markers",
        "exhaustive: takes minutes; run by `make test-exhaustive` (and CI), not by `make test`",
    )


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config, log):
    """How pytest-xdist spreads the suite over processes (tools/run_pytest.py runs ``-n``).

    Like ``--dist loadfile``: each test file, and each notebook, runs in one process (its
    module fixtures are built once; a notebook's cells run in order in one kernel). And the
    browser tests run in two processes, each with one JupyterLab server and one Chromium: the
    chapter walk in one, all the others in the other (together they were the longest chain).
    (pytest-xdist's own ``xdist_group`` marks do not take effect under pytest 9.)
    """
    if config.getvalue("dist") != "loadfile":
        return None  # another mode asked for on the command line: xdist's own
    from xdist.scheduler import LoadFileScheduling

    class FileOrBrowserScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path == "tests/browser/test_browser_chapters.py":
                return path  # the chapter walk, about a minute, beside the other browser tests
            return "tests/browser/" if path.startswith("tests/browser/") else path

    return FileOrBrowserScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """The browser tests first: pytest-xdist hands out files in collection order, and this
    group, the longest chain (its own servers and Chromium), ended the run a minute
    after the other processes when it came last."""
    items.sort(key=lambda item: not item.nodeid.startswith("tests/browser/"))  # stable


@pytest.fixture(scope="session")
def torch():
    """PyTorch configured as a float64, single-threaded reference implementation."""
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    return torch


@pytest.fixture
def rng():
    """A numpy random generator with a fixed seed (tests are reproducible)."""
    return np.random.default_rng(20261130)


@pytest.fixture
def wasm_renderer(monkeypatch):
    """The renderer the stored notebook outputs use (independent of any `dot` binary)."""
    monkeypatch.setenv("AUTODIFF_LAB_RENDERER", "wasm")
