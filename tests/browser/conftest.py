"""Real-browser test fixtures: a JupyterLab server and a headless Chromium page.

Reusable by any browser test under ``tests/browser/``:

- ``jupyter_server``: a running ``jupyter lab`` (127.0.0.1, free port, random token) whose
  root is a temporary copy of ``notebooks/`` plus any notebooks tests add. It has
  ``.url(path, app="lab")`` (``app``: ``lab``, ``notebooks`` for Notebook 7, ``voila``),
  ``.root`` (the folder it serves) and ``.token``. One server per test session. Its
  kernels are a student's: the test extra (PyTorch, micrograd, pytest…) cannot be imported
  in them (:mod:`lab_only`), so every notebook the browser tests run, runs as under
  ``make lab``.
- ``browser``: a Playwright Chromium (Debian's ``/usr/bin/chromium``), one per session.
- ``browser_page``: a fresh page (1400x1000) per test; closed afterwards. Any console
  error, uncaught exception or HTTP error response fails the test, unless it is listed in
  ``THIRD_PARTY_CONSOLE_ERRORS`` (each entry says why it is not the course's).
- ``jupyterlab``: helpers for JupyterLab 4 (open a notebook, run all, wait for idle).
- ``screenshot``: ``screenshot(page_or_element, name)`` saves
  ``artifacts/screenshots/<name>.png`` and returns the path.

Availability: with ``CI=true`` these tests must run, so a missing Chromium or Playwright is
an error. Without CI they are skipped (one line saying how to enable them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from browser_support import CHROMIUM, IN_CI, browser_problems
from lab_only import student_kernel

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives a real browser (Chromium + Playwright)")


_SKIPPED_BECAUSE: list[str] = []


def pytest_terminal_summary(terminalreporter):
    """One line at the end of the run when the browser tests could not run."""
    if _SKIPPED_BECAUSE:
        terminalreporter.write_line(_SKIPPED_BECAUSE[0], yellow=True, bold=True)


def _require_browser() -> None:
    """Skip (locally) or fail (CI) when the browser or Playwright is missing."""
    problems = browser_problems()
    if problems:
        if IN_CI:
            pytest.fail("CI=true requires the browser tests to run, but: " + "; ".join(problems))
        if not _SKIPPED_BECAUSE:
            _SKIPPED_BECAUSE.append(problems[0])
        pytest.skip(problems[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """A ``jupyter lab`` process serving ``root`` on 127.0.0.1."""

    def __init__(self, root: Path, log_path: Path):
        self.root = root
        self.port = _free_port()
        self.token = uuid.uuid4().hex
        self.base = f"http://127.0.0.1:{self.port}"
        # Workspaces and user settings live in the temporary folder: a test that changes
        # the theme or dismisses a notification leaves the user's ~/.jupyter untouched.
        workspaces = root.parent / "workspaces"
        settings = root.parent / "user-settings"
        workspaces.mkdir(exist_ok=True)
        settings.mkdir(exist_ok=True)
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            f"--ServerApp.token={self.token}", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root}", f"--LabApp.workspaces_dir={workspaces}",
            f"--LabApp.user_settings_dir={settings}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # window.jupyterapp: tests open notebooks and run commands in one reused tab
            "--LabApp.expose_app_in_browser=True",
        ]  # fmt: skip
        if hasattr(os, "getuid") and os.getuid() == 0:
            cmd.append("--allow-root")
        env = dict(os.environ, AUTODIFF_LAB_RENDERER="wasm", OMP_NUM_THREADS="1")
        env["JUPYTER_PATH"] = str(student_kernel(root.parent))  # kernels: a student's
        # the course's JupyterLab defaults, written as `make lab` writes them (no news prompt)
        subprocess.run([sys.executable, str(ROOT / "tools" / "lab_settings.py")], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready(log_path)

    def _wait_ready(self, log_path: Path, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{log_path.read_text()[-3000:]}")
            status = f"{self.base}/api/status?token={self.token}"
            try:
                with urllib.request.urlopen(status, timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab not ready in {timeout} s:\n{log_path.read_text()[-3000:]}")

    def url(self, path: str, app: str = "lab") -> str:
        """The address of ``path`` (relative to the root) in JupyterLab, Notebook 7 or Voila."""
        prefix = {"lab": "lab/tree", "notebooks": "notebooks", "voila": "voila/render"}[app]
        return f"{self.base}/{prefix}/{path}?token={self.token}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory):
    """A JupyterLab server over a temporary copy of notebooks/ (see the module docstring)."""
    _require_browser()
    base = tmp_path_factory.mktemp("jupyter")
    root = base / "root"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    server = JupyterServer(root, base / "server.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium driven by Playwright (one per session)."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


# Console errors the browser tests accept: each comes from third-party code outside the
# course, shown to happen without any course code (see the reason beside it). Anything
# else logged as an error — by the course's widgets, pages or notebooks — fails the test.
THIRD_PARTY_CONSOLE_ERRORS = [
    # jupyterlab-rise 0.43 (its bundled @jupyter/web-components design tokens: a
    # colorContrast/reflectToCSS recursion in static/rise/*.bundle.js) logs dozens of these
    # when a slideshow opens; a 2-cell notebook with no course code logs 31 of them
    # (measured 2026-11-30). A similar report upstream: jupyterlab-contrib/rise#144.
    (r"RangeError: Maximum call stack size exceeded", r"/static/rise/"),
    # RISE always asks for <notebook stem>.css beside the notebook (its per-notebook style
    # hook; notebooks/rise.css, its per-folder hook, exists): the server answers 404.
    (r"/files/.*?(?<!/rise)\.css", r""),
    # Voila loads every installed JupyterLab extension (jupytext, nbgrader, ipylab, notebook's
    # lab extension) into an app that lacks the services they need.
    (r"shared module|Shared module|Plugin '[^']+' failed to activate"
     r"|Cannot access '\w+' before initialization", r"/voila/"),
    # RISE's slideshow app loads them too. The test extra's ipylab needs JupyterLab's main
    # menu (`make lab` does not install it). Notebook 7's own lab extension (its "open in
    # Notebook" commands; whole stack in @jupyter-notebook/lab-extension, loaded by
    # static/rise/) finds no @jupyterlab/docregistry in RISE's shared scope and reads its
    # INotebookShell / INotebookPathOpener tokens too early: those commands do not exist in
    # a slideshow; the widget manager loads (tests/browser/test_rise_slides.py drives the
    # widgets). No widget-manager error is listed for RISE.
    (r"Plugin 'ipylab:plugin' failed to activate", r"/rise/"),
    (r"RUNTIME-012[\s\S]*\"shareKey\":\"@jupyterlab/docregistry\""
     r"|Cannot access '\w+' before initialization",
     r"/@jupyter-notebook/lab-extension/static/[\s\S]*/static/rise/"),
    # Notebook 7.6's own core (notebook_core.*.js) throws these: the first on every page
    # load (a settings "load" signal handler), the second when a JupyterLab page was open
    # on the same server before; a 2-cell notebook with no course code throws both
    # (measured 2026-11-30).
    (r"uncaught (Cannot read properties of undefined \(reading 'schema'\)"
     r"|Command 'filebrowser:open-path' not registered)",
     r"/static/notebook/notebook_core\."),
    # jupyter_server 2's FileFindHandler caches a static file's absolute path by its name
    # alone (handlers.py, `_static_paths`), and Notebook 7 and JupyterLab ship the same
    # hashed fonts (e.g. 620019ed9d1100b6.woff2): once one app fetched a font, the other
    # app's request for it is refused with 403 "not in root static directory" (server log).
    (r"403.*?/static/(lab|notebook)/[0-9a-f]+\.(woff2?|ttf|eot)", r""),
    # JupyterLab's debugger extension asks each new kernel for its debug state; when the
    # kernel is shut down before it replies (the chapter walk closes each notebook with its
    # kernel as soon as it is checked), JupyterLab logs this from its own core bundle — or,
    # when the session it asks about has no kernel any more, "Kernel name is not defined"
    # (once in chapter 03's walk on 2026-12-02; the notebook had run and rendered, and the
    # course does not use the debugger) — or "A kernel is required to send debug messages"
    # (once in exercises/02's walk, stop 32: every cell had run, its checks were shown).
    (r"Could not restore the debugger state: (Canceled future for debug_request"
     r"|Kernel name is not defined|A kernel is required to send debug messages)",
     r"/static/lab/jlab_core\."),
    # JupyterLab 4.6's Notebook._ensureFocus (its own core bundle, the whole stack) handles an
    # activate-request that reaches a notebook after it was closed — closed with JupyterLab's
    # own close (panel.close(), as a student closes a tab), so the order is JupyterLab's. The
    # chapter walk closes a tab while the next ones open (3 in flight) and meets it about one
    # walk in two since 2026-12-01; no course code is on the stack.
    (r"Cannot read properties of null \(reading 'footer'\)\s+at \w+\._ensureFocus",
     r"/static/lab/jlab_core\."),
    # jupyter_server 2's GET /api/kernels lists a kernel that is still starting (the walk has
    # 3 in flight) and reads its last_activity, which is None until the kernel is up: the
    # server log shows "TraitError: The 'last_activity' trait of a ServerKernelManager
    # instance expected a datetime, not the NoneType None" and answers 500. JupyterLab polls
    # that list again; no course code is involved.
    (r"(HTTP 500 for|status of 500 \(Internal Server Error\)).*?/api/kernels\?\d+\)?$", r""),
    # The machine has no network: Voila's template links Font Awesome from a CDN, reveal.js
    # themes link Google Fonts.
    (r"ERR_NAME_NOT_RESOLVED|ERR_INTERNET_DISCONNECTED",
     r"cdn\.jsdelivr\.net|fonts\.googleapis\.com"),
]  # fmt: skip


def _note_console(problems: list[str], message) -> None:
    if message.type == "error":
        where = message.location.get("url", "") if message.location else ""
        problems.append(f"console error: {message.text} (at {where})")


def _origin(error) -> str:
    """The first script URL in an uncaught exception's stack (where it was thrown)."""
    import re

    found = re.search(r"https?://\S+?\.js", getattr(error, "stack", "") or "")
    return f"at {found.group(0)}" if found else "no stack"


