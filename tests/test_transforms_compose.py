"""Every transformation composed with every other, on random programs, against ``torch.func``.

A differential test. A *program* is a random chain of operations on a vector ``x`` of 3
numbers, drawn from a pool that uses every primitive of the table (and a user primitive
made by ``define_primitive``); each operation is written once against a namespace, so the
same program is built for this package and for PyTorch. A *stage* is one transformation,
``f ↦ T(f)``, given a fixed direction or weighting where it needs one (``jvp`` a tangent,
``vjp`` a cotangent, ``grad`` and ``hessian`` a weighted sum of ``f``'s outputs) so that
``T(f)`` is again a function of ``x`` alone; each has its ``torch.func`` counterpart
(``checkpoint``, ``custom_vjp``/``custom_jvp`` are ``f`` itself there, ``linearize`` is
``jvp``, ``linear_transpose`` of it is ``vjp``, ``stop_gradient`` is ``detach``).

Every pair ``outer ∘ inner`` of stages (and the triples in :data:`CHOSEN_TRIPLES`) is applied to
random programs and must either

- **agree** with PyTorch in float64 (same shape, values within 1e-7 relative), with no
  tracer (``Dual``/``Batched``) and no object-dtype array in the result; or
- **refuse**, raising an error whose message names the transformations involved — only
  for the combinations listed in :data:`REFUSALS` (and every listed one must refuse:
  the table is exact). The design guide (docs/design.md, "What composes, and what
  refuses") shows the same list, and :func:`test_the_guide_lists_what_refuses` checks that
  it does.

Profiles: the default run (``make test``) gives each pair one program and each triple
one program, from a fixed seed, in about half a minute. ``AUTODIFF_LAB_FUZZ=long`` gives
each pair and triple ``AUTODIFF_LAB_FUZZ_PROGRAMS`` programs (default 6) from the seed
``AUTODIFF_LAB_FUZZ_SEED`` (default 23), longer programs, and every triple of stages
instead of the chosen ones::

    AUTODIFF_LAB_FUZZ=long .venv/bin/python -m pytest tests/test_transforms_compose.py -q
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import autodiff_lab as adl
from autodiff_lab import Tensor, ops
from autodiff_lab import functional as F
from autodiff_lab.extend import define_primitive
from autodiff_lab.kinds import Boxed
from autodiff_lab.primitives import ADD_N, DOT, PRIMITIVES, SCATTER_ADD, bind

LONG = os.environ.get("AUTODIFF_LAB_FUZZ", "") == "long"
SEED = int(os.environ.get("AUTODIFF_LAB_FUZZ_SEED", "23"))
PROGRAMS = int(os.environ.get("AUTODIFF_LAB_FUZZ_PROGRAMS", "6")) if LONG else 1
OPS_PER_PROGRAM = 5 if LONG else 3
N = 3  # x has N entries
RTOL, ATOL = 1e-7, 1e-9

# --- the operation pool: every primitive, written once for both engines ------------------

A = np.array([[0.6, -0.3, 0.2], [0.1, 0.5, -0.4], [-0.2, 0.3, 0.7]])


def _user_softsign():
    """A primitive of the user's (define_primitive): x / (1 + |x|), both rules, batched."""

    def slope(x):
        return 1 / (1 + ops.abs(x)) ** 2

    return define_primitive(
        "fuzz_softsign",
        lambda x: x / (1 + np.abs(x)),
        vjp=lambda g, out, x: g * slope(x),
        jvp=lambda t, out, x: t * slope(x),
        batch="broadcasting",
    )


