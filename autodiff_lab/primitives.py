"""Every primitive operation, each defined in one place: one entry with all it needs.

An entry (:class:`Primitive`) holds

- ``forward(*inputs, **params)``: the value it computes;
- ``vjp``: one rule per input, ``rule(g, out, *inputs, **params)``, giving that input's
  share of the gradient: the upstream gradient ``g`` times the local derivative
  (reverse mode, the chain rule applied backwards);
- ``jvp``: one rule per input, ``rule(t, out, *inputs, **params)``, giving that input's
  contribution to the output's tangent when the input moves by ``t`` (forward mode);
- its rule as text, its display form in the drawings and its domain;
- ``linear``: whether it is linear in its inputs (the ops a jvp leaves on the tangent
  are), and then ``transposed``: its transpose as text (``sum`` -> ``broadcast``). The
  transpose of a linear op *is* its vjp rule (:meth:`Primitive.transpose`);
- ``batch``: its batching rule, how to apply it to a whole batch at once (``vmap``,
  :mod:`autodiff_lab.batching`).

``Value``, ``Tensor`` and ``Dual`` all compute through this table (``backward()`` through
:meth:`Primitive.pullback`, ``Dual`` through :meth:`Primitive.pushforward`), and so do the
steppers. Adding an elementwise function means adding one :func:`elementwise` entry here
and one short definition each in ``ops.py`` (``ops.<name>``) and ``methods.py`` (the method
of ``Value``, ``Tensor`` and ``Dual``), which a test asks for; it is then a drawable and
steppable node, and the gradient checks in the tests pick it up from :data:`PRIMITIVES`
(they fail until its test cases are added). :func:`~autodiff_lab.binding.bind`, which
applies an entry, and the :data:`PRIMITIVES` registry are in :mod:`autodiff_lab.binding`.

The rules are written with ordinary operators and the generic functions of
:mod:`autodiff_lab.ops`. On plain numbers they compute numbers; handed graph values (as
``backward(create_graph=True)`` does) they record a new graph, which can be differentiated
again.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Sequence

import numpy as np

from . import ops
from .binding import PLAIN_TYPES, PRIMITIVES, bind  # noqa: F401  (imported from here too)
from .kinds import BatchedArray, Traced, constant, zeros_like
from .ops import broadcast_to, shape, sum_to, unbroadcast


class Domain:
    """Where a primitive is defined, as text for errors and as a check.

    ``outside(x)`` marks the entries where the operation is undefined (every engine
    raises there). ``edge(x)`` marks entries where an array result is an infinity that
    numpy allows (``log 0 = -inf``): the scalar engines raise there too, since a scalar
    at the edge is almost always a bug in the student's function.
    """

    __slots__ = ("text", "outside", "edge")

    def __init__(self, text: str, outside: Callable | None = None, edge: Callable | None = None):
        self.text = text
        self.outside = outside
        self.edge = edge

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
    - ``domain``: where it is defined (:class:`Domain`);
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
      with the batch axis in front: cross-entropy's labels).

    :meth:`pullback` and :meth:`pushforward` apply the rules; ``backward()``, ``Dual`` and
    the steppers all go through them. :meth:`transpose` transposes a linear op.
    """

    __slots__ = (
        "name", "forward", "vjp", "jvp", "vjp_all", "jvp_all",
        "rule", "symbol", "display", "notation", "domain", "linear", "transposed", "batch",
        "batched_params",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        forward: Callable,
        vjp: tuple[Callable, ...] | None = None,
        jvp: tuple[Callable, ...] | None = None,
        *,
        rule: str,
        domain: Domain,
        symbol: str | None = None,
        display: str | Callable[[dict], str] | None = None,
        notation: str = "call",
        vjp_all: Callable | None = None,
        jvp_all: Callable | None = None,
        linear: str = "",
        transposed: str = "",
        batch: Callable | str | None = None,
        batched_params: tuple[str, ...] = (),
    ):
        self.name = name
        self.forward = forward
        self.vjp: tuple[Callable, ...] = vjp or ()  # one rule per input
        self.jvp: tuple[Callable, ...] = jvp or ()
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

    def pullback(self, g, out, inputs: Sequence, params: dict, wanted: Sequence[bool]) -> list:
        """Each input's share of the gradient: ``g · d out / d input_i``.

        ``out`` and ``inputs`` are the node's value and its inputs' values (or the nodes
        themselves, to record the backward pass as a graph). ``None`` where ``wanted`` is
        False (an input that needs no gradient: its share is never computed).
        """
        if self.vjp_all is not None:
            shares = list(self.vjp_all(g, out, *inputs, **params))
            if not all(wanted):
                for i, want in enumerate(wanted):
                    if not want:
                        shares[i] = None
            return shares
        shares = []
        for rule, want in zip(self.vjp, wanted):
            shares.append(rule(g, out, *inputs, **params) if want else None)
        return shares

    def pushforward(self, tangents: Sequence, out, inputs: Sequence, params: dict):
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

    def transpose(self, ct, out, inputs: Sequence, params: dict, linear: Sequence[bool]) -> list:
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

    def op(self, params: dict | None) -> str:
        """micrograd's ``_op``: the symbol with its parameters filled in (``'**2'``)."""
        return self.symbol.format(**params) if params and "{" in self.symbol else self.symbol

    def text(self, params: dict | None) -> str:
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