def _third_party(problem: str) -> bool:
    """Whether ``problem`` matches an entry of THIRD_PARTY_CONSOLE_ERRORS (text and origin)."""
    import re

    return any(
        re.search(text, problem) and re.search(origin, problem)
        for text, origin in THIRD_PARTY_CONSOLE_ERRORS
    )


def watch_console(page) -> list[str]:
    """Record the page's console errors, uncaught exceptions and HTTP errors (a live list,
    also set as ``page.console_problems``)."""
    problems: list[str] = []
    page.on("console", lambda m: _note_console(problems, m))
    page.on("pageerror", lambda e: problems.append(f"uncaught {e} ({_origin(e)})"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status} for {r.url}") if r.status >= 400 else None,
    )
    page.console_problems = problems  # a test may look at them before teardown
    return problems


def courses_own(problems: list[str]) -> list[str]:
    """The problems not listed in THIRD_PARTY_CONSOLE_ERRORS (those fail a test)."""
    return [p for p in problems if not _third_party(p)]


@pytest.fixture(scope="session")
def console_gate():
    """For tests that manage their own page: ``console_gate.watch(page)`` starts recording
    (returns the live list), ``console_gate.ours(problems)`` keeps those that fail a test."""
    import types

    return types.SimpleNamespace(watch=watch_console, ours=courses_own)


