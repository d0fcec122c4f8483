"""A learner's progress: recorded by check(), shown per chapter, reset (headless)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import autodiff_lab
from autodiff_lab.grading import check, registry
from autodiff_lab.progress import data_file, load, record, summary

ROOT = Path(__file__).resolve().parent.parent


def right_dual_mul(x, y):
    (a, da), (b, db) = x, y
    return a * b, a * db + da * b


def wrong_dual_mul(x, y):  # forgot a·db: right only when db = 0 or a = 0
    (a, da), (b, _db) = x, y
    return a * b, da * b


def stub(*_args):
    raise NotImplementedError("Exercise 1.1: …")


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("AUTODIFF_LAB_DATA_DIR", str(folder))
    return folder


def test_the_file_lives_in_the_users_data_folder_not_the_repository(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTODIFF_LAB_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert data_file() == tmp_path / "xdg" / "autodiff-lab" / "progress.json"
    assert not data_file().is_relative_to(ROOT)
    monkeypatch.setenv("AUTODIFF_LAB_DATA_DIR", str(tmp_path / "mine"))
    assert data_file() == tmp_path / "mine" / "progress.json"


def test_check_keeps_the_best_score_per_exercise(data_dir):
    wrong = check("1.1", wrong_dual_mul, show=False)
    right = check("1.1", right_dual_mul, show=False)
    again = check("1.1", wrong_dual_mul, show=False)
    assert 0 < wrong.score < right.score == right.max_score and again.score == wrong.score
    entry = json.loads((data_dir / "progress.json").read_text())["exercises"]["1.1"]
    assert entry["best"] == right.score and entry["max"] == right.max_score
    assert entry["passed"] is True and entry["tried"] is True and entry["checks"] == 3


def test_a_demonstration_check_is_not_recorded(data_dir):
    """The start page runs check("3.1", …, record=False) on a wrong answer to show a hint."""
    result = check("1.1", wrong_dual_mul, show=False, record=False)
    assert 0 < result.score < result.max_score
    assert "1.1" not in load()
    assert summary()[0].attempted == 0


def test_a_stub_is_not_an_attempt(data_dir):
    result = check("1.2", stub, show=False)
    assert result.status == "not attempted"
    assert load()["1.2"]["tried"] is False
    row = summary()[0]
    assert (row.chapter, row.attempted, row.passed) == (1, 0, 0)


def test_summary_per_chapter_and_the_next_exercise(data_dir):
    check("1.1", right_dual_mul, show=False)
    partial = check("1.2", lambda x: (0.0, 0.0), show=False)
    rows = {r.chapter: r for r in summary()}
    chapter_ids = [e.id for e in registry.all_exercises() if e.chapter == 1]
    one = rows[1]
    assert (one.exercises, one.attempted, one.passed) == (len(chapter_ids), 2, 1)
    assert one.points == 8 + partial.score  # 1.1 has 8 cases of 1 point
    assert one.next_exercise == f"1.2 {registry.get('1.2').title}"
    assert rows[2].attempted == 0 and rows[2].next_exercise.startswith("2.1 ")
    assert set(rows) == {e.chapter for e in registry.all_exercises()}


def test_static_table_and_widget_with_two_click_reset(data_dir):
    check("1.1", right_dual_mul, show=False)
    static = autodiff_lab.progress(widget=False)
    text = str(static)
    n = sum(e.chapter == 1 for e in registry.all_exercises())
    assert f"1/{n}" in text.splitlines()[2] and "8/" in text.splitlines()[2]
    bundle = static._repr_mimebundle_()
    assert "<table" in bundle["text/html"] and bundle["text/plain"] == text

    view = autodiff_lab.progress()
    data = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and "<table" in data["text/html"]
    assert "1.2 " in view.table.value  # the next exercise of chapter 01
    view.reset_button.click()  # first click only asks
    assert (data_dir / "progress.json").exists()
    assert view.reset_button.description == "really forget all?"
    view.reset_button.click()
    assert not (data_dir / "progress.json").exists()
    assert all(r.attempted == 0 and r.points == 0 for r in view.rows)
    check("1.1", right_dual_mul, show=False)
    view.refresh_button.click()
    assert view.rows[0].passed == 1


def test_progress_that_cannot_be_saved_never_breaks_check(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AUTODIFF_LAB_DATA_DIR", str(blocker))
    assert check("1.1", right_dual_mul, show=False).status == "passed"
    assert load() == {}


def test_a_damaged_file_is_replaced(data_dir):
    data_dir.mkdir()
    (data_dir / "progress.json").write_text("{ not json")
    assert load() == {}
    check("1.1", right_dual_mul, show=False)
    assert load()["1.1"]["passed"] is True


def test_nothing_is_recorded_while_grading_or_for_unknown_results(data_dir, monkeypatch):
    class Odd:
        exercise_id, status, score, max_score = "1.1", "unknown exercise", 0.0, 0.0

    assert record(Odd()) is False
    monkeypatch.setenv("AUTODIFF_LAB_GRADING", "1")
    check("1.1", right_dual_mul, show=False)
    assert not (data_dir / "progress.json").exists()