OURS = SimpleNamespace(
    **{name: getattr(ops, name) for name in ("exp", "log", "log1p", "tanh", "sigmoid")},
    **{name: getattr(ops, name) for name in ("softplus", "relu", "sin", "cos", "sqrt", "abs")},
    softmax=lambda h: ops.softmax(h, -1),
    log_softmax=lambda h: ops.log_softmax(h, -1),
    where=ops.where,
    maximum=ops.maximum,
    minimum=ops.minimum,
    cat=lambda parts: adl.concatenate(parts),
    broadcast_to=ops.broadcast_to,
    cross_entropy=lambda z, targets: adl.cross_entropy(z, np.array(targets)),
    add_n=lambda *xs: bind(ADD_N, *xs),
    dot=lambda w, v: bind(DOT, w, v),
    scatter=lambda v: bind(SCATTER_ADD, v, index=np.array([0, 2]), shape=(N,)),
    index=np.array,
    const=lambda a: a,
    user=_user_softsign(),
    stop_gradient=adl.stop_gradient,
)


def torch_namespace():
    import torch
    import torch.nn.functional as tf

    def const(a):
        return torch.as_tensor(a, dtype=torch.float64)

    return SimpleNamespace(
        **{name: getattr(torch, name) for name in ("exp", "log", "log1p", "tanh", "sigmoid")},
        **{name: getattr(torch, name) for name in ("relu", "sin", "cos", "sqrt", "abs")},
        softplus=tf.softplus,
        softmax=lambda h: torch.softmax(h, -1),
        log_softmax=lambda h: torch.log_softmax(h, -1),
        where=lambda c, a, b: torch.where(c, a, b if torch.is_tensor(b) else const(b)),
        maximum=torch.maximum,
        minimum=torch.minimum,
        cat=lambda parts: torch.cat(parts),
        broadcast_to=lambda h, shape: h.expand(*shape),
        cross_entropy=lambda z, targets: tf.cross_entropy(z, torch.tensor(targets)),
        add_n=lambda *xs: sum(xs[1:], xs[0]),
        dot=lambda w, v: w * v,
        scatter=lambda v: torch.stack([v[0], v[0] * 0, v[1]]),
        index=torch.tensor,
        const=const,
        user=lambda h: h / (1 + torch.abs(h)),
        stop_gradient=lambda y: y.detach(),
    )


# name: (K, h, x) -> the next h, shape (N,)
OPS = {
    "add": lambda K, h, x: h + x,
    "sub": lambda K, h, x: x - h * 0.5,
    "mul": lambda K, h, x: h * x,
    "div": lambda K, h, x: h / (1.0 + x * x),
    "neg": lambda K, h, x: -h + 0.25,
    "pow": lambda K, h, x: (K.softplus(h) + 0.5) ** K.tanh(x),
    "pow_const": lambda K, h, x: 0.5 * h**2 - 0.1 * h**3,
    "exp": lambda K, h, x: K.exp(-h * h),
    "log": lambda K, h, x: K.log(h * h + 1.0),
    "log1p": lambda K, h, x: K.log1p(K.sigmoid(h)),
    "tanh": lambda K, h, x: K.tanh(h) * 2.0,
    "softplus": lambda K, h, x: K.softplus(h) - x,
    "relu": lambda K, h, x: K.relu(h) + 0.1 * h,
    "sin_cos": lambda K, h, x: K.sin(h) + K.cos(x * h),
    "sqrt": lambda K, h, x: K.sqrt(h * h + 0.5),
    "abs": lambda K, h, x: K.abs(h) * x,
    "sum": lambda K, h, x: h * h.sum(),
    "mean": lambda K, h, x: h - h.mean(),
    "max": lambda K, h, x: h * 0.5 + h.max(),
    "outer": lambda K, h, x: (h.reshape((N, 1)) * x).T @ h * 0.3,
    "broadcast_to": lambda K, h, x: K.broadcast_to(h, (2, N)).sum(0) * 0.5,
    "getitem": lambda K, h, x: h[K.index([2, 0, 1])] + h[1] * x,
    "scatter_add": lambda K, h, x: K.scatter(h[:2]) + h,
    "concatenate": lambda K, h, x: K.cat([h[:1] * x[2:], h[1:]]),
    "matmul": lambda K, h, x: K.const(A) @ h + h @ K.const(A) * 0.5,
    "softmax": lambda K, h, x: K.softmax(h) * 3.0,
    "log_softmax": lambda K, h, x: K.log_softmax(h) + x,
    "cross_entropy": lambda K, h, x: h * K.cross_entropy(h.reshape((1, N)), [1]),
    "add_n": lambda K, h, x: K.add_n(h, x, h * 0.5),
    "dot": lambda K, h, x: K.dot(h, x) + h,
    "where": lambda K, h, x: K.where(h > 0, h, x * 0.5),
    "double_where": lambda K, h, x: K.where(h > 0.2, K.log(K.where(h > 0.2, h, 1.0)), h),
    "maximum": lambda K, h, x: K.maximum(h, x * 0.5),
    "minimum": lambda K, h, x: K.minimum(h, 0.3 - x),
    "define_primitive": lambda K, h, x: K.user(h) * 2.0,
    "stop_gradient": lambda K, h, x: h * K.stop_gradient(K.sigmoid(h)) + h,
}


