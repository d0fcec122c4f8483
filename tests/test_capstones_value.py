"""Capstone 3.6, "Your Value, differentiable twice": graded on random programs against the
library's Value (first derivatives, and second ones through ``backward(create_graph=True)``).

A right class written here (independently of the solutions notebook) scores full marks on
several seeds; fifteen plausible wrong ones lose points and get the hint that names their
mistake; chapter 03's float-rule engine scores under half; classes that are, subclass,
borrow from or wrap the library's ``Value`` score nothing and are told why; the references
(first and second derivatives) agree with PyTorch (float64); the programs have the promised
shape (fan-out, depth, a 5,000-op chain).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff_lab import Value
from autodiff_lab.grading import check, registry
from autodiff_lab.grading.exercises import ch03_value
from autodiff_lab.grading.runners.capstones import build_program

# --- a right answer ----------------------------------------------------------------------


class Right:
    """micrograd-style: each op stores a closure; backward walks an explicit-stack topo order.
    The rules are written with Right's own operations on the incoming gradient g, so under
    create_graph (g a node) the gradients are recorded."""

    def __init__(self, data, children=()):
        self.data, self.grad = float(data), 0.0
        self._prev, self._backward = tuple(children), lambda: None

    def _node(self, data, children, backward):
        out = type(self)(data, children)
        out._backward = lambda: backward(out.grad)
        return out

    def _lift(self, other):
        return other if isinstance(other, Right) else type(self)(other)

    def __add__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad += g
            other.grad += g

        return self._node(self.data + other.data, (self, other), back)

    def __mul__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad += g * other
            other.grad += g * self

        return self._node(self.data * other.data, (self, other), back)

    def __pow__(self, n):
        def back(g):
            self.grad += g * (n * self ** (n - 1))

        return self._node(self.data**n, (self,), back)

    def _unary(self, out, local):
        """``local``: a number (a constant factor) or a function of the output node."""
        node = None

        def back(g):
            self.grad += g * (local(node) if callable(local) else local)

        node = self._node(out, (self,), back)
        return node

    def tanh(self):
        return self._unary(math.tanh(self.data), lambda out: 1 - out * out)

    def exp(self):
        return self._unary(math.exp(self.data), lambda out: out)

    def relu(self):
        return self._unary(max(self.data, 0.0), float(self.data > 0))

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + -self._lift(other)

    def __truediv__(self, other):
        return self * self._lift(other) ** -1

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __rsub__(self, other):
        return -self + other

    def __rtruediv__(self, other):
        return self**-1 * other

    def topo(self):
        order, done, stack = [], set(), [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if node not in done:
                    done.add(node)
                    order.append(node)
                continue
            if node not in done:
                stack.append((node, True))
                stack.extend((p, False) for p in node._prev)
        return order

    def backward(self, create_graph=False):
        self.grad = type(self)(1.0) if create_graph else 1.0
        for node in reversed(self.topo()):
            node._backward()

    def zero_grad(self):
        for node in self.topo():
            node.grad = 0.0


# --- plausible wrong answers --------------------------------------------------------------


class Assigns(Right):
    """`=` instead of `+=` in every backward rule."""

    def __add__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad = g
            other.grad = g

        return self._node(self.data + other.data, (self, other), back)

    def __mul__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad = other.data * g
            other.grad = self.data * g

        return self._node(self.data * other.data, (self, other), back)

    def __pow__(self, n):
        def back(g):
            self.grad = n * self.data ** (n - 1) * g

        return self._node(self.data**n, (self,), back)

    def _unary(self, out, local):
        node = None

        def back(g):
            self.grad = g * (local(node) if callable(local) else local)

        node = self._node(out, (self,), back)
        return node


class RecursiveTopo(Right):
    """A recursive build_topo: right, until the chain is deeper than the recursion limit."""

    def topo(self):
        order, seen = [], set()

        def build(node):
            if node not in seen:
                seen.add(node)
                for parent in node._prev:
                    build(parent)
                order.append(node)

        build(self)
        return order


class BreadthFirst(Right):
    """Visits nodes breadth first from the root: a node may pass its gradient on too early."""

    def backward(self, create_graph=False):
        self.grad, queue, seen = type(self)(1.0) if create_graph else 1.0, [self], {self}
        while queue:
            node = queue.pop(0)
            node._backward()
            for parent in node._prev:
                if parent not in seen:
                    seen.add(parent)
                    queue.append(parent)


class PreOrder(Right):
    """Depth first, each node's closure run when first reached (parents after it)."""

    def backward(self, create_graph=False):
        self.grad, stack, seen = type(self)(1.0) if create_graph else 1.0, [self], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            node._backward()
            stack.extend(node._prev)


