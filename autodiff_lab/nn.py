"""Neural-network building blocks on both engines.

Two families share one :class:`Module` base:

- **Scalar** (micrograd-compatible, on :class:`~autodiff_lab.Value`): :class:`Neuron`,
  :class:`Layer`, :class:`MLP`. Every weight is its own ``Value``; a neuron records its
  weighted sum ``w1*x1 + ... + wn*xn`` as **one** ``Value.dot`` node (d/dwi = xi,
  d/dxi = wi), then ``+ b`` and the activation: three operation nodes per neuron, where
  micrograd's plain sum of products makes 2n + 1 (n ``*``, n ``+``, the activation).
  Every node is a Python object, built again for every point: slow next to tensors.
- **Tensor** (on :class:`~autodiff_lab.Tensor`): :class:`Linear`, :class:`Sequential`,
  :class:`ReLU`, :class:`Tanh`, :class:`Sigmoid`, :class:`TensorMLP`. A layer is one
  matrix product ``x @ W + b`` for a whole batch; numpy does the arithmetic.

Losses (:func:`mse`, :func:`cross_entropy`, :func:`svm_hinge`) accept either kind.

Weights are drawn from a seeded ``numpy.random.Generator`` (pass ``rng=`` an int seed or a
Generator), so a model built twice with the same seed is the same model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from .tensor import Tensor
from .tensor import cross_entropy as _tensor_cross_entropy
from .value import Value

__all__ = [
    "Module", "Neuron", "Layer", "MLP",
    "Linear", "Sequential", "ReLU", "Tanh", "Sigmoid", "TensorMLP",
    "mse", "cross_entropy", "svm_hinge", "init_weights",
]  # fmt: skip

ACTIVATIONS = ("relu", "tanh", "sigmoid", "linear")


def _generator(rng) -> np.random.Generator:
    """``rng`` as a numpy Generator: an int seed, an existing Generator, or None (fresh)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def _check_activation(activation: str, where: str) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(f"{where}: activation must be one of {ACTIVATIONS}, got {activation!r}")
    return activation


def _is_parameter(x) -> bool:
    return isinstance(x, Value) or (isinstance(x, Tensor) and x.requires_grad)


class Module:
    """Anything with parameters. Subclasses just store parameters and sub-modules as
    attributes (lists of them are fine); ``named_parameters()`` finds them in attribute
    order, so the order is the same every run."""

    def named_parameters(self, prefix: str = "") -> list[tuple[str, Value | Tensor]]:
        """``(dotted name, parameter)`` pairs, e.g. ``("layers.0.neurons.3.w.1", Value)``."""
        found: list[tuple[str, Value | Tensor]] = []
        for name, attr in vars(self).items():
            found.extend(_named(attr, prefix + name))
        return found

    def parameters(self) -> list:
        """Every trainable ``Value`` / ``Tensor`` in this module, in a fixed order."""
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        """How many numbers training adjusts (a Value counts 1, a Tensor its size)."""
        return sum(p.size if isinstance(p, Tensor) else 1 for p in self.parameters())

    def zero_grad(self):
        """Forget accumulated gradients: ``Value.grad = 0.0``, ``Tensor.grad = None``."""
        for p in self.parameters():
            p.grad = None if isinstance(p, Tensor) else 0.0

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):  # pragma: no cover - every concrete module overrides it
        raise NotImplementedError(f"{type(self).__name__}.forward")


def _named(attr, name: str) -> Iterator[tuple[str, Value | Tensor]]:
    if isinstance(attr, Module):
        yield from attr.named_parameters(name + ".")
    elif _is_parameter(attr):
        yield name, attr
    elif isinstance(attr, list | tuple):
        for i, item in enumerate(attr):
            yield from _named(item, f"{name}.{i}")


# --- scalar modules (micrograd-compatible) ----------------------------------------------


