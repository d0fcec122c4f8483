"""Text the grader writes — gradebook, CSV, reports, terminal — never acts on its reader.

Students choose folder names, file names and exception messages, so any of them may hold
terminal escapes (``\\x1b[2J`` clears the screen, ``\\r`` overwrites a CSV row as ``cat``
shows it), line breaks (a forged note or report heading), bidi overrides, or a lone
surrogate (``chr(0xD800)``: UTF-8 cannot encode it, so SQLite refuses it). Every such
character is written as its Python escape instead (``\\x1b``, ``\\r``, ``\\u202e``,
``\\ud800``), which is readable, one line, and valid UTF-8.
"""

from __future__ import annotations

import os
import unicodedata

#: Control (C0, DEL, C1), format (bidi overrides), surrogate, line and paragraph separators.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: object) -> str:
    """``text`` with every unsafe character (see :data:`UNSAFE_CATEGORIES`, newline and tab
    included) as a ``\\x1b``-style escape: one line, valid UTF-8, inert in a terminal."""
    text = str(text)
    if text.isprintable():  # every unsafe character is non-printable: the common case
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if unicodedata.category(ch) in UNSAFE_CATEGORIES
        else ch
        for ch in text
    )


def one_line(text: object, limit: int) -> str:
    """:func:`printable`, cut to ``limit`` characters (marked with ``…``)."""
    text = printable(text)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def name_text(name: object) -> str:
    """A name that identifies a student, as :func:`printable` shows it but one to one: a
    backslash is doubled first, so a folder literally named ``caf\\udce9`` never becomes
    the same student as one whose name holds the byte that escape stands for."""
    return printable(str(name).replace("\\", "\\\\"))


def storable_path(path: str | os.PathLike[str]) -> str:
    """A path as text SQLite can hold, one to one (it is the gradebook's key): a backslash
    doubled, bytes that are not UTF-8 (a file name in Latin-1) as ``\\xff`` escapes rather
    than the lone surrogates Python decodes them to — so a folder literally named
    ``caf\\xe9`` never takes the key of the one whose name holds that byte."""
    try:
        raw = os.fsencode(os.fspath(path))
    except UnicodeEncodeError:  # a surrogate that did not come from the file system
        return name_text(path)
    return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")
