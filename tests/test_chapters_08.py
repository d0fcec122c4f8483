"""Chapter 08 as committed: executed, every claim backed by a stored output, fit for slides.

(nbval re-runs the notebook and compares outputs; these checks read the stored outputs and
assert they show what the text claims, so an edit cannot quietly drop a claim. The claims
themselves — jvp linear in the tangent, the transposed graph equal to backward(),
per-example gradients — are checked here against closed forms, hand-written gradients and
PyTorch.)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import printed_text

from autodiff_lab import sin
from autodiff_lab.functional import jvp, linear_transpose, linearize

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_transformations.ipynb"
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


@pytest.fixture(scope="module")
def cells():
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _source(cell) -> str:
    return "".join(cell["source"])


def _markdown(cells) -> str:
    return "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")


def test_executed_without_errors_and_every_cell_has_slide_metadata(cells):
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code)
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert all(c["metadata"]["slideshow"]["slide_type"] in SLIDE_TYPES for c in cells)
    assert cells[0]["metadata"]["slideshow"]["slide_type"] == "slide"


def test_goals_reading_time_check_yourself_summary_and_exercises_link(cells):
    first = _source(cells[0])
    assert "**Learning goals.**" in first and re.search(r"About \d+ minutes", first)
    text = _markdown(cells)
    assert "## Check yourself" in text and "<summary>Answers</summary>" in text
    assert "## Summary" in text and "../exercises/08_transformations.ipynb" in text


def test_every_printed_verdict_is_true(cells):
    printed = printed_text(cells)
    verdicts = re.findall(r":\s*(True|False)\b", printed)
    assert len(verdicts) >= 10 and set(verdicts) == {"True"}, verdicts


def test_torch_is_only_reached_through_import_torch(cells):
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        src = _source(cell)
        assert not re.search(r"^\s*(import torch|from torch)", src, re.M), src[:80]
        if "torch." in src:  # only under the guard of an earlier import_torch()
            assert "if torch is not None:" in src, src[:80]
    sources = "".join(_source(c) for c in cells if c["cell_type"] == "code")
    assert "torch = import_torch()" in sources
    assert sources.index("torch = import_torch()") < sources.index("torch.")


def test_timings_are_never_compared_by_nbval(cells):
    """A cell that times something shows the times only in a plot (PNG, ignored by nbval)
    or is tagged nbval-ignore-output."""
    for cell in cells:
        if cell["cell_type"] != "code" or "best_time(" not in _source(cell):
            continue
        if "def best_time" in _source(cell):
            continue
        tags = cell["metadata"].get("tags", [])
        kinds = {o["output_type"] for o in cell["outputs"]}
        assert "nbval-ignore-output" in tags or kinds <= {"display_data"}, _source(cell)[:80]


# --- section 1: jvp is linear in the tangent ----------------------------------------------


def f(x, y):
    return x * y * y + 3 * x, x * x - 2 * y


def test_the_small_integer_jacobian_of_the_text():
    """J = [[y² + 3, 2xy], [2x, −2]] at (2, 1) = [[4, 4], [4, −2]], as the text says."""
    columns = [jvp(f, (2.0, 1.0), e)[1] for e in ((1.0, 0.0), (0.0, 1.0))]
    assert np.array(columns).T.tolist() == [[4.0, 4.0], [4.0, -2.0]]
    assert jvp(f, (2.0, 1.0), (3.0, -2.0))[1] == (4.0, 16.0)  # 3·col0 − 2·col1, exactly
    assert jvp(f, (4.0, 2.0), (1.0, 0.0))[1] == (7.0, 8.0)  # y² + 3 = 7, 2x = 8: not (8, 8)


def test_stored_outputs_show_the_jacobian_columns_and_the_non_linearity_in_the_point(cells):
    printed = printed_text(cells)
    assert "J u         = (4.0, 4.0)" in printed and "J v         = (4.0, -2.0)" in printed
    assert "J (3u - 2v) = (4.0, 16.0)" in printed and "3 Ju - 2 Jv = (4.0, 16.0)" in printed
    assert "jvp at (4, 2) along u: (7.0, 8.0)" in printed


# --- section 2: linearize and transpose --------------------------------------------------------


def h(x, y):
    return x * y + sin(x)


def test_linearize_and_transpose_of_the_chapters_example_against_closed_forms():
    out, h_jvp = linearize(h, 0.5, 2.0)
    assert out == pytest.approx(0.5 * 2.0 + math.sin(0.5), rel=1e-15)
    assert [n.op for n in h_jvp.nodes if n.op != "input"] == ["mul", "mul", "add", "mul", "add"]
    for tx, ty in ((1.0, 0.0), (0.3, -1.2)):
        assert h_jvp(tx, ty) == pytest.approx(2.0 * tx + 0.5 * ty + math.cos(0.5) * tx)
    gx, gy = linear_transpose(h_jvp)(1.0)
    assert gx == pytest.approx(2.0 + math.cos(0.5), rel=1e-15) and gy == 0.5


def test_stored_outputs_show_the_linear_graph_and_the_transposed_gradient(cells):
    printed = printed_text(cells)
    assert "<LinearGraph: 2 input(s), ops [mul, mul, add, mul, add]>" in printed  # "five"
    assert f"({2.0 + math.cos(0.5):.4f}, 0.5000)" in printed  # transposed graph and backward
    assert "parameters: 161" in printed  # "Its 161 parameters"
    html = "".join(
        "".join(o.get("data", {}).get("text/html", ""))
        for c in cells
        if c["cell_type"] == "code"
        for o in c["outputs"]
    )
    assert "linear graph of the jvp at x = 0.5000, y = 2.0000" in html
    assert "the same graph transposed (the vjp)" in html
    assert f"{math.cos(0.5):.4f}" == "0.8776" and "0.8776" in _markdown(cells)


def test_the_two_matrices_of_h_and_their_transposes(cells):
    """J = M2 M1 with M1 = [[y, 0], [0, x], [cos x, 0]] and M2 = (1 1 1): J = (y + cos x, x),
    and Jᵀ 1 = M1ᵀ M2ᵀ 1 is the same pair, as the stored output prints it."""
    x, y = 0.5, 2.0
    assert f"J = M2 M1 = [[{y + math.cos(x):.4f} 0.5   ]]" in printed_text(cells)
    assert f"J^T 1 = M1^T M2^T 1 = [{y + math.cos(x):.4f} 0.5   ]" in printed_text(cells)
    assert "M2^T 1 = [1. 1. 1.]" in printed_text(cells)
    assert linear_transpose(linearize(h, x, y)[1])(1.0) == pytest.approx((y + math.cos(x), x))


def test_the_stored_side_by_side_is_legible_and_shows_the_fan_in_sum(cells):
    """The transposed picture the text walks through: reversed edges carry the shares
    cos 0.5, 2 and 0.5, x's cotangent is drawn as the sum of its two shares, and neither
    picture may shrink below 2/3 of its natural width next to the other (labels >= 8 pt)."""
    import base64

    cell = next(c for c in cells if _source(c).strip() == "view.side_by_side()")
    html = "".join(cell["outputs"][0]["data"]["text/html"])
    svgs = [
        base64.b64decode(b).decode("utf-8")
        for b in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", html)
    ]
    bases = [int(b) for b in re.findall(r"flex:1 1 (\d+)px", html)]
    assert len(svgs) == 2 and len(bases) == 2
    for svg, basis in zip(svgs, bases):
        width_px = float(re.search(r'<svg\b[^>]*?\swidth="([\d.]+)pt"', svg).group(1)) * 4 / 3
        assert basis >= 2 / 3 * width_px - 1, (basis, width_px)
    jvp_svg, vjp_svg = svgs
    cos = f"{math.cos(0.5):.4f}"
    assert f"cotangent {2 + math.cos(0.5):.4f} = 2.0000 + {cos}" in vjp_svg
    assert vjp_svg.count("fan&#45;out") == 2 and "fan&#45;out" not in jvp_svg
    for share in (cos, "2.0000", "0.5000"):  # the multiplications' shares on reversed edges
        assert f">{share}</text>" in vjp_svg, share


def test_the_widget_is_in_the_chapter_with_its_static_fallback(cells):
    widget = next(c for c in cells if "LinearizeViewer(h" in _source(c))
    bundle = widget["outputs"][0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Static picture: run this cell" in "".join(bundle["text/plain"])
    assert "<img" in "".join(bundle["text/html"])


# --- section 3: batching -------------------------------------------------------------------


def _chapter_batch(n: int = 64, seed: int = 1):
    """The chapter's network (8 inputs, 16 tanh units: 161 parameters) and its data."""
    d, h = 8, 16
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=h * d + h + h + 1) / 3
    X, Y = rng.normal(size=(n, d)), rng.normal(size=n)
    return theta, X, Y


