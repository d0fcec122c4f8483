"""Chapter 04's own tensor engine, taken out of the stored notebooks and checked from outside.

The chapter (two parts: 04.1 and 04.2) has the student type a small tensor engine
(``Tensor`` with ``_backward`` closures, ``unbroadcast``, ``+``, ``*``, ``@``,
``sum(axis, keepdims)``, ``relu``, indexing, a fused ``cross_entropy``, ``backward``; the
topological order is chapter 03's, reused from the package). These tests run exactly those
cells (as committed) and
check the engine's gradients against closed forms, central differences and PyTorch on
random shapes, broadcasting included; then they check what the chapter prints and says:
the training run (recomputed here with hand-written numpy backpropagation, an oracle that
shares no code with the engine), the map to ``autodiff_lab/`` (every name it gives exists
in the file it names) and that the printed numbers do not hang on round-off.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from notebook_helpers import cell_source, markdown_text, nbval_sanitized, notebook_cells, printed

import autodiff_lab
from autodiff_lab import optional

ROOT = Path(__file__).resolve().parent.parent
CH04_1 = ROOT / "notebooks" / "04_1_tensor_engine.ipynb"
CH04_2 = ROOT / "notebooks" / "04_2_tensor_training.ipynb"
PARTS = (CH04_1, CH04_2)
#: 04.2's setup cell runs 04.1's cells that carry this tag (04.2 runs on its own)
REBUILT = "rebuilt-in-04.2"

# The cells that make the finished engine, in notebook order (each found by its first line;
# where a function is written twice, the version that contains the marker).
ENGINE = (
    ("class Tensor:", None),
    ("Tensor.shape = property(", None),
    ("def backward(self):", None),
    ("def unbroadcast(grad, shape):", None),
    ("def add(self, other):", "unbroadcast("),
    ("def mul(self, other):", "unbroadcast("),
    ("def matmul(self, other):", None),
    ("Tensor.__matmul__ = matmul", None),
    ("def tensor_sum(self, axis=None, keepdims=False):", None),
    ("def relu(self):", None),
    ("def cross_entropy(logits, targets):", None),
    ("def getitem(self, idx):", None),
    ("Tensor.__getitem__ = getitem", None),
)


def _code_cells() -> list[dict]:
    return [c for path in PARTS for c in notebook_cells(path) if c["cell_type"] == "code"]


def _markdown() -> str:
    """The Markdown of both parts, 04.1 then 04.2."""
    return "\n".join(markdown_text(path) for path in PARTS)


def _cell(first_line: str, marker: str | None = None) -> dict:
    found = [
        c
        for c in _code_cells()
        if cell_source(c).lstrip().startswith(first_line)
        and (marker is None or marker in cell_source(c))
    ]
    assert len(found) == 1, f"chapter 04: {len(found)} cells start with {first_line!r}"
    return found[0]


def _run(namespace: dict, cell: dict, name: str) -> None:
    exec(compile(cell_source(cell), f"chapter 04:{name}", "exec"), namespace)  # noqa: S102


def _fresh_engine() -> dict:
    """The namespace left by running the finished engine's cells (and nothing else)."""
    namespace: dict = {"np": np, "al": autodiff_lab}
    for first_line, marker in ENGINE:
        _run(namespace, _cell(first_line, marker), first_line)
    return namespace


@pytest.fixture(scope="module")
def engine() -> dict:
    return _fresh_engine()


