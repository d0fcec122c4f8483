"""The ``autodiff-lab`` command line.

Sub-commands are registered by the modules that implement them:

- ``start``: copy the course into a folder and open it in JupyterLab (:mod:`autodiff_lab.course`)
- ``build-exercises``: generate ``exercises/`` from ``solutions/`` (:mod:`autodiff_lab.grading`)
- ``grade``: grade submitted exercise notebooks into a gradebook (:mod:`autodiff_lab.grading`)
- ``export``: the exercises as an nbgrader course or Otter Grader assignments
- ``slides``: export a chapter as reveal.js slides (:mod:`autodiff_lab.slides`)

``export`` reads the solutions, which only a clone of the repository has (the wheel never
carries them): without notebooks in its ``--solutions`` folder it stops and says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__

REPOSITORY_ONLY = (
    "needs the course repository's solutions/ folder ({path} has no notebooks). The "
    "installed package carries the chapters and exercises but never the solutions: run "
    "this in a clone of the course repository, or pass --solutions DIR"
)


def build_parser() -> argparse.ArgumentParser:
    from . import course, slides
    from .grading import cli as grading_cli

    parser = argparse.ArgumentParser(
        prog="autodiff-lab", description="autodiff_lab: the course's command line."
    )
    parser.add_argument("--version", action="version", version=f"autodiff-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    course.register(sub)
    grading_cli.register(sub)
    slides.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "export" and not any(Path(args.solutions).glob("*.ipynb")):
        print(f"{args.command}: " + REPOSITORY_ONLY.format(path=args.solutions), file=sys.stderr)
        return 2
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