def primitive(name: str, forward: Callable, vjp=None, jvp=None, **kw) -> Primitive:
    """Create a primitive and register it in :data:`PRIMITIVES`."""
    prim = Primitive(name, forward, vjp, jvp, **kw)
    PRIMITIVES[name] = prim
    return prim


def check_domain(prim: Primitive, engine: str, x, *, scalar: bool, label: str = "") -> None:
    """Raise a ValueError naming the op and the first bad entry when ``x`` is outside
    ``prim``'s domain (``scalar``: the edge counts as outside too, see :class:`Domain`)."""
    domain = prim.domain
    if domain.outside is None or isinstance(x, BatchedArray):  # (checked by what holds its arrays)
        return
    bad = domain.outside(x)
    if scalar and domain.edge is not None:
        bad = bad | domain.edge(x)
    if not np.any(bad):
        return
    name = prim.name
    if np.ndim(x) == 0:
        where = f" (label {label!r})" if label else ""
        raise ValueError(
            f"{engine} {name}: {name} is defined for {domain.text}, got {float(x)!r}{where}"
        )
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(
        f"{engine} {name}: {name} is defined for {domain.text}, but {int(np.sum(bad))} entries "
        f"of the shape-{np.shape(x)} input are not (first at index {first}: {x[first]!r})"
    )


def _bcast(t, out):
    """A tangent stretched to the output's shape (broadcasting copies it): also a
    float's tangent, when the float met an array (``x0 + x`` for ``x`` a number)."""
    return broadcast_to(t, shape(out))


# --- batching (vmap): the helpers the batching rules share ----------------------------------
# A batching rule ``batch(args, batched, **params)`` gets each input with its batch axis in
# front where ``batched[i]`` is True (as it is for one example elsewhere) and returns the
# whole batch's result, batch axis first. It uses primitives only, so it can be traced.


def batch_aligned(args: Sequence, batched: Sequence[bool]) -> list:
    """Inputs that broadcast together as the examples do: a batched input of fewer axes
    than the widest example gets size-1 axes after its batch axis (numpy aligns shapes from
    the right, so the batch axis must stay in front of every example axis)."""
    rank = max(len(shape(a)) - b for a, b in zip(args, batched))
    aligned = []
    for a, b in zip(args, batched):
        a_shape = shape(a)
        if b and len(a_shape) - 1 < rank:
            a = ops.reshape(a, a_shape[:1] + (1,) * (rank - len(a_shape) + 1) + a_shape[1:])
        aligned.append(a)
    return aligned