@pytest.fixture
def browser_page(browser):
    """A fresh browser page (its own context: no shared storage between tests)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = watch_console(page)
    yield page
    context.close()
    ours = courses_own(problems)
    if ours:
        pytest.fail("errors in the browser console:\n" + "\n".join(ours), pytrace=False)


def save_screenshot(page_or_element, name: str, **kwargs) -> Path:
    """Save a screenshot (of a page or one element) as artifacts/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page_or_element.screenshot(path=str(path), **kwargs)
    return path


@pytest.fixture
def screenshot():
    """``screenshot(page_or_element, name)`` saves artifacts/screenshots/<name>.png."""
    return save_screenshot


class JupyterLabUI:
    """Steps that work in JupyterLab 4 (selectors from shared/JUPYTER-NOTES.md)."""

    def __init__(self, page, server: JupyterServer):
        self.page = page
        self.server = server

    def open(self, path: str):
        """Open a notebook and wait until its kernel is idle."""
        # `reset`: start from an empty workspace, not the tabs an earlier test left open
        self.page.goto(self.server.url(path, "lab") + "&reset")
        # other notebooks may be restored in hidden tabs: wait for the one shown
        self.page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden)", timeout=60_000)
        self.dismiss_news()
        self.wait_idle()

    def dismiss_news(self):
        button = self.page.locator(".Toastify__toast button:has-text('No')")
        if button.count():
            button.first.click()

    def wait_idle(self, timeout: float = 60_000):
        self.page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=timeout)

    def run_all(self):
        """Run > Run All Cells, then wait for every cell to finish."""
        self.page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        self.page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-InputArea-prompt')]"
            ".every(p => !p.textContent.includes('*'))",
            timeout=90_000,
        )
        self.wait_idle()


@pytest.fixture
def jupyterlab(browser_page, jupyter_server):
    """JupyterLab helpers bound to a fresh page and the session's server."""
    return JupyterLabUI(browser_page, jupyter_server)
