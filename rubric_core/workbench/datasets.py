"""Datasets of inputs for batches: CSV with an `input` column, or JSONL; from a file or an upload."""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any, TypedDict

from rubric_core.errors import InputError
from rubric_core.evaluate import LabelError, parse_dataset_labels
from rubric_core.runs.spec import MAX_INPUT_CHARS

__all__ = [
    "DATASET_SUFFIXES",
    "MAX_OUTPUT_CHARS",
    "DatasetError",
    "GradedRow",
    "load_dataset",
    "load_graded_dataset",
    "load_graded_upload",
    "load_upload",
]

_BINARY_SNIFF_BYTES = 8192
_SUFFIXES_CSV = (".csv",)
_SUFFIXES_JSONL = (".jsonl", ".ndjson")

DATASET_SUFFIXES: tuple[str, ...] = (*_SUFFIXES_CSV, *_SUFFIXES_JSONL)
"""File endings a dataset may have (compared case-insensitively)."""


class DatasetError(InputError):
    """A dataset file that cannot be read; the message names the file and the row or line."""


_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),  # before UTF-16 LE: it starts the same
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)
_CONVERT = (
    "save it as UTF-8 (Excel: Save As > CSV UTF-8; a terminal: iconv -f UTF-16 -t UTF-8 IN > OUT)"
)

_CSV_FIELD_CHARS = 10 * MAX_INPUT_CHARS
"""Longest CSV field read. The csv module's own default (131,072) is below an input's
limit (`MAX_INPUT_CHARS`), so a valid long input was refused; `_csv_rows` reads with the
module's limit raised to this (`_wide_fields`), and a longer field is reported with its
line."""
_FIELD_LIMIT_LOCK = threading.Lock()

MAX_OUTPUT_CHARS = 200_000
"""Longest output a grade-only row may give (the code checks read as much: JSON up to
200,000 characters, regular expressions over as many)."""


def _decode(name: str, data: bytes) -> str:
    """The text of a dataset: UTF-8 (BOM or not), or UTF-16/32 marked by their BOM."""
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                msg = f"{name}: starts with a {label} byte-order mark but is not valid {label} ({exc.reason} at byte {exc.start}); {_CONVERT}"
                raise DatasetError(msg) from exc
    head = data[:_BINARY_SNIFF_BYTES]
    if b"\x00" in head:
        even, odd = head[0::2], head[1::2]
        if len(head) >= 4 and (odd.count(0) >= len(odd) * 0.9 or even.count(0) >= len(even) * 0.9):
            msg = f"{name}: looks like UTF-16 text without a byte-order mark, not UTF-8; {_CONVERT}"
        else:
            msg = f"{name}: looks like a binary file (NUL bytes), not CSV or JSONL text"
        raise DatasetError(msg)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        msg = (
            f"{name}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}); save it as UTF-8"
        )
        raise DatasetError(msg) from exc


