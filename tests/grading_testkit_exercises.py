"""Purpose-made exercises for the grading machinery's tests (chapter 97, not course content).

Loaded by path (``registry.load_module``) in the grader only; the worker imports the
student side, :mod:`grading_testkit_runs`, from its file.
Expected values are closed forms (cos x, x², a·v), independent of any student code.
"""

import math

import numpy as np
from grading_testkit_runs import scalar_run, vector_run

from autodiff_lab.grading.spec import Case, Exercise, Mistake

# Level and time estimate, when this version of the spec asks for them.
LEVEL = {"level": "easy", "minutes": 5} if "level" in Exercise.__dataclass_fields__ else {}


def _scalar_cases(rng):
    cases = [Case(f"random x = {x:.4f}", (round(float(x), 4),)) for x in rng.uniform(-3, 3, 4)]
    return cases + [Case("edge: x = 0", (0.0,), points=2.0)]


def _vector_cases(rng):
    cases = [
        Case(f"random v, a = {a:.3f}", (rng.normal(size=3), round(float(a), 3)))
        for a in rng.uniform(-2, 2, 3)
    ]
    return cases + [Case("edge: empty vector", (np.zeros(0), 1.5))]


def _is_negated(got, expected, case):
    return math.isclose(got, -expected, rel_tol=1e-9) and not math.isclose(expected, 0.0)


EXERCISES = [
    Exercise(
        id="97.1",
        title="The derivative of sin",
        task="dsin(x): return d/dx sin(x) at x",
        answer="dsin",
        cases=_scalar_cases,
        run=scalar_run,
        reference=lambda inputs: math.cos(inputs[0]),
        mistakes=(Mistake("Check the sign: d/dx sin x = +cos x.", _is_negated),),
        nudges=(
            "NUDGE-1: picture the slope of sin.",
            "NUDGE-2: it is a trig function.",
            "NUDGE-3: cos.",
        ),
        **LEVEL,
    ),
    Exercise(
        id="97.2",
        title="Square a number",
        task="square(x): return x squared",
        answer="square",
        cases=_scalar_cases,
        run=scalar_run,
        reference=lambda inputs: inputs[0] ** 2,
        **LEVEL,
    ),
    Exercise(
        id="97.3",
        title="Scale a vector",
        task="scale(v, a): return a * v as an array",
        answer="scale",
        cases=_vector_cases,
        run=vector_run,
        reference=lambda inputs: inputs[1] * np.asarray(inputs[0], dtype=float),
        **LEVEL,
    ),
]
