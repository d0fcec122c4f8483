"""Graded exercises: in-notebook checks, exercise notebooks built from solutions, a grader.

- ``check("3.2", my_function)``: run exercise 3.2's test cases and show a scorecard.
- ``autodiff-lab build-exercises``: write ``exercises/`` from ``solutions/``.
- ``autodiff-lab grade SUBMISSION...``: grade notebooks into a SQLite gradebook.
"""

from .checking import CheckResult, check
from .spec import Case, Exercise, Mistake, close

__all__ = ["Case", "CheckResult", "Exercise", "Mistake", "check", "close"]
