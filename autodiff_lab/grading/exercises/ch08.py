"""Chapter 08 exercises: per-example gradient norms, a batching rule, a transposed program.

- 8.1 per-example gradient norms of a small tanh network: the reference is the network's
  gradient written out by hand in numpy (the chain rule, no engine).
- 8.2 the batching rule of ``sum(x, axis)``: the reference runs the unbatched ``np.sum``
  on each example in a Python loop and stacks the results.
- 8.3 transposing a linear program: random programs of scalings, sums, differences,
  negations, matrix-vector products and slices; the reference builds each input's
  Jacobian block by running the program on unit vectors and returns ``Jᵢᵀ ct``.

The known mistakes are recognised by running the grader's own faulty versions (a rule
that forgets to shift the axis, a transposer that overwrites instead of adding, …) on the
same case and comparing.
"""

from __future__ import annotations

import numpy as np

from ..runners.ch08 import _batch_sum_run, _norms_run, _transpose_run
from ..spec import Case, Exercise, Mistake, close
from ._common import draw, is_error

__all__ = [
    "EXERCISES",
    "NORMS",
    "BATCH_SUM",
    "TRANSPOSE",
    "mlp_gradients",
    "run_program",
    "random_program",
    "transpose_reference",
]

# --- 8.1 per-example gradient norms ---------------------------------------------------------


def _unpack(theta: np.ndarray, d: int):
    h = (theta.size - 1) // (d + 2)
    W1 = theta[: h * d].reshape(h, d)
    b1 = theta[h * d : h * d + h]
    w2 = theta[h * d + h : h * d + 2 * h]
    b2 = theta[h * d + 2 * h]
    return W1, b1, w2, b2


def mlp_gradients(theta, X, Y) -> tuple[np.ndarray, np.ndarray]:
    """Per-example gradients of ``½ (w2·tanh(W1 x + b1) + b2 − y)²``, by hand.

    Returns ``(d loss_i / d theta, d loss_i / d x_i)``, shapes (N, P) and (N, d). With
    ``z = tanh(W1 x + b1)`` and the error ``e = w2·z + b2 − y``: ``d/db2 = e``,
    ``d/dw2 = e z``, ``d/db1 = e w2 (1 − z²)``, ``d/dW1 = outer(d/db1, x)`` and
    ``d/dx = W1ᵀ d/db1``.
    """
    theta, X, Y = np.asarray(theta, float), np.asarray(X, float), np.asarray(Y, float)
    W1, b1, w2, b2 = _unpack(theta, X.shape[1])
    Z = np.tanh(X @ W1.T + b1)  # (N, h)
    E = Z @ w2 + b2 - Y  # (N,)
    dB1 = E[:, None] * w2 * (1 - Z * Z)  # (N, h)
    dW1 = dB1[:, :, None] * X[:, None, :]  # (N, h, d)
    n = len(X)
    grads = np.concatenate([dW1.reshape(n, -1), dB1, E[:, None] * Z, E[:, None]], axis=1)
    return grads, dB1 @ W1


def _norms_cases(rng):
    cases = []
    for d, h, n in ((2, 3, 5), (3, 2, 8), (4, 5, 6), (1, 4, 7), (3, 3, 4)):
        theta = draw(rng, -1.0, 1.0, h * d + 2 * h + 1)
        X = draw(rng, -2.0, 2.0, (n, d))
        Y = draw(rng, -1.0, 1.0, n)
        cases.append(Case(f"random: {n} examples, d = {d}, hidden {h}", (theta, X, Y)))
    theta = draw(rng, -1.0, 1.0, 3 * 2 + 2 * 3 + 1)
    X = draw(rng, -2.0, 2.0, (1, 2))
    cases.append(Case("edge: a batch of one example", (theta, X, np.array([0.5]))))
    X = draw(rng, -2.0, 2.0, (3, 2))
    X = np.concatenate([X, X[:1]])  # the first example again: the same gradient
    Y = np.array([0.2, -0.4, 0.9, 0.2])
    cases.append(Case("edge: a repeated example has the same norm", (theta, X, Y)))
    W1, b1, w2, b2 = _unpack(theta, 2)
    fitted = float(np.tanh(W1 @ X[1] + b1) @ w2 + b2)
    Y = np.array([0.2, fitted, 0.9, 0.2])
    cases.append(Case("edge: an example the network fits exactly (norm 0)", (theta, X, Y)))
    return cases


