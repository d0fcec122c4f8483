"""Adversarial students against the new exercises (4.1, 7.1-7.4, 8.3): each test performs
the attack and checks it scores nothing or loses points, while an honest answer to the
same exercise keeps full marks.

- 7.3's memory is measured in the student's process; the one-line lies (tracemalloc
  stopped, cleared, its peak reset, ``get_traced_memory`` or ``round`` patched, the chain
  run in a forked child) give no reading and score nothing (only n = 1 fits the budget
  without checkpointing, so plain backprop keeps that case).
- 7.1/7.2: a gradient written into ``x.grad`` by hand is not graded (backward's is).
- 8.3: probing the program with unit vectors (building the Jacobian) fails the long input.
- 4.1: an answer that lets PyTorch do the work is named in the report.

Expected values are the exercises' own closed-form references; the attacks run through the
real command-line grader (in the sandbox when bubblewrap is installed).
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
from grading_testkit import run_cli, write_notebook
from test_exercises_ch07 import chain_nested  # 7.3's honest answer: nested checkpoints

from autodiff_lab import Tensor, ops
from autodiff_lab.grading.exercises import ch07, ch08
from autodiff_lab.grading.runners.ch07 import _chain_run, _logsumexp_run, _safe_norm_run
from autodiff_lab.grading.spec import close

pytestmark = pytest.mark.slow  # a class graded in sandboxes: seconds per file

PLAIN_CHAIN = """
from autodiff_lab import Tensor
def chain_gradient(step, x, n):
    {pre}
    h0 = Tensor(x, requires_grad=True)
    h = h0
    for _ in range(n):
        h = step(h)
    h.sum().backward()
    g = h0.grad
    {post}
    return g
"""


def _chain(top: str = "pass", pre: str = "pass", post: str = "pass") -> list[str]:
    return [top, PLAIN_CHAIN.format(pre=pre, post=post)]


HONEST_CHAIN = [
    "from autodiff_lab import Tensor, checkpoint",
    """
def _run(step, h, m):
    if m == 1:
        return step(h)
    half = m // 2
    h = checkpoint(lambda h: _run(step, h, half))(h)
    return _run(step, h, m - half)

def chain_gradient(step, x, n):
    leaf = Tensor(x, requires_grad=True)
    _run(step, leaf, n).sum().backward()
    return leaf.grad
""",
]

FORK_CHAIN = [
    "import os, pickle\nimport numpy as np\nfrom autodiff_lab import Tensor",
    """
def chain_gradient(step, x, n):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        h0 = Tensor(x, requires_grad=True); h = h0
        for _ in range(n): h = step(h)
        h.sum().backward()
        with os.fdopen(w, "wb") as f: f.write(pickle.dumps(np.asarray(h0.grad)))
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f: data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)
""",
]

NORM_PRESET = [
    "import numpy as np",
    """
def safe_norm(x):
    s = float(np.sqrt(np.sum(x.data ** 2)))
    x.grad = x.data / s if s > 0 else np.zeros_like(x.data)
    return s
""",
]

LSE_PRESET = [
    "import numpy as np\nfrom autodiff_lab import Tensor, ops",
    """
def logsumexp(x):
    d = x.data; m = d.max(); v = m + np.log(np.exp(d - m).sum())
    x.grad = np.exp(d - v)
    return ops.sum(Tensor(np.array([v]), requires_grad=True))
""",
]

PROBE = [
    "import numpy as np",
    """
def _run(program, env):
    env = dict(env); out = None
    for op, out, *a in program:
        if op == "scale": env[out] = a[1] * env[a[0]]
        elif op == "add": env[out] = env[a[0]] + env[a[1]]
        elif op == "sub": env[out] = env[a[0]] - env[a[1]]
        elif op == "neg": env[out] = -env[a[0]]
        elif op == "matvec": env[out] = np.asarray(a[0]) @ env[a[1]]
        elif op == "slice": env[out] = env[a[0]][a[1]:a[2]]
    return env[out]

def transpose_program(program, input_sizes, ct):
    zeros = {k: np.zeros(n) for k, n in input_sizes.items()}
    res = {}
    for k, n in input_sizes.items():
        cols = [_run(program, {**zeros, k: np.eye(n)[j]}) for j in range(n)]
        res[k] = np.stack(cols, 1).T @ ct
    return res
""",
]

HONEST_TRANSPOSE = [
    "import numpy as np",
    """
