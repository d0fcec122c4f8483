"""Chapter 05's stored outputs do not hang on round-off.

On another CPU, numpy's SIMD ``sin``/``exp`` and the BLAS kernels round differently, so the
data and every sum differ in their last bits (about 1e-16, relative). This test executes the
chapter with every data set it loads perturbed by a relative 1e-9 — ten million times more —
and asserts that every output strict nbval compares prints exactly the committed text. A
figure printed with more digits than are robust, or an accuracy with a point next to the
decision boundary, fails here, on the developer's machine rather than on a student's.

(Cells tagged ``nbval-ignore-output`` — the timings — are left out, as nbval leaves them.)
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_training_an_mlp.ipynb"
RELATIVE_PERTURBATION = 1e-9

PERTURB_THE_DATA = f"""
import numpy as _np
from autodiff_lab import data as _data

_noise = _np.random.default_rng(2026)


def _perturbed(load):
    def load_perturbed(*args, **kwargs):
        arrays = load(*args, **kwargs)
        return tuple(
            a * (1 + {RELATIVE_PERTURBATION!r} * _noise.standard_normal(a.shape))
            if a.dtype.kind == "f" else a
            for a in arrays
        )
    return load_perturbed


_data.make_moons = _perturbed(_data.make_moons)
_data.load_digits = _perturbed(_data.load_digits)
"""


def compared_text(cell) -> list[str]:
    """What strict nbval compares in a code cell, as text: each stream's whole text (chunks
    joined: how a stream is split into outputs varies) and each result's text/plain."""
    streams: dict[str, str] = {}
    results = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            streams[out["name"]] = streams.get(out["name"], "") + out["text"]
        elif out["output_type"] in ("execute_result", "display_data"):
            results.append(out["data"].get("text/plain", ""))
        elif out["output_type"] == "error":
            results.append(f"ERROR {out['ename']}: {out['evalue']}")
    return [f"{name}: {text}" for name, text in sorted(streams.items())] + results


def checked_cells(nb) -> list:
    return [
        c
        for c in nb.cells
        if c.cell_type == "code" and "nbval-ignore-output" not in c.metadata.get("tags", [])
    ]


@pytest.mark.exhaustive  # the chapter run again on perturbed data: a minute (beside SIMD-off)
def test_stored_outputs_survive_a_perturbation_far_above_round_off():
    committed = nbformat.read(NOTEBOOK, as_version=4)
    perturbed = nbformat.read(NOTEBOOK, as_version=4)
    perturbed.cells.insert(0, nbformat.v4.new_code_cell(PERTURB_THE_DATA))
    NotebookClient(
        perturbed,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    perturbed.cells.pop(0)
    for before, after in zip(checked_cells(committed), checked_cells(perturbed), strict=True):
        first_line = before.source.splitlines()[0]
        assert compared_text(after) == compared_text(before), first_line