def _example_axes(axis, ndim: int):
    """Axes of one example (``ndim`` axes) as axes of the batch: one further right
    (``None``, all of them, is ``1 … ndim``)."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, int):
        return axis % ndim + 1
    return tuple(a % ndim + 1 for a in axis)


def _batch_reduction(name: str):
    """sum/mean/max over axis a of each example: over axis a + 1 of the batch."""

    def rule(args, batched, axis=None, keepdims=False):
        (x,) = args
        axes = _example_axes(axis, len(shape(x)) - 1)
        return bind(PRIMITIVES[name], x, axis=axes, keepdims=keepdims)

    return rule


def _batch_along_axis(name: str):
    """softmax/log_softmax along axis a of each example: along axis a + 1 of the batch."""

    def rule(args, batched, axis=-1):
        (x,) = args
        return bind(PRIMITIVES[name], x, axis=_example_axes(axis, len(shape(x)) - 1))

    return rule


# --- arithmetic -------------------------------------------------------------------------

ADD = primitive(
    "add",
    lambda a, b: a + b,
    vjp=(lambda g, out, a, b: unbroadcast(g, a), lambda g, out, a, b: unbroadcast(g, b)),
    jvp=(lambda t, out, a, b: _bcast(t, out), lambda t, out, a, b: _bcast(t, out)),
    linear="all",
    transposed="fan-out",
    batch="broadcasting",
    rule="d(a + b)/da = 1,  d(a + b)/db = 1",
    domain=EVERYWHERE,
    symbol="+",
    notation="infix",
)
SUB = primitive(
    "sub",
    lambda a, b: a - b,
    vjp=(lambda g, out, a, b: unbroadcast(g, a), lambda g, out, a, b: unbroadcast(-g, b)),
    jvp=(lambda t, out, a, b: _bcast(t, out), lambda t, out, a, b: _bcast(-t, out)),
    linear="all",
    transposed="fan-out, −",
    batch="broadcasting",
    rule="d(a − b)/da = 1,  d(a − b)/db = −1",
    domain=EVERYWHERE,
    symbol="-",
    display="−",
    notation="infix",
)
MUL = primitive(
    "mul",
    lambda a, b: a * b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g * b, a),
        lambda g, out, a, b: unbroadcast(g * a, b),
    ),
    jvp=(lambda t, out, a, b: _bcast(t * b, out), lambda t, out, a, b: _bcast(a * t, out)),
    linear="each",
    transposed="× c",
    batch="broadcasting",
    rule="d(a·b)/da = b,  d(a·b)/db = a",
    domain=EVERYWHERE,
    symbol="*",
    display="×",
    notation="infix",
)
DIV = primitive(
    "div",
    lambda a, b: a / b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g / b, a),
        lambda g, out, a, b: unbroadcast(-g * out / b, b),
    ),
    jvp=(lambda t, out, a, b: _bcast(t / b, out), lambda t, out, a, b: _bcast(-t * out / b, out)),
    linear="first",
    transposed="÷ c",
    batch="broadcasting",
    rule="d(a/b)/da = 1/b,  d(a/b)/db = −a/b²",
    domain=EVERYWHERE,  # division by zero: inf for arrays, ZeroDivisionError for Value
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
    domain=EVERYWHERE,
    display="−x",
    notation="prefix",
)
POW = primitive(  # a ** b with both differentiable:  d/da = b a^(b-1),  d/db = a^b log(a)
    "pow",
    lambda a, b: a**b,
    vjp=(
        lambda g, out, a, b: unbroadcast(g * b * a ** (b - 1), a),
        lambda g, out, a, b: unbroadcast(g * out * ops.log(a), b),
    ),
    jvp=(
        lambda t, out, a, b: _bcast(t * b * a ** (b - 1), out),
        lambda t, out, a, b: _bcast(t * out * ops.log(a), out),
    ),
    batch="broadcasting",
    rule="d(aᵇ)/da = b·aᵇ⁻¹,  d(aᵇ)/db = aᵇ·log a",
    domain=EVERYWHERE,  # a Value exponent needs a positive base: checked by Value
    symbol="**",
    notation="infix",
)


def _pow_const_slope(a, exponent):
    """c a^(c-1); for c = 0 the power is the constant 1, so the slope is 0 (even at a = 0)."""
    if exponent == 0:  # (a ** -1 would divide by zero at a = 0: higher derivatives of x**2)
        return 0.0 * a
    return exponent * a ** (exponent - 1)


POW_CONST = primitive(  # a ** c for a constant number c:  d/da = c a^(c-1)
    "pow_const",
    lambda a, exponent: a**exponent,
    vjp=(lambda g, out, a, exponent: g * _pow_const_slope(a, exponent),),
    jvp=(lambda t, out, a, exponent: t * _pow_const_slope(a, exponent),),
    batch="broadcasting",
    rule="d(xᶜ)/dx = c·xᶜ⁻¹",
    domain=EVERYWHERE,
    symbol="**{exponent:g}",
    notation="power",
)

# --- choosing entries: where, maximum, minimum ------------------------------------------
# Each entry of the output is one entry of one input, so the gradient goes back to the
# entry chosen (ties of maximum/minimum split it in two halves, as PyTorch and JAX do).


def _numbers_stay_numbers(np_fn: Callable) -> Callable:
    """``np_fn`` as a forward that gives a Python float for Python-number inputs (the
    scalar engine holds floats) and arrays otherwise."""

    def forward(*xs):
        out = np_fn(*xs)
        if not any(isinstance(x, np.ndarray) for x in xs):
            return float(out)
        return out

    forward.__name__ = forward.__qualname__ = np_fn.__name__
    return forward


def _chosen(c, x):
    """``x`` where the condition ``c`` holds, 0 elsewhere (``c`` a constant: its mask)."""
    return bind(WHERE, constant(c), x, 0.0)


def _not_chosen(c, x):
    """``x`` where the condition ``c`` does not hold, 0 elsewhere."""
    return bind(WHERE, constant(c), 0.0, x)


WHERE: Primitive  # (its rules apply it again: defined just below)
WHERE = primitive(  # where(c, a, b): a where c holds, else b; the condition gets no gradient
    "where",
    _numbers_stay_numbers(np.where),
    vjp=(
        lambda g, out, c, a, b: unbroadcast(g * 0.0, c),
        lambda g, out, c, a, b: unbroadcast(_chosen(c, g), a),
        lambda g, out, c, a, b: unbroadcast(_not_chosen(c, g), b),
    ),
    jvp=(
        lambda t, out, c, a, b: _bcast(t * 0.0, out),
        lambda t, out, c, a, b: _bcast(_chosen(c, t), out),
        lambda t, out, c, a, b: _bcast(_not_chosen(c, t), out),
    ),
    linear="rest",
    transposed="where back (c fixed)",
    batch="broadcasting",
    rule="d where(c, a, b)/da = 1 where c holds, else 0;  d/db = the rest;  d/dc = 0",
    domain=EVERYWHERE,
)


def _share(a, b, wins: Callable):
    """The share of the gradient that goes to ``a``: 1 where ``wins(a, b)``, ½ at a tie,
    0 elsewhere (a constant: the choice does not move under a small step)."""
    a, b = constant(a), constant(b)
    share = wins(a, b) * 1.0 + (a == b) * 0.5
    if type(share) is float:  # (Python numbers)
        return share
    dtypes = [x.dtype for x in (a, b) if hasattr(x, "dtype")]
    return share.astype(np.result_type(*dtypes, np.float32))  # float32 stays float32


def _extremum(name: str, forward: Callable, wins: Callable, word: str, sign: str) -> Primitive:
    """maximum (wins = >) or minimum (wins = <): the gradient goes to the operand that wins,
    split in halves on a tie (as torch does)."""
    return primitive(
        name,
        _numbers_stay_numbers(forward),
        vjp=(
            lambda g, out, a, b: unbroadcast(g * _share(a, b, wins), a),
            lambda g, out, a, b: unbroadcast(g * _share(b, a, wins), b),
        ),
        jvp=(
            lambda t, out, a, b: _bcast(t * _share(a, b, wins), out),
            lambda t, out, a, b: _bcast(t * _share(b, a, wins), out),
        ),
        batch="broadcasting",
        rule=f"d {word}(a, b)/da = 1 where a {sign} b, ½ where a = b, else 0 (and alike for b)",
        domain=EVERYWHERE,
    )


MAXIMUM = _extremum("maximum", np.maximum, operator.gt, "max", ">")  # the larger, entry by entry
MINIMUM = _extremum("minimum", np.minimum, operator.lt, "min", "<")  # the smaller, entry by entry

# --- elementwise functions ---------------------------------------------------------------
# Each is also a function of every kind of number (``ops.exp``) and a method of Value,
# Tensor and Dual (``x.exp()``): both are made from this table.

ELEMENTWISE: list[Primitive] = []


def elementwise(name: str, on_float: Callable, on_array: Callable, vjp, jvp, **kw) -> Primitive:
    """Register an elementwise primitive: ``on_float`` computes it for a Python number,
    ``on_array`` for a numpy array; ``vjp`` and ``jvp`` are its one rule each. Its batching
    rule comes free: applied to a batch, it applies to every entry of every example."""

    def forward(x):
        if type(x) is float or type(x) is int:
            return on_float(x)
        return on_array(x)

    forward.__name__ = forward.__qualname__ = name
    prim = primitive(name, forward, vjp=(vjp,), jvp=(jvp,), batch="broadcasting", **kw)
    ELEMENTWISE.append(prim)
    return prim


def _stable_sigmoid(x):
    """sigmoid(x) = 1 / (1 + e^-x), computed without overflow for large |x|."""
    if type(x) is float or type(x) is int:  # not numpy scalars: they stay numpy
        if x >= 0:
            return 1.0 / (1.0 + math.exp(-x))
        e = math.exp(x)
        return e / (1.0 + e)
    x = np.asarray(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _float_log(x):
    return math.log(x) if x > 0 else -math.inf if x == 0 else math.nan


EXP = elementwise(
    "exp",
    math.exp,
    np.exp,
    vjp=lambda g, out, x: g * out,
    jvp=lambda t, out, x: t * out,
    rule="d eˣ/dx = eˣ",
    domain=EVERYWHERE,
)
LOG = elementwise(
    "log",
    _float_log,
    np.log,
    vjp=lambda g, out, x: g / x,
    jvp=lambda t, out, x: t / x,
    rule="d log x/dx = 1/x",
    domain=Domain("x > 0", outside=lambda x: x < 0, edge=lambda x: x == 0),
)
LOG1P = elementwise(  # log(1 + x), accurate for tiny x (where 1 + x rounds to 1)
    "log1p",
    lambda x: math.log1p(x) if x > -1 else -math.inf if x == -1 else math.nan,
    np.log1p,
    vjp=lambda g, out, x: g / (1 + x),
    jvp=lambda t, out, x: t / (1 + x),
    rule="d log(1 + x)/dx = 1/(1 + x)",
    domain=Domain("x > -1", outside=lambda x: x < -1, edge=lambda x: x == -1),
)
TANH = elementwise(
    "tanh",
    math.tanh,
    np.tanh,
    vjp=lambda g, out, x: g * (1 - out * out),
    jvp=lambda t, out, x: t * (1 - out * out),
    rule="d tanh x/dx = 1 − tanh²x",
    domain=EVERYWHERE,
)
SIGMOID = elementwise(
    "sigmoid",
    _stable_sigmoid,
    _stable_sigmoid,
    vjp=lambda g, out, x: g * out * (1 - out),
    jvp=lambda t, out, x: t * out * (1 - out),
    rule="d σ(x)/dx = σ(x)(1 − σ(x))",
    domain=EVERYWHERE,
)
SOFTPLUS = elementwise(  # a smooth relu: log(1 + e^x) = max(x, 0) + log(1 + e^-|x|)
    "softplus",
    lambda x: max(x, 0.0) + math.log1p(math.exp(-abs(x))),
    lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))),
    vjp=lambda g, out, x: g * ops.sigmoid(x),
    jvp=lambda t, out, x: t * ops.sigmoid(x),
    rule="d softplus(x)/dx = σ(x)",
    domain=EVERYWHERE,
)
RELU = elementwise(  # the slope at x = 0 is 0, as in PyTorch
    "relu",
    lambda x: 0.0 if x <= 0 else x,  # (nan stays nan)
    lambda x: np.maximum(x, 0),
    vjp=lambda g, out, x: g * (constant(x) > 0),
    jvp=lambda t, out, x: t * (constant(x) > 0),
    rule="d relu(x)/dx = 1 if x > 0 else 0",
    domain=EVERYWHERE,
    symbol="ReLU",
)
SIN = elementwise(
    "sin",
    math.sin,
    np.sin,
    vjp=lambda g, out, x: g * ops.cos(x),
    jvp=lambda t, out, x: t * ops.cos(x),
    rule="d sin x/dx = cos x",
    domain=EVERYWHERE,
)
COS = elementwise(
    "cos",
    math.cos,
    np.cos,
    vjp=lambda g, out, x: -g * ops.sin(x),
    jvp=lambda t, out, x: -t * ops.sin(x),
    rule="d cos x/dx = −sin x",
    domain=EVERYWHERE,
)
SQRT = elementwise(
    "sqrt",
    math.sqrt,
    np.sqrt,
    vjp=lambda g, out, x: g * 0.5 / out,
    jvp=lambda t, out, x: t * 0.5 / out,
    rule="d √x/dx = 1/(2√x)",
    domain=Domain("x >= 0", outside=lambda x: x < 0),
)


def _sign(x):
    """sign(x) as a constant: −1, 0 or 1 (each example's own, in a batch)."""
    c = constant(x)
    batch = isinstance(c, BatchedArray)  # (numpy's sign cannot look inside a batch)
    return (c > 0) * 1.0 - (c < 0) * 1.0 if batch else np.sign(c)


ABS = elementwise(  # the slope at x = 0 is 0, as in PyTorch
    "abs",
    abs,
    np.abs,
    vjp=lambda g, out, x: g * _sign(x),
    jvp=lambda t, out, x: t * _sign(x),
    rule="d |x|/dx = sign(x)",
    domain=EVERYWHERE,
)

# --- reductions and reshaping (tensors) --------------------------------------------------


def _expand_reduced(g, x_shape, axis, keepdims):
    """Put back the axes a reduction removed, then broadcast to the input's shape."""
    if not keepdims and axis is not None:
        axes = (axis,) if isinstance(axis, int) else axis
        kept = list(shape(g))
        for a in sorted(ax % len(x_shape) for ax in axes):
            kept.insert(a, 1)
        g = ops.reshape(g, tuple(kept))
    return broadcast_to(g, x_shape)


def _count(x_shape, axis) -> int:
    if axis is None:
        return int(np.prod(x_shape, dtype=np.int64))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([x_shape[a] for a in axes], dtype=np.int64))


