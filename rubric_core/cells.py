"""Spreadsheet cells: defusing formulas (CSV injection) and quoting as `csv.writer` does."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

__all__ = ["PLAIN_CELL", "csv_cell", "neutralise_cell"]

_SAFE_FIRST = frozenset(chr(code) for code in range(0x21, 0x7F)) - frozenset("=+-@")
"""First characters that need no look at the rest: printable ASCII but `=`, `+`, `-`, `@`."""
_FORMULA = frozenset("=+-@")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")
_INVISIBLE = frozenset(("Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Cn", "Co", "Cs"))
"""Unicode categories a spreadsheet may skip (or show as nothing) before it reads a
formula: controls, format characters (zero-width space, BOM, soft hyphen), spaces (NBSP),
line separators, combining marks with nothing to combine with (U+034F combining grapheme
joiner, variation selectors), and unassigned, private-use and surrogate code points."""
_BLANK_LETTERS = frozenset("\u115f\u1160\u2800\u3164\uffa0\u2062\u2063\u2064")
"""Characters of a visible category that draw as blank: the Hangul fillers (U+115F,
U+1160, U+3164, U+FFA0), the blank Braille pattern (U+2800) and the invisible operators."""
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')
PLAIN_CELL = re.compile(r'[!#-*.-<>?A-~][^,"\r\n]*\Z')
"""Matches the text cells `csv_cell` writes as they are, the common case, in one call: a
first character in `_SAFE_FIRST` (nor `"` or `,`), no `,`, `"`, CR or LF after it."""


def neutralise_cell(value: str) -> str:
    """Prefix a cell a spreadsheet would run as a formula with an apostrophe.

    A cell is neutralised (OWASP "CSV injection") when it starts with a tab or a carriage
    return, or when its first visible character reads as `=`, `+`, `-` or `@` once
    Unicode-normalised (NFKC: full-width `＝＋－＠` and small forms count), whatever
    spaces, no-break spaces, line breaks, format characters (zero-width space, BOM,
    soft hyphen), combining marks (U+034F) or blank-drawn fillers (U+2800, U+3164 and the
    other Hangul fillers) come before it. A plain number (`-1`, `+2.5`, `-3e4`) is left as it is:
    a spreadsheet reads it as that number and runs nothing.

    Examples:
        >>> neutralise_cell("=HYPERLINK(\\"http://x\\")")
        '\\'=HYPERLINK("http://x")'
        >>> neutralise_cell("\\u200b\\uff1dSUM(A1)"), neutralise_cell(" -1+1")
        ("'\\u200b＝SUM(A1)", "' -1+1")
        >>> neutralise_cell("-1"), neutralise_cell("fine")
        ('-1', 'fine')
    """
    first = value[:1]
    if not first or first in _SAFE_FIRST:
        return value
    if first in _FORMULA:
        if first in "+-" and _PLAIN_NUMBER.match(value):
            return value
        return "'" + value
    if first in "\t\r":
        return "'" + value
    for char in value:
        if char.isspace() or char in _BLANK_LETTERS or unicodedata.category(char) in _INVISIBLE:
            continue
        if unicodedata.normalize("NFKC", char)[:1] in _FORMULA:
            return "'" + value
        break
    return value


def csv_cell(value: Any) -> str:
    """One CSV cell as `csv.writer` (minimal quoting, `\\r\\n` rows) writes it, neutralised.

    Examples:
        >>> csv_cell(None), csv_cell(3), csv_cell(0.5), csv_cell('say "hi", then =go'), csv_cell("=1")
        ('', '3', '0.5', '"say ""hi"", then =go"', "'=1")
    """
    if value is None:
        return ""
    if value.__class__ is not str:
        return str(value)
    if PLAIN_CELL.match(value) is not None:
        return value
    if value and value[0] not in _SAFE_FIRST:
        value = neutralise_cell(value)
    if _NEEDS_QUOTES.search(value) is None:
        return value
    return '"' + value.replace('"', '""') + '"'