def _norms_reference(inputs):
    grads, _ = mlp_gradients(*inputs)
    return np.linalg.norm(grads, axis=1).tolist()


def _norms_mistake(kind: str):
    def detect(got, expected, case) -> bool:
        theta, X, Y = case.inputs
        grads, grads_x = mlp_gradients(theta, X, Y)
        n = len(X)
        wrong = {
            "mean": np.full(n, np.linalg.norm(grads.mean(axis=0))),
            "squared": np.asarray(expected) ** 2,
            "over N": np.asarray(expected) / n,
            "wrt x": np.linalg.norm(grads_x, axis=1),
        }[kind]
        return not close(got, expected) and close(got, wrong.tolist())

    return detect


NORMS = Exercise(
    id="8.1",
    title="Per-example gradient norms",
    level="easy",
    minutes=10,
    task="per_example_grad_norms(loss, theta, X, Y): the array of the N norms "
    "||grad_theta loss(theta, X[i], Y[i])||",
    answer="per_example_grad_norms",
    cases=_norms_cases,
    run=_norms_run,
    reference=_norms_reference,
    mistakes=(
        Mistake(
            "Every example got the same number: the norm of the gradient of the whole "
            "batch's mean loss. Per-example means one gradient per example — "
            "vmap(grad(loss), in_axes=(None, 0, 0)), or grad on each (X[i], Y[i]).",
            _norms_mistake("mean"),
        ),
        Mistake(
            "These are the squared norms (sums of squares): take the square root.",
            _norms_mistake("squared"),
        ),
        Mistake(
            "Each norm is divided by the batch size N: the per-example loss is loss(theta, "
            "x_i, y_i) itself, not its share of a batch mean.",
            _norms_mistake("over N"),
        ),
        Mistake(
            "These are the norms of the gradients with respect to the inputs x_i: "
            "differentiate with respect to theta (argument 0), not x (argument 1).",
            _norms_mistake("wrt x"),
        ),
    ),
    nudges=("grad(loss) gives the gradient for one example (x, y): a vector shaped like theta.",),
    reveal="vmap(grad(loss), in_axes=(None, 0, 0))(theta, X, Y) gives all N of them as the rows "
    "of one array; np.linalg.norm(..., axis=1) gives the norms.",
)


# --- 8.2 a batching rule for sum ---------------------------------------------------------------


def _batch_sum_cases(rng):
    cases = []
    for _ in range(6):
        ndim = int(rng.integers(2, 5))  # the batched array's axes (one example: ndim - 1)
        shape = tuple(int(s) for s in rng.integers(2, 5, size=ndim))
        bdim = int(rng.integers(0, ndim))
        axis = int(rng.integers(-(ndim - 1), ndim - 1))
        x = draw(rng, -1.0, 1.0, shape)
        cases.append(
            Case(f"random: shape {shape}, batch axis {bdim}, axis={axis}", (x, bdim, axis))
        )
    edges = (
        ("edge: batch axis first, axis=0", (3, 4, 2), 0, 0),
        ("edge: batch axis last, axis=-1", (3, 4, 5), 2, -1),
        ("edge: summed axis before the batch axis", (2, 3, 4), 2, 0),
        ("edge: axis=None sums one whole example", (3, 2, 4), 1, None),
        ("edge: examples are vectors", (5, 3), 1, 0),
    )
    for name, shape, bdim, axis in edges:
        cases.append(Case(name, (draw(rng, -1.0, 1.0, shape), bdim, axis)))
    return cases


def _batch_sum_reference(inputs):
    """The unbatched sum on each example (a Python loop), stacked along a new axis 0."""
    x, bdim, axis = inputs
    x = np.asarray(x, dtype=float)
    rows = [np.sum(np.take(x, i, axis=bdim), axis=axis) for i in range(x.shape[bdim])]
    out = np.stack(rows)
    return {"shape": list(out.shape), "out_bdim": "ok", "values": out.tolist(), "loop": False}


def _example_axis(axis: int, x: np.ndarray) -> int:
    return axis % (x.ndim - 1)


def _no_shift(x, bdim, axis):
    """Mistake: the example's axis used as an axis of the batched array."""
    if axis is None:
        return _batch_first_sum(x, bdim), 0
    a = _example_axis(axis, x)
    return np.sum(x, axis=a), bdim if bdim < a else bdim - 1


