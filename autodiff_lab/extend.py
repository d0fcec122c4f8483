"""Extending the engine: new primitives, custom gradient rules, stop-gradient, checkpointing.

Everything here is built on the one mechanism the engine already has, the
:class:`~autodiff_lab.primitives.Primitive` entry (forward, vjp rules, jvp rules, rule text,
display, domain) applied by :func:`~autodiff_lab.primitives.bind`. So whatever is defined
here works on floats, numpy arrays, ``Value``, ``Tensor`` and ``Dual``, in ``backward()``,
in every transformation of :mod:`autodiff_lab.functional`, and is drawn and stepped like a
built-in operation.

- :func:`define_primitive`: a new operation from its forward function and its rules
  (``rule(g, out, *inputs)`` per input for reverse mode, ``rule(t, out, *inputs)`` for
  forward mode), exactly as the built-ins in ``primitives.py`` are written.
- :func:`custom_vjp` / :func:`custom_jvp`: a Python function whose *own* graph is not
  recorded; its gradient comes from rules the user gives (``f.defvjp(fwd, bwd)``,
  ``f.defjvp(jvp_rule)``, in the style of ``jax.custom_vjp`` / ``jax.custom_jvp`` and
  ``torch.autograd.Function``).
- :func:`stop_gradient`: the value with no derivative (``.detach()`` for every kind).
- :func:`checkpoint`: ``checkpoint(f)(*args)`` records one node; ``f`` is run again in
  the backward pass.

**Registry decision.** User primitives are *not* added to
:data:`autodiff_lab.primitives.PRIMITIVES` (the built-in table, which the gradient-check
tests iterate and which must list only tested operations); they live in
:data:`USER_PRIMITIVES`. A name already used by a built-in is refused; defining a user
primitive again under its own name replaces it (re-running a notebook cell).
"""

from __future__ import annotations

import inspect
import numbers
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import graph, ops
from .dual import Dual, new_tag
from .kinds import (
    Boxed,
    Node,
    Tracer,
    constant,
    is_dual,
    is_node,
    stop_gradient,  # noqa: F401  (part of this module's API)
    zeros_like,
)
from .methods import _shape
from .primitive import PRIMITIVES, bind
from .primitives import EVERYWHERE, Domain, Primitive
from .tensor import Tensor, stack
from .types import Fn, Operand, Operands, Params, Rule, Shape
from .value import Value

__all__ = [
    "define_primitive", "custom_vjp", "custom_jvp", "stop_gradient", "checkpoint",
    "USER_PRIMITIVES", "CustomFunction",
]  # fmt: skip

USER_PRIMITIVES: dict[str, Primitive] = {}  # name -> entry, for primitives made here
# What one call of a custom function or a checkpoint keeps for its rules, as a node parameter
# (``_cell``): its output, its residuals, the graph values it closes over.
Cell = dict[str, Any]


# --- helpers ------------------------------------------------------------------------------


def _plain_result(out: Operand, inputs: Operands) -> Operand:
    """A user function's result on plain inputs, as the engine holds it: a graph value
    it made (``concatenate`` of arrays gives a constant ``Tensor``) as its data, and a
    numpy scalar for Python-number inputs as a Python float (``Value`` holds floats:
    ``np.exp(2.0)`` would otherwise put a numpy scalar in it)."""
    out = constant(out)
    if isinstance(out, np.generic | np.ndarray) and np.ndim(out) == 0:
        if all(isinstance(x, numbers.Real) and not isinstance(x, np.ndarray) for x in inputs):
            return float(out)
    return out


def new_leaf(
    x: Operand, requires_grad: bool = True, scalar_as_value: bool = True
) -> Value | Tensor:
    """A plain value as a new graph leaf: a ``Value`` for a number (every Value takes
    part in backward), else a ``Tensor`` (also for a number, with ``scalar_as_value=False``).
    The one leaf maker: the transformations (``functional._leaf``) and checkpoint use it."""
    if scalar_as_value and isinstance(x, numbers.Real):
        return Value(float(x))
    return Tensor(x, requires_grad=requires_grad)