class ForgetsUpstream(Right):
    """tanh's backward forgets to multiply by out.grad."""

    def tanh(self):
        t = math.tanh(self.data)

        def back(g):
            self.grad += 1 - t * t

        return self._node(t, (self,), back)


class NoRsub(Right):
    """No reflected subtraction: `2 - x` raises TypeError."""

    __rsub__ = None


class SwappedRsub(Right):
    """__rsub__ computes x - c instead of c - x."""

    def __rsub__(self, other):
        return self - other


class TanhOfInput(Right):
    """tanh's local derivative from the input: 1 - x² instead of 1 - t²."""

    def tanh(self):
        return self._unary(math.tanh(self.data), 1 - self.data**2)


class DivSign(Right):
    """a / b with its own rule, the denominator's gradient missing its minus sign."""

    def __truediv__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad += g / other.data
            other.grad += g * self.data / other.data**2

        return self._node(self.data / other.data, (self, other), back)


class ZeroGradRootOnly(Right):
    def zero_grad(self):
        self.grad = 0.0


class NoZeroGrad(Right):
    zero_grad = None


class RulesInFloats(Right):
    """Right first derivatives, but * and ** take their factors as numbers (.data): under
    create_graph those factors are constants, so the second derivatives are wrong."""

    def __mul__(self, other):
        other = self._lift(other)

        def back(g):
            self.grad += g * other.data
            other.grad += g * self.data

        return self._node(self.data * other.data, (self, other), back)

    def __pow__(self, n):
        def back(g):
            self.grad += g * (n * self.data ** (n - 1))

        return self._node(self.data**n, (self,), back)


class NoCreateGraph(Right):
    """Chapter 03's driver: backward() takes no create_graph."""

    def backward(self):
        Right.backward(self)


class FloatGradients(RulesInFloats):
    """Takes create_graph but seeds the root with a float and computes in floats (.data)."""

    def backward(self, create_graph=False):
        Right.backward(self, create_graph=False)

    def _unary(self, out, local):
        node = None

        def back(g):
            self.grad += g * (local(node).data if callable(local) else local)

        node = self._node(out, (self,), back)
        return node


class PowWithoutFactor(Right):
    """x ** n's rule without the factor n: x ** (n - 1); / (a * b ** -1) inherits it."""

    def __pow__(self, n):
        def back(g):
            self.grad += g * self ** (n - 1)

        return self._node(self.data**n, (self,), back)


class ReluPassesAll(Right):
    def relu(self):
        return self._unary(max(self.data, 0.0), 1.0)


WRONG = [
    (Assigns, "`self.grad += ...`, not `self.grad = ...`"),
    (RecursiveTopo, "RecursionError on the long chain"),
    (BreadthFirst, "non-topological order"),
    (PreOrder, "non-topological order"),
    (ForgetsUpstream, "forgotten chain-rule factor"),
    (NoRsub, "MyValue.__rsub__"),
    (SwappedRsub, "the number `other` comes first"),
    (TanhOfInput, "tanh's local derivative is 1 - t²"),
    (DivSign, "mind the minus sign"),
    (ZeroGradRootOnly, "zero_grad must reset every node"),
    (NoZeroGrad, "zero_grad() failed"),
    (ReluPassesAll, "relu passes the gradient only where x > 0"),
    (RulesInFloats, "first derivatives are right but the second ones are not"),
    (PowWithoutFactor, "The power rule multiplies by the exponent"),
    (NoCreateGraph, "backward must take a create_graph argument"),
    (FloatGradients, "a leaf's .grad is a plain number, not a MyValue"),
]


class Sub(Value):
    pass


class Wrapper:
    """Delegates everything to the library's Value."""

    def __init__(self, data, inner=None):
        self.inner = Value(data) if inner is None else inner

    data = property(lambda self: self.inner.data)
    grad = property(lambda self: self.inner.grad)

    def _w(self, v):
        return Wrapper(0.0, v)

    def _u(self, o):
        return o.inner if isinstance(o, Wrapper) else o

    __add__ = lambda s, o: s._w(s.inner + s._u(o))  # noqa: E731
    __radd__ = lambda s, o: s._w(o + s.inner)  # noqa: E731
    __sub__ = lambda s, o: s._w(s.inner - s._u(o))  # noqa: E731
    __rsub__ = lambda s, o: s._w(o - s.inner)  # noqa: E731
    __mul__ = lambda s, o: s._w(s.inner * s._u(o))  # noqa: E731
    __rmul__ = lambda s, o: s._w(o * s.inner)  # noqa: E731
    __truediv__ = lambda s, o: s._w(s.inner / s._u(o))  # noqa: E731
    __rtruediv__ = lambda s, o: s._w(o / s.inner)  # noqa: E731
    __pow__ = lambda s, n: s._w(s.inner**n)  # noqa: E731
    __neg__ = lambda s: s._w(-s.inner)  # noqa: E731
    tanh = lambda s: s._w(s.inner.tanh())  # noqa: E731
    exp = lambda s: s._w(s.inner.exp())  # noqa: E731
    relu = lambda s: s._w(s.inner.relu())  # noqa: E731
    backward = lambda s: s.inner.backward()  # noqa: E731
    zero_grad = lambda s: s.inner.zero_grad()  # noqa: E731


