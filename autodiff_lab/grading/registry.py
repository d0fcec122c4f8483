"""Where exercises are found: ``get("3.2")`` and ``all_exercises()``.

The course's exercises live in ``autodiff_lab/grading/exercises/chNN.py`` (each defines
``EXERCISES``) and are imported on first use. Extra modules — a lecturer's own exercises,
or a test's purpose-made one — can be added with :func:`load_module` or listed (file paths
or module names, separated by ``os.pathsep``) in the environment variable
``AUTODIFF_LAB_EXERCISE_MODULES``. Only the grader loads exercises: the student's process
imports each exercise's ``run`` from a module of its own (see
:mod:`autodiff_lab.grading.runners`). A module loaded by path can import such a module
from its own folder, which is added to the end of ``sys.path``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import threading
from pathlib import Path

from .importing import import_file
from .spec import Exercise

ENV_EXTRA_MODULES = "AUTODIFF_LAB_EXERCISE_MODULES"

_exercises: dict[str, Exercise] = {}
_loaded_modules: dict[str, list[Exercise]] = {}  # module name or path -> its exercises
_course_loaded = False
_lock = threading.RLock()  # the grader looks exercises up from several threads


def register(exercise: Exercise, *, replace: bool = False) -> Exercise:
    """Add one exercise; a second exercise with the same id is an error unless ``replace``."""
    if not isinstance(exercise, Exercise):
        raise TypeError(f"register() takes an Exercise, got {type(exercise).__name__}")
    _check_id(exercise.id)
    old = _exercises.get(exercise.id)
    if old is not None and old is not exercise and not replace:
        raise ValueError(
            f"exercise {exercise.id} is defined twice: {old.title!r} and {exercise.title!r}"
        )
    _exercises[exercise.id] = exercise
    return exercise


def load_module(name_or_path: str) -> list[Exercise]:
    """Import a module (dotted name or ``.py`` path) and register its ``EXERCISES``."""
    with _lock:
        return _load_module(name_or_path)


def _load_module(name_or_path: str) -> list[Exercise]:
    if name_or_path in _loaded_modules:
        return list(_loaded_modules[name_or_path])
    if name_or_path.endswith(".py") or os.sep in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"exercise module {name_or_path!r} does not exist")
        mod_name = f"_autodiff_lab_extra_{abs(hash(str(path.resolve())))}"
        if str(path.resolve().parent) not in sys.path:
            sys.path.append(str(path.resolve().parent))  # its runners module, beside it
        module = import_file(mod_name, path, f"exercise module {name_or_path!r}")
    else:
        module = importlib.import_module(name_or_path)
    exercises = getattr(module, "EXERCISES", None)
    if not isinstance(exercises, (list, tuple)):
        raise TypeError(f"exercise module {name_or_path!r} must define EXERCISES = [Exercise, ...]")
    for exercise in exercises:
        register(exercise)
    _loaded_modules[name_or_path] = list(exercises)
    return list(exercises)


def _load_course() -> None:
    """Import every ``exercises/chNN.py`` and the modules named in the environment, once."""
    global _course_loaded
    with _lock:
        if not _course_loaded:
            _course_loaded = True
            _import_course_modules()


def _import_course_modules() -> None:
    from . import exercises as package

    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name[:2] == "ch")
    for name in names:
        full = f"{package.__name__}.{name}"
        try:
            load_module(full)
        except Exception as exc:  # say which file is broken instead of a bare traceback
            raise ImportError(f"exercise module {full} failed to load: {exc}") from exc
    for entry in filter(None, os.environ.get(ENV_EXTRA_MODULES, "").split(os.pathsep)):
        load_module(entry)


def get(exercise_id: str) -> Exercise:
    """The exercise with this id, e.g. ``get("3.2")``."""
    _load_course()
    try:
        return _exercises[str(exercise_id)]
    except KeyError:
        known = ", ".join(e.id for e in all_exercises()) or "none yet"
        raise KeyError(f"no exercise {exercise_id!r} (known exercises: {known})") from None


def all_exercises() -> list[Exercise]:
    """Every registered exercise, in numeric id order (3.2 before 3.10)."""
    _load_course()
    return sorted(_exercises.values(), key=lambda e: e.sort_key)


def course_exercises() -> list[Exercise]:
    """The course's own exercises (``grading/exercises/ch*.py``), in numeric id order: what
    the exercise table (docs/exercises.md) lists, without exercises a test or a lecturer
    registered besides."""
    _load_course()
    from . import exercises as package

    ours = package.__name__ + "."
    with _lock:
        found = [e for name, ex in _loaded_modules.items() if name.startswith(ours) for e in ex]
    return sorted(found, key=lambda e: e.sort_key)


def _check_id(exercise_id: str) -> None:
    parts = str(exercise_id).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"exercise id must look like '3.2' (chapter.number), got {exercise_id!r}")
