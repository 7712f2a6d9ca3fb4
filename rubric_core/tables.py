"""Reading table files (CSV and JSON Lines) by one set of rules, for datasets and label files.

- Encodings: UTF-8 with or without a byte-order mark, or UTF-16 / UTF-32 marked by
  theirs (as Excel's "Unicode text" saves); anything else (Latin-1, UTF-16 without a
  mark, binary) is an error naming the offset and line, with how to convert.
- CSV is read strictly (`strict=True`): a quote never closed or a stray quote is an error
  naming the line, never rows merged or rewritten.
- A header cell names a column with spaces around it and case ignored; two cells naming
  one column are an error, and so is a row with a non-empty cell past the header's.
- JSON Lines are split at newlines only (not at U+2028 and the other separators
  `str.splitlines` knows, which JSON allows inside a string).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import threading
from collections.abc import Iterator

from rubric_core.errors import InputError

__all__ = [
    "TableError",
    "column_names",
    "csv_rows",
    "decode_table",
    "json_lines",
    "no_extra_cells",
]

_BINARY_SNIFF_BYTES = 8192
_FIELD_LIMIT_LOCK = threading.Lock()


class TableError(InputError):
    """A table file that cannot be read; the message names the file and the line."""


_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),  # before UTF-16 LE: it starts the same
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)
_CONVERT = (
    "save it as UTF-8 (Excel: Save As > CSV UTF-8; a terminal: iconv -f UTF-16 -t UTF-8 IN > OUT)"
)


def decode_table(name: str, data: bytes) -> str:
    """The text of a table file: UTF-8 (BOM or not), or UTF-16/32 marked by their BOM."""
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                msg = f"{name}: starts with a {label} byte-order mark but is not valid {label} ({exc.reason} at byte {exc.start}); {_CONVERT}"
                raise TableError(msg) from exc
    head = data[:_BINARY_SNIFF_BYTES]
    if b"\x00" in head:
        even, odd = head[0::2], head[1::2]
        if len(head) >= 4 and (odd.count(0) >= len(odd) * 0.9 or even.count(0) >= len(even) * 0.9):
            msg = f"{name}: looks like UTF-16 text without a byte-order mark, not UTF-8; {_CONVERT}"
        else:
            msg = f"{name}: looks like a binary file (NUL bytes), not CSV or JSONL text"
        raise TableError(msg)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        msg = (
            f"{name}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}); save it as UTF-8"
        )
        raise TableError(msg) from exc


def csv_rows(
    name: str, text: str, *, field_chars: int, field_note: str = ""
) -> list[tuple[int, list[str]]]:
    """(the line a row starts on, its cells) for each row, read strictly.

    `strict=True` makes the csv module refuse what it would otherwise guess at: a quote
    that is never closed (it swallowed every later row into one field) and a stray quote
    after a closing one (`"a"b"` read as `ab"`). The error names the row's first line.
    The rows are read at once, inside `_wide_fields`.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, list[str]]] = []
    with _wide_fields(field_chars):
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return rows
            except csv.Error as exc:
                problem = _csv_problem(
                    name, start, reader.line_num, str(exc), field_chars, field_note
                )
                raise TableError(problem) from exc
            rows.append((start, row))


@contextlib.contextmanager
def _wide_fields(field_chars: int) -> Iterator[None]:
    """The csv module's field limit raised to `field_chars` for the block, then put
    back. The limit is process-wide (the csv module has no per-reader one), so the lock
    keeps two datasets from restoring each other's; another CSV read running meanwhile
    (a labels file) may briefly accept a longer field, never a shorter one."""
    with _FIELD_LIMIT_LOCK:
        previous = csv.field_size_limit(max(csv.field_size_limit(), field_chars))
        try:
            yield
        finally:
            csv.field_size_limit(previous)


def _csv_problem(
    name: str, start: int, end: int, problem: str, field_chars: int, field_note: str
) -> str:
    where = f"line {start}" if end <= start else f"the row starting on line {start}"
    if "unexpected end of data" in problem:
        return (
            f'{name}: line {start}: a quoted field opened on this line is never closed (a " '
            'with no closing "; every later line would have merged into it); close it, or '
            'double a quote inside a field ("")'
        )
    if "expected after" in problem:
        return (
            f'{name}: {where}: a quote inside a quoted field must be doubled (""); '
            f"the csv module says: {problem}"
        )
    if "field larger than field limit" in problem:
        return (
            f"{name}: {where}: a field is longer than {field_chars:,} characters"
            f"{field_note}; if it should not be, look for an unterminated quote"
        )
    return f"{name}: {where} is not valid CSV: {problem}"


def column_names(name: str, line: int, cells: list[str]) -> list[str]:
    """The header's column names, compared as the readers compare them (spaces around and
    case ignored: `Output` is `output`); two cells that name one column are an error."""
    names = [cell.strip().lstrip("\ufeff").casefold() for cell in cells]
    seen: dict[str, list[str]] = {}
    for cell, key in zip(cells, names, strict=True):
        if key:
            seen.setdefault(key, []).append(cell)
    for key, spelled in seen.items():
        if len(spelled) > 1:
            shown = ", ".join(repr(cell) for cell in spelled)
            msg = (
                f"{name}: line {line}: the header names column {key!r} {len(spelled)} times "
                f"({shown}; spaces and case are ignored); keep one, or rename the others"
            )
            raise TableError(msg)
    return names


def no_extra_cells(name: str, line: int, row: list[str], width: int) -> None:
    """A row with a non-empty cell past the header's columns is an error (an unquoted comma
    usually): its text would be dropped silently."""
    extra = [cell for cell in row[width:] if cell.strip()]
    if extra:
        msg = (
            f"{name}: line {line}: the row has {len(row)} cells but the header {width}; "
            "quote a field that holds a comma, or name the extra column in the header"
        )
        raise TableError(msg)


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number, line) of a JSON Lines text: split at newlines only (`str.splitlines` also
    splits at U+2028, U+0085 and others, which JSON allows inside a string)."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")