def test_vmap_per_example_gradients_equal_hand_written_backpropagation():
    from autodiff_lab.functional import grad, vmap
    from autodiff_lab.grading.exercises.ch08 import mlp_gradients
    from autodiff_lab.grading.runners.ch08 import mlp_loss  # the chapter's loss, same layout

    theta, X, Y = _chapter_batch()
    assert theta.size == 161
    by_hand, _ = mlp_gradients(theta, X, Y)
    got = vmap(grad(mlp_loss), in_axes=(None, 0, 0))(theta, X, Y)
    np.testing.assert_allclose(got, by_hand, rtol=1e-12, atol=1e-14)
    norms = np.linalg.norm(by_hand, axis=1)
    assert norms.max() > 10 * norms.min()  # "differ by more than 10x across the batch"


def test_vmap_sum_rule_matches_a_loop_for_every_axis():
    from autodiff_lab import Tensor
    from autodiff_lab.functional import vmap

    batch = np.random.default_rng(5).normal(size=(5, 3, 4))
    for axis in (0, 1, -1, None):
        got = vmap(lambda example, axis=axis: example.sum(axis=axis))(Tensor(batch)).data
        np.testing.assert_allclose(got, [np.sum(e, axis=axis) for e in batch], rtol=1e-15)


def test_the_jacobians_of_the_trade_off_slide_are_the_closed_form():
    """The slide's timings (a vectorized jacfwd over 10x faster than its loop; jacfwd's
    columns over 3x slower than jacrev's rows for the tall-and-wide network) are measured by
    ``make bench`` (benchmarks/bench_claims.py); here, the matrices those programs compute."""
    from autodiff_lab.functional import jacfwd, jacrev

    rng = np.random.default_rng(3)
    rng.normal(size=(4, 200)), rng.normal(size=200)  # the small wide case's draws (in the bench)
    B, A = rng.normal(size=(200, 1000)) / 30, rng.normal(size=(4, 200)) / 14
    x = rng.normal(size=1000)

    def big_wide(x):
        from autodiff_lab import tanh

        return tanh(A @ tanh(B @ x))

    # and the two give the same matrix, of the closed form A diag(1-u²) ... by the chain rule
    u = np.tanh(B @ x)
    out = np.tanh(A @ u)
    expected = (1 - out**2)[:, None] * A @ ((1 - u**2)[:, None] * B)
    np.testing.assert_allclose(jacrev(big_wide, vectorize=True)(x), expected, rtol=1e-10)
    np.testing.assert_allclose(jacfwd(big_wide, vectorize=True)(x), expected, rtol=1e-10)


def test_stored_outputs_show_the_batching_verdicts(cells):
    printed = printed_text(cells)
    for line in (
        "vmap(grad(loss)): (64, 161)   equal to the loop's rows: True",
        "vmap more than 5x faster than the loop from N = 128 on: True",
        "small wide: vectorized jacfwd over 10x faster than its loop: True",
        "linearize ours == torch.func (to 1e-10): True",
        "vmap      ours == torch.func (to 1e-10): True",
    ):
        assert line in printed, line
