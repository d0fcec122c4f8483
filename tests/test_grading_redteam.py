"""The determined class, second wave (issue 22 §2-§5, "attacked again, with new attacks"):
each test performs one attack on the grader's batch side — reading, planning, recording,
exporting — and asserts the fair outcome: the attacker's own notebook may lose, every
other student is graded as if the attacker were not there, and nothing the grader writes
says something false.

One batch through the real command line (-j 2, no sandbox: the attacks are on the
grader's own process, not the worker), graded once per module. Expected points are the
test exercises' closed forms (chapter 97: 6 + 6 + 4 = 16; 97.1 alone: 6).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from pathlib import Path

import pytest
from grading_testkit import (
    CORRECT,
    grade_folder,
    load_test_exercises,
    write_notebook,
)

from autodiff_lab.grading import gradebook as gradebook_module
from autodiff_lab.grading import reading
from autodiff_lab.grading.gradebook import Gradebook, report_name
from autodiff_lab.grading.results import Submission, SubmissionResult
from autodiff_lab.grading.scoring import ExerciseResult

pytestmark = pytest.mark.slow  # a class graded: seconds

HONEST = [*CORRECT.values()]
ONLY_DSIN = [CORRECT["dsin"]]
LATIN1 = os.fsdecode(b"caf\xe9")  # a folder name in Latin-1 (not UTF-8): "caf\udce9"
FORMULAS = ["=cmd|' -C calc'!A0", "@SUM(A1)<img src=x onerror=alert(1)>"]
MARKUP = (
    "<script>alert(1)</script> ![seen](http://evil.example/p.png) "
    "[click](javascript:alert(1)) <http://evil.example> <img src=http://evil.example/i>"
)


def _notebook_json(path: Path, nb: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb))


def _cell(source: object) -> dict:
    return {"cell_type": "code", "source": source, "metadata": {}, "outputs": []}


def _nb(cells: list, **extra) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells, **extra}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    load_test_exercises()
    root = tmp_path_factory.mktemp("redteam")
    subs = root / "submissions"
    # Names that collide once escaped: the Latin-1 byte, and folders literally spelling the
    # escapes of it (the student name's "\udce9" and the gradebook key's "\xe9").
    write_notebook(subs / LATIN1 / "97_work.ipynb", HONEST)
    write_notebook(subs / "caf\\udce9" / "97_work.ipynb", ONLY_DSIN)
    write_notebook(subs / "caf\\xe9" / "97_work.ipynb", ONLY_DSIN)
    # Names that read the same: "ann" and "Ann " (a spreadsheet shows, an LMS may match, one)
    write_notebook(subs / "ann" / "97_work.ipynb", HONEST)
    write_notebook(subs / "Ann " / "97_work.ipynb", ONLY_DSIN)
    # Invisible and reordering characters in a name
    write_notebook(subs / "bob\u200b\u202e" / "97_work.ipynb", ONLY_DSIN)
    # A link to another student's folder
    (subs / "linker").symlink_to("ann", target_is_directory=True)
    # Spreadsheet formulas and HTML/Markdown in a name and in what the grader quotes
    for k, formula in enumerate(FORMULAS):
        write_notebook(subs / formula / "97_work.ipynb", ONLY_DSIN if k else [
            f"raise ValueError({('=HYPERLINK(1) ' + MARKUP)!r})", CORRECT["dsin"]])  # fmt: skip
    # Valid JSON, wrong notebook types
    wrong = {
        "ints": _nb([_cell([1, 2, 3])]),
        "nullsource": _nb([_cell(None)]),
        "stringcell": _nb(["def dsin(x): return 1"]),
        "dictcells": {"nbformat": 4, "cells": {"0": _cell(CORRECT["dsin"])}},
        "stringversion": {"nbformat": "4", "cells": [_cell(CORRECT["dsin"])]},
        "toplist": [_cell(CORRECT["dsin"])],
        "nested": '{"nbformat": 4, "cells": [], "metadata": ' + "[" * 200_000 + "]" * 200_000
        + "}",
    }  # fmt: skip
    for student, nb in wrong.items():
        _notebook_json(subs / student / "97_work.ipynb", nb)
    # A metadata bomb (3 million entries; metadata plays no part in grading)
    _notebook_json(
        subs / "metabomb" / "97_work.ipynb",
        _nb([_cell(c) for c in HONEST], metadata={"bomb": [0] * 3_000_000}),
    )
    # 2 000 cells, each heading itself "Exercise 97.1", then the answer defined twice:
    # the last definition is the one that runs
    many = [_cell("# Exercise 97.1\n") for _ in range(2_000)]
    wrong_dsin = "def dsin(x):\n    return 0.5"
    _notebook_json(
        subs / "manycells" / "97_work.ipynb",
        _nb([*many, _cell(CORRECT["dsin"]), _cell(wrong_dsin)]),
    )
    return grade_folder(subs, root, "score")


def totals(attacked) -> dict[str, str]:
    return {row[0]: row[1] for row in attacked["summary"][1:]}


def test_names_that_collide_once_escaped_stay_three_students(attacked):
    """The Latin-1 name's escape is spelled literally by two other folders: each stays its
    own student, with its own key, row, total and report."""
    assert attacked["rc"] == 0, attacked["err"]
    assert attacked["subs"]["caf\\udce9"][2] == 16.0  # the Latin-1 student, shown escaped
    assert attacked["subs"]["caf\\\\udce9"][2] == 6.0  # the folder named with a backslash
    assert attacked["subs"]["caf\\\\xe9"][2] == 6.0
    assert {k: totals(attacked)[k] for k in ("caf\\udce9", "caf\\\\udce9", "caf\\\\xe9")} == {
        "caf\\udce9": "16", "caf\\\\udce9": "6", "caf\\\\xe9": "6"
    }  # fmt: skip
    reports = {p.name for p in attacked["paths"]["report"].iterdir()}
    assert len(reports) == len(attacked["subs"])


def test_names_that_read_the_same_are_graded_apart_and_named_on_both(attacked):
    assert totals(attacked)["ann"] == "16" and totals(attacked)["Ann "] == "6"
    assert "name reads the same as another's ('Ann ')" in attacked["subs"]["ann"][1]
    assert "name reads the same as another's ('ann')" in attacked["subs"]["Ann "][1]


def test_invisible_and_bidi_characters_in_a_name_are_shown(attacked):
    assert totals(attacked)["bob\\u200b\\u202e"] == "6"
    raw = attacked["paths"]["csv"].read_text(encoding="utf-8")
    assert "\u200b" not in raw and "\u202e" not in raw


def test_a_link_to_another_students_folder_is_not_graded_as_theirs_and_is_said(attacked):
    assert "linker" not in attacked["subs"] and totals(attacked)["ann"] == "16"
    assert "linker is a link to a folder: not searched" in attacked["err"]


def test_no_csv_cell_starts_a_spreadsheet_formula(attacked):
    cells = [c for row in csv.reader(open(attacked["paths"]["csv"], encoding="utf-8")) for c in row]
    cells += [c for row in attacked["summary"] for c in row]
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))]
    for formula in FORMULAS:
        assert "'" + formula in totals(attacked)
    assert [gradebook_module.csv_cell(t) for t in ("+1+1", "-1+1", "\t=1")] == [
        "'+1+1", "'-1+1", "\\t=1"
    ]  # fmt: skip
    (quoted,) = [
        r for r in attacked["rows"] if r["student"] == "'" + FORMULAS[0] and r["exercise"] == "97.1"
    ]
    assert quoted["points"] == "6.0"


def _elements(page: Path) -> set[tuple[str, tuple[str, ...]]]:
    """(tag, attribute names) of every element a browser builds from a report (Markdown
    rendered as a lecturer's viewer would, raw HTML allowed)."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    text = page.read_text(encoding="utf-8")
    if page.suffix == ".md":
        text = MarkdownIt("commonmark").enable("table").render(text)
    seen: set[tuple[str, tuple[str, ...]]] = set()
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: seen.add((tag, tuple(a for a, _ in attrs)))  # type: ignore[method-assign]
    parser.feed(text)
    return seen


def test_reports_load_nothing_and_run_nothing(attacked):
    """No script, image, link or attribute that a name or a message wrote: every element of
    every report is one the grader writes."""
    assert "<script>" in attacked["subs"][FORMULAS[0]][1]  # the message reached the notes
    with Gradebook(attacked["db"]) as book:
        pages = book.write_reports(attacked["paths"]["report"].with_name("html"), fmt="html")
    pages += list(attacked["paths"]["report"].iterdir())
    grader_writes = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "ul",
                     "li", "table", "thead", "tbody", "tr", "th", "td"}  # fmt: skip
    for page in pages:
        for tag, attributes in _elements(page):
            assert tag in grader_writes and set(attributes) <= {"charset", "class"}, page.name


