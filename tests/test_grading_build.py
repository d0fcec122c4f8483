"""``build-exercises``: stubs from regions, cleared outputs, manifest, students' work kept."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from grading_testkit import EXERCISES_MODULE, load_test_exercises, run_cli

from autodiff_lab.grading.build import BuildError, generate

DSIN_CELL = """def dsin(x):
    ### BEGIN SOLUTION  # Exercise 97.1
    return math.cos(x)
    ### END SOLUTION"""

SQUARE_CELL = """class Squarer:
    def square(self, x):
        ### BEGIN SOLUTION
        y = x * x
        return y
        ### END SOLUTION


def square(x):
    return Squarer().square(x)"""


def solutions_notebook(path, dsin_cell=DSIN_CELL):
    nb = nbformat.v4.new_notebook()
    setup = nbformat.v4.new_code_cell(
        f"import math\nfrom autodiff_lab.grading import check, registry\n"
        f"registry.load_module({EXERCISES_MODULE!r})"
    )
    checked = nbformat.v4.new_code_cell("check('97.1', dsin)", execution_count=3)
    checked.outputs = [nbformat.v4.new_output("stream", name="stdout", text="PASSED\n")]
    secret = nbformat.v4.new_code_cell("print('worked solution')")
    secret.metadata["tags"] = ["solution-only"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Chapter 97"),
        setup,
        nbformat.v4.new_code_cell(dsin_cell),
        checked,
        nbformat.v4.new_code_cell(SQUARE_CELL),
        secret,
        nbformat.v4.new_code_cell('check("97.2", square)'),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture
def course(tmp_path, monkeypatch):
    load_test_exercises()
    monkeypatch.chdir(tmp_path)
    solutions_notebook(tmp_path / "solutions" / "97_test.ipynb")
    return tmp_path


def build(*flags):
    return run_cli(
        ["build-exercises", "--solutions", "solutions", "--exercises", "exercises", *flags]
    )


def test_regions_become_stubs_and_outputs_are_cleared(course, capsys):
    assert build() == 0
    assert "wrote exercises/97_test.ipynb" in capsys.readouterr().out
    nb = nbformat.read(course / "exercises" / "97_test.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[1].source.splitlines() == [
        "def dsin(x):",
        '    raise NotImplementedError("Exercise 97.1: dsin(x): return d/dx sin(x) at x")',
    ]
    # The id came from the check() call two cells later; indentation is the BEGIN line's.
    assert code[3].source.splitlines()[1:3] == [
        "    def square(self, x):",
        '        raise NotImplementedError("Exercise 97.2: square(x): return x squared")',
    ]
    assert "return Squarer().square(x)" in code[3].source
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert not any("worked solution" in c.source for c in nb.cells)  # solution-only dropped
    assert not any("SOLUTION" in c.source for c in nb.cells)
    nbformat.validate(nb)  # written with plain json, still a valid notebook
    manifest = json.loads((course / "exercises" / ".manifest.json").read_text())
    import hashlib

    digest = hashlib.sha256((course / "exercises" / "97_test.ipynb").read_bytes()).hexdigest()
    assert manifest["files"]["97_test.ipynb"]["sha256"] == digest


def test_stub_runs_as_not_attempted(course):
    """The generated stub raises NotImplementedError with the exercise's number and task."""
    build()
    nb = nbformat.read(course / "exercises" / "97_test.ipynb", as_version=4)
    namespace: dict = {"math": __import__("math")}
    exec(nb.cells[2].source, namespace)
    with pytest.raises(NotImplementedError, match=r"^Exercise 97\.1: dsin\(x\)"):
        namespace["dsin"](0.5)


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        (
            "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
            "cannot tell which",
        ),
        ("def f():\n    ### BEGIN SOLUTION  # Exercise 97.1\n    return 1", "has no matching END"),
        ("def f():\n    return 1\n    ### END SOLUTION", "without a BEGIN"),
        (
            "def f():\n    ### BEGIN SOLUTION  # Exercise 96.9\n    pass\n    ### END SOLUTION",
            "96.9",
        ),
    ],
)
def test_malformed_regions_are_clear_errors(tmp_path, cell, message):
    load_test_exercises()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(cell)]
    nbformat.write(nb, tmp_path / "01_bad.ipynb")
    with pytest.raises(BuildError, match=message) as info:
        generate(tmp_path / "01_bad.ipynb")
    assert "01_bad.ipynb code cell 1" in str(info.value)


def test_rebuild_updates_untouched_files_and_is_stable(course, capsys):
    build()
    target = course / "exercises" / "97_test.ipynb"
    first = target.read_bytes()
    assert build() == 0 and target.read_bytes() == first
    assert "up to date: exercises/97_test.ipynb" in capsys.readouterr().out
    solutions_notebook(course / "solutions" / "97_test.ipynb", DSIN_CELL.replace("x)", "t)"))
    assert build() == 0
    assert "updated exercises/97_test.ipynb" in capsys.readouterr().out
    assert "def dsin(t):" in target.read_text()


