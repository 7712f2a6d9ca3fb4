"""Datasets of inputs for batches: CSV with an `input` column, or JSONL; from a file or an upload."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path, PurePath

from rubric_core.errors import InputError
from rubric_core.runs.spec import MAX_INPUT_CHARS

__all__ = ["DATASET_SUFFIXES", "DatasetError", "load_dataset", "load_upload"]

_BINARY_SNIFF_BYTES = 8192
_SUFFIXES_CSV = (".csv",)
_SUFFIXES_JSONL = (".jsonl", ".ndjson")

DATASET_SUFFIXES: tuple[str, ...] = (*_SUFFIXES_CSV, *_SUFFIXES_JSONL)
"""File endings a dataset may have (compared case-insensitively)."""


class DatasetError(InputError):
    """A dataset file that cannot be read; the message names the file and the row or line."""


def _decode(name: str, data: bytes) -> str:
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
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
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        msg = f"{name}: line 1 is not valid CSV: {exc}"
        raise DatasetError(msg) from exc
    while header is not None and not any(cell.strip() for cell in header):
        header = next(reader, None)
    if header is None:
        msg = f"{name}: is empty; expected a header row with an 'input' column"
        raise DatasetError(msg)
    names = [cell.strip().lstrip("\ufeff").casefold() for cell in header]
    if "input" in names:
        column = names.index("input")
    elif len(names) == 1:
        column = 0
    else:
        msg = (
            f"{name}: has no 'input' column (columns: {', '.join(c.strip() for c in header)}); "
            "name the column holding the inputs 'input'"
        )
        raise DatasetError(msg)
    inputs: list[str] = []
    row_number = 1
    try:
        for row in reader:
            row_number += 1
            if not row:
                continue  # a blank line; a row of empty cells is an empty input
            value = row[column] if column < len(row) else ""
            where = f"row {row_number} (line {reader.line_num})"
            inputs.append(_check_value(name, where, value))
    except csv.Error as exc:
        msg = f"{name}: line {reader.line_num} is not valid CSV: {exc}"
        raise DatasetError(msg) from exc
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
    line. Blank lines are skipped; UTF-8 with or without a byte-order mark.

    Raises:
        DatasetError: Naming the file and the row or line that is wrong.

    Examples:
        >>> load_dataset("prompts.jsonl")  # doctest: +SKIP
        ['Write a haiku about rain', 'Write a haiku about snow']
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        msg = f"{path}: no such file"
        raise DatasetError(msg) from exc
    except IsADirectoryError as exc:
        msg = f"{path}: is a directory, not a dataset file"
        raise DatasetError(msg) from exc
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror})"
        raise DatasetError(msg) from exc
    return _parse(str(path), path.suffix.casefold(), data)


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
        rubric_core.runs.datasets.DatasetError: prompts.xlsx: upload a .csv (with an 'input' column) or a .jsonl file ({"input": ...} per line)
    """
    suffix = PurePath(file_name).suffix.casefold()
    if suffix not in DATASET_SUFFIXES:
        msg = (
            f"{file_name}: upload a .csv (with an 'input' column) or a .jsonl file "
            '({"input": ...} per line)'
        )
        raise DatasetError(msg)
    return _parse(file_name, suffix, data)