def _numeric_gradient(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a scalar f, entry by entry (written here, not the chapter's)."""
    grad = np.empty_like(x)
    for idx in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        grad[idx] = (f(up) - f(down)) / (2 * h)
    return grad


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _relu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0.0)


def _ce(z: np.ndarray, y: np.ndarray) -> float:
    return float(-np.log(_softmax(z)[np.arange(len(y)), y]).mean())


def _smaller(big: tuple[int, ...], rng) -> tuple[int, ...]:
    """A random shape that broadcasts to ``big``: leading axes dropped, some set to 1."""
    small = list(big[int(rng.integers(0, len(big) + 1)) :])  # drop leading axes
    for i in range(len(small)):
        if rng.random() < 0.4:
            small[i] = 1  # stretched
    return tuple(small)


def _broadcast_pair(rng) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A random (big, small) shape pair where small broadcasts to big."""
    big = tuple(int(n) for n in rng.integers(2, 5, size=int(rng.integers(1, 4))))
    return big, _smaller(big, rng)


def _sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The test's own reverse of broadcasting: sum the added axes, then the stretched ones."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


# --- closed forms -------------------------------------------------------------------------


def test_broadcast_add_and_mul_gradients_are_summed_back_to_each_shape(engine, rng):
    """L = sum(W * (X + b) * c): dL/db = sum_to(W * c), dL/dc = sum_to(W * (X + b))."""
    Tensor = engine["Tensor"]
    for _ in range(30):
        big, small = _broadcast_pair(rng)
        other = _smaller(big, rng)
        x0, b0, c0, w = (rng.normal(size=s) for s in (big, small, other, big))
        x, b, c = Tensor(x0), Tensor(b0), Tensor(c0)
        ((x + b) * c * w).sum().backward()
        assert b.grad.shape == small and c.grad.shape == other
        want_b = _sum_to(w * c0 * np.ones(big), small).reshape(small)
        want_c = _sum_to(w * (x0 + b0), other).reshape(other)
        np.testing.assert_allclose(b.grad, want_b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(c.grad, want_c, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(x.grad, w * c0 * np.ones(big), rtol=1e-12, atol=1e-12)


def test_matmul_gradients_are_g_bt_and_at_g(engine, rng):
    Tensor = engine["Tensor"]
    for n, k, m in rng.integers(1, 6, size=(20, 3)):
        a0, b0, g = rng.normal(size=(n, k)), rng.normal(size=(k, m)), rng.normal(size=(n, m))
        a, b = Tensor(a0), Tensor(b0)
        ((a @ b) * g).sum().backward()
        np.testing.assert_allclose(a.grad, g @ b0.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.grad, a0.T @ g, rtol=1e-12, atol=1e-12)


def test_sum_with_axis_and_keepdims_copies_the_gradient_back(engine, rng):
    Tensor = engine["Tensor"]
    shape = (2, 3, 4)
    axes = [None, 0, 1, 2, -1, (0, 2), (1, -1), (0, 1, 2)]
    for axis, keepdims in itertools.product(axes, (False, True)):
        x0 = rng.normal(size=shape)
        g = rng.normal(size=x0.sum(axis=axis, keepdims=keepdims).shape)
        x = Tensor(x0)
        (x.sum(axis=axis, keepdims=keepdims) * g).sum().backward()
        reduced = tuple(range(3)) if axis is None else axis
        want = np.broadcast_to(np.expand_dims(g, reduced) if not keepdims else g, shape)
        np.testing.assert_allclose(x.grad, want, rtol=1e-12, err_msg=f"{axis}, {keepdims}")


def test_relu_and_cross_entropy_closed_forms(engine, rng):
    Tensor, cross_entropy = engine["Tensor"], engine["cross_entropy"]
    x0 = rng.normal(size=(5, 4))
    x = Tensor(x0)
    (x.relu() * x.relu()).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * np.maximum(x0, 0))
    for n, classes in ((1, 2), (7, 3), (16, 10)):
        z0 = rng.normal(size=(n, classes)) * 5
        z0[0] += 2000.0  # huge logits: log-sum-exp must stay finite
        y = rng.integers(0, classes, size=n)
        z = Tensor(z0)
        loss = cross_entropy(z, y)
        loss.backward()
        assert np.isclose(loss.data, _ce(z0, y), rtol=1e-12)
        want = (_softmax(z0) - np.eye(classes)[y]) / n
        np.testing.assert_allclose(z.grad, want, rtol=1e-10, atol=1e-15)


def test_fan_out_accumulates_and_a_second_backward_adds(engine, rng):
    """Step 3: "a second `backward()` adds to the gradients" (as in chapter 03)."""
    Tensor = engine["Tensor"]
    x0 = rng.normal(size=(3, 2))
    x = Tensor(x0)
    y = (x * x + x * 3.0).sum()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * x0 + 3, rtol=1e-12)
    y.backward()  # the inner nodes keep their grads too: x gets more than 2 (2 x + 3)
    assert np.all(np.abs(x.grad) > np.abs(2 * x0 + 3))
    assert "a second `backward()` adds to the gradients" in " ".join(_markdown().split())


def test_indexing_backward_scatter_adds_repeated_entries(engine, rng):
    """Indexing gathers; its backward adds every use of an entry (the check-yourself answer:
    x[[1, 1, 1]].sum() gives [0, 3, 0], where a buffered grad[idx] += g gives [0, 1, 0])."""
    Tensor = engine["Tensor"]
    x = Tensor(np.zeros(3))
    x[[1, 1, 1]].sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 3.0, 0.0])
    buffered = np.zeros(3)
    buffered[[1, 1, 1]] += np.ones(3)
    np.testing.assert_array_equal(buffered, [0.0, 1.0, 0.0])
    assert "`[0, 3, 0]`" in _markdown() and "`[0, 1, 0]`" in _markdown()
    for _ in range(20):
        x0 = rng.normal(size=(5, 4))
        idx = rng.integers(0, 5, size=7)  # repeats, in any order
        w = rng.normal(size=(7, 4))
        x = Tensor(x0)
        (x[idx] * w).sum().backward()
        want = np.zeros_like(x0)
        for row, i in enumerate(idx):
            want[i] += w[row]
        np.testing.assert_allclose(x.grad, want, rtol=1e-12)


# --- finite differences and PyTorch on random programs --------------------------------------


def _random_program_inputs(rng):
    n, k, m = (int(v) for v in rng.integers(2, 6, size=3))
    c_shape = [(m,), (1, m), (), (n, m)][int(rng.integers(4))]
    d_shape = [(n, 1), (1, 1), (n, m), (1,)][int(rng.integers(4))]
    arrays = {
        "A": rng.normal(size=(n, k)),
        "B": rng.normal(size=(k, m)),
        "c": rng.normal(size=c_shape),
        "d": rng.normal(size=d_shape),
    }
    return arrays, rng.integers(0, m, size=n)


def _program(A, B, c, d, y, relu, ce):
    """Every op of the engine, both kinds of broadcasting, fan-out of h and c."""
    h = relu(A @ B + c) * d
    rows = h.sum(axis=1, keepdims=True)
    return ce(h * rows + h, y) + (h.sum(axis=0) * c).sum()


def _away_from_kinks(arrays) -> bool:
    pre = arrays["A"] @ arrays["B"] + arrays["c"]
    return np.abs(pre).min() > 1e-3


def test_random_programs_match_finite_differences(engine, rng):
    Tensor, cross_entropy = engine["Tensor"], engine["cross_entropy"]
    checked = 0
    while checked < 15:
        arrays, y = _random_program_inputs(rng)
        if not _away_from_kinks(arrays):  # relu's kink inside the finite-difference step
            continue
        ours = {k: Tensor(v) for k, v in arrays.items()}
        _program(**ours, y=y, relu=lambda t: t.relu(), ce=cross_entropy).backward()
        for name, start in arrays.items():

            def f(a, name=name, arrays=arrays, y=y):
                return _program(**{**arrays, name: a}, y=y, relu=_relu, ce=_ce)

            numeric = _numeric_gradient(f, start)
            assert ours[name].grad.shape == start.shape
            np.testing.assert_allclose(ours[name].grad, numeric, rtol=1e-5, atol=1e-6)
        checked += 1


def test_random_programs_match_pytorch(engine, rng, torch):
    Tensor, cross_entropy = engine["Tensor"], engine["cross_entropy"]
    F = torch.nn.functional
    for _ in range(25):
        arrays, y = _random_program_inputs(rng)
        ours = {k: Tensor(v) for k, v in arrays.items()}
        _program(**ours, y=y, relu=lambda t: t.relu(), ce=cross_entropy).backward()
        ref = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
        _program(**ref, y=torch.tensor(y), relu=torch.relu, ce=F.cross_entropy).backward()
        for name in arrays:
            np.testing.assert_allclose(
                ours[name].grad, ref[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
            )


def test_unbroadcast_equals_torch_sum_to_size(engine, rng, torch):
    unbroadcast = engine["unbroadcast"]
    for _ in range(40):
        big, small = _broadcast_pair(rng)
        g = rng.normal(size=big)
        got = unbroadcast(g, small)
        assert got.shape == small
        want = torch.tensor(g).sum_to_size(small).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_sum_axis_keepdims_matches_pytorch(engine, rng, torch):
    Tensor = engine["Tensor"]
    for axis, keepdims in itertools.product([0, 1, -1, (0, 2), (0, 1, 2)], (False, True)):
        x0 = rng.normal(size=(3, 2, 4))
        g = rng.normal(size=x0.sum(axis=axis, keepdims=keepdims).shape)
        x = Tensor(x0)
        (x.sum(axis=axis, keepdims=keepdims) * g).sum().backward()
        xt = torch.tensor(x0, requires_grad=True)
        (xt.sum(dim=axis, keepdim=keepdims) * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-12)


# --- what goes wrong, and the messages ------------------------------------------------------


def _early_engine() -> dict:
    """The engine after steps 1-3 only: chapter 03's rules on arrays, no unbroadcast, no @,
    a sum() without axis (the first versions of add, mul and sum)."""
    namespace: dict = {"np": np, "al": autodiff_lab}
    for first_line, marker in (
        ("class Tensor:", None),
        ("Tensor.shape = property(", None),
        ("def add(self, other):", "self.grad += out.grad\n"),
        ("def mul(self, other):", "self.grad += other.data * out"),
        ("def tensor_sum(self):", None),
        ("def backward(self):", None),
    ):
        _run(namespace, _cell(first_line, marker), first_line)
    return namespace


def test_each_new_piece_starts_from_an_example_that_fails():
    """Step 4: a bias (and a constant) break `+=`; step 5: no `@` yet; step 6: no `axis`.
    The text names each failure; the finished engine runs the same lines."""
    early = _early_engine()["Tensor"]
    with pytest.raises(ValueError):
        (early(np.ones((4, 3))) + early(np.zeros(3))).sum().backward()
    with pytest.raises(ValueError):  # "`X + 1` fails the same way"
        (early(np.ones((4, 3))) + 1).sum().backward()
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for @"):
        early(np.ones((4, 3))) @ early(np.ones((3, 2)))
    with pytest.raises(TypeError, match="axis"):
        early(np.ones((4, 3))).sum(axis=1)
    text = " ".join(_markdown().split())
    assert "`X + 1` fails the same way" in text
    assert '`X @ W` stops with a `TypeError` ("unsupported operand type(s) for @")' in text
    assert "`sum(axis=1)`, which today stops with a `TypeError` (no argument `axis`)" in text
    Tensor = _fresh_engine()["Tensor"]
    x, one = Tensor(np.ones((4, 3))), Tensor(1.0)
    (x + Tensor(np.zeros(3)) + one).sum().backward()
    assert one.grad == 12.0 and Tensor(np.ones((4, 3))).sum(axis=1).shape == (4,)


def test_numpy_arrays_on_either_side_reach_the_engine(engine, rng):
    """`__array_ufunc__ = None`: `W * t` with a numpy W is the Tensor's op, not an object
    array of Tensors; `t @ W` takes an array as `+` and `*` do."""
    Tensor = engine["Tensor"]
    x0, w, b0, g = (rng.normal(size=s) for s in ((4, 3), (4, 3), (3, 2), (4, 2)))
    x = Tensor(x0)
    y = w * x + w
    assert isinstance(y, Tensor) and y.shape == (4, 3)
    (y * 2.0 + 1.0).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * w, rtol=1e-12)
    a = Tensor(x0)
    ((a @ b0) * g).sum().backward()
    np.testing.assert_allclose(a.grad, g @ b0.T, rtol=1e-12)


def test_the_errors_name_the_op_and_the_shapes(engine):
    Tensor = engine["Tensor"]
    with pytest.raises(ValueError, match=r"^@: cannot multiply \(2, 3\) by \(2, 3\)"):
        Tensor(np.ones((2, 3))) @ Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"one number.*\(4, 3\).*\.sum\(\)"):
        (Tensor(np.ones((4, 3))) * 2.0).backward()


def test_the_engine_is_about_110_lines():
    """04.1's opening section says "about 110 lines in all": the finished engine's cells of
    both parts, blank lines not counted (comments, docstrings and the cells' small
    demonstrations are)."""
    cells = [_cell(first, marker) for first, marker in ENGINE]
    lines = sum(1 for c in cells for line in cell_source(c).splitlines() if line.strip())
    assert 100 <= lines <= 120, lines
    opening = " ".join(markdown_text(CH04_1).split("## Step 1")[0].split())
    assert "about 110 lines in all" in opening


def test_part_2_rebuilds_exactly_the_engine_cells_of_part_1():
    """04.2's setup runs 04.1's tagged cells: they are the finished versions of 04.1's engine
    cells (never the first add and mul) and numeric_gradient, and 04.2 says what it made."""
    tagged = [c for c in notebook_cells(CH04_1) if REBUILT in c["metadata"].get("tags", [])]
    part_1 = [cell_source(c) for c in notebook_cells(CH04_1)]
    engine_sources = [cell_source(_cell(first, marker)) for first, marker in ENGINE]
    wanted = [source for source in part_1 if source in engine_sources]
    wanted += [
        cell_source(_cell(first)) for first in ("def tensor_sum(self):", "def numeric_gradient(")
    ]
    assert len(wanted) == 10  # Tensor, its shape, backward, unbroadcast, +, *, @ (2), sum, fd
    assert sorted(map(cell_source, tagged)) == sorted(wanted)
    assert all(c["cell_type"] == "code" for c in tagged)
    (setup,) = [c for c in notebook_cells(CH04_2) if "rebuild_part_1(globals())" in cell_source(c)]
    assert f'"{REBUILT}"' in cell_source(setup) and f"`{REBUILT}`" in markdown_text(CH04_2)
    assert printed(setup) == (
        "from 04.1: Tensor, add, as_tensor, backward, matmul, mul, numeric_gradient, "
        "tensor_sum, unbroadcast\n"
    )


def test_the_your_turn_answer_works(rng):
    """The answer hidden under "Your turn" (tanh and subtraction) runs on the engine and
    prints the verdict it promises; its tanh matches the closed form."""
    text = _markdown()
    turn = text[text.index("**Your turn.**") :]
    code = re.search(r"```python\n(.*?)```", turn, re.S).group(1)
    namespace = _fresh_engine()  # the answer adds methods to Tensor: not the shared one
    namespace["rng"] = rng
    _run(namespace, _cell("def numeric_gradient(fn, X, h=1e-6):"), "numeric_gradient")
    output: list[str] = []
    namespace["print"] = lambda *args: output.append(" ".join(map(str, args)))
    exec(compile(code, "your turn", "exec"), namespace)  # noqa: S102
    assert output == ["matches finite differences: True"]
    x0 = namespace["x0"]
    np.testing.assert_allclose(namespace["x"].grad, 1 - np.tanh(x0) ** 2 - 2 * x0, rtol=1e-12)


# --- what the text says about chapter 03 ------------------------------------------------------


def _chapter_03_code() -> list[str]:
    """The code cells of chapter 03 (one notebook or its parts: every notebooks/03_*)."""
    return [
        cell_source(c)
        for path in sorted((ROOT / "notebooks").glob("03_*.ipynb"))
        for c in notebook_cells(path)
        if c["cell_type"] == "code"
    ]


def test_topological_order_is_chapter_02s_and_the_first_rules_are_chapter_03s():
    """Step 3: "chapter 02's `topological_order` is in the package as `al.topological_order`"
    (chapter 03 uses it too and chapter 04 defines none of its own). Step 2: "chapter 03's
    closures work unchanged"."""
    ch03_code = _chapter_03_code()
    text = " ".join(_markdown().split())
    assert "chapter 02's `topological_order` is in the package as `al.topological_order`" in text
    assert not [c for c in _code_cells() if "def topological_order(" in cell_source(c)]
    assert not [c for c in ch03_code if "def topological_order(" in c]

    def ch03_cell(first_line: str) -> str:
        (found,) = [c for c in ch03_code if c.lstrip().startswith(first_line)]
        return found

    def backward_body(source: str, op: str) -> list[str]:
        start = source.index(f"def {op}(self, other):")
        body = source[start:].split("def _backward():")[1].split("out._backward")[0]
        return [line.strip() for line in body.splitlines()[1:] if line.strip()]

    first_add = cell_source(_cell("def add(self, other):", "self.grad += out.grad\n"))
    first_mul = cell_source(_cell("def mul(self, other):", "self.grad += other.data * out"))
    assert backward_body(first_add, "add") == backward_body(ch03_cell("def as_value(x):"), "add")
    assert backward_body(first_mul, "mul") == backward_body(ch03_cell("def mul("), "mul")


# --- the printed claims ---------------------------------------------------------------------


def _printed_by(first_line: str) -> str:
    return printed(_cell(first_line))


def _robust(value: float, shown: str, fmt: str) -> bool:
    """`shown` is `value` formatted, and still is after a relative change of 1e-6."""
    return all(format(value * (1 + e), fmt) == shown for e in (-1e-6, 0.0, 1e-6))


def _train_by_hand(X, y, init, steps, lr):
    """The chapter's 2-16-2 MLP trained with hand-written numpy backpropagation."""
    W1, b1, W2, b2 = (a.copy() for a in init)
    losses = []
    n = len(y)
    for _ in range(steps):
        pre = X @ W1 + b1
        hid = np.maximum(pre, 0)
        z = hid @ W2 + b2
        losses.append(_ce(z, y))
        dz = (_softmax(z) - np.eye(2)[y]) / n
        dW2, db2 = hid.T @ dz, dz.sum(axis=0)
        dpre = (dz @ W2.T) * (pre > 0)
        dW1, db1 = X.T @ dpre, dpre.sum(axis=0)
        for p, g in ((W1, dW1), (b1, db1), (W2, dW2), (b2, db2)):
            p -= lr * g
    return losses, (W1, b1, W2, b2)


def test_training_claims_hold_and_are_robust():
    from autodiff_lab.data import make_moons

    text = _printed_by("params = [Tensor(a) for a in init]")
    start, end, steps = re.search(r"loss (\S+) at step 0, (\S+) after (\d+) steps", text).groups()
    source = cell_source(_cell("X_train, y_train = make_moons("))
    assert "STEPS, LR = 500, 0.5" in source and int(steps) == 500
    X, y = make_moons(n=100, noise=0.1, seed=0)
    init_rng = np.random.default_rng(0)
    init = [
        init_rng.normal(size=(2, 16)) / np.sqrt(2),
        np.zeros(16),
        init_rng.normal(size=(16, 2)) / np.sqrt(16),
        np.zeros(2),
    ]
    losses, (W1, b1, W2, b2) = _train_by_hand(X, y, init, 500, 0.5)
    assert _robust(losses[0], start, ".2g") and _robust(losses[-1], end, ".2g")
    assert losses[-1] < losses[0] / 10, "the loss falls"
    # the accuracies: every count from points well away from the decision boundary
    right, right_new = map(
        int,
        re.search(
            r"right: (\d+) of 100 training points, (\d+) of 200 new",
            _printed_by("def predict(params, X):"),
        ).groups(),
    )
    X_new, y_new = make_moons(n=200, noise=0.1, seed=1)
    for points, labels, count in ((X, y, right), (X_new, y_new, right_new)):
        z = np.maximum(points @ W1 + b1, 0) @ W2 + b2
        assert (z.argmax(axis=1) == labels).sum() == count
        assert np.abs(z[:, 0] - z[:, 1]).min() > 1e-6


def test_comparison_verdicts_are_all_true_and_the_torch_result_is_labelled():
    """The package side runs without PyTorch (no torch in its cell); the PyTorch cell ends
    ``else: show_committed_result(NOTEBOOK, CELL_ID)`` with its own notebook and id, as
    chapter 03's do, so without PyTorch it prints its committed verdicts, labelled as
    stored; no Markdown restates them."""
    verdict = "gradients equal: True; 500 losses within 1e-9: True"
    package = _cell("at_start = [Tensor(a) for a in init]")
    assert "torch" not in cell_source(package)
    assert printed(package) == f"autodiff_lab vs ours: {verdict}\n"
    torch_cell = _cell("torch = import_torch()")
    source = cell_source(torch_cell)
    want = f"PyTorch vs ours: {verdict}\nunbroadcast == torch's sum_to_size on 4 pairs: True\n"
    assert printed(torch_cell) == want
    # the 4 it prints as a literal is the number of shape pairs its loop compares
    pairs = re.search(r"for small, big in (\[.*?\]):", source, re.S).group(1)
    assert len(ast.literal_eval(pairs)) == 4
    call = f'show_committed_result("{CH04_2.stem}", "{torch_cell["id"]}")'
    assert source.endswith(f"\nelse:\n    {call}"), source[-120:]
    # what a learner without PyTorch is shown: the verdicts above, read from the course
    assert optional.committed_output(CH04_2.stem, torch_cell["id"]) == want
    assert "Without PyTorch**" not in markdown_text(CH04_2)
    assert "STEPS, LR = 500, 0.5" in cell_source(_cell("X_train, y_train = make_moons("))


def test_numbers_in_the_text_are_printed():
    out = {first: _printed_by(first) for first in ("def unbroadcast(grad, shape):",)}
    shown = out["def unbroadcast(grad, shape):"]
    assert "[18. 22. 26.]" in shown and "[ 3. 12. 21. 30.]" in shown and "66.0" in shown
    text = _markdown()
    assert "columns sum to 18, 22, 26, its rows to 3, 12, 21, 30" in text
    assert "to 66" in text
    assert "12 array operations" in _printed_by("out = program(")
    assert "Twelve array operations" in text
    # float64: exp overflows just above 709; round-off is about 1e-16
    assert np.isfinite(np.exp(709.0))
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(710.0))
    assert 1e-16 < np.finfo(np.float64).eps < 1e-15
    nodes = re.findall(
        r"^\s+(\d+)\s+(\d+)\s+(\d+)$", _printed_by('print("   n   scalar-graph'), re.M
    )
    assert [(int(n), int(t)) for n, _, t in nodes] == [(2, 4), (4, 4), (8, 4), (16, 4)]
    assert "gets more than $2n^3$ nodes" in " ".join(text.split())
    # n^2 outputs of n products, n additions and a zero; 2 n^2 inputs; the total: n^2 + 1
    assert all(int(s) == 2 * int(n) ** 3 + 4 * int(n) ** 2 + 1 for n, s, _ in nodes)


