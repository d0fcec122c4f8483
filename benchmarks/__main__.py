"""``make bench``: every benchmark in one process, one BLAS thread, ratios printed."""

from __future__ import annotations

import importlib
import platform

import numpy as np

from .common import one_blas_thread

MODULES = [
    "bench_micrograd",
    "bench_tensor_mlp",
    "bench_digits_epoch",
    "bench_claims",
    "bench_cost",
]


def main() -> int:
    print(f"# autodiff_lab benchmarks — Python {platform.python_version()}, numpy {np.__version__}")
    failed = []
    with one_blas_thread():
        for name in MODULES:
            module = importlib.import_module(f"benchmarks.{name}")
            if hasattr(module, "run_demo"):
                module.run_demo()
                module.run_chain()
            else:
                rows = module.run()
                failed += [row["claim"] for row in rows if row.get("holds") is False]
            if hasattr(module, "run_phases"):
                module.run_phases()
    if failed:  # bench_claims: a speed the course's text states does not hold here
        print("\nclaims that do not hold:", "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
