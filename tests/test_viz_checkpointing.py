"""CheckpointExplorer driven from Python (headless): the drawn state and the measured trends.

The counts (values kept, steps recomputed) are exact and checked against hand counts; the
gradients against the closed form of the chain; the measurements only for their direction
(memory falls from 1 to √n segments, time grows from 1 to n segments), with margins.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from autodiff_lab.viz import CheckpointExplorer
from autodiff_lab.viz.checkpointing import (
    KEPT_FILL,
    RECOMPUTED_FILL,
    ROW_LENGTH,
    chain_dot,
    checkpointed_gradient,
    describe,
    segment_lengths,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def chain_gradient_closed_form(x: np.ndarray, n: int) -> np.ndarray:
    """d sum(h_n)/dx for h <- 0.9 tanh(h) + 0.1: the product of 0.9 (1 - tanh(h_t)^2)."""
    h, total = x.copy(), np.ones_like(x)
    for _ in range(n):
        total *= 0.9 * (1 - np.tanh(h) ** 2)
        h = 0.9 * np.tanh(h) + 0.1
    return total


@pytest.fixture(scope="module")
def explorer():
    e = CheckpointExplorer(n=16, width=1_000, repeats=5, value=1)
    for k in e.slider.options:  # measure every option once, in order
        e.slider.value = k
    return e


def test_segment_lengths_and_bad_counts():
    assert segment_lengths(16, 4) == [4, 4, 4, 4]
    assert segment_lengths(10, 3) == [4, 4, 2]
    assert segment_lengths(5, 5) == [1, 1, 1, 1, 1]
    with pytest.raises(ValueError, match="need 1 <= segments <= n steps, got segments=0, n=4"):
        segment_lengths(4, 0)
    with pytest.raises(ValueError, match="CheckpointExplorer: n must be a positive int"):
        CheckpointExplorer(n=0)


@pytest.mark.parametrize("k", [1, 2, 4, 16])
def test_checkpointed_gradient_matches_the_closed_form(k):
    x = np.linspace(-2, 2, 50)
    np.testing.assert_allclose(
        checkpointed_gradient(x, 16, k), chain_gradient_closed_form(x, 16), rtol=1e-12
    )


def _drawn(dot: str) -> tuple[set[str], set[str], list[tuple[str, str]], set[str], list[str]]:
    """(kept nodes, recomputed nodes, steps drawn as run twice, thick-bordered nodes, rows)
    read from the DOT source."""
    kept = set(re.findall(rf'(\w+) \[label="\w+", fillcolor="{KEPT_FILL}"', dot))
    again = set(re.findall(rf'(\w+) \[label="\w+", fillcolor="{RECOMPUTED_FILL}"', dot))
    twice = re.findall(r"(\w+) -> (\w+) \[[^]]*style=dashed", dot)
    thick = set(re.findall(r'(\w+) \[label="\w+",[^]]*penwidth=3\.5', dot))
    rows = re.findall(r"\{ rank=same; ([^}]*)\}", dot)
    return kept, again, twice, thick, rows


def test_drawing_colours_kept_and_recomputed_nodes():
    """16 steps in 4 segments: x and h4, h8, h12 (boundaries) and h13..h16 kept; the rest
    (3 per checkpointed segment, 9 in all) recomputed; the 12 steps of segments 1-3 drawn as
    run twice; the segments' inputs x, h4, h8, h12 with a thick border; two rows of 9."""
    dot = chain_dot(16, 4)
    kept, again, twice, thick, rows = _drawn(dot)
    assert kept == {"x", "h4", "h8", "h12", "h13", "h14", "h15", "h16"}
    assert again == {f"h{i}" for i in (1, 2, 3, 5, 6, 7, 9, 10, 11)}
    assert twice == [("x", "h1")] + [(f"h{i}", f"h{i + 1}") for i in range(1, 12)]
    assert thick == {"x", "h4", "h8", "h12"}
    assert [r.split("; ")[0] for r in rows] == ["x", "h9"] and len(rows) == 2
    assert "4 segments: 8 of 17 values kept, 12 of 16 steps run twice" in dot
    assert "blue: kept until the backward pass" in dot and "thick border" in dot
    kept, again, twice, thick, _ = _drawn(chain_dot(16, 1))
    assert RECOMPUTED_FILL not in chain_dot(16, 1) and not twice and not thick
    assert len(kept) == 17


def _steps_run_by_checkpointed_gradient(monkeypatch, n: int, k: int) -> int:
    """How many chain steps one checkpointed gradient really runs (counted, not computed)."""
    import autodiff_lab.viz.checkpointing as module

    calls = [0]
    step = module.chain_step

    def counted(h):
        calls[0] += 1
        return step(h)

    monkeypatch.setattr(module, "chain_step", counted)
    checkpointed_gradient(np.linspace(-1, 1, 5), n, k)
    monkeypatch.setattr(module, "chain_step", step)
    return calls[0]