def _inner(a: Operand, b: Operand) -> Operand:
    """``Σ a·b`` over all entries (a plain product for scalars); works on traced values."""
    prod = a * b
    return ops.sum(prod) if _shape(prod) else prod


def _stack(values: list[Operand]) -> Operand:
    """``values`` (numbers, arrays, graph values, duals or ``vmap`` batches, all of one
    shape) stacked along a new axis 0: a plain array when none is traced."""
    if any(isinstance(v, Boxed) for v in values):
        return stack(values)
    return np.stack([np.asarray(v, dtype=np.result_type(v, float)) for v in values])


def _assemble(entries: list[Operand], shape: Shape) -> Operand:
    """Numbers (one per entry of ``shape``, in C order) as one array of ``shape``."""
    return ops.reshape(_stack(entries), shape) if shape else entries[0]


def _batch_by_loop(prim: Primitive) -> Rule:
    """A batching rule for ``vmap`` that applies ``prim`` to one example at a time and
    stacks the results (batch axis first): always right, as slow as a Python loop. The
    entries made here (custom rules, checkpoints) get it; a user primitive can do better
    with ``batch="broadcasting"`` or a rule of its own."""

    def rule(args: Operands, batched: Sequence[bool], **params: Any) -> Operand:
        size = next(ops.shape(a)[0] for a, b in zip(args, batched) if b)
        examples = ([a[i] if b else a for a, b in zip(args, batched)] for i in range(size))
        return _stack([bind(prim, *example, **params) for example in examples])

    return rule


# --- define_primitive -----------------------------------------------------------------------


def _arity(forward: Fn, vjp: Sequence[Rule] | None, jvp: Sequence[Rule] | None) -> int:
    """The number of inputs: the positional parameters of ``forward`` without a default
    (or, for ``forward(*xs)`` and builtins, the number of rules given)."""
    rules = len(vjp) if vjp is not None else len(jvp) if jvp is not None else 1
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return rules
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return rules
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


# What needs an entry's rules of each mode (the error of a rule that was not given).
_NEEDED_BY = {
    "vjp": "reverse mode (backward(), grad, vjp, jacrev) needs its vjp rules: pass vjp=...",
    "jvp": "forward mode (Dual, jvp, jacfwd, hessian) needs its jvp rules: pass jvp=...",
}


def _as_rules(name: str, rules: tuple[Rule, ...] | None, n: int, mode: str) -> tuple[Rule, ...]:
    """The entry's ``mode`` rules, one per input (:func:`_checked`): those given, each
    checking the shape of its result, or, when none are given, rules that raise when needed."""
    if rules is not None and len(rules) != n:
        raise ValueError(
            f"define_primitive {name!r}: {len(rules)} {mode} rule(s) given, but the op has "
            f"{n} input(s) (one rule per input)"
        )
    for i, r in enumerate(rules or ()):
        if not callable(r):
            raise TypeError(f"define_primitive {name!r}: {mode} rule {i} is not callable: {r!r}")
    return tuple(_checked(name, mode, i, None if rules is None else rules[i]) for i in range(n))


def _checked(name: str, mode: str, i: int, rule: Rule | None) -> Rule:
    """``rule`` (for input ``i``, called with ``d``: the gradient or the tangent), its result
    checked to have the shape of that input (a vjp rule's gradient share) or of the output (a
    jvp rule's tangent; None: no derivative). Without a rule (None) it raises when called,
    naming the op and what needed the rule."""

    def checked(d: Operand, out: Operand, *inputs: Operand, **params: Any) -> Operand:
        if rule is None:
            raise NotImplementedError(
                f"primitive {name!r} was defined without a {mode} rule; {_NEEDED_BY[mode]}"
            )
        result = rule(d, out, *inputs, **params)
        if mode == "jvp":
            _check_tangent(name, result, out)
        elif result is not None and _shape(result) != _shape(inputs[i]):
            raise ValueError(
                f"{name}: the gradient share (vjp rule) for input {i} has shape "
                f"{_shape(result)}, but that input has shape {_shape(inputs[i])} (sum a "
                "broadcast share back with ops.unbroadcast(share, input))"
            )
        return result

    return checked


