"""Small helpers shared by the chapter exercise modules (not exercises themselves)."""

from __future__ import annotations

import numpy as np

from ..runners.common import as_array, error_result, finite, is_error, number

__all__ = ["as_array", "draw", "error_result", "finite", "is_error", "number"]


def draw(rng: np.random.Generator, lo: float, hi: float, shape=None):
    """A uniform draw from [lo, hi) rounded to 4 decimals (so case names show it exactly).

    ``shape=None`` gives a float, else an array of that shape.
    """
    if shape is None:
        return round(float(rng.uniform(lo, hi)), 4)
    return np.round(rng.uniform(lo, hi, size=shape), 4)
