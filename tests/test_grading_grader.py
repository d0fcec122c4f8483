"""The command-line grader: fresh limited processes, verdicts computed outside them, gradebook.

One batch of purpose-made submissions (graded once per module, two at a time) covers the
adversarial cases; each test then reads the gradebook, the CSV or the reports it produced.
Expected points come from the test exercises' closed forms (chapter 97).
"""

from __future__ import annotations

import csv
import math
import os
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from grading_testkit import CORRECT, EXERCISES_MODULE, load_test_exercises, run_cli, write_notebook

from autodiff_lab.grading import registry
from autodiff_lab.grading.checking import case_seed
from autodiff_lab.grading.gradebook import Gradebook, report_name
from autodiff_lab.grading.grader import (
    RERUN_ALONE_NOTE,
    Submission,
    SubmissionResult,
    collect_submissions,
    grade_batch,
)
from autodiff_lab.grading.scoring import ExerciseResult

pytestmark = pytest.mark.slow  # a class graded in sandboxes: seconds per file

TIMEOUT = 2.0
SLEEP_ARG = f"613.{os.getpid()}"  # unique to this test run: finds our own escaped child only
MEMORY_MB = 512
SEED = 12345
SETUP = "import math\nimport numpy as np\nfrom autodiff_lab.grading import check"
STUBS = {
    name: f'def {name}(*args):\n    raise NotImplementedError("Exercise {eid}: {name}")'
    for name, eid in (("dsin", "97.1"), ("square", "97.2"), ("scale", "97.3"))
}


def cheater_cells() -> list[str]:
    """Monkeypatch the checker and numpy, print fake results, hard-code check()'s cases."""
    exercise = registry.get("97.1")
    seen = {
        c.inputs[0]: math.cos(c.inputs[0])
        for c in exercise.cases(np.random.default_rng(case_seed("97.1")))
    }
    return [
        SETUP,
        "import autodiff_lab.grading as grading\n"
        "grading.check = lambda *a, **k: print('Exercise 97.1 — PASSED (6/6 points)')\n"
        "np.allclose = lambda *a, **k: True\nnp.isclose = lambda *a, **k: True\n"
        "math.isclose = lambda *a, **k: True\nnp.testing.assert_allclose = lambda *a, **k: None\n"
        "print('PASS: 16/16 points')",
        f"SEEN = {seen!r}\n\ndef dsin(x):\n    return SEEN.get(x, 0.0)",
        "def square(x):\n    print('97.2 PASSED')\n    return x + x",
        CORRECT["scale"],
        "check('97.1', dsin)",
        "from autodiff_lab.grading import registry\nreference = registry.get('97.2').reference",
    ]


