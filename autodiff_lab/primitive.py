"""What a primitive is, and how one is applied: the machinery every engine runs.

An operation is one entry, a :class:`Primitive`: its ``forward`` function, one ``vjp`` rule
per input (reverse mode: that input's share of the gradient, ``g · d out / d input``), one
``jvp`` rule per input (forward mode), its rule as text, its display form and its
:class:`Domain`. :func:`bind` applies an entry to any inputs, choosing who computes: a
tracer (``Dual``, a ``vmap`` batch) if there is one — the newest, the largest tag — else a
graph value's class (``Value``, ``Tensor``), which records the node, else the entry's own
forward on plain numbers. :data:`PRIMITIVES` maps each built-in entry's name to it.

This file also holds the arithmetic entries every kind of number shares (``+ - * / **``
and negation: chapter 03's operations) and :class:`NumberMethods`, the operators and
methods that apply them (``a * b``, ``x.exp()``, ``x.tanh()``…) for every kind of number.
The other entries — functions, reductions, shapes, indexing, matmul, softmax, the fused
loss — are in :mod:`autodiff_lab.primitives`, written with :mod:`autodiff_lab.ops`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .graph import Boxed, Node
from .kinds import BatchedArray, Tracer, constant
from .types import Mask, Params, Rule

PRIMITIVES: dict[str, Primitive] = {}


@dataclass(frozen=True, eq=False, repr=False)
class Domain:
    """Where a primitive is defined, as text for errors and as a check.

    ``outside(x)`` marks the entries where the operation is undefined (every engine
    raises there). ``edge(x)`` marks entries where an array result is an infinity (or a
    nan) that numpy allows (``log 0 = -inf``, ``1 / 0 = inf``): the scalar engines raise
    there too, since a scalar at the edge is almost always a bug in the student's
    function. ``x`` is the input number ``arg`` (the divisor of ``a / b`` is input 1);
    ``error`` is the exception raised.
    """

    text: str
    outside: Mask | None = None
    edge: Mask | None = None
    arg: int = 0
    error: type[Exception] = ValueError

    def __repr__(self) -> str:
        return f"<domain {self.text}>"


EVERYWHERE = Domain("every input")  # no check


class Primitive:
    """An operation with everything the package knows about it, in one entry.

    - ``forward(*inputs, **params)``: the value it computes;
    - ``vjp``: one rule per input, ``rule(g, out, *inputs, **params)``: that input's share
      of the gradient, the upstream gradient ``g`` times the local derivative (or
      ``vjp_all(g, out, *inputs, **params)``, all shares at once, for any number of inputs);
    - ``jvp``: one rule per input, ``rule(t, out, *inputs, **params)``: the output's
      tangent when that input moves by ``t`` (or ``jvp_all(tangents, out, ...)``);
    - ``rule``: the local derivative as text (the steppers' explanations);
    - ``symbol``: micrograd's ``_op`` (``'*'``); ``display``: the text in the drawings'
      operation circle (``'×'``; ``{name}`` fields are filled from the parameters) and
      ``notation``: how a node is written as an expression (``infix`` ``a × b``,
      ``power`` ``a**2``, ``prefix`` ``−a``, ``call`` ``tanh(a)``);
    - ``domain``: where it is defined (:class:`Domain`; :data:`EVERYWHERE`, no check, unless
      the entry says otherwise);
    - ``linear``: ``"all"`` (linear in all inputs together: add, sum, reshape…),
      ``"each"`` (in each input while the others are held constant: mul, matmul),
      ``"first"`` (in the first only: a / c), ``"rest"`` (in all but the first, which is
      held constant: where's a and b, its condition fixed) or ``""`` (not linear);
      ``transposed``: the transposed op as text, for the drawings (``sum`` ->
      ``"broadcast"``);
    - ``batch``: ``batch(args, batched, **params)``, the batching rule: ``args[i]`` has a
      leading batch axis where ``batched[i]`` is True; it returns the result for the
      whole batch, batch axis first, using only primitives (so it can be traced further);
      ``"broadcasting"`` for an elementwise op, whose batch axis rides along unchanged;
      ``batched_params``: the parameters that may differ per example (the rule gets them
      with the batch axis in front: cross-entropy's labels);
    - ``broadcasts``: the op follows numpy broadcasting (``a + b``, ``where``): its rules
      are written for one entry, as chapter 03's, and :meth:`pullback` sums each share
      back to its input's shape (:func:`sum_to`: broadcasting copied the input, and the
      copies' gradients add up), :meth:`pushforward` stretches the tangent to the
      output's shape. Numbers never take that step (a rule written by hand, with
      :func:`~autodiff_lab.extend.define_primitive`, sums back itself with
      ``ops.unbroadcast``).

    :meth:`pullback` and :meth:`pushforward` apply the rules; ``backward()``, ``Dual`` and
    the steppers all go through them. :meth:`transpose` transposes a linear op.
    """

    __slots__ = (
        "name", "forward", "vjp", "jvp", "vjp_all", "jvp_all",
        "rule", "symbol", "display", "notation", "domain", "linear", "transposed", "batch",
        "batched_params", "broadcasts",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        forward: Callable[..., Any],
        vjp: tuple[Rule, ...] | None = None,
        jvp: tuple[Rule, ...] | None = None,
        *,
        rule: str,
        domain: Domain = EVERYWHERE,
        symbol: str | None = None,
        display: str | Callable[[Params], str] | None = None,
        notation: str = "call",
        vjp_all: Callable[..., Sequence[Any]] | None = None,
        jvp_all: Callable[..., Any] | None = None,
        linear: str = "",
        transposed: str = "",
        batch: Callable[..., Any] | str | None = None,
        batched_params: tuple[str, ...] = (),
        broadcasts: bool = False,
    ) -> None:
        self.name = name
        self.forward = forward
        self.vjp: tuple[Rule, ...] = vjp or ()  # one rule per input
        self.jvp: tuple[Rule, ...] = jvp or ()
        # Primitives with any number of inputs (concatenate) give all rules at once.
        self.vjp_all = vjp_all
        self.jvp_all = jvp_all
        self.rule = rule
        self.domain = domain
        self.symbol = symbol or name
        self.display = display or self.symbol
        self.notation = notation
        self.linear = linear
        self.transposed = transposed
        # "broadcasting": elementwise with numpy broadcasting, the batch axis riding along
        # (applied by autodiff_lab.batching with primitives.batch_aligned)
        self.batch = batch
        self.batched_params = batched_params
        self.broadcasts = broadcasts

    def pullback(
        self, g: Any, out: Any, inputs: Sequence[Any], params: Params, wanted: Sequence[bool]
    ) -> list[Any]:
        """Each input's share of the gradient: ``g · d out / d input_i``.

        ``out`` and ``inputs`` are the node's value and its inputs' values (or the nodes
        themselves, to record the backward pass as a graph). ``None`` where ``wanted`` is
        False (an input that needs no gradient: its share is never computed).
        """
        if self.vjp_all is not None:
            shares = list(self.vjp_all(g, out, *inputs, **params))
            for i, want in enumerate(wanted):
                if not want:
                    shares[i] = None
            return shares
        vjp = self.vjp
        # The calls are spelled out for one and two inputs without parameters (most nodes):
        # a call with ``*inputs`` costs about three times as much as one that lists them.
        if len(inputs) == 2 and not params:
            a, b = inputs
            shares = [vjp[0](g, out, a, b) if wanted[0] else None,
                      vjp[1](g, out, a, b) if wanted[1] else None]  # fmt: skip
        elif len(inputs) == 1 and not params:
            shares = [vjp[0](g, out, inputs[0]) if wanted[0] else None]
        else:
            shares = [rule(g, out, *inputs, **params) if want else None
                      for rule, want in zip(vjp, wanted)]  # fmt: skip
        if self.broadcasts and type(g) is not float:  # the copies broadcasting made add up
            for i, share in enumerate(shares):
                if share is not None and shape(share) != shape(inputs[i]):
                    shares[i] = sum_to(share, shape(inputs[i]))
        return shares

    def pushforward(
        self, tangents: Sequence[Any], out: Any, inputs: Sequence[Any], params: Params
    ) -> Any:
        """The output's tangent: ``Σ_i d out / d input_i · tangent_i``.

        ``tangents[i]`` is None for an input that does not move; the result is None when
        none moves.
        """
        if self.jvp_all is not None:
            if all(t is None for t in tangents):
                return None
            return self.jvp_all(tangents, out, *inputs, **params)
        total = None
        for rule, t in zip(self.jvp, tangents):
            if t is not None:
                share = rule(t, out, *inputs, **params)
                total = share if total is None else total + share
        if self.broadcasts and total is not None and type(out) is not float:
            total = broadcast_to(total, shape(out))  # (a number's tangent met an array)
        return total

    def is_linear_in(self, linear: Sequence[bool]) -> bool:
        """Whether the op is a linear map of the inputs marked True (the rest held fixed)."""
        if self.linear == "all":
            return True
        if self.linear == "each":
            return sum(linear) == 1
        if self.linear == "first":
            return not any(linear[1:])
        if self.linear == "rest":
            return not linear[0]
        return False

    def transpose(
        self, ct: Any, out: Any, inputs: Sequence[Any], params: Params, linear: Sequence[bool]
    ) -> list[Any]:
        """The transposed map: for ``y = A x`` (``x`` the inputs marked ``linear``, the
        others constants), each linear input's cotangent ``Aᵀ ct``.

        No new rule is needed: the vjp of a linear map is its transpose
        (``ctᵀ A = (Aᵀ ct)ᵀ``), so this applies the vjp rules, after checking that the op
        is linear in those inputs. ``out`` and the linear inputs are only read for their
        shapes (a transposition never needs their values).
        """
        if not self.is_linear_in(linear):
            marked = [i for i, lin in enumerate(linear) if lin]
            raise ValueError(
                f"transpose: {self.name} is not linear in its input(s) {marked} "
                f"(linear={self.linear!r}); only linear operations can be transposed"
            )
        return self.pullback(ct, out, inputs, params, linear)

    def op(self, params: Params | None) -> str:
        """micrograd's ``_op``: the symbol with its parameters filled in (``'**2'``)."""
        return self.symbol.format(**params) if params and "{" in self.symbol else self.symbol

    def text(self, params: Params | None) -> str:
        """The drawings' text for the op with these parameters (``**2``, ``sum(axis=0)``)."""
        params = params or {}
        if callable(self.display):
            return self.display(params)
        text = self.display.format(**params) if "{" in self.display else self.display
        shown = {
            k: v for k, v in params.items() if k in ("axis", "shape", "axes") and v is not None
        }
        if shown:
            text += "(" + ", ".join(f"{k}={v}" for k, v in shown.items()) + ")"
        return text

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def primitive(
    name: str,
    forward: Callable[..., Any],
    vjp: tuple[Rule, ...] | None = None,
    jvp: tuple[Rule, ...] | None = None,
    **kw: Any,
) -> Primitive:
    """Create a primitive and register it in :data:`PRIMITIVES`."""
    prim = Primitive(name, forward, vjp, jvp, **kw)
    PRIMITIVES[name] = prim
    return prim


def check_domain(prim: Primitive, engine: str, x: Any, *, scalar: bool, label: str = "") -> None:
    """Raise (a ValueError, or the domain's ``error``) naming the op and the first bad entry
    when ``x`` (input ``prim.domain.arg``) is outside ``prim``'s domain (``scalar``: the
    edge counts as outside too, see :class:`Domain`)."""
    domain = prim.domain
    if isinstance(x, BatchedArray):  # (checked by what holds its arrays)
        return
    bad = domain.outside(x) if domain.outside is not None else False
    if scalar and domain.edge is not None:
        bad = bad | domain.edge(x)
    if not np.any(bad):
        return
    op = f"{engine} {prim.symbol}: {prim.name} is defined for {domain.text}"
    if np.ndim(x) == 0:
        where = f" (label {label!r})" if label else ""
        raise domain.error(f"{op}, got {float(x)!r}{where}")
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    raise domain.error(
        f"{op}, but {int(np.sum(bad))} entries of the shape-{np.shape(x)} input are not "
        f"(first at index {first}: {x[first]!r})"
    )


def bind(prim: Primitive, *inputs: Any, **params: Any) -> Any:
    """Apply ``prim`` to ``inputs``, recording it if any input is a graph value.

    Tracers (``Dual``, ``vmap``'s batches) are the outer layers, so they are looked for
    first; among them the newest transformation call (the largest tag) goes first. It
    unwraps its own inputs and binds again: the next layer's turn.
    """
    node = None
    for x in inputs:
        if type(x) in PLAIN_TYPES:
            continue
        if isinstance(x, Tracer):
            if len(inputs) > 1:  # the newest transformation call's tracer: the largest tag
                x = max([v for v in inputs if isinstance(v, Tracer)], key=lambda v: v.tag)
            return type(x)._apply(prim, *inputs, **params)
        if node is None and isinstance(x, Node):
            node = x
    if node is not None:
        return type(node)._apply(prim, *inputs, **params)
    return prim.forward(*inputs, **params)


# never graph values: constants wherever they meet a traced value (np.bool_ too: a mask
# `x > 0` of a 0-d array is one)
PLAIN_TYPES = {float, int, bool, np.ndarray, np.float64, np.float32, np.bool_}

# --- broadcasting: shapes for the rules of the ops that broadcast ------------------------


def shape(x: Any) -> tuple[int, ...]:
    """The shape of an array-like; ``()`` for a Python number."""
    return x.shape if type(x) is np.ndarray else getattr(x, "shape", ())


def sum_to(x: Any, target_shape: Sequence[int]) -> Any:
    """Sum ``x`` down to ``target_shape``: the reverse of broadcasting.

    Broadcasting copies a value along the axes it adds or stretches, so the gradient
    flowing back must *add up* the copies along exactly those axes.
    """
    target_shape = tuple(target_shape)
    x_shape = shape(x)
    if x_shape == target_shape:
        return x
    lead = len(x_shape) - len(target_shape)  # axes broadcasting added in front
    if lead:
        x = x.sum(axis=tuple(range(lead)), keepdims=False)
        x_shape = shape(x)
    if x_shape != target_shape:  # size-1 axes that broadcasting stretched
        stretched = tuple(i for i, n in enumerate(target_shape) if n == 1 and x_shape[i] != 1)
        x = x.sum(axis=stretched, keepdims=True)
    return x


def broadcast_to(x: Any, new_shape: Sequence[int]) -> Any:
    """Repeat ``x`` along new or size-1 axes to ``new_shape`` (numpy broadcasting)."""
    if shape(x) == tuple(new_shape):
        return x
    if isinstance(x, Boxed):
        return x.broadcast_to(new_shape)  # type: ignore[attr-defined]
    return np.broadcast_to(x, new_shape)


# --- arithmetic: the entries every kind of number shares -----------------------------------
# The rules are written for one entry (numbers, as in chapter 03); ``broadcasts=True`` sums
# an array's shares back to its inputs' shapes (see Primitive.pullback).

ADD = primitive(
    "add",
    lambda a, b: a + b,
    vjp=(lambda g, out, a, b: g, lambda g, out, a, b: g),
    jvp=(lambda t, out, a, b: t, lambda t, out, a, b: t),
    linear="all",
    transposed="fan-out",
    batch="broadcasting",
    broadcasts=True,
    rule="d(a + b)/da = 1,  d(a + b)/db = 1",
    symbol="+",
    notation="infix",
)
SUB = primitive(
    "sub",
    lambda a, b: a - b,
    vjp=(lambda g, out, a, b: g, lambda g, out, a, b: -g),
    jvp=(lambda t, out, a, b: t, lambda t, out, a, b: -t),
    linear="all",
    transposed="fan-out, −",
    batch="broadcasting",
    broadcasts=True,
    rule="d(a − b)/da = 1,  d(a − b)/db = −1",
    symbol="-",
    display="−",
    notation="infix",
)
MUL = primitive(
    "mul",
    lambda a, b: a * b,
    vjp=(lambda g, out, a, b: g * b, lambda g, out, a, b: g * a),
    jvp=(lambda t, out, a, b: t * b, lambda t, out, a, b: a * t),
    linear="each",
    transposed="× c",
    batch="broadcasting",
    broadcasts=True,
    rule="d(a·b)/da = b,  d(a·b)/db = a",
    symbol="*",
    display="×",
    notation="infix",
)
DIV = primitive(
    "div",
    lambda a, b: a / b,
    vjp=(lambda g, out, a, b: g / b, lambda g, out, a, b: -g * out / b),
    jvp=(lambda t, out, a, b: t / b, lambda t, out, a, b: -t * out / b),
    linear="first",
    transposed="÷ c",
    batch="broadcasting",
    broadcasts=True,
    rule="d(a/b)/da = 1/b,  d(a/b)/db = −a/b²",
    # an array divided by 0 is inf (numpy's rule); a number divided by 0 is an error
    domain=Domain(
        "b ≠ 0 (no division by zero)", edge=lambda b: b == 0, arg=1, error=ZeroDivisionError
    ),  # fmt: skip
    symbol="/",
    display="÷",
    notation="infix",
)
NEG = primitive(
    "neg",
    lambda a: -a,
    vjp=(lambda g, out, a: -g,),
    jvp=(lambda t, out, a: -t,),
    linear="all",
    transposed="−",
    batch="broadcasting",
    rule="d(−x)/dx = −1",
    display="−x",
    notation="prefix",
)
POW = primitive(  # a ** b with both differentiable:  d/da = b a^(b-1),  d/db = a^b log(a)
    "pow",
    lambda a, b: a**b,
    vjp=(
        lambda g, out, a, b: g * b * a ** (b - 1),
        lambda g, out, a, b: g * out * bind(PRIMITIVES["log"], a),  # (log: primitives.py)
    ),
    jvp=(
        lambda t, out, a, b: t * b * a ** (b - 1),
        lambda t, out, a, b: t * out * bind(PRIMITIVES["log"], a),
    ),
    batch="broadcasting",
    broadcasts=True,
    rule="d(aᵇ)/da = b·aᵇ⁻¹,  d(aᵇ)/db = aᵇ·log a",
    # a number base must be positive for a differentiable exponent (d/db aᵇ = aᵇ·log a)
    domain=Domain(
        "a > 0 (an exponent that is differentiated needs a positive base)", edge=lambda a: a <= 0
    ),  # fmt: skip
    symbol="**",
    notation="infix",
)


def _pow_const(a: Any, exponent: float) -> Any:
    if exponent < 0 and type(a) is float and a == 0:
        raise ZeroDivisionError(f"**: 0 raised to the negative power {exponent:g}")
    return a**exponent


def _pow_const_slope(a: Any, exponent: float) -> Any:
    """c a^(c-1); for c = 0 the power is the constant 1, so the slope is 0 (even at a = 0)."""
    if exponent == 0:  # (a ** -1 would divide by zero at a = 0: higher derivatives of x**2)
        return 0.0 * a
    return exponent * a ** (exponent - 1)


POW_CONST = primitive(  # a ** c for a constant number c:  d/da = c a^(c-1)
    "pow_const",
    _pow_const,
    vjp=(lambda g, out, a, exponent: g * _pow_const_slope(a, exponent),),
    jvp=(lambda t, out, a, exponent: t * _pow_const_slope(a, exponent),),
    batch="broadcasting",
    rule="d(xᶜ)/dx = c·xᶜ⁻¹",
    symbol="**{exponent:g}",
    notation="power",
)

# --- the methods every kind of number shares -------------------------------------------------

_Number = TypeVar("_Number", bound="NumberMethods")  # a method's result: the same kind


class NumberMethods:
    """The operators and functions of ``Value``, ``Tensor``, ``Dual`` and ``vmap``'s batches,
    written once: ``a * b``, ``x.exp()``… each applies its entry of the table with the
    class's ``_apply`` (tests/test_engine_forward.py checks that every elementwise entry
    has its method here). Comparisons compare the numbers inside (plain booleans)."""

    __slots__ = ()
    _apply: Callable[..., Any]  # the class's way to apply a primitive (Value._apply…)

    def _binary(self, fn: Primitive, a: Any, b: Any) -> Any:
        """``fn(a, b)``, one of the two being ``self``. Dispatched as :func:`bind` dispatches
        every primitive: among tracers the newest (largest tag) applies it, whichever side it
        is on (``y * x`` and ``x * y`` alike); with no tracer, this number's class."""
        if isinstance(self, Tracer):
            return bind(fn, a, b)
        if isinstance(b if a is self else a, Tracer):
            return NotImplemented  # a Dual (or vmap batch) is the outer layer: its method drives
        return self._apply(fn, a, b)

    def __add__(self, other: Any) -> Any:
        return self._binary(ADD, self, other)

    def __radd__(self, other: Any) -> Any:
        return self._binary(ADD, other, self)

    def __sub__(self, other: Any) -> Any:
        return self._binary(SUB, self, other)

    def __rsub__(self, other: Any) -> Any:
        return self._binary(SUB, other, self)

    def __mul__(self, other: Any) -> Any:
        return self._binary(MUL, self, other)

    def __rmul__(self, other: Any) -> Any:
        return self._binary(MUL, other, self)

    def __truediv__(self, other: Any) -> Any:
        return self._binary(DIV, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return self._binary(DIV, other, self)

    def __pow__(self, other: Any) -> Any:
        # a constant exponent (float and int tested first: quicker than the abstract class)
        if type(other) is float or type(other) is int or isinstance(other, numbers.Real):
            return self._apply(POW_CONST, self, exponent=other)
        return self._binary(POW, self, other)  # a traced exponent is differentiated too

    def __rpow__(self, other: Any) -> Any:
        return self._binary(POW, other, self)

    def __neg__(self: _Number) -> _Number:
        return self._apply(NEG, self)  # type: ignore[no-any-return]

    def exp(self: _Number) -> _Number:
        """eˣ of every entry."""
        return self._apply(PRIMITIVES["exp"], self)  # type: ignore[no-any-return]

    def log(self: _Number) -> _Number:
        """The natural logarithm of every entry."""
        return self._apply(PRIMITIVES["log"], self)  # type: ignore[no-any-return]

    def log1p(self: _Number) -> _Number:
        """log(1 + x) of every entry."""
        return self._apply(PRIMITIVES["log1p"], self)  # type: ignore[no-any-return]

    def tanh(self: _Number) -> _Number:
        """tanh of every entry."""
        return self._apply(PRIMITIVES["tanh"], self)  # type: ignore[no-any-return]

    def sigmoid(self: _Number) -> _Number:
        """σ(x) = 1 / (1 + e⁻ˣ) of every entry."""
        return self._apply(PRIMITIVES["sigmoid"], self)  # type: ignore[no-any-return]

    def softplus(self: _Number) -> _Number:
        """log(1 + eˣ) of every entry."""
        return self._apply(PRIMITIVES["softplus"], self)  # type: ignore[no-any-return]

    def relu(self: _Number) -> _Number:
        """max(x, 0) of every entry."""
        return self._apply(PRIMITIVES["relu"], self)  # type: ignore[no-any-return]

    def sin(self: _Number) -> _Number:
        """The sine of every entry."""
        return self._apply(PRIMITIVES["sin"], self)  # type: ignore[no-any-return]

    def cos(self: _Number) -> _Number:
        """The cosine of every entry."""
        return self._apply(PRIMITIVES["cos"], self)  # type: ignore[no-any-return]

    def sqrt(self: _Number) -> _Number:
        """The square root of every entry."""
        return self._apply(PRIMITIVES["sqrt"], self)  # type: ignore[no-any-return]

    def abs(self: _Number) -> _Number:
        """|x| of every entry."""
        return self._apply(PRIMITIVES["abs"], self)  # type: ignore[no-any-return]

    __abs__ = abs

    # comparisons give plain booleans (no gradient), for control flow (`if x > 0:`); ==
    # stays identity, so a number of this kind can be a dict key
    def __lt__(self, other: Any) -> Any:
        return constant(self) < constant(other)

    def __le__(self, other: Any) -> Any:
        return constant(self) <= constant(other)

    def __gt__(self, other: Any) -> Any:
        return constant(self) > constant(other)

    def __ge__(self, other: Any) -> Any:
        return constant(self) >= constant(other)
