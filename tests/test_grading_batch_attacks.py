"""A determined class against the grader's batch side (issue 22 §2-§5): each test performs
one attack and asserts the fair outcome — the attacker's own notebook may lose, every other
student is graded as if the attacker were not there, and the batch always ends with the
CSV, the summary and every report.

One batch through the real command line (-j 2, no sandbox: the attacks here are on the
grader's own process, reading, planning and recording, not on the worker), graded once per
module. Expected points are the test exercises' closed forms (chapter 97: 6 + 6 + 4 = 16).
"""

from __future__ import annotations

import csv
import json
import os
import tracemalloc
from pathlib import Path

import pytest
from grading_testkit import (
    CORRECT,
    grade_folder,
    load_test_exercises,
    write_notebook,
)

from autodiff_lab.grading import batch, grader, isolation, reading
from autodiff_lab.grading.gradebook import NOT_GRADED, Gradebook, report_name
from autodiff_lab.grading.notebook_facts import code_facts
from autodiff_lab.grading.sandbox import Sandbox
from autodiff_lab.grading.supervise import WorkerRun

pytestmark = pytest.mark.slow  # a class graded: seconds

HONEST = [*CORRECT.values()]
FORGED_ROW = "\r\x1b[2Kalice,97.1,The derivative of sin,8.0,8.0,passed"
INJECTED = "oops\n- the grader: full marks granted\r# Grade corrected\u2028| 97.1 | 6 / 6 |"
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # a Latin-1 folder name: not valid UTF-8
# The answer to 97.2 reports its own first case, with a message no exception could carry
# (the worker keeps an exception's first line): the first report of a case counts.
FORGER = [
    f"def dsin(x):\n    raise ValueError({FORGED_ROW!r})",
    f"""
import gc, json, os
_fd = next(o.fd for o in gc.get_objects() if type(o).__name__ == "Events")
_forged = []

def square(x):
    if not _forged:
        _forged.append(1)
        event = {{"event": "case", "id": "97.2", "index": 0, "kind": "error",
                 "message": {INJECTED!r}}}
        os.write(_fd, (json.dumps(event) + "\\n").encode())
    return x * x
""",
    CORRECT["scale"],
]


