"""The wheel carries the course: chapters and exercise notebooks, never the solutions.

Everything else about the package is declared in pyproject.toml. This file only adds one
step to ``build_py``: copy the files that ``COURSE_FILES`` in autodiff_lab/course.py names
(globs relative to the repository, read from there so the list is written once) into
``autodiff_lab/course_files/`` inside the build, where ``autodiff-lab start`` finds them.
The notebooks stay committed once, in ``notebooks/`` and ``exercises/``; the sdist carries
the same files, so a wheel built from it has them too. An editable install copies nothing:
there the course is read from the checkout itself.
"""

import ast
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
PACKAGED_AS = Path("autodiff_lab", "course_files")


def course_globs() -> list[str]:
    """``COURSE_FILES`` from autodiff_lab/course.py, read without importing the package
    (which needs numpy, absent from the build environment)."""
    tree = ast.parse((ROOT / "autodiff_lab" / "course.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "COURSE_FILES" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise SystemExit("setup.py: autodiff_lab/course.py defines no COURSE_FILES")


def course_files() -> list[Path]:
    """The course's files, relative to the repository (or to the unpacked sdist)."""
    files = sorted({p.relative_to(ROOT) for g in course_globs() for p in ROOT.glob(g)})
    if not any(p.match("exercises/*.ipynb") for p in files):
        raise SystemExit("setup.py: no exercises/*.ipynb to package: the course is missing")
    return files


class BuildPyWithCourse(build_py):
    """``build_py`` plus the course's notebooks as package data, which the sdist then
    carries too (setuptools' sdist includes what ``get_source_files`` names)."""

    def get_source_files(self) -> list[str]:
        return [*super().get_source_files(), *(str(p) for p in course_files())]

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the checkout's own notebooks are used in place
            return
        for source in course_files():
            target = Path(self.build_lib, PACKAGED_AS, source)
            self.mkpath(str(target.parent))
            self.copy_file(str(ROOT / source), str(target))


setup(cmdclass={"build_py": BuildPyWithCourse})
