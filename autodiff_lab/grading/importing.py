"""Importing a module from a file: the registry's exercise files, the worker's runners."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType


def import_file(name: str, path: str | os.PathLike, what: str) -> ModuleType:
    """The module in the file ``path``, imported as ``sys.modules[name]`` (``what`` names it
    in the error when it cannot be imported)."""
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"{what} cannot be imported")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module
