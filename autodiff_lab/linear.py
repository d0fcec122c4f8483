"""Linearize and transpose: a jvp recorded once as a graph of linear operations.

For ``y = f(x)`` the jvp ``t ↦ J t`` is a *linear* map of the tangent ``t``. Running
forward mode with the tangent as a recorded graph leaf (a ``Tensor`` of zeros) records
exactly that map: the jvp rules only ever apply linear operations to a tangent (add,
× a constant, sum, @ a constant, indexing…), with constants computed from the primal
(``cos x`` for ``sin``, the relu mask…). :func:`linearize` keeps that graph as a
:class:`LinearGraph`:

- ``f_jvp(t)`` evaluates it for a new tangent without running ``f`` again;
- :func:`linear_transpose` runs it backwards with every op replaced by its transpose
  (add -> fan-out, × c -> × c, @ B -> @ Bᵀ, sum -> broadcast, indexing -> scatter-add),
  which maps a cotangent ``ct`` to ``Jᵀ ct``: the vjp. Reverse mode is forward mode,
  linearized and transposed.

The transpose of each op is its primitive's vjp rule (for a linear map the two are the
same thing, :meth:`~autodiff_lab.primitives.Primitive.transpose`), so no primitive needs a
new rule; each one declares whether it is linear (``Primitive.linear``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import DTypeLike

from . import graph
from .dual import Dual, new_tag
from .graph import topological_order
from .kinds import Boxed, Node, Tracer, as_primal, data_of
from .ops import shape
from .primitive import bind
from .primitives import Primitive
from .tensor import Tensor
from .types import Fn, Operand, Params, Shape, Tree

CLOSES_OVER_TRACED = (
    "linearize: f closes over values another transformation traces (a jvp's duals, a vmap's "
    "batches, graph values that require grad, a gradient's leaves): a graph of its jvp would "
    "hold them as constants. Use autodiff_lab.functional.linearize, whose map is then jvp itself"
)


class ClosesOverTraced(TypeError):
    """Raised by :func:`linearize` when ``f`` closes over values another transformation
    traces (a jvp's duals, a vmap's batches, graph values that require grad): a graph of its
    jvp cannot hold them. :func:`autodiff_lab.functional.linearize` then uses jvp itself."""


@dataclass
class LinearNode:
    """One node of a :class:`LinearGraph`.

    - ``index``: its position in ``LinearGraph.nodes`` (every node comes after the nodes
      it reads);
    - ``op``: the primitive's name (``"mul"``, ``"sum"``…), or ``"input"`` for a tangent
      input, or ``"zeros"`` for an output that does not depend on the inputs;
    - ``args``: for each argument of the op, the index of the linear node it reads, or
      None where the argument is a constant (then ``constants`` holds it there);
    - ``params``: the primitive's keyword parameters (``axis=0``);
    - ``shape``: the shape of the tangent it carries; ``label``: a name for drawings;
    - ``text``: the op as the drawings write it (``"×"``, ``"sum(axis=0)"``) and
      ``transposed``: its transpose (``"× c"``, ``"broadcast"``).
    """

    index: int
    op: str
    args: tuple[int | None, ...] = ()
    constants: tuple[Operand, ...] = ()
    params: Params = field(default_factory=dict)
    shape: Shape = ()
    dtype: DTypeLike = np.float64
    label: str = ""
    text: str = ""
    transposed: str = ""
    prim: Primitive | None = field(default=None, repr=False)

    @property
    def inputs(self) -> tuple[int, ...]:
        """The indices of the linear nodes this one reads (constants left out)."""
        return tuple(a for a in self.args if a is not None)

    def zeros(self) -> np.ndarray:
        """A read-only array of zeros of this node's shape (a stand-in for its value)."""
        return np.broadcast_to(np.zeros((), self.dtype), self.shape)


