"""``autodiff-lab export nbgrader|otter DIR``: the exercises for the graders classes already run.

- :mod:`.nbgrader` writes an nbgrader course (JupyterHub): one source assignment per
  chapter, solution cells, read-only instruction cells and autograded test cells.
- :mod:`.otter` writes Otter Grader assignment notebooks (Gradescope, containers), from
  which ``otter assign`` builds the student notebooks and the autograder.

Both read ``solutions/NN_name.ipynb`` (:mod:`.chapters`), and their test cells call
:mod:`.runtime`, which draws the cases from a seed fixed at export and judges them as
``autodiff-lab grade --seed SEED`` does. Importing this package is cheap: the test cells
import :func:`points` and :func:`case_passed` from it, in the student's kernel.
"""

from .runtime import case_passed, points

__all__ = ["case_passed", "points"]
