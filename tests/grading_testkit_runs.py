"""The student side of the test exercises (chapter 97): how to call an answer on inputs.

Kept apart from :mod:`grading_testkit_exercises` (which holds the references), because the
grader's worker imports this file and nothing else of the exercises.
"""

import numpy as np


def scalar_run(answer, inputs):
    """``answer(x)`` as a float."""
    return float(answer(*inputs))


def vector_run(answer, inputs):
    """``answer(v, a)`` as a float array."""
    return np.asarray(answer(*inputs), dtype=float)
