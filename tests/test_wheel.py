"""The course as a learner meets it from pip: build, install, ``autodiff-lab start``, work, grade.

One module-scoped fixture builds the sdist and the wheel from this checkout (``python -m build``:
the wheel is built *from the sdist*, as pip does), installs the wheel into a fresh virtual
environment and runs everything from a temporary folder with ``HOME`` there too, so no
checkout is near: the package, the course's notebooks and the ``autodiff-lab`` command all
come from the installed wheel (asserted, not assumed).

Two choices keep this within seconds instead of minutes (measured on 2 cores: installing the
wheel's dependencies from the local wheel cache into an empty venv took 3 min 30 s wall and
63 s of CPU):

- the build uses ``--no-isolation`` (the test extra's setuptools and ``build``), skipping the
  two build environments pip would create (47 s wall);
- the fresh venv has no packages of its own except the wheel (``--no-deps``); its dependencies
  come from the shared ``.venv``'s site-packages on ``PYTHONPATH`` (which the grader also
  shows its sandboxed workers), with the test extra hidden in front of them
  (tests/lab_only.py), so it has what ``pip install 'autodiff-lab[lab]'`` brings and nothing
  more. A ``PYTHONPATH`` folder's ``.pth`` files are not run, so ``.venv``'s editable
  install of this checkout (a ``.pth`` hook) is not loaded: ``autodiff_lab`` is the wheel's.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from lab_only import hide_test_extra

from autodiff_lab.course import COURSE_FILES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.exhaustive  # build, install and run the wheel: about two minutes


class Installed:
    """The built artefacts and the fresh environment they were installed into."""

    def __init__(self, base: Path):
        self.base = base
        self.dist = base / "dist"
        self.venv = base / "venv"
        self.work = base / "work"  # the cwd and HOME of every command: no checkout here
        self.course = self.work / "my-course"
        self.pythonpath = ""  # the dependencies, from the shared .venv (see the docstring)

    @property
    def wheel(self) -> Path:
        return next(self.dist.glob("*.whl"))

    @property
    def sdist(self) -> Path:
        return next(self.dist.glob("*.tar.gz"))

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER"))}
        return {
            **keep, "HOME": str(self.work), "PATH": f"{self.bin}{os.pathsep}{keep['PATH']}",
            "VIRTUAL_ENV": str(self.venv), "AUTODIFF_LAB_DATA_DIR": str(self.base / "data"),
            "PYTHONPATH": self.pythonpath,
        }  # fmt: skip

    def run(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(a) for a in args], cwd=self.work, env=self.env(), capture_output=True,
            text=True, timeout=timeout,
        )  # fmt: skip

    def python(self, code: str, *args: str | Path) -> subprocess.CompletedProcess:
        return self.run(self.bin / "python", "-c", code, *args)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    inst = Installed(tmp_path_factory.mktemp("wheel"))
    inst.work.mkdir()
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(inst.dist), str(ROOT)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(inst.venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(inst.bin / "python"), "install", "-q"]
    done = subprocess.run([*pip, "--no-deps", "--no-index", str(inst.wheel)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    hidden = hide_test_extra(inst.base / "hidden-test-extra")
    shared = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    inst.pythonpath = os.pathsep.join([str(hidden), *dict.fromkeys(shared)])
    return inst


def test_the_wheel_carries_chapters_and_exercises_never_solutions(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    packaged = sorted(n.split("course_files/", 1)[1] for n in names if "/course_files/" in n)
    in_repo = sorted(
        str(p.relative_to(ROOT))
        for p in [*ROOT.glob("notebooks/*.ipynb"), ROOT / "notebooks/rise.css",
                  *ROOT.glob("exercises/*.ipynb")]
    )  # fmt: skip
    assert packaged == in_repo
    assert len([n for n in packaged if n.startswith("exercises/")]) == 8
    assert not [n for n in names if "solution" in n.lower()]
    with tarfile.open(installed.sdist) as sdist:
        members = sdist.getnames()
    assert not [m for m in members if "/solutions/" in m]
    assert any(m.endswith("/exercises/01_forward_mode.ipynb") for m in members)
    print(f"wheel {installed.wheel.stat().st_size / 1e6:.1f} MB, {len(names)} files")


def test_version_and_package_come_from_the_wheel(installed):
    version = installed.wheel.name.split("-")[1]
    done = installed.run("autodiff-lab", "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"autodiff-lab {version}"
    done = installed.python(
        "import autodiff_lab, torch; print(autodiff_lab.__version__, autodiff_lab.__file__)"
    )
    assert done.returncode != 0 and "not installed by make lab" in done.stderr  # torch hidden
    done = installed.python(
        "import autodiff_lab; print(autodiff_lab.__version__, autodiff_lab.__file__)"
    )
    got_version, path = done.stdout.split()
    assert got_version == version
    assert Path(path).is_relative_to(installed.venv), path  # not this checkout


def test_start_copies_the_course_then_keeps_a_learners_edit(installed):
    done = installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    assert done.returncode == 0, done.stderr
    copied = sorted(str(p.relative_to(installed.course)) for p in installed.course.rglob("*.*"))
    copied = [c for c in copied if not c.endswith(".manifest.json")]
    course = sorted(  # the checkout's chapters (split chapters: one notebook per part) and
        str(p.relative_to(ROOT)) for pattern in COURSE_FILES for p in ROOT.glob(pattern)
    )  # exercises, which the wheel must carry, all of them
    assert copied == course and done.stdout.count("wrote ") == len(course), done.stdout
    with zipfile.ZipFile(installed.wheel) as wheel:  # byte for byte what the wheel carries
        for name in copied:
            packaged = wheel.read(f"autodiff_lab/course_files/{name}")
            assert (installed.course / name).read_bytes() == packaged, name
    assert f"the course is in {installed.course}" in done.stdout

    done = installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    n = len(course)
    assert f"{n} of {n} course files already up to date" in done.stdout
    assert "(nothing to copy)" in done.stdout and "wrote" not in done.stdout

    mine = installed.course / "exercises" / "02_reverse_mode.ipynb"
    mine.write_bytes(mine.read_bytes().replace(b"NotImplementedError", b"my attempt", 1))
    edited = mine.read_bytes()
    done = installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    assert mine.read_bytes() == edited and f"kept {mine}" in done.stdout, done.stdout
    assert f"{n - 1} of {n} course files already up to date" in done.stdout
    mine.write_bytes(packaged_bytes(installed, "exercises/02_reverse_mode.ipynb"))  # undo


def test_start_opens_jupyterlab_on_the_copy(installed):
    """``start`` with the course there starts JupyterLab rooted at the copy (no browser)."""
    installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    port, token = _free_port(), "wheel-test"
    command = ["autodiff-lab", "start", str(installed.course), "--no-browser",
               f"--port={port}", f"--token={token}"]  # fmt: skip
    proc = subprocess.Popen(
        command, cwd=installed.work, env=installed.env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/api/contents/notebooks/00_start_here.ipynb?content=0"
        model = _poll_json(f"{url}&token={token}", proc)
        assert model["path"] == "notebooks/00_start_here.ipynb"
    finally:
        os.killpg(proc.pid, 15)
        output = proc.communicate(timeout=30)[0]
    assert "the course is in" in output and "nothing to copy" in output
    assert "opening notebooks/00_start_here.ipynb in JupyterLab" in output


def test_a_chapter_runs_top_to_bottom_from_the_copy(installed):
    installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    chapter = installed.course / "notebooks" / "01_forward_mode.ipynb"
    done = installed.python(EXECUTE, chapter, installed.base / "ran.ipynb")
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads((installed.base / "ran.ipynb").read_text())
    errors = [o for c in ran["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    cells = [c for c in ran["cells"] if c["cell_type"] == "code"]
    assert not errors and all(c["execution_count"] for c in cells)
    committed = json.loads(chapter.read_text())  # the learner's copy itself is untouched
    assert [c["source"] for c in committed["cells"]] == [c["source"] for c in ran["cells"]]


def test_check_passes_and_fails_then_grade_scores_the_notebook(installed):
    """A learner answers 1.1 right and 1.2 wrong in the copied exercise notebook and runs it:
    check says passed and failed (with the hint for that mistake); ``autodiff-lab grade`` then
    gives 1.1 all its points and 1.2 fewer than all."""
    installed.run("autodiff-lab", "start", installed.course, "--no-lab")
    notebook = installed.course / "exercises" / "01_forward_mode.ipynb"
    nb = json.loads(notebook.read_text())
    answers = {
        "def dual_mul(x, y):": "    return (x[0] * y[0], x[0] * y[1] + x[1] * y[0])\n",
        "def dual_sin(x):": "    return (math.sin(x[0]), math.sin(x[0]) * x[1])  # wrong: cos\n",
    }
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        for head, body in answers.items():
            if source.startswith(head):
                kept = source.split("    raise NotImplementedError(")[0]
                cell["source"] = kept + body
    submitted = installed.base / "submitted" / "ada" / "01_forward_mode.ipynb"
    submitted.parent.mkdir(parents=True)
    submitted.write_text(json.dumps(nb))

    done = installed.python(EXECUTE, submitted, installed.base / "checked.ipynb")
    assert done.returncode == 0, done.stderr[-3000:]
    checked = json.loads((installed.base / "checked.ipynb").read_text())
    shown = {}
    for cell in checked["cells"]:
        source = "".join(cell["source"])
        for exercise in ("1.1", "1.2"):
            if source.startswith(f'check("{exercise}"'):
                shown[exercise] = "".join(
                    "".join(o.get("data", {}).get("text/plain", o.get("text", "")))
                    for o in cell["outputs"]
                )
    assert "— PASSED (8/8 points)" in shown["1.1"] and "✗" not in shown["1.1"], shown["1.1"]
    assert "— FAILED (1/8 points)" in shown["1.2"], shown["1.2"]  # only "tangent 0" passes
    assert "Hint: The tangent should use cos(x), not sin(x)." in shown["1.2"]

    csv_path = installed.base / "grades.csv"
    done = installed.run(
        "autodiff-lab", "grade", submitted.parent.parent, "--db", installed.base / "g.sqlite",
        "--out", csv_path, "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["exercise"]: r for r in csv.DictReader(csv_path.open())}
    assert float(rows["1.1"]["points"]) == float(rows["1.1"]["max_points"]) > 0, rows["1.1"]
    assert float(rows["1.2"]["points"]) < float(rows["1.2"]["max_points"]), rows["1.2"]
    assert rows["1.2"]["status"] != "passed" and rows["1.1"]["status"] == "passed"


def test_what_needs_the_repository_says_so(installed):
    done = installed.run("autodiff-lab", "export", "otter", installed.base / "otter")
    assert done.returncode == 2
    assert "needs the course repository's solutions/ folder" in done.stderr
    assert "never the solutions" in done.stderr and "clone" in done.stderr
    assert not (installed.base / "otter").exists()


#: Run a notebook in a fresh kernel from its own folder and save the result elsewhere:
#: argv[1] the notebook, argv[2] where the executed copy goes.
EXECUTE = """
import sys, nbformat
from pathlib import Path
from nbclient import NotebookClient
path = Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3",
               resources={"metadata": {"path": str(path.parent)}}).execute()
nbformat.write(nb, sys.argv[2])
"""


def packaged_bytes(installed: Installed, name: str) -> bytes:
    with zipfile.ZipFile(installed.wheel) as wheel:
        return wheel.read(f"autodiff_lab/course_files/{name}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _poll_json(url: str, proc: subprocess.Popen, seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"autodiff-lab start exited: {proc.communicate()[0]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer {url} in {seconds} s")
