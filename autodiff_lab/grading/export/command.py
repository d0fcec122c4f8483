"""The ``autodiff-lab export nbgrader|otter DIR`` sub-command."""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path


def register(subparsers) -> None:
    """Add ``export`` to the ``autodiff-lab`` sub-command parsers."""
    export = subparsers.add_parser(
        "export",
        help="write the exercises as an nbgrader course or Otter Grader assignments",
        description="nbgrader: DIR/source/chNN/NN_name.ipynb with nbgrader cell metadata and "
        "autograded test cells, plus DIR/nbgrader_config.py (then `nbgrader "
        "generate_assignment chNN`). otter: DIR/chNN/NN_name.ipynb in Otter Assign's format "
        "(then `otter assign NN_name.ipynb dist`). The test cells run the cases and checks of "
        "`autodiff-lab grade --seed SEED`, with SEED fixed now (printed, and kept in "
        "DIR/export.json).",
    )
    export.add_argument("tool", choices=["nbgrader", "otter"])
    export.add_argument("dir", type=Path, help="the folder to write (created if missing)")
    export.add_argument("--solutions", default="solutions", type=Path, help="default: solutions")
    export.add_argument(
        "--chapters", nargs="+", metavar="N", help="only these chapters (default: all)"
    )
    export.add_argument("--seed", type=int, help="the cases' seed (default: a secret one)")
    export.add_argument(
        "--course-id", default="autodiff-lab", help="nbgrader's course id (autodiff-lab)"
    )
    export.add_argument(
        "--requirement", default="autodiff-lab",
        help="Otter: how the autograder installs autodiff-lab (a pip requirement line)",
    )  # fmt: skip
    export.add_argument("--force", action="store_true", help="overwrite notebooks already there")
    export.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    from ..build import BuildError
    from . import chapters as chapters_module

    seed = secrets.randbits(31) if args.seed is None else int(args.seed)
    try:
        if args.chapters and not all(n.isdigit() for n in args.chapters):
            raise BuildError(f"--chapters takes chapter numbers, got {' '.join(args.chapters)}")
        chapters = chapters_module.chapters(args.solutions, args.chapters)
    except (BuildError, KeyError) as exc:
        print(f"export: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    if not chapters:
        print(f"export: no exercises in {args.solutions}/*.ipynb", file=sys.stderr)
        return 2
    if args.tool == "nbgrader":
        targets = [args.dir / "source" / c.assignment / c.name for c in chapters]
    else:
        targets = [args.dir / c.assignment / c.name for c in chapters]
    existing = [t for t in targets if t.exists()]
    if existing and not args.force:
        print(
            f"export: {existing[0]} exists (an earlier export, maybe edited); "
            "use --force to overwrite",
            file=sys.stderr,
        )
        return 2
    if args.tool == "nbgrader":
        from . import nbgrader

        written = nbgrader.export(chapters, args.dir, seed, args.course_id)
        then = f"cd {args.dir} && nbgrader generate_assignment {chapters[0].assignment}"
    else:
        from . import otter

        written = otter.export(chapters, args.dir, seed, args.requirement)
        first = written[0]
        then = f"cd {first.parent} && otter assign {first.name} dist"
    for path in written:
        print(f"wrote {path}")
    print(f"cases seed: {seed} (grade the same way with `autodiff-lab grade --seed {seed}`)")
    print(f"next: {then} (see {args.dir / 'README.md'})")
    return 0
