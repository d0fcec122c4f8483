"""Run the whole test suite: unit tests, then strict nbval on every executed notebook.

pytest exits 5 when it collected no tests; for this project that is a broken suite,
never a pass, so it is reported as a failure with a clear message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIRS = ["notebooks", "solutions"]


def main(argv: list[str]) -> int:
    notebooks = [d for d in NOTEBOOK_DIRS if any((ROOT / d).glob("*.ipynb"))]
    cmd = [
        sys.executable, "-m", "pytest", "tests", *notebooks,
        "--nbval", "--nbval-current-env",
        "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
        "-p", "no:cacheprovider", "-q", "-ra", *argv,
    ]  # fmt: skip
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=ROOT)
    if rc == 5:
        print("pytest collected no tests: the suite is broken (exit 5 counts as a failure)")
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