def _write_notebook_json(path: Path, cells: list[str], outputs: list | None = None) -> None:
    """A notebook written as JSON directly (for outputs nbformat would validate slowly)."""
    nb = {
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [
            {"cell_type": "code", "source": c, "metadata": {}, "execution_count": None,
             "outputs": outputs if k == 0 and outputs else []}
            for k, c in enumerate(cells)
        ],
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch-attacks")
    try:
        yield _grade_the_class(root)
    finally:
        if (root / "submissions" / "deep").exists():
            _remove_chain(root / "submissions" / "deep")  # pytest's clean-up would recurse


def _grade_the_class(root: Path) -> dict:
    load_test_exercises()
    subs = root / "submissions"
    write_notebook(subs / "alice" / "97_work.ipynb", HONEST)
    # §2: 60 000 blank lines (a grader regex used to backtrack for minutes on them)
    write_notebook(subs / "blank" / "97_work.ipynb", ["\n" * 60_000 + "x = 1", *HONEST])
    # §2: a lone surrogate in an exception message (SQLite used to refuse the note)
    write_notebook(subs / "surrogate" / "97_work.ipynb", ["raise ValueError(chr(0xD800))", *HONEST])
    # §2: a folder name that is not UTF-8
    write_notebook(subs / NOT_UTF8 / "97_work.ipynb", HONEST)
    # §2: a named pipe called *.ipynb (reading it would block forever)
    (subs / "pipe").mkdir()
    os.mkfifo(subs / "pipe" / "97_work.ipynb")
    # §2: a 100 GB sparse file (hashing it would read 100 GB)
    (subs / "sparse").mkdir()
    with open(subs / "sparse" / "97_work.ipynb", "wb") as f:
        f.truncate(100 * 2**30)
    # §2: a folder tree 1 100 levels deep (a recursive walk hit the recursion limit)
    deep = str(subs / "deep")
    os.mkdir(deep)
    for _ in range(1_100):  # (Path.mkdir(parents=True) is itself recursive)
        deep += "/d"
        os.mkdir(deep)
    _write_notebook_json(Path(deep) / "97_work.ipynb", HONEST)
    # §3: comments claiming other exercises (they used to raise everyone's maximum)
    claims = "# Exercise 8.3\n# Exercise 6.3\n" + "".join(
        f"# Exercise 99.{k}\n" for k in range(3000)
    )
    write_notebook(subs / "claimer" / "97_work.ipynb", [claims, CORRECT["dsin"]])
    # §3: a hard link to alice's notebook
    (subs / "mallory").mkdir()
    os.link(subs / "alice" / "97_work.ipynb", subs / "mallory" / "97_work.ipynb")
    # §4: control codes that draw a forged CSV row; text that breaks a report into a fake
    # note, heading and table row
    write_notebook(subs / "forger" / "97_work.ipynb", FORGER)
    # §5: 50 MB of stored output (outputs play no part in grading)
    output = {"output_type": "stream", "name": "stdout", "text": ["y" * 99 + "\n"] * 500_000}
    _write_notebook_json(subs / "chatty" / "97_work.ipynb", HONEST, [output])
    return grade_folder(subs, root, "sha256")


def _remove_chain(top: Path) -> None:
    """Remove a chain of nested folders deepest first, without recursion."""
    chain = [str(top)]
    while subdirs := [e.path for e in os.scandir(chain[-1]) if e.is_dir(follow_symlinks=False)]:
        chain.append(subdirs[0])
    for here in reversed(chain):
        for entry in os.scandir(here):
            os.unlink(entry.path)
        os.rmdir(here)


def points(attacked, student: str) -> dict[str, float]:
    return {r["exercise"]: float(r["points"]) for r in attacked["rows"] if r["student"] == student}


def report(attacked, student: str) -> str:
    return (attacked["paths"]["report"] / f"{report_name(student)}.md").read_text()


def test_the_batch_ends_with_every_export_and_every_honest_student_graded(attacked):
    assert attacked["rc"] == 0, attacked["err"]
    for student in ("alice", "blank", "surrogate", "chatty", "caf\\udce9"):
        assert points(attacked, student) == {"97.1": 6.0, "97.2": 6.0, "97.3": 4.0}, student
        assert report(attacked, student)
    students = {row[0] for row in attacked["summary"][1:]}
    assert {"alice", "pipe", "sparse", "claimer", "mallory", "forger"} <= students


def test_60000_blank_lines_are_read_and_graded(attacked):
    assert attacked["subs"]["blank"][0] == "graded"
    facts = code_facts(["\n" * 60_000 + "def dsin(x):\n    return x"])
    assert facts["defined"] == ["dsin"]


def test_a_lone_surrogate_is_stored_as_its_escape(attacked):
    status, notes, _ = attacked["subs"]["surrogate"]
    assert status == "graded" and "raised ValueError: \\ud800" in notes


def test_a_file_name_that_is_not_utf8_is_graded_under_an_escaped_name(attacked):
    assert attacked["subs"]["caf\\udce9"][0] == "graded"


def test_a_named_pipe_is_refused_without_being_opened(attacked):
    status, notes, _ = attacked["subs"]["pipe"]
    assert status == "unreadable" and "not a regular file" in notes


def test_a_100_gb_sparse_file_is_refused_by_its_size_unread(attacked):
    status, notes, fingerprint = attacked["subs"]["sparse"]
    assert status == "unreadable" and notes.startswith("too large to grade (102400.0 MB")
    assert fingerprint.startswith("unread:")  # refused before any byte was hashed


def test_a_tree_1100_levels_deep_is_skipped_with_a_warning(attacked):
    assert "lie more than 16 levels deep: not searched" in attacked["err"]
    assert "deep" not in attacked["subs"]


def test_claimed_exercises_raise_no_ones_maximum(attacked):
    header, *rows = attacked["summary"]
    table = {row[0]: dict(zip(header[1:], row[1:])) for row in rows}
    assert {t["maximum"] for t in table.values()} == {"16"}
    assert table["alice"]["total"] == "16"
    notes = attacked["subs"]["claimer"][1]
    assert (
        "mentions exercises 99.0, 99.1, 99.2, 99.3, 99.4 and 2995 more, which do not exist" in notes
    )


def test_a_hard_link_to_another_students_notebook_is_named_on_both(attacked):
    assert "the same file as alice/97_work.ipynb (a hard link)" in attacked["subs"]["mallory"][1]
    assert "the same file as mallory/97_work.ipynb (a hard link)" in attacked["subs"]["alice"][1]
    assert "the same file as alice/97\\_work\\.ipynb \\(a hard link\\)" in report(
        attacked, "mallory"
    )


def test_control_codes_cannot_forge_a_csv_row(attacked):
    raw = attacked["paths"]["csv"].read_bytes().decode("utf-8")  # no newline translation
    assert "\x1b" not in raw and "\r" not in raw.replace("\r\n", "")
    assert len(raw.split("\r\n")) == len(attacked["rows"]) + 2  # header, rows, final newline
    (dsin,) = [r for r in attacked["rows"] if r["student"] == "forger" and r["exercise"] == "97.1"]
    assert dsin["status"] == "failed" and dsin["points"] == "0.0"
    assert "\\x1b[2Kalice,97.1" in dsin["feedback"]  # (the worker keeps the first line)


def _markdown_structure(text: str) -> tuple[list[str], list[str], int]:
    """(headings, bullet items, table body rows) as a Markdown renderer sees them."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    inline = [tokens[k + 1].content for k in range(len(tokens) - 1)]
    headings = [inline[k] for k, t in enumerate(tokens) if t.type == "heading_open"]
    bullets = [inline[k + 1] for k, t in enumerate(tokens) if t.type == "list_item_open"]
    rows = sum(t.type == "tr_open" for t in tokens) - sum(t.type == "thead_open" for t in tokens)
    return headings, bullets, rows


def test_student_text_cannot_pose_as_grader_text_in_a_report(attacked):
    text = report(attacked, "forger")
    headings, bullets, rows = _markdown_structure(text)
    assert len(headings) == 2 and headings[0] == "Feedback for forger"
    assert rows == 3 and not any("full marks" in b for b in bullets)
    (square,) = [
        r for r in attacked["rows"] if r["student"] == "forger" and r["exercise"] == "97.2"
    ]
    assert float(square["points"]) == 5.0  # the forged case is the forger's own loss
    assert (
        "oops\\n- the grader: full marks granted\\r# Grade corrected\\u2028|" in square["feedback"]
    )


def test_a_report_renders_injected_notes_and_feedback_as_text(tmp_path):
    from autodiff_lab.grading.scoring import ExerciseResult

    sub = grader.Submission(tmp_path / "97_x.ipynb", "eve")
    exercise = ExerciseResult("97.1", "t", "failed", 0.0, 6.0, note=INJECTED)
    notes = [INJECTED, "### heading\n- second note"]
    result = grader.SubmissionResult(sub, [exercise], "abc", 1, "2026-01-01T00:00:00", 0.1, notes)
    with Gradebook(tmp_path / "b.sqlite") as book:
        book.record(result)
        (md,) = book.write_reports(tmp_path / "md")
        (page,) = book.write_reports(tmp_path / "html", fmt="html")
    headings, bullets, rows = _markdown_structure(md.read_text(encoding="utf-8"))
    assert headings == ["Feedback for eve", "97\\_x\\.ipynb: 0 / 6 points"]
    assert len(bullets) == 2 and rows == 1
    assert page.read_text(encoding="utf-8").count("<li>") == 2


def test_3000_claims_and_a_3000_line_message_stay_within_the_notes_cap(attacked):
    for student in ("claimer", "forger"):
        notes = attacked["subs"][student][1].split("\n")
        assert len(notes) <= grader.MAX_NOTES + 2, student
        assert all(len(n) <= grader.MAX_NOTE_CHARS for n in notes), student
    three_thousand_lines = "\n".join(f"line {k}" for k in range(3000))
    capped = grader.capped_notes([three_thousand_lines] + [f"note {k}" for k in range(3000)])
    assert len(capped) == grader.MAX_NOTES + 1 and capped[-1].startswith("... and 2981 more")
    assert "\n" not in "".join(capped) and len(capped[0]) == grader.MAX_NOTE_CHARS


def test_50_mb_of_stored_output_is_dropped_and_the_code_graded(attacked):
    assert attacked["subs"]["chatty"][0] == "graded"


# --- the same attacks, one step at a time (no batch) ----------------------------------------


def test_a_6_mb_notebook_is_read_in_a_limited_child_not_in_the_grader(tmp_path):
    """The cell ``x = [0, 0, …]`` of 6 MB: a syntax tree of it takes ~2.9 GB. It is read in
    the child and left out of the parse budget; the grader's own process allocates what
    the answer needs (the cells' text), not the tree."""
    notebook = tmp_path / "big.ipynb"
    _write_notebook_json(notebook, ["x = [" + "0," * 3_000_000 + "]", CORRECT["dsin"]])
    tracemalloc.start()
    try:
        facts = grader.read_facts(notebook)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facts["defined"] == ["dsin"] and facts["not_analysed"] == [[1, 6_000_006]]
    assert peak < 64 * 2**20, peak / 2**20


def test_a_reader_that_runs_past_its_limit_makes_the_notebook_unreadable(tmp_path, monkeypatch):
    from autodiff_lab.grading import notebook_facts

    slow = tmp_path / "slow_reader.py"
    slow.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(notebook_facts, "__file__", str(slow))
    monkeypatch.setattr(reading, "READ_SECONDS", 0.5)
    notebook = tmp_path / "x.ipynb"
    _write_notebook_json(notebook, HONEST)
    assert grader.read_facts(notebook) == {
        "problem": "could not read the notebook within the grader's limits (1024 MB, 0.5 s)"
    }


@pytest.mark.parametrize(
    "spelling",
    [
        "from autodiff_lab.functional import jacfwd as j\n",
        "import autodiff_lab\nF = autodiff_lab.functional\nj = F.jacfwd\n",
        "from autodiff_lab.functional import jacfwd\nj = jacfwd\n",
        "from autodiff_lab import functional\n"
        "def helper(f, x):\n    return functional.jacfwd(f)(x)\n",
    ],
)
def test_an_aliased_library_call_is_named_by_its_real_name(spelling):
    body = "helper(f, x)" if "helper" in spelling else "j(f)(x)"
    source = spelling + f"def jacobian_column(f, x, i):\n    return {body}[:, i]\n"
    _, notes = grader.answered_exercises(
        {"cells": [{"cell_type": "code", "source": source}]}, "homework.ipynb"
    )
    (note,) = [n for n in notes if n.startswith("exercise 1.5")]
    assert "calls the library's own" in note and "jacfwd" in note


def test_a_lone_surrogate_and_control_codes_are_recorded_and_exported(tmp_path):
    from autodiff_lab.grading.scoring import ExerciseResult

    sub = grader.Submission(tmp_path / NOT_UTF8 / "97_x.ipynb", NOT_UTF8 + "\x1b[2J")
    exercise = ExerciseResult("97.1", "t", "failed", 0.0, 6.0, note="raised " + chr(0xD800))
    result = grader.SubmissionResult(
        sub, [exercise], "abc", 1, "2026-01-01T00:00:00+00:00", 0.1, ["x\udc80\ny"]
    )
    with Gradebook(tmp_path / "b.sqlite") as book:
        book.record(result)
        book.export_csv(tmp_path / "g.csv")
        book.export_summary(tmp_path / "s.csv")
        (md,) = book.write_reports(tmp_path / "md")
        (notes,) = book.conn.execute("SELECT notes FROM submissions").fetchone()
    assert notes == "x\\udc80\\ny"
    raw = (tmp_path / "g.csv").read_text(encoding="utf-8")
    assert "caf\\udce9\\x1b[2J" in raw and "raised \\ud800" in raw and "\x1b" not in raw
    assert "\x1b" not in md.read_text(encoding="utf-8")


def _infrastructure_batch(tmp_path, monkeypatch, failures: int):
    """Grade two notebooks where starting a worker fails ``failures`` times for 'bob'."""
    load_test_exercises()
    subs = tmp_path / "subs"
    for name in ("ann", "bob"):
        write_notebook(subs / name / "97_work.ipynb", HONEST)
    real, failed = isolation.run_worker, []

    def flaky(request, **kwargs):
        if kwargs["scratch"].name.split("-")[0] == bob_folder[0] and len(failed) < failures:
            failed.append(1)
            return WorkerRun(
                [], False, None, ("startup", None), "could not be started", "",
                infrastructure_failure="the worker could not be started (OSError: EAGAIN)",
            )  # fmt: skip
        return real(request, **kwargs)

    bob_folder: list[str] = []
    real_stage = batch.stage

    def stage(submissions, root):
        staged = real_stage(submissions, root)
        bob_folder.extend(s.folder.name for s in staged if s.submission.student == "bob")
        return staged

    monkeypatch.setattr(batch, "stage", stage)  # each where the stage that calls it looks
    monkeypatch.setattr(isolation, "run_worker", flaky)
    monkeypatch.setattr(isolation, "INFRASTRUCTURE_PAUSE", 0.0)
    settings = grader.Settings(sandbox=Sandbox("none", reason="test"), timeout=10)
    book = Gradebook(tmp_path / "book.sqlite")
    summary = grader.grade_batch(
        grader.collect_submissions([subs]), book, settings=settings, progress=False
    )
    return book, summary, subs, settings


def test_a_worker_that_could_not_start_once_is_tried_again(tmp_path, monkeypatch):
    book, summary, _, _ = _infrastructure_batch(tmp_path, monkeypatch, failures=1)
    with book:
        assert sorted(r.submission.student for r in summary.graded) == ["ann", "bob"]
        assert {r.submission.student: r.score for r in summary.graded} == {"ann": 16, "bob": 16}


def test_an_infrastructure_failure_is_not_the_students_result_and_a_rerun_regrades(
    tmp_path, monkeypatch
):
    book, summary, subs, settings = _infrastructure_batch(
        tmp_path, monkeypatch, failures=grader.INFRASTRUCTURE_ATTEMPTS
    )
    with book:
        assert [s.student for s in summary.not_graded] == ["bob"]
        assert [r.submission.student for r in summary.graded] == ["ann"]
        (row,) = [r for r in book.submission_rows() if r["student"] == "bob"]
        assert row["status"] == NOT_GRADED and "the grader's failure" in row["notes"]
        assert not [r for r in book.rows() if r["student"] == "bob"]  # no exercise recorded
        monkeypatch.undo()
        again = grader.grade_batch(
            grader.collect_submissions([subs]), book, settings=settings, progress=False
        )
        assert [s.student for s in again.skipped] == ["ann"]
        assert [(r.submission.student, r.score) for r in again.graded] == [("bob", 16)]


def test_the_assigned_chapters_fix_the_summarys_maximum_in_a_class_of_two(tmp_path):
    """Two students, one claiming exercise 8.3: half the class is one student, so the
    default counts chapter 8; ``--chapters 97`` counts what was assigned, from the course's
    own definitions (chapter 97: 6 + 6 + 4, whichever exercises a notebook answered)."""
    from autodiff_lab.grading.scoring import ExerciseResult

    load_test_exercises()
    with Gradebook(tmp_path / "b.sqlite") as book:
        for student, answered in (("ann", ["97.1"]), ("bob", ["97.1", "8.3"])):
            sub = grader.Submission(tmp_path / student / "97_x.ipynb", student)
            # 97.1's maximum as the grader records it; 97.2 and 97.3 from their definitions
            exercises = [ExerciseResult(i, "t", "passed", 6.0, 6.0) for i in answered]
            book.record(grader.SubmissionResult(sub, exercises, "abc", 1, "2026-01-01", 0.1))
        book.export_summary(tmp_path / "default.csv")
        book.export_summary(tmp_path / "assigned.csv", chapters=[97])
    for name, maximum in (("default.csv", None), ("assigned.csv", "16")):
        with open(tmp_path / name, newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        if maximum is None:  # chapter 8 counted: more than chapter 97's 16
            assert (
                rows["ann"]["maximum"] == rows["bob"]["maximum"]
                and float(rows["ann"]["maximum"]) > 16
            )
        else:
            assert rows["ann"]["maximum"] == rows["bob"]["maximum"] == maximum