def _csv_rows(name: str, text: str) -> list[tuple[int, list[str]]]:
    """(the line a row starts on, its cells) for each row, read strictly.

    `strict=True` makes the csv module refuse what it would otherwise guess at: a quote
    that is never closed (it swallowed every later row into one field) and a stray quote
    after a closing one (`"a"b"` read as `ab"`). The error names the row's first line.
    The rows are read at once, inside `_wide_fields`.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, list[str]]] = []
    with _wide_fields():
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return rows
            except csv.Error as exc:
                problem = _csv_problem(name, start, reader.line_num, str(exc))
                raise DatasetError(problem) from exc
            rows.append((start, row))


@contextlib.contextmanager
def _wide_fields() -> Iterator[None]:
    """The csv module's field limit raised to `_CSV_FIELD_CHARS` for the block, then put
    back. The limit is process-wide (the csv module has no per-reader one), so the lock
    keeps two datasets from restoring each other's; another CSV read running meanwhile
    (a labels file) may briefly accept a longer field, never a shorter one."""
    with _FIELD_LIMIT_LOCK:
        previous = csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_CHARS))
        try:
            yield
        finally:
            csv.field_size_limit(previous)


def _csv_problem(name: str, start: int, end: int, problem: str) -> str:
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
            f"{name}: {where}: a field is longer than {_CSV_FIELD_CHARS:,} characters "
            f"(an input may be {MAX_INPUT_CHARS:,}); if it should not be, look for an "
            "unterminated quote"
        )
    return f"{name}: {where} is not valid CSV: {problem}"


def _check_value(name: str, where: str, value: object) -> str:
    if not isinstance(value, str):
        msg = f"{name}: {where}: 'input' must be text, got {type(value).__name__}"
        raise DatasetError(msg)
    if not value.strip():
        msg = f"{name}: {where} has an empty input"
        raise DatasetError(msg)
    if len(value) > MAX_INPUT_CHARS:
        msg = (
            f"{name}: {where}: input is {len(value):,} characters; the limit is {MAX_INPUT_CHARS:,}"
        )
        raise DatasetError(msg)
    return value


def _load_csv(name: str, text: str) -> list[str]:
    rows = iter(_csv_rows(name, text))
    header = next(rows, None)
    while header is not None and not any(cell.strip() for cell in header[1]):
        header = next(rows, None)
    if header is None:
        msg = f"{name}: is empty; expected a header row with an 'input' column"
        raise DatasetError(msg)
    cells = header[1]
    names = [cell.strip().lstrip("\ufeff").casefold() for cell in cells]
    if "input" in names:
        column = names.index("input")
    elif len(names) == 1:
        column = 0
    else:
        msg = (
            f"{name}: has no 'input' column (columns: {', '.join(c.strip() for c in cells)}); "
            "name the column holding the inputs 'input'"
        )
        raise DatasetError(msg)
    inputs: list[str] = []
    row_number = 1
    for line, row in rows:
        row_number += 1
        if not row:
            continue  # a blank line; a row of empty cells is an empty input
        value = row[column] if column < len(row) else ""
        inputs.append(_check_value(name, f"row {row_number} (line {line})", value))
    if not inputs:
        msg = f"{name}: has a header but no rows"
        raise DatasetError(msg)
    return inputs


def _load_jsonl(name: str, text: str) -> list[str]:
    inputs: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{name}: line {number} is not valid JSON ({exc.msg} at column {exc.colno})"
            raise DatasetError(msg) from exc
        if isinstance(item, dict):
            if "input" not in item:
                keys = ", ".join(map(str, item)) or "none"
                msg = f"{name}: line {number} has no 'input' key (keys: {keys})"
                raise DatasetError(msg)
            item = item["input"]
        elif not isinstance(item, str):
            msg = (
                f"{name}: line {number} must be an object with an 'input' key or a string, "
                f"got {type(item).__name__}"
            )
            raise DatasetError(msg)
        inputs.append(_check_value(name, f"line {number}", item))
    if not inputs:
        msg = f"{name}: is empty; expected one JSON object or string per line"
        raise DatasetError(msg)
    return inputs


def _parse(name: str, suffix: str, data: bytes) -> list[str]:
    """The inputs of a dataset's bytes; `name` is how errors refer to the file."""
    text = _decode(name, data)
    if not text.strip():
        msg = f"{name}: is empty"
        raise DatasetError(msg)
    if suffix in _SUFFIXES_JSONL:
        return _load_jsonl(name, text)
    if suffix in _SUFFIXES_CSV:
        return _load_csv(name, text)
    msg = f"{name}: unknown dataset type {suffix or '(no extension)'!r}; use .csv or .jsonl"
    raise DatasetError(msg)


def load_dataset(path: str | Path) -> list[str]:
    """Read a dataset of inputs, one run per row.

    CSV: the first row is the header; the column named `input` is used, or the only
    column if there is one. JSONL: one `{"input": ...}` object or one JSON string per
    line. Blank lines are skipped; UTF-8 with or without a byte-order mark, or UTF-16 /
    UTF-32 with one (as Excel's "Unicode text" saves). A CSV is read strictly: a quote
    left open or a stray quote is an error naming the line, never rows merged.

    Raises:
        DatasetError: Naming the file and the row or line that is wrong.

    Examples:
        >>> load_dataset("prompts.jsonl")  # doctest: +SKIP
        ['Write a haiku about rain', 'Write a haiku about snow']
    """
    path = Path(path)
    return _parse(str(path), path.suffix.casefold(), _read(path))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        msg = f"{path}: no such file"
        raise DatasetError(msg) from exc
    except IsADirectoryError as exc:
        msg = f"{path}: is a directory, not a dataset file"
        raise DatasetError(msg) from exc
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror})"
        raise DatasetError(msg) from exc


def load_upload(file_name: str, data: bytes) -> list[str]:
    """Read an uploaded dataset (a browser upload: a file name and its bytes) into inputs.

    The same rules and row-numbered errors as `load_dataset`, with the errors naming
    `file_name` as the person uploaded it; nothing is written to disk.

    Raises:
        DatasetError: The file is not CSV or JSONL, or it holds no valid inputs.

    Examples:
        >>> load_upload("prompts.csv", b"input\\nWrite a haiku about rain\\n")
        ['Write a haiku about rain']
        >>> load_upload("prompts.xlsx", b"PK")
        Traceback (most recent call last):
        ...
        rubric_core.workbench.datasets.DatasetError: prompts.xlsx: upload a .csv (with an 'input' column) or a .jsonl file ({"input": ...} per line)
    """
    suffix = PurePath(file_name).suffix.casefold()
    if suffix not in DATASET_SUFFIXES:
        msg = (
            f"{file_name}: upload a .csv (with an 'input' column) or a .jsonl file "
            '({"input": ...} per line)'
        )
        raise DatasetError(msg)
    return _parse(file_name, suffix, data)


