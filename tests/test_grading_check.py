"""The exercise spec, plain-data transport, and the in-notebook ``check`` scorecard."""

from __future__ import annotations

import math

import nbformat
import numpy as np
import pytest
from grading_testkit import EXERCISES_MODULE, load_test_exercises, run_cli, write_notebook

from autodiff_lab.grading import check, checking, close, registry
from autodiff_lab.grading.plaindata import PlainDataError, dumps, loads, to_plain


@pytest.fixture(autouse=True)
def fresh_attempts(monkeypatch):
    """Each test starts as a fresh kernel would: no earlier attempts, not grading."""
    load_test_exercises()
    monkeypatch.delenv("AUTODIFF_LAB_GRADING", raising=False)
    checking._attempts.clear()
    yield
    checking._attempts.clear()


# --- spec and transport --------------------------------------------------------------------


def test_close_is_structure_aware():
    assert close([1.0, (2.0, np.ones(2))], (1, [2.0 + 1e-9, np.ones(2)]))
    assert close({"w": np.arange(3.0)}, {"w": np.arange(3.0) * (1 + 1e-8)})
    assert close(float("nan"), float("nan"))
    assert not close(1.0, 1.001)  # outside rtol=1e-6
    assert not close(np.ones(3), np.ones((3, 1)))  # shapes must match
    assert not close([1.0, 2.0], [1.0, 2.0, 3.0])
    assert not close({"a": 1.0}, {"b": 1.0})
    assert not close(True, 1)  # a bool is not a number here
    assert not close("1.0", 1.0)
    assert not close(None, 0.0)
    assert not close(float("inf"), 1e308)


def test_close_is_the_one_rule_for_lists_arrays_and_nan():
    """One helper for grader, detectors and check(): a list of numbers compares as an array
    (an ndarray answer to a list reference passes), NaN matches only NaN, everywhere."""
    nan = float("nan")
    assert close(np.array([1.0, 2.0]), [1.0, 2.0 + 1e-9])
    assert close([nan, 1.0], [nan, 1.0]) and close({"x": [nan]}, {"x": [nan]})
    assert not close([nan, 1.0], [0.0, 1.0]) and not close([0.0], [nan])
    assert not close([1.0, 2.0], [1.0, 2.0, 3.0]) and not close([True], [1.0])


def test_plain_data_round_trip_keeps_types():
    value = (1, [2.5, float("nan")], {"a": np.arange(6).reshape(2, 3), 3: (True, None)}, "s")
    back = loads(dumps(value))
    assert isinstance(back, tuple) and isinstance(back[1], list)
    assert back[0] == 1 and back[1][0] == 2.5 and math.isnan(back[1][1])
    assert back[2]["a"].dtype == np.int64 and back[2]["a"].shape == (2, 3)
    np.testing.assert_array_equal(back[2]["a"], np.arange(6).reshape(2, 3))
    assert back[2][3] == (True, None) and back[3] == "s"
    empty = loads(dumps(np.zeros((0, 2))))
    assert empty.shape == (0, 2)


def test_plain_data_refuses_objects():
    class Sneaky:
        pass

    for bad in (Sneaky(), np.array([Sneaky()], dtype=object), {1, 2}, lambda: 0):
        with pytest.raises(PlainDataError, match="cannot send"):
            to_plain(bad)
    with pytest.raises(PlainDataError, match="unknown tagged"):
        loads('{"__pickle__": "gASV"}')


# --- the scorecard -----------------------------------------------------------------------------


def right_dsin(x):
    return math.cos(x)


def test_passing_answer_scores_full_marks(capsys):
    result = check("97.1", right_dsin)
    out = capsys.readouterr().out
    assert (result.status, result.score, result.max_score) == ("passed", 6.0, 6.0)
    title = "Exercise 97.1: The derivative of sin (easy · about 5 minutes)"
    assert f"{title} — PASSED (6/6 points)" in out
    assert out.count("✓") == 5 and "Hint" not in out


def test_known_mistake_gets_its_own_hint_first(capsys):
    result = check("97.1", lambda x: -math.cos(x))
    out = capsys.readouterr().out
    assert result.status == "failed"
    assert result.score == 0.0
    assert result.hints == ["Check the sign: d/dx sin x = +cos x."]
    assert "NUDGE" not in out and "Check the sign" in out


def test_hints_are_tiered_over_repeated_attempts(capsys):
    wrong = math.sin  # no known mistake explains this one
    first = check("97.1", wrong)
    second = check("97.1", wrong)
    third = check("97.1", wrong)
    fourth = check("97.1", wrong)
    assert first.hints == ["NUDGE-1: picture the slope of sin."]
    assert [h[:7] for h in second.hints] == ["NUDGE-1", "NUDGE-2"]
    assert [h[:7] for h in third.hints] == ["NUDGE-1", "NUDGE-2", "NUDGE-3"]
    assert fourth.hints == third.hints  # no more tiers than there are nudges
    assert first.status == "failed" and "got 0.0, expected 1.0" in capsys.readouterr().out


