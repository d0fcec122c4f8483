"""Plain data <-> JSON, the only thing that crosses between grader and student process.

Answers travel as JSON text, never as pickles: decoding JSON cannot run code, so a
submission cannot smuggle objects into the grader. JSON has no tuples, ndarrays or
non-string dict keys, so those are tagged explicitly::

    (1, 2)                 -> {"__tuple__": [1, 2]}
    {"a": 1}               -> {"__dict__": [["a", 1]]}
    np.array([[1., 2.]])   -> {"__ndarray__": [[1.0, 2.0]], "dtype": "float64"}

NaN and infinities use JSON's common ``NaN``/``Infinity`` extension (Python reads them).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["PlainDataError", "to_plain", "from_plain", "dumps", "loads"]

_ALLOWED_DTYPE_KINDS = "biuf"  # bool, signed int, unsigned int, float
_MAX_DEPTH = 64


class PlainDataError(TypeError):
    """A value that is not plain data (numbers, str, lists, tuples, dicts, ndarrays)."""


def to_plain(value: Any, _depth: int = 0) -> Any:
    """Encode ``value`` as JSON-ready data with explicit tags; raise PlainDataError otherwise."""
    if _depth > _MAX_DEPTH:
        raise PlainDataError(f"answer is nested more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):  # np.float64 is a float subclass
        return float(value) if isinstance(value, float) else int(value)
    if isinstance(value, np.generic):
        if value.dtype.kind not in _ALLOWED_DTYPE_KINDS:
            raise PlainDataError(f"cannot send a numpy {value.dtype} scalar (numbers only)")
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ALLOWED_DTYPE_KINDS:
            raise PlainDataError(f"cannot send an array of dtype {value.dtype} (numbers only)")
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str, "shape": value.shape}
    if isinstance(value, tuple):
        return {"__tuple__": [to_plain(v, _depth + 1) for v in value]}
    if isinstance(value, list):
        return [to_plain(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {
            "__dict__": [
                [to_plain(k, _depth + 1), to_plain(v, _depth + 1)] for k, v in value.items()
            ]
        }
    raise PlainDataError(
        f"cannot send a {type(value).__name__} value: answers must be plain data "
        "(numbers, strings, lists, tuples, dicts, numpy arrays)"
    )


def from_plain(data: Any, _depth: int = 0) -> Any:
    """Decode what :func:`to_plain` produced (after ``json.loads``)."""
    if _depth > _MAX_DEPTH + 1:
        raise PlainDataError("data nested too deeply")
    if isinstance(data, list):
        return [from_plain(v, _depth + 1) for v in data]
    if not isinstance(data, dict):
        return data
    if "__tuple__" in data:
        return tuple(from_plain(v, _depth + 1) for v in data["__tuple__"])
    if "__dict__" in data:
        return {
            _hashable(from_plain(k, _depth + 1)): from_plain(v, _depth + 1)
            for k, v in data["__dict__"]
        }
    if "__ndarray__" in data:
        dtype = np.dtype(str(data.get("dtype", "float64")))
        if dtype.kind not in _ALLOWED_DTYPE_KINDS:
            raise PlainDataError(f"refusing an array of dtype {dtype}")
        array = np.array(data["__ndarray__"], dtype=dtype)
        shape = tuple(int(n) for n in data.get("shape", array.shape))
        return array.reshape(shape)
    raise PlainDataError(f"unknown tagged value with keys {sorted(data)[:5]}")


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def dumps(value: Any) -> str:
    """``value`` as one line of JSON text."""
    return json.dumps(to_plain(value), separators=(",", ":"))


def loads(text: str) -> Any:
    """The value encoded by :func:`dumps`."""
    return from_plain(json.loads(text))
