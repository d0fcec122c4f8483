"""``autodiff-lab start``'s copy, from this checkout: the learner's edits survive every rule.

The same rule as ``build-exercises`` (one function, ``write_keeping_edits``): a file the
learner never touched is updated when the course changes; a changed one is kept, with the
course's newer version beside it as ``NAME.new.ipynb`` — and none when nothing is newer;
``--force`` backs the learner's file up first. The installed-wheel route is tests/test_wheel.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autodiff_lab import course
from autodiff_lab.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def source(tmp_path, monkeypatch) -> Path:
    """A copy of the course to stand for the installed package's, changeable by the test."""
    src = tmp_path / "package"
    for name in course.course_files(ROOT):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, src / name)
    monkeypatch.setattr(course, "course_source", lambda: src)
    return src


def test_the_checkout_is_the_course_with_no_solutions():
    assert course.course_source() == ROOT  # no packaged copy in a clone
    files = [str(f) for f in course.course_files(ROOT)]
    assert "notebooks/00_start_here.ipynb" in files and "exercises/01_forward_mode.ipynb" in files
    assert not [f for f in files if not f.startswith(("notebooks/", "exercises/"))]
    assert len([f for f in files if f.startswith("exercises/")]) == 8


def test_start_keeps_edits_updates_the_rest(source, tmp_path, capsys):
    target = tmp_path / "learner"
    assert main(["start", str(target), "--no-lab"]) == 0
    assert capsys.readouterr().out.count("wrote ") == len(course.course_files(source))

    edited, untouched = "exercises/01_forward_mode.ipynb", "notebooks/01_forward_mode.ipynb"
    (target / edited).write_text((target / edited).read_text().replace("raise", "return", 1))
    mine = (target / edited).read_bytes()
    beside = target / "exercises" / "01_forward_mode.new.ipynb"
    assert main(["start", str(target), "--no-lab"]) == 0  # the course has not changed
    out = capsys.readouterr().out
    assert (target / edited).read_bytes() == mine and not beside.exists()
    assert f"kept {target / edited}: changed since it was written" in out

    for name in (edited, untouched):  # a new version of the course
        (source / name).write_text((source / name).read_text().replace("\n", "\n ", 1))
    assert main(["start", str(target), "--no-lab"]) == 0
    out = capsys.readouterr().out
    assert (target / edited).read_bytes() == mine  # kept, byte for byte
    assert beside.read_bytes() == (source / edited).read_bytes()
    assert f"kept {target / edited}" in out and "--force" in out
    assert f"updated {target / untouched}" in out
    assert (target / untouched).read_bytes() == (source / untouched).read_bytes()

    assert main(["start", str(target), "--no-lab", "--force"]) == 0
    backups = list((target / "exercises").glob("01_forward_mode.backup-*.ipynb"))
    assert len(backups) == 1 and backups[0].read_bytes() == mine
    assert (target / edited).read_bytes() == (source / edited).read_bytes()


def test_start_without_jupyterlab_says_how_to_get_it(source, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(course.importlib.util, "find_spec", lambda name: None)
    assert main(["start", str(tmp_path / "c")]) == 1
    assert "pip install 'autodiff-lab[lab]'" in capsys.readouterr().err


def test_jupyter_lab_opens_the_start_page_in_the_copy(tmp_path):
    command = course.jupyter_lab_command(tmp_path, port=8899, token="t", browser=False)
    assert command[1:3] == ["-m", "jupyterlab"] and command[-1] == course.FIRST_NOTEBOOK
    assert f"--ServerApp.root_dir={tmp_path}" in command and "--no-browser" in command
    assert (ROOT / course.FIRST_NOTEBOOK).exists()


def test_version_everywhere(capsys):
    import autodiff_lab

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"autodiff-lab {autodiff_lab.__version__}"
