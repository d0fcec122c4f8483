"""Lecture mode: export a chapter as reveal.js HTML slides (``autodiff-lab slides CHAPTER``).

Every chapter cell carries ``metadata.slideshow.slide_type`` (slide / subslide / fragment /
``-`` / skip / notes). Two ways to present:

- **Live** (recommended): open the chapter in JupyterLab, run it, and press Alt+R: the
  course's lab settings (tools/lab_settings.py) make it open ``jupyterlab-rise``'s slideshow
  in its own browser tab, the whole window wide (F11: full screen); bundled reveal.js,
  widgets stay live under ``make lecture`` (ipywidgets 7.8.5:
  tools/lecture-constraints.txt), no network.
- **Exported HTML** (this module): nbconvert's ``SlidesExporter`` writes one ``.slides.html``
  file with the stored outputs of the notebook *as committed* (``git show HEAD:…`` where the
  chapter is in a git work tree: a chapter run in place holds a student's outputs). That
  page loads reveal.js, require.js, jQuery, MathJax and
  the Jupyter widget manager from CDNs, so it needs network when opened. With
  ``--offline`` the page loads nothing from the network: the CDN tags are removed, a small
  built-in navigator (arrow keys) replaces reveal.js, widgets show their stored static
  picture, and math is converted to MathML (``latex2mathml``, in the ``lab`` extra), which
  the browser draws itself; an expression it cannot convert stays as LaTeX source.

Every slide of the offline export fits a 1280×720 projector (body text 18 px, code 16 px:
``_OFFLINE_CSS``), tested in Chromium by tests/browser/test_slides_fit.py. A slide that
scrolls on purpose carries the cell tag ``slide-scrolls`` (on any of its cells) and the
export says so on the slide, under its first cell: "(this slide scrolls)".
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from html import escape, unescape
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DEFAULT_OUT = Path("build") / "slides"

HELP = "export a chapter as reveal.js HTML slides (needs network to view; see --offline)"

DESCRIPTION = """\
Export a chapter notebook as reveal.js HTML slides, built from the stored outputs (the
notebook is not re-run). CHAPTER is a path to a notebook, or a chapter number or name
prefix looked up in notebooks/: "3", "03", "04_tensors", "tensors"; "all" exports every
notebook in notebooks/. A chapter split into parts (notebooks/03_1_*.ipynb, 03_2_*.ipynb):
"03" exports every part, one file each; "03.1" (or "3.1", "03_1") exports part 1 alone.

Network: the default HTML loads reveal.js, require.js, jQuery, MathJax and the Jupyter
widget manager from CDNs (unpkg, cdnjs, jsdelivr) when it is opened; without network it
shows a plain page. --offline writes a page that loads nothing from the network: a small
built-in navigator (arrow keys / space; N toggles speaker notes) replaces reveal.js,
widgets show their stored static picture, and math is drawn as MathML by the browser
(converted with latex2mathml; anything it cannot convert stays as LaTeX source).

The file goes to build/slides/ unless --out says otherwise. To present live with working
widgets and no network, open the chapter in JupyterLab and press Alt+R (View > Render as
Reveal Slideshow, from jupyterlab-rise)."""


# --- finding a chapter ---------------------------------------------------------------------


def notebooks_dir() -> Path:
    """``notebooks/`` of the current directory if it has one, else the repository's."""
    here = Path.cwd() / "notebooks"
    return here if here.is_dir() else Path(__file__).resolve().parent.parent / "notebooks"


#: A chapter split into parts: ``NN_K_slug`` is part K of chapter NN (``03_1_value_and_backward``).
PART = re.compile(r"^(\d\d)_(\d)_")
#: A part named by number: ``03.1``, ``3.1``, ``03_1``.
PART_SPEC = re.compile(r"^(\d{1,2})[._](\d)$")


