"""``autodiff-lab start [DIR]``: copy the course into a folder of the learner's and open it.

The course is the chapters (``notebooks/``) and the exercise notebooks (``exercises/``) —
never the solutions. A wheel carries them as package data in ``autodiff_lab/course_files/``
(setup.py copies :data:`COURSE_FILES` there at build time); a clone or an editable install
reads them from the checkout. ``start`` copies them into ``DIR/notebooks`` and
``DIR/exercises`` (the chapters link to ``../exercises/…``, so the layout is kept) and opens
JupyterLab there: the learner works in that copy, and the committed or installed notebooks are
never modified.

Copying follows ``build-exercises``' rule (:func:`autodiff_lab.grading.build.write_keeping_edits`):
each folder's ``.manifest.json`` records the hash of what was copied, so a notebook the learner
changed is kept and a newer version goes beside it as ``NAME.new.ipynb``; an untouched one is
updated. With the course already copied, ``start`` just opens it.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

from .grading.build import read_manifest, sha256_text, write_keeping_edits, write_manifest

#: The course, as globs relative to the repository (setup.py packages exactly these).
COURSE_FILES = ["notebooks/*.ipynb", "notebooks/rise.css", "exercises/*.ipynb"]
#: Where the packaged copy lives inside the installed package.
PACKAGED = Path(__file__).resolve().parent / "course_files"
#: The notebook JupyterLab opens first.
FIRST_NOTEBOOK = "notebooks/00_start_here.ipynb"
#: ``start`` without DIR: a folder in the learner's home, named after the course.
DEFAULT_FOLDER = "autodiff-lab"


def course_source() -> Path:
    """The folder holding ``notebooks/`` and ``exercises/``: the wheel's package data, else the
    checkout this package is imported from (a clone, an editable install)."""
    checkout = Path(__file__).resolve().parent.parent
    for root in (PACKAGED, checkout):
        if (root / "notebooks").is_dir() and (root / "exercises").is_dir():
            return root
    raise FileNotFoundError(
        f"the course's notebooks are not installed with this package (looked in {PACKAGED} "
        f"and {checkout}): reinstall autodiff-lab from its wheel or work in a clone"
    )


def course_files(root: Path) -> list[Path]:
    """Every course file under ``root``, relative to it, in order."""
    return sorted({p.relative_to(root) for pattern in COURSE_FILES for p in root.glob(pattern)})


def copy_course(target: Path, *, force: bool = False, out=None) -> int:
    """Copy the course into ``target``, keeping the learner's edits; return how many files
    were written (0: everything was already there and up to date). Each file's line is
    printed except "up to date", which is counted in one closing line instead."""
    out = out or sys.stdout
    source = course_source()
    files = course_files(source)
    log = io.StringIO()
    for folder in sorted({f.parent for f in files}):
        (target / folder).mkdir(parents=True, exist_ok=True)
        manifest = read_manifest(target / folder)
        for name in (f for f in files if f.parent == folder):
            text = (source / name).read_bytes().decode("utf-8")
            if write_keeping_edits(target / name, text, manifest, force=force, out=log):
                manifest["files"][name.name] = {"sha256": sha256_text(text), "source": str(name)}
        write_manifest(target / folder, manifest)
    lines = log.getvalue().splitlines()
    current = [line for line in lines if line.startswith("up to date: ")]
    for line in lines:
        if line not in current:
            print(line, file=out)
    changed = len(lines) - len(current)
    if current:
        print(
            f"{len(current)} of {len(files)} course files already up to date in {target}", file=out
        )
    return changed


def jupyter_lab_command(target: Path, *, port: int | None, token: str | None, browser: bool):
    """The command that opens JupyterLab on the copy, at the start page."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={target}"]
    if port is not None:
        command.append(f"--port={port}")
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    if not browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # JupyterLab refuses to run as root without it
    return [*command, FIRST_NOTEBOOK]


def register(subparsers) -> None:
    """Add ``start`` to the ``autodiff-lab`` sub-command parsers."""
    start = subparsers.add_parser(
        "start",
        help="copy the course into a folder (default ~/autodiff-lab) and open it in JupyterLab",
        description="Copy the chapters and exercise notebooks into DIR/notebooks and "
        "DIR/exercises, then open JupyterLab there. A notebook you changed is never "
        "overwritten: a newer version goes beside it as NAME.new.ipynb (--force replaces "
        "it, backing yours up first). With the course already there, it just opens it.",
    )
    start.add_argument(
        "dir", nargs="?", type=Path, default=Path.home() / DEFAULT_FOLDER,
        help=f"the course folder (default: ~/{DEFAULT_FOLDER})",
    )  # fmt: skip
    start.add_argument("--port", type=int, help="JupyterLab's port (default: its own, 8888)")
    start.add_argument("--token", help="JupyterLab's token (default: a random one)")
    start.add_argument(
        "--no-browser", action="store_true", help="start JupyterLab without opening a browser"
    )
    start.add_argument(
        "--no-lab", action="store_true", help="copy the course only; do not start JupyterLab"
    )
    start.add_argument(
        "--force", action="store_true",
        help="replace notebooks you changed with the course's (yours are backed up first)",
    )  # fmt: skip
    start.set_defaults(run=run_start)


def run_start(args: argparse.Namespace) -> int:
    target = args.dir.expanduser().resolve()
    try:
        changed = copy_course(target, force=args.force)
    except (OSError, ValueError) as exc:  # BuildError is a ValueError (a broken manifest)
        print(f"start: {exc}", file=sys.stderr)
        return 2
    print(f"the course is in {target}" + ("" if changed else " (nothing to copy)"))
    if args.no_lab:
        print(f"open it with: jupyter lab {target / FIRST_NOTEBOOK}")
        return 0
    if importlib.util.find_spec("jupyterlab") is None:
        print(
            "start: JupyterLab is not installed in this environment: "
            "pip install 'autodiff-lab[lab]' (or open the folder in your own Jupyter)",
            file=sys.stderr,
        )
        return 1
    command = jupyter_lab_command(
        target, port=args.port, token=args.token, browser=not args.no_browser
    )
    print(f"opening {FIRST_NOTEBOOK} in JupyterLab (stop it with Ctrl+C)", flush=True)
    try:
        return subprocess.call(command, cwd=target)
    except KeyboardInterrupt:
        return 0
