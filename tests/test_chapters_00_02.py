"""Chapters 00, 01 and 02: structure, slides, and the claims their stored outputs show.

nbval (run on every notebook by ``make test``) checks that re-running a chapter reproduces
its stored outputs. These tests check that the stored outputs *demonstrate* what the text
claims (claim 1 in chapter 00, claims 4 and 5 in chapters 01-02), against values computed
here independently, so a chapter re-executed on a broken engine cannot be committed
unnoticed. The timing trend of chapter 02 is measured by ``make bench`` (benchmarks/bench_cost.py).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import cell_source as _source
from notebook_helpers import markdown_text as _markdown
from notebook_helpers import notebook_cells as _cells
from notebook_helpers import printed as _printed

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CH00 = NOTEBOOKS / "00_why_autodiff.ipynb"
CH01 = NOTEBOOKS / "01_forward_mode.ipynb"
CH02 = NOTEBOOKS / "02_reverse_mode.ipynb"
CHAPTERS = [CH00, CH01, CH02]
EPS = np.finfo(float).eps
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


def _cell_after_heading(path: Path, heading: str, skip: int = 0) -> dict:
    """The first code cell after the Markdown cell containing ``heading`` (plus ``skip``)."""
    cells = _cells(path)
    start = next(i for i, c in enumerate(cells) if heading in _source(c))
    code = [c for c in cells[start:] if c["cell_type"] == "code"]
    return code[skip]


def _f_prime(x: float) -> float:
    """d/dx e^{sin x} / (1 + x^2), by hand."""
    return math.exp(math.sin(x)) * (math.cos(x) * (1 + x * x) - 2 * x) / (1 + x * x) ** 2


# --- structure ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, link",
    [
        (CH00, "01_forward_mode.ipynb"),
        (CH01, "../exercises/01_forward_mode.ipynb"),
        (CH02, "../exercises/02_reverse_mode.ipynb"),
    ],
    ids=["00", "01", "02"],
)
def test_chapter_has_goals_check_yourself_link_and_summary(path, link):
    cells = _cells(path)
    assert "Learning goals" in _source(cells[0])
    text = _markdown(path)
    check = text[text.index("## Check yourself") :]
    assert "<details>" in check and check.count("\n1. ") >= 1
    assert link in text
    assert "## Summary" in text
    assert "$$" in text, "the narrative derives things with display math"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_executed_without_errors(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "commit the notebook executed"
    for cell in code:
        assert all(o["output_type"] != "error" for o in cell.get("outputs", [])), _source(cell)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_cell_has_slide_metadata_and_speaker_notes_exist(path):
    cells = _cells(path)
    types = [c["metadata"].get("slideshow", {}).get("slide_type") for c in cells]
    assert set(types) <= SLIDE_TYPES, set(types) - SLIDE_TYPES
    assert types[0] == "slide"
    assert "notes" in types, "derivations go to speaker notes"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_timing_cells_are_excluded_from_output_comparison(path):
    timed = 0
    for cell in _cells(path):
        src = _source(cell)
        calls = src.count("best_time(") - src.count("def best_time(") + src.count("CostExplorer(")
        if cell["cell_type"] == "code" and calls:
            timed += 1
            assert "nbval-ignore-output" in cell["metadata"].get("tags", []), src
    if path != CH01:
        assert timed, "chapters 00 and 02 measure time"


# --- claim 1 (chapter 00): exact, not approximate -----------------------------------------


def test_ch00_finite_differences_lose_digits_autodiff_does_not():
    table = _printed(_cell_after_heading(CH00, "## Claim 1, demonstrated"))
    exact = _f_prime(1.5)
    rows = {}
    for line in table.splitlines()[1:]:
        name, value = re.match(r"(.+?)\s+(-?\d\.\d{10,})", line).groups()
        rows[name.strip()] = float(value)
    assert len(rows) == 5
    for name, value in rows.items():
        rel = abs(value - exact) / abs(exact)
        if "difference" in name:
            assert rel > 1e3 * EPS, f"{name} should be visibly approximate: {rel:.1e}"
        else:  # symbolic and both autodiff modes
            assert rel <= 4 * EPS, f"{name} should be exact to rounding: {rel:.1e}"


def test_ch00_expression_swell_is_the_trees_shared_derivative_grows_linearly():
    """The tree of f_n' passes 200,000 nodes; the DAG diff built has 19n - 2 (188 at n = 10)."""
    table = _printed(_cell_after_heading(CH00, "### The catch: expression swell", skip=1))
    rows = [
        [int(v.replace(",", "")) for v in line.split()]
        for line in table.splitlines()[1:]
        if line.strip()
    ]
    assert [r[0] for r in rows] == list(range(1, 11))
    for n, formula, derivative, shared, graph in rows:
        assert graph == 6 * n + 1  # 5 operations + the constant 1 per composition, + x
        assert formula == 2 ** (n + 3) - 7  # the formula tree doubles (+ 7) per composition
        assert shared == 19 * n - 2  # the hand count of the test below
        assert derivative > formula
    derivative = [r[2] for r in rows]
    assert all(b > 2 * a for a, b in zip(derivative, derivative[1:]))
    assert derivative[-1] > 200_000
    text = _markdown(CH00)
    assert "188 at $n = 10$" in text and "$19n - 2$ distinct nodes" in text