@dataclass(eq=False)
class LinearGraph:
    """The linear map ``t ↦ J t`` of :func:`linearize`, as a graph of linear operations.

    - ``nodes``: every :class:`LinearNode`, in an order where each comes after the
      nodes it reads (the tangent inputs first);
    - ``inputs``: the index of each tangent input (one per primal of ``f``);
    - ``outputs``: the index of each output tangent (one per output of ``f``).

    Calling it, ``f_jvp(*tangents)``, is :meth:`apply`: one tangent per primal, shaped
    like it; the result is shaped like ``f``'s output. :meth:`transpose_apply` maps a
    cotangent shaped like the output to one cotangent per primal (``Jᵀ ct``). With
    ``record=True`` both also return the value at every node (indexed like ``nodes``),
    which is what the linearize/transpose viewer draws.
    """

    nodes: list[LinearNode]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    _structure: type | None  # tuple/list when f returned several outputs, else None
    _scalar_inputs: tuple[bool, ...]  # Python-number primals get numbers back
    _scalar_outputs: tuple[bool, ...]

    def __repr__(self) -> str:
        ops = ", ".join(n.op for n in self.nodes if n.op != "input")
        return f"<LinearGraph: {len(self.inputs)} input(s), ops [{ops}]>"

    def __call__(self, *tangents: Operand) -> Tree:
        return self.apply(*tangents)

    # --- the jvp direction -----------------------------------------------------------

    def apply(self, *tangents: Operand, record: bool = False) -> Any:
        """``J t``: the output tangent(s) for these input tangents (one per primal).

        Each node's op runs on its linear inputs' tangents and its constants. With
        ``record`` the result is ``(out_tangent, values)``, ``values[i]`` the tangent at
        ``nodes[i]``.
        """
        if len(tangents) != len(self.inputs):
            raise ValueError(
                f"linearize: f_jvp takes {len(self.inputs)} tangent(s), one per primal, "
                f"got {len(tangents)}"
            )
        values: list[Operand] = [None] * len(self.nodes)
        for k, (i, t) in enumerate(zip(self.inputs, tangents, strict=True)):
            values[i] = _checked(t, self.nodes[i], f"f_jvp: tangent {k}")
        for node in self.nodes:
            if node.op == "zeros":
                values[node.index] = node.zeros().copy()
            elif node.prim is not None:  # (None for an "input", set above)
                args = [
                    values[a] if a is not None else c for a, c in zip(node.args, node.constants)
                ]
                values[node.index] = bind(node.prim, *args, **node.params)
        outs = [_plain(values[o], s) for o, s in zip(self.outputs, self._scalar_outputs)]
        result = self._structure(outs) if self._structure else outs[0]
        return (result, values) if record else result

    # --- the transposed direction ----------------------------------------------------

    def transpose_apply(self, cotangent: Tree, record: bool = False) -> Any:
        """``Jᵀ ct``: one cotangent per primal, for a cotangent shaped like the output.

        The nodes run in reverse order, each replaced by its transpose
        (:meth:`~autodiff_lab.primitives.Primitive.transpose`); a node read by several
        others adds up what they send back (the transpose of using a value twice is a
        sum). With ``record`` the result is ``(cotangents, values)``, ``values[i]`` the
        cotangent at ``nodes[i]`` (zeros where none arrives).
        """
        cts_out = list(cotangent) if self._structure else [cotangent]
        if len(cts_out) != len(self.outputs):
            raise ValueError(
                f"linear_transpose: f has {len(self.outputs)} outputs, got "
                f"{len(cts_out)} cotangents"
            )
        cts: list[Operand] = [None] * len(self.nodes)
        for k, (o, ct) in enumerate(zip(self.outputs, cts_out, strict=True)):
            ct = _checked(ct, self.nodes[o], f"linear_transpose: cotangent {k}")
            cts[o] = ct if cts[o] is None else cts[o] + ct
        for node in reversed(self.nodes):
            ct = cts[node.index]
            if ct is None or node.prim is None:  # nothing arrives, or an input / zeros
                continue
            linear = [a is not None for a in node.args]
            stand_ins = [
                self.nodes[a].zeros() if a is not None else c
                for a, c in zip(node.args, node.constants)
            ]
            shares = node.prim.transpose(ct, node.zeros(), stand_ins, node.params, linear)
            for a, share in zip(node.args, shares):
                if a is not None and share is not None:
                    cts[a] = share if cts[a] is None else cts[a] + share
        values = [c if c is not None else n.zeros().copy() for c, n in zip(cts, self.nodes)]
        found = tuple(_plain(values[i], s) for i, s in zip(self.inputs, self._scalar_inputs))
        return (found, values) if record else found


