"""Whether the browser tests can run here: one answer for every test that depends on it.

tests/browser/conftest.py skips the browser tests (or, with ``CI=true``, fails them) when
:func:`browser_problems` names a problem; tests/test_notebooks_lab_only.py runs the chapters
itself when :func:`browser_tests_run` says the browser walk will not.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM = os.environ.get("AUTODIFF_LAB_CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
HOW_TO_ENABLE = (
    "browser tests skipped: no Chromium at {path} (install it: `apt-get install chromium`; "
    "with CI=true they are required)"
)


def browser_problems() -> list[str]:
    """What keeps the browser tests from running: no Chromium, no Playwright (empty: none)."""
    problems = []
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        problems.append(HOW_TO_ENABLE.format(path=CHROMIUM))
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append(
            "browser tests skipped: Playwright is not installed (pip install playwright)"
        )
    return problems


def browser_tests_run() -> bool:
    """Whether the browser tests run here: always with ``CI=true`` (a missing browser fails
    them there), elsewhere when nothing is missing."""
    return IN_CI or not browser_problems()
