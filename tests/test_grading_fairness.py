"""Honest students never lose marks, and the results are what a lecturer uploads.

One batch WITHOUT a sandbox (``--sandbox none``, run as ``python -m autodiff_lab.cli`` so
its start line can be read) covers: look-alike student names, a file name that is HTML,
an nbformat 3 notebook, a renamed notebook with its checks deleted, one exercise answered
in three notebooks, identical notebooks, an answer too large to send. Then: a student
who SIGKILLs the grader, "in progress" marks, Ctrl-C in the middle of a batch,
``--require-sandbox`` with no sandbox, stack walking when there is no sandbox, and
exercises whose ``run`` would bring references into the worker.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from grading_testkit import CORRECT, EXERCISES_MODULE, load_test_exercises, run_cli, write_notebook

from autodiff_lab.grading.gradebook import Gradebook, report_name
from autodiff_lab.grading.grader import RERUN_ALONE_NOTE

SETUP = "import math\nimport numpy as np"
HTML_NAME = "<img src=x onerror=alert(1)>"
HALF_RIGHT_DSIN = "import math\n\ndef dsin(x):\n    return math.cos(x) if x > 0 else 0.0"
WRONG_DSIN = "def dsin(x):\n    return 1.0"
STUBS = 'def square(x):\n    raise NotImplementedError("Exercise 97.2: square")'


def grade(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """``autodiff-lab grade ARGS`` in a fresh process (so it may be killed or interrupted)."""
    argv = [sys.executable, "-m", "autodiff_lab.cli", "grade", *args, "--quiet"]
    argv += ["--exercises-module", EXERCISES_MODULE, "--timeout", "10", "--sandbox", "none"]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("fairness")
    subs = root / "submissions"
    write_notebook(subs / "ann lee" / "97_work.ipynb", [SETUP, *CORRECT.values()])
    write_notebook(subs / "ann_lee" / "97_work.ipynb", [SETUP, STUBS])
    write_notebook(subs / f"{HTML_NAME}.ipynb", [SETUP, CORRECT["square"]])
    (subs / "old").mkdir()
    (subs / "old" / "97_work.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": []}))
    write_notebook(subs / "renamed" / "my_homework.ipynb", [SETUP, CORRECT["dsin"]])
    for name, dsin in (("97_a", WRONG_DSIN), ("97_b", CORRECT["dsin"]), ("97_c", WRONG_DSIN)):
        write_notebook(subs / "triple" / f"{name}.ipynb", [SETUP, dsin])
    for k in range(3):
        write_notebook(subs / f"twin{k}" / "97_work.ipynb", [SETUP, HALF_RIGHT_DSIN])
    big = "def scale(v, a):\n    return np.zeros(5_000_000) if len(v) == 0 else a * np.asarray(v)"
    write_notebook(subs / "big" / "97_work.ipynb", [SETUP, big])
    before = sorted((p, p.stat().st_mtime_ns) for p in subs.rglob("*"))
    names = [("db", "book.sqlite"), ("csv", "grades.csv"), ("summary", "summary.csv")]
    paths = {k: root / v for k, v in [*names, ("report", "reports")]}
    done = grade(
        [str(subs), "--db", str(paths["db"]), "--out", str(paths["csv"]), "--summary",
         str(paths["summary"]), "--report", str(paths["report"]), "--report-format", "html",
         "-j", "2", "--memory", "1024"],
        cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(paths["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    with open(paths["summary"], newline="") as f:
        summary = list(csv.reader(f))
    return {"root": root, "subs": subs, "paths": paths, "rows": rows, "summary": summary,
            "done": done, "before": before}  # fmt: skip


def rows_of(batch, student):
    return {r["exercise"]: r for r in batch["rows"] if r["student"] == student}


def test_grading_without_a_sandbox_says_so_everywhere(batch):
    assert (
        batch["done"]
        .stderr.splitlines()[0]
        .startswith("WARNING: grading without a sandbox (--sandbox none)")
    )
    assert {r["sandbox"] for r in batch["rows"]} == {"none"}
    page = (batch["paths"]["report"] / f"{report_name('ann_lee')}.html").read_text()
    assert "graded WITHOUT a sandbox" in page


def test_look_alike_names_get_their_own_reports(batch):
    reports = {p.name for p in batch["paths"]["report"].iterdir()}
    ann_space, ann_underscore = f"{report_name('ann lee')}.html", f"{report_name('ann_lee')}.html"
    assert {ann_space, ann_underscore} <= reports and ann_space != ann_underscore
    assert "Feedback for ann lee" in (batch["paths"]["report"] / ann_space).read_text()
    assert "16 / 16 points" in (batch["paths"]["report"] / ann_space).read_text()
    assert "0 / 16 points" in (batch["paths"]["report"] / ann_underscore).read_text()


def test_html_in_a_file_name_is_shown_as_text(batch):
    (page,) = [p for p in batch["paths"]["report"].iterdir() if p.name.startswith("_img")]
    text = page.read_text()
    assert "<img" not in text
    assert "<h1>Feedback for &lt;img src=x onerror=alert(1)&gt;</h1>" in text
    assert "<h2>&lt;img src=x onerror=alert(1)&gt;.ipynb: 6 / 6 points</h2>" in text
    with Gradebook(batch["paths"]["db"]) as book:
        (md,) = [p for p in book.write_reports(batch["root"] / "md") if p.name.startswith("_img")]
    heading = md.read_text().splitlines()[0]
    assert heading == r"# Feedback for &lt;img src=x onerror=alert\(1\)&gt;"


def test_every_student_appears_with_a_status(batch):
    assert rows_of(batch, "old")[""]["status"] == "unreadable"
    assert "version 3 notebook" in rows_of(batch, "old")[""]["feedback"]
    renamed = rows_of(batch, "renamed")  # no chapter in its name, no check(): its def counts
    assert (renamed["97.1"]["status"], renamed["97.1"]["points"]) == ("passed", "6.0")
    students = [row[0] for row in batch["summary"][1:]]
    assert students == sorted(
        ["ann lee", "ann_lee", HTML_NAME, "big", "old", "renamed", "triple"]
        + [f"twin{k}" for k in range(3)]
    )


def test_one_exercise_in_three_notebooks_counts_once_at_its_best(batch):
    triple = rows_of(batch, "triple")  # 97_a, 97_b and 97_c: chapter 97's three exercises
    assert list(triple) == ["97.1", "97.2", "97.3"]
    assert (triple["97.1"]["points"], triple["97.1"]["notebook"]) == ("6.0", "triple/97_b.ipynb")


def test_the_summary_csv_has_one_row_per_student(batch):
    header, *rows = batch["summary"]
    # Columns are named by the course's own exercise notebooks (none for test chapter 97),
    # never by what students submitted (red team #10).
    assert header == ["student", "total", "maximum", "chapter 97"]
    table = {row[0]: row[1:] for row in rows}
    assert table["ann lee"] == ["16", "16", "16"]  # every exercise of chapter 97: 6 + 6 + 4
    assert table["triple"] == ["6", "16", "6"]
    assert table["old"] == ["0", "16", "0"]


def test_identical_notebooks_get_identical_points_from_one_recorded_seed(batch):
    twins = [rows_of(batch, f"twin{k}")["97.1"]["points"] for k in range(3)]
    # Never full marks (the x = 0 edge fails); 0 points when all four random x are
    # negative (1 seed in 16), so only "identical" and "below 6" are asserted.
    assert len(set(twins)) == 1 and float(twins[0]) < 6
    with sqlite3.connect(batch["paths"]["db"]) as conn:
        seeds = {s for (s,) in conn.execute("SELECT seed FROM submissions")}
    assert len(seeds) == 1


def test_an_answer_too_large_to_send_says_so(batch):
    big = rows_of(batch, "big")["97.3"]  # too large on the empty-vector case only
    assert (big["status"], big["points"]) == ("failed", "3.0")
    assert (
        "edge: empty vector: answer too large to send (19 MB; the limit is 16 MB)"
        in big["feedback"]
    )


def test_grading_writes_nothing_into_submissions_and_shows_no_grader_paths(batch):
    after = sorted((p, p.stat().st_mtime_ns) for p in batch["subs"].rglob("*"))
    assert after == batch["before"]
    shown = batch["paths"]["csv"].read_text() + "".join(
        p.read_text() for p in batch["paths"]["report"].iterdir()
    )
    assert str(batch["root"]) not in shown and "/tmp/" not in shown


def test_a_student_who_kills_the_grader_is_recorded_as_crashed_on_rerun(tmp_path):
    subs = tmp_path / "subs"
    write_notebook(subs / "a_killer" / "97_work.ipynb", ["import os\nos.kill(os.getppid(), 9)"])
    write_notebook(subs / "b_honest" / "97_work.ipynb", [SETUP, *CORRECT.values()])
    args = [str(subs), "--db", str(tmp_path / "book.sqlite"), "--out", str(tmp_path / "g.csv")]
    first = grade(args, cwd=tmp_path)
    assert first.returncode == -signal.SIGKILL
    second = grade(args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert (
        "recorded as crashed (the grader died while grading it alone): a_killer/97_work.ipynb"
        in (second.stdout)
    )
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert rows[("a_killer", "97.1")]["status"] == "crashed"
    assert (
        "The grader itself was killed while grading this notebook alone"
        in rows[("a_killer", "97.1")]["feedback"]
    )
    assert {rows[("b_honest", e)]["status"] for e in ("97.1", "97.2", "97.3")} == {"passed"}


def test_ctrl_c_keeps_what_is_graded_and_says_how_to_resume(tmp_path):
    subs = tmp_path / "subs"
    write_notebook(subs / "a" / "97_work.ipynb", [SETUP, *CORRECT.values()])
    # b is still running when the Ctrl-C comes, even if it comes only at the 60 s deadline
    # below (twice, on a loaded machine, a shorter b had ended and the batch with it first)
    write_notebook(subs / "b" / "97_work.ipynb", ["import time\ntime.sleep(90)", CORRECT["dsin"]])
    db = tmp_path / "book.sqlite"
    argv = [sys.executable, "-m", "autodiff_lab.cli", "grade", str(subs), "--db", str(db),
            "--quiet", "--sandbox", "none", "--timeout", "300",
            "--exercises-module", EXERCISES_MODULE]  # fmt: skip
    # Ctrl-C as at a lecturer's terminal: a suite started in the background of a shell without
    # job control (`make test &`, nohup, some CI runners) inherits SIGINT *ignored*, and so would
    # the grader (it then rightly ignores Ctrl-C: the batch ran on, every time, in such clones).
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)  # fmt: skip
    deadline = time.monotonic() + 60
    # the Ctrl-C once came between a's result and b's start, so nothing was running yet
    while time.monotonic() < deadline and not (_graded(db) and _count(db, "in_progress")):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"interrupted: 1 of 2 notebooks are graded and saved in {db}" in err
    assert "run the same command again to grade the rest" in err
    with sqlite3.connect(db) as conn:
        # b was running: it stays marked, as graded beside others (alone = 0), so the next
        # run grades it first and alone, and never blames it for the Ctrl-C.
        left = conn.execute("SELECT submission, alone FROM in_progress").fetchall()
        assert [(Path(k).parent.name, alone) for k, alone in left] == [("b", 0)]
        assert [s for (s,) in conn.execute("SELECT student FROM submissions")] == ["a"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _count(db: Path, table: str) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    except sqlite3.Error:
        return 0


def _graded(db: Path) -> bool:
    return _count(db, "submissions") >= 1


def test_require_sandbox_refuses_to_grade_without_one(tmp_path, monkeypatch, capsys):
    load_test_exercises()
    write_notebook(tmp_path / "s" / "97_work.ipynb", [SETUP, CORRECT["dsin"]])
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    db = tmp_path / "book.sqlite"
    assert run_cli(["grade", str(tmp_path / "s"), "--db", str(db), "--require-sandbox"]) == 2
    assert "a sandbox is required but bwrap is not installed" in capsys.readouterr().err
    assert not db.exists()


def test_without_a_sandbox_the_worker_still_holds_no_references(tmp_path):
    """gc and stack walking find no exercise object: the worker never has one, nor any
    module of references (registry, exercise modules)."""
    hunt = (
        "import gc, sys\nFOUND = {}\n\n"
        "def grab(obj):\n"
        "    if callable(getattr(obj, 'reference', None)):\n"
        "        FOUND[getattr(obj, 'id', '?')] = obj.reference\n\n"
        "def dsin(x):\n"
        "    for obj in gc.get_objects():\n        grab(obj)\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        for value in [*frame.f_locals.values(), *frame.f_globals.values()]:\n"
        "            grab(value)\n"
        "        frame = frame.f_back\n"
        "    return FOUND['97.1']((x,)) if '97.1' in FOUND else float('nan')"
    )
    loaded = (
        "import sys\nheld = [m for m in sys.modules if m.startswith(("
        "'autodiff_lab.grading.exercises', 'autodiff_lab.grading.registry', "
        "'grading_testkit_exercises'))]\n"
        "if held:\n    raise RuntimeError(held)"
    )
    write_notebook(tmp_path / "subs" / "eve" / "97_work.ipynb", [hunt, loaded])
    out = tmp_path / "g.csv"
    done = grade([str(tmp_path / "subs"), "--db", str(tmp_path / "b.sqlite"), "--out", str(out)],
                 cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = {r["exercise"]: r for r in csv.DictReader(f)}
    assert (rows["97.1"]["status"], rows["97.1"]["points"]) == ("failed", "0.0")
    with sqlite3.connect(tmp_path / "b.sqlite") as conn:  # no module of references was loaded
        (notes,) = conn.execute("SELECT notes FROM submissions").fetchone()
    assert "raised" not in notes


def test_in_progress_marks_blame_only_a_notebook_that_ran_alone(tmp_path):
    """Left "in progress" beside others: tried again, alone. Left while alone: crashed."""
    from autodiff_lab.grading.grader import Settings, collect_submissions, grade_batch, stage
    from autodiff_lab.grading.sandbox import choose

    load_test_exercises()
    for name in ("beside", "alone"):
        write_notebook(tmp_path / "subs" / name / "97_work.ipynb", [SETUP, CORRECT["dsin"]])
    subs = collect_submissions([tmp_path / "subs"])
    shas = {st.submission.student: st.sha256 for st in stage(subs, _fresh(tmp_path / "stage"))}
    with Gradebook(tmp_path / "book.sqlite") as book:
        for sub in subs:
            book.mark_in_progress(sub.key, shas[sub.student], alone=sub.student == "alone")
        summary = grade_batch(subs, book, settings=Settings(sandbox=choose("none")))
        assert [r.submission.student for r in summary.graded] == ["beside"]
        assert [s.student for s in summary.crashed_before] == ["alone"]
        statuses = {(r["student"], r["exercise"]): r["status"] for r in book.best_rows()}
        assert book.in_progress() == {}
    assert statuses[("beside", "97.1")] == "passed"
    assert statuses[("alone", "97.1")] == "crashed"


def _fresh(folder: Path) -> Path:
    folder.mkdir()
    return folder


def test_an_exercise_whose_run_holds_references_is_refused():
    """The worker imports an exercise's run by module and name: a lambda, or a function in
    the module that defines the exercises (and so the references), cannot be sent."""
    from autodiff_lab.grading import registry
    from autodiff_lab.grading.grader import ExerciseDefinitionError, runner_spec

    load_test_exercises()
    exercise = registry.get("97.1")
    assert runner_spec(exercise)["module"] == "grading_testkit_runs"
    for run in (lambda answer, inputs: 0.0, exercise.cases):  # cases: beside the references
        bad = type(exercise)(**{**vars(exercise), "run": run})
        with pytest.raises(ExerciseDefinitionError, match="exercise 97.1: run"):
            runner_spec(bad)


def test_the_lecturers_guide_states_the_graders_defaults():
    import argparse

    from autodiff_lab.grading import cli as grading_cli

    parser = argparse.ArgumentParser()
    grading_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["grade", "x"])
    assert (args.timeout, args.notebook_timeout, args.memory) == (60.0, 600.0, 2048.0)
    guide = Path(__file__).parent.parent / "docs" / "lecturer.md"
    stated = " ".join(guide.read_text().split())
    for claim in (
        "`--timeout` seconds per cell and per exercise (default 60)",
        "`--notebook-timeout` seconds for the whole notebook (default 600)",
        "`--memory` MB (default 2048)",
        "`--max-processes` processes at once (default 64)",
        "a notebook over 16 MB",
        "past the first 20, or past 100 MB of files for one student",
        "(64 characters at most)",
        "20 at most",
        "a `/tmp` of its own limited to 256 MB",
        "only each file's size is limited (64 MB)",
    ):
        assert claim in stated, claim
    from autodiff_lab.grading import gradebook, grader, sandbox, supervise

    assert (args.max_processes, supervise.MAX_PROCESSES) == (64, 64)
    assert (grader.MAX_NOTEBOOK_BYTES, grader.MAX_NOTEBOOKS_PER_STUDENT) == (16 * 2**20, 20)
    assert (grader.MAX_STUDENT_BYTES, grader.MAX_NOTES) == (100 * 2**20, 20)
    assert (gradebook.REPORT_NAME_CHARS, sandbox.SANDBOX_TMP_MB) == (64, 256.0)
    assert grader.OUTPUT_LIMIT_MB == 64.0  # the worker's RLIMIT_FSIZE


def test_a_process_that_dies_between_steps_gets_one_clear_sentence():
    from autodiff_lab.grading import registry
    from autodiff_lab.grading.grader import Plan, Settings, _after_a_stopped_run, _Progress
    from autodiff_lab.grading.sandbox import choose
    from autodiff_lab.grading.supervise import WorkerRun

    load_test_exercises()
    exercise = registry.get("97.2")
    cases = exercise.cases(np.random.default_rng(0))
    plan = Plan(["pass"], [exercise], {"97.2": cases}, {"97.2": [0.0] * len(cases)}, [])
    progress = _Progress({"97.2": [None] * len(cases)})
    run = WorkerRun([], False, None, ("between", None), "was killed by SIGKILL", "")
    assert not _after_a_stopped_run(
        run, plan, progress, ["97.2"], Settings(timeout=5.0, sandbox=choose("none"))
    )
    assert progress.notes == ["the notebook's process was killed by SIGKILL"]
    assert progress.exercise_notes["97.2"] == "The notebook's process was killed by SIGKILL."


# --- the second red team: hostile names, floods, caps, forks, reruns ---------------------

LONG_NAME = "x" * 250
FORMULA = '=HYPERLINK("evil.example","click")'
ANSI = "\x1b[2J\x1b[31mgrade 100"
PHISH = "[Your grade was corrected: sign here](https://evil.example/login)"
RED_TEAM_TIMEOUT = 1.0


def flood_cells() -> list[str]:
    """Honest answers, then 100 000 cell_done events for cells that do not exist, 2 000
    distinct errors for a real cell, and 16 MB of junk kinds into its own channel."""
    flood = """
