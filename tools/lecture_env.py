"""The test tools the lecture environment adds, as the ``test`` extra states them.

``make test-lecture`` runs tests/browser/test_rise_slides.py in ``.venv-lecture`` (the lab
extra at the versions of tools/lecture-constraints.txt). The whole test extra cannot go there
(otter-grader 7.0.0 requires ipywidgets>=8.1.5), only what those tests import: pytest,
hypothesis (tests/conftest.py) and Playwright. Their version ranges are read from the
installed ``autodiff-lab``'s metadata, so pyproject.toml stays the one place they are written::

    $ python tools/lecture_env.py
    pytest>=8 hypothesis>=6.100 playwright>=1.45
"""

from __future__ import annotations

import importlib.metadata as metadata
import re

from packaging.requirements import Requirement

#: The test extra's packages the RISE browser tests need (distribution names).
LECTURE_TEST_TOOLS = ("pytest", "hypothesis", "playwright")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_requirements(extra: str, names: tuple[str, ...], dist: str = "autodiff-lab") -> list[str]:
    """``dist``'s requirements of ``extra`` for each of ``names``, in the order of ``names``;
    a name the extra does not list raises ``LookupError``."""
    found: dict[str, str] = {}
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            req.marker = None
            found[_normal(req.name)] = str(req)
    missing = [n for n in names if _normal(n) not in found]
    if missing:
        raise LookupError(f"the {extra} extra of {dist} does not list {', '.join(missing)}")
    return [found[_normal(n)] for n in names]


if __name__ == "__main__":
    print(" ".join(extra_requirements("test", LECTURE_TEST_TOOLS)))
