"""autodiff_lab: learn automatic differentiation by building it.

>>> from autodiff_lab import Value
>>> x = Value(3.0)
>>> y = x * x + 2 * x
>>> y.backward()
>>> x.grad   # dy/dx = 2x + 2
8.0
"""

from .dual import Dual
from .extend import checkpoint, custom_jvp, custom_vjp, define_primitive, stop_gradient
from .graph import is_grad_enabled, no_grad, topological_order
from .memory import graph_memory
from .ops import (
    abs,
    cos,
    exp,
    log,
    log_softmax,
    maximum,
    minimum,
    relu,
    sigmoid,
    sin,
    softmax,
    sqrt,
    tanh,
    where,
)
from .progress import progress, reset_progress  # autodiff_lab.progress is the function
from .tensor import Tensor, concatenate, cross_entropy, stack
from .value import Value

__version__ = "0.1.0"


def _figures_with_alt_text() -> None:
    """In IPython or Jupyter, show matplotlib figures with a text alternative
    (:mod:`autodiff_lab.viz.figures`); elsewhere do nothing (IPython is not imported)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        from .viz.figures import install

        install(shell)


_figures_with_alt_text()

__all__ = [
    "Value", "Tensor", "Dual", "no_grad", "is_grad_enabled", "topological_order",
    "progress", "reset_progress",
    "concatenate", "stack", "cross_entropy",
    "custom_vjp", "custom_jvp", "define_primitive", "stop_gradient", "checkpoint", "graph_memory",
    "exp", "log", "tanh", "sigmoid", "relu", "sin", "cos", "sqrt", "abs", "softmax", "log_softmax",
    "where", "maximum", "minimum",
]  # fmt: skip
