"""What the student's process runs for ch07's exercises: call the answer on the inputs.

Chapter 07 exercises: a NaN gradient fixed, a stable custom jvp, nested checkpointing
under a memory budget, a training run tamed by gradient clipping and guarded against a
poisoned batch.

Each ``*_run(answer, inputs)`` turns the student's answer and one case's inputs into plain
data. Nothing here knows the right result: references and mistakes live in
:mod:`autodiff_lab.grading.exercises.ch07`, which the student's process never imports.
Floating-point warnings are silenced: a NaN or an overflow is an answer to report, not a
crash.

7.1 and 7.2 clear ``x.grad`` after the answer returns, so the gradient graded is the one
``backward`` computes, never one the answer wrote into ``x.grad`` by hand.

7.3's memory is measured here, in the student's process, so it cannot be protected against
a student who rewrites this runner; it is protected against the short ways of lying about
it: :mod:`tracemalloc`'s functions and ``round``/``max`` are bound when this module is
imported (the grader's worker imports it before any cell runs), so patching
``tracemalloc.get_traced_memory`` or ``builtins.round`` in the notebook changes nothing; the
traced memory is also sampled at every call of ``step``, so ``tracemalloc.reset_peak()``
after a plain backprop does not hide its peak; a marker allocated before the answer runs
must still be traced after it, so ``tracemalloc.stop()`` or ``clear_traces()`` is seen; and
``step`` must run at least ``n`` times in this process, so a chain run in a forked child is
seen. Each gives no memory reading (``peak_arrays`` is None, ``memory`` says why).
"""

from __future__ import annotations

import builtins
import gc
import os
import tracemalloc

import numpy as np

from ... import nn, ops, optim
from ...extend import CustomFunction
from ...functional import jvp
from ...graph import topological_order
from ...kinds import is_node
from ...tensor import Tensor
from .common import as_array, number

# Bound now (before any student code runs in the grader's worker): see the module docstring.
_trace_start, _trace_stop = tracemalloc.start, tracemalloc.stop
_traced_memory, _is_tracing = tracemalloc.get_traced_memory, tracemalloc.is_tracing
_traceback_of = tracemalloc.get_object_traceback
_round, _max, _getpid = builtins.round, builtins.max, os.getpid


def _grad_list(t: Tensor):
    return None if t.grad is None else as_array(t.grad).tolist()


# --- 7.1 a norm whose gradient is finite at 0 -------------------------------------------------


def _safe_norm_run(answer, inputs):
    (x,) = inputs
    t = Tensor(np.array(x, dtype=np.float64), requires_grad=True)
    with np.errstate(all="ignore"):
        out = answer(t)
        t.grad = None  # the gradient graded is backward's, not one written by hand
        value = number(out)
        if is_node(out) and getattr(out, "requires_grad", True):
            out.backward()
    return {"value": value, "grad": _grad_list(t)}


# --- 7.2 a stable logsumexp with a custom vjp -------------------------------------------------


def _logsumexp_run(answer, inputs):
    """7.2: the value, the tangent by forward mode (``jvp``: the student's rule), the
    gradient by ``backward()`` (reverse mode, which the package derives from that rule) and
    the recorded nodes. An answer that is not a ``custom_jvp`` with its rule is an error."""
    x, scale, tangent = inputs
    if not (isinstance(answer, CustomFunction) and answer.kind == "custom_jvp"):
        answer(np.array(x, dtype=np.float64))  # a stub's NotImplementedError: not attempted
        kind = answer.kind if isinstance(answer, CustomFunction) else type(answer).__name__
        return {"error": "NotCustomJvp", "message": f"logsumexp is a {kind}, not a custom_jvp"}
    if answer.jvp_rule is None:
        return {"error": "NotCustomJvp", "message": "no rule yet: call logsumexp.defjvp(rule)"}
    x = np.array(x, dtype=np.float64)
    t = Tensor(x.copy(), requires_grad=True)
    with np.errstate(all="ignore"):
        try:
            _value, pushed = jvp(answer, (x,), (np.array(tangent, dtype=np.float64),))
        except ValueError as exc:  # e.g. a tangent shaped like x for a scalar output
            return {"error": "ValueError", "message": str(exc)[:200]}
        out = answer(t)
        t.grad = None  # the gradient graded is backward's, not one written by hand
        value = number(out)
        nodes = len(topological_order(out)) if is_node(out) else 0
        if is_node(out) and out.requires_grad:
            (scale * out).backward()  # the incoming gradient g = scale
    pushed = as_array(pushed)
    tangent_out = float(pushed) if pushed.ndim == 0 else pushed.tolist()
    return {"value": value, "tangent": tangent_out, "grad": _grad_list(t), "nodes": nodes}