SUBMISSIONS = {
    "alice": [SETUP, CORRECT["dsin"], "check('97.1', dsin)", CORRECT["square"], CORRECT["scale"]],
    "bob": cheater_cells,
    "carol": [
        SETUP,
        CORRECT["dsin"],
        "def square(x):\n    return x * x\n\n\nwhile True:\n    pass",
        "import sys\nsys.exit()",
        "while True:\n    print('PASS ' * 40)\n\n\n" + CORRECT["scale"],
        "import subprocess\n"
        f"child = subprocess.Popen(['sleep', '{SLEEP_ARG}'], start_new_session=True)\n"
        "with open('child.pid', 'a') as f:\n    print(child.pid, file=f)",
        "import os\nos._exit(1)",
    ],
    "dave": [
        SETUP,
        "def dsin(x):\n    while True:\n        pass",
        "import os\n\ndef square(x):\n    os._exit(1)",
        "def scale(v, a):\n    hog = []\n    while True:\n        hog.append(np.zeros(2**24))",
    ],
    "erin": [SETUP, *STUBS.values()],
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade every submission once with the CLI (-j 2); return paths and the elapsed time."""
    load_test_exercises()
    root = tmp_path_factory.mktemp("grading")
    subs = root / "submissions"
    for student, cells in SUBMISSIONS.items():
        write_notebook(subs / student / "97_work.ipynb", cells() if callable(cells) else cells)
    (subs / "frank").mkdir()
    (subs / "frank" / "97_work.ipynb").write_text("{ this is not a notebook")
    db, out, report = root / "book.sqlite", root / "grades.csv", root / "reports"
    start = time.monotonic()
    rc = run_cli(
        [
            "grade", str(subs), "--db", str(db), "--out", str(out), "--report", str(report),
            "-j", "2", "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB),
            "--seed", str(SEED), "--exercises-module", EXERCISES_MODULE, "--quiet",
        ]
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert rc == 0
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    grades = {(r["student"], r["exercise"]): r for r in rows}
    return {"root": root, "subs": subs, "db": db, "report": report, "rows": rows,
            "grades": grades, "elapsed": elapsed}  # fmt: skip


def statuses(batch, student):
    rows = [batch["grades"][(student, e)] for e in ("97.1", "97.2", "97.3")]
    return {r["exercise"]: (r["status"], float(r["points"])) for r in rows}


def notes(batch, student):
    with sqlite3.connect(batch["db"]) as conn:
        return conn.execute(
            "SELECT notes FROM submissions WHERE student = ?", (student,)
        ).fetchone()[0]


def test_correct_submission_gets_full_marks(batch):
    assert statuses(batch, "alice") == {
        "97.1": ("passed", 6.0), "97.2": ("passed", 6.0), "97.3": ("passed", 4.0)
    }  # fmt: skip


def test_monkeypatching_and_fake_output_do_not_raise_the_score(batch):
    # Hard-coded answers pass the notebook's own check, not the grader's fresh cases:
    # only the fixed edge case x = 0 (2 points) is right (and x + x == x * x there).
    assert statuses(batch, "bob") == {
        "97.1": ("failed", 2.0), "97.2": ("failed", 2.0), "97.3": ("passed", 4.0)
    }  # fmt: skip
    assert "got 0.0, expected" in batch["grades"][("bob", "97.1")]["feedback"]
    # Calling the packaged references instead of answering is flagged for a human to read.
    assert "uses the grader's internals" in notes(batch, "bob")
    assert "internals" not in notes(batch, "alice")


def test_cell_level_sabotage_is_contained(batch):
    """Endless loop, sys.exit(), endless output, an escaping child and os._exit in cells."""
    assert statuses(batch, "carol") == {
        "97.1": ("passed", 6.0), "97.2": ("passed", 6.0), "97.3": ("timed out", 0.0)
    }  # fmt: skip
    # square was defined before its cell's endless loop; scale only after one, so never.
    assert batch["grades"][("carol", "97.3")]["feedback"].startswith(
        "`scale` is not defined in the notebook (code cell 5 did not finish within 2 s)."
    )
    assert notes(batch, "carol").splitlines() == [
        "code cell 3 did not finish within 2 s; it was interrupted",
        "code cell 4 raised SystemExit (line 2 of your code)",
        "code cell 5 did not finish within 2 s; it was interrupted",  # the endless output
        (
            "code cell 7 ended the notebook's process, which exited with code 1; "
            "it was skipped on a rerun"
        ),
        RERUN_ALONE_NOTE,  # it timed out beside other notebooks: graded again alone
    ]


def test_no_process_outlives_the_grader_and_submissions_are_untouched(batch):
    """carol's cell started `sleep` in a session of its own (so killing the worker's process
    group misses it), once per worker run; every one was killed all the same. It wrote
    child.pid into its working folder: a scratch copy, never the submissions folder."""
    assert sorted(p.name for p in (batch["subs"] / "carol").iterdir()) == ["97_work.ipynb"]
    leftovers = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
            if cmdline == f"sleep\0{SLEEP_ARG}\0".encode():
                leftovers.append(proc.name)
        except OSError:
            pass
    assert leftovers == []


def test_answer_level_sabotage_gets_clear_statuses(batch):
    assert statuses(batch, "dave") == {
        "97.1": ("timed out", 0.0), "97.2": ("crashed", 0.0), "97.3": ("crashed", 0.0)
    }  # fmt: skip
    feedback = {e: batch["grades"][("dave", e)]["feedback"] for e in ("97.1", "97.2", "97.3")}
    assert "did not finish within 2 s" in feedback["97.1"]
    assert "exited with code 1" in feedback["97.2"]
    assert "ran out of memory (the limit is 512 MB)" in feedback["97.3"]


def test_stubs_are_not_attempted(batch):
    assert statuses(batch, "erin") == {
        "97.1": ("not attempted", 0.0), "97.2": ("not attempted", 0.0),
        "97.3": ("not attempted", 0.0),
    }  # fmt: skip


def test_an_unreadable_notebook_is_recorded_and_does_not_stop_the_batch(batch):
    assert notes(batch, "frank").startswith("could not read the notebook: it is not valid JSON")
    assert batch["grades"][("frank", "")]["status"] == "unreadable"


def test_the_batch_returns_within_its_timeouts(batch):
    # 10 worker starts and 3 timeouts of 2 s, two at a time; generous for a busy machine.
    assert batch["elapsed"] < 120


def test_whose_notebook_and_which_exercises(tmp_path):
    load_test_exercises()
    folder = tmp_path / "class"
    a = write_notebook(folder / "ann" / "deep" / "97_work.ipynb", ["pass"])
    b = write_notebook(folder / "ben.ipynb", ["check('97.2', square)"])
    write_notebook(folder / "ann" / ".ipynb_checkpoints" / "97_work-checkpoint.ipynb", ["pass"])
    write_notebook(folder / "ann" / "97_work.new.ipynb", ["pass"])
    c = write_notebook(tmp_path / "cy" / "97_work.ipynb", ["pass"])
    found = collect_submissions([folder, c, a])  # a twice: graded once
    assert [(s.path, s.student) for s in found] == [(a, "ann"), (b, "ben"), (c, "cy")]
    from autodiff_lab.grading.build import read_notebook
    from autodiff_lab.grading.grader import exercises_in

    chapter, _ = exercises_in(read_notebook(a), a)  # from the file name's chapter
    assert [e.id for e in chapter] == ["97.1", "97.2", "97.3"]
    named, notes = exercises_in(read_notebook(b), b)  # from the check() call
    assert [e.id for e in named] == ["97.2"] and notes == []
    with pytest.raises(FileNotFoundError, match="no such notebook"):
        collect_submissions([tmp_path / "missing.ipynb"])


def test_csv_and_reports(batch):
    assert len(batch["rows"]) == 16  # 5 readable submissions x 3 exercises, 1 unreadable
    assert list(batch["rows"][0]) == [
        "student", "exercise", "title", "points", "max_points", "status", "feedback",
        "notebook", "graded_at", "sandbox",
    ]  # fmt: skip
    assert {r["notebook"] for r in batch["rows"] if r["student"] == "dave"} == {
        "dave/97_work.ipynb"
    }
    report = (batch["report"] / f"{report_name('dave')}.md").read_text()
    assert report.startswith("# Feedback for dave")
    assert "## dave/97\\_work\\.ipynb: 0 / 16 points" in report
    (row,) = [line for line in report.splitlines() if line.startswith("| 97.1 ")]
    assert row.startswith("| 97.1 The derivative of sin") and "| 0 / 6 | timed out |" in row
    assert {p.name for p in batch["report"].iterdir()} == {
        f"{report_name(s)}.md" for s in ("alice", "bob", "carol", "dave", "erin", "frank")
    }


def test_regrading_is_idempotent(batch, capsys):
    args = ["grade", str(batch["subs"]), "--db", str(batch["db"]), "--quiet",
            "--timeout", str(TIMEOUT), "--exercises-module", EXERCISES_MODULE]  # fmt: skip
    assert run_cli(args) == 0
    assert "graded 0, skipped 6 already graded" in capsys.readouterr().out
    alice = str(batch["subs"] / "alice" / "97_work.ipynb")
    args[1] = alice
    assert run_cli([*args, "--regrade"]) == 0
    assert "graded 1, skipped 0" in capsys.readouterr().out
    with sqlite3.connect(batch["db"]) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 15
        assert conn.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 6
        assert (
            conn.execute("SELECT SUM(points) FROM results WHERE student = 'alice'").fetchone()[0]
            == 16.0
        )


def test_a_crash_mid_batch_loses_nothing_and_resumes(tmp_path):
    load_test_exercises()
    paths = [
        write_notebook(tmp_path / f"s{i}" / "97_work.ipynb", [SETUP, *CORRECT.values()])
        for i in range(2)
    ]
    submissions = collect_submissions([tmp_path])
    assert sorted(s.student for s in submissions) == ["s0", "s1"]

    class GraderDied(Exception):
        pass

    def die_after_first(result):
        raise GraderDied

    with Gradebook(tmp_path / "book.sqlite") as book:
        with pytest.raises(GraderDied):
            grade_batch(submissions, book, jobs=1, progress=False, on_graded=die_after_first)
    with Gradebook(tmp_path / "book.sqlite") as book:
        assert len(book.submission_rows()) == 1  # the one finished before the crash is kept
        summary = grade_batch(submissions, book, jobs=1, progress=False)
        assert (len(summary.graded), len(summary.skipped)) == (1, 1)
        assert {r["status"] for r in book.rows()} == {"passed"} and len(book.rows()) == 6
    shutil.rmtree(paths[0].parent)


def test_gradebook_upsert_replaces_rows(tmp_path):
    sub = Submission(tmp_path / "97_x.ipynb", "zoe")

    def result(points, ids):
        exercises = [
            ExerciseResult(i, "t", "failed" if points < 1 else "passed", points, 1.0) for i in ids
        ]
        return SubmissionResult(sub, exercises, "abc", 1, "2026-01-01T00:00:00+00:00", 0.1)

    with Gradebook(tmp_path / "b.sqlite") as book:
        book.record(result(0.0, ["97.1", "97.2"]))
        book.record(result(1.0, ["97.1"]))
        assert [(r["exercise"], r["points"], r["status"]) for r in book.rows()] == [
            ("97.1", 1.0, "passed")
        ]
        assert book.is_graded(sub.key, "abc") and not book.is_graded(sub.key, "changed")
        bad = result(1.0, ["97.1"])
        bad.exercises[0].status = "great"
        with pytest.raises(sqlite3.IntegrityError):
            book.record(bad)
        assert book.rows()[0]["status"] == "passed"  # the failed write left nothing behind


def test_reports_escape_and_csv_quotes(tmp_path):
    sub = Submission(tmp_path / "97_x.ipynb", "o'brien <script>")
    feedback_hint = 'a "quoted", comma | pipe\nnewline & <tag>'
    exercise = ExerciseResult("97.1", "sin | cos", "failed", 0.5, 1.0, hints=[feedback_hint])
    result = SubmissionResult(sub, [exercise], "abc", 1, "2026-01-01T00:00:00+00:00", 0.1)
    with Gradebook(tmp_path / "b.sqlite") as book:
        book.record(result)
        assert book.export_csv(tmp_path / "g.csv") == 1
        (html_report,) = book.write_reports(tmp_path / "html", fmt="html")
        (md_report,) = book.write_reports(tmp_path / "md", fmt="md")
    with open(tmp_path / "g.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    # round-trips through CSV quoting, on one line: a line break is written as its escape
    assert row["feedback"] == "Hint: " + feedback_hint.replace("\n", "\\n")
    assert html_report.name.startswith("o_brien__script_-") and html_report.suffix == ".html"
    page = html_report.read_text()
    assert "<script>" not in page and "o&#x27;brien &lt;script&gt;" in page
    assert "&lt;tag&gt;" in page and "0.5 / 1" in page
    table_row = [line for line in md_report.read_text().splitlines() if line.startswith("| 97.1")]
    assert table_row == [
        "| 97.1 sin \\| cos | 0.5 / 1 | failed | "
        'Hint\\: a "quoted", comma \\| pipe\\\\nnewline &amp; &lt;tag&gt; |'
    ]
