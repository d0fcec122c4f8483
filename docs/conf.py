"""Sphinx configuration of the course book (``make book``).

The book is built from the committed notebooks **without executing them** (their stored
outputs are the product, checked by nbval), with the repository root as the source folder so
that the chapters' links between ``notebooks/`` and ``exercises/`` resolve as they do in
JupyterLab. ``solutions/`` is never a source. Nothing is loaded from the network: math is
MathML written at build time, no widget manager is loaded (each widget shows the static
picture stored beside it, with its "run this cell" line), and the theme's fonts and icons
ship with the theme.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parent.parent
# the version as autodiff_lab/__init__.py writes it (read, not imported: no numpy needed)
__version__ = re.search(
    r'^__version__ = "([^"]+)"', (ROOT / "autodiff_lab" / "__init__.py").read_text(), re.M
)[1]

project = "autodiff_lab"
author = "the autodiff_lab authors"
copyright = "the autodiff_lab authors, MIT licence"
version = release = __version__

extensions = ["myst_nb"]
root_doc = "docs/index"
include_patterns = ["docs/*.md", "notebooks/*.ipynb", "exercises/*.ipynb"]
exclude_patterns = ["**/*.new.ipynb", "**/*.backup-*.ipynb", "**/.ipynb_checkpoints"]

# --- notebooks: rendered from their stored outputs ---------------------------------------
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # no widget manager (it comes from a CDN): the static picture shows
# A widget's stored output carries its view (live only in a kernel) and its static picture
# as text/html: the book shows the picture.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]

# --- math: MathML, written at build time ------------------------------------------------
# As the offline slides do (autodiff_lab.slides.math_to_mathml): latex2mathml turns each
# formula into MathML, which the browser typesets itself — no script, no font to fetch, and
# screen readers read it. A formula it cannot parse is shown as its LaTeX source.
html_math_renderer = "mathml"

# --- the theme --------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = f"autodiff_lab {__version__}"
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_js_files = ["book.js"]
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
html_context = {"default_mode": "auto"}  # light or dark as the reader's system prefers
html_favicon = "_static/favicon.svg"  # served from the build (no request for /favicon.ico)
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False


def _mathml(tex: str, display: str) -> str:
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display=display)
    except Exception:  # any parser failure: the source, as the reader would type it
        return f'<code class="math-source">{html.escape(tex)}</code>'


def visit_math(self, node) -> None:
    self.body.append(_mathml(node.astext(), "inline"))
    raise nodes.SkipNode


def visit_displaymath(self, node) -> None:
    self.body.append(f'<div class="math-display">{_mathml(node.astext(), "block")}</div>')
    raise nodes.SkipNode


def write_front_door(app, exception) -> None:
    """``index.html`` at the site's root, sending the reader to the book's first page."""
    if exception is not None or app.builder.format != "html":
        return
    target = app.builder.get_target_uri(root_doc)
    (Path(app.outdir) / "index.html").write_text(
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0; url={target}">'
        f'<link rel="icon" href="_static/favicon.svg">'
        f"<title>autodiff_lab — the course book</title></head>"
        f'<body><a href="{target}">The course book</a></body></html>\n',
        encoding="utf-8",
    )


def setup(app) -> None:
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    app.connect("build-finished", write_front_door)
