"""``make bench``: every benchmark in one process, one BLAS thread, ratios printed."""

from __future__ import annotations

import importlib
import platform

import numpy as np

from .common import one_blas_thread

MODULES = ["bench_micrograd", "bench_tensor_mlp", "bench_digits_epoch"]


def main() -> int:
    print(f"# autodiff_lab benchmarks — Python {platform.python_version()}, numpy {np.__version__}")
    with one_blas_thread():
        for name in MODULES:
            module = importlib.import_module(f"benchmarks.{name}")
            if hasattr(module, "run_demo"):
                module.run_demo()
                module.run_chain()
            else:
                module.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