def test_the_exercise_list_matches_the_registry():
    """Each part's closing list gives the exercises it prepares for, with the level the
    registry has (4.1 is the backward of np.tile); together, every exercise of chapter 04,
    each in one part only."""
    from autodiff_lab.grading import registry

    found = {}
    for path in PARTS:
        text = " ".join(markdown_text(path).split())
        listed = text[text.index("**Graded exercises**") : text.index("each checked with")]
        for piece in listed.split(" · "):
            (exercise,) = re.findall(r"\b4\.\d+\b", piece)
            (level,) = re.findall(r"\((trivial|easy|medium|hard)\)", piece)
            assert exercise not in found, f"{exercise} is listed by both parts"
            found[exercise] = (level, piece)
    want = {e.id: e.level for e in registry.all_exercises() if e.id.startswith("4.")}
    assert {k: level for k, (level, _) in found.items()} == want
    assert "np.tile" in found["4.1"][1]


# --- the map to the package -----------------------------------------------------------------


def _defined_in(name: str, source: str) -> bool:
    """`name` (or `Class.method`) is defined at the top level of a module's source."""
    if "." in name:
        cls, method = name.split(".", 1)
        body = re.search(rf"^class {cls}\b.*?(?=^\S)", source + "\nEND", re.M | re.S)
        return bool(body and re.search(rf"^    def {method}\b", body.group(0), re.M))
    return bool(re.search(rf"^(def|class) {name}\b|^{name} = ", source, re.M))