@pytest.mark.parametrize(
    "student",
    ["ints", "nullsource", "stringcell", "dictcells", "stringversion", "toplist", "nested"],
)
def test_valid_json_that_is_not_a_notebook_is_refused_with_a_reason(attacked, student):
    status, notes, _ = attacked["subs"][student]
    assert status == "unreadable" and notes.startswith("could not read the notebook: it ")


def test_a_metadata_bomb_is_dropped_and_the_code_graded(attacked):
    assert attacked["subs"]["metabomb"][0::2] == ("graded", 16.0)


def test_2000_cells_and_a_redefined_answer_are_graded_as_they_run(attacked):
    """The second ``dsin`` replaces the first, as in Jupyter: 97.1 scores what runs (0);
    2 000 headings claim one exercise once."""
    status, notes, score = attacked["subs"]["manycells"]
    assert (status, score) == ("graded", 0.0)
    (row,) = [r for r in attacked["rows"] if (r["student"], r["exercise"]) == ("manycells", "97.1")]
    assert row["status"] == "failed" and "got 0.5" in row["feedback"]


def test_every_honest_student_is_graded_in_full(attacked):
    for student in ("caf\\udce9", "ann", "metabomb"):
        assert totals(attacked)[student] == "16", student
    assert {row[2] for row in attacked["summary"][1:]} == {"16"}  # one maximum for all