@pytest.mark.parametrize("n", [5, 10, 16, 40])
def test_drawing_is_compact_and_says_the_truth_at_every_k(monkeypatch, n):
    """At every k the drawing has the same number of rows, ceil((n + 1) / 9), and its
    counts line says what the drawing shows and what checkpointing really does: the steps
    drawn as run twice are the steps the gradient ran a second time (counted by running
    it), the values kept are the segments' inputs and the last segment's values."""
    rows_at = set()
    for k in range(1, n + 1):
        dot = chain_dot(n, k)
        kept, again, twice, thick, rows = _drawn(dot)
        rows_at.add(len(rows))
        assert all(len(r.split("; ")) - 1 <= ROW_LENGTH for r in rows)  # "a; b; " splits + 1
        lengths = segment_lengths(n, k)
        boundaries = set(np.cumsum(lengths[:-1]).tolist())
        expected_kept = (
            {"x"}
            | {f"h{i}" for i in boundaries}
            | {f"h{i}" for i in range(n - lengths[-1] + 1, n + 1)}
        )
        assert kept == expected_kept and len(kept) + len(again) == n + 1
        run_twice = _steps_run_by_checkpointed_gradient(monkeypatch, n, k) - n
        assert len(twice) == run_twice == n - lengths[-1]
        segments = len(lengths)
        assert thick == ({"x"} | {f"h{i}" for i in boundaries} if segments > 1 else set())
        said = re.search(r'label="(\d+) segments?: (\d+) of (\d+) values kept, (\d+) of (\d+)', dot)
        assert said and tuple(map(int, said.groups())) == (segments, len(kept), n + 1, run_twice, n)
        assert describe(n, k)[0].endswith(f"{len(kept)} values kept, {run_twice} steps recomputed")
    assert rows_at == {-(-(n + 1) // ROW_LENGTH)}


def test_svg_has_a_text_alternative_naming_what_is_drawn(explorer):
    explorer.slider.value = 4
    svg = explorer.svg
    assert 'role="img"' in svg and 'aria-labelledby="ckpt-title ckpt-desc"' in svg
    title = re.search(r'<title id="ckpt-title">(.*?)</title>', svg).group(1)
    assert (
        title == "Checkpointed chain of 16 steps in 4 segments: 8 values kept, 12 steps recomputed"
    )
    desc = re.search(r'<desc id="ckpt-desc">(.*?)</desc>', svg).group(1)
    assert "Segments 1 to 3 (4, 4, 4 steps) are checkpointed" in desc
    assert "their 12 steps are recomputed" in desc and "(4 steps) is recorded" in desc
    assert explorer.title in explorer.drawing.value  # the HTML's aria-label and img alt


def test_the_drawn_state_follows_the_slider(explorer):
    explorer.slider.value = 2
    assert explorer.title.endswith("in 2 segments: 10 values kept, 8 steps recomputed")
    assert "8</b> of 16 steps run twice" in explorer.caption.value
    explorer.slider.value = 16
    assert explorer.title.endswith("in 16 segments: 17 values kept, 15 steps recomputed")
    assert describe(16, 1)[0].endswith("in 1 segment: 17 values kept, 0 steps recomputed")
    assert explorer.image.png[:8] == PNG_MAGIC


def test_counts_are_exact(explorer):
    recomputed = {k: r["recomputed"] for k, r in explorer.results.items()}
    assert recomputed == {1: 0, 2: 8, 4: 12, 8: 14, 16: 15}  # n - n/k
    kept = {k: r["kept"] for k, r in explorer.results.items()}
    assert kept == {1: 17, 2: 10, 4: 8, 8: 10, 16: 17}  # k boundaries + the last segment


def test_caption_and_drawing_say_the_counts_at_every_k(explorer):
    """The caption, the title and the drawing's counts line agree with the hand counts at
    every slider position (the issue: "17 of 17 values kept" whatever k)."""
    kept = {1: 17, 2: 10, 4: 8, 8: 10, 16: 17}
    twice = {1: 0, 2: 8, 4: 12, 8: 14, 16: 15}
    for k in explorer.slider.options:
        explorer.slider.value = k
        assert f"{kept[k]} of 17 values kept, <b>{twice[k]}</b> of 16 steps run twice" in (
            explorer.caption.value
        )
        assert explorer.title.endswith(f"{kept[k]} values kept, {twice[k]} steps recomputed")
        assert f"{kept[k]} of 17 values kept, {twice[k]} of 16 steps run twice" in explorer.svg


def test_measured_memory_falls_towards_sqrt_n_segments(explorer):
    peak = {k: r["peak_bytes"] for k, r in explorer.results.items()}
    array = 1_000 * 8
    # plain backprop keeps ~3 arrays per step of 16 (and bookkeeping): well over 40 arrays
    assert peak[1] > 40 * array
    assert peak[1] > 1.1 * peak[2] and peak[2] > 1.2 * peak[4]  # falls while k <= sqrt(n)
    assert min(peak.values()) < 0.6 * peak[1]
    assert min(peak, key=peak.get) in (4, 8)  # the least memory near sqrt(16) = 4


def test_measured_time_grows_with_recomputation(explorer):
    seconds = {k: r["seconds"] for k, r in explorer.results.items()}
    t1, t16 = seconds[1], seconds[16]
    for _ in range(3):  # measured again, interleaved: a busy moment hits both
        t1 = min(t1, explorer.measure(1)["seconds"])
        t16 = min(t16, explorer.measure(16)["seconds"])
    # 16 segments run 15 of 16 steps twice: clearly slower than plain backprop
    assert t16 > 1.3 * t1, (t1, t16)


def test_static_fallback_is_the_drawing_without_measurements(explorer):
    explorer.slider.value = 4
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"].startswith("CheckpointExplorer: Checkpointed chain of 16 steps")
    assert "run this cell to make the controls live" in bundle["text/plain"]
    assert "data:image/svg+xml;base64," in bundle["text/html"]
    assert "MB" not in bundle["text/html"] and "ms" not in bundle["text/plain"]
    # as every widget (tests/test_viz_fallback.py): live view, one line, an <img>, no <svg>
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].endswith(
        "(Static picture: run this cell to make the controls live.)"
    )
    assert "\n" not in bundle["text/plain"]
    assert "<img " in bundle["text/html"] and "<svg" not in bundle["text/html"]