SUM = primitive(  # every input entry contributes once: the gradient is copied back
    "sum",
    lambda x, axis=None, keepdims=False: np.asarray(x).sum(axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: _expand_reduced(g, shape(x), axis, keepdims),
    ),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.sum(t, axis, keepdims),),
    linear="all",
    transposed="broadcast",
    batch=_batch_reduction("sum"),
    rule="every entry of the input contributes once: the gradient is copied back",
    domain=EVERYWHERE,
)
MEAN = primitive(  # a sum divided by the count of entries summed
    "mean",
    lambda x, axis=None, keepdims=False: np.asarray(x).mean(axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, shape(x), axis, keepdims) / _count(shape(x), axis)
        ),
    ),
    jvp=(lambda t, out, x, axis=None, keepdims=False: ops.mean(t, axis, keepdims),),
    linear="all",
    transposed="broadcast ÷ n",
    batch=_batch_reduction("mean"),
    rule="like sum, divided by the number of entries averaged",
    domain=EVERYWHERE,
)


def _argmax_mask(out, x, axis, keepdims):
    """1/k at the k entries equal to the max (ties share the gradient), 0 elsewhere."""
    x, out = constant(x), constant(out)
    if not keepdims and axis is not None:  # put the reduced axes back, as size 1
        axes = {a % len(shape(x)) for a in ((axis,) if isinstance(axis, int) else axis)}
        out = ops.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape(x))))
    mask = (x == out).astype(x.dtype)
    return mask / ops.sum(mask, axis, keepdims=True)