def test_ch00_shared_derivative_size_is_the_hand_count():
    """19n - 2, counted by hand from diff's rules: each composition adds 7 formula nodes and 12
    derivative nodes (cos g, exp*cos, *g', the num 2.0, 2.0*g, *g', a'b, ab', -, the num 2, ^, /);
    at n = 1, g' = x' = 1 and the two *g' products simplify away; the outermost division of f_n
    is not part of its derivative, and x is: (7n + 1 - 1) + (12n - 2) = 19n - 2. For n = 1 the
    row is 9 tree nodes (2^4 - 7), a 28-node tree derivative, 17 shared, a 7-node graph."""
    table = _printed(_cell_after_heading(CH00, "### The catch: expression swell", skip=1))
    assert [int(v) for v in table.splitlines()[1].split()] == [1, 9, 28, 17, 7]


def test_ch00_autodiff_follows_a_while_loop_a_formula_cannot():
    printed = _printed(_cell_after_heading(CH00, "### What autodiff adds"))
    by_autodiff = float(re.search(r"by autodiff: (\S+)", printed).group(1))
    assert by_autodiff == pytest.approx(1 / (2 * math.sqrt(2)), abs=1e-15)  # closed form
    h = 1e-6
    central = (math.sqrt(2 + h) - math.sqrt(2 - h)) / (2 * h)
    assert by_autodiff == pytest.approx(central, rel=1e-8)  # finite differences
    assert "on a formula: TypeError: bad operand type for abs(): 'Sym'" in printed


def test_ch00_no_overclaims_remain():
    """Issue 25: the sentences that overclaimed exactness, cost and the tests' tolerance."""
    text = _markdown(CH00)
    for wrong in (
        "exact to machine precision",
        "ten to fifty",
        "as the plot predicts",
        "200,000-node",
        "swell is also a",
    ):
        assert wrong not in text, wrong
    assert "no truncation error" in text


def test_ch00_the_tests_step_and_tolerance_are_what_the_text_says():
    """Text: tests compare with central differences at h = 1e-6 and allow 1e-5 relative."""
    source = (ROOT / "tests" / "test_engine_finite_diff.py").read_text(encoding="utf-8")
    assert "STEP = 1e-6" in source and "RTOL, ATOL = 1e-5, 1e-6" in source
    text = _markdown(CH00)
    assert "at $h = 10^{-6}$" in text and "allow a relative $10^{-5}$" in text
    printed = _printed(_cell_after_heading(CH00, "**Speaker notes — the best step.**"))
    assert "central error at the tests' step h = 1e-06 below 1e-9: True" in printed


def test_ch00_autodiff_matches_the_shared_symbolic_derivative():
    """Text: on f_10 autodiff and the shared symbolic derivative "agree to a few eps"."""
    printed = _printed(_cell_after_heading(CH00, "One point proves little"))
    found = re.search(
        r"f_10'\(x0\): autodiff (\S+), shared symbolic (\S+): ([\d.]+) eps apart",
        printed,
    )
    by_autodiff, by_symbolic, apart = (float(v) for v in found.groups())
    assert by_autodiff == pytest.approx(by_symbolic, rel=1e-11)  # printed to 13 digits
    assert apart < 10
    text = " ".join(_markdown(CH00).split())
    assert "the two exact methods agree to a few $\\varepsilon$" in text

    # independent check: central difference of f_10 at 1.5 (about 1e-9 accurate)
    def f_10(x):
        for _ in range(10):
            x = math.exp(math.sin(x)) / (1 + x * x)
        return x

    h = 1e-5
    central = (f_10(1.5 + h) - f_10(1.5 - h)) / (2 * h)
    assert by_autodiff == pytest.approx(central, rel=1e-6)