def transpose_program(program, input_sizes, ct):
    sizes = dict(input_sizes)
    for op, out, *a in program:
        sizes[out] = len(a[0]) if op == "matvec" else a[2] - a[1] if op == "slice" else sizes[a[0]]
    cts = {program[-1][1]: np.asarray(ct, float)}
    def add(name, v):
        cts[name] = cts.get(name, 0) + v
    for op, out, *a in reversed(program):
        g = cts.pop(out, np.zeros(sizes[out]))
        if op == "scale": add(a[0], a[1] * g)
        elif op in ("add", "sub"): add(a[0], g); add(a[1], g if op == "add" else -g)
        elif op == "neg": add(a[0], -g)
        elif op == "matvec": add(a[1], np.asarray(a[0]).T @ g)
        else:
            full = np.zeros(sizes[a[0]]); full[a[1]:a[2]] = g; add(a[0], full)
    return {k: cts.get(k, np.zeros(n)) for k, n in input_sizes.items()}
""",
]

TORCH_TILE = [
    "import numpy as np\nimport torch",
    """
def tile_backward(x, g, reps):
    t = torch.tensor(x, requires_grad=True)
    torch.tile(t, reps if isinstance(reps, tuple) else (reps,)).backward(torch.tensor(g))
    return t.grad.numpy()
