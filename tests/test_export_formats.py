"""The exported notebooks' structure for every chapter, and the test cells' runtime (no tools).

The end-to-end runs with the real nbgrader and Otter export chapter 01 only
(``test_export_nbgrader.py``, ``test_export_otter.py``); here every chapter is checked
for what those tools rely on.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from export_testkit import read_nb, source

from autodiff_lab.cli import main
from autodiff_lab.grading import registry
from autodiff_lab.grading.checking import case_seed
from autodiff_lab.grading.export import case_passed, points

ROOT = Path(__file__).resolve().parent.parent
SEED = 777
CHAPTER_NOTEBOOKS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _max_points(exercise_id: str, seed: int) -> float:
    exercise = registry.get(exercise_id)
    rng = np.random.default_rng(case_seed(exercise_id, seed))
    return sum(float(c.points) for c in exercise.cases(rng))


def _chapter_ids(name: str) -> list[str]:
    return [e.id for e in registry.all_exercises() if e.chapter == int(name[:2])]


@pytest.fixture(scope="module")
def nbgrader_course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader")
    argv = ["export", "nbgrader", str(course), "--seed", str(SEED), "--solutions"]
    assert main([*argv, str(ROOT / "solutions")]) == 0
    return course


@pytest.fixture(scope="module")
def otter_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("otter")
    argv = ["export", "otter", str(out), "--seed", str(SEED), "--solutions"]
    assert main([*argv, str(ROOT / "solutions")]) == 0
    return out


@pytest.mark.parametrize("name", CHAPTER_NOTEBOOKS)
def test_nbgrader_notebook_has_a_graded_cell_per_exercise(nbgrader_course, name) -> None:
    nb = read_nb(nbgrader_course / "source" / f"ch{name[:2]}" / name)
    metas = [c["metadata"]["nbgrader"] for c in nb["cells"]]
    assert len({m["grade_id"] for m in metas}) == len(metas)  # unique ids
    tests = [(c, m) for c, m in zip(nb["cells"], metas, strict=True) if m["grade"]]
    ids = _chapter_ids(name)
    assert [m["grade_id"] for _, m in tests] == [f"test-{i.replace('.', '_')}" for i in ids]
    for (cell, meta), exercise_id in zip(tests, ids, strict=True):
        assert meta["locked"] and not meta["solution"]
        assert meta["points"] == _max_points(exercise_id, SEED)
        text = source(cell)
        hidden = text.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
        answer = registry.get(exercise_id).answer
        assert f'points("{exercise_id}", {answer}, seed={SEED})' in hidden
        assert str(SEED) not in text.split("### BEGIN HIDDEN TESTS")[0]
    for cell, meta in zip(nb["cells"], metas, strict=True):
        has_answer = "BEGIN SOLUTION" in source(cell)
        assert meta["solution"] == has_answer  # answers editable, the rest...
        if not has_answer:
            assert meta["locked"]  # ...read-only
        assert cell["cell_type"] != "code" or cell["outputs"] == []
    assert "solution-only" not in str(nb)


@pytest.mark.parametrize("name", CHAPTER_NOTEBOOKS)
def test_otter_master_has_one_hidden_test_per_case(otter_dir, name) -> None:
    nb = read_nb(otter_dir / f"ch{name[:2]}" / name)
    first = source(nb["cells"][0])
    assert first.startswith("# ASSIGNMENT CONFIG") and "generate: true" in first
    texts = [source(c) for c in nb["cells"]]
    names = re.findall(r"# BEGIN QUESTION\nname: (\w+)", "\n".join(texts))
    ids = _chapter_ids(name)
    assert names == [f"ex{i.replace('.', '_')}" for i in ids]
    for exercise_id in ids:
        calls = [t for t in texts if f'case_passed("{exercise_id}",' in t]
        exercise = registry.get(exercise_id)
        cases = exercise.cases(np.random.default_rng(case_seed(exercise_id, SEED)))
        assert len(calls) == len(cases)
        for k, (call, case) in enumerate(zip(calls, cases, strict=True)):
            assert f"{exercise.answer}, {k}, seed={SEED})" in call
            assert f"points: {case.points:g}\nhidden: true" in call
    tests = [c for c in nb["cells"] if "case_passed(" in source(c)]
    assert all(c["outputs"][0]["data"]["text/plain"] == "True" for c in tests)
    assert sum(t.strip() == "# END QUESTION" for t in texts) == len(ids)


def _dual_mul(x, y):
    (a, da), (b, db) = x, y
    return a * b, a * db + da * b


def _dual_mul_forgot_product_rule(x, y):
    (a, da), (b, db) = x, y
    return a * b, da * db


def test_runtime_points_full_zero_and_partial(capsys) -> None:
    full = _max_points("1.1", SEED)
    assert points("1.1", _dual_mul, seed=SEED, show=False) == full
    assert points("1.1", lambda x, y: (_ for _ in ()).throw(NotImplementedError()), seed=SEED) == 0
    partial = points("1.1", _dual_mul_forgot_product_rule, seed=SEED, show=False)
    passed = [case_passed("1.1", _dual_mul_forgot_product_rule, k, seed=SEED) for k in range(8)]
    assert 0 <= partial < full and partial == sum(passed)  # every case of 1.1 is worth 1
    assert all(case_passed("1.1", _dual_mul, k, seed=SEED) for k in range(8))
    assert "Exercise 1.1" in capsys.readouterr().out  # the scorecard, shown once


def test_runtime_keeps_the_answers_noise_out_of_stderr(capsys) -> None:
    """nbgrader gives zero to a test cell that writes to stderr: warnings are not shown."""
    import sys
    import warnings

    def noisy(x, y):
        warnings.warn("a warning from the answer", RuntimeWarning, stacklevel=1)
        print("debug output", file=sys.stderr)
        return _dual_mul(x, y)

    assert points("1.1", noisy, seed=SEED, show=False) == _max_points("1.1", SEED)
    assert capsys.readouterr().err == ""


def test_runtime_does_nothing_inside_the_course_grader(monkeypatch) -> None:
    monkeypatch.setenv("AUTODIFF_LAB_GRADING", "1")
    assert points("1.1", _dual_mul, seed=SEED) == 0.0
    assert case_passed("1.1", _dual_mul, 0, seed=SEED) is False


def test_export_refuses_to_overwrite_and_names_bad_chapters(tmp_path, capsys) -> None:
    argv = ["export", "otter", str(tmp_path), "--chapters", "1", "--seed", "1"]
    assert main(argv) == 0
    assert main(argv) == 2
    assert "use --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert main(["export", "nbgrader", str(tmp_path / "x"), "--chapters", "9"]) == 2
    assert "chapter(s) [9]" in capsys.readouterr().err
    assert main(["export", "nbgrader", str(tmp_path / "y"), "--chapters", "one"]) == 2
