"""Run the test suite in its two tiers: ``make test`` and ``make test-exhaustive``.

``make test`` (``run_pytest.py -m "not exhaustive"``), within 5 minutes on 2 cores:

1. One pytest run over ``tests/`` and strict nbval over every chapter in ``notebooks/``.
2. Alongside it, in a process of its own, strict nbval over ``solutions/`` in a student's
   kernel — the test extra hidden (tests/lab_only.py) — so it also checks that each solution
   runs with only what ``make lab`` installs. (The solutions run once, there.)

``make test-exhaustive`` (``run_pytest.py --exhaustive``; CI runs it after ``make test``):

1. The tests marked ``exhaustive`` (minutes each: the browser walk and audit, the book, the
   wheel, every chapter cell against every exercise).
2. Strict nbval a second time over the chapters and the solutions as another CPU would
   compute them: numpy's SIMD paths above its baseline switched off
   (``NPY_DISABLE_CPU_FEATURES``), and the C library's AVX2/FMA variants of ``exp``, ``sin``,
   ``tanh``… too (``GLIBC_TUNABLES``; glibc's FMA path rounds some results differently).
   Other CPUs round such functions differently; this pass makes a stored output that depends
   on that round-off fail on the developer's own machine instead of on a student's. Where the
   machine has nothing above numpy's baseline, both passes are skipped (said in one line):
   they would repeat ``make test``'s. The solutions' pass runs in a student's kernel.

pytest exits 5 when it collected no tests; for this project that is a broken suite,
never a pass, so it is reported as a failure with a clear message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLIBC_NO_FMA = "glibc.cpu.hwcaps=-AVX2,-FMA"  # the libm variants a CPU without FMA runs
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]


def simd_features_above_baseline() -> list[str]:
    """numpy's dispatchable CPU features that this machine has (empty: only the baseline)."""
    try:
        from numpy._core import _multiarray_umath as umath  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath
    have = umath.__cpu_features__
    return [name for name in umath.__cpu_dispatch__ if have.get(name)]


def workers() -> list[str]:
    """pytest-xdist options: one process per core plus one, up to 4 (much of the suite waits
    on kernels, browsers and graders in processes of their own: on 2 cores, 3 workers took
    5 min 15 s where 2 took 5 min 36 s). Files and notebooks are kept whole: see
    ``pytest_xdist_make_scheduler`` in tests/conftest.py."""
    cores = os.cpu_count() or 1
    n = min(cores + 1, 4)
    return ["-n", str(n), "--dist", "loadfile"] if cores > 1 else []


def command(args: list[str], parallel: bool = True) -> list[str]:
    flags = workers() if parallel else []
    return [sys.executable, "-m", "pytest", *flags, *args, "-p", "no:cacheprovider", "-q", "-ra"]


def exit_code(code: int) -> int:
    """pytest's exit code, except that 5 (nothing collected) counts as a failure."""
    if code == 5:
        print("pytest collected no tests: the suite is broken (exit 5 counts as a failure)")
        return 1
    return code


# A background pass takes 15 to 100 s alone and a few times that beside the main run; one
# that has not ended this long after it started waits on something that will not come (once,
# in CI, nbval waited on a kernel that had vanished): it is interrupted, so that pytest prints
# where it waited, and fails, instead of holding the run until CI's own time limit.
BACKGROUND_LIMIT = 900  # seconds


def background(label: str, args: list[str], env: dict[str, str]):
    """Start a one-process pytest run of ``args``; its output is kept and shown at the end."""
    log = tempfile.TemporaryFile("w+")
    cmd = command(args, parallel=False)
    print(f"{label} started", flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
    return label, proc, log, cmd, time.monotonic()


def wait_for(label: str, proc: subprocess.Popen, started: float) -> int:
    """The pass's exit code, interrupting it (SIGINT) once past :data:`BACKGROUND_LIMIT`."""
    try:
        return proc.wait(timeout=max(0.0, started + BACKGROUND_LIMIT - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"{label}: no result {BACKGROUND_LIMIT} s after it started: interrupted", flush=True)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 1


def solutions_pass(label: str, env: dict[str, str], argv: list[str]):
    """Strict nbval over the solutions in a student's kernel (the test extra hidden): they use
    nothing of it, so this compares their stored outputs and checks that they run with only
    what ``make lab`` installs."""
    sys.path.insert(0, str(ROOT / "tests"))
    from lab_only import student_kernel

    kernels = student_kernel(Path(tempfile.mkdtemp(prefix="autodiff-lab-lab-only-")))
    student_env = {**env, "JUPYTER_PATH": str(kernels)}
    student_nbval = [a for a in NBVAL if a != "--nbval-current-env"]
    args = ["solutions", *student_nbval, "--nbval-kernel-name", "python3", *argv]
    return background(label, args, student_env)


def simd_off_env() -> tuple[str, dict[str, str] | None]:
    """The environment of the second nbval pass, and its label (None: nothing to switch off)."""
    features = simd_features_above_baseline()
    if not features:
        return "", None
    disabled = " ".join(features)
    tunables = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), GLIBC_NO_FMA]))
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled, "GLIBC_TUNABLES": tunables}
    return f" (SIMD paths off: {disabled}, {GLIBC_NO_FMA})", env


def main(argv: list[str]) -> int:
    # check() records a learner's progress: keep the tests' records out of the user's own.
    os.environ.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-test-"))
    exhaustive = "--exhaustive" in argv
    argv = [a for a in argv if a != "--exhaustive"]
    passes = []
    if exhaustive:
        label, env = simd_off_env()
        if env is None:  # the pass would repeat make test's
            print("SIMD-off nbval pass skipped: numpy finds no CPU feature above its baseline here")
        else:
            passes.append(background(f"second nbval pass{label}", ["notebooks", *NBVAL], env))
            passes.append(solutions_pass(f"second nbval pass of the solutions{label}", env, []))
        cmd = command(["-m", "exhaustive", "tests", *argv])
    else:
        passes.append(solutions_pass("nbval of the solutions", dict(os.environ), argv))
        # the notebooks early (after the browser tests: see pytest_collection_modifyitems in
        # tests/conftest.py): pytest-xdist hands out files in this order, and the longest then
        # start early instead of ending the run
        cmd = command(["notebooks", "tests", *NBVAL, *argv])
    print("+", " ".join(cmd), flush=True)
    rc = exit_code(subprocess.call(cmd, cwd=ROOT))
    for label, proc, log, cmd, started in passes:
        code = wait_for(label, proc, started)
        log.seek(0)
        print(f"{label}:", "+", " ".join(cmd), flush=True)
        print(log.read(), end="", flush=True)
        rc = exit_code(code) or rc
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
