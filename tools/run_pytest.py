"""Run the whole test suite: unit tests and strict nbval, then nbval again on numpy's baseline.

1. One pytest run over ``tests/`` and strict nbval over every executed notebook.
2. A second strict nbval run over the notebooks as another CPU would compute them: numpy's
   SIMD paths above its baseline switched off (``NPY_DISABLE_CPU_FEATURES``), and the C
   library's AVX2/FMA variants of ``exp``, ``sin``, ``tanh``… too (``GLIBC_TUNABLES``; glibc's
   FMA path rounds some results differently). Other CPUs round such functions differently;
   this pass makes a stored output that depends on that round-off fail on the developer's own
   machine instead of on a student's. Where the machine has nothing above numpy's baseline,
   there is nothing to switch off and the pass is skipped (said in one line).

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


def main(argv: list[str]) -> int:
    # check() records a learner's progress: keep the tests' records out of the user's own.
    os.environ.setdefault("AUTODIFF_LAB_DATA_DIR", tempfile.mkdtemp(prefix="autodiff-lab-test-"))
    notebooks = [d for d in NOTEBOOK_DIRS if any((ROOT / d).glob("*.ipynb"))]
    features = simd_features_above_baseline()
    second = None
    if features:
        # The second pass only compares stored outputs (nothing timed), so it runs in one
        # process alongside the first, in the time the first spends waiting; its output is
        # printed when the first is done.
        disabled = " ".join(features)
        tunables = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), GLIBC_NO_FMA]))
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled, "GLIBC_TUNABLES": tunables}
        log = tempfile.TemporaryFile("w+")
        cmd = command([*notebooks, *NBVAL, *argv], parallel=False)
        second = (subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log), log, cmd)
        print(f"second nbval pass started: numpy's SIMD paths off ({disabled}), {GLIBC_NO_FMA}")
    cmd = command(["tests", *notebooks, *NBVAL, *argv])
    print("+", " ".join(cmd), flush=True)
    rc = exit_code(subprocess.call(cmd, cwd=ROOT))
    if second is None:
        print("second nbval pass skipped: numpy finds no CPU feature above its baseline here")
        return rc
    proc, log, cmd = second
    proc.wait()
    log.seek(0)
    print("second nbval pass (SIMD paths off):", "+", " ".join(cmd), flush=True)
    print(log.read(), end="", flush=True)
    return exit_code(proc.returncode) or rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