import gc, json, os
fd = next(o.fd for o in gc.get_objects() if type(o).__name__ == "Events")
fake = "".join(json.dumps({"event": "cell_done", "index": 1000 + k, "error": f"E{k}"}) + "\\n"
               for k in range(100_000))
os.write(fd, fake.encode())
real = "".join(json.dumps({"event": "cell_done", "index": 0, "error": f"R{k}"}) + "\\n"
               for k in range(2_000))
os.write(fd, real.encode())
junk = (json.dumps({"event": "junk", "blob": "j" * 4000}) + "\\n").encode()
for _ in range(4_000):
    os.write(fd, junk)
for k in range(200):
    print(f"error line {k}")
    try:
        raise ValueError(f"distinct failure {k}")
    except ValueError:
        pass
"""
    noisy = [f"raise ValueError('noisy cell {k}')" for k in range(30)]
    return [*CORRECT.values(), flood, *noisy]


@pytest.fixture(scope="module")
def red_batch(tmp_path_factory):
    """One batch (-j 2, no sandbox, tiny caps) of the red team's second round."""
    from autodiff_lab.grading import reading, results

    load_test_exercises()
    root = tmp_path_factory.mktemp("redteam")
    subs = root / "submissions"
    honest = [SETUP, *CORRECT.values()]
    write_notebook(subs / "ann lee" / "97_work.ipynb", honest)
    write_notebook(subs / report_name("ann lee") / "97_work.ipynb", [SETUP])  # #7
    write_notebook(subs / "Ann" / "97_work.ipynb", honest)  # #7, case-insensitive disks
    write_notebook(subs / "ann" / "97_work.ipynb", [SETUP])
    write_notebook(subs / LONG_NAME / "97_work.ipynb", honest)  # #8
    write_notebook(subs / FORMULA / "97_work.ipynb", [SETUP])  # #9
    for k in range(3):  # #10
        write_notebook(subs / "mallory" / f"c{k}" / "02_IGNORE_THIS_COLUMN.ipynb", [SETUP])
    write_notebook(subs / ANSI / "97_work.ipynb", [SETUP])  # #11
    write_notebook(subs / "phisher" / "97_work.ipynb", [f"raise RuntimeError({PHISH!r})"])  # #12
    (subs / "deep").mkdir()
    (subs / "deep" / "97_work.ipynb").write_text("[" * 40_000)  # #14
    write_notebook(subs / "huge" / "97_work.ipynb", ["# " + "h" * 60_000])  # #15
    for k in range(3):  # #16: a third notebook is over the cap of 2
        write_notebook(subs / "many" / f"notes_{k}.ipynb", ["1 + 1"])
    write_notebook(subs / "flood" / "97_work.ipynb", flood_cells())  # #4, #15
    marker = root / "slowpoke-ran-once"
    slow = f"import os, time\nif not os.path.exists({str(marker)!r}):\n"
    slow += f"    open({str(marker)!r}, 'w').close()\n    time.sleep(30)"
    write_notebook(subs / "slowpoke" / "97_work.ipynb", [slow, *CORRECT.values()])  # #5
    forky = "import subprocess, time\nkids = [subprocess.Popen(['sleep', '20']) for _ in range(12)]"
    forky += "\ntime.sleep(5)"
    write_notebook(subs / "forky" / "97_work.ipynb", [CORRECT["dsin"], forky])  # #6
    fat = (  # five forked children of 120 MB each: each under --memory, together over it
        "import os, time\nimport numpy as np\nfor _ in range(5):\n    if os.fork() == 0:\n"
        "        try:\n            a = np.ones(15_000_000)\n            time.sleep(20)\n"
        "        finally:\n            os._exit(0)\nwhile True:  # the alarm does not stop it\n"
        "    try:\n        time.sleep(8)\n    except KeyboardInterrupt:\n        pass"
    )
    write_notebook(subs / "fat" / "97_work.ipynb", [CORRECT["square"], fat])  # #6
    names = [("db", "book.sqlite"), ("csv", "grades.csv"), ("summary", "totals.csv")]
    paths = {k: root / v for k, v in [*names, ("report", "reports")]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reading, "MAX_NOTEBOOK_BYTES", 50_000)  # the stage that applies each cap
        mp.setattr(reading, "MAX_NOTEBOOKS_PER_STUDENT", 2)
        mp.setattr(results, "MAX_NOTES", 5)
        buffer = io.StringIO()
        start = time.monotonic()
        with contextlib.redirect_stdout(buffer):
            rc = run_cli(
                ["grade", str(subs), "--db", str(paths["db"]), "--out", str(paths["csv"]),
                 "--summary", str(paths["summary"]), "--report", str(paths["report"]),
                 "-j", "2", "--timeout", str(RED_TEAM_TIMEOUT), "--notebook-timeout", "20",
                 "--memory", "512", "--max-processes", "8", "--sandbox", "none",
                 "--exercises-module", EXERCISES_MODULE]
            )  # fmt: skip
        elapsed = time.monotonic() - start
    assert rc == 0
    with open(paths["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    with open(paths["summary"], newline="") as f:
        summary = list(csv.reader(f))
    with sqlite3.connect(paths["db"]) as conn:
        notes = dict(conn.execute("SELECT notebook, notes FROM submissions"))
        statuses = dict(conn.execute("SELECT notebook, status FROM submissions"))
    return {"rows": rows, "summary": summary, "paths": paths, "subs": subs, "notes": notes,
            "statuses": statuses, "out": buffer.getvalue(), "elapsed": elapsed}  # fmt: skip


def red_rows(red_batch, student):
    return {r["exercise"]: r for r in red_batch["rows"] if r["student"] == student}


def test_a_folder_named_like_a_hashed_name_or_in_another_case_takes_no_report(red_batch):
    folder = red_batch["paths"]["report"]
    names = [p.name for p in folder.iterdir()]
    assert len({n.lower() for n in names}) == len(names) == len(red_batch["summary"]) - 1
    for student, headline in (("ann lee", "16 / 16"), ("Ann", "16 / 16"), ("ann", "0 / 16")):
        page = (folder / f"{report_name(student)}.md").read_text()
        assert f"# Feedback for {student}" in page and f"{headline} points" in page


def test_a_250_character_name_gets_its_report_and_every_later_student_too(red_batch):
    long_report = red_batch["paths"]["report"] / f"{report_name(LONG_NAME)}.md"
    assert len(long_report.name) <= 64 + 9 + 3 and "16 / 16 points" in long_report.read_text()
    assert (red_batch["paths"]["report"] / f"{report_name('slowpoke')}.md").exists()


def test_formula_like_names_are_text_in_every_csv(red_batch):
    assert {r["student"] for r in red_batch["rows"]} >= {"'" + FORMULA}
    assert ["'" + FORMULA] == [r[0] for r in red_batch["summary"] if "HYPERLINK" in r[0]]
    assert not any(
        cell.startswith(("=", "+", "@", "\t", "\r"))
        for path in ("csv", "summary")
        for line in csv.reader(red_batch["paths"][path].read_text().splitlines())
        for cell in line
    )


def test_summary_columns_come_from_the_course_not_from_submissions(red_batch):
    header = red_batch["summary"][0]
    assert "02_reverse_mode" in header and not any("IGNORE" in h for h in header)


def test_control_characters_are_escaped_in_the_terminal(red_batch):
    assert "\x1b" not in red_batch["out"]
    assert "\\x1b[2J\\x1b[31mgrade 100" in red_batch["out"]


def test_a_link_in_an_exception_message_is_not_a_link_in_the_report(red_batch):
    from markdown_it import MarkdownIt

    text = (red_batch["paths"]["report"] / f"{report_name('phisher')}.md").read_text()
    assert "Your grade was corrected" in text
    assert "](https" not in text and "https://" not in text
    assert "<a " not in MarkdownIt("commonmark").render(text)


def test_a_notebook_nested_too_deeply_is_unreadable_and_still_listed(red_batch):
    (row,) = red_rows(red_batch, "deep").values()
    assert row["status"] == "unreadable" and "nested too deeply" in row["feedback"]
    assert "deep" in [r[0] for r in red_batch["summary"]]


def test_too_large_and_too_many_notebooks_get_a_clear_status(red_batch):
    (huge,) = red_rows(red_batch, "huge").values()
    assert huge["status"] == "unreadable" and huge["feedback"].startswith("too large to grade (")
    many = {k: v for k, v in red_batch["notes"].items() if k.startswith("many/")}
    assert many["many/notes_2.ipynb"].startswith("not graded: more than 2 notebooks")
    assert red_batch["statuses"]["many/notes_0.ipynb"] == "no exercises"


def test_an_event_flood_neither_stalls_the_batch_nor_floods_the_notes(red_batch):
    flood = red_rows(red_batch, "flood")
    assert {e: r["status"] for e, r in flood.items()} == dict.fromkeys(
        ("97.1", "97.2", "97.3"), "passed"
    )
    # (on a loaded machine the flood may time out beside the others and be graded again
    # alone, which adds that note: the same grade, one more true line)
    lines = [
        line
        for line in red_batch["notes"]["flood/97_work.ipynb"].splitlines()
        if line != RERUN_ALONE_NOTE
    ]
    # 5 kept (the cap), then how many more, then "graded WITHOUT a sandbox"
    assert len(lines) == 7 and lines[5].startswith("... and "), lines
    assert not any(re.search(r"raised [ER]\d", line) for line in lines), lines  # none forged


def test_a_notebook_that_timed_out_beside_others_is_graded_again_alone(red_batch):
    slow = red_rows(red_batch, "slowpoke")
    assert {r["status"] for r in slow.values()} == {"passed"}
    assert RERUN_ALONE_NOTE in red_batch["notes"]["slowpoke/97_work.ipynb"]


def test_process_count_and_summed_memory_are_limited(red_batch):
    assert red_rows(red_batch, "forky")["97.1"]["status"] == "passed"
    assert (
        "code cell 2 started more than 8 processes and was stopped"
        in (red_batch["notes"]["forky/97_work.ipynb"])
    )
    assert red_rows(red_batch, "fat")["97.2"]["status"] == "passed"
    assert (
        "code cell 2 used more than 512 MB in all its processes together"
        in (red_batch["notes"]["fat/97_work.ipynb"])
    )
    assert red_batch["elapsed"] < 60


def test_reruns_reuse_the_gradebooks_seed_unless_told(tmp_path):
    """Red team #13: a late student graded into the same gradebook gets the same cases."""
    load_test_exercises()
    subs = tmp_path / "subs"
    write_notebook(subs / "early" / "97_work.ipynb", [SETUP, HALF_RIGHT_DSIN])
    db = tmp_path / "book.sqlite"
    common = ["--db", str(db), "--quiet", "--sandbox", "none", "--exercises-module",
              EXERCISES_MODULE]  # fmt: skip
    assert run_cli(["grade", str(subs), *common]) == 0
    write_notebook(subs / "late" / "97_work.ipynb", [SETUP, HALF_RIGHT_DSIN])
    assert run_cli(["grade", str(subs), *common]) == 0
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT student, seed FROM submissions"))
        pts = dict(conn.execute("SELECT student, points FROM results WHERE exercise = '97.1'"))
        stored = conn.execute("SELECT value FROM settings WHERE name = 'seed'").fetchone()[0]
    assert rows["early"] == rows["late"] == int(stored) and pts["early"] == pts["late"]
    with Gradebook(db) as book:
        assert book.batch_seed() == int(stored)
        assert book.batch_seed(12345) == 12345 and book.batch_seed() == 12345
        assert book.batch_seed(new=True) != 12345 or book.batch_seed(new=True) != 12345


def test_answers_that_call_the_librarys_own_function_are_noted():
    """Red team #17: 2.4, 4.3 and 6.3 answered by the library's own functions. The
    decision (docs/exercises.md, "What an answer may use"): allowed, and the report names
    the call for the lecturer."""
    from autodiff_lab.grading.grader import answered_exercises

    source = """
import autodiff_lab.functional as F
from autodiff_lab import ops
from autodiff_lab.graph import topological_order
from autodiff_lab import Tensor

def topological_sort(root):
    return topological_order(root)

def stable_softmax(x, axis=-1):
    return ops.softmax(Tensor(x), axis)

def hvp(f, x, v):
    return F.hvp(f, x, v)
"""
    nb = {"cells": [{"cell_type": "code", "source": source}]}
    _, notes = answered_exercises(nb, "my_homework.ipynb")
    calls = {n.split(":")[0]: n for n in notes if "calls the library's own" in n}
    assert set(calls) == {"exercise 2.4", "exercise 4.3", "exercise 6.3"}
    assert "topological_order" in calls["exercise 2.4"] and "F.hvp" in calls["exercise 6.3"]
    assert "ops.softmax" in calls["exercise 4.3"] and "Tensor" not in calls["exercise 4.3"]


def test_ctrl_c_does_not_wait_for_a_stuck_notebook_and_keeps_its_mark(tmp_path, monkeypatch):
    """Red team #4: Ctrl-C while a grading thread is stuck returns at once; the stuck
    notebook stays marked (as graded beside others), so the next run grades it first,
    alone."""
    from autodiff_lab.grading import batch, grader
    from autodiff_lab.grading.sandbox import Sandbox

    load_test_exercises()
    subs = tmp_path / "subs"
    for name in ("ok", "stuck"):
        write_notebook(subs / name / "97_work.ipynb", [SETUP, CORRECT["dsin"]])
    release = threading.Event()
    real = grader.grade_staged

    def grade_staged(staged, *args, **kwargs):
        if staged.submission.student == "stuck":
            release.wait(60)  # a thread that ignores the stop signal
        return real(staged, *args, **kwargs)

    def interrupt(result):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "grade_staged", grade_staged)  # the scheduler's own name
    settings = grader.Settings(sandbox=Sandbox("none", reason="test"), timeout=10)
    submissions = grader.collect_submissions([subs])
    start = time.monotonic()
    try:
        with Gradebook(tmp_path / "book.sqlite") as book:
            with pytest.raises(KeyboardInterrupt):
                grader.grade_batch(
                    submissions, book, jobs=2, settings=settings, progress=False,
                    on_graded=interrupt,
                )  # fmt: skip
            elapsed = time.monotonic() - start
            left = {Path(k).parent.name: v for k, v in book.in_progress().items()}
    finally:
        release.set()
    assert elapsed < 15
    assert [(name, alone) for name, (_, alone) in left.items()] == [("stuck", 0)]
