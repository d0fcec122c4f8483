"""Graded exercises: in-notebook checks, exercise notebooks built from solutions, a grader.

- ``check("3.2", my_function)``: run exercise 3.2's test cases and show a scorecard.
- ``autodiff-lab build-exercises``: write ``exercises/`` from ``solutions/``.
- ``autodiff-lab grade SUBMISSION...``: grade notebooks into a SQLite gradebook.
"""

from .spec import Case, Exercise, Mistake, allclose_nested

__all__ = ["Case", "Exercise", "Mistake", "allclose_nested", "check"]


def __getattr__(name: str):
    # ``check`` is imported lazily so ``import autodiff_lab.grading.spec`` stays light.
    if name == "check":
        from .check import check

        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