def _check_tangent(name: str, tangent: Operand, out: Operand) -> None:
    """A jvp rule's result must have the shape of the output."""
    if tangent is not None and _shape(tangent) != _shape(out):
        raise ValueError(
            f"{name}: the jvp rule returned a tangent of shape {_shape(tangent)}, but the "
            f"output has shape {_shape(out)} (stretch a broadcast input's tangent with "
            "ops.broadcast_to(tangent, ops.shape(out)))"
        )


def _domain(name: str, domain: Domain | tuple[str, Fn] | None) -> Domain:
    if domain is None:
        return EVERYWHERE
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, tuple) and len(domain) == 2 and callable(domain[1]):
        return Domain(domain[0], outside=domain[1])
    raise TypeError(
        f"define_primitive {name!r}: domain must be None, a primitives.Domain or a pair "
        f"(text, outside) with outside(x) True where the op is undefined; got {domain!r}"
    )


def define_primitive(
    name: str,
    forward: Fn,
    vjp: Rule | Sequence[Rule] | None = None,
    jvp: Rule | Sequence[Rule] | None = None,
    *,
    rule: str = "",
    domain: Domain | tuple[str, Fn] | None = None,
    display: str | None = None,
    batch: Rule | str | None = None,
) -> Fn:
    """A new operation ``op(*inputs, **params)`` for floats, arrays, ``Value``, ``Tensor``
    and ``Dual``, from its forward function and its derivative rules.

    - ``forward(*inputs, **params)`` computes the value from plain numbers or arrays;
    - ``vjp``: one rule per input, ``rule(g, out, *inputs, **params)`` = ``g · ∂out/∂input``
      summed to the input's shape (reverse mode); a single callable for a one-input op;
    - ``jvp``: one rule per input, ``rule(t, out, *inputs, **params)`` = ``∂out/∂input · t``
      (forward mode).

    Rules written with ordinary operators and :mod:`autodiff_lab.ops` functions can be
    differentiated again (``grad`` of ``grad``). A missing rule raises when it is needed,
    naming the op; a rule whose result has the wrong shape raises naming the op, the input
    and both shapes. ``rule`` is the derivative as text (the steppers show it), ``display``
    the text in the drawings (default: ``name``), ``domain`` where the op is defined (a
    :class:`~autodiff_lab.primitives.Domain` or ``(text, outside)``; checked on the first
    input). ``batch`` is the op's batching rule for ``vmap`` (see
    :mod:`autodiff_lab.batching`; without one, ``vmap`` refuses the op, naming it). The
    entry is ``op.primitive``; it is kept in :data:`USER_PRIMITIVES`, not in the built-in
    table.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"define_primitive: name must be a Python identifier, got {name!r}")
    if name in PRIMITIVES:
        raise ValueError(
            f"define_primitive: {name!r} is a built-in primitive; choose another name "
            f"(built-ins: {', '.join(sorted(PRIMITIVES))})"
        )
    if not callable(forward):
        raise TypeError(f"define_primitive {name!r}: forward must be callable, got {forward!r}")
    if vjp is None and jvp is None:
        raise ValueError(
            f"define_primitive {name!r}: give at least one of vjp= (reverse mode) and jvp= "
            "(forward mode); an op without rules cannot be differentiated"
        )
    vjp_t = None if vjp is None else ((vjp,) if callable(vjp) else tuple(vjp))
    jvp_t = None if jvp is None else ((jvp,) if callable(jvp) else tuple(jvp))
    n = _arity(forward, vjp_t, jvp_t)

    def plain_forward(*inputs: Operand, **params: Any) -> Operand:
        if len(inputs) != n:
            raise TypeError(f"{name}: takes {n} input(s), got {len(inputs)}")
        return _plain_result(forward(*inputs, **params), inputs)

    plain_forward.__name__ = plain_forward.__qualname__ = name
    prim = Primitive(
        name,
        plain_forward,
        vjp=_as_rules(name, vjp_t, n, "vjp"),
        jvp=_as_rules(name, jvp_t, n, "jvp"),
        rule=rule or f"{name}: derivative rules given by the user",
        domain=_domain(name, domain),
        display=display or name,
        batch=batch,
    )
    USER_PRIMITIVES[name] = prim

    def op(*inputs: Operand, **params: Any) -> Operand:
        if len(inputs) != n:
            raise TypeError(f"{name}: takes {n} input(s), got {len(inputs)}")
        return bind(prim, *inputs, **params)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{name}(x) of a number, an array or a traced value.  {prim.rule}"
    op.primitive = prim  # type: ignore[attr-defined]  # (a function takes attributes)
    return op


# --- custom_vjp / custom_jvp --------------------------------------------------------------


class CustomFunction:
    """A function whose derivative comes from rules the user gives, not from its code.

    Made by :func:`custom_vjp` or :func:`custom_jvp`. Calling it on plain numbers or
    arrays just runs ``fun``. On graph values it records ONE node (the function's own
    operations are not recorded): ``fun`` runs on the plain values, and backward applies
    the user's rule.

    - ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` runs in the forward pass
      (its residuals are kept with the node); ``bwd(residuals, g) -> (ct_1, ..., ct_n)``,
      one cotangent per positional argument, each shaped like its argument (``None``: no
      gradient). A function of one argument may return the cotangent alone.
    - ``f.defjvp(jvp_rule)``: ``jvp_rule(primals, tangents) -> (out, tangent_out)``.

    Keyword arguments are passed to ``fun``, ``fwd`` and the jvp rule unchanged (never
    differentiated). With only a vjp, forward mode builds ``J·t`` from one ``bwd`` call per
    output entry; with only a jvp, reverse mode builds ``gᵀJ`` from one jvp call per input
    entry (both exact, costlier for large arrays: give both rules then).

    Grad of grad: under ``backward(create_graph=True)`` or ``grad(grad(f))`` the residuals
    are recomputed from the inputs' graph values (``fwd`` runs on them) and ``bwd`` runs on
    graph values, so rules written with differentiable ops (``ops.exp``, ``*``…) are
    differentiated again.
    """

    def __init__(self, fun: Fn, kind: str) -> None:
        self.fun = fun
        self.kind = kind
        self.name = getattr(fun, "__name__", "custom")
        self.fwd: Fn | None = None
        self.bwd: Fn | None = None
        self.jvp_rule: Fn | None = None
        self.__name__ = self.name
        self.__doc__ = fun.__doc__
        self.__wrapped__ = fun
        self.primitive = Primitive(
            self.name,
            self._forward,
            vjp_all=self._vjp_all,
            jvp_all=self._jvp_all,
            rule=f"{kind}: the derivative rule {self.name} was given",
            display=lambda params: f"{self.name}",
        )
        self.primitive.batch = _batch_by_loop(self.primitive)

    def defvjp(self, fwd: Fn, bwd: Fn) -> None:
        """Set the reverse-mode rule: ``fwd(*args) -> (out, res)``, ``bwd(res, g) -> cts``."""
        if not callable(fwd) or not callable(bwd):
            raise TypeError(f"{self.kind} {self.name}: defvjp needs two functions (fwd, bwd)")
        self.fwd, self.bwd = fwd, bwd

    def defjvp(self, jvp_rule: Fn) -> Fn:
        """Set the forward-mode rule ``jvp_rule(primals, tangents) -> (out, tangent_out)``
        (usable as a decorator)."""
        if not callable(jvp_rule):
            raise TypeError(f"{self.kind} {self.name}: defjvp needs a function")
        self.jvp_rule = jvp_rule
        return jvp_rule

    def __call__(self, *args: Operand, **kwargs: Any) -> Operand:
        if self.fwd is None and self.jvp_rule is None:
            raise RuntimeError(
                f"{self.kind} {self.name}: no rule defined yet; call "
                f"{self.name}.defvjp(fwd, bwd) or {self.name}.defjvp(rule) first"
            )
        if not any(isinstance(a, Boxed) for a in args):
            return self.fun(*args, **kwargs)
        # _cell: what this call keeps for its rules (its output, its residuals), with the node
        return bind(self.primitive, *args, _cell={}, _kwargs=kwargs)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}>"

    # --- the entry's forward and rules ---

    def _forward(self, *xs: Operand, _cell: Cell, _kwargs: Params) -> Operand:
        if self.fwd is None:
            return _plain_result(self.fun(*xs, **_kwargs), xs)
        out, _cell["res"] = self.fwd(*xs, **_kwargs)
        _cell["out"] = _plain_result(out, xs)
        return _cell["out"]

    def _residuals(self, out: Operand, inputs: Operands, cell: Cell, kwargs: Params) -> Any:
        if cell.get("out") is out and not any(isinstance(x, Boxed) for x in inputs):
            return cell["res"]  # saved in the forward pass
        assert self.fwd is not None
        return self.fwd(*inputs, **kwargs)[1]  # graph values: recomputed, differentiable

    def _cotangents(self, res: Any, g: Operand, inputs: Operands) -> list[Operand]:
        assert self.bwd is not None
        cts = self.bwd(res, g)
        if len(inputs) == 1 and not isinstance(cts, tuple | list):
            cts = (cts,)
        if not isinstance(cts, tuple | list):
            raise TypeError(
                f"{self.kind} {self.name}: bwd must return a tuple of {len(inputs)} "
                f"cotangents (one per argument), got {type(cts).__name__}"
            )
        if len(cts) != len(inputs):
            raise ValueError(
                f"{self.kind} {self.name}: bwd returned {len(cts)} cotangent(s) for "
                f"{len(inputs)} argument(s) (shapes {[_shape(x) for x in inputs]})"
            )
        for i, (ct, x) in enumerate(zip(cts, inputs)):
            if ct is not None and _shape(ct) != _shape(x):
                raise ValueError(
                    f"{self.kind} {self.name}: bwd's cotangent for argument {i} has shape "
                    f"{_shape(ct)}, but that argument has shape {_shape(x)}"
                )
        return list(cts)

    def _user_jvp(self, inputs: Operands, tangents: Operands, kwargs: Params) -> Operand:
        assert self.jvp_rule is not None
        result = self.jvp_rule(tuple(inputs), tuple(tangents), **kwargs)
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise TypeError(
                f"{self.kind} {self.name}: the jvp rule must return (out, tangent_out), "
                f"got {type(result).__name__}"
            )
        return result[1]

    def _vjp_all(
        self, g: Operand, out: Operand, *inputs: Operand, _cell: Cell, _kwargs: Params
    ) -> list[Operand]:
        if self.bwd is not None:
            return self._cotangents(self._residuals(out, inputs, _cell, _kwargs), g, inputs)
        if self.jvp_rule is None:
            raise NotImplementedError(f"{self.kind} {self.name}: no vjp or jvp rule")
        shares = []  # gᵀJ from one jvp per input entry: share_k[e] = <g, J e>
        for k, x in enumerate(inputs):
            entries = []
            for e in ops.basis(_shape(x)):
                tangents = [zeros_like(xi) if i != k else e for i, xi in enumerate(inputs)]
                entries.append(_inner(g, self._user_jvp(inputs, tangents, _kwargs)))
            shares.append(_assemble(entries, _shape(x)))
        return shares

    def _jvp_all(
        self, tangents: Operands, out: Operand, *inputs: Operand, _cell: Cell, _kwargs: Params
    ) -> Operand:
        if self.jvp_rule is not None:
            full = [zeros_like(x) if t is None else t for t, x in zip(tangents, inputs)]
            tangent = self._user_jvp(inputs, full, _kwargs)
            _check_tangent(f"{self.kind} {self.name}", tangent, out)
            return tangent
        # J t from one bwd per output entry: (J t)[i] = <e_i J, t>
        res = self._residuals(out, inputs, _cell, _kwargs)
        entries = []
        for e in ops.basis(_shape(out)):
            total: Operand = 0.0
            for share, t in zip(self._cotangents(res, e, inputs), tangents):
                if share is not None and t is not None:
                    total = total + _inner(share, t)
            entries.append(total)
        return _assemble(entries, _shape(out))


def custom_vjp(fun: Fn) -> CustomFunction:
    """Decorator: ``fun`` gets its reverse-mode rule from ``fun.defvjp(fwd, bwd)``.

    As ``jax.custom_vjp``: ``fwd(*args) -> (out, residuals)``, ``bwd(residuals, g) ->
    tuple of cotangents`` (one per positional argument). As ``torch.autograd.Function``:
    ``fwd`` is ``forward`` with ``ctx.save_for_backward`` (the residuals), ``bwd`` is
    ``backward``. See :class:`CustomFunction`.
    """
    return CustomFunction(fun, "custom_vjp")


def custom_jvp(fun: Fn) -> CustomFunction:
    """Decorator: ``fun`` gets its forward-mode rule from ``fun.defjvp(rule)``.

    As ``jax.custom_jvp``: ``rule(primals, tangents) -> (out, tangent_out)``; reverse mode
    is derived from it (one rule call per input entry). See :class:`CustomFunction`.
    """
    return CustomFunction(fun, "custom_jvp")


# --- checkpoint ----------------------------------------------------------------------------


def _ckpt_forward(*xs: Operand, f: Fn, n_args: int, _cell: Cell) -> Operand:
    if "out" in _cell:  # computed already by checkpoint(f), which was looking for captures
        return _cell.pop("out")
    with graph.no_grad():  # (a replay of the graph binds the node again)
        out = f(*(_constant_node(x) for x in xs[:n_args]))
    return _plain_result(out, xs[:n_args])


def _constant_node(x: Operand) -> Operand:
    """A plain value as a graph value that needs no gradient, so ``f`` may use methods
    (``x.tanh()``); traced values as they are."""
    return x if isinstance(x, Boxed) else new_leaf(x, requires_grad=False)


def _rerun(f: Fn, inputs: Operands, n_args: int, cell: Cell) -> tuple[list[Node], Operand]:
    """``f`` run again with recording on, from fresh leaves holding its arguments' data: the
    nodes that stand for the checkpoint's inputs (those leaves, then the graph values ``f``
    closes over, the nodes themselves: the inputs may be their data) and ``f``'s output."""
    leaves: list[Node] = [new_leaf(constant(x)) for x in inputs[:n_args]]
    with graph.enable_grad():
        return leaves + list(cell["captured"]), f(*leaves)


def _ckpt_vjp_all(
    g: Operand, out: Operand, *inputs: Operand, f: Fn, n_args: int, _cell: Cell
) -> list[Operand]:
    """Run ``fn`` again, recording from fresh leaves, and pull ``g`` back through that
    graph. Under create_graph the gradients (graph values from the fresh leaves) are
    replayed onto the real inputs, so they can be differentiated again."""
    create_graph = any(is_node(x) for x in inputs) or is_node(g)
    nodes, recorded = _rerun(f, inputs, n_args, _cell)
    if not is_node(recorded):  # the output does not depend on any input
        return [None] * len(inputs)
    # (a batch of cotangents stays a batch)
    seed = new_leaf(constant(g)) if create_graph and not isinstance(g, Boxed) else g
    found = graph.backpropagate(
        recorded, seed, create_graph=create_graph, accumulate=False, wanted=nodes
    )
    shares = [found.get(node) for node in nodes]
    if create_graph:
        from .tangents import replay  # see _ckpt_jvp_all

        subs = {leaf: x for leaf, x in zip(nodes[:n_args], inputs) if is_node(x)}
        shares = [None if s is None else replay(s, subs) for s in shares]
    return shares


def _ckpt_jvp_all(
    tangents: Operands, out: Operand, *inputs: Operand, f: Fn, n_args: int, _cell: Cell
) -> Operand:
    """Forward mode through a checkpoint: the tangent of ``fn`` itself (nothing is saved)."""
    nodes, recorded = _rerun(f, inputs, n_args, _cell)
    tag = new_tag()
    subs: dict[Node, Operand] = {}
    for node, x, t in zip(nodes, inputs, tangents):
        if t is not None:
            subs[node] = Dual(x, t, tag)
        elif isinstance(x, Boxed) and node is not x:
            subs[node] = x
    # Imported here, not at the top: `import autodiff_lab` must not load tangents, which the
    # own-code exercises built on the engine switch off (grading/own_code.py, READY_MADE).
    from .tangents import replay

    result = replay(recorded, subs)
    if isinstance(result, Dual) and result.tag == tag:
        return result.tangent
    return zeros_like(out)


CHECKPOINT = Primitive(
    "checkpoint",
    _ckpt_forward,
    vjp_all=_ckpt_vjp_all,
    jvp_all=_ckpt_jvp_all,
    rule="recomputed in the backward pass: the rules of the ops inside f",
    display=lambda params: f"checkpoint({getattr(params.get('f'), '__name__', 'f')})",
)
CHECKPOINT.batch = _batch_by_loop(CHECKPOINT)


def _referred_from_outside(candidates: list[Node]) -> list[Node]:
    """The objects of ``candidates`` something else refers to as well.

    The reference count of an object held only by such a list is measured on a fresh
    object held the same way (the count differs between Python versions).
    """
    alone = [sys.getrefcount(o) for o in [object()]][0]
    return [n for n in candidates if sys.getrefcount(n) > alone]


def checkpoint(fn: Fn) -> Fn:
    """``checkpoint(f)(*args)``: ``f(*args)`` recorded as ONE node; ``f`` runs again in
    the backward pass (gradient checkpointing, as ``torch.utils.checkpoint`` and
    ``jax.checkpoint``).

    The forward pass runs ``f`` without recording, so the graph keeps only the inputs and
    the output, not ``f``'s intermediate values. When backward reaches the node, ``f`` is
    run again with recording on, from the saved inputs, and the upstream gradient is
    pulled back through that fresh graph (which is then dropped): the same gradients as
    without checkpointing, for one extra forward pass of ``f``. Segments may be nested.

    ``f`` takes ``Value``/``Tensor`` (or plain) positional arguments and returns one
    ``Value`` or ``Tensor``. Graph values ``f`` closes over (a layer's weights) are found
    and become inputs of the node, so their gradients flow too (finding them runs ``f``
    once more, recording, the first time its plain run returns a graph value). Under
    forward mode (``Dual`` arguments) or ``no_grad()`` nothing is recorded anyway and
    ``f`` simply runs; so it does inside ``vmap`` or ``jvp`` when ``f`` is given or closes
    over their batches or dual numbers (the gradients are the same, op by op).
    """
    name = getattr(fn, "__name__", "f")

    def checkpointed(*args: Operand) -> Operand:
        if any(is_dual(a) for a in args) or not graph.is_grad_enabled():
            return fn(*args)
        copies = [a.detach() if is_node(a) else _constant_node(a) for a in args]
        out = fn(*copies)  # recorded only if f closes over graph values needing gradients
        if isinstance(out, Tracer):
            # f is given or closes over a vmap batch or a jvp's dual number: one node
            # could not hold it (its rules would lose the batch or the tangent), so f runs
            # as it is, recorded op by op (right, without the memory saving)
            return fn(*args)
        if isinstance(out, tuple | list):
            raise TypeError(
                f"checkpoint({name}): f must return one Value, Tensor or number, got "
                f"{type(out).__name__} (stack several outputs into one Tensor first)"
            )
        captured: list[Node] = []
        if is_node(out) and out._fn is not None:
            mine = {id(c) for c in copies}
            candidates = [
                n
                for n in graph.topological_order(out)
                if n._fn is None and n.requires_grad and id(n) not in mine
            ]
            out = out.data
            # Once the graph is dropped, a constant made inside f (Value(2.0) from `x * 2`)
            # is referred to by `candidates` alone; a weight f closes over is referred to
            # from outside too.
            captured = _referred_from_outside(candidates)
            del candidates
        if not captured and not any(is_node(a) for a in args):
            return fn(*args)  # nothing to differentiate
        cell = {"out": _plain_result(out, args), "captured": tuple(captured)}
        return bind(CHECKPOINT, *args, *captured, f=fn, n_args=len(args), _cell=cell)

    checkpointed.__name__ = f"checkpoint({name})"
    checkpointed.__wrapped__ = fn  # type: ignore[attr-defined]  # (as functools.wraps sets it)
    return checkpointed