# --------------------------------------------------------------------------- graded datasets


class GradedRow(TypedDict):
    """One row of a dataset of existing outputs to grade (no agent runs)."""

    row: int
    """Its row (CSV, the header is row 1) or line (JSONL) number."""

    input: str
    """The request the output answered."""

    output: str
    """The output to grade."""

    labels: dict[str, bool]
    """Expected verdicts from the optional `labels` column (criterion to true/false)."""


def _graded_row(name: str, where: str, number: int, record: dict[str, Any]) -> GradedRow:
    text = _check_value(name, where, record.get("input"))
    output = record.get("output")
    if not isinstance(output, str):
        msg = f"{name}: {where}: 'output' must be text, got {type(output).__name__}"
        raise DatasetError(msg)
    if not output.strip():
        msg = f"{name}: {where} has an empty output; there is nothing to grade"
        raise DatasetError(msg)
    if len(output) > MAX_OUTPUT_CHARS:
        msg = f"{name}: {where}: output is {len(output):,} characters; the limit is {MAX_OUTPUT_CHARS:,}"
        raise DatasetError(msg)
    try:
        labels = parse_dataset_labels(record.get("labels"), row=where, source=name)
    except LabelError as exc:
        raise DatasetError(str(exc)) from exc
    return {"row": number, "input": text, "output": output, "labels": labels}


def _graded_csv(name: str, text: str) -> list[GradedRow]:
    rows = iter(_csv_rows(name, text))
    header = next(rows, (1, []))[1]
    names = [cell.strip().lstrip("\ufeff").casefold() for cell in header]
    missing = [column for column in ("input", "output") if column not in names]
    if missing:
        msg = (
            f"{name}: has no {' or '.join(map(repr, missing))} column (columns: "
            f"{', '.join(c.strip() for c in header) or 'none'}); a dataset to grade needs "
            "'input' and 'output' columns (and, optionally, 'labels')"
        )
        raise DatasetError(msg)
    graded: list[GradedRow] = []
    for _line, row in rows:
        if not row:
            continue
        record = {n: row[i] if i < len(row) else "" for i, n in enumerate(names)}
        number = len(graded) + 2
        graded.append(_graded_row(name, f"row {number}", number, record))
    return graded


def _graded_jsonl(name: str, text: str) -> list[GradedRow]:
    rows: list[GradedRow] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{name}: line {number} is not valid JSON ({exc.msg} at column {exc.colno})"
            raise DatasetError(msg) from exc
        if not isinstance(item, dict) or "output" not in item or "input" not in item:
            keys = ", ".join(map(str, item)) if isinstance(item, dict) else type(item).__name__
            msg = (
                f"{name}: line {number} needs an object with 'input' and 'output' keys "
                f"(got {keys}); a dataset to grade holds existing outputs"
            )
            raise DatasetError(msg)
        rows.append(_graded_row(name, f"line {number}", number, item))
    return rows


def _parse_graded(name: str, suffix: str, data: bytes) -> list[GradedRow]:
    text = _decode(name, data)
    if suffix not in DATASET_SUFFIXES:
        msg = f"{name}: use a .csv (with 'input' and 'output' columns) or a .jsonl file"
        raise DatasetError(msg)
    rows = _graded_jsonl(name, text) if suffix in _SUFFIXES_JSONL else _graded_csv(name, text)
    if not rows:
        msg = f"{name}: has no rows to grade"
        raise DatasetError(msg)
    return rows


def load_graded_dataset(path: str | Path) -> list[GradedRow]:
    """Read a dataset of existing outputs to grade: `input` + `output` (+ optional `labels`).

    CSV with `input` and `output` columns, or JSONL objects with those keys. A `labels`
    column (or key) holds a JSON object from criterion name to `true`/`false`: expected
    verdicts, stored as human labels.

    Raises:
        DatasetError: No `output` column, an empty output, unreadable labels...; the
            message names the file and the row.

    Examples:
        >>> load_graded_dataset("graded.csv")  # doctest: +SKIP
        [{'row': 2, 'input': 'Write a haiku', 'output': '...', 'labels': {}}]
    """
    path = Path(path)
    return _parse_graded(str(path), path.suffix.casefold(), _read(path))


def load_graded_upload(file_name: str, data: bytes) -> list[GradedRow]:
    """`load_graded_dataset` for an upload (its name and bytes).

    Examples:
        >>> load_graded_upload("g.csv", b"input,output\\nq,a\\n")
        [{'row': 2, 'input': 'q', 'output': 'a', 'labels': {}}]
        >>> load_graded_upload("g.csv", b"input\\nq\\n")
        Traceback (most recent call last):
        ...
        rubric_core.workbench.datasets.DatasetError: g.csv: has no 'output' column (columns: input); a dataset to grade needs 'input' and 'output' columns (and, optionally, 'labels')
    """
    return _parse_graded(file_name, PurePath(file_name).suffix.casefold(), data)