class BorrowsBackward(Right):
    backward = Value.backward


LIBRARY = [
    (Value, "is autodiff_lab's class"),
    (Sub, "subclasses autodiff_lab.value.Value"),
    (Wrapper, "MyValue.__init__ uses Value (autodiff_lab)"),
    (BorrowsBackward, "MyValue.backward is autodiff_lab's function"),
]

SEEDS = (None, 7, 123)  # the notebook's cases and two of the grader's draws


def test_right_class_scores_full_marks_on_several_seeds():
    for seed in SEEDS:
        result = check("3.6", Right, seed=seed, show=False)
        assert result.status == "passed", result.to_text()
        assert result.score == result.max_score == 15
        assert result.hints == []


@pytest.mark.parametrize(("wrong", "hint"), WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_wrong_class_loses_points_with_the_hint_that_names_its_mistake(wrong, hint):
    for seed in SEEDS[:2]:
        result = check("3.6", wrong, seed=seed, show=False)
        assert result.status == "failed", result.to_text()  # graded, not "not attempted"
        assert result.score < result.max_score, result.to_text()  # Assigns: 0 (x0² reuses x0)
        assert any(hint in h for h in result.hints), result.to_text()


@pytest.mark.parametrize(("cls", "why"), LIBRARY, ids=[c.__name__ for c, _ in LIBRARY])
def test_the_librarys_value_does_not_score_and_the_card_says_why(cls, why):
    result = check("3.6", cls, show=False)
    assert result.score == 0 and result.status == "failed"
    assert all(why in c.message for c in result.cases), result.to_text()
    assert any("graded on your own class" in h for h in result.hints)


def test_a_stub_is_not_attempted():
    class Stub:
        def __init__(self, data):
            raise NotImplementedError("Exercise 3.6: class MyValue")

    result = check("3.6", Stub, show=False)
    assert result.status == "not attempted" and result.score == 0


def test_programs_have_fan_out_depth_and_a_long_chain():
    cases = registry.get("3.6").cases(np.random.default_rng(5))
    programs = {c.name: c.inputs[0] for c in cases}
    dags = [p for name, p in programs.items() if name.startswith("random DAG")]
    assert max(ch03_value.depth(p) for p in dags) >= 20
    for program in dags:  # some node is used by two or more later instructions
        uses = [0] * len(program)
        for op, *args in program:
            for a in args[:2] if op in ("+", "-", "*", "/") else []:
                uses[a] += 1
        assert max(uses) >= 2
    chain = next(p for name, p in programs.items() if "chain" in name)
    assert len(chain) - 1 >= 5000 and ch03_value.depth(chain) >= 5000
    ops = {op for program in programs.values() for op, *_ in program}
    assert {"n+", "n-", "n*", "n/", "**", "neg", "tanh", "exp", "relu", "/"} <= ops


def _torch_op(torch, op, x, y, c):
    """One instruction on torch scalars: ``x``, ``y`` operand nodes, ``c`` the number."""
    binary = {"+": x + y, "-": x - y, "*": x * y, "/": x / y} if y is not None else {}
    if op in binary:
        return binary[op]
    if op in ("+n", "n+"):
        return x + c
    if op in ("*n", "n*"):
        return c * x
    simple = {"-n": lambda: x - c, "n-": lambda: c - x, "/n": lambda: x / c,
              "n/": lambda: c / x, "**": lambda: x**c, "neg": lambda: -x,
              "tanh": lambda: torch.tanh(x), "exp": lambda: torch.exp(x),
              "relu": lambda: torch.relu(x)}  # fmt: skip
    return simple[op]()


def _torch_build(torch, program, **leaf_options):
    """(nodes, leaves): ``program`` built with torch scalars (leaves made with
    ``leaf_options``, e.g. a dtype)."""
    nodes, leaves = [], []
    for op, *a in program:
        if op == "leaf":
            nodes.append(torch.tensor(float(a[0]), requires_grad=True, **leaf_options))
            leaves.append(nodes[-1])
        elif op in ("+", "-", "*", "/"):
            nodes.append(_torch_op(torch, op, nodes[a[0]], nodes[a[1]], None))
        elif op[0] == "n" and op != "neg":
            nodes.append(_torch_op(torch, op, nodes[a[1]], None, a[0]))
        else:
            nodes.append(_torch_op(torch, op, nodes[a[0]], None, a[1] if len(a) > 1 else None))
    return nodes, leaves


def _torch_program(torch, program):
    nodes, leaves = _torch_build(torch, program)
    nodes[-1].backward()
    return [n.item() for n in nodes], [leaf.grad.item() for leaf in leaves]


def test_references_agree_with_torch(torch):
    cases = registry.get("3.6").cases(np.random.default_rng(11))
    for case in cases:
        if "chain" in case.name:
            continue  # 5,000 torch scalars: slow; the chain's gradient is checked in closed form
        reference = ch03_value.value_reference(case.inputs)
        values, grads = _torch_program(torch, case.inputs[0])
        np.testing.assert_allclose(reference["values"], values, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(reference["grads"], grads, rtol=1e-10, atol=1e-12)


def test_second_derivative_references_agree_with_torch(torch):
    """The "second" row: d(d root / d x0) / d leaf, by torch.autograd.grad twice."""
    cases = registry.get("3.6").cases(np.random.default_rng(13))
    seconds = [c for c in cases if c.inputs[1] == "second"]
    assert len(seconds) >= 10
    for case in seconds:
        nodes, leaves = _torch_build(torch, case.inputs[0], dtype=torch.float64)
        (g0,) = torch.autograd.grad(nodes[-1], leaves[0], create_graph=True)
        row = torch.autograd.grad(g0, leaves, allow_unused=True)
        expected = [0.0 if r is None else r.item() for r in row]
        reference = ch03_value.value_reference(case.inputs)
        np.testing.assert_allclose(reference["second"], expected, rtol=1e-10, atol=1e-12)


def test_chapter_03s_engine_pasted_scores_under_half():
    """The chapter's engine (float rules, backward() without create_graph) passes only the
    two first-order cases; given a create_graph parameter it is told its gradient is not
    recorded."""
    for cls, hint in [(NoCreateGraph, "create_graph argument"), (FloatGradients, "plain number")]:
        result = check("3.6", cls, show=False)
        assert result.score == 3 < result.max_score / 2, result.to_text()
        assert any(hint in h for h in result.hints), result.to_text()


def test_long_chain_reference_matches_its_closed_form():
    """y_{k+1} = c_k y_k + x from y_0 = x: dy/dx = Σ_k Π_{j>=k} c_j (with y_0's path)."""
    program = ch03_value.long_chain(np.random.default_rng(3))
    cs = [c for op, _, c in program[1::2]]
    grad, y = 1.0, program[0][1]
    for c in cs:  # forward-mode: d y / d x alongside y
        y, grad = c * y + program[0][1], c * grad + 1.0
    reference = ch03_value.value_reference((program, "backward"))
    assert reference["values"][-1] == pytest.approx(y, rel=1e-12)
    assert reference["grads"] == [pytest.approx(grad, rel=1e-10)]


def test_the_simulator_behind_the_hints_agrees_with_the_library_when_right():
    for case in registry.get("3.6").cases(np.random.default_rng(2)):
        program = case.inputs[0]
        expected = ch03_value.value_reference(case.inputs)["grads"]
        np.testing.assert_allclose(ch03_value.simulate(program), expected, rtol=1e-9, atol=1e-12)


def test_build_program_names_the_class_it_used():
    nodes, leaves = build_program(Right, [("leaf", 2.0), ("n-", 1.0, 0), ("**", 1, 2.0)])
    assert [type(n) for n in nodes] == [Right] * 3 and leaves == [0]
    assert nodes[-1].data == 1.0


def test_a_class_from_a_students_own_module_in_a_folder_named_like_the_library(tmp_path):
    """Only the installed library's files count as the library, not a folder's name."""
    import importlib.util
    import inspect

    folder = tmp_path / "autodiff_lab" / "exercises"
    folder.mkdir(parents=True)
    source = "import math\n\n" + inspect.getsource(Right).replace("class Right", "class Mine")
    source = source.replace("isinstance(other, Right)", "isinstance(other, Mine)")
    (folder / "mine.py").write_text(source)
    spec = importlib.util.spec_from_file_location("student_mine", folder / "mine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = check("3.6", module.Mine, show=False)
    assert result.status == "passed", result.to_text()
