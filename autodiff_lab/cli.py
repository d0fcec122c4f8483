"""The ``autodiff-lab`` command line.

Sub-commands are registered by the modules that implement them:

- ``build-exercises``: generate ``exercises/`` from ``solutions/`` (:mod:`autodiff_lab.grading`)
- ``grade``: grade submitted exercise notebooks into a gradebook (:mod:`autodiff_lab.grading`)
- ``export``: the exercises as an nbgrader course or Otter Grader assignments
- ``slides``: export a chapter as reveal.js slides (:mod:`autodiff_lab.slides`)
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from . import slides
    from .grading import cli as grading_cli

    parser = argparse.ArgumentParser(
        prog="autodiff-lab", description="autodiff_lab: the course's command line."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    grading_cli.register(sub)
    slides.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
