"""What the student's process runs for 7.5 (a trace turned into a derivative program).

A case is a program in 3.6's instruction format (:mod:`.capstones`): its leaves are the
inputs of a Python function ``f``, in order, and the other instructions are what ``f`` does
to them, with ``+ - * / **``, unary ``-``, numbers on either side and the methods ``.exp()``,
``.log()``, ``.sin()``, ``.cos()``, ``.tanh()``. The leaves' numbers are only an example
point (the grader evaluates at other points, which never reach this process: it draws them
from the program and the returned source, once the source is fixed). The runner
hands ``f`` and the number of inputs to the student's ``gradient_source`` and returns the
*source code* it wrote, as a string: nothing of the student's objects leaves this process.
The grader parses, checks and runs that code itself
(:mod:`autodiff_lab.grading.exercises.ch07_source`).
"""

from __future__ import annotations

from .capstones import _build_step, library_error, provenance_problem
from .common import error_result

#: Longer answers are not sent (the grader refuses them as too big anyway).
MAX_SOURCE_CHARS = 4_000_000


def traced_function(program):
    """The Python function of the program's leaves that performs its instructions."""
    n = sum(1 for op, *_ in program if op == "leaf")

    def f(*xs):
        if len(xs) != n:
            raise TypeError(f"f takes {n} inputs, got {len(xs)}")
        nodes = list(xs)
        for k in range(n, len(program)):
            nodes.append(_build_step(None, program, nodes, k))
        return nodes[-1]

    f.__doc__ = f"A straight-line function of {n} inputs (+ - * / **, exp, log, sin, cos, tanh)."
    return f, n


def source_run(answer, inputs):
    """``{"source": gradient_source(f, n)}``, or an error record: for an answer that is not
    a string, or a TypeError or AttributeError while it ran (the grader's hints name the
    operator or method the student's placeholders lack)."""
    (program,) = inputs
    problem = provenance_problem(answer, "gradient_source")
    if problem:
        return library_error(problem)
    f, n = traced_function(program)
    try:
        source = answer(f, n)
    except (TypeError, AttributeError) as exc:  # e.g. an operator the placeholders lack
        return error_result(exc)
    if not isinstance(source, str):
        return {
            "error": "NotSource",
            "message": f"gradient_source returned a {type(source).__name__}, not the source "
            "code of grad_f (a str)",
        }
    if len(source) > MAX_SOURCE_CHARS:
        return {"source": None, "chars": len(source)}
    return {"source": source}
