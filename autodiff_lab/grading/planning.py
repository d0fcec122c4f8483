"""Plan: which exercises a notebook answers, their cases and the references, in the grader.

From the facts :mod:`.reading` found (:func:`plan_submission`): the exercises answered,
notes for the lecturer (claims of exercises that do not exist, calls of the library's
own functions or of another autodiff library), and per exercise the cases drawn from the
batch's secret seed and their reference values. Next stage: :mod:`.isolation`.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import registry
from .checking import case_seed
from .notebook_facts import CHAPTER_FILE_RE, code_facts, code_sources
from .results import Plan, Staged, SubmissionResult, capped_notes, now
from .scoring import Status
from .spec import Exercise


def plan_submission(staged: Staged, facts: dict | None, seed: int) -> Plan | SubmissionResult:
    """The plan for a staged notebook from its ``facts`` (:func:`.reading.read_facts`; None
    when it was not staged), or the result of one that cannot be run at all."""
    sub = staged.submission

    def without(status: Status, note: str) -> SubmissionResult:
        notes = capped_notes([*staged.notes, note])
        return SubmissionResult(sub, [], staged.sha256, seed, now(), 0.0, notes, str(status))

    if facts is None:
        return without(Status.UNREADABLE, staged.problem)
    if "problem" in facts:
        return without(Status.UNREADABLE, facts["problem"])
    exercises, notes = exercises_from_facts(facts, Path(sub.path).name)
    if not exercises:
        return without(Status.NO_EXERCISES, "no exercises found in this notebook")
    cases, expected = {}, {}
    for exercise in exercises:
        cases[exercise.id] = exercise.cases(np.random.default_rng(case_seed(exercise.id, seed)))
        expected[exercise.id] = [
            exercise.reference(copy.deepcopy(c.inputs)) for c in cases[exercise.id]
        ]
    return Plan(facts["cells"], exercises, cases, expected, [*staged.notes, *notes])


def answered_exercises(nb: dict, file_name: str) -> tuple[list[Exercise], list[str]]:
    """:func:`exercises_from_facts` of a notebook read in this process (the course's own
    notebooks and tests; a submission is read by :func:`read_facts`)."""
    return exercises_from_facts(code_facts(code_sources(nb)), file_name)


def exercises_from_facts(facts: dict, file_name: str) -> tuple[list[Exercise], list[str]]:
    """The exercises a notebook answers, and notes for the lecturer.

    Its chapter's (from ``NN_`` in the file name), every id it mentions in
    ``check("N.M", …)``, ``# Exercise N.M`` or a stub message, and every exercise whose
    answer it defines (``def dual_mul``): a renamed notebook with its checks deleted counts.
    """
    ids = set(facts["mentioned"])
    notes: list[str] = []
    known = {e.id: e for e in registry.all_exercises()}
    chapter = CHAPTER_FILE_RE.match(file_name)
    if chapter:
        ids.update(i for i, e in known.items() if e.chapter == int(chapter.group(1)))
    defined = set(facts["defined"])
    ids.update(i for i, e in known.items() if e.answer in defined)
    unknown = sorted(ids - set(known), key=_id_key)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" * (len(unknown) > 5))
        which = "exercise" if len(unknown) == 1 else "exercises"
        verb = "does" if len(unknown) == 1 else "do"
        notes.append(f"the notebook mentions {which} {shown}, which {verb} not exist")
    if facts["internals"]:
        notes.append("the notebook uses the grader's internals (registry or references): read it")
    chosen = sorted((known[i] for i in ids if i in known), key=lambda e: e.sort_key)
    notes += library_notes(facts, chosen)
    if chosen and facts["not_analysed"]:
        cells = ", ".join(str(n) for n, _ in facts["not_analysed"][:5])
        size = sum(b for _, b in facts["not_analysed"]) / 2**10
        notes.append(
            f"code cells {cells} ({size:.0f} KB) are too large to be searched for library "
            "calls: read them"
        )
    return chosen, notes


def _id_key(exercise_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in exercise_id.split("."))


def library_calls(cells: list[str], exercises: list[Exercise]) -> list[str]:
    """:func:`library_notes` of code read in this process."""
    return library_notes(code_facts(cells), exercises)


def library_notes(facts: dict, exercises: list[Exercise]) -> list[str]:
    """Notes for answers whose body calls a FUNCTION of the course library (``autodiff_lab``).

    Decision (docs/exercises.md, "What an answer may use"): calling the library's own function
    (``ops.softmax`` for 4.3, ``functional.hvp`` for 6.3…) is NOT refused — the grader
    checks answers, and later exercises build on the library — but the report names what
    was called, for the lecturer to judge. Classes (``Tensor``, ``Value``) are not noted.
    An answer whose body uses another automatic-differentiation library (PyTorch, JAX,
    TensorFlow, autograd, micrograd: ``torch.tile(...).backward()`` for 4.1) is noted the
    same way. Names are followed through aliases (``import … as j``, ``F =
    autodiff_lab.functional``, ``j = jacfwd``: the note gives the function's real name)
    and into the notebook's own functions the answer calls. Own-code exercises get no
    note: their answers are computed where the library cannot be imported
    (:mod:`.own_code`), and their feedback names what was refused.
    """
    resolve = _chain_resolver(facts)
    functions = facts["functions"]
    notes = []
    for exercise in exercises:
        if exercise.answer not in functions or exercise.own_code:
            continue  # own-code: the library is switched off there, the feedback says so
        bodies, todo = set(), [exercise.answer]
        while todo:  # the answer and every notebook function it refers to, once each
            name = todo.pop()
            if name in bodies or name not in functions:
                continue
            bodies.add(name)
            todo += functions[name]["names"]
        used, others = set(), set()
        for chain in (c for name in sorted(bodies) for c in functions[name]["chains"]):
            obj, path, foreign = resolve(chain)
            if foreign:
                others.add(".".join(chain))
            elif inspect.isfunction(obj) and not obj.__module__.startswith("autodiff_lab.grading"):
                label = ".".join(path)
                if path[-1] != obj.__name__:
                    label += f" ({obj.__module__}.{obj.__qualname__})"
                used.add(label)
        if used:
            notes.append(
                f"exercise {exercise.id}: `{exercise.answer}` calls the library's own "
                f"{', '.join(sorted(used)[:8])} (allowed; check that it does what the "
                "exercise asked)"
            )
        if others:
            notes.append(
                f"exercise {exercise.id}: `{exercise.answer}` uses another autodiff library: "
                f"{', '.join(sorted(others)[:5])} (allowed; check that it does what the "
                "exercise asked)"
            )
    return notes


def _chain_resolver(facts: dict) -> Callable[[list[str]], tuple[Any, list[str], bool]]:
    """``resolve(["F", "jacfwd"])`` -> (the course library's object or None, the part of the
    chain that named it, whether the chain starts at another autodiff library)."""
    import importlib

    def load(module: str, name: str | None) -> Any:
        if module != "autodiff_lab" and not module.startswith("autodiff_lab."):
            return None
        for attempt in ((f"{module}.{name}", None), (module, name)) if name else ((module, None),):
            try:
                found: Any = importlib.import_module(attempt[0])
                return getattr(found, attempt[1]) if attempt[1] else found
            except Exception:
                continue
        return None

    def base(name: str, depth: int) -> tuple[Any, bool]:
        if name in facts["foreign"]:
            return None, True
        if name in facts["imports"]:
            return load(*facts["imports"][name]), False
        if name in facts["aliases"] and depth < 8:  # a = b; b = a ends here
            obj, _, foreign = walk(facts["aliases"][name], depth + 1)
            return obj, foreign
        return None, False

    def walk(chain: list[str], depth: int = 0) -> tuple[Any, list[str], bool]:
        obj, foreign = base(chain[0], depth)
        path = chain[:1]
        for attr in chain[1:]:
            if obj is None or inspect.isfunction(obj):
                break
            obj, path = getattr(obj, attr, None), [*path, attr]
        return obj, path, foreign

    return walk


def exercises_in(nb: dict, path: Path) -> tuple[list[Exercise], list[str]]:
    """:func:`answered_exercises` of a notebook file."""
    return answered_exercises(nb, Path(path).name)