MAX = primitive(  # only the largest entry moves the max
    "max",
    lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    vjp=(
        lambda g, out, x, axis=None, keepdims=False: (
            _expand_reduced(g, shape(x), axis, keepdims) * _argmax_mask(out, x, axis, keepdims)
        ),
    ),
    jvp=(
        lambda t, out, x, axis=None, keepdims=False: ops.sum(
            t * _argmax_mask(out, x, axis, keepdims), axis, keepdims
        ),
    ),
    batch=_batch_reduction("max"),
    rule="only the largest entry moves the max: it gets the whole gradient",
    domain=EVERYWHERE,
)

# --- batching rules of the shape ops (vmap; see batch_aligned above) ---------------------


def _batch_reshape(args, batched, **params):
    """Each example reshaped: the batch axis stays in front."""
    (x,) = args
    return bind(RESHAPE, x, shape=(shape(x)[0], *params["shape"]))


def _batch_transpose(args, batched, axes=None):
    """Each example's axes permuted: the batch axis stays in front."""
    (x,) = args
    n = len(shape(x)) - 1
    example = range(n - 1, -1, -1) if axes is None else (a % n for a in axes)
    return bind(TRANSPOSE, x, axes=(0, *(a + 1 for a in example)))


def _batch_broadcast_to(args, batched, **params):
    """Each example broadcast: new axes go after the batch axis."""
    (x,) = args
    target = tuple(params["shape"])
    missing = len(target) - (len(shape(x)) - 1)
    if missing:
        x = ops.reshape(x, shape(x)[:1] + (1,) * missing + shape(x)[1:])
    return bind(BROADCAST_TO, x, shape=(shape(x)[0], *target))