def test_the_map_names_what_the_package_defines():
    text = markdown_text(CH04_2)
    header = "| you wrote | in `autodiff_lab/` |"
    tables = [part.split("\n\n")[0] for part in text.split(header)[1:]]  # two slides' worth
    rows = [r for t in tables for r in t.splitlines() if r.startswith("|") and "---" not in r]
    assert len(tables) == 2 and len(rows) >= 8
    checked = 0
    for row in rows:
        package_side = row.split("|")[2]
        files = re.findall(r"`(\w+\.py)`", package_side)
        assert files, row
        sources = {f: (ROOT / "autodiff_lab" / f).read_text(encoding="utf-8") for f in files}
        for name in re.findall(r"`([A-Za-z_][\w.]*)`", package_side):
            if name.endswith(".py") or name in ("vjp", "requires_grad", "_backward"):
                continue  # attributes, checked below
            assert any(_defined_in(name, s) for s in sources.values()), (name, files)
            checked += 1
    assert checked >= 15
    import autodiff_lab as al
    from autodiff_lab import primitives

    t = al.Tensor(np.ones(2), requires_grad=True)
    assert all(hasattr(t, a) for a in ("data", "grad", "_prev", "_op", "label", "requires_grad"))
    assert not hasattr(t * 2.0, "_backward"), "the map says: the same fields except `_backward`"
    assert all(hasattr(p, "vjp") for p in (primitives.ADD, primitives.MATMUL, primitives.SUM))