# --- claims 4 and 5 (chapters 01-02): one pass = a column (jvp) or a row (vjp) -------------


def _jacobian_f3(x, y, z):
    c1, c2 = math.cos(x + 2 * y - z), math.cos(0.5 * x - y + 3 * z)
    return np.array([[c1 + 2 * x, 2 * c1, -c1], [0.5 * c2, -c2 + 2 * y, 3 * c2]])


def _floats(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


def test_ch01_one_forward_pass_gives_a_jacobian_column():
    printed = _printed(_cell_after_heading(CH01, "## Several inputs, several outputs"))
    tangents = _floats(printed.splitlines()[0])
    assert tangents == pytest.approx(_jacobian_f3(0.3, -0.2, 0.5)[:, 0], rel=1e-14)


def test_ch01_jvp_is_jacobian_times_direction():
    printed = _printed(_cell_after_heading(CH01, "## `jvp`: the forward-mode primitive"))
    line = next(s for s in printed.splitlines() if s.startswith("J v (jvp)"))
    expected = _jacobian_f3(0.3, -0.2, 0.5) @ np.array([1.0, -2.0, 0.5])
    assert _floats(line) == pytest.approx(expected, rel=1e-9)  # printed to 10 digits


def test_ch02_backprop_by_hand_equals_backward_and_closed_form():
    printed = _printed(_cell_after_heading(CH02, "That loop is the whole of backpropagation"))
    t = math.tanh(0.5)
    expected = {"x": -1.2 * t + (0.5 * -1.2 + 2.0) * (1 - t * t), "y": 0.5 * t, "z": t}
    for line in printed.splitlines():
        name = re.match(r"d L/d(\w)", line).group(1)
        loop, backward, by_hand = _floats(line)
        assert loop == backward == pytest.approx(expected[name], abs=1e-14)
        assert by_hand == pytest.approx(expected[name], abs=1e-14)


def test_ch02_one_reverse_pass_gives_a_jacobian_row():
    printed = _printed(_cell_after_heading(CH02, "## `vjp`: the reverse-mode primitive"))
    row = _floats(printed.splitlines()[0])
    assert row == pytest.approx(_jacobian_f3(0.3, -0.2, 0.5)[0], rel=1e-9)  # 10 digits


def test_ch02_jvp_and_vjp_agree_on_u_J_v():
    printed = _printed(_cell_after_heading(CH02, "## Claim 5: `jvp` and `vjp`"))
    forward, reverse = _floats(printed)[:2]
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=2), rng.normal(size=3)
    expected = u @ _jacobian_f3(0.3, -0.2, 0.5) @ v
    assert forward == pytest.approx(expected, abs=1e-11)  # printed to 12 decimals
    assert reverse == pytest.approx(expected, abs=1e-11)
    assert "equal up to rounding: True" in printed


# --- chapter 00: the cost of a derivative, as the stored (timing) output shows it ------------


def test_ch00_stored_cost_figures_match_the_text():
    """Text: "about 3" x the recorded pass; "about an order of magnitude" the plain function
    (the last column), rising over the first sizes."""
    printed = _printed(_cell_after_heading(CH00, "### Cost proportional to the program"))
    recorded = [float(v) for v in re.findall(r"= (\d+\.\d) x recorded", printed)]
    plain = [float(v) for v in re.findall(r"(\d+) x plain", printed)]
    assert len(recorded) == len(plain) == 4, printed
    assert all(2.5 <= r <= 3.5 for r in recorded), recorded
    assert all(5 <= p <= 50 for p in plain), plain  # an order of magnitude
    assert plain[0] < plain[-1], "rises over the first sizes"
    assert "about an order of magnitude" in _markdown(CH00)


