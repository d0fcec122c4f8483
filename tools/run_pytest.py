"""Run the whole test suite: unit tests and strict nbval, then nbval again on numpy's baseline.

1. One pytest run over ``tests/`` and strict nbval over every executed notebook.
2. A second strict nbval run over the notebooks as another CPU would compute them: numpy's
   SIMD paths above its baseline switched off (``NPY_DISABLE_CPU_FEATURES``), and the C
   library's AVX2/FMA variants of ``exp``, ``sin``, ``tanh``… too (``GLIBC_TUNABLES``; glibc's
   FMA path rounds some results differently). Other CPUs round such functions differently;
   this pass makes a stored output that depends on that round-off fail on the developer's own
   machine instead of on a student's. Where the machine has nothing above numpy's baseline,
   there is nothing to switch off and the chapters' second pass is skipped (said in one line).
   The solutions' second pass runs in a student's kernel — the test extra hidden
   (tests/lab_only.py) — so it also checks that each runs with only what ``make lab``
   installs; it runs on every machine. Both run alongside the first, one process each.

pytest exits 5 when it collected no tests; for this project that is a broken suite,
never a pass, so it is reported as a failure with a clear message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIRS = ["notebooks", "solutions"]
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


def background(label: str, args: list[str], env: dict[str, str]):
    """Start a one-process pytest run of ``args``; its output is kept and shown at the end."""
    log = tempfile.TemporaryFile("w+")
    cmd = command(args, parallel=False)
    print(f"{label} started", flush=True)
    return label, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log), log, cmd


def main(argv: list[str]) -> int:
    # check() records a learner's progress: keep the tests' records out of the user's own.
    os.environ.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-test-"))
    notebooks = [d for d in NOTEBOOK_DIRS if any((ROOT / d).glob("*.ipynb"))]
    features = simd_features_above_baseline()
    # The second passes only compare stored outputs (nothing timed), so they run alongside the
    # first, in the time it spends waiting; their output is printed when the first is done.
    env = dict(os.environ)
    label = "second nbval pass"
    if features:
        disabled = " ".join(features)
        tunables = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), GLIBC_NO_FMA]))
        env.update(NPY_DISABLE_CPU_FEATURES=disabled, GLIBC_TUNABLES=tunables)
        label += f" (SIMD paths off: {disabled}, {GLIBC_NO_FMA})"
    else:
        print("SIMD-off nbval pass skipped: numpy finds no CPU feature above its baseline here")
    passes = []
    if features and "notebooks" in notebooks:
        passes.append(background(label, ["notebooks", *NBVAL, *argv], env))
    if "solutions" in notebooks:
        # The solutions use nothing of the test extra: compared without it, this pass is also
        # the check that each runs with only what `make lab` installs (tests/lab_only.py).
        sys.path.insert(0, str(ROOT / "tests"))
        from lab_only import student_kernel

        kernels = student_kernel(Path(tempfile.mkdtemp(prefix="autodiff-lab-lab-only-")))
        student_env = {**env, "JUPYTER_PATH": str(kernels)}
        student_nbval = [a for a in NBVAL if a != "--nbval-current-env"]
        passes.append(
            background(f"{label}, solutions without the test extra",
                       ["solutions", *student_nbval, "--nbval-kernel-name", "python3", *argv],
                       student_env)
        )  # fmt: skip
    # notebooks first: pytest-xdist hands out files in this order, and the longest notebooks
    # then start early instead of ending the run (measured 4:52 -> 4:37 for this run)
    cmd = command([*notebooks, "tests", *NBVAL, *argv])
    print("+", " ".join(cmd), flush=True)
    rc = exit_code(subprocess.call(cmd, cwd=ROOT))
    for label, proc, log, cmd in passes:
        proc.wait()
        log.seek(0)
        print(f"{label}:", "+", " ".join(cmd), flush=True)
        print(log.read(), end="", flush=True)
        rc = exit_code(proc.returncode) or rc
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