def build(program, K):
    """The program as a function of x, for the namespace K (this package's or torch's)."""

    def f(x):
        h = x
        for name in program:
            h = OPS[name](K, h, x)
        return h

    return f


# --- the stages: one transformation each, with its torch.func counterpart ------------------


def weights(shape, const):
    """A fixed weighting of an output of ``shape`` (a cotangent, a scalarization)."""
    size = int(np.prod(shape, dtype=np.int64))
    return const(np.cos(np.arange(size) + 1.0).reshape(shape))


def direction(shape, const):
    """A fixed tangent for an input of ``shape``."""
    size = int(np.prod(shape, dtype=np.int64))
    return const(np.sin(1.3 * np.arange(size) + 0.5).reshape(shape))


def shape_of(y):
    return tuple(ops.shape(y))


def scalarized(f, const, shape=shape_of):
    """x ↦ <W, f(x)>: a scalar function for grad, hessian and hvp."""

    def s(x):
        y = f(x)
        return (y * weights(shape(y), const)).sum()

    return s


def _ours_custom_vjp(f):
    g = adl.custom_vjp(lambda x: f(x))
    g.defvjp(lambda x: (f(x), x), lambda x, ct: (F.vjp(f, x)[1](ct)[0],))
    return g


def _ours_custom_jvp(f):
    g = adl.custom_jvp(lambda x: f(x))
    g.defjvp(lambda primals, tangents: F.jvp(f, primals, tangents))
    return g


def _ours_vjp(f):
    def pulled(x):
        out, vjp_fn = F.vjp(f, x)
        return vjp_fn(weights(shape_of(out), OURS.const))[0]

    return pulled


def _ours_transpose(f):
    def pulled(x):
        out, f_jvp = F.linearize(f, x)
        return F.linear_transpose(f_jvp)(weights(shape_of(out), OURS.const))[0]

    return pulled


SCALES = np.array([[1.0, 0.5, -1.0], [0.7, -1.2, 0.4]])  # two examples made from x
OFFSETS = np.array([[0.1, -0.2, 0.3], [-0.3, 0.2, 0.0]])

OUR_STAGES = {
    "vmap": lambda f: lambda x: F.vmap(f)(x * SCALES + OFFSETS),
    "vmap_in_axes": lambda f: lambda x: F.vmap(lambda x, s: f(x * s), in_axes=(None, 0))(x, SCALES),
    "vmap_closure": lambda f: lambda x: F.vmap(lambda s: f(x * s))(SCALES),
    "jvp": lambda f: lambda x: F.jvp(f, (x,), (direction(shape_of(x), OURS.const),))[1],
    "vjp": _ours_vjp,
    "grad": lambda f: F.grad(scalarized(f, OURS.const)),
    "grad_closure": lambda f: lambda x: F.grad(scalarized(lambda y: f(y * x), OURS.const))(x),
    "jacfwd": lambda f: F.jacfwd(f),
    "jacrev": lambda f: F.jacrev(f),
    "jacfwd_vectorized": lambda f: F.jacfwd(f, vectorize=True),
    "jacrev_vectorized": lambda f: F.jacrev(f, vectorize=True),
    "hessian": lambda f: F.hessian(scalarized(f, OURS.const)),
    "hvp": lambda f: (
        lambda x: F.hvp(scalarized(f, OURS.const), x, direction(shape_of(x), OURS.const))
    ),
    "linearize": lambda f: lambda x: F.linearize(f, x)[1](direction(shape_of(x), OURS.const)),
    "linear_transpose": _ours_transpose,
    "checkpoint": lambda f: adl.checkpoint(f),
    "custom_vjp": _ours_custom_vjp,
    "custom_jvp": _ours_custom_jvp,
    "stop_gradient": lambda f: lambda x: f(x) * adl.stop_gradient(ops.sigmoid(f(x))) + f(x),
}
STAGES = list(OUR_STAGES)