def _no_shift_bdim_kept(x, bdim, axis):
    """Mistake: as :func:`_no_shift`, and the batch axis reported unchanged."""
    if axis is None:
        return _batch_first_sum(x, bdim), 0
    return np.sum(x, axis=_example_axis(axis, x)), bdim


def _batch_first_sum(x, bdim):
    """The right answer for axis=None: every axis but the batch axis summed."""
    return np.moveaxis(x, bdim, 0).reshape(x.shape[bdim], -1).sum(axis=1)


def _bdim_kept(x, bdim, axis):
    """Mistake: the summed axis shifted, but the output's batch axis not moved down."""
    if axis is None:
        return _batch_first_sum(x, bdim), 0
    a = _example_axis(axis, x)
    a = a + 1 if a >= bdim else a
    return np.sum(x, axis=a), bdim


def _negative_not_normalised(x, bdim, axis):
    """Mistake: a negative axis shifted as if counted from the front."""
    if axis is None:
        return _batch_first_sum(x, bdim), 0
    a = axis + 1 if axis >= bdim else axis
    return np.sum(x, axis=a), bdim if a > bdim else bdim - 1


def _none_sums_batch(x, bdim, axis):
    """Mistake: axis=None handed on unchanged (it sums the batch axis too)."""
    if axis is None:
        return np.sum(x), bdim
    a = _example_axis(axis, x)
    a = a + 1 if a >= bdim else a
    return np.sum(x, axis=a), bdim if a > bdim else bdim - 1


def _shift_needed(case) -> bool:
    """The example's axis moves in the batched array here (it sits at or after bdim); where it
    does not, the unshifted rule sums the right axis, and only out_bdim can be wrong."""
    x, bdim, axis = case.inputs
    return axis is not None and _example_axis(axis, np.asarray(x)) >= bdim


def _rule_mistake(*faulty_rules):
    def detect(got, expected, case) -> bool:
        if close(got, expected):
            return False
        return any(close(got, _batch_sum_run(rule, case.inputs)) for rule in faulty_rules)

    return detect


BATCH_SUM = Exercise(
    id="8.2",
    title="A batching rule for sum",
    level="medium",
    minutes=20,
    task="sum_batch_rule(x, bdim, axis): return (out, out_bdim), the per-example "
    "np.sum(example, axis) of every example of x (batch axis bdim), batch axis out_bdim",
    answer="sum_batch_rule",
    cases=_batch_sum_cases,
    run=_batch_sum_run,
    reference=_batch_sum_reference,
    mistakes=(
        Mistake(
            "Your rule loops over the examples (on a batch 8 times larger it ran more Python "
            "lines): a batching rule does the whole batch in one numpy call, np.sum on the "
            "right axis of x.",
            lambda got, exp, case: got["loop"] is True,
        ),
        Mistake(
            "The example's axis was used as an axis of the batched array. When the batch "
            "axis sits at or before it, the example's axis `axis` is axis + 1 of x.",
            lambda got, exp, case: _shift_needed(case)
            and _rule_mistake(_no_shift, _no_shift_bdim_kept)(got, exp, case),
        ),
        Mistake(
            "The right axis was summed, but out_bdim is off by one: when the summed axis "
            "comes before the batch axis, the batch axis moves down one place (bdim - 1).",
            _rule_mistake(_bdim_kept),
        ),
        Mistake(
            "A negative axis counts from the end of one example's axes: turn it into "
            "axis % (x.ndim - 1) before comparing it with bdim.",
            _rule_mistake(_negative_not_normalised),
        ),
        Mistake(
            "axis=None sums every axis of one example — not the batch axis. Sum over all "
            "axes except bdim (or move bdim to the front and sum the rest).",
            _rule_mistake(_none_sums_batch),
        ),
    ),
    nudges=(
        "One way that always works: move the batch axis to the front "
        "(np.moveaxis(x, bdim, 0)); then the example's axis a is axis a + 1, and out_bdim is 0.",
    ),
    reveal="Check your rule against a loop: np.stack([np.sum(np.take(x, i, axis=bdim), axis) "
    "for i in range(x.shape[bdim])]).",
)