def test_partial_answer_gets_partial_points():
    def dsin(x):
        return math.cos(x) if x != 0 else 0.0

    result = check("97.1", dsin, show=False)
    assert (result.status, result.score, result.max_score) == ("failed", 4.0, 6.0)
    edge = [c for c in result.cases if c.name == "edge: x = 0"][0]
    assert not edge.passed and edge.message == "got 0.0, expected 1.0"


def test_stub_is_not_attempted_not_a_crash(capsys):
    def dsin(x):
        raise NotImplementedError("Exercise 97.1: dsin(x): return d/dx sin(x) at x")

    result = check("97.1", dsin)
    out = capsys.readouterr().out
    assert (result.status, result.score) == ("not attempted", 0.0)
    assert "NOT ATTEMPTED (0/6 points)" in out
    assert "Replace the `raise NotImplementedError(...)` line in `dsin`" in out
    assert "Traceback" not in out


def test_errors_show_one_short_line_not_a_traceback(capsys):
    def dsin(x):
        return 1 / 0

    result = check("97.1", dsin)
    out = capsys.readouterr().out
    assert result.status == "failed" and result.score == 0
    assert all(c.message.startswith("ZeroDivisionError: division by zero") for c in result.cases)
    assert "Traceback" not in out and 'File "' not in out


def test_sys_exit_inside_an_answer_is_caught():
    result = check("97.1", lambda x: exit(3), show=False)
    assert result.status == "failed"
    assert result.cases[0].message.startswith("SystemExit")


def test_non_plain_results_are_reported():
    result = check("97.3", lambda v, a: object(), show=False)
    assert result.status == "failed"
    assert result.cases[0].message.startswith("TypeError: float() argument must be")


def test_arrays_and_results_repr():
    result = check("97.3", lambda v, a: a * np.asarray(v), show=False)
    assert result.status == "passed" and result.max_score == 4.0
    assert repr(result) == "<CheckResult exercise 97.3: passed, 4/4 points>"


def test_unknown_exercise_is_a_clear_message(capsys):
    result = check("97.99", right_dsin)
    assert result.status == "error"
    assert "no exercise '97.99'" in capsys.readouterr().out


def test_html_scorecard_escapes_text():
    result = check("97.1", lambda x: "<b>", show=False)
    html = result.to_html()
    assert 'class="autodiff-lab-scorecard"' in html
    assert "could not convert string to float: &#x27;&lt;b&gt;&#x27;" in html
    assert "'<b>'" not in html


def test_check_does_nothing_while_the_grader_runs_the_notebook(monkeypatch, capsys):
    monkeypatch.setenv("AUTODIFF_LAB_GRADING", "1")
    result = check("97.1", right_dsin)
    assert result.status == "skipped" and capsys.readouterr().out == ""


def test_registry_finds_and_orders_exercises():
    ids = [e.id for e in registry.all_exercises()]
    assert ["97.1", "97.2", "97.3"] == [i for i in ids if i.startswith("97.")]
    assert registry.get("97.2").answer == "square"
    with pytest.raises(ValueError, match="defined twice"):
        registry.register(
            registry.get("97.2").__class__(**{**vars(registry.get("97.1")), "title": "x"})
        )


def test_scorecard_in_a_real_kernel_is_html_and_shown_once(tmp_path):
    from nbclient import NotebookClient

    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            f"from autodiff_lab.grading import check, registry\n"
            f"registry.load_module({EXERCISES_MODULE!r})\nimport math",
            "def dsin(x):\n    return -math.cos(x)\ncheck('97.1', dsin)",
            "r = check('97.1', math.sin)",
            "r",
            "r.score, r.max_score, r.status",
        ],
    )
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    outputs = [cell.outputs for cell in nb.cells]
    for cell_outputs in outputs[1:4]:  # each scorecard shows exactly once
        assert len(cell_outputs) == 1 and cell_outputs[0].output_type == "display_data"
        assert 'class="autodiff-lab-scorecard"' in cell_outputs[0].data["text/html"]
    assert "Check the sign" in outputs[1][0].data["text/html"]
    assert "NUDGE-1" in outputs[2][0].data["text/html"]  # first attempt at a non-mistake
    assert outputs[4][0].data["text/plain"] == "(0.0, 6.0, 'failed')"


# --- naming the parts of a structured answer --------------------------------------------


