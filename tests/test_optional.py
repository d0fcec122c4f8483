"""A PyTorch cell shows its committed result, labelled, where PyTorch is not installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from notebook_helpers import cell_source, notebook_cells

from autodiff_lab import course, optional

ROOT = Path(__file__).resolve().parent.parent


def _course(tmp_path: Path, outputs: list[dict]) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "exercises").mkdir()
    cell = {"cell_type": "code", "id": "t1", "metadata": {}, "source": "x", "outputs": outputs}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text(json.dumps(nb))
    return tmp_path


def test_the_committed_output_is_read_from_the_installed_course(tmp_path, monkeypatch, capsys):
    printed = [
        {"output_type": "stream", "name": "stdout", "text": ["agree: ", "True\n"]},
        {"output_type": "stream", "name": "stderr", "text": "a warning\n"},  # not the result
    ]
    root = _course(tmp_path, printed)
    monkeypatch.setattr(course, "course_source", lambda: root)
    assert optional.committed_output("01_x", "t1") == "agree: True\n"
    optional.show_committed_result("01_x", "t1")
    assert capsys.readouterr().out == optional.COMMITTED_LABEL + "\nagree: True\n"


def test_a_missing_cell_or_an_empty_one_is_named(tmp_path, monkeypatch):
    root = _course(tmp_path, [])
    monkeypatch.setattr(course, "course_source", lambda: root)
    with pytest.raises(LookupError, match=r"01_x.ipynb has no code cell 't1'"):
        optional.committed_output("01_x", "t1")
    with pytest.raises(LookupError, match="no code cell 'nope'"):
        optional.committed_output("01_x", "nope")


def test_every_committed_result_a_chapter_shows_is_a_pytorch_result():
    """Each show_committed_result(NOTEBOOK, ID) a chapter calls names its own notebook and a
    cell of it that needs PyTorch and printed its result (not the not-installed hint)."""
    calls = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = notebook_cells(path)
        for cell in cells:
            source = cell_source(cell)
            if "show_committed_result(" not in source or "def " in source:
                continue
            calls += 1
            assert f'show_committed_result("{path.stem}", "{cell["id"]}")' in source, path.name
            assert "if torch is not None:" in source
            text = optional.committed_output(path.stem, cell["id"])
            assert "PyTorch is not installed" not in text, (path.name, cell["id"])
    assert calls >= 4  # chapter 03's three engines, graph, Function and version counter