# --- 8.3 transposing a linear program -----------------------------------------------------------
# A program is a list of instructions [op, out, *args] on named vectors; its inputs are
# named x0, x1, ...; its output is the last instruction's `out`:
#   ["scale", out, a, c]            out = c * a          (c a number)
#   ["add", out, a, b]              out = a + b
#   ["sub", out, a, b]              out = a - b
#   ["neg", out, a]                 out = -a
#   ["matvec", out, M, a]           out = M @ a          (M a list of rows)
#   ["slice", out, a, start, stop]  out = a[start:stop]


def run_program(program, values: dict) -> np.ndarray:
    """Evaluate a linear program on numpy vectors; returns the output."""
    env = {k: np.asarray(v, dtype=float) for k, v in values.items()}
    out = None
    for op, out, *args in program:
        if op == "scale":
            env[out] = args[1] * env[args[0]]
        elif op == "add":
            env[out] = env[args[0]] + env[args[1]]
        elif op == "sub":
            env[out] = env[args[0]] - env[args[1]]
        elif op == "neg":
            env[out] = -env[args[0]]
        elif op == "matvec":
            env[out] = np.asarray(args[0], dtype=float) @ env[args[1]]
        elif op == "slice":
            env[out] = env[args[0]][args[1] : args[2]]
        else:
            raise ValueError(f"run_program: unknown instruction {op!r}")
    return env[out]


def random_program(rng, n_inputs: int, steps: int, *, unused: bool = False) -> tuple:
    """A random linear program: ``(program, input_sizes, output_size)``.

    Recent values are used most often, and values are reused (fan-out), so a correct
    transposition must add the cotangents of a value used twice. ``unused``: the last
    input is never read (its cotangent is zero).
    """
    sizes = {f"x{i}": int(rng.integers(1, 5)) for i in range(n_inputs)}
    readable = list(sizes)[:-1] if unused and n_inputs > 1 else list(sizes)
    inputs_read = list(readable)
    size_of = dict(sizes)
    program: list = []
    for k in range(steps):
        name = f"v{k}"
        recent = readable[-3:]
        if k < len(inputs_read):  # every input that is read is read early on
            a = inputs_read[k]
        elif rng.random() < 0.7:
            a = recent[int(rng.integers(len(recent)))]
        else:
            a = readable[int(rng.integers(len(readable)))]
        n = size_of[a]
        same = [v for v in readable if size_of[v] == n and v != a]
        choice = rng.choice(["scale", "add", "sub", "neg", "matvec", "slice"])
        if choice in ("add", "sub") and same:
            b = same[int(rng.integers(len(same)))] if rng.random() < 0.8 else a
            program.append([str(choice), name, a, b])
        elif choice == "matvec":
            rows = n if rng.random() < 0.5 else int(rng.integers(1, 5))
            M = np.round(rng.uniform(-2, 2, size=(rows, n)), 2)
            program.append(["matvec", name, M.tolist(), a])
            n = rows
        elif choice == "slice" and n >= 2:
            start = int(rng.integers(0, n - 1))
            stop = int(rng.integers(start + 1, n + 1))
            program.append(["slice", name, a, start, stop])
            n = stop - start
        elif choice == "neg":
            program.append(["neg", name, a])
        else:
            program.append(["scale", name, a, round(float(rng.uniform(-3, 3)), 2)])
        size_of[name] = n
        readable.append(name)
    # every value nothing has read yet is folded into the output (a matrix first when
    # its size differs), so the output depends on every input that is read
    read = {a for _, _, *args in program for a in args if isinstance(a, str)}
    last = readable[-1]
    for v in [v for v in readable[:-1] if v not in read and v not in sizes]:
        if size_of[v] != size_of[last]:
            M = np.round(rng.uniform(-2, 2, size=(size_of[last], size_of[v])), 2)
            program.append(["matvec", f"v{len(program)}", M.tolist(), v])
            v = program[-1][1]
            size_of[v] = size_of[last]
        program.append(["add", f"v{len(program)}", last, v])
        size_of[program[-1][1]] = size_of[last]
        readable.append(program[-1][1])
        last = program[-1][1]
    # the output reads two values when it can: fan-out into the last step
    partner = [v for v in readable[:-1] if size_of[v] == size_of[last]]
    if partner:
        program.append(["add", "out", last, partner[-1]])
        size_of["out"] = size_of[last]
    else:
        program.append(["scale", "out", last, 2.0])
        size_of["out"] = size_of[last]
    return program, sizes, size_of["out"]