def find_chapters(spec: str, folder: Path | None = None) -> list[Path]:
    """The notebooks named by ``spec``: one chapter, or every part of a chapter in parts.

    ``"3"`` and ``"03"`` find ``03_*.ipynb`` — all of its parts, in order, when chapter 03
    is split into ``03_1_*`` and ``03_2_*``; ``"03.1"``, ``"3.1"`` and ``"03_1"`` find part 1
    alone; ``"tensors"`` finds ``04_tensors.ipynb``; a path is that notebook. Raises
    FileNotFoundError listing the chapters when nothing matches, or when ``spec`` names
    several notebooks that are not the parts of one chapter (``"00"``: two chapters).
    """
    path = Path(spec)
    if path.suffix == ".ipynb" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"slides: no notebook at {spec!r}")
        return [path]
    folder = folder or notebooks_dir()
    chapters = sorted(folder.glob("*.ipynb"))
    part = PART_SPEC.match(spec)
    if part:
        key = f"{int(part[1]):02d}_{part[2]}_"
    else:
        key = spec.zfill(2) if spec.isdigit() else spec
    matches = [p for p in chapters if p.stem == key]
    matches = matches or [p for p in chapters if p.stem.startswith(key)]
    matches = matches or [p for p in chapters if key.lower() in p.stem.lower()]
    if len(matches) == 1 or _parts_of_one_chapter(matches):
        return matches
    names = ", ".join(p.stem for p in chapters) or "(none)"
    if not matches:
        raise FileNotFoundError(f"slides: no chapter matches {spec!r} in {folder}; have: {names}")
    raise FileNotFoundError(
        f"slides: {spec!r} is ambiguous, it matches {', '.join(p.stem for p in matches)}; "
        "give more of the name"
    )


def _parts_of_one_chapter(paths: list[Path]) -> bool:
    """True when ``paths`` are two or more parts (``NN_K_*``) of the same chapter NN."""
    found = [PART.match(p.stem) for p in paths]
    return len(paths) > 1 and all(found) and len({m[1] for m in found if m}) == 1


def find_chapter(spec: str, folder: Path | None = None) -> Path:
    """The one notebook named by ``spec`` (see :func:`find_chapters`).

    A chapter in parts is not one notebook: ``"03"`` then raises FileNotFoundError naming
    its parts (``"03.1"`` finds the first).
    """
    found = find_chapters(spec, folder)
    if len(found) > 1:
        raise FileNotFoundError(
            f"slides: chapter {spec!r} has {len(found)} parts, "
            f"{', '.join(p.stem for p in found)}; name one (e.g. {spec}.1)"
        )
    return found[0]


# --- exporting -----------------------------------------------------------------------------


