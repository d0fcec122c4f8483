"""Chapter figures carry a text alternative (autodiff_lab.viz.figures).

Expected texts are written out by hand from the figures built here. The kernel tests run a
real IPython kernel: importing autodiff_lab must turn each shown figure into one HTML
``<img alt>`` output (no bare ``image/png``), and :func:`uninstall` must give it back.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from autodiff_lab.viz.figures import alt_text, describe, figure_bundle, plain  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(
    ("label", "words"),
    [
        (r"forward $\partial f/\partial x$", "forward ∂f/∂x"),
        (r"$\log_{10} |x|$", "log₁₀ |x|"),
        (r"$\mathrm{d}L/\mathrm{d}w$", "dL/dw"),
        (r"$\|g\|_2$", "‖g‖₂"),
        (r"$x^{2}$ and $\alpha \cdot h$", "x² and α·h"),
        (r"$e^{-x}$, $x_i$, $10^{-8}$", "e^-x, x_i, 10⁻⁸"),
        (r"time of $\exp x$ in $\mu$s", "time of exp x in μs"),
        ("snake_case x^2 stays as written", "snake_case x^2 stays as written"),
        ("", ""),
    ],
)
def test_mathtext_is_said_in_words(label, words):
    assert plain(label) == words


def test_one_panel_names_its_lines_axes_scales_and_legend():
    fig, ax = plt.subplots()
    h = np.logspace(-12, 0, 13)
    ax.loglog(h, h, label="forward")
    ax.loglog(h, h**2, label="central")
    ax.set(xlabel="step h", ylabel="error", title="error vs h")
    ax.legend()
    assert alt_text(fig) == (
        "Plot: “error vs h”: 2 lines of error against step h, both axes on log scales; "
        "legend: forward; central."
    )


def test_panels_suptitle_and_summary_come_in_reading_order():
    fig, (left, right) = plt.subplots(1, 2)
    fig.suptitle("Training")
    left.plot([0, 1, 2], [3, 2, 1])
    left.set(xlabel="step", ylabel="loss")
    right.scatter([0, 1, 2], [1, 0, 1])
    right.bar([0, 1], [2, 3])
    right.set_title("data")
    assert describe(fig, "  The loss   falls.  ") is fig
    assert alt_text(fig) == (
        "The loss falls. Figure “Training” with 2 panels. "
        "Panel 1, 1 line of loss against step. "
        "Panel 2, “data”: 3 points, 2 bars."
    )


def test_images_colour_bars_shaded_regions_and_empty_figures():
    fig, ax = plt.subplots()
    picture = ax.imshow(np.eye(3))
    fig.colorbar(picture, label="weight")
    assert alt_text(fig) == "Plot: 1 image. Colour bar: weight."

    fig, ax = plt.subplots()
    ax.fill_between([0, 1], [0, 1], [1, 2])
    ax.set_ylabel("band")
    assert alt_text(fig) == "Plot: 1 shaded region of band."

    fig, (ax, off, empty) = plt.subplots(1, 3)
    ax.semilogy([1, 2], [1, 10])
    ax.set(xlabel="x", ylabel="log-loss")  # a label that says "log" already
    off.plot([1, 2])
    off.set_visible(False)
    empty.set_xlabel("unused")
    empty.axis("off")
    assert alt_text(fig) == "Plot: 1 line of log-loss against x."

    fig, ax = plt.subplots()
    ax.pcolormesh(np.eye(2))
    ax.inset_axes([0.5, 0.5, 0.4, 0.4]).scatter([1, 2], [2, 1])
    ax.set_xscale("log")
    assert alt_text(fig) == "Plot: 2 points, 1 colour map, x on a log scale."

    assert alt_text(plt.figure()) == "Figure with no axes."


def test_describe_wants_a_sentence():
    fig = plt.figure()
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError, match=r"describe: summary must be a non-empty sentence"):
            describe(fig, bad)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (bytes 16-24)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_bundle_is_an_escaped_img_alt_around_the_inline_png():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.plot([0, 1], [0, 1])
    ax.set_title('"><script>alert(1)</script>')
    bundle = figure_bundle(fig)
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle["text/plain"] == 'Plot: “"><script>alert(1)</script>”: 1 line.'
    tag = re.fullmatch(r'<img src="data:image/png;base64,([^"]+)" alt="([^"]*)" style="[^"]*">',
                       bundle["text/html"])  # fmt: skip
    assert tag, bundle["text/html"][:200]
    assert html.unescape(tag.group(2)) == bundle["text/plain"]
    assert "<script>" not in bundle["text/html"]
    width, height = png_size(base64.b64decode(tag.group(1)))
    # bbox_inches="tight" trims the margins of a 200 x 150 pixel figure
    assert 100 < width <= 200 and 100 < height <= 150


def run_cells(*sources: str) -> list[list[dict]]:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    return [cell.outputs for cell in nb.cells]


PLOT = "fig, ax = plt.subplots(); ax.plot([0, 1], [1, 0]); ax.set_title('down'); plt.show()"


def test_in_a_kernel_importing_autodiff_lab_shows_figures_as_html_with_alt_text():
    outputs = run_cells(
        "import matplotlib.pyplot as plt\n" + PLOT,
        "import autodiff_lab\n" + PLOT,
        "from autodiff_lab.viz.figures import describe\n"
        "fig, ax = plt.subplots(); ax.plot([0, 1]); describe(fig, 'Up.');",
        "from autodiff_lab.viz.figures import uninstall\nuninstall(get_ipython())\n" + PLOT,
    )
    before, after, described, undone = outputs
    assert [sorted(o["data"]) for o in before] == [["image/png", "text/plain"]]
    assert [sorted(o["data"]) for o in after] == [["text/html", "text/plain"]]
    assert after[0]["data"]["text/plain"] == "Plot: “down”: 1 line."
    assert 'alt="Plot: “down”: 1 line."' in after[0]["data"]["text/html"]
    # shown by the inline backend at the end of the cell, with describe's sentence
    assert [o["data"]["text/plain"] for o in described] == ["Up. Plot: 1 line."]
    assert [sorted(o["data"]) for o in undone] == [["image/png", "text/plain"]]


def test_the_guides_example_is_a_stored_figure_of_chapter_06():
    """The lecturer's guide quotes one figure's alt text (up to its "…"): it is chapter 06's."""
    from notebook_helpers import notebook_cells

    guide = (ROOT / "docs" / "lecturer.md").read_text(encoding="utf-8")
    quoted = re.search(r'\(e\.g\.\s+"(Plot: .*?)…"\)', guide, re.DOTALL)
    assert quoted, "docs/lecturer.md: the example alt text is gone"
    example = " ".join(quoted.group(1).split())
    stored = [
        "".join(o["data"]["text/plain"])
        for c in notebook_cells(ROOT / "notebooks" / "06_beyond.ipynb")
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {}) and "data:image/png" in "".join(o["data"]["text/html"])
    ]
    assert any(alt.startswith(example) for alt in stored), (example, stored)
