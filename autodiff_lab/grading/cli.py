"""The grading commands of ``autodiff-lab``: ``build-exercises``, ``grade`` and ``export``.

:func:`register` adds them to the main parser (``autodiff_lab/cli.py``); each sets
``run=func`` with ``func(args) -> int`` (the exit code).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from . import registry
from .safetext import printable as printable  # names and messages in the terminal


def register(subparsers) -> None:
    """Add ``build-exercises`` and ``grade`` to the ``autodiff-lab`` sub-command parsers."""
    build = subparsers.add_parser(
        "build-exercises",
        help="generate exercises/ from solutions/ (keeps students' edits)",
        description="Write exercises/NN_name.ipynb from solutions/NN_name.ipynb: every "
        "'### BEGIN SOLUTION' ... '### END SOLUTION' region becomes a stub raising "
        "NotImplementedError('Exercise N.M: <task>'), outputs are cleared. An exercise "
        "notebook changed since it was generated is kept (the new one goes beside it as "
        "NN_name.new.ipynb) unless --force, which backs it up first.",
    )
    build.add_argument("--solutions", default="solutions", type=Path, help="default: solutions")
    build.add_argument("--exercises", default="exercises", type=Path, help="default: exercises")
    build.add_argument(
        "--check", action="store_true",
        help="write nothing; exit 1 listing exercise notebooks out of date with solutions/",
    )  # fmt: skip
    build.add_argument(
        "--force", action="store_true",
        help="replace exercise notebooks even if changed (backing each up first)",
    )  # fmt: skip
    build.set_defaults(run=run_build)

    grade = subparsers.add_parser(
        "grade",
        help="grade submitted notebooks into a SQLite gradebook",
        description="Copy every submitted notebook, run each copy in its own sandboxed "
        "process (bubblewrap when installed; time and memory limited), compute every "
        "verdict outside it, and record points, status and feedback in a gradebook. "
        "Already graded submissions are skipped unless --regrade.",
    )
    grade.add_argument("submissions", nargs="+", help="notebooks or folders of notebooks")
    grade.add_argument(
        "--out",
        type=Path,
        help="also write the grades as CSV here (one row per student and exercise)",
    )
    grade.add_argument(
        "--summary", type=Path,
        help="also write one row per student here: student,total,maximum,<one column per notebook>",
    )  # fmt: skip
    grade.add_argument(
        "--chapters", type=_chapter_list, metavar="N,M",
        help="the chapters assigned: --summary's maximum is every exercise of these (default: "
        "each chapter at least half of the students submitted work for)",
    )  # fmt: skip
    grade.add_argument(
        "--db", type=Path, default=Path("gradebook.sqlite"), help="default: gradebook.sqlite"
    )
    grade.add_argument("--report", type=Path, help="write one feedback file per student here")
    grade.add_argument("--report-format", choices=["md", "html"], default="md", help="default: md")
    grade.add_argument("-j", "--jobs", type=int, default=1, help="notebooks graded at once")
    grade.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per cell and per exercise (60)"
    )
    grade.add_argument(
        "--memory", type=float, default=2048.0, help="memory limit per submission in MB (2048)"
    )
    grade.add_argument(
        "--max-processes", type=int, default=64,
        help="processes one notebook may run at once, all descendants (64); --memory "
        "applies to their summed resident memory too",
    )  # fmt: skip
    grade.add_argument(
        "--notebook-timeout", type=float, default=600.0,
        help="seconds for a whole notebook, all cells and exercises (600)",
    )  # fmt: skip
    grade.add_argument(
        "--sandbox", choices=["auto", "bubblewrap", "none"], default="auto",
        help="isolate each notebook with bubblewrap (auto: when installed; default)",
    )  # fmt: skip
    grade.add_argument(
        "--require-sandbox", action="store_true",
        help="refuse to grade without a sandbox (same as --sandbox bubblewrap)",
    )  # fmt: skip
    grade.add_argument("--regrade", action="store_true", help="grade again what is graded")
    grade.add_argument(
        "--seed", type=int,
        help="the cases' seed (default: a secret one drawn on the first run into this "
        "gradebook, stored there and reused by every rerun)",
    )  # fmt: skip
    grade.add_argument(
        "--new-seed", action="store_true",
        help="draw a new secret seed for this gradebook (the old grades keep theirs)",
    )  # fmt: skip
    grade.add_argument(
        "--exercises-module", action="append", default=[], metavar="PATH",
        help="extra exercise module (.py file defining EXERCISES; each exercise's run "
        "function in a module of its own, e.g. beside it); may be repeated",
    )  # fmt: skip
    grade.add_argument("--quiet", action="store_true", help="no progress bar or table")
    grade.set_defaults(run=run_grade)

    from .export.command import register as register_export

    register_export(subparsers)


def run_build(args: argparse.Namespace) -> int:
    from .build import BuildError, build, check_up_to_date

    try:
        if args.check:
            return check_up_to_date(args.solutions, args.exercises)
        return build(args.solutions, args.exercises, force=args.force)
    except (BuildError, ImportError) as exc:
        print(f"build-exercises: {exc}", file=sys.stderr)
        return 2


def run_grade(args: argparse.Namespace) -> int:
    from .gradebook import Gradebook
    from .grader import ExerciseDefinitionError, Settings, collect_submissions, grade_batch
    from .sandbox import choose

    try:
        for module in args.exercises_module:
            registry.load_module(module)
        registry.all_exercises()
        warnings: list[str] = []
        submissions = collect_submissions(args.submissions, warnings)
        sandbox = choose("bubblewrap" if args.require_sandbox else args.sandbox)
    except (ImportError, FileNotFoundError, TypeError, ValueError, RuntimeError) as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 2
    if not submissions:
        print("grade: no notebooks found in " + " ".join(args.submissions), file=sys.stderr)
        return 2
    print(sandbox.describe(), file=sys.stderr)
    for warning in warnings:
        print(f"warning: {printable(warning)}", file=sys.stderr)
    exports = [args.db.parent, *(p.parent for p in (args.out, args.summary) if p), args.report]
    settings = Settings(
        timeout=args.timeout, notebook_timeout=args.notebook_timeout, memory_mb=args.memory,
        sandbox=sandbox, max_processes=args.max_processes,
        hide=[p.resolve() for p in exports if p is not None],
    )  # fmt: skip
    keys = [s.key for s in submissions]
    try:
        book = Gradebook(args.db)
    except (ValueError, sqlite3.Error) as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 2
    with book:
        try:
            summary = grade_batch(
                submissions, book, jobs=args.jobs, regrade=args.regrade, seed=args.seed,
                settings=settings, progress=False if args.quiet else None,
                new_seed=args.new_seed,
            )  # fmt: skip
        except ExerciseDefinitionError as exc:
            print(f"grade: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            done = len(book.submission_rows(keys))
            print(
                f"\ninterrupted: {done} of {len(keys)} notebooks are graded and saved in "
                f"{args.db}; run the same command again to grade the rest",
                file=sys.stderr,
            )
            return 130
        if not args.quiet:
            print_table(book, keys)
        for sub in summary.crashed_before:
            print(
                "recorded as crashed (the grader died while grading it alone): "
                + printable(sub.name)
            )
        print(
            f"graded {len(summary.graded)}, skipped {len(summary.skipped)} already graded "
            f"(--regrade to redo), {len(summary.errors)} grader errors; gradebook: {args.db}"
        )
        for sub, error in summary.errors:
            print(f"grader error on {printable(sub.name)}: {printable(error)}", file=sys.stderr)
        for sub in summary.not_graded:
            print(
                f"not graded (the grader could not start its worker): {printable(sub.name)}; "
                "run the same command again to grade it",
                file=sys.stderr,
            )
        if args.out:
            n = book.export_csv(args.out, keys)
            print(f"wrote {n} rows to {args.out}")
        if args.summary:
            n = book.export_summary(args.summary, keys, chapters=args.chapters)
            print(f"wrote {n} students to {args.summary}")
        if args.report:
            paths = book.write_reports(args.report, keys, fmt=args.report_format)
            print(f"wrote {len(paths)} feedback reports to {args.report}/")
    return 1 if summary.errors or summary.not_graded else 0


def print_table(book, keys: list[str]) -> None:
    """One line per submission: student, notebook, points, and how many of each status."""
    from collections import Counter

    statuses: dict[str, Counter] = {}
    for row in book.rows(keys):
        statuses.setdefault(row["submission"], Counter())[row["status"]] += 1
    for sub in book.submission_rows(keys):
        counts = ", ".join(
            f"{n} {s}" for s, n in sorted(statuses.get(sub["submission"], {}).items())
        )
        points = f"{sub['score']:g}/{sub['max_score']:g}" if sub["status"] == "graded" else ""
        student, notebook = printable(sub["student"]), printable(sub["notebook"])
        print(f"{student:<16} {notebook:<28} {points:>9}  {counts or sub['status']}")


def _chapter_list(text: str) -> list[int]:
    """``"3,4"`` -> [3, 4]."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"chapters must be numbers like 3,4: {text!r}") from None