# --- issue 25: the chain of Jacobians, the cheap-gradient principle, JAX's transpose rules ----


def test_ch01_jvp_multiplies_the_chain_of_jacobians_from_the_right():
    printed = _printed(_cell_after_heading(CH01, "### A chain of Jacobians, multiplied from"))
    W = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, 3.0]])
    p, d = np.array([0.3, -0.2, 0.5]), np.array([1.0, -2.0, 0.5])
    expected = np.cos(W @ p) * (W @ d)  # diag(cos Wp) W d, closed form
    jvp_line = next(s for s in printed.splitlines() if s.startswith("jvp:"))
    assert _floats(jvp_line) == pytest.approx(expected, rel=1e-9)  # printed to 10 digits
    assert "the same numbers: True" in printed


def test_ch02_forward_is_right_to_left_reverse_left_to_right():
    printed = _printed(_cell_after_heading(CH02, "## The chain of Jacobians", skip=1))
    assert "jvp equals J3 (J2 (J1 v)), right to left: True" in printed
    assert "vjp equals ((1 J3) J2) J1, left to right: True" in printed
    right_to_left = 50 * 50 * 100 + 1 * 50 * 100  # J2 J1, then J3 (J2 J1)
    left_to_right = 1 * 50 * 50 + 1 * 50 * 100  # J3 J2, then (J3 J2) J1
    assert f"right to left {right_to_left:,} multiply-adds, left to right {left_to_right:,}" in (
        printed
    )
    assert "$50\\cdot50\\cdot100$ multiply-adds" in _markdown(CH02)


def test_ch02_cheap_gradient_principle_counted_in_operations():
    printed = _printed(_cell_after_heading(CH02, "### The cheap-gradient principle", skip=1))
    rows = re.findall(
        r"n = +(\d+): f +(\d+) ops, f \+ reverse gradient +(\d+) = ([\d.]+) x f, +"
        r"n jvp passes +([\d,]+) = +([\d.]+) x f",
        printed,
    )
    assert [int(r[0]) for r in rows] == [4, 16, 64, 256]
    forward_ratio = {}
    for n, f_ops, both, ratio, fwd, fwd_ratio in rows:
        n, f_ops, both, fwd = int(n), int(f_ops), int(both), int(fwd.replace(",", ""))
        assert f_ops == 3 * (n - 1)  # tanh, * and + per link, counted by hand
        assert both / f_ops == pytest.approx(float(ratio), abs=0.005)
        assert float(ratio) == pytest.approx(3.33, abs=0.005)  # the text's constant
        assert both < 5 * f_ops  # a small constant, whatever n
        assert fwd % n == 0  # n passes of equal length
        forward_ratio[n] = fwd / f_ops
        assert forward_ratio[n] == pytest.approx(float(fwd_ratio), abs=0.05)
    assert forward_ratio[256] / forward_ratio[4] > 0.8 * 256 / 4  # grows like n
    assert "3.33 times that at every $n$" in _markdown(CH02)


def test_ch02_jax_linear_primitives_need_transpose_rules():
    text = _markdown(CH02)
    assert "its primitives need only jvp rules" not in text
    assert "each need a *transpose* rule" in text and "`transpose_rules`" in text
    assert "transpos" in _markdown(NOTEBOOKS / "08_transformations.ipynb")


def test_ch00_the_tiny_algebra_system_is_about_70_lines():
    """Non-blank lines of Sym, its operators and helpers, diff with its rules and evaluate (the
    demo lines that use them — print(...), x_sym = ..., symbolic_value = ... — not counted)."""
    starts = (
        "class Sym:",
        "# operators on a Sym",
        "def sym(v):",
        "def mul(a, b):",
        "def rule(e, memo):",
        "def diff(e, memo=None):",
        "NUMERIC = {",
    )
    code = [c for c in _cells(CH00) if c["cell_type"] == "code"]
    lines = 0
    for start in starts:
        cell = next(c for c in code if _source(c).startswith(start))
        lines += sum(
            1
            for line in _source(cell).splitlines()
            if line.strip() and not line.startswith(("print(", "x_sym =", "symbolic_value ="))
        )
    assert 63 <= lines <= 77, lines  # 69 as committed
    assert "(about 70 lines)" in _markdown(CH00)
