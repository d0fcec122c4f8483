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


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_export_has_one_section_per_slide_and_subslide(path, tmp_path):
    kinds = [_slide_type(c) for c in _cells(path)]
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
    with pytest.raises(FileNotFoundError, match="no chapter matches '9'.*04_tensors"):
        slides.find_chapter("9", tmp_path)
    with pytest.raises(FileNotFoundError, match="no notebook"):
        slides.find_chapter(str(tmp_path / "missing.ipynb"), tmp_path)


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