class Neuron(Module):
    """One unit: ``act(w . x + b)``.

    The weighted sum is one ``Value.dot`` node (d/dwi = xi, d/dxi = wi) rather than
    micrograd's chain of 2n ``*`` and ``+`` nodes: the same values and derivatives, a graph
    small enough to draw (one score of ``MLP(2, [16, 16, 1])`` depends on 467 nodes
    instead of 1009), and a training step several times faster. Chapter 03 builds the long
    form by hand; chapter 05 draws both forms and counts their nodes. Weights start
    uniform in [-1, 1] and the bias at 0 (as in micrograd). ``nonlin=False`` gives a
    linear neuron (the output layer).
    """

    def __init__(self, nin: int, nonlin: bool = True, activation: str = "relu", rng=None):
        if not isinstance(nin, int) or nin < 1:
            raise ValueError(f"Neuron: nin must be a positive int, got {nin!r}")
        rng = _generator(rng)
        self.w = [Value(float(v)) for v in rng.uniform(-1.0, 1.0, size=nin)]
        self.b = Value(0.0)
        self.nonlin = nonlin
        self.activation = _check_activation(activation, "Neuron")

    def forward(self, x):
        if len(x) != len(self.w):
            raise ValueError(f"Neuron: expected {len(self.w)} inputs, got {len(x)}")
        act = Value.dot(self.w, x) + self.b
        if not self.nonlin or self.activation == "linear":
            return act
        return getattr(act, self.activation)()

    def __repr__(self) -> str:
        kind = self.activation.capitalize() if self.nonlin else "Linear"
        return f"{kind}Neuron({len(self.w)})"


class Layer(Module):
    """``nout`` independent neurons reading the same inputs. A single-neuron layer returns
    its one ``Value`` (not a list), as micrograd does."""

    def __init__(self, nin: int, nout: int, rng=None, **kwargs):
        rng = _generator(rng)
        self.neurons = [Neuron(nin, rng=rng, **kwargs) for _ in range(nout)]

    def forward(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def __repr__(self) -> str:
        first = self.neurons[0]
        kind = first.activation if first.nonlin else "linear"
        return f"Layer({len(first.w)} -> {len(self.neurons)}, {kind})"


class MLP(Module):
    """Layers of neurons: ``MLP(2, [16, 16, 1])`` maps 2 inputs to 1 output through two
    hidden layers of 16 (337 parameters). Hidden layers use ``activation``; the last is
    linear."""

    def __init__(self, nin: int, nouts: Sequence[int], activation: str = "relu", rng=None):
        if not nouts:
            raise ValueError("MLP: nouts must list at least one layer size, got []")
        rng = _generator(rng)
        sizes = [nin, *nouts]
        self.layers = [
            Layer(sizes[i], sizes[i + 1], rng=rng, nonlin=i < len(nouts) - 1, activation=activation)
            for i in range(len(nouts))
        ]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __repr__(self) -> str:
        sizes = [len(self.layers[0].neurons[0].w)] + [len(layer.neurons) for layer in self.layers]
        return f"MLP({' -> '.join(map(str, sizes))}, {self.layers[0].neurons[0].activation})"


# --- tensor modules -------------------------------------------------------------------------


def init_weights(nin: int, nout: int, init: str = "kaiming", rng=None, dtype=np.float64):
    """A (nin, nout) weight matrix.

    - ``"kaiming"`` (He): normal with std ``sqrt(2 / nin)`` — keeps the variance of ReLU
      activations steady from layer to layer;
    - ``"xavier"`` (Glorot): uniform in ``±sqrt(6 / (nin + nout))`` — for tanh / sigmoid;
    - ``"uniform"``: uniform in ``±1 / sqrt(nin)`` (PyTorch's default for ``nn.Linear``).
    """
    rng = _generator(rng)
    if init == "kaiming":
        w = rng.normal(0.0, math.sqrt(2.0 / nin), size=(nin, nout))
    elif init == "xavier":
        bound = math.sqrt(6.0 / (nin + nout))
        w = rng.uniform(-bound, bound, size=(nin, nout))
    elif init == "uniform":
        bound = 1.0 / math.sqrt(nin)
        w = rng.uniform(-bound, bound, size=(nin, nout))
    else:
        raise ValueError(
            f"init_weights: init must be 'kaiming', 'xavier' or 'uniform', got {init!r}"
        )
    return w.astype(dtype)


class Linear(Module):
    """An affine layer for a batch: ``x @ W + b`` with ``x`` of shape (batch, nin).

    ``W`` has shape (nin, nout) — so the product reads left to right — and ``b`` shape
    (nout,), broadcast over the batch. (PyTorch stores the transpose, (nout, nin).)
    """

    def __init__(self, nin: int, nout: int, init: str = "kaiming", rng=None, dtype=np.float64):
        if nin < 1 or nout < 1:
            raise ValueError(f"Linear: nin and nout must be positive, got ({nin}, {nout})")
        self.W = Tensor(init_weights(nin, nout, init, rng, dtype), requires_grad=True, label="W")
        self.b = Tensor(np.zeros(nout, dtype=dtype), requires_grad=True, label="b")

    def forward(self, x):
        x = x if isinstance(x, Tensor) else Tensor(x, dtype=self.W.dtype)
        if x.shape[-1] != self.W.shape[0]:
            raise ValueError(
                f"Linear: input has shape {x.shape}, its last axis must be {self.W.shape[0]} "
                f"(the layer maps {self.W.shape[0]} -> {self.W.shape[1]})"
            )
        return x @ self.W + self.b

    def __repr__(self) -> str:
        return f"Linear({self.W.shape[0]}, {self.W.shape[1]})"


class ReLU(Module):
    """max(x, 0), elementwise."""

    def forward(self, x):
        return x.relu()

    def __repr__(self) -> str:
        return "ReLU()"


class Tanh(Module):
    """tanh(x), elementwise."""

    def forward(self, x):
        return x.tanh()

    def __repr__(self) -> str:
        return "Tanh()"


class Sigmoid(Module):
    """1 / (1 + e^-x), elementwise."""

    def forward(self, x):
        return x.sigmoid()

    def __repr__(self) -> str:
        return "Sigmoid()"


_ACTIVATION_MODULES = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid}


