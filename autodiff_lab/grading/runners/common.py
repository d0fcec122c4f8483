"""Turning what a student's answer returned into plain data (numbers, arrays, error records).

Shared by the runners (student side) and the exercise modules (grader side); nothing here
knows a right answer.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_array", "error_result", "finite", "is_error", "number"]


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


def error_result(exc: BaseException) -> dict:
    """Plain-data record of an error the exercise expects some wrong answers to raise."""
    return {"error": type(exc).__name__, "message": str(exc)[:200]}


def is_error(got, kind: str | None = None) -> bool:
    """True when ``got`` is an :func:`error_result` (of type ``kind`` when given)."""
    return isinstance(got, dict) and "error" in got and (kind is None or got["error"] == kind)


def finite(x) -> bool:
    """True when every entry of ``x`` is a finite number (no inf, no NaN)."""
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))
