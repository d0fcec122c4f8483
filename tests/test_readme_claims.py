"""The numbers the README states are the numbers the project has.

Each test reads a figure from README.md and compares it with what it counts (a test table,
the exercise registry, a notebook folder), so the claim and its evidence cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_number(pattern: str) -> int:
    match = re.search(pattern, README)
    assert match, f"README.md no longer says {pattern!r}: update this test with the README"
    return int(match.group(1))


def test_error_table_size_matches_the_readme():
    from test_engine_errors import ERRORS

    assert readme_number(r"a table of (\d+) bad inputs") == len(ERRORS)