class Sequential(Module):
    """Apply modules one after another: ``Sequential(Linear(2, 16), ReLU(), Linear(16, 2))``."""

    def __init__(self, *layers: Module):
        for layer in layers:
            if not callable(layer):
                raise TypeError(f"Sequential: {layer!r} is not a module or function")
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({i}): {layer!r}" for i, layer in enumerate(self.layers))
        return f"{type(self).__name__}({inner}\n)"


class TensorMLP(Sequential):
    """The tensor version of :class:`MLP`: ``Linear`` layers with an activation between
    them (none after the last). Kaiming init for ReLU, Xavier for tanh / sigmoid."""

    def __init__(
        self,
        nin: int,
        nouts: Sequence[int],
        activation: str = "relu",
        init: str | None = None,
        rng=None,
        dtype=np.float64,
    ):
        if not nouts:
            raise ValueError("TensorMLP: nouts must list at least one layer size, got []")
        _check_activation(activation, "TensorMLP")
        init = init or ("kaiming" if activation in ("relu", "linear") else "xavier")
        rng = _generator(rng)
        sizes = [nin, *nouts]
        layers: list[Module] = []
        for i in range(len(nouts)):
            layers.append(Linear(sizes[i], sizes[i + 1], init=init, rng=rng, dtype=dtype))
            if i != len(nouts) - 1 and activation != "linear":
                layers.append(_ACTIVATION_MODULES[activation]())
        super().__init__(*layers)
        self.activation = activation


# --- losses --------------------------------------------------------------------------------


def _is_scalar_batch(x) -> bool:
    return isinstance(x, Value) or (isinstance(x, list | tuple) and not isinstance(x, Tensor))