def committed_text(notebook: Path) -> tuple[str, str]:
    """The notebook as committed, and where it came from: ``(text, "git HEAD")``.

    A chapter run in place (or autosaved) holds a student's outputs; the slides show the
    course as committed. Outside a git work tree, or for a file git does not track, the
    file on disk is all there is: ``(text, "the file")``.
    """
    import subprocess

    notebook = Path(notebook).resolve()
    try:
        done = subprocess.run(
            ["git", "-C", str(notebook.parent), "show", f"HEAD:./{notebook.name}"],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is not None and done.returncode == 0:
        return done.stdout.decode("utf-8"), "git HEAD"
    return notebook.read_text(encoding="utf-8"), "the file"


def count_slides(nb) -> tuple[int, int]:
    """(slides, subslides) the way reveal.js will show them, from the cells' metadata.

    The first visible cell always opens a slide; every slide opens its first subslide.
    """
    slides = subslides = 0
    started = False
    for cell in nb.cells:
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
        if not started:
            if kind in ("notes", "skip"):
                continue
            kind, started = "slide", True
        if kind == "slide":
            slides += 1
            subslides += 1
        elif kind == "subslide":
            subslides += 1
    return slides, subslides


def _prefer_static_widget_views(nb):
    """A copy of ``nb`` whose widget outputs keep only their static fallback (text/html...)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
    nb.metadata.pop("widgets", None)
    return nb


#: The cell tag of a slide that is allowed to be taller than the screen, and what the export
#: writes on such a slide (under the cell that opens it) so that the audience knows.
SCROLLS_TAG = "slide-scrolls"
SCROLLS_NOTE = "(this slide scrolls)"


def _say_where_slides_scroll(nb):
    """A copy of ``nb`` where each slide (or sub-slide) with a cell tagged SCROLLS_TAG
    shows SCROLLS_NOTE right under the cell that opens it."""
    from nbformat.v4 import new_markdown_cell

    nb = copy.deepcopy(nb)
    cells, opener, marked = nb.cells, 0, set()
    for i, cell in enumerate(cells):
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
        if kind in ("slide", "subslide"):
            opener = i
        if SCROLLS_TAG in cell.get("metadata", {}).get("tags", []):
            marked.add(opener)
    for i in sorted(marked, reverse=True):
        note = new_markdown_cell(f"*{SCROLLS_NOTE}*")
        note.metadata["slideshow"] = {"slide_type": "-"}
        cells.insert(i + 1, note)
    return nb


_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S | re.I)
_REMOTE_LINK = re.compile(r"<link\b[^>]*href=\"https?://[^\"]*\"[^>]*>", re.I)

_OFFLINE_CSS = """
html, body { margin: 0; height: 100%; background: #fff; }
.reveal .slides > section, .reveal .slides > section > section { display: none; }
.reveal .slides > section.present, .reveal .slides section.present { display: block; }
.reveal .slides section { max-width: 1100px; margin: 0 auto; padding: 24px 40px 64px; }
/* a picture never makes a slide taller than the screen (a stored stepper was 1,426 px):
   it shrinks to fit 70 % of the window's height, keeping its proportions */
.reveal section img { max-height: 70vh; width: auto; object-fit: contain; }
.reveal section svg { max-height: 70vh; }
.reveal .fragment.hidden-fragment { visibility: hidden; }
.reveal aside.notes { display: none; }
math[display="block"] { display: block; margin: 0.6em 0; font-size: 1.15em; }
/* speaker notes (N) open over the slide's lower part, in view without scrolling */
body.show-notes aside.notes { display: block; position: fixed; left: 0; right: 0; bottom: 0;
  max-height: 40vh; overflow-y: auto; z-index: 10; margin: 0;
  border-top: 4px solid #e0a000; background: #fff8e1; padding: 8px 24px 40px; }
/* long code lines wrap instead of scrolling: nothing is cut off and no region needs
   keyboard scrolling (WCAG 2.1.1) */
.reveal pre { white-space: pre-wrap; overflow-wrap: anywhere; overflow-x: visible; }
/* text contrast at least 4.5:1 on the code and page backgrounds (WCAG 1.4.3): darker
   shades of the JupyterLab theme's prompt and syntax colours */
.jp-InputPrompt { color: #1f5f99 !important; opacity: 1 !important; }
.jp-OutputPrompt { color: #9c3f22 !important; opacity: 1 !important; }
/* links look like links without relying on colour (WCAG 1.4.1) */
.reveal a, .jp-RenderedHTMLCommon a { text-decoration: underline !important; }
.highlight .c, .highlight .c1, .highlight .cm, .highlight .ch, .highlight .cs,
.highlight .cp, .highlight .cpf { color: #2e6363 !important; }
.highlight .m, .highlight .mf, .highlight .mi, .highlight .mh, .highlight .mo,
.highlight .mb, .highlight .il { color: #1e6b1e !important; }
.highlight .o, .highlight .ow { color: #7a1fa2 !important; }
.highlight .k, .highlight .kn, .highlight .kc, .highlight .kd, .highlight .kr,
.highlight .kp, .highlight .nb, .highlight .bp { color: #0b6b0b !important; }
.highlight .s, .highlight .s1, .highlight .s2, .highlight .sa, .highlight .se,
.highlight .sd, .highlight .si { color: #a31515 !important; }
.highlight .nf, .highlight .nc, .highlight .nn { color: #1a4f9c !important; }
.reveal section svg, .reveal section img { max-width: 100%; height: auto; }
:root { --jp-code-font-size: 16px; --jp-content-font-size1: 18px; }
#offline-counter { position: fixed; right: 16px; bottom: 12px; font: 16px sans-serif;
  color: #666; }
"""

# A minimal navigator standing in for reveal.js: one subslide at a time, fragments in turn.
_OFFLINE_JS = """
(function () {
  var leaves = [];
  document.querySelectorAll('.reveal .slides > section').forEach(function (slide) {
    var inner = slide.querySelectorAll(':scope > section');
    if (inner.length) { inner.forEach(function (s) { leaves.push(s); }); }
    else { leaves.push(slide); }
  });
  // wide tables and display math may scroll sideways: a keyboard user can focus them (Tab)
  // and scroll them with the left/right arrows (WCAG 2.1.1)
  var wideContent = '.jp-RenderedMarkdown table, .jp-RenderedMarkdown math[display="block"]';
  document.querySelectorAll(wideContent).forEach(function (wide) {
    var box = wide.closest('.jp-RenderedMarkdown');
    box.setAttribute('tabindex', '0');
    box.setAttribute('role', 'region');
    box.setAttribute('aria-label', 'text with a wide table or formula (arrow keys scroll it)');
  });
  var current = 0, shown = 0;
  var counter = document.createElement('div');
  counter.id = 'offline-counter';
  document.body.appendChild(counter);
  function fragments() { return leaves[current].querySelectorAll('.fragment'); }
  function render() {
    document.querySelectorAll('.reveal section.present').forEach(function (s) {
      s.classList.remove('present');
    });
    var leaf = leaves[current];
    leaf.classList.add('present');
    if (leaf.parentElement.tagName === 'SECTION') { leaf.parentElement.classList.add('present'); }
    fragments().forEach(function (f, i) { f.classList.toggle('hidden-fragment', i >= shown); });
    counter.textContent = (current + 1) + ' / ' + leaves.length;
    history.replaceState(null, '', '#/' + (current + 1));
    window.scrollTo(0, 0);
  }
  function next() {
    if (shown < fragments().length) { shown += 1; }
    else if (current < leaves.length - 1) { current += 1; shown = 0; }
    render();
  }
  function prev() {
    if (shown > 0) { shown -= 1; }
    else if (current > 0) { current -= 1; shown = fragments().length; }
    render();
  }
  document.addEventListener('keydown', function (e) {
    var focused = document.activeElement;
    var inRegion = focused && focused.getAttribute('role') === 'region';
    if (inRegion && (e.key === 'ArrowLeft' || e.key === 'ArrowRight')) { return; }
    if (['ArrowRight', 'ArrowDown', 'PageDown', ' '].indexOf(e.key) >= 0) { next(); }
    else if (['ArrowLeft', 'ArrowUp', 'PageUp'].indexOf(e.key) >= 0) { prev(); }
    else if (e.key === 'Home') { current = 0; shown = 0; render(); }
    else if (e.key === 'End') { current = leaves.length - 1; shown = 0; render(); }
    else if (e.key === 'n' || e.key === 'N') { document.body.classList.toggle('show-notes'); }
    else { return; }
    e.preventDefault();
  });
  var m = /^#\\/(\\d+)/.exec(location.hash);
  if (m) { current = Math.min(Math.max(parseInt(m[1], 10) - 1, 0), leaves.length - 1); }
  render();
})();
"""


# Code, scripts and styles are left alone; math is looked for in the other text only.
_VERBATIM = re.compile(r"(<(pre|code|script|style)\b.*?</\2>)", re.S | re.I)
_TAG = re.compile(r"(<[^>]+>)")
_DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)([^$]+?)(?<!\\)\$")


def math_to_mathml(html: str) -> str:
    """Replace ``$$…$$`` and ``$…$`` in the page's text with MathML, which browsers draw
    without MathJax. An expression latex2mathml cannot parse (or a missing latex2mathml)
    keeps its LaTeX source."""
    try:
        from latex2mathml.converter import convert
    except ImportError:
        return html

    def to_mathml(match, display):
        source = unescape(match.group(1)).strip()
        try:
            return convert(source, display=display)
        except Exception:  # any parser failure: keep the source
            return match.group(0)

    def in_text(text):
        text = _DISPLAY_MATH.sub(lambda m: to_mathml(m, "block"), text)
        return _INLINE_MATH.sub(lambda m: to_mathml(m, "inline"), text)

    def in_markup(chunk):  # text between tags only, never inside a tag's attributes
        return "".join(p if p.startswith("<") else in_text(p) for p in _TAG.split(chunk))

    out, done = [], 0
    for verbatim in _VERBATIM.finditer(html):
        out += [in_markup(html[done : verbatim.start()]), verbatim.group(0)]
        done = verbatim.end()
    out.append(in_markup(html[done:]))
    return "".join(out)


#: Under a widget's stored picture in the exported slides: why nothing moves, and where it does.
EXPORT_HINT = (
    "Stored picture (exported slides): the controls work in the live slideshow "
    "(JupyterLab, Alt+R), after running the chapter."
)


def make_offline(html: str) -> str:
    """Strip everything the page would fetch from the network; add the built-in navigator;
    draw math as MathML; say under each widget's picture that it is a stored one."""
    from .viz.render import RERUN_HINT

    html = html.replace(escape(RERUN_HINT), escape(EXPORT_HINT))
    html = _SCRIPT.sub("", html)
    html = _REMOTE_LINK.sub("", html)
    html = math_to_mathml(html)
    html = html.replace("</head>", f"<style>{_OFFLINE_CSS}</style>\n</head>", 1)
    return html.replace("</body>", f"<script>{_OFFLINE_JS}</script>\n</body>", 1)


def export_slides(
    notebook: Path, out_dir: Path | None = None, *, offline: bool = False, reveal_prefix=None
) -> Path:
    """Write ``<out_dir>/<name>.slides.html`` for ``notebook`` and return its path.

    ``out_dir`` defaults to ``build/slides`` under the current directory.
    """
    import nbformat
    from nbconvert import SlidesExporter

    notebook = Path(notebook)
    nb = _say_where_slides_scroll(nbformat.reads(committed_text(notebook)[0], as_version=4))
    if offline:
        nb = _prefer_static_widget_views(nb)
    exporter = SlidesExporter()
    if reveal_prefix:
        exporter.reveal_url_prefix = reveal_prefix
    exporter.reveal_number = "c/t"
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    if offline:
        html = make_offline(html)
    out_dir = Path(out_dir) if out_dir else DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{notebook.stem}.slides.html"
    target.write_text(html, encoding="utf-8")
    return target


# --- command line --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """``autodiff-lab slides``: export, print where each file went and how many slides."""
    import nbformat

    try:
        if args.chapter == "all":
            notebooks = sorted(notebooks_dir().glob("*.ipynb"))
            if not notebooks:
                raise FileNotFoundError(f"slides: no notebooks in {notebooks_dir()}")
        else:
            notebooks = find_chapters(args.chapter)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    mode = "offline, no network needed" if args.offline else "loads reveal.js etc. from CDNs"
    for notebook in notebooks:
        target = export_slides(
            notebook, args.out, offline=args.offline, reveal_prefix=args.reveal_prefix
        )
        text, source = committed_text(notebook)
        slides, subslides = count_slides(nbformat.reads(text, as_version=4))
        print(f"wrote {target} ({slides} slides, {subslides} subslides; {mode}; from {source})")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``slides`` sub-command to the ``autodiff-lab`` parser."""
    parser = subparsers.add_parser(
        "slides",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "chapter",
        metavar="CHAPTER",
        help='notebook path, chapter ("03": every part of it; "03.1": one part; "tensors") '
        'or "all"',
    )
    parser.add_argument(
        "--out", metavar="DIR", type=Path, default=None,
        help="folder for the .slides.html file (default: build/slides)",
    )  # fmt: skip
    parser.add_argument(
        "--offline", action="store_true",
        help="self-contained page: no CDN, built-in navigator, static widgets, MathML math",
    )  # fmt: skip
    parser.add_argument(
        "--reveal-prefix", metavar="URL", default=None,
        help="where reveal.js lives (default: unpkg CDN); e.g. a local copy's folder",
    )  # fmt: skip
    parser.set_defaults(run=run)
    return parser