# --- 7.3 checkpointing under a memory budget --------------------------------------------------


def _tanh_step(h):
    return 0.9 * ops.tanh(h) + 0.1


def _sin_step(h):
    return h + 0.1 * ops.sin(h)


#: The chains of 7.3: one step h -> step(h), written with the engine's ops.
CHAIN_STEPS = {"0.9 tanh(h) + 0.1": _tanh_step, "h + 0.1 sin(h)": _sin_step}


class _WatchedStep:
    """``step`` for the student, counting its calls in this process and sampling the traced
    memory at each one (the largest sample bounds the peak from below, whatever the answer
    does to tracemalloc's own peak)."""

    def __init__(self, step) -> None:
        self.step, self.calls, self.largest, self.pid = step, 0, 0, _getpid()
        self.__name__ = self.__qualname__ = getattr(step, "__name__", "step")
        self.__doc__ = step.__doc__

    def __call__(self, h):
        if _getpid() == self.pid:
            self.calls += 1
            self.largest = _max(self.largest, _traced_memory()[0])
        return self.step(h)


def _chain_run(answer, inputs):
    name, x, n = inputs
    x = np.array(x, dtype=np.float64)
    step = _WatchedStep(CHAIN_STEPS[name])
    # The collector starts from zero counts, so it runs at the same points of every answer's
    # run; what already exists is frozen first (untraced either way), so that collection
    # costs milliseconds even in a large process (a full one took seconds in the test suite's).
    gc.freeze()
    gc.collect()
    _trace_stop()  # a clean start, even if the notebook left tracemalloc running
    _trace_start()
    try:
        marker = bytearray(64)  # traced from now on: its trace is lost if tracing was reset
        grad = answer(step, x, n)
        kept = _is_tracing() and _traceback_of(marker) is not None
        peak = _max(_traced_memory()[1], step.largest)
    finally:
        _trace_stop()
        gc.unfreeze()
    note = "measured"
    if not kept:
        note = "not measured: tracemalloc was stopped, restarted or cleared during the answer"
    elif step.calls < n:
        note = (
            f"not measured: step ran {step.calls} times in this process, fewer than the "
            f"chain's n = {n} steps"
        )
    # memory in units of one array of the chain (first: the scorecard shows it untruncated)
    return {
        "peak_arrays": _round(peak / x.nbytes, 1) if note == "measured" else None,
        "memory": note,
        "grad": as_array(grad).tolist(),
    }


# --- 7.4 a training run tamed by gradient clipping ---------------------------------------------


def poisoned_targets(y: np.ndarray) -> np.ndarray:
    """7.4's poisoned batch: the targets with one entry infinite (a corrupt label), so the
    loss and the gradient are not finite. One definition, for this runner and the reference."""
    bad = np.array(y, dtype=np.float64)
    bad.flat[0] = np.inf
    return bad


def finite_or_inf(norm: float) -> float:
    """A norm as 7.4 grades it (here and in the reference): NaN and inf both mean "not
    finite", recorded as inf."""
    return norm if np.isfinite(norm) else np.inf


def _clipped_run(answer, inputs):
    """Train the planted network ``steps`` steps with the student's ``clipped_step``; at the
    steps listed in ``poisoned`` the batch's targets are :func:`poisoned_targets`."""
    W1, b1, W2, b2, X, y, lr, max_norm, steps, poisoned = inputs
    first, second = nn.Linear(len(W1), len(W1[0])), nn.Linear(len(W2), len(W2[0]))
    for layer, W, b in ((first, W1, b1), (second, W2, b2)):
        layer.W.data = np.array(W, dtype=np.float64)
        layer.b.data = np.array(b, dtype=np.float64)
    model = nn.Sequential(first, nn.Tanh(), second)
    optimizer = optim.SGD(model.parameters(), lr=lr)
    X, y = np.array(X, dtype=np.float64), np.array(y, dtype=np.float64)
    bad = poisoned_targets(y)
    norms = []
    with np.errstate(all="ignore"):
        for k in range(steps):
            targets = bad if k in poisoned else y
            norms.append(finite_or_inf(number(answer(model, optimizer, X, targets, max_norm))))
    params = [as_array(p.data).ravel() for p in model.parameters()]
    return {"norms": norms, "params": np.concatenate(params).tolist()}