def _flat_values(x) -> list:
    """A Value, a list of Values or a list of lists of Values, as one flat list."""
    if isinstance(x, Value):
        return [x]
    out = []
    for item in x:
        out.extend(_flat_values(item) if isinstance(item, list | tuple) else [item])
    return out


def mse(predictions, targets):
    """Mean squared error ``mean((prediction - target)^2)``.

    Scalar engine: a Value or a (nested) list of Values, and numbers of the same layout.
    Tensor engine: a Tensor and an array-like broadcastable to it.
    """
    if _is_scalar_batch(predictions):
        preds = _flat_values(predictions)
        targs = np.asarray(targets, dtype=np.float64).ravel().tolist()
        if len(preds) != len(targs):
            raise ValueError(f"mse: {len(preds)} predictions but {len(targs)} targets")
        total = Value(0.0)
        for p, t in zip(preds, targs):
            total = total + (p - t) ** 2
        return total / len(preds)
    targets = targets.data if isinstance(targets, Tensor) else np.asarray(targets)
    if targets.shape != predictions.shape:
        raise ValueError(
            f"mse: predictions have shape {predictions.shape}, targets {targets.shape}"
        )
    return ((predictions - targets) ** 2).mean()


def cross_entropy(logits, targets):
    """Mean over the batch of ``-log softmax(logits)[target]``.

    Tensor engine: logits (N, C), targets N class indices (fused, stable primitive).
    Scalar engine: a list of N rows, each a list of C Values; computed with the log-sum-exp
    trick (the row's largest logit is subtracted first, so ``exp`` cannot overflow).
    """
    if isinstance(logits, Tensor):
        return _tensor_cross_entropy(logits, targets)
    rows = [list(r) for r in logits]
    targets = [int(t) for t in np.asarray(targets).ravel()]
    if len(rows) != len(targets):
        raise ValueError(f"cross_entropy: {len(rows)} rows of logits but {len(targets)} targets")
    total = Value(0.0)
    for row, t in zip(rows, targets):
        if not 0 <= t < len(row):
            raise ValueError(f"cross_entropy: target {t} is outside [0, {len(row)})")
        shift = max(v.data for v in row)  # a constant: it cancels out of the result
        log_sum = sum(((v - shift).exp() for v in row), Value(0.0)).log() + shift
        total = total + (log_sum - row[t])
    return total / len(rows)


def svm_hinge(scores, labels, parameters=(), alpha: float = 1e-4):
    """Max-margin loss for labels in {-1, +1}, plus L2 regularisation (micrograd's demo).

    ``mean(relu(1 - y * score)) + alpha * sum(p^2 for p in parameters)``: a point costs
    nothing once it is on the right side with margin 1.
    """
    labels_arr = np.asarray(labels.data if isinstance(labels, Tensor) else labels, dtype=np.float64)
    labels_arr = labels_arr.ravel()
    if not np.all(np.abs(labels_arr) == 1):
        raise ValueError(f"svm_hinge: labels must be -1 or +1, got values {np.unique(labels_arr)}")
    if isinstance(scores, Tensor):
        if scores.size != labels_arr.size:
            raise ValueError(f"svm_hinge: scores shape {scores.shape}, {labels_arr.size} labels")
        margins = (1 - scores.reshape(labels_arr.shape) * labels_arr).relu()
        loss = margins.mean()
        for p in parameters:
            loss = loss + alpha * (p * p).sum()
        return loss
    scores = _flat_values(scores)
    if len(scores) != labels_arr.size:
        raise ValueError(f"svm_hinge: {len(scores)} scores but {labels_arr.size} labels")
    data_loss = Value(0.0)
    for s, y in zip(scores, labels_arr.tolist()):
        data_loss = data_loss + (1 + -y * s).relu()
    data_loss = data_loss * (1.0 / len(scores))
    reg = Value(0.0)
    for p in parameters:
        reg = reg + p * p
    return data_loss + alpha * reg