def torch_stages():
    import torch

    tf = torch.func
    K = torch_namespace()

    def tshape(y):
        return tuple(y.shape)

    def jvp(f):
        return lambda x: tf.jvp(f, (x,), (direction(tshape(x), K.const),))[1]

    def vjp(f):
        def pulled(x):
            out, vjp_fn = tf.vjp(f, x)
            return vjp_fn(weights(tshape(out), K.const))[0]

        return pulled

    def scalar(f):
        return scalarized(f, K.const, tshape)

    return {
        "vmap": lambda f: lambda x: tf.vmap(f)(x * K.const(SCALES) + K.const(OFFSETS)),
        "vmap_in_axes": lambda f: (
            lambda x: tf.vmap(lambda x, s: f(x * s), in_dims=(None, 0))(x, K.const(SCALES))
        ),
        "vmap_closure": lambda f: lambda x: tf.vmap(lambda s: f(x * s))(K.const(SCALES)),
        "jvp": jvp,
        "vjp": vjp,
        "grad": lambda f: tf.grad(scalar(f)),
        "grad_closure": lambda f: lambda x: tf.grad(scalar(lambda y: f(y * x)))(x),
        "jacfwd": tf.jacfwd,
        "jacrev": tf.jacrev,
        "jacfwd_vectorized": tf.jacfwd,
        "jacrev_vectorized": tf.jacrev,
        "hessian": lambda f: tf.hessian(scalar(f)),
        "hvp": lambda f: jvp(tf.grad(scalar(f))),
        "linearize": jvp,
        "linear_transpose": vjp,
        "checkpoint": lambda f: f,
        "custom_vjp": lambda f: f,
        "custom_jvp": lambda f: f,
        "stop_gradient": lambda f: lambda x: f(x) * torch.sigmoid(f(x)).detach() + f(x),
    }


# The combinations (outer, inner) that refuse, each with the words its message must hold.
# Everything else must agree with torch.func. docs/design.md shows the same table.
REFUSALS: dict[tuple[str, ...], str] = {
    # the tangent graph linearize records would multiply its own tangent into itself
    ("linearize", "grad_closure"): "closes over linearize's own argument",
    ("linear_transpose", "grad_closure"): "closes over linearize's own argument",
    # a batch of tangents inside a dual that the inner gradient's graph closes over
    ("jacfwd_vectorized", "grad_closure"): "whose tangent is a vmap batch",
}

# Names a refusal may use for each stage (the transformation and its family).
NAMES = {
    "vmap": ("vmap", "batch"),
    "vmap_in_axes": ("vmap", "batch"),
    "vmap_closure": ("vmap", "batch"),
    "grad_closure": ("grad", "reverse mode"),
    "jvp": ("jvp", "forward mode", "dual"),
    "vjp": ("vjp", "reverse mode"),
    "grad": ("grad", "reverse mode"),
    "jacfwd": ("jacfwd", "forward mode"),
    "jacrev": ("jacrev", "reverse mode"),
    "jacfwd_vectorized": ("jacfwd", "vectorize", "vmap"),
    "jacrev_vectorized": ("jacrev", "vectorize", "vmap"),
    "hessian": ("hessian", "forward over reverse", "forward mode"),
    "hvp": ("hvp", "forward over reverse"),
    "linearize": ("linearize",),
    "linear_transpose": ("linear_transpose", "linearize", "transpose"),
    "checkpoint": ("checkpoint",),
    "custom_vjp": ("custom_vjp",),
    "custom_jvp": ("custom_jvp",),
    "stop_gradient": ("stop_gradient",),
}