def _checked(t: Operand, node: LinearNode, where: str) -> Operand:
    """A tangent or cotangent as an array (or traced value) of the node's shape."""
    if not isinstance(t, Boxed):
        t = np.asarray(t, dtype=node.dtype)
    if tuple(shape(t)) != node.shape:
        raise ValueError(f"{where} has shape {tuple(shape(t))}, expected {node.shape}")
    return t


def _plain(x: Operand, scalar: bool) -> Operand:
    """A float for a number's tangent, else the array (or traced value) as it is."""
    if scalar and not isinstance(x, Boxed):
        return float(x)
    return x


def linearize(f: Fn, *primals: Operand) -> tuple[Tree, LinearGraph]:
    """``out, f_jvp = linearize(f, *primals)``: ``f``'s value and its jvp as a linear map.

    ``f_jvp(*tangents)`` equals ``jvp(f, primals, tangents)[1]`` for every tangent, but
    ``f`` runs only once, here: forward mode pushes a *recorded* tangent (a ``Tensor``
    leaf) through ``f``, and the graph its jvp rules build, a :class:`LinearGraph`, is
    replayed for each new tangent. Primals are numbers or arrays; ``f`` returns one value
    or a tuple of them. (Inside another transformation, traced primals, use
    :func:`autodiff_lab.functional.linearize`: there the map is ``jvp`` itself.)
    """
    if any(isinstance(p, Boxed) for p in primals):
        raise TypeError(
            "linearize: traced primals (inside another transformation): use "
            "autodiff_lab.functional.linearize"
        )
    plain = [as_primal(p) for p in primals]
    leaves = [
        Tensor(np.zeros(np.shape(p), np.result_type(p)), requires_grad=True, label=f"t{k}")
        for k, p in enumerate(plain)
    ]
    tag = new_tag()
    # The tangent graph is recorded even inside no_grad(); f may close over its leaves.
    with graph.enable_grad(), graph.outer_graph:
        out = f(*(Dual(p, leaf, tag) for p, leaf in zip(plain, leaves, strict=True)))
    several = isinstance(out, tuple | list)
    outs = list(out) if several else [out]
    primal_outs, tangent_outs = [], []
    for o in outs:  # (a primal is a graph value where f ran a gradient: its data)
        mine = isinstance(o, Dual) and o.tag == tag
        primal, tangent = (o.primal, o.tangent) if mine else (o, None)
        if isinstance(primal, Tracer) or isinstance(tangent, Tracer):
            raise ClosesOverTraced(CLOSES_OVER_TRACED)
        primal_outs.append(data_of(primal))
        tangent_outs.append(tangent)
    nodes, outputs = _linear_nodes(leaves, tangent_outs, primal_outs)
    structure = type(out) if several else None
    scalar_inputs = tuple(isinstance(p, float) for p in plain)
    scalar_outputs = tuple(isinstance(p, float) for p in primal_outs)
    inputs = tuple(range(len(leaves)))
    lin = LinearGraph(nodes, inputs, outputs, structure, scalar_inputs, scalar_outputs)
    return (structure(primal_outs) if structure else primal_outs[0]), lin