def test_student_work_is_never_overwritten_without_force(course, capsys):
    build()
    target = course / "exercises" / "97_test.ipynb"
    nb = nbformat.read(target, as_version=4)
    nb.cells[2].source = "def dsin(x):\n    return math.cos(x)  # my answer"
    nbformat.write(nb, target)
    students = target.read_bytes()
    solutions_notebook(course / "solutions" / "97_test.ipynb", DSIN_CELL.replace("x)", "t)"))
    capsys.readouterr()
    assert build() == 0
    out = capsys.readouterr().out
    assert target.read_bytes() == students  # kept, byte for byte
    beside = course / "exercises" / "97_test.new.ipynb"
    assert "def dsin(t):" in beside.read_text()
    assert "kept exercises/97_test.ipynb" in out and "--force" in out
    assert build("--force") == 0
    backups = list((course / "exercises").glob("97_test.backup-*.ipynb"))
    assert len(backups) == 1 and backups[0].read_bytes() == students
    assert "def dsin(t):" in target.read_text()
    assert "previous file is in" in capsys.readouterr().out


def test_check_mode_lists_out_of_date_files(course, capsys):
    assert build("--check") == 1
    assert "exercises/97_test.ipynb: missing" in capsys.readouterr().out
    build()
    assert build("--check") == 0
    assert "up to date" in capsys.readouterr().out
    solutions_notebook(course / "solutions" / "97_test.ipynb", DSIN_CELL.replace("x)", "t)"))
    assert build("--check") == 1
    assert "exercises/97_test.ipynb: differs from what" in capsys.readouterr().out
    build()
    (course / "exercises" / ".manifest.json").unlink()
    assert build("--check") == 1
    assert "no up-to-date entry for 97_test.ipynb" in capsys.readouterr().out
    assert not (course / "exercises" / "97_test.new.ipynb").exists()


def test_check_with_no_solutions_succeeds_from_the_command_line(tmp_path):
    """What ``make test`` runs, before any solutions exist."""
    done = subprocess.run(
        [sys.executable, "-m", "autodiff_lab.cli", "build-exercises", "--check"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "no solutions/*.ipynb yet" in done.stdout


def test_a_top_level_region_is_built_with_a_warning(tmp_path, capsys):
    """A stub at a cell's top level raises when the cell runs, which stops "Run All"."""
    load_test_exercises()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "### BEGIN SOLUTION  # Exercise 97.2\nsquare = 4\n### END SOLUTION"
        )
    ]
    nbformat.write(nb, tmp_path / "97_top.ipynb")
    generated = generate(tmp_path / "97_top.ipynb")
    assert generated.exercise_ids == ["97.2"]
    assert generated.warnings == [
        "97_top.ipynb code cell 1, line 1: exercise 97.2's region is at the top level of the "
        "cell, so its stub raises when the cell runs and stops 'Run All'"
    ]


# --- wrapped stubs ---------------------------------------------------------------------

#: No line of a generated stub cell is longer than this (ruff's and black's default).
STUB_WIDTH = 88
LONG_TASK = (
    'wrap_me(x, y, z): a task long enough to run past the right edge of a "notebook" '
    "cell, with a back\\slash in it, so the stub must wrap it over several lines"
)


def test_a_long_task_is_wrapped_in_adjacent_strings(monkeypatch):
    from autodiff_lab.grading import registry
    from autodiff_lab.grading.build import stub_line
    from autodiff_lab.grading.spec import Exercise

    registry.all_exercises()  # the course loaded first; 96.1 is gone again after this test
    monkeypatch.setattr(registry, "_exercises", dict(registry._exercises))
    registry.register(
        Exercise(
            id="96.1", title="Wrap", task=LONG_TASK, answer="wrap_me", cases=lambda rng: [],
            run=lambda a, i: None, reference=lambda i: None, level="easy", minutes=1,
        ),
        replace=True,
    )  # fmt: skip
    stub = stub_line("        ", "96.1")
    assert stub.splitlines() == [
        "        raise NotImplementedError(",
        '            "Exercise 96.1: wrap_me(x, y, z): a task long enough to run past the right "',
        r'            "edge of a \"notebook\" cell, with a back\\slash in it, so the stub must "',
        '            "wrap it over several lines"',
        "        )",
    ]
    with pytest.raises(NotImplementedError) as raised:
        exec(compile("if True:\n" + stub, "<stub>", "exec"), {})
    assert str(raised.value) == f"Exercise 96.1: {LONG_TASK}"  # the same message, whole


def test_no_line_of_a_course_stub_cell_is_longer_than_88():
    """Every code cell of the course's exercise notebooks that holds a stub fits 88 columns
    (the stubs are generated here from solutions/, as build-exercises does)."""
    from pathlib import Path

    from autodiff_lab.grading.build import solution_notebooks

    root = Path(__file__).resolve().parents[1]
    stub_cells = 0
    for path in solution_notebooks(root / "solutions"):
        for cell in json.loads(generate(path).text)["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or "raise NotImplementedError(" not in source:
                continue
            stub_cells += 1
            too_long = [line for line in source.splitlines() if len(line) > STUB_WIDTH]
            assert not too_long, f"{path.name}: {too_long}"
    assert stub_cells >= 30  # every chapter's exercises were looked at