CHOSEN_TRIPLES = [
    ("vmap", "jacfwd", "grad"),
    ("vmap", "hvp", "checkpoint"),
    ("vmap", "jacrev", "custom_jvp"),
    ("vmap", "vmap", "custom_vjp"),
    ("vmap", "vmap_in_axes", "jvp"),
    ("grad", "vmap_in_axes", "checkpoint"),
    ("jvp", "vmap", "grad"),
    ("jvp", "hvp", "stop_gradient"),
    ("jacfwd", "jacrev", "vmap"),
    ("jacrev", "jacfwd", "custom_vjp"),
    ("hessian", "vmap", "stop_gradient"),
    ("hessian", "checkpoint", "custom_jvp"),
    ("grad", "jvp", "jacrev_vectorized"),
    ("linearize", "grad", "vmap"),
    ("linear_transpose", "jvp", "custom_vjp"),
    ("vjp", "vmap_in_axes", "hessian"),
    ("jacfwd_vectorized", "grad", "checkpoint"),
    ("jacrev_vectorized", "vmap", "custom_jvp"),
    ("jacrev", "jacrev_vectorized", "checkpoint"),  # (a batch of cotangents in a checkpoint)
]
TRIPLES = list(itertools.product(STAGES, repeat=3)) if LONG else CHOSEN_TRIPLES

PAIRS = list(itertools.product(STAGES, repeat=2))


_POSITION: dict[tuple[str, ...], int] = {}
for _k, _combo in enumerate(PAIRS + TRIPLES):
    _POSITION.setdefault(_combo, _k)


def programs_for(combo: tuple[str, ...]) -> list[list[str]]:
    """The random programs a combination is tried on (the same in every run of a profile).
    Over the default run every operation of the pool is used: program k starts at op k."""
    names = sorted(OPS)
    k = _POSITION.get(combo, 0)
    rng = np.random.default_rng([SEED, k])
    out = []
    for j in range(PROGRAMS):
        first = names[(k * PROGRAMS + j) % len(names)]
        rest = list(rng.choice(names, OPS_PER_PROGRAM - 1))
        out.append([first, *rest])
    return out


def x0_for(combo: tuple[str, ...], j: int) -> np.ndarray:
    rng = np.random.default_rng([SEED, len(combo), j, *(STAGES.index(s) for s in combo)])
    return rng.uniform(0.3, 1.4, N) * rng.choice([-1.0, 1.0], N)


# --- running one combination -----------------------------------------------------------------


# Stages that return what f returns when nothing is being differentiated: on plain x
# they give f(x) itself, which is a constant Tensor when the program uses concatenate or
# cross_entropy (those make Tensors of arrays)
TRANSPARENT = {"checkpoint", "custom_vjp", "custom_jvp", "stop_gradient"}


def no_tracer_inside(x, combo):
    """The result as a float array, after checking that no tracer, no graph value (but
    f's own constants, see TRANSPARENT) and no object array leaked."""
    if isinstance(x, tuple | list):
        raise AssertionError(f"a {type(x).__name__} came back where one array was expected")
    if set(combo) <= TRANSPARENT and isinstance(x, Tensor) and not x.requires_grad:
        x = x.data
    assert not isinstance(x, Boxed), f"a {type(x).__name__} leaked out: {x!r:.100}"
    arr = np.asarray(x)
    assert arr.dtype.kind == "f", f"result of dtype {arr.dtype}: {arr!r:.100}"
    return arr


