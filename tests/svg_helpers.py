"""Reading the SVG of the drawings and steppers in tests (shared by the widget tests).

A module of its own rather than conftest.py: tests/ and tests/browser/ each have a conftest,
so ``from conftest import …`` would find whichever was imported first.
"""

from __future__ import annotations

import html
import re

_VALUE_BOX = re.compile(r'<g id="(v\d+)" class="node value (\w+)">(.*?)</g>', re.S)
_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)
_EDGE = re.compile(r'<g id="edge\d+" class="edge">.*?</g>', re.S)


def svg_boxes(svg: str, key: str = "id") -> dict[str, tuple[str, str]]:
    """Every value box of a drawing: its SVG id (``key="label"``: its first text, the node's
    name) -> (its state, all its texts joined by ' | ')."""
    found = {}
    for m in _VALUE_BOX.finditer(svg):
        texts = [html.unescape(t) for t in _TEXT.findall(m.group(3))]
        found[m.group(1) if key == "id" else texts[0]] = (m.group(2), " | ".join(texts))
    return found


def svg_edge_labels(svg: str) -> list[str]:
    """The label of each labelled edge, its lines joined by spaces."""
    labels = [" ".join(html.unescape(t) for t in _TEXT.findall(e)) for e in _EDGE.findall(svg)]
    return [label for label in labels if label]