# --- one step at a time (no batch) --------------------------------------------------------


def _result(tmp_path: Path, student: str, status: str = "passed") -> SubmissionResult:
    sub = Submission(tmp_path / student / "97_x.ipynb", student)
    exercise = ExerciseResult("97.1", "t", status, 6.0, 6.0)
    return SubmissionResult(sub, [exercise], "abc", 1, "2026-01-01T00:00:00+00:00", 0.1)


def test_a_grader_stopped_mid_export_leaves_the_previous_csv_whole(tmp_path, monkeypatch):
    with Gradebook(tmp_path / "b.sqlite") as book:
        for student in ("ann", "bob", "cy"):
            book.record(_result(tmp_path, student))
        book.export_csv(tmp_path / "g.csv")
        book.export_summary(tmp_path / "s.csv")
        before = {n: (tmp_path / n).read_bytes() for n in ("g.csv", "s.csv")}
        real = gradebook_module.csv_cell

        def dies_on_the_second_student(value):
            if value == "bob":
                raise KeyboardInterrupt
            return real(value)

        monkeypatch.setattr(gradebook_module, "csv_cell", dies_on_the_second_student)
        book.record(_result(tmp_path, "dee"))
        for export, name in ((book.export_csv, "g.csv"), (book.export_summary, "s.csv")):
            with pytest.raises(KeyboardInterrupt):
                export(tmp_path / name)
    assert {n: (tmp_path / n).read_bytes() for n in ("g.csv", "s.csv")} == before
    assert not list(tmp_path.glob(".*.partial"))


def test_a_record_that_fails_midway_leaves_no_half_submission(tmp_path):
    """The submission row is written first, its results after: a result the table refuses
    rolls the submission back too, so a resumed batch grades it again."""
    with Gradebook(tmp_path / "b.sqlite") as book:
        with pytest.raises(sqlite3.IntegrityError):
            book.record(_result(tmp_path, "ann", status="passed\n- forged"))
        assert book.submission_rows() == [] and book.rows() == []
        assert not book.is_graded(_result(tmp_path, "ann").submission.key, "abc")


def test_report_file_names_stay_in_the_report_folder(tmp_path):
    for student in ("..", ".", "...", "a/../../b", "CON", "x" * 300):
        name = report_name(student)
        assert "/" not in name and name not in ("", ".", "..") and len(name) < 100, student
        assert (tmp_path / f"{name}.md").resolve().parent == tmp_path.resolve()


def test_a_notebook_swapped_between_look_and_read_is_refused(tmp_path):
    """What the grader looked at (``lstat``) is what it reads, or nothing: a student who
    replaces the file in between (to have another's work graded) gets a refusal."""
    mine, theirs = tmp_path / "mine.ipynb", tmp_path / "theirs.ipynb"
    mine.write_text("{}")
    theirs.write_text('{"x": 1}')
    looked_at = os.lstat(mine)
    os.replace(theirs, mine)  # the swap
    with pytest.raises(OSError, match="changed while it was being read"):
        reading._copy_file(mine, tmp_path / "copy", looked_at, 2**20)


def test_a_composed_and_a_decomposed_name_read_the_same(tmp_path):
    """ "café" typed on two machines (NFC, NFD) is two folders on Linux and one name to read."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    assert reading.looks_like(nfc) == reading.looks_like(nfd) != reading.looks_like("cafe")
    for lookalike in ("ann\u00a0", "\uff41\uff4e\uff4e", "ANN", " ann "):
        assert reading.looks_like(lookalike) == "ann", lookalike  # no-break space, full width
    subs = [Submission(tmp_path / name / "97_x.ipynb", name) for name in (nfc, nfd)]
    staged = [reading.Staged(s, "", None, "unreadable") for s in subs]
    reading._name_lookalikes(staged)
    assert [st.notes for st in staged] == [
        [f"this student's name reads the same as another's ('{other}'): they are graded "
         "apart; check which is whose"]
        for other in (nfd, nfc)
    ]  # fmt: skip


def test_one_notebook_named_three_ways_is_one_submission(tmp_path):
    notebook = write_notebook(tmp_path / "subs" / "ann" / "97_work.ipynb", ONLY_DSIN)
    found = reading.collect_submissions(
        [tmp_path / "subs", notebook, tmp_path / "subs" / "ann" / ".." / "ann" / "97_work.ipynb"]
    )
    assert [(s.student, s.name) for s in found] == [("ann", "ann/97_work.ipynb")]