def test_mismatch_names_each_part_of_a_structured_answer():
    from autodiff_lab.grading.scoring import mismatch_text

    parts = ("value", "gradient")
    assert mismatch_text([0.143159, 0.143159], [0.143159, 0.258073], parts) == (
        "value: got 0.143159, expected 0.143159 · gradient: got 0.143159, expected 0.258073"
    )
    assert mismatch_text((1.5, [2.0, 3.0]), [1.5, [2.0, 4.0]], ("value", "grads")) == (
        "value: got 1.5, expected 1.5 · grads: got [2.0, 3.0], expected [2.0, 4.0]"
    )
    # an answer of another shape is shown whole, with the parts it should have had
    assert mismatch_text(0.5, [1.0, 2.0], parts) == (
        "got 0.5, expected (value, gradient) = [1.0, 2.0]"
    )
    assert mismatch_text([1.0, 2.0], [1.0, 3.0]) == "got [1.0, 2.0], expected [1.0, 3.0]"


def test_bad_parts_are_named():
    from autodiff_lab.grading.spec import Exercise

    common = dict(
        id="99.1", title="t", task="t", answer="f", cases=lambda rng: [],
        run=lambda a, i: None, reference=lambda i: None, level="easy", minutes=1,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"Exercise 99\.1: parts must be a tuple"):
        Exercise(**common, parts=["value", "gradient"])
    with pytest.raises(ValueError, match="one part .'value'. is not a tuple"):
        Exercise(**common, parts=("value",))


def test_scorecard_says_which_number_is_the_value_and_which_the_gradient():
    """3.3 with a backward that forgets the factor (1 - s): the row names both parts."""

    def sigmoid_op(x):
        s = 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
        return s, lambda g: g * s

    result = check("3.3", sigmoid_op, show=False, record=False)
    exercise = registry.get("3.3")
    cases = exercise.cases(np.random.default_rng(checking.case_seed("3.3")))
    x, g = cases[0].inputs
    s = 1 / (1 + math.exp(-x))  # closed form
    assert result.cases[0].message == (
        f"value: got {s:.6g}, expected {s:.6g} · gradient: got {g * s:.6g}, "
        f"expected {g * s * (1 - s):.6g}"
    )
    assert result.cases[0].message in result.to_text()
    assert "<br>gradient: got" in result.to_html()  # in HTML each part on its own line


def test_every_named_answer_has_as_many_items_as_parts():
    """The part names fit the reference's answers (first case of every exercise)."""
    named = [e for e in registry.all_exercises() if e.parts]
    assert len(named) >= 17  # 1.1-1.4, 1.6, 2.1-2.3, 3.1-3.3, 3.5, 4.2, 5.2-5.5
    for exercise in named:
        case = exercise.cases(np.random.default_rng(0))[0]
        answer = exercise.reference(case.inputs)
        assert len(answer) == len(exercise.parts), exercise.id


def _luminance(hex_colour: str) -> float:
    """WCAG 2.1 relative luminance of #rrggbb."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_scorecard_text_meets_wcag_aa_contrast_in_any_theme():
    """The card paints its own white background and dark ink (so a dark theme cannot put
    light text on it), and every text colour has 4.5:1 on it and on the hint's yellow."""
    import re

    assert round(_contrast("#777777", "#ffffff"), 2) == 4.48  # the formula, as WCAG's tables
    failed = check("97.1", math.sin, show=False)  # failed, with a hint
    html = failed.to_html()
    assert re.match(r'<div class="autodiff-lab-scorecard" style="background:#ffffff;color:#', html)
    backgrounds = set(re.findall(r"background:(#[0-9a-fA-F]{6})", html))
    colours = set(re.findall(r"(?<![-\w])color:(#[0-9a-fA-F]{6})", html))
    assert len(backgrounds) == 2 and len(colours) >= 3
    for colour in colours:
        for background in backgrounds:
            assert _contrast(colour, background) >= 4.5, (colour, background)
    assert 'title="failed">✗</td>' in html and "<th" in html  # ✗ said in words, headed columns


WRONG_SIGMOID = """import math

def sigmoid_op(x):
    s = 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
    return s, lambda g: g * s  # forgets the factor (1 - s)
"""


def test_cli_grader_names_the_parts_as_the_scorecard_does(tmp_path):
    """One formatter: the grader's feedback shows the first failing case exactly as check()."""
    import csv

    seed = 7
    write_notebook(tmp_path / "subs" / "ann" / "03_micrograd.ipynb", [WRONG_SIGMOID])
    namespace: dict = {}
    exec(WRONG_SIGMOID, namespace)
    card = check("3.3", namespace["sigmoid_op"], seed=seed, show=False, record=False)
    first = next(c for c in card.cases if not c.passed)
    assert first.message.startswith("value: got ") and " · gradient: got " in first.message
    out = tmp_path / "grades.csv"
    argv = ["grade", str(tmp_path / "subs"), "--db", str(tmp_path / "book.sqlite"),
            "--out", str(out), "--seed", str(seed), "--quiet"]  # fmt: skip
    assert run_cli(argv) == 0
    with open(out, newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["exercise"] == "3.3")
    assert f"First failing case: {first.name}: {first.message}." in row["feedback"]