# --- stored outputs do not hang on round-off -------------------------------------------------

PERTURB = """
import numpy as _np
from autodiff_lab import data as _data

_noise = _np.random.default_rng(2026)


def _shake(a):
    return a * (1 + 1e-9 * _noise.standard_normal(_np.shape(a)))


class _ShakenGenerator:
    def __init__(self, inner):
        self._inner = inner

    def normal(self, *args, **kwargs):
        return _shake(self._inner.normal(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._inner, name)


if "make_moons" in globals():  # 04.2's data (04.1 has none)
    _moons = make_moons

    def make_moons(*args, **kwargs):
        X, y = _moons(*args, **kwargs)
        return _shake(X), y


rng = _ShakenGenerator(rng)
"""


def _compared_text(cell) -> list[str]:
    """What strict nbval compares (streams joined; results' text/plain, text/html and
    image/svg+xml: the drawing prints values to 4 decimals; sanitized as nbval does, which
    takes out a figure's PNG bytes and keeps its alt text)."""
    streams: dict[str, str] = {}
    results = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            streams[out["name"]] = streams.get(out["name"], "") + out["text"]
        elif out["output_type"] in ("execute_result", "display_data"):
            data = out["data"]
            results += [data.get(k, "") for k in ("text/plain", "text/html", "image/svg+xml")]
        elif out["output_type"] == "error":
            results.append(f"ERROR {out['ename']}: {out['evalue']}")
    compared = [f"{name}: {text}" for name, text in sorted(streams.items())] + results
    return [nbval_sanitized(text) for text in compared]


@pytest.mark.exhaustive  # the chapter run again on perturbed data, beside the SIMD-off pass
@pytest.mark.parametrize("path", PARTS, ids=["04.1", "04.2"])
def test_stored_outputs_survive_a_perturbation_far_above_round_off(path):
    """Every random array and the moons data shaken by a relative 1e-9 (round-off on another
    CPU is about 1e-16): every printed line stays the committed one."""
    committed = nbformat.read(path, as_version=4)
    shaken = nbformat.read(path, as_version=4)
    setup = next(i for i, c in enumerate(shaken.cells) if "rng = np.random" in c.source)
    shaken.cells.insert(setup + 1, nbformat.v4.new_code_cell(PERTURB))
    NotebookClient(
        shaken,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    shaken.cells.pop(setup + 1)
    code = [c for c in committed.cells if c.cell_type == "code"]
    after = [c for c in shaken.cells if c.cell_type == "code"]
    for before, now in zip(code, after, strict=True):
        assert _compared_text(now) == _compared_text(before), before.source.splitlines()[0]
