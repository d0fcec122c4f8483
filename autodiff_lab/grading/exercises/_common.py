"""Small helpers shared by the chapter exercise modules (not exercises themselves).

Mistake detectors receive whatever the student's code returned, so they must never
raise: :func:`detector` turns any exception inside one into "not this mistake".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["as_array", "close", "detector", "error_result", "finite", "is_error", "number"]


def number(x) -> float:
    """A plain float from a Python/numpy number, a 0-d array or a graph scalar (``.data``)."""
    while hasattr(x, "data") and not isinstance(x, np.ndarray | np.generic):
        x = x.data
    return float(x)


def as_array(x) -> np.ndarray:
    """A float64 ndarray from array-likes (a Tensor gives its ``.data``)."""
    if hasattr(x, "data") and not isinstance(x, np.ndarray | np.generic):
        x = x.data
    return np.asarray(x, dtype=np.float64)


def close(got, expected, rtol: float = 1e-6, atol: float = 1e-8) -> bool:
    """True when two numbers/arrays (or nested lists of them) agree in shape and value."""
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(expected)
            and all(close(got[k], expected[k], rtol, atol) for k in expected)
        )
    if isinstance(expected, list | tuple) and not _is_numeric_list(expected):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(expected)
            and all(close(g, e, rtol, atol) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, str | bool | None):
        return type(got) is type(expected) and got == expected
    try:
        g, e = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    except (TypeError, ValueError):
        return False
    return g.shape == e.shape and bool(np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=False))


def _is_numeric_list(x) -> bool:
    return all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in x)


def detector(fn: Callable[[Any, Any, Any], bool]) -> Callable[[Any, Any, Any], bool]:
    """Wrap a mistake detector so odd answers (wrong types, NaNs…) just mean False."""

    def safe(got, expected, case) -> bool:
        try:
            return bool(fn(got, expected, case))
        except Exception:  # noqa: BLE001 - a detector must never crash the scorecard
            return False

    safe.__name__ = getattr(fn, "__name__", "detector")
    safe.__doc__ = fn.__doc__
    return safe


def error_result(exc: BaseException) -> dict:
    """Plain-data record of an error the exercise expects some wrong answers to raise."""
    return {"error": type(exc).__name__, "message": str(exc)[:200]}


def is_error(got, kind: str | None = None) -> bool:
    """True when ``got`` is an :func:`error_result` (of type ``kind`` when given)."""
    return isinstance(got, dict) and "error" in got and (kind is None or got["error"] == kind)


def finite(x) -> bool:
    """True when every entry of ``x`` is a finite number (no inf, no NaN)."""
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))