""",
]

CLASS = {
    "honest_chain": HONEST_CHAIN,
    "tm_stop": _chain("import tracemalloc", pre="tracemalloc.stop()"),
    "tm_reset_peak": _chain("import tracemalloc", post="del h, h0; tracemalloc.reset_peak()"),
    "tm_clear": _chain("import tracemalloc", post="del h, h0; tracemalloc.clear_traces()"),
    "tm_patch_get": _chain("import tracemalloc\ntracemalloc.get_traced_memory = lambda: (0, 0)"),
    "patch_round": _chain(
        "import builtins\n_r = builtins.round\n"
        "builtins.round = lambda v, n=None: 0.0 if isinstance(v, float) and v > 50 else _r(v, n)"
    ),
    "fork_chain": FORK_CHAIN,
    "norm_preset": NORM_PRESET,
    "lse_preset": LSE_PRESET,
    "probe": PROBE,
    "honest_transpose": HONEST_TRANSPOSE,
    "torch_tile": TORCH_TILE,
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks")
    subs = root / "submissions"
    for student, cells in CLASS.items():
        write_notebook(subs / student / "work.ipynb", cells)
    out, report = root / "grades.csv", root / "reports"
    rc = run_cli(
        ["grade", str(subs), "--db", str(root / "book.sqlite"), "--out", str(out),
         "--report", str(report), "-j", "2", "--seed", "7", "--quiet"]
    )  # fmt: skip
    assert rc == 0
    with open(out, newline="") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    reports = {p.name.rsplit("-", 1)[0]: p.read_text() for p in report.iterdir()}
    return rows, reports


def _points(graded, student, exercise) -> tuple[float, float, str]:
    row = graded[0][(student, exercise)]
    return float(row["points"]), float(row["max_points"]), row["status"]


def test_an_honest_checkpointed_chain_keeps_full_marks(graded):
    points, maximum, status = _points(graded, "honest_chain", "7.3")
    assert points == maximum == 6 and status == "passed"


@pytest.mark.parametrize(
    "student", ["tm_stop", "tm_reset_peak", "tm_clear", "tm_patch_get", "patch_round", "fork_chain"]
)
def test_lying_about_7_3s_memory_scores_only_the_one_step_case(graded, student):
    """Plain backprop fits the budget only for n = 1 (75 arrays); every other case needs a
    memory reading under the budget, and these lies give none or a true one over it."""
    points, maximum, status = _points(graded, student, "7.3")
    assert maximum == 6 and points <= 1 and status == "failed"


def test_stopping_tracemalloc_gets_the_hint_that_names_it(graded):
    report = graded[1]["tm_stop"]
    assert "could not be measured" in report and "tracemalloc" in report


@pytest.mark.parametrize(("student", "exercise"), [("norm_preset", "7.1"), ("lse_preset", "7.2")])
def test_a_gradient_written_into_x_grad_by_hand_scores_nothing(graded, student, exercise):
    points, maximum, _ = _points(graded, student, exercise)
    assert maximum > 0 and points == 0


def test_probing_the_program_for_its_jacobian_loses_the_long_input(graded):
    points, maximum, _ = _points(graded, "probe", "8.3")
    assert maximum == 11 and points == 10
    assert "200 000 numbers" in graded[1]["probe"]
    assert _points(graded, "honest_transpose", "8.3")[:2] == (11, 11)


def test_an_answer_that_lets_torch_do_4_1_is_named_in_the_report(graded):
    points, maximum, _ = _points(graded, "torch_tile", "4.1")
    assert points == maximum  # allowed, as the library's own functions are
    report = graded[1]["torch_tile"].replace("\\", "")
    assert "uses another autodiff library" in report and "torch.tile" in report


# --- the same attacks on the runners directly (no worker) -----------------------------------


def _plain_chain(step, x, n):
    h0 = h = Tensor(x, requires_grad=True)
    for _ in range(n):
        h = step(h)
    h.sum().backward()
    return h0.grad


def test_the_chain_runner_sees_a_reset_peak_through_its_samples_at_each_step():
    import tracemalloc

    x, n = np.linspace(-1, 1, ch07.WIDTH).tolist(), 400
    budget = ch07.MEMORY_BUDGET(n)

    def reset_after(step, x, n):
        g = np.array(_plain_chain(step, x, n))
        tracemalloc.reset_peak()
        return g

    honest = _chain_run(chain_nested, ("0.9 tanh(h) + 0.1", x, n))
    lying = _chain_run(reset_after, ("0.9 tanh(h) + 0.1", x, n))
    assert honest["memory"] == "measured" and honest["peak_arrays"] <= budget
    assert lying["memory"] == "measured" and lying["peak_arrays"] > budget
    expected = ch07._chain_gradient("0.9 tanh(h) + 0.1", x, n)
    assert close(lying["grad"], expected.tolist(), atol=0.0)


def test_the_chain_runner_ignores_a_patched_get_traced_memory(monkeypatch):
    import tracemalloc

    monkeypatch.setattr(tracemalloc, "get_traced_memory", lambda: (0, 0))
    x, n = np.linspace(-1, 1, ch07.WIDTH).tolist(), 256
    got = _chain_run(_plain_chain, ("h + 0.1 sin(h)", x, n))
    assert got["peak_arrays"] > ch07.MEMORY_BUDGET(n)


def test_the_chain_runner_gives_no_reading_when_tracing_was_stopped_or_cleared():
    import tracemalloc

    x, n = np.linspace(-1, 1, ch07.WIDTH).tolist(), 100
    for tamper in (tracemalloc.stop, tracemalloc.clear_traces):

        def lying(step, x, n, tamper=tamper):
            tamper()
            return _plain_chain(step, x, n)

        got = _chain_run(lying, ("0.9 tanh(h) + 0.1", x, n))
        assert got["peak_arrays"] is None and "not measured" in got["memory"]
        expected = {"peak_arrays_max": ch07.MEMORY_BUDGET(n), "grad": got["grad"]}
        assert not ch07.CHAIN.compare(got, expected)


def test_the_norm_and_logsumexp_runners_grade_backwards_gradient_not_x_grad():
    def preset_norm(x):
        x.grad = x.data / np.linalg.norm(x.data)
        return float(np.linalg.norm(x.data))

    assert _safe_norm_run(preset_norm, ([3.0, 4.0],))["grad"] is None

    def preset_lse(x):
        if isinstance(x, Tensor):  # the runner first calls an answer that is no custom_jvp
            x.grad = np.full(x.data.shape, 0.5)
        return ops.sum(Tensor(np.array([1.0]), requires_grad=True))

    # 7.2 is a custom_jvp now: a plain function that writes x.grad is refused, never graded
    assert _logsumexp_run(preset_lse, ([0.0, 0.0], 1.0, [1.0, 0.0])).get("grad") is None


def test_the_long_input_reference_is_the_closed_form():
    """8.3's long case: out = -(c x0 - x0)[s:s+3], so x0's cotangent is (1 - c) ct at s:s+3
    and zero elsewhere (written out here, not probed)."""
    case = ch08._transpose_cases(np.random.default_rng(3))[-1]
    program, sizes, ct = case.inputs
    (_, _, _, c), (_, _, _, start, stop) = program[0], program[-1]
    expected = np.zeros(sizes["x0"])
    expected[start:stop] = (1 - c) * np.asarray(ct)
    got = ch08.transpose_reference(case.inputs)["x0"]
    assert sizes["x0"] == ch08.LONG_INPUT and np.allclose(got, expected, rtol=0, atol=1e-12)


def test_a_numpy_function_wearing_another_ops_primitive_scores_nothing_on_6_5():
    """Capstone 6.5: np.logaddexp given the .primitive of an unrelated user op passed the
    value cases (6/18) before the runner required define_primitive's own op."""
    from autodiff_lab.extend import define_primitive
    from autodiff_lab.grading.exercises import ch06_primitive
    from autodiff_lab.grading.runners.primitive import primitive_run

    other = define_primitive("r3_attack_double", lambda x: 2 * x, vjp=lambda g, out, x: 2 * g)

    def logaddexp(a, b):
        return np.logaddexp(a, b)

    logaddexp.primitive = other.primitive
    exercise = ch06_primitive.EXERCISES[0]
    cases = exercise.cases(np.random.default_rng(5))
    values = [c for c in cases if c.inputs[0] == "value"]
    assert values
    for case in values:
        got = primitive_run(logaddexp, case.inputs)
        assert got["error"] == "NotAPrimitive"
        assert not close(got, exercise.reference(case.inputs))
