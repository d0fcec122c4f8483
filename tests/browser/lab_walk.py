"""Helpers for browser tests that drive one JupyterLab tab through several notebooks.

The tab is opened once (:func:`open_lab`); notebooks are then opened, run and closed with
JupyterLab's own commands through ``window.jupyterapp`` (the test server runs with
``--LabApp.expose_app_in_browser``), so no page reload happens between notebooks.
"""

from __future__ import annotations

# Start opening ``path`` and running every cell in the background of the page (several may
# be in flight: one kernel each); WAIT_JS awaits it and reports what the notebook model
# holds then: each code cell's source, execution count and outputs (nbformat JSON).
START_JS = """(path) => {
  window.__walk = window.__walk || {};
  if (window.__walk[path]) return;
  window.__walk[path] = (async () => {
    const app = window.jupyterapp;
    const started = performance.now();
    const panel = await app.commands.execute(
      'docmanager:open', {path, factory: 'Notebook', options: {mode: 'tab-after'}});
    await panel.context.ready;
    await panel.sessionContext.ready;
    const kernelReady = performance.now();
    // clear the stored outputs and counts first: afterwards, a count means the cell ran
    const target = {widgetId: panel.id, activate: false};
    await app.commands.execute('notebook:clear-all-cell-outputs', target);
    await app.commands.execute('notebook:run-all-cells', target);
    // run-all resolves when the last cell finished; wait for the kernel's idle too
    while (panel.sessionContext.session?.kernel?.status !== 'idle') {
      await new Promise(r => setTimeout(r, 100));
    }
    const cells = [];
    for (const cell of panel.content.model.cells) {
      if (cell.type !== 'code') continue;
      cells.push({source: cell.sharedModel.getSource(), count: cell.executionCount,
                  outputs: cell.outputs.toJSON()});
    }
    return {cells, id: panel.id, seconds: [(kernelReady - started) / 1000,
                                           (performance.now() - kernelReady) / 1000]};
  })();
}"""

WAIT_JS = """async (path) => {
  const report = await window.__walk[path];
  delete window.__walk[path];
  window.jupyterapp.shell.activateById(report.id);
  return report;
}"""

CLOSE_JS = """async (id) => {
  const app = window.jupyterapp;
  const panel = [...app.shell.widgets('main')].find(w => w.id === id);
  if (!panel) return;
  await panel.sessionContext.shutdown();
  // closed the way a student closes a tab: JupyterLab orders the focus and disposal itself
  // (its own "reading 'footer' of null" can still follow: THIRD_PARTY_CONSOLE_ERRORS). The
  // run's outputs are not to be saved: no "save?" dialog.
  panel.context.model.dirty = false;
  panel.close();
  while (!panel.isDisposed) await new Promise(r => setTimeout(r, 20));
}"""

THEME_JS = """async (theme) => {
  await window.jupyterapp.commands.execute('apputils:change-theme', {theme});
}"""


def open_lab(browser, server, console_gate, viewport=(1400, 1000)):
    """A new browser context and page showing JupyterLab (empty workspace), its console
    watched. Returns ``(context, page)``; close the context when done."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    page.set_default_timeout(60_000)
    console_gate.watch(page)
    page.goto(f"{server.base}/lab?token={server.token}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    return context, page


def start(page, path: str) -> None:
    """Open ``path`` and run all its cells, without waiting (see :func:`wait`)."""
    page.evaluate(START_JS, path)


def wait(page, path: str) -> dict:
    """Wait for :func:`start`'s run of ``path``; show its tab; return the report."""
    return page.evaluate(WAIT_JS, path)


def run_notebook(page, path: str) -> dict:
    """Open ``path``, run all cells, show it; ``report['id']`` is the panel's DOM id."""
    start(page, path)
    return wait(page, path)


def close(page, panel_id: str) -> None:
    """Shut the notebook's kernel down and close its tab (no 'save?' dialog)."""
    page.evaluate(CLOSE_JS, panel_id)


def set_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme ('JupyterLab Light' / 'JupyterLab Dark') and wait for it."""
    page.evaluate(THEME_JS, theme)
    light = "true" if "Light" in theme else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached")
