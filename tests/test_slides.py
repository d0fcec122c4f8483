"""Lecture mode: every chapter carries slide metadata and exports to reveal.js slides.

The expected number of slides is counted here straight from the cells' metadata (not with
the code under test), then compared with the ``<section>`` elements in the exported HTML:
reveal.js nests each subslide ``<section>`` inside its slide's ``<section>``, so a chapter
with S slide cells and U subslide cells has 2 S + U sections.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from notebook_helpers import chapter_label, chapter_notebooks

from autodiff_lab import slides

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _slide_type(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


def _tiny_notebook(path: Path) -> Path:
    """A two-slide notebook (one of them with a subslide), written to ``path``."""
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    cells = [new_markdown_cell(f"# {kind}") for kind in ("slide", "subslide", "slide")]
    for cell, kind in zip(cells, ("slide", "subslide", "slide")):
        cell.metadata["slideshow"] = {"slide_type": kind}
    nbformat.write(new_notebook(cells=cells), path)
    return path


def test_there_are_chapters():
    assert len(CHAPTERS) >= 3, f"expected the course's chapters in notebooks/, got {CHAPTERS}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_cell_has_slide_metadata(path):
    cells = _cells(path)
    missing = [i for i, c in enumerate(cells) if _slide_type(c) not in SLIDE_TYPES]
    assert not missing, f"{path.name}: cells {missing} lack a valid slideshow.slide_type"
    visible = [c for c in cells if _slide_type(c) not in ("skip", "notes")]
    assert _slide_type(visible[0]) == "slide", f"{path.name}: first visible cell must open a slide"


@pytest.mark.exhaustive  # every chapter exported: half a minute (the tests below export one)
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_export_has_one_section_per_slide_and_subslide(path, tmp_path):
    # the export reads the notebook as committed (a run in place is not the course)
    committed = json.loads(slides.committed_text(path)[0])["cells"]
    kinds = [_slide_type(c) for c in committed]
    expected = 2 * kinds.count("slide") + kinds.count("subslide")
    html = slides.export_slides(path, tmp_path).read_text(encoding="utf-8")
    assert html.count("<section") == expected
    assert "reveal.js" in html and "Reveal.initialize" in html
    # speaker notes travel with the slides, skipped cells do not
    assert html.count('<aside class="notes">') == kinds.count("notes")


def test_offline_export_loads_nothing_from_the_network(tmp_path):
    path = next((p for p in CHAPTERS if p.stem == "00_start_here"), CHAPTERS[0])  # a short one
    html = slides.export_slides(path, tmp_path, offline=True).read_text(encoding="utf-8")
    remote = re.findall(r"<(?:script|link|img)\b[^>]*(?:src|href)=\"(https?://[^\"]+)\"", html)
    assert remote == []
    assert "require(" not in html and "Reveal.initialize" not in html
    assert "offline-counter" in html  # the built-in navigator is there
    kinds = [_slide_type(c) for c in _cells(path)]
    assert html.count("<section") == 2 * kinds.count("slide") + kinds.count("subslide")


def test_offline_export_shows_the_static_fallback_of_widgets(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    cell = new_code_cell("stepper")
    cell.outputs = [
        new_output(
            "display_data",
            data={
                slides.WIDGET_VIEW: view,
                "text/html": "<p>STATIC-PICTURE</p>",
                "text/plain": "Stepper(...)",
            },
        )
    ]
    nb = new_notebook(cells=[cell])
    path = tmp_path / "w.ipynb"
    nbformat.write(nb, path)
    offline = slides.export_slides(path, tmp_path / "off", offline=True).read_text()
    assert "STATIC-PICTURE" in offline
    assert slides.WIDGET_VIEW not in offline


def test_find_chapter_by_number_prefix_and_name(tmp_path):
    for name in ("00_why_autodiff", "00_start_here", "03_micrograd_from_scratch", "04_tensors"):
        (tmp_path / f"{name}.ipynb").write_text("{}")
    assert slides.find_chapter("3", tmp_path).stem == "03_micrograd_from_scratch"
    assert slides.find_chapter("04", tmp_path).stem == "04_tensors"
    assert slides.find_chapter("tensors", tmp_path).stem == "04_tensors"
    assert slides.find_chapter("00_start", tmp_path).stem == "00_start_here"
    with pytest.raises(FileNotFoundError, match="ambiguous.*00_start_here"):
        slides.find_chapter("00", tmp_path)
    with pytest.raises(FileNotFoundError, match="ambiguous.*00_start_here"):
        slides.find_chapters("00", tmp_path)  # two chapters, not the parts of one
    with pytest.raises(FileNotFoundError, match="no chapter matches '9'.*04_tensors"):
        slides.find_chapter("9", tmp_path)
    with pytest.raises(FileNotFoundError, match="no notebook"):
        slides.find_chapter(str(tmp_path / "missing.ipynb"), tmp_path)


def _chapter_in_parts(folder: Path) -> None:
    """A course whose chapter 03 is in two parts and chapter 04 in one piece."""
    for name in ("02_reverse", "03_1_value_and_backward", "03_2_control_flow", "04_tensors"):
        (folder / f"{name}.ipynb").write_text("{}")


def test_a_chapter_number_finds_every_part_and_a_part_number_one(tmp_path):
    _chapter_in_parts(tmp_path)
    parts = ["03_1_value_and_backward", "03_2_control_flow"]
    for spec in ("3", "03"):
        assert [p.stem for p in slides.find_chapters(spec, tmp_path)] == parts
    one_part = {"03.1": 0, "3.1": 0, "03_1": 0, "03.2": 1, "3_2": 1, "control": 1}
    for spec, k in one_part.items():
        stem = parts[k]
        assert [p.stem for p in slides.find_chapters(spec, tmp_path)] == [stem], spec
        assert slides.find_chapter(spec, tmp_path).stem == stem
    assert [p.stem for p in slides.find_chapters("04", tmp_path)] == ["04_tensors"]
    with pytest.raises(FileNotFoundError, match="no chapter matches '03.3'"):
        slides.find_chapters("03.3", tmp_path)
    # one notebook asked for, a chapter of two parts given: say so and name them
    with pytest.raises(FileNotFoundError, match=r"'03' has 2 parts, 03_1_.*03_2_.*03\.1"):
        slides.find_chapter("03", tmp_path)


def test_command_exports_every_part_of_a_chapter_or_one_part(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("02_two", "03_1_first", "03_2_second"):
        _tiny_notebook(folder / f"{name}.ipynb")
    monkeypatch.chdir(tmp_path)  # notebooks_dir() is ./notebooks when it exists
    parser = argparse.ArgumentParser(prog="autodiff-lab")
    slides.register(parser.add_subparsers())
    out = tmp_path / "build" / "slides"
    args = parser.parse_args(["slides", "03", "--offline"])
    assert args.run(args) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "03_1_first.slides.html",
        "03_2_second.slides.html",
    ]
    assert capsys.readouterr().out.count("wrote ") == 2
    for p in out.iterdir():
        p.unlink()
    args = parser.parse_args(["slides", "03.2", "--offline"])
    assert args.run(args) == 0
    assert [p.name for p in out.iterdir()] == ["03_2_second.slides.html"]


def test_command_writes_slides_and_says_what_needs_network(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="autodiff-lab")
    sub = parser.add_subparsers()
    command = slides.register(sub)
    help_text = command.format_help()
    assert "--offline" in help_text and "CDN" in help_text and "network" in help_text

    path = _tiny_notebook(tmp_path / "tiny.ipynb")
    args = parser.parse_args(["slides", str(path), "--out", str(tmp_path), "--offline"])
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert (tmp_path / f"{path.stem}.slides.html").is_file()
    assert "no network needed" in out and "2 slides, 3 subslides" in out

    args = parser.parse_args(["slides", "no-such-chapter-xyz"])
    assert args.run(args) == 2
    assert "no chapter matches" in capsys.readouterr().err


def test_command_all_exports_every_notebook(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("01_one", "02_two"):
        _tiny_notebook(folder / f"{name}.ipynb")
    monkeypatch.chdir(tmp_path)  # notebooks_dir() is ./notebooks when it exists
    parser = argparse.ArgumentParser(prog="autodiff-lab")
    slides.register(parser.add_subparsers())
    args = parser.parse_args(["slides", "all", "--offline"])
    assert args.run(args) == 0
    written = sorted(p.name for p in (tmp_path / "build" / "slides").iterdir())
    assert written == ["01_one.slides.html", "02_two.slides.html"]
    assert capsys.readouterr().out.count("wrote ") == 2


def test_offline_math_becomes_mathml_but_code_keeps_its_dollars(tmp_path):
    pytest.importorskip("latex2mathml")
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    text = new_markdown_cell(
        "# Rules\n\nInline $\\frac{d}{dx} e^x = e^x$ and a display\n\n$$a < b$$\n\n"
        "Unparseable stays: $\\frac{1}{$ done."
    )
    code = new_code_cell('print("$HOME costs $5")')
    for cell in (text, code):
        cell.metadata["slideshow"] = {"slide_type": "slide"}
    path = tmp_path / "math.ipynb"
    nbformat.write(new_notebook(cells=[text, code]), path)
    html = slides.export_slides(path, tmp_path, offline=True).read_text(encoding="utf-8")
    assert html.count('<math xmlns="http://www.w3.org/1998/Math/MathML"') == 2
    assert 'display="block"' in html and "<mfrac>" in html
    assert "$\\frac{1}{$" in html  # left as source, not dropped
    assert "$HOME" in html and "$5" in html  # code is not math
    assert "e^x$" not in html


def test_slides_is_a_command_of_the_autodiff_lab_cli():
    from autodiff_lab.cli import build_parser

    args = build_parser().parse_args(["slides", "03", "--offline"])
    assert args.run is slides.run and args.chapter == "03" and args.offline


# --- the slide rules (issue 26): every chapter fits a 1280×720 projector as stored ----------

#: Longest code cell a slide presents (lines): longer code pushes the figure below the slide.
MAX_PRESENTED_CODE_LINES = 15
#: At least this share of a chapter's presented words sits on main slides (the slide cell
#: and what follows it before the first sub-slide): the right arrow skips the sub-slides.
MIN_MAIN_SLIDE_WORDS = 0.5
NUMBERED_CHAPTERS = [p for p in CHAPTERS if re.match(r"\d\d_", p.name)]


@pytest.mark.parametrize(
    "path", [p for p in NUMBERED_CHAPTERS if p.stem != "00_start_here"], ids=lambda p: p.stem
)
def test_chapter_title_and_a_part_says_where_its_other_parts_are(path):
    """Issue 25 §3: a chapter's first line is '# NN · Title', a part's '# NN.K · Title'; a part
    says which part of chapter NN it is and links every other part of its chapter."""
    label = chapter_label(path)
    first = "".join(_cells(path)[0]["source"])
    assert first.startswith(f"# {label} · "), first.splitlines()[0]
    if "." in label:
        number, part = label.split(".")
        said = re.search(rf"\bpart {part} of chapter 0?{int(number)}\b", first, re.IGNORECASE)
        assert said, f"{path.name}'s first cell does not say it is part {part} of chapter {number}"
        for other in chapter_notebooks(path.parent, int(number)):
            if other != path:
                assert f"]({other.name})" in first, f"{path.name} does not link {other.name}"


def test_chapter_labels_name_a_part_by_its_number():
    assert chapter_label(Path("04_tensors.ipynb")) == "04"
    assert chapter_label(Path("03_2_control_flow_and_pytorch.ipynb")) == "03.2"
    assert chapter_label(Path("10_1_x_2.ipynb")) == "10.1"


def _words(markdown: str) -> int:
    return len(re.findall(r"[A-Za-z0-9][\w'’-]*", re.sub(r"```.*?```", " ", markdown, flags=re.S)))


def slide_rule_violations(path: Path) -> list[str]:
    """What breaks the slide rules in ``path``: presented code cells over
    MAX_PRESENTED_CODE_LINES lines, no speaker notes, and fewer than MIN_MAIN_SLIDE_WORDS of
    the presented words on main slides. Skipped cells and notes are not presented."""
    long_cells, notes, on_main, on_sub, place = [], 0, 0, 0, "main"
    for i, cell in enumerate(_cells(path)):
        kind = _slide_type(cell) or "-"
        source = "".join(cell["source"])
        if kind in ("notes", "skip"):
            notes += kind == "notes"
            continue
        place = {"slide": "main", "subslide": "sub"}.get(kind, place)
        if cell["cell_type"] == "code":
            lines = len(source.rstrip("\n").splitlines())
            if lines > MAX_PRESENTED_CODE_LINES:
                long_cells.append(f"{i} ({lines})")
        elif cell["cell_type"] == "markdown":
            if place == "main":
                on_main += _words(source)
            else:
                on_sub += _words(source)
    problems = []
    if long_cells:
        problems.append(
            f"presented code cells over {MAX_PRESENTED_CODE_LINES} lines: cell (lines) "
            + ", ".join(long_cells)
        )
    if not notes:
        problems.append("no speaker notes (no cell with slide_type 'notes')")
    share = on_main / max(on_main + on_sub, 1)
    if share < MIN_MAIN_SLIDE_WORDS:
        problems.append(f"only {share:.0%} of the presented words on main slides")
    return problems


def test_slide_rules_catch_what_they_claim(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    title = new_markdown_cell("# Title\n\n" + "word " * 10)
    code = new_code_cell("\n".join(f"x{i} = {i}" for i in range(16)))  # 16 lines
    aside = new_markdown_cell("## Detail\n\n" + "word " * 30)
    notes = new_markdown_cell("Say this.")
    kinds = ("slide", "-", "subslide", "notes")
    for cell, kind in zip((title, code, aside, notes), kinds):
        cell.metadata["slideshow"] = {"slide_type": kind}
    path = tmp_path / "bad.ipynb"
    nbformat.write(new_notebook(cells=[title, code, aside]), path)
    problems = slide_rule_violations(path)
    assert problems == [
        "presented code cells over 15 lines: cell (lines) 1 (16)",
        "no speaker notes (no cell with slide_type 'notes')",
        "only 26% of the presented words on main slides",  # 11 of 11 + 31 words
    ]
    code.source = "\n".join(f"x{i} = {i}" for i in range(15))  # 15 lines: allowed
    aside.metadata["slideshow"] = {"slide_type": "-"}  # the detail on the main slide
    nbformat.write(new_notebook(cells=[title, code, aside, notes]), path)
    assert slide_rule_violations(path) == []


# Every numbered chapter keeps the rules (issue 26: the xfails of 2026-12-01 are gone — code
# cells split, plotting moved to autodiff_lab/viz/plots.py, key topics made main slides).
@pytest.mark.parametrize("path", NUMBERED_CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_keeps_the_slide_rules(path):
    assert slide_rule_violations(path) == []


#: Smallest figure text a chapter may set (points): matplotlib's default, and the size the
#: package's plotting helpers never go below (tests/test_viz_plots.py measures their figures).
MIN_FIGURE_FONT_PT = 10
_FONT_SETTING = re.compile(
    r"(?:fontsize|labelsize|font\.size\W+)\s*[=:]?\s*(\d+(?:\.\d+)?|\"(?:xx?-small|small|smaller)\")"
)


def small_figure_text(path: Path) -> list[str]:
    """Where a chapter's code asks matplotlib for text below MIN_FIGURE_FONT_PT: a font size
    in points under it, or a relative size ("small", "x-small", ...) under the default."""
    found = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        for size in _FONT_SETTING.findall("".join(cell["source"])):
            if size.startswith('"') or float(size) < MIN_FIGURE_FONT_PT:
                found.append(f"cell {i}: {size}")
    return found


def test_small_figure_text_is_found(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [
        new_code_cell('ax.legend(fontsize=8)\nax.text(0, 0, "a", fontsize=12)'),
        new_code_cell('ax.legend(fontsize="small")\nplt.rcParams.update({"font.size": 9})'),
        new_code_cell("ax.tick_params(labelsize=10)"),
    ]
    path = tmp_path / "fonts.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    assert small_figure_text(path) == ["cell 0: 8", 'cell 1: "small"', "cell 1: 9"]


@pytest.mark.parametrize("path", NUMBERED_CHAPTERS, ids=lambda p: p.stem)
def test_chapter_figures_set_no_text_below_10_pt(path):
    import matplotlib

    assert matplotlib.rcParams["font.size"] >= MIN_FIGURE_FONT_PT  # the default they rely on
    assert small_figure_text(path) == []


# --- widget start states (issue 26 §3): after Run All, a widget the text walks through starts
# where the text starts. The notebook's stored widget state is what JupyterLab shows on opening
# and what a live slide starts from, so the controls are read from it.

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def stored_controls(path: Path, marker: str) -> dict[str, object]:
    """The controls of the widget that the code cell containing ``marker`` displays, as the
    notebook stores their state: description -> value (a selection widget's chosen label)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    state = notebook["metadata"]["widgets"][WIDGET_STATE]["state"]
    cells = [
        c for c in notebook["cells"] if c["cell_type"] == "code" and marker in "".join(c["source"])
    ]
    assert len(cells) == 1, f"{path.name}: {len(cells)} code cells contain {marker!r}"
    views = [
        o["data"][WIDGET_VIEW_MIME]
        for o in cells[0]["outputs"]
        if WIDGET_VIEW_MIME in o.get("data", {})
    ]
    assert len(views) == 1, f"{path.name}: the cell with {marker!r} displays {len(views)} widgets"
    controls, todo = {}, [views[0]["model_id"]]
    while todo:
        model = state[todo.pop(0)]["state"]
        todo += [child.removeprefix("IPY_MODEL_") for child in model.get("children", [])]
        if "_options_labels" in model:
            controls[model["description"]] = model["_options_labels"][model["index"]]
        elif isinstance(model.get("value"), int | float) and model.get("description"):
            controls[model["description"]] = model["value"]
    return controls


@pytest.mark.parametrize(
    ("chapter", "marker", "control", "start"),
    [
        # the text pushes e_x through f3 "one operation at a time": from step 0
        ("01_forward_mode", "ForwardStepper(f3,", "step", 0),
        # "replays backward() one node at a time ... Move the slider": from step 0
        ("02_reverse_mode", "stepper = BackwardStepper(L)", "step", 0),
        # the text says "the stored page shows step 3"
        ("03_1_value_and_backward", "BackwardStepper(as_package_value(L))", "step", 3),
        # jvp is introduced first, the transpose (vjp) second
        (
            "08_transformations",
            "viewer = LinearizeViewer(h,",
            "direction",
            "jvp: push a tangent forward",
        ),
        (
            "08_transformations",
            "viewer = LinearizeViewer(h,",
            "tangent",
            "as given: (1.0000, 0.0000)",
        ),
    ],
)
def test_walked_through_widgets_start_where_the_text_starts(chapter, marker, control, start):
    controls = stored_controls(ROOT / "notebooks" / f"{chapter}.ipynb", marker)
    assert controls[control] == start, controls


def test_stored_controls_reads_a_moved_widget(tmp_path):
    """The reader above sees a widget that a later cell moved (the bug it guards against)."""
    import nbformat
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [
        "from autodiff_lab import Value\nfrom autodiff_lab.viz import BackwardStepper",
        "x = Value(2.0)\nstepper = BackwardStepper(x * x + x)\nstepper",
        "stepper.slider.value = 2",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute()
    path = tmp_path / "moved.ipynb"
    nbformat.write(nb, path)
    assert stored_controls(path, "stepper = BackwardStepper")["step"] == 2


def test_offline_export_reads_the_committed_notebook_not_a_run_in_place(tmp_path):
    import subprocess

    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    def write(text):
        cell = new_markdown_cell(f"# {text}")
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        nbformat.write(new_notebook(cells=[cell]), tmp_path / "ch.ipynb")

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    write("COMMITTED-COURSE")
    subprocess.run([*git, "add", "ch.ipynb"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "chapter"], check=True)
    write("A-STUDENTS-RUN")  # run in place and saved
    html = slides.export_slides(tmp_path / "ch.ipynb", tmp_path / "out", offline=True)
    text = html.read_text(encoding="utf-8")
    assert "COMMITTED-COURSE" in text and "A-STUDENTS-RUN" not in text
    assert slides.committed_text(tmp_path / "ch.ipynb")[1] == "git HEAD"
    untracked = tmp_path / "copy.ipynb"  # e.g. the folder `autodiff-lab start` made
    untracked.write_text((tmp_path / "ch.ipynb").read_text())
    assert slides.committed_text(untracked) == (untracked.read_text(), "the file")


def test_offline_export_says_a_widget_picture_is_stored_and_fits_the_screen(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from autodiff_lab.viz.render import RERUN_HINT, static_fallback

    bundle = static_fallback({}, "Stepper", "<img src='data:image/png;base64,AA' alt='x'>")
    cell = new_code_cell("stepper")
    cell.metadata["slideshow"] = {"slide_type": "slide"}
    cell.outputs = [new_output("display_data", data=bundle)]
    path = tmp_path / "w.ipynb"
    nbformat.write(new_notebook(cells=[cell]), path)
    html = slides.export_slides(path, tmp_path / "off", offline=True).read_text()
    assert slides.EXPORT_HINT in html and RERUN_HINT not in html
    # pictures at most 70 % of the window's height; notes open fixed at the bottom, in view
    assert ".reveal section img { max-height: 70vh;" in html
    assert re.search(r"body\.show-notes aside\.notes \{[^}]*position: fixed;[^}]*bottom: 0", html)