def _batch_index(index) -> tuple[tuple, int]:
    """One example's index as an index of the batch (``:`` for the batch axis in front),
    and how many axes numpy puts before the batch axis: when integer-array indices are
    separated by a slice, numpy moves their axes to the front of the result."""
    parts: list = []
    for p in index if isinstance(index, tuple) else (index,):
        if isinstance(p, np.ndarray) and p.dtype == bool:
            parts.extend(np.nonzero(p))  # a mask selects as the integer arrays of its True entries
        else:
            parts.append(p)
    front = 0
    if any(isinstance(p, np.ndarray) for p in parts):
        advanced = [i for i, p in enumerate(parts) if isinstance(p, np.ndarray | numbers.Integral)]
        if advanced[-1] - advanced[0] + 1 != len(advanced):
            front = len(np.broadcast_shapes(*(np.shape(parts[i]) for i in advanced)))
    return (slice(None), *parts), front


def _batch_getitem(args, batched, index):
    """Each example indexed alike: ``x[:, index]`` (batch axis put back in front)."""
    (x,) = args
    batch_index, front = _batch_index(index)
    out = bind(GETITEM, x, index=batch_index)
    return ops.move_axis(out, front, 0)


def _batch_scatter_add(args, batched, index, **params):
    """Each example scattered alike into its own zeros: ``out[:, index] += g``."""
    (g,) = args
    size = shape(g)[0]
    batch_index, front = _batch_index(index)
    g = ops.move_axis(g, 0, front)  # laid out as numpy lays out out[:, index]
    return bind(SCATTER_ADD, g, index=batch_index, shape=(size, *params["shape"]))


def _batch_concatenate(args, batched, axis=0):
    """Each example joined along ``axis``: along ``axis + 1`` of the batch (inputs shared
    by every example are repeated first)."""
    size = next(shape(a)[0] for a, b in zip(args, batched) if b)
    parts = [a if b else broadcast_to(a, (size, *shape(a))) for a, b in zip(args, batched)]
    return bind(CONCATENATE, *parts, axis=_example_axes(axis, len(shape(parts[0])) - 1))


def _batch_matmul(args, batched):
    """A batch of matrix products is one batched matrix product (numpy's ``@`` treats
    leading axes as a stack). Vectors become 1-row / 1-column matrices first, and their
    extra axis is dropped again after."""
    a, b = args
    a_vector = len(shape(a)) - batched[0] == 1
    b_vector = len(shape(b)) - batched[1] == 1
    if a_vector:  # (…, k) -> (…, 1, k)
        a = ops.reshape(a, shape(a)[:-1] + (1,) + shape(a)[-1:])
    if b_vector:  # (…, k) -> (…, k, 1)
        b = ops.reshape(b, shape(b) + (1,))
    out = bind(MATMUL, *batch_aligned([a, b], batched))
    out_shape = shape(out)
    if a_vector and b_vector:
        return ops.reshape(out, out_shape[:-2])
    if a_vector:
        return ops.reshape(out, out_shape[:-2] + out_shape[-1:])
    if b_vector:
        return ops.reshape(out, out_shape[:-1])
    return out


def _batch_cross_entropy(args, batched, targets):
    """Each example's loss −mean_n log softmax(z_n)[y_n], for the whole batch at once;
    ``targets`` of shape (batch, N) when the labels differ per example."""
    (z,) = args  # (batch, N, C), or (N, C) shared by every example
    logp = bind(LOG_SOFTMAX, z, axis=-1)
    rows: slice | np.ndarray = slice(None)
    if np.ndim(targets) == 2:  # example k reads its own labels, row k of targets
        size = shape(targets)[0]
        if not batched[0]:
            logp = broadcast_to(logp, (size, *shape(logp)))
        rows = np.arange(size).reshape(size, 1)
    picked = bind(GETITEM, logp, index=(rows, np.arange(shape(logp)[1]), targets))
    return bind(NEG, bind(MEAN, picked, axis=1))