def _linear_nodes(
    leaves: list[Tensor], tangent_outs: list[Operand], primal_outs: list[Operand]
) -> tuple[list[LinearNode], tuple[int, ...]]:
    """The recorded tangent graph as a list of :class:`LinearNode` (checked linear), the
    tangent inputs first, and the index of each output's node."""
    nodes = [
        LinearNode(k, "input", shape=leaf.shape, dtype=leaf.dtype, label=f"ṫ{k}")
        for k, leaf in enumerate(leaves)
    ]
    index: dict[Node, int] = {leaf: k for k, leaf in enumerate(leaves)}
    outputs: list[int] = []
    for t, p in zip(tangent_outs, primal_outs, strict=True):
        if not isinstance(t, Tensor) or not t.requires_grad:  # constant: zero tangent
            dtype = np.result_type(p) if not isinstance(p, Boxed) else np.float64
            outputs.append(len(nodes))
            nodes.append(LinearNode(len(nodes), "zeros", shape=np.shape(p), dtype=dtype))
            continue
        for node in topological_order(t):
            if node in index or not node.requires_grad:
                continue
            if node._fn is None:  # (a leaf that is not a tangent: f's gradients' or outside)
                raise ClosesOverTraced(CLOSES_OVER_TRACED)
            prim = node._fn
            args = tuple(index[p] if p.requires_grad else None for p in node._prev)
            if not prim.is_linear_in([a is not None for a in args]):
                raise ValueError(
                    f"linearize: a jvp rule applied the non-linear operation {prim.name!r} "
                    "to a tangent (a jvp must be linear in the tangent). Also met when f "
                    "applies grad/vjp/jacrev to a function that closes over linearize's own "
                    "argument (forward over reverse replays the tangent into itself): use "
                    "jvp there"
                )
            index[node] = len(nodes)
            params = node._params or {}
            nodes.append(
                LinearNode(
                    len(nodes),
                    prim.name,
                    args=args,
                    constants=tuple(None if p.requires_grad else p.data for p in node._prev),
                    params=params,
                    shape=np.shape(node.data),
                    dtype=node.data.dtype,
                    text=prim.text(params),
                    transposed=prim.transposed,
                    prim=prim,
                )
            )
        outputs.append(index[t])
    return nodes, tuple(outputs)


@runtime_checkable
class Transposable(Protocol):
    """A linear map that can be run backwards (a :class:`LinearGraph`, or the jvp-based
    map of :func:`autodiff_lab.functional.linearize` inside another transformation)."""

    def transpose_apply(self, cotangent: Tree) -> tuple[Operand, ...]: ...


class LinearTranspose:
    """``ct ↦ Jᵀ ct``: a :class:`LinearGraph` run backwards (``graph`` is the graph)."""

    def __init__(self, graph: Transposable) -> None:
        self.graph = graph

    def __call__(self, cotangent: Tree) -> tuple[Operand, ...]:
        return self.graph.transpose_apply(cotangent)

    def __repr__(self) -> str:
        return f"<LinearTranspose of {self.graph!r}>"


def linear_transpose(f_jvp: Transposable | Fn, *primals: Operand) -> LinearTranspose:
    """The transpose of a linear map: ``linear_transpose(f_jvp)(ct)`` is ``Jᵀ ct``.

    ``f_jvp`` is the :class:`LinearGraph` from :func:`linearize`; then
    ``linear_transpose(f_jvp)(ct)`` equals ``vjp(f, *primals)[1](ct)``: a tuple with one
    cotangent per primal. As in JAX, a linear Python function works too, with example
    primals giving the input shapes: ``linear_transpose(lambda x: A @ x, x0)`` (it is
    linearized at ``x0``; a linear function is its own linearization).
    """
    if isinstance(f_jvp, Transposable):
        if primals:
            raise TypeError("linear_transpose: pass either a LinearGraph or fn, *primals")
        return LinearTranspose(f_jvp)
    if not primals:
        raise TypeError(
            "linear_transpose: a Python function needs example primals for the input "
            "shapes: linear_transpose(fn, *primals)"
        )
    return LinearTranspose(linearize(f_jvp, *primals)[1])
