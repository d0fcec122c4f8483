"""Chapters 03, 04 and the start page: structure, links, the claims their outputs show, and
the engine chapter 03 builds, run outside the notebook against PyTorch.

nbval (run on every notebook by ``make test``) checks that re-running a chapter reproduces
its stored outputs; these tests check that the stored outputs *demonstrate* what the text
claims, so a chapter re-executed on a broken engine cannot be committed unnoticed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import cell_source as _source
from notebook_helpers import chapter_label
from notebook_helpers import markdown_text as _markdown
from notebook_helpers import notebook_cells as _cells

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CH03 = NOTEBOOKS / "03_1_value_and_backward.ipynb"  # part 1: the engine, built and checked
CH03_2 = NOTEBOOKS / "03_2_control_flow_and_pytorch.ipynb"  # part 2: control flow, PyTorch
CH03_PARTS = [CH03, CH03_2]
CH04_1 = NOTEBOOKS / "04_1_tensor_engine.ipynb"
CH04_2 = NOTEBOOKS / "04_2_tensor_training.ipynb"
START = NOTEBOOKS / "00_start_here.ipynb"


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text_outputs(*paths: Path) -> str:
    """Everything the code cells printed or returned as text (errors included)."""
    parts = []
    for cell in (c for path in paths for c in _nb(path)["cells"]):
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                parts.append("".join(out["text"]))
            elif out["output_type"] == "error":
                parts.append(f"ERROR {out['ename']}: {out['evalue']}")
            else:
                text = out.get("data", {}).get("text/plain", "")
                parts.append(text if isinstance(text, str) else "".join(text))
    return "\n".join(parts)


# --- structure --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, exercises",
    [
        (CH03, "../exercises/03_micrograd.ipynb"),
        (CH03_2, "../exercises/03_micrograd.ipynb"),
        (CH04_1, "../exercises/04_tensors.ipynb"),
        (CH04_2, "../exercises/04_tensors.ipynb"),
    ],
    ids=["03.1", "03.2", "04.1", "04.2"],
)
def test_chapter_has_goals_check_yourself_exercises_and_summary(path, exercises):
    cells = _nb(path)["cells"]
    assert "Learning goals" in _source(cells[0])
    text = _markdown(path)
    check = text[text.index("## Check yourself") :]
    assert check.count("<details>") >= 3, "each check-yourself question has a hidden answer"
    assert exercises in text
    assert "## Summary" in text
    assert "$$" in text, "the narrative derives things with display math"


@pytest.mark.parametrize(
    "name, chapter, start, end",
    [
        ("01_forward_mode", 1, "## Exercises", "Each exercise ends"),
        ("02_reverse_mode", 2, "## Exercises", "Each exercise ends"),
        ("03_1_value_and_backward", 3, "**Graded exercises**", "\n\n"),
    ],
    ids=["01", "02", "03"],
)
def test_chapter_lists_exactly_its_graded_exercises(name, chapter, start, end):
    """The chapter's list of graded exercises names every exercise of the chapter, no other."""
    from autodiff_lab.grading import registry

    text = _markdown(NOTEBOOKS / f"{name}.ipynb")
    listed = text[text.index(start) :].split(end)[0]
    mentioned = set(re.findall(rf"\b{chapter}\.\d+\b", listed))
    known = {e.id for e in registry.all_exercises() if e.id.split(".")[0] == str(chapter)}
    assert mentioned == known


def test_chapter_04_parts_list_their_graded_exercises_and_together_all():
    """Each part of chapter 04 lists the exercises it prepares for (on its first cell and in
    its closing list); each exercise in one part, every exercise of the chapter in one."""
    from autodiff_lab.grading import registry

    listed = []
    for path in (CH04_1, CH04_2):
        text = _markdown(path)
        closing = text[text.index("**Graded exercises**") :].split("each checked with")[0]
        ids = set(re.findall(r"\b4\.\d+\b", closing))
        first = " ".join(_source(_nb(path)["cells"][0]).split())
        prepares = re.search(r"prepares for graded exercises ([^[]*) in", first).group(1)
        assert set(re.findall(r"\b4\.\d+\b", prepares)) == ids, path.name
        listed.append(ids)
    known = {e.id for e in registry.all_exercises() if e.id.split(".")[0] == "4"}
    assert not listed[0] & listed[1] and listed[0] | listed[1] == known


