"""Saved ipywidgets 8 state hidden from ipywidgets 7 (autodiff_lab.viz.widget_state), and the
lab settings that turn that on only where ipywidgets is older than 8 (tools/lab_settings.py).

The lecture environment (``make lecture``) runs ipywidgets 7.8.5, whose widget manager cannot
load the chapters' saved state (models of ``@jupyter-widgets/base`` and ``controls`` 2.0.0,
written by ipywidgets 8) and then never shows a new widget. The browser side is tested by
tests/browser/test_rise_slides.py in that environment (``make test-lecture``).
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ipywidgets
import pytest

from autodiff_lab.viz import widget_state
from autodiff_lab.viz.widget_state import LectureContentsManager, hide_foreign_widget_state

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "02_reverse_mode.ipynb"
STATE = "application/vnd.jupyter.widget-state+json"
VIEW = "application/vnd.jupyter.widget-view+json"
# the module versions each ipywidgets speaks: 7.8.5 base 1.2.0 / controls 1.5.0, 8.1 both 2.0.0
SPEAKS_7 = {"@jupyter-widgets/base": "1", "@jupyter-widgets/controls": "1"}
SPEAKS_8 = {"@jupyter-widgets/base": "2", "@jupyter-widgets/controls": "2"}


def chapter() -> dict:
    return json.loads(CHAPTER.read_text(encoding="utf-8"))


def widget_views(notebook: dict) -> list[dict]:
    return [
        o["data"]
        for c in notebook["cells"]
        for o in c.get("outputs", [])
        if VIEW in o.get("data", {})
    ]


def test_the_chapter_stores_ipywidgets_8_state():
    """The premise: chapter 02 as committed holds ipywidgets 8's saved state and views."""
    models = chapter()["metadata"]["widgets"][STATE]["state"].values()
    versions = {(m["model_module"], m["model_module_version"]) for m in models}
    assert ("@jupyter-widgets/controls", "2.0.0") in versions
    assert widget_views(chapter())


def test_ipywidgets_7_gets_the_chapter_without_that_state():
    notebook = chapter()
    saved = set(notebook["metadata"]["widgets"][STATE]["state"])
    views = [d for d in widget_views(notebook) if d[VIEW]["model_id"] in saved]
    pictures = ["".join(d["text/html"]) for d in views]  # the widgets' static pictures
    assert pictures and all("autodiff-lab-static" in p for p in pictures)

    assert hide_foreign_widget_state(notebook, SPEAKS_7) == len(views)
    assert "widgets" not in notebook["metadata"]
    assert widget_views(notebook) == []
    # what is left of each of those outputs shows: its static picture and its text
    left = [
        o["data"]
        for c in notebook["cells"]
        for o in c.get("outputs", [])
        if "autodiff-lab-static" in "".join(o.get("data", {}).get("text/html", ""))
    ]
    assert ["".join(d["text/html"]) for d in left] == pictures
    # the cells' sources are untouched
    assert [c["source"] for c in notebook["cells"]] == [c["source"] for c in chapter()["cells"]]


def test_ipywidgets_8_gets_the_chapter_unchanged():
    notebook = chapter()
    assert hide_foreign_widget_state(notebook, SPEAKS_8) == 0
    assert notebook == chapter()


def test_one_foreign_model_drops_the_whole_state():
    """Saved models refer to each other (a widget to its layout): no partial state is kept."""
    notebook = {
        "metadata": {
            "widgets": {
                STATE: {
                    "state": {
                        "a": {"model_module": "@jupyter-widgets/output",
                              "model_module_version": "1.0.0", "state": {}},
                        "b": {"model_module": "@jupyter-widgets/base",
                              "model_module_version": "2.0.0", "state": {}},
                    },
                    "version_major": 2,
                    "version_minor": 0,
                },
                "other/mime": {"kept": True},
            }
        },
        "cells": [
            {"outputs": [{"data": {VIEW: {"model_id": "a"}}}]},  # nothing else to show: kept
            {"outputs": [{"data": {VIEW: {"model_id": "zz"}, "text/plain": "not saved"}}]},
        ],
    }  # fmt: skip
    before = copy.deepcopy(notebook)
    assert hide_foreign_widget_state(notebook, SPEAKS_7) == 0
    assert notebook["metadata"]["widgets"] == {"other/mime": {"kept": True}}
    assert notebook["cells"] == before["cells"]


def test_a_notebook_without_saved_state_is_unchanged():
    notebook = {"metadata": {}, "cells": [{"outputs": [{"data": {"text/plain": "1"}}]}]}
    before = copy.deepcopy(notebook)
    assert hide_foreign_widget_state(notebook, SPEAKS_7) == 0
    assert notebook == before


def test_installed_majors_are_the_installed_ipywidgets():
    expected = SPEAKS_7 if ipywidgets.__version__.startswith("7.") else SPEAKS_8
    assert widget_state.installed_majors() == expected


def run(coroutine):
    """``coroutine`` run to its end on a thread of its own: a browser test earlier in the same
    pytest worker leaves Playwright's event loop running on this one (asyncio.run refuses)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.mark.parametrize("speaks", [SPEAKS_7, SPEAKS_8])
def test_the_contents_manager_serves_the_filtered_notebook_and_keeps_the_file(
    tmp_path, monkeypatch, speaks
):
    (tmp_path / CHAPTER.name).write_bytes(CHAPTER.read_bytes())
    monkeypatch.setattr(widget_state, "installed_majors", lambda: speaks)
    manager = LectureContentsManager(root_dir=str(tmp_path))
    model = run(manager.get(CHAPTER.name))
    served = json.loads(json.dumps(model["content"]))
    assert model["type"] == "notebook"
    assert ("widgets" in served["metadata"]) == (speaks == SPEAKS_8)
    assert bool(widget_views(served)) == (speaks == SPEAKS_8)
    assert (tmp_path / CHAPTER.name).read_bytes() == CHAPTER.read_bytes()
    # a listing (no content) and other files pass through
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    assert run(manager.get("notes.txt"))["content"] == "hello"
    assert run(manager.get(CHAPTER.name, content=False))["content"] is None


def lab_settings():
    path = ROOT / "tools" / "lab_settings.py"
    spec = importlib.util.spec_from_file_location("lab_settings", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lab_settings_set_the_contents_manager_only_under_ipywidgets_7(tmp_path, monkeypatch):
    settings = lab_settings()
    path = tmp_path / "etc" / "jupyter" / "jupyter_server_config.json"
    monkeypatch.setattr(settings, "server_config_path", lambda: path)
    name = "autodiff_lab.viz.widget_state.LectureContentsManager"

    monkeypatch.setattr(ipywidgets, "__version__", "8.1.9")
    assert settings.write_server_config() is None
    assert not path.exists()  # nothing written where nothing is needed

    monkeypatch.setattr(ipywidgets, "__version__", "7.8.5")
    assert settings.write_server_config() == path
    assert json.loads(path.read_text()) == {"ServerApp": {"contents_manager_class": name}}

    # another setting in the file is kept, and the course's goes again under ipywidgets 8
    path.write_text(json.dumps({"ServerApp": {"contents_manager_class": name, "ip": "::1"},
                                "LabApp": {"x": 1}}))  # fmt: skip
    monkeypatch.setattr(ipywidgets, "__version__", "8.1.9")
    assert settings.write_server_config() is None
    assert json.loads(path.read_text()) == {"ServerApp": {"ip": "::1"}, "LabApp": {"x": 1}}

    path.write_text(json.dumps({"ServerApp": {"contents_manager_class": name}}))
    settings.write_server_config()
    assert not path.exists()  # the file held only the course's setting
