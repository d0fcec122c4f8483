"""What a primitive is, and how one is applied: the machinery every engine runs on.

A :class:`Primitive` is one operation with everything the package knows about it (its
forward function, its vjp and jvp rules, its rule as text, its display, its domain, its
batching rule); :func:`bind` applies one to any inputs, choosing who computes: a tracer
(``Dual``, a ``vmap`` batch) if there is one, else a graph value's class (``Value``,
``Tensor``), which records the node, else the entry's own forward on plain numbers.
``backward()`` applies the vjp rules through :meth:`Primitive.pullback`, ``Dual`` the jvp
rules through :meth:`Primitive.pushforward`.

The entries themselves (``ADD``, ``MUL``, ``EXP``…, each with its rules) are in
:mod:`autodiff_lab.primitives`, which registers them in :data:`PRIMITIVES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .kinds import BatchedArray, Node, Tracer


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


PRIMITIVES: dict[str, Primitive] = {}


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


def bind(prim: Primitive, *inputs, **params):
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
            if len(inputs) > 1:
                x = _newest_tracer(inputs)
            return type(x)._apply(prim, *inputs, **params)
        if node is None and isinstance(x, Node):
            node = x
    if node is not None:
        return type(node)._apply(prim, *inputs, **params)
    return prim.forward(*inputs, **params)


def _newest_tracer(inputs) -> Tracer:
    """The tracer with the largest tag (of the innermost transformation)."""
    newest = None
    for x in inputs:
        if isinstance(x, Tracer) and (newest is None or x.tag > newest.tag):
            newest = x
    return newest  # type: ignore[return-value]


# never graph values: constants wherever they meet a traced value (np.bool_ too: a mask
# `x > 0` of a 0-d array is one)
PLAIN_TYPES = {float, int, bool, np.ndarray, np.float64, np.float32, np.bool_}