@pytest.mark.parametrize("path", [START, *CH03_PARTS, CH04_1, CH04_2], ids=lambda p: p.stem)
def test_executed_without_errors(path):
    code = [c for c in _nb(path)["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "commit the notebook executed"
    assert "ERROR" not in _text_outputs(path)


@pytest.mark.parametrize("path", [START, *CH03_PARTS, CH04_1, CH04_2], ids=lambda p: p.stem)
def test_code_on_slides_fits_the_screen(path):
    """Presented code cells stay within 80 columns and 25 lines (setup cells are skipped)."""
    for index, cell in enumerate(_nb(path)["cells"]):
        kind = cell["metadata"].get("slideshow", {}).get("slide_type")
        if cell["cell_type"] != "code" or kind == "skip":
            continue
        lines = _source(cell).splitlines()
        assert len(lines) <= 25, f"{path.name} cell {index}: {len(lines)} lines"
        assert max(map(len, lines)) <= 80, f"{path.name} cell {index}: a line over 80 columns"


def test_start_page_links_every_chapter_and_exercise_notebook():
    links = re.findall(r"\]\(([^)#]+\.ipynb)\)", _markdown(START))
    chapters = {Path(link).stem for link in links if not link.startswith("..")}
    course = sorted(ROOT.glob("notebooks/0[0-9]_*.ipynb"))  # every chapter, 07 and 08 too
    for number in sorted({int(path.name[:2]) for path in course}):
        assert any(stem.startswith(f"{number:02d}_") for stem in chapters), number
    # where to go first comes near the top, before grading and presenting
    text = _markdown(START)
    first = text.index("**Where to go first:**")
    assert text[first:].split("\n")[0].count("](00_why_autodiff.ipynb)") == 1
    assert first < text.index("## Exercises and checking your answers")
    assert first < text.index("## Presenting a chapter")
    exercises = {Path(link).name for link in links if link.startswith("../exercises/")}
    assert exercises == {path.name for path in ROOT.glob("exercises/*.ipynb")}


@pytest.mark.parametrize("path", [START, *CH03_PARTS, CH04_1, CH04_2], ids=lambda p: p.stem)
def test_links_point_at_notebooks_that_exist(path):
    """Chapter links resolve; exercise links name a solutions/ notebook they are built from."""
    for link in set(re.findall(r"\]\(([^)#]+\.ipynb)\)", _markdown(path))):
        target = (path.parent / link).resolve()
        if target.parent.name == "exercises":
            source = ROOT / "solutions" / target.name
            assert target.exists() or source.exists(), f"{path.name} links {link}: no source"
        else:
            assert target.exists(), f"{path.name} links {link}, which does not exist"


# --- the claims the outputs show -----------------------------------------------------------


def test_chapter_03_outputs_demonstrate_the_claims():
    out = _text_outputs(*CH03_PARTS)
    # claim 2: the record each operation left: inputs, name, and a closure with its rule
    assert "L = *(d, f)   _backward uses ['other', 'out', 'self']" in out
    assert "e = *(a, b)   _backward uses ['other', 'out', 'self']" in out
    # claim 3: the reverse topological walk ends at the inputs with the hand-derived grads
    assert "matches the hand derivation: True" in out
    steps = re.findall(r"^step (\d+): (\w+)", out, flags=re.M)
    assert [s for s, _ in steps] == [str(i) for i in range(1, 8)] and steps[0][1] == "L"
    # the closures, run one at a time, leave the hand-derived gradients (a: 6, b: -4)
    assert "step 5: e  (grad -2)  a.grad = 6, b.grad = -4" in out
    # step 5: a second backward on the same graph passes stale inner gradients on
    # (by hand: L.grad = 1 again, d.grad = -2 + -2 = -4, e.grad = -2 + -4 = -6, so
    # a.grad = 6 + (-6)(-3) = 24 instead of 6); zero_grad() fixes it
    assert "a.grad after a second L.backward(): 24.0" in out
    assert "after L.zero_grad(); L.backward():  a.grad = 6.0" in out
    # fan-out: assigning loses a share, adding gives the right answer
    assert "overwriting (bug) : d(a+a)/da = 1 (want 2)" in out
    assert "adding            : d(a+a)/da = 2 (want 2)" in out
    # claim 6: the forgotten zero_grad that never converges
    assert "with zero_grad:    w after 60 steps = 3.0000" in out
    low, high = map(float, re.search(r"last 20: \[(\S+), (\S+)\]", out).groups())
    assert low < 1.0 and high > 5.0, "without zero_grad w keeps swinging around 3"
    # claim 7: four inputs, four paths, backward == finite differences on each
    rows = re.findall(r"^(\d\.\d)\s+.*?\s(-?\d+\.\d{6})\s+(-?\d+\.\d{6})\s+(\d+)$", out, re.M)
    assert len(rows) == 4 and len({n for *_, n in rows}) == 4
    assert all(math.isclose(float(a), float(b), abs_tol=1e-5) for _, a, b, _ in rows)
    # claim 8: ours == autodiff_lab.Value == PyTorch, on the neuron (by hand: -1.5, 0.5, 1, 0,
    # 0.5 for x1, x2, w1, w2, b), in part 1, which part 2's bridge quotes
    assert "ours and autodiff_lab identical: True" in _text_outputs(CH03)
    rows = re.findall(r"^do/d(\w+) ?:\s+(\S+)\s+(\S+)\s+(\S+)$", _text_outputs(CH03), re.M)
    by_hand = {"x1": -1.5, "x2": 0.5, "w1": 1.0, "w2": 0.0, "b": 0.5}
    assert {name: [float(g) for g in grads] for name, *grads in rows} == {
        name: [g, g, g] for name, g in by_hand.items()
    }
    assert "all three agree to 1e-12: True" in _text_outputs(CH03)
    assert '"all three agree to 1e-12: True"' in _markdown(CH03_2)


def test_chapter_03_bridge_and_map_show_what_the_text_says():
    """PyTorch's graph of the neuron, a custom Function, and the closures' reference cycles."""
    out = _text_outputs(*CH03_PARTS)
    tree = out[out.index("TanhBackward0") :].splitlines()[:10]
    assert [line.strip() for line in tree].count("MulBackward0") == 2
    leaves = sorted(line.strip() for line in tree if "AccumulateGrad" in line)
    assert leaves == sorted(f"AccumulateGrad ({n}.grad)" for n in ("x1", "x2", "w1", "w2", "b"))
    assert "leaf x1.grad: -1.5,  inner n.grad: 0.5" in out  # do/dn = 1 - o^2 = 0.5
    assert "y.grad_fn: TanhBackward" in out
    assert "same gradient as Value's tanh, to 1e-12: True" in out
    assert "our graph freed by reference counting: False" in out
    assert "freed after gc.collect(): True" in out
    text = _markdown(CH03)  # part 1's map from the reader's engine to the package
    for name in (
        "primitives.py",
        "Primitive.pullback",
        "graph.py",
        "topological_order",
        "backpropagate",
        "Value.zero_grad",
        "reference cycle",
    ):
        assert name in text, name


def test_chapter_04_outputs_demonstrate_the_claims():
    out = _text_outputs(CH04_1) + "\n" + _text_outputs(CH04_2)
    assert "equal to W summed over axis 0 / axis 1: True True" in out
    assert "A.grad == W @ B^T: True" in out and "B.grad == A^T @ W: True" in out
    assert "max |autodiff - finite differences| below 1e-8: True True" in out
    assert "naive softmax: [nan nan nan]" in out
    assert "overflow encountered in exp" in out
    assert "Z.grad == (softmax - onehot) / N: True" in out
    # the student's engine: broadcasting fails before unbroadcast, then every check passes
    assert "b.grad has shape (3,), `+=` hands it (4, 3)" in out
    assert out.count("matches finite differences: True") == 4
    assert out.count("matches fin. diff.: True") == 3
    # the same program on the package and on PyTorch (tests/test_chapters_04_engine.py
    # recomputes the training run, checks the labelled PyTorch result and the map)
    verdict = "gradients equal: True; 500 losses within 1e-9: True"
    assert f"autodiff_lab vs ours: {verdict}" in out and f"PyTorch vs ours: {verdict}" in out
    assert not re.search(r":\s*False\b", out), "a verdict printed False"


# --- chapter 03's engine, taken out of the notebook ------------------------------------------

ENGINE_CELLS = (
    "class Value:",
    "def as_value(x):",
    "def mul(self, other):",
    "def unary(self, value, op, local):",
    "def tanh(self):",
    "Value.__neg__",
    "from autodiff_lab import topological_order",  # chapter 02's, reused: then backward()
    "def zero_grad(self):",
    "def sigmoid(self):",
)


@pytest.fixture(scope="module")
def chapter_engine() -> dict:
    """The namespace left by running chapter 03's engine cells (and nothing else)."""
    namespace = {"math": math}
    cells = [c for c in _nb(CH03)["cells"] if c["cell_type"] == "code"]
    for start in ENGINE_CELLS:  # (each is in part 1, the part that builds the engine)
        (cell,) = [c for c in cells if _source(c).lstrip().startswith(start)]
        exec(compile(_source(cell), f"{CH03.name}:{start}", "exec"), namespace)  # noqa: S102
    return namespace


def _expression(x, y, z, tanh, exp, sigmoid):
    """Every op of the chapter, x used several times (fan-out)."""
    return tanh(x * y + z) * exp(y - 1) / (z**2 + 1) - sigmoid(x) * x + x


def test_chapter_engine_matches_pytorch_on_random_expressions(chapter_engine):
    torch = pytest.importorskip("torch")
    value_cls = chapter_engine["Value"]
    rng = np.random.default_rng(7)
    for _ in range(25):
        start = rng.uniform(-1.5, 1.5, size=3)
        ours = [value_cls(v) for v in start]
        _expression(*ours, lambda v: v.tanh(), lambda v: v.exp(), lambda v: v.sigmoid()).backward()
        ref = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in start]
        _expression(*ref, torch.tanh, torch.exp, torch.sigmoid).backward()
        for mine, theirs in zip(ours, ref):
            assert math.isclose(mine.grad, theirs.grad.item(), rel_tol=1e-10, abs_tol=1e-12)


def test_chapter_engine_backward_is_iterative_and_needs_zero_grad(chapter_engine):
    """backward() survives a deep chain; on the same graph it needs zero_grad() first, and
    across fresh forward passes the input's gradient accumulates (micrograd's semantics)."""
    value_cls = chapter_engine["Value"]
    x = value_cls(0.3)
    y = x
    for _ in range(5000):  # far deeper than Python's recursion limit
        y = y * 1.0001
    y.backward()
    assert math.isclose(x.grad, 1.0001**5000, rel_tol=1e-9)
    y.zero_grad()
    assert x.grad == 0.0 and y.grad == 0.0
    y.backward()  # after zero_grad, the same gradient again
    assert math.isclose(x.grad, 1.0001**5000, rel_tol=1e-9)
    z = x * 2.0 + x  # a fresh graph: x's gradient (3) adds to what x has
    z.backward()
    assert math.isclose(x.grad, 1.0001**5000 + 3.0, rel_tol=1e-9)


def test_chapter_engine_records_a_closure_per_node(chapter_engine):
    """Each op stores a `_backward` closure (no precomputed numbers); an input's does nothing."""
    value_cls = chapter_engine["Value"]
    a, b = value_cls(2.0), value_cls(-3.0)
    c = a * b
    assert callable(c._backward) and c._backward.__closure__ is not None
    assert not hasattr(c, "_local_grads")
    assert a._backward() is None and a.grad == 0.0 and b.grad == 0.0
    c.grad = 1.0
    c._backward()  # the rule alone: dc/da = b, dc/db = a
    assert (a.grad, b.grad) == (-3.0, 2.0)


def test_chapter_assigning_rule_loses_fan_out_shares(chapter_engine):
    """The trap-1 cell's buggy rule, run outside the notebook: `=` drops a share."""
    namespace = dict(chapter_engine)
    cells = [c for c in _nb(CH03)["cells"] if c["cell_type"] == "code"]
    (cell,) = [c for c in cells if _source(c).startswith("def add_assigning(")]
    exec(compile(_source(cell), "add_assigning", "exec"), namespace)  # noqa: S102
    value_cls = namespace["Value"]
    a = value_cls(3.0)
    namespace["add_assigning"](a, a).backward()
    assert a.grad == 1.0  # the correct d(a + a)/da is 2


# --- issue 25: chapter 03's sentences, each with its evidence ---------------------------------


def _engine_lines() -> int:
    """Non-blank lines of the cells that make up chapter 03's engine (sigmoid is the reader's
    own added operation, not part of it)."""
    cells = [c for c in _cells(CH03) if c["cell_type"] == "code"]
    total = 0
    for start in ENGINE_CELLS:
        if start == "def sigmoid(self):":
            continue
        cell = next(c for c in cells if _source(c).startswith(start))
        total += sum(1 for line in _source(cell).splitlines() if line.strip())
    return total


def test_chapter_03_engine_is_about_seventy_lines():
    """Part 1 reuses chapter 02's topological order (autodiff_lab's), so it is not counted."""
    assert 63 <= _engine_lines() <= 77, _engine_lines()
    text = _markdown(CH03)
    assert "about seventy lines (docstrings included)" in text
    assert "ninety lines" not in text
    assert "fifty lines" not in text


def test_chapter_03_one_design_of_rules_not_two_contradicting_ones():
    text = _markdown(CH03)
    assert "The closure wins for three reasons" not in text
    assert "A *rule run at backward time* wins" in text and "no\nclosures" in text


def test_chapter_03_a_second_backward_fails_only_where_a_node_saved_a_tensor():
    """Stored table vs real PyTorch: x*x saved x (RuntimeError), x + 1 saved nothing (1 -> 2)."""
    torch = pytest.importorskip("torch")
    out = _text_outputs(CH03_2)
    assert re.search(r"backward twice on the same graph\s+8 -> 16\s+8 -> RuntimeError", out)
    assert re.search(r"backward twice on y = x \+ 1 \(saves nothing\)\s+1 -> 2\s+1 -> 2", out)
    x = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    y = x + 1
    y.backward()
    y.backward()
    assert x.grad.item() == 2.0
    y = x * x
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_chapter_03_in_place_mutation_torch_errors_ours_is_silently_wrong():
    torch = pytest.importorskip("torch")
    out = _text_outputs(CH03_2)
    assert "y._version after exp: 0" in out and "y._version after y.add_(1): 1" in out
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    y = x.exp()
    y.add_(1.0)
    with pytest.raises(RuntimeError) as err:
        y.sum().backward()
    stored = re.search(r"RuntimeError: (one of the variables.*)", out).group(1)
    assert stored == str(err.value).split(" Hint:")[0]  # the real message, as stored
    assert "modified by an inplace operation" in stored and "expected version 0" in stored
    # ours: the rule reads y.data = e^0.5 + 1 when it runs (closed form), not e^0.5
    assert f"x.grad = {math.exp(0.5) + 1:.6f}\ntrue d exp(x)/dx = {math.exp(0.5):.6f}" in out
    assert "t.grad = [10.  2.]" in out  # 2 * [5, 1] after the write through the alias


def test_chapter_03_pytorch_counts_dependencies_as_the_text_says():
    """The text names torch/csrc/autograd/graph_task.h's dependencies_ map and a ready queue."""
    torch = pytest.importorskip("torch")
    include = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "autograd"
    if not (include / "graph_task.h").exists():
        pytest.skip("this torch wheel ships no C++ headers")
    graph_task = (include / "graph_task.h").read_text(encoding="utf-8")
    assert "std::unordered_map<Node*, int> dependencies_;" in graph_task
    assert "struct ReadyQueue" in (include / "engine.h").read_text(encoding="utf-8")
    text = _markdown(CH03_2)
    assert "`dependencies_` map in `torch/csrc/autograd/graph_task.h`" in text
    assert "core of PyTorch's autograd" not in text


def test_start_page_stored_progress_table_is_the_current_registrys(tmp_path, monkeypatch):
    """The stored table (not compared by nbval: it depends on the learner's records) is what a
    new learner sees today: re-execute the start page when an exercise's title or points
    change."""
    monkeypatch.setenv("AUTODIFF_LAB_DATA_DIR", str(tmp_path))
    import autodiff_lab
    from autodiff_lab.grading import registry

    # The grading tests register their own chapter 97 (tests/grading_testkit_exercises.py) in
    # whichever worker runs them: a new learner has the course's exercises only.
    autodiff_lab.progress()  # (loads the course's exercises)
    course = {k: v for k, v in registry._exercises.items() if not k.startswith("97.")}
    monkeypatch.setattr(registry, "_exercises", course)
    cell = next(c for c in _cells(START) if "autodiff_lab.progress()" in _source(c))
    stored = "".join("".join(o["data"]["text/plain"]) for o in cell["outputs"] if "data" in o)
    assert stored == repr(autodiff_lab.progress())


def test_start_page_claim_map_points_where_the_claims_are():
    text = _markdown(START)
    assert "5. `jvp` and `vjp` are the two primitives (ch. 01, 02, 08)" in text
    assert "Every claim the course makes has a cell" not in text
    assert "core of PyTorch's autograd" not in text
    assert "Claim 5" in _markdown(NOTEBOOKS / "02_reverse_mode.ipynb")
    assert "transpos" in _markdown(NOTEBOOKS / "08_transformations.ipynb")


def test_start_page_each_claim_is_marked_in_a_notebook_it_names():
    """ "Each of the eight claims below has a cell whose output shows it — look for **Claim N**
    in the text next to it": every notebook a claim names exists, and at least one of them
    marks the claim ("Claim N" / "claim N") in its text."""
    text = _markdown(START)
    assert "look for **Claim N** in" in " ".join(text.split())
    claims = re.findall(
        r"^(\d)\. (?:(?!^\d\. ).)*?\(ch\. ([\d., ]+)\)",
        text.split("## The eight claims")[1],
        re.M | re.S,
    )
    assert [int(n) for n, _ in claims] == list(range(1, 9))
    labels = {chapter_label(p): p for p in NOTEBOOKS.glob("0[0-9]_*.ipynb") if p != START}
    for number, named in claims:
        paths = [labels[label.strip()] for label in named.split(",")]
        marked = [p for p in paths if re.search(rf"\bclaims? {number}\b", _markdown(p), re.I)]
        assert marked, f"claim {number}: none of {named} marks it"


def test_chapter_04_square_shapes_do_not_pick_the_product():
    """Text: for square shapes G B, B^T G fit A's shape too; only G B^T is A's gradient."""
    out = _text_outputs(CH04_1)
    assert "square: W @ B^T  shape fits True, equals A.grad True" in out
    assert "square: W @ B    shape fits True, equals A.grad False" in out
    assert "square: B^T @ W  shape fits True, equals A.grad False" in out
    rng = np.random.default_rng(4)  # the cell's draws, recomputed: is the verdict the rule's?
    A0, B0, W = (rng.normal(size=(3, 3)) for _ in range(3))
    assert not np.allclose(W @ B0, W @ B0.T) and not np.allclose(B0.T @ W, W @ B0.T)
    assert "the only product of $G$ and $B$ with\nthat shape" not in _markdown(CH04_1)


def test_chapter_04_gather_backward_is_a_scatter_add():
    """L = 1 x0 + 2 x0 + 3 x2: dL/dx = [3, 0, 3] by hand, by PyTorch and by differences."""
    out = _text_outputs(CH04_2)
    assert "scatter-add: [3. 0. 3.]   naive grad[idx] += g: [2. 0. 3.]" in out
    torch = pytest.importorskip("torch")
    x = torch.tensor([10.0, 20.0, 30.0], dtype=torch.float64, requires_grad=True)
    (x[[0, 0, 2]] * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 3.0]

    def loss(v):
        return float((v[[0, 0, 2]] * np.array([1.0, 2.0, 3.0])).sum())

    h, base = 1e-6, np.array([10.0, 20.0, 30.0])
    central = [(loss(base + h * e) - loss(base - h * e)) / (2 * h) for e in np.eye(3)]
    assert central == pytest.approx([3.0, 0.0, 3.0], abs=1e-6)