def _jacobian_blocks(program, sizes: dict) -> dict:
    """Each input's block of the Jacobian, by running the program on unit vectors."""
    zeros = {k: np.zeros(n) for k, n in sizes.items()}
    blocks = {}
    for name, n in sizes.items():
        columns = []
        for j in range(n):
            values = dict(zeros)
            values[name] = np.eye(n)[j]
            columns.append(run_program(program, values))
        blocks[name] = np.stack(columns, axis=1)
    return blocks


#: Inputs larger than this are not probed with unit vectors (that takes one run of the
#: program per entry): the edge case "a long input" is transposed by the grader's own
#: transposer, which the tests check against the probed Jacobian on every other case.
PROBE_LIMIT = 1000

#: The long input of 8.3's edge case: building its Jacobian (200 000 runs of a program whose
#: first three instructions each touch all 200 000 numbers, or a 200 000 x 200 000
#: identity) does not fit the time and memory limits; transposing the program does, in a
#: few vectors of this size.
LONG_INPUT = 200_000


def transpose_reference(inputs) -> dict:
    """``{input: Jᵢᵀ ct}`` with the Jacobian blocks found by running the program on unit
    vectors (inputs up to PROBE_LIMIT entries; longer ones: the grader's transposer)."""
    program, sizes, cotangent = inputs
    if max(dict(sizes).values()) > PROBE_LIMIT:
        return faulty_transpose(program, dict(sizes), cotangent)
    blocks = _jacobian_blocks(program, dict(sizes))
    ct = np.asarray(cotangent, dtype=float)
    return {name: (block.T @ ct).tolist() for name, block in blocks.items()}


def faulty_transpose(program, sizes, cotangent, *, fault: str = "") -> dict:
    """The grader's own transposer, with one named ``fault`` (or none) put in.

    ``overwrite``: a value used twice keeps only its last cotangent; ``forward``: the
    instructions are walked first to last; ``matvec``: ``M`` instead of ``Mᵀ``; ``sub``:
    ``b`` of ``a - b`` gets ``+ct``; ``slice``: the cotangent lands at index 0 instead of
    ``start``.
    """
    size_of = dict(sizes)
    for op, out, *args in program:  # the sizes of the intermediate values
        if op == "matvec":
            size_of[out] = len(args[0])
        elif op == "slice":
            size_of[out] = args[2] - args[1]
        else:
            size_of[out] = size_of[args[0]]
    ct = {program[-1][1]: np.asarray(cotangent, dtype=float)}

    def send(name, value):
        if fault == "overwrite" or name not in ct:
            ct[name] = value
        else:
            ct[name] = ct[name] + value

    order = program if fault == "forward" else reversed(program)
    for op, out, *args in order:
        g = ct.pop(out, np.zeros(size_of[out]))
        if op == "scale":
            send(args[0], args[1] * g)
        elif op == "add":
            send(args[0], g)
            send(args[1], g)
        elif op == "sub":
            send(args[0], g)
            send(args[1], g if fault == "sub" else -g)
        elif op == "neg":
            send(args[0], -g)
        elif op == "matvec":
            M = np.asarray(args[0], dtype=float)
            send(args[1], (M if fault == "matvec" else M.T) @ g)
        elif op == "slice":
            a, start, stop = args
            full = np.zeros(size_of[a])
            where = 0 if fault == "slice" else start
            full[where : where + (stop - start)] = g
            send(a, full)
    return {name: ct.get(name, np.zeros(n)).tolist() for name, n in sizes.items()}