RESHAPE = primitive(
    "reshape",
    lambda x, shape: np.reshape(x, shape),
    vjp=(lambda g, out, x, shape: ops.reshape(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: ops.reshape(t, shape),),
    linear="all",
    transposed="reshape back",
    batch=_batch_reshape,
    rule="the gradient is reshaped back to the input's shape",
    domain=EVERYWHERE,
)
TRANSPOSE = primitive(  # undone by the inverse permutation
    "transpose",
    lambda x, axes=None: np.transpose(x, axes),
    vjp=(
        lambda g, out, x, axes=None: ops.transpose(
            g, None if axes is None else tuple(np.argsort(np.mod(axes, len(axes))))
        ),
    ),
    jvp=(lambda t, out, x, axes=None: ops.transpose(t, axes),),
    linear="all",
    transposed="transpose back",
    batch=_batch_transpose,
    rule="the gradient is transposed back",
    domain=EVERYWHERE,
)
BROADCAST_TO = primitive(  # copies along new axes; the gradient adds the copies up
    "broadcast_to",
    lambda x, shape: np.broadcast_to(x, shape),
    vjp=(lambda g, out, x, shape: sum_to(g, ops.shape(x)),),
    jvp=(lambda t, out, x, shape: broadcast_to(t, shape),),
    linear="all",
    transposed="sum",
    batch=_batch_broadcast_to,
    rule="copies add up: the gradient is summed back to the input's shape",
    domain=EVERYWHERE,
)


def index_text(index, limit: int = 16) -> str:
    """An index as written in Python: ``0:2``, ``1, ::2``, ``array(5,)`` (shortened)."""

    def one(i) -> str:
        if isinstance(i, slice):
            parts = ["" if v is None else str(v) for v in (i.start, i.stop, i.step)]
            return ":".join(parts[:2] if i.step is None else parts)
        if isinstance(i, np.ndarray):
            return f"array{i.shape}"
        return "..." if i is Ellipsis else "None" if i is None else str(i)

    text = ", ".join(one(i) for i in index) if isinstance(index, tuple) else one(index)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scatter_add(g, index, shape):
    out = np.zeros(shape, dtype=np.result_type(g))
    np.add.at(out, index, g)  # repeated indices add up, they do not overwrite
    return out


SCATTER_ADD: Primitive  # (defined below: indexing and scattering are each other's transpose)
GETITEM = primitive(  # x[index]: the gradient goes back to the entries that were read
    "getitem",
    lambda x, index: x[index],
    vjp=(lambda g, out, x, index: bind(SCATTER_ADD, g, index=index, shape=shape(x)),),
    jvp=(lambda t, out, x, index: t[index],),
    symbol="[]",
    linear="all",
    transposed="scatter-add",
    batch=_batch_getitem,
    rule="the gradient goes back to the entries that were read",
    display=lambda params: f"[{index_text(params['index'])}]",
    domain=EVERYWHERE,
)
SCATTER_ADD = primitive(  # the transpose of indexing: add g into zeros at index
    "scatter_add",
    _scatter_add,
    vjp=(lambda g, out, x, index, shape: g[index],),
    jvp=(lambda t, out, x, index, shape: bind(SCATTER_ADD, t, index=index, shape=shape),),
    linear="all",
    transposed="gather",
    batch=_batch_scatter_add,
    rule="the gradient is read back at the same index",
    domain=EVERYWHERE,
)


def _concat_vjp_all(g, out, *xs, axis=0):
    edges = np.cumsum([shape(x)[axis] for x in xs])[:-1]
    pieces, start = [], 0
    for stop in [*edges, shape(out)[axis]]:
        index = [slice(None)] * len(shape(out))
        index[axis] = slice(start, stop)
        pieces.append(g[tuple(index)])
        start = stop
    return pieces


def _concat_jvp_all(tangents, out, *xs, axis=0):
    parts = [t if t is not None else zeros_like(x) for t, x in zip(tangents, xs, strict=True)]
    return bind(CONCATENATE, *parts, axis=axis)


CONCATENATE = primitive(  # each input gets back its own slice of the gradient
    "concatenate",
    lambda *xs, axis=0: np.concatenate(xs, axis=axis),
    vjp_all=_concat_vjp_all,
    jvp_all=_concat_jvp_all,
    linear="all",
    transposed="split",
    batch=_batch_concatenate,
    rule="each input gets back its own slice of the gradient",
    domain=EVERYWHERE,
)

MATMUL = primitive(  # C = A B:  dA = G B^T,  dB = A^T G   (1-D and batched cases below)
    "matmul",
    lambda a, b: a @ b,
    vjp=(
        lambda g, out, a, b: _matmul_grad_a(g, a, b),
        lambda g, out, a, b: _matmul_grad_b(g, a, b),
    ),
    jvp=(lambda t, out, a, b: t @ b, lambda t, out, a, b: a @ t),
    linear="each",
    transposed="@ cᵀ",
    batch=_batch_matmul,
    rule="C = A B:  dA = G Bᵀ,  dB = Aᵀ G",
    domain=EVERYWHERE,
    symbol="@",
    notation="infix",
)


def _mT(x):
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape(x))
    return ops.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_grad_a(g, a, b):
    if a.ndim == 2 and b.ndim == 2:  # the common case: dA = G B^T
        return g @ b.T
    if len(shape(b)) == 1:  # (..., k) @ (k,) -> (...): dA = g[..., None] * b
        return sum_to(ops.reshape(g, shape(g) + (1,)) * b, shape(a))
    if len(shape(a)) == 1:  # (k,) @ (..., k, n) -> (..., n): dA = sum of b @ g
        return sum_to(ops.reshape(b @ ops.reshape(g, shape(g) + (1,)), shape(b)[:-1]), shape(a))
    return sum_to(g @ _mT(b), shape(a))


def _matmul_grad_b(g, a, b):
    if a.ndim == 2 and b.ndim == 2:  # the common case: dB = A^T G
        return a.T @ g
    if len(shape(a)) == 1 and len(shape(b)) == 1:  # dot product: dB = g a
        return g * a
    if len(shape(a)) == 1:  # (k,) @ (..., k, n): dB = a[:, None] * g[..., None, :]
        g2 = ops.reshape(g, shape(g)[:-1] + (1, shape(g)[-1]))
        return sum_to(ops.reshape(a, (shape(a)[0], 1)) * g2, shape(b))
    if len(shape(b)) == 1:  # (..., k) @ (k,): dB = Σ over the leading axes of a[..., :] g[...]
        n = int(np.prod(shape(g)))  # = A2ᵀ g2 with the leading axes flattened (a matmul, so a
        a2 = ops.reshape(a, (n, shape(b)[0]))  # batch of cotangents never builds (B, …, k))
        return ops.transpose(a2, (1, 0)) @ ops.reshape(g, (n,))
    return sum_to(_mT(a) @ g, shape(b))


