"""Every chapter, end to end, in the real browser: JupyterLab runs each notebook as a student does.

Every notebook in ``notebooks/`` and every exercise notebook in ``exercises/`` (globbed when
the tests are collected, so new chapters are walked without editing this file) is opened in
one JupyterLab tab that is reused for all of them (no page reload between chapters), run
with *Run All Cells*, checked, screenshotted to ``artifacts/screenshots/walk-<name>.png``,
and closed with its kernel shut down. Three notebooks are in flight at once (the next ones
start while one is checked). Wall time on the 2-core machine shared with other work: about
52 s for the 19 notebooks (plus ~7 s to start the session's JupyterLab and Chromium).

Checked for each notebook, from JupyterLab's own notebook model (what the student's file
would hold if saved) and from the page:

- **no error output**: no cell has an ``error`` output and none printed a traceback to
  stderr; every cell ran (has an execution count).
- **every widget rendered**: each widget output (``application/vnd.jupyter.widget-view+json``)
  is drawn as a live widget (``.jupyter-widgets`` inside that output) and the page shows no
  bare widget repr (``IntSlider(...)``, ``VBox(children=...)``) and no "Error displaying
  widget".
- **no console error from the course's code**: the page's console errors, uncaught
  exceptions and HTTP errors, minus ``THIRD_PARTY_CONSOLE_ERRORS`` (tests/browser/conftest.py).
- **only what ``make lab`` installs**: the server's kernels cannot import the test extra
  (PyTorch, micrograd, pytest…; :mod:`lab_only`), so this walk is also the check that every
  chapter runs for a student (tests/test_notebooks_lab_only.py then runs only the solution
  notebooks); a chapter that compares with PyTorch must print that the comparison is skipped.

Exercise notebooks (decision): their stubs ``raise NotImplementedError`` *inside* the function
a student fills in, and the ``check(...)`` cell after each stub catches that and prints a
scorecard saying the exercise is not attempted. So "no error" means the same as for the
chapters — not a single error output — and, in addition, every ``check`` cell shows a
scorecard that says "not attempted" (so a stub that crashed the grader, or a grader that
passed a stub, fails the walk). A NotImplementedError escaping as an error output fails it.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import lab_walk
import pytest

ROOT = Path(__file__).resolve().parents[2]
# every chapter and exercise in JupyterLab: minutes, so in make test-exhaustive (CI runs it)
pytestmark = [pytest.mark.browser, pytest.mark.exhaustive]

CHAPTERS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
EXERCISES = sorted(f"exercises/{p.name}" for p in (ROOT / "exercises").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: A widget shown as text: its class name and a parenthesis (``IntSlider(value=3, ...)``).
BARE_REPR = re.compile(
    r"^\s*(Int|Float|FloatLog|Selection)?(Slider|RangeSlider|Text|Button|VBox|HBox|Box|HTML"
    r"|Image|Dropdown|Play|Output|Label|Checkbox|ToggleButtons?|Tab)\(",
    re.M,
)

#: Notebooks in flight at once, one kernel each: on two cores, a third kernel starting up or
#: waiting for the browser overlaps the two computing (measured: 2 in flight 58 s, 3: 52 s).
IN_FLIGHT = 3


@pytest.fixture(scope="module")
def walk_page(browser, jupyter_server, console_gate):
    """One JupyterLab tab for the whole walk (its console gate is checked per notebook)."""
    target = jupyter_server.root / "exercises"
    if not target.exists():
        shutil.copytree(ROOT / "exercises", target)
    context, page = lab_walk.open_lab(browser, jupyter_server, console_gate)
    yield page
    context.close()


def error_outputs(cells: list[dict]) -> list[str]:
    """Every error output and every traceback on stderr, as 'cell N: text' lines."""
    found = []
    for i, cell in enumerate(cells):
        for out in cell["outputs"]:
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("name") == "stderr" and "Traceback" in "".join(out.get("text", "")):
                found.append(f"cell {i}: traceback on stderr: {''.join(out['text'])[:300]}")
    return found


def widget_outputs(cells: list[dict]) -> int:
    return sum(WIDGET_VIEW in out.get("data", {}) for cell in cells for out in cell["outputs"])


@pytest.mark.parametrize("path", CHAPTERS + EXERCISES)
def test_notebook_runs_cleanly_in_jupyterlab(walk_page, path, console_gate, screenshot):
    page = walk_page
    seen = len(page.console_problems)
    start = time.monotonic()
    order = CHAPTERS + EXERCISES
    for ahead in order[order.index(path) : order.index(path) + IN_FLIGHT]:
        lab_walk.start(page, ahead)
    report = lab_walk.wait(page, path)
    cells = report["cells"]
    try:
        assert cells, f"{path}: no code cells"
        assert not error_outputs(cells), f"{path}: error outputs:\n" + "\n".join(
            error_outputs(cells)
        )
        not_run = [i for i, c in enumerate(cells) if c["count"] is None and c["source"].strip()]
        assert not not_run, f"{path}: cells {not_run} did not run"

        panel = page.locator(f"#{report['id']}")
        # every widget output is drawn as a live widget, none as text
        expected = widget_outputs(cells)
        if expected:
            page.wait_for_function(
                """([id, n]) => document.querySelectorAll(
                   `#${id} .jp-OutputArea-output .jupyter-widgets:not(.jupyter-widgets *)`
                   ).length >= n""",
                arg=[report["id"], expected],
            )
        text = panel.locator(".jp-OutputArea").all_inner_texts()
        joined = "\n".join(text)
        assert "Error displaying widget" not in joined, f"{path}: a widget failed to display"
        bare = BARE_REPR.findall(joined)
        assert not bare, f"{path}: widgets shown as text: {bare[:5]}"

        if path.startswith("exercises/"):
            checks = [c for c in cells if re.match(r"\s*check\(", c["source"])]
            assert checks, f"{path}: no check() cells"
            for c in checks:
                shown = "".join(
                    "".join(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
                    for out in c["outputs"]
                )
                assert "not attempted" in shown.lower(), (
                    f"{path}: {c['source']!r} says {shown[:200]!r}"
                )
        if any("import_torch(" in c["source"] for c in cells):
            # a student's kernel (make lab installs no PyTorch): the comparisons step aside
            said = "".join(
                "".join(out.get("text", "")) for c in cells for out in c["outputs"]
            )  # fmt: skip
            assert "PyTorch is not installed, so this comparison is skipped" in said, path
        kind = "exercise-" if path.startswith("exercises/") else ""
        name = f"{kind}{Path(path).stem}"
        # the picture shows the first live widget (or the first output) after the run
        panel.evaluate(
            "p => (p.querySelector('.jp-OutputArea-output .jupyter-widgets')"
            " || p.querySelector('.jp-OutputArea-output'))?.scrollIntoView({block: 'center'})"
        )
        screenshot(page, f"walk-{name}")
    finally:
        lab_walk.close(page, report["id"])
        took = time.monotonic() - start
        print(
            f"{path}: kernel {report['seconds'][0]:.1f} s, run {report['seconds'][1]:.1f} s, "
            f"total {took:.1f} s"
        )
    ours = console_gate.ours(page.console_problems[seen:])
    assert not ours, "errors in the browser console:\n" + "\n".join(ours)