def _transpose_cases(rng):
    cases = []
    for n_inputs, steps in ((1, 4), (2, 5), (2, 7), (3, 6), (3, 8), (2, 6)):
        program, sizes, m = random_program(rng, n_inputs, steps)
        ct = draw(rng, -1.0, 1.0, m)
        cases.append(
            Case(
                f"random: {n_inputs} input{'s' if n_inputs > 1 else ''}, "
                f"{len(program)} instructions",
                (program, sizes, ct),
            )
        )
    program, sizes, m = random_program(rng, 3, 5, unused=True)
    cases.append(Case("edge: input x2 is never read", (program, sizes, draw(rng, -1, 1, m))))
    fan_out = [["scale", "v0", "x0", 3.0], ["add", "v1", "v0", "v0"], ["sub", "out", "v1", "x0"]]
    cases.append(Case("edge: v0 + v0 (one value, two uses)", (fan_out, {"x0": 2}, [1.0, -2.0])))
    wide = [["matvec", "v0", [[1.0, 2.0, 0.5]], "x0"], ["neg", "out", "v0"]]
    cases.append(Case("edge: a 1x3 matrix (R^3 -> R^1)", (wide, {"x0": 3}, [1.5])))
    sliced = [["slice", "v0", "x0", 1, 3], ["scale", "out", "v0", -1.0]]
    cases.append(Case("edge: a slice [1:3] of a 4-vector", (sliced, {"x0": 4}, [2.0, 5.0])))
    start = int(rng.integers(0, LONG_INPUT - 3))
    c = round(float(rng.uniform(1.5, 3.0)), 2)  # never 1: the output would not depend on x0
    long = [["scale", "v0", "x0", c], ["sub", "v1", "v0", "x0"], ["neg", "v2", "v1"],
            ["slice", "out", "v2", start, start + 3]]  # fmt: skip
    cases.append(
        Case(
            f"edge: x0 of {LONG_INPUT // 1000} 000 numbers, 3 of them read (transpose the program: "
            "its Jacobian is too large to build)",
            (long, {"x0": LONG_INPUT}, draw(rng, -1, 1, 3)),
        )
    )
    return cases


def _transpose_compare(got, expected) -> bool:
    """Every input's cotangent right (extra entries for intermediate values are ignored)."""
    return isinstance(got, dict) and all(k in got and close(got[k], v) for k, v in expected.items())


def _transpose_mistake(fault: str):
    def detect(got, expected, case) -> bool:
        if _transpose_compare(got, expected):
            return False
        wrong = faulty_transpose(*case.inputs, fault=fault)
        return not _transpose_compare(wrong, expected) and _transpose_compare(got, wrong)

    return detect


def _shape_mismatch(message: str) -> bool:
    """numpy's words for a matrix product of shapes that do not fit."""
    return "matmul" in message or "not aligned" in message or "mismatch" in message


def _missing_inputs(got, expected, case) -> bool:
    return isinstance(got, dict) and any(k not in got for k in expected)


TRANSPOSE = Exercise(
    id="8.3",
    title="Transpose a linear program",
    level="hard",
    minutes=45,
    task="transpose_program(program, input_sizes, ct): {input name: cotangent} — the "
    "program's linear map transposed, applied to the output cotangent ct",
    answer="transpose_program",
    cases=_transpose_cases,
    run=_transpose_run,
    reference=transpose_reference,
    compare=_transpose_compare,
    mistakes=(
        Mistake(
            "A value used twice kept only one of its cotangents: the transpose of fan-out is "
            "a sum, so add into the cotangent (ct[a] = ct.get(a, 0) + ...), never assign.",
            _transpose_mistake("overwrite"),
        ),
        Mistake(
            "The instructions were walked first to last. Transposition runs backwards: an "
            "instruction's cotangent is complete only after every later instruction that "
            "reads its value has been transposed.",
            _transpose_mistake("forward"),
        ),
        Mistake(
            "The transpose of out = M @ a sends M.T @ ct to a, not M @ ct.",
            lambda got, exp, case: (is_error(got, "ValueError") and _shape_mismatch(got["message"]))
            or _transpose_mistake("matvec")(got, exp, case),
        ),
        Mistake(
            "out = a - b sends +ct to a and -ct to b: the sign of b was lost.",
            _transpose_mistake("sub"),
        ),
        Mistake(
            "The transpose of a slice a[start:stop] puts ct back at positions start..stop-1 "
            "of a vector of zeros the size of a (it was put at position 0).",
            _transpose_mistake("slice"),
        ),
        Mistake(
            "Every input needs a cotangent in the result, zeros for an input the output "
            "does not depend on.",
            _missing_inputs,
        ),
    ),
    nudges=(
        "Keep a dict of cotangents, starting with {output name: ct}. Walk the program from "
        "the last instruction to the first; each instruction sends its output's cotangent to "
        "its inputs through the transposed operation.",
    ),
    reveal="Transposes: scale by c -> scale by c; a + b -> ct to both; a - b -> ct and -ct; "
    "-a -> -ct; M @ a -> M.T @ ct; a[start:stop] -> zeros with ct at start:stop.",
)


EXERCISES = [NORMS, BATCH_SUM, TRANSPOSE]