def run(combo: tuple[str, ...], program: list[str], x0: np.ndarray, torch):
    """'agree' or ('refuse', message); fails on a wrong value, a leak or an unclear error."""
    ours, theirs = build(program, OURS), build(program, torch_namespace())
    tstages = torch_stages()
    for name in reversed(combo):  # combo[0] is the outermost
        ours, theirs = OUR_STAGES[name](ours), tstages[name](theirs)
    want = theirs(torch.tensor(x0)).detach().numpy(force=True)  # (force: a ZeroTensor too)
    where = f"{' ∘ '.join(combo)} on program {program} at x = {x0.tolist()}"
    try:
        got = ours(x0.copy())
    except (NotImplementedError, TypeError, ValueError) as e:
        message = str(e)
        named = [s for s in combo if any(w in message.lower() for w in NAMES[s])]
        assert named, f"{where}: refused with a message naming none of {combo}: {message}"
        return ("refuse", message)
    got = no_tracer_inside(got, combo)
    assert got.shape == want.shape, f"{where}: shape {got.shape}, torch.func gives {want.shape}"
    scale = 1.0 + np.max(np.abs(want), initial=0.0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale, err_msg=where)
    return "agree"


def check(combo: tuple[str, ...], torch):
    outcomes = []
    for j, program in enumerate(programs_for(combo)):
        outcomes.append(run(combo, program, x0_for(combo, j), torch))
    refused = [o for o in outcomes if o != "agree"]
    if combo in REFUSALS:
        assert len(refused) == len(outcomes), f"{combo} is listed as refusing but agreed"
        for _, message in refused:
            assert REFUSALS[combo] in message, f"{combo}: {message}"
    else:
        assert not refused, f"{combo} refused: {refused[0][1]}"


@pytest.mark.parametrize("combo", PAIRS, ids=["∘".join(c) for c in PAIRS])
def test_every_pair_agrees_with_torch_func_or_refuses_clearly(combo, torch):
    check(combo, torch)


@pytest.mark.parametrize("combo", TRIPLES, ids=["∘".join(c) for c in TRIPLES])
def test_chosen_triples_agree_with_torch_func_or_refuse_clearly(combo, torch):
    check(combo, torch)


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_operation_alone_agrees_with_torch(name, torch):
    """The pool itself: each operation under vmap, grad and jacfwd equals torch's."""
    x0 = np.array([0.7, -1.1, 0.4])
    for combo in (("vmap",), ("grad",), ("jacfwd",)):
        assert run(combo, [name, name], x0, torch) == "agree"


def test_the_pool_uses_every_primitive():
    """Every registered primitive is recorded by some operation of the pool (a new
    primitive fails here until an operation uses it)."""
    from autodiff_lab.graph import topological_order

    recorded = set()
    for name in OPS:
        x = Tensor(np.array([0.7, -1.1, 0.4]), requires_grad=True)
        out = build([name], OURS)(x)
        recorded |= {n._fn.name for n in topological_order(out) if n._fn is not None}
    missing = sorted(set(PRIMITIVES) - recorded)
    assert not missing, f"add an operation using {missing} to OPS"


def test_default_run_uses_every_operation():
    used = {op for combo in PAIRS for program in programs_for(combo) for op in program}
    assert used == set(OPS)


# --- the design guide lists the same refusals ---------------------------------------------


DESIGN_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def guide_refusals() -> set[tuple[str, ...]]:
    text = DESIGN_GUIDE.read_text(encoding="utf-8")
    start = text.index("<!-- compose-refusals -->")
    end = text.index("<!-- /compose-refusals -->")
    rows = re.findall(r"^\| `([^`]+)` \|", text[start:end], flags=re.MULTILINE)
    return {tuple(r.split(" ∘ ")) for r in rows}


def test_the_guide_lists_what_refuses():
    assert guide_refusals() == set(REFUSALS)


def test_the_guides_counts_are_this_tests():
    """The design guide's numbers (stages, pairs, chosen triples) are this module's."""
    text = DESIGN_GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## What composes") : text.index("<!-- /compose-refusals -->")]
    section = " ".join(section.split())  # (lines wrap anywhere)
    claim = f"{len(STAGES) ** 2} ordered pairs of its {len(STAGES)} stages"
    assert claim in section, claim
    assert f"{len(CHOSEN_TRIPLES)} chosen triples" in section
    for name in STAGES:
        shown = name.replace("_vectorized", "").replace("_in_axes", "").replace("_closure", "")
        assert f"`{shown}`" in section, f"docs/design.md's list of stages misses {name}"