# --- softmax and the fused loss ----------------------------------------------------------

SOFTMAX = primitive(  # J^T g = s * (g - <g, s>) along the axis
    "softmax",
    lambda x, axis=-1: ops.softmax(x, axis),
    vjp=(lambda g, out, x, axis=-1: out * (g - ops.sum(g * out, axis, keepdims=True)),),
    jvp=(lambda t, out, x, axis=-1: out * (t - ops.sum(t * out, axis, keepdims=True)),),
    batch=_batch_along_axis("softmax"),
    rule="Jᵀg = s ⊙ (g − ⟨g, s⟩)",
    domain=EVERYWHERE,
)
LOG_SOFTMAX = primitive(  # d log_softmax: g - softmax * sum(g)
    "log_softmax",
    lambda x, axis=-1: ops.log_softmax(x, axis),
    vjp=(lambda g, out, x, axis=-1: g - ops.exp(out) * ops.sum(g, axis, keepdims=True),),
    jvp=(lambda t, out, x, axis=-1: t - ops.sum(ops.exp(out) * t, axis, keepdims=True),),
    batch=_batch_along_axis("log_softmax"),
    rule="Jᵀg = g − softmax · Σg",
    domain=EVERYWHERE,
)


def _one_hot(targets, num_classes, dtype):
    eye = np.zeros((len(targets), num_classes), dtype=dtype)
    eye[np.arange(len(targets)), targets] = 1
    return eye


def _cross_entropy(logits, targets):
    logp = ops.log_softmax(logits, -1)
    return -logp[np.arange(len(targets)), targets].sum() / len(targets)


def _cross_entropy_vjp(g, out, z, targets):
    """dL/dz = g (softmax(z) - onehot(targets)) / N."""
    n, classes = shape(z)
    p = ops.softmax(z, -1)
    if type(p) is np.ndarray and not isinstance(g, Traced):  # a fresh array: in place, no copy
        p[np.arange(n), targets] -= 1
        p *= g / n
        return p
    return g * (p - _one_hot(targets, classes, constant(z).dtype)) / n


CROSS_ENTROPY = primitive(  # mean_i -log softmax(z_i)[y_i]
    "cross_entropy",
    _cross_entropy,
    vjp=(_cross_entropy_vjp,),
    jvp=(
        lambda t, out, z, targets: ops.mean(
            ops.sum(ops.softmax(z, -1) * t, -1, keepdims=False)
            - ops.sum(t * _one_hot(targets, shape(z)[1], constant(z).dtype), -1, keepdims=False)
        ),
    ),
    batch=_batch_cross_entropy,
    batched_params=("targets",),
    rule="d loss/d logits = (softmax − one-hot) / N",
    domain=EVERYWHERE,
)

# --- many scalars at once (Value) --------------------------------------------------------
# A neuron's weighted sum w1*x1 + ... + wn*xn + b as ONE node instead of 2n nodes: the same
# local derivatives (d/dwi = xi, d/dxi = wi, d/db = 1), far less bookkeeping per step.

ADD_N = primitive(  # x1 + x2 + ... + xn:  every input gets the upstream gradient
    "add_n",
    lambda *xs: _sum_numbers(xs),
    vjp_all=lambda g, out, *xs: [g] * len(xs),
    jvp_all=lambda ts, out, *xs: _sum_numbers([t for t in ts if t is not None]),
    symbol="Σ",
    linear="all",
    transposed="fan-out",
    batch="broadcasting",
    rule="d(x₁ + … + xₙ)/dxᵢ = 1",
    domain=EVERYWHERE,
)


def _dot_vjp_all(g, out, *xs):
    n = len(xs) // 2
    ws, vs = xs[:n], xs[n:]
    return [g * v for v in vs] + [g * w for w in ws]


def _dot_jvp_all(ts, out, *xs):
    n = len(xs) // 2
    ws, vs, tws, tvs = xs[:n], xs[n:], ts[:n], ts[n:]
    terms = [t * v for t, v in zip(tws, vs) if t is not None]
    terms += [w * t for w, t in zip(ws, tvs) if t is not None]
    return _sum_numbers(terms)


DOT = primitive(  # w1*x1 + ... + wn*xn  (inputs: w1..wn, x1..xn):  d/dwi = xi,  d/dxi = wi
    "dot",
    lambda *xs: _sum_numbers([w * v for w, v in zip(xs[: len(xs) // 2], xs[len(xs) // 2 :])]),
    vjp_all=_dot_vjp_all,
    jvp_all=_dot_jvp_all,
    symbol="·",
    batch="broadcasting",
    rule="d(Σ wᵢxᵢ)/dwᵢ = xᵢ,  d(Σ wᵢxᵢ)/dxᵢ = wᵢ",
    domain=EVERYWHERE,
)


def _sum_numbers(xs):
    total = 0.0
    for x in xs:
        total = total + x
    return total
