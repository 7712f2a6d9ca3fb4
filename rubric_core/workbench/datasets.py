"""Datasets of inputs for batches: CSV with an `input` column, or JSONL; from a file or an upload."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any, TypedDict

from rubric_core.errors import InputError
from rubric_core.evaluate import LabelError, parse_dataset_labels
from rubric_core.runs.spec import MAX_INPUT_CHARS, lone_surrogate
from rubric_core.tables import (
    TableError,
    column_names,
    csv_rows,
    decode_table,
    json_lines,
    no_extra_cells,
)

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

_SUFFIXES_CSV = (".csv",)
_SUFFIXES_JSONL = (".jsonl", ".ndjson")

DATASET_SUFFIXES: tuple[str, ...] = (*_SUFFIXES_CSV, *_SUFFIXES_JSONL)
"""File endings a dataset may have (compared case-insensitively)."""


class DatasetError(InputError):
    """A dataset file that cannot be read; the message names the file and the row or line."""


_CSV_FIELD_CHARS = 10 * MAX_INPUT_CHARS
"""Longest CSV field read. The csv module's own default (131,072) is below an input's
limit (`MAX_INPUT_CHARS`), so a valid long input was refused; the reader raises the
module's limit to this (`tables.csv_rows`), and a longer field is reported with its line."""

MAX_OUTPUT_CHARS = 200_000
"""Longest output a grade-only row may give (the code checks read as much: JSON up to
200,000 characters, regular expressions over as many)."""


@contextlib.contextmanager
def _dataset_errors() -> Iterator[None]:
    """A table reader's error (`tables.TableError`) raised as this module's `DatasetError`."""
    try:
        yield
    except TableError as exc:
        raise DatasetError(str(exc)) from exc


def _csv_rows(name: str, text: str) -> list[tuple[int, list[str]]]:
    note = f" (an input may be {MAX_INPUT_CHARS:,})"
    return csv_rows(name, text, field_chars=_CSV_FIELD_CHARS, field_note=note)


def _storable(name: str, where: str, key: str, value: str) -> None:
    problem = lone_surrogate(value)
    if problem is not None:
        msg = f"{name}: {where}: {key!r} {problem}"
        raise DatasetError(msg)


def _unique_keys(name: str, number: int) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        item: dict[str, Any] = {}
        for key, value in pairs:
            if key in item:
                msg = f"{name}: line {number}: key {key!r} appears twice in one object; keep one"
                raise DatasetError(msg)
            item[key] = value
        return item

    return hook


def _check_value(name: str, where: str, value: object) -> str:
    if not isinstance(value, str):
        msg = f"{name}: {where}: 'input' must be text, got {type(value).__name__}"
        raise DatasetError(msg)
    _storable(name, where, "input", value)
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
    names = column_names(name, header[0], cells)
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
        no_extra_cells(name, line, row, len(names))
        value = row[column] if column < len(row) else ""
        inputs.append(_check_value(name, f"row {row_number} (line {line})", value))
    if not inputs:
        msg = f"{name}: has a header but no rows"
        raise DatasetError(msg)
    return inputs


def _load_jsonl(name: str, text: str) -> list[str]:
    inputs: list[str] = []
    for number, line in json_lines(text):
        if not line.strip():
            continue
        try:
            item = json.loads(line, object_pairs_hook=_unique_keys(name, number))
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
    with _dataset_errors():
        return _parse_text(name, suffix, decode_table(name, data))


def _parse_text(name: str, suffix: str, text: str) -> list[str]:
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
    _storable(name, where, "output", output)
    try:
        labels = parse_dataset_labels(record.get("labels"), row=where, source=name)
    except LabelError as exc:
        raise DatasetError(str(exc)) from exc
    return {"row": number, "input": text, "output": output, "labels": labels}


def _graded_csv(name: str, text: str) -> list[GradedRow]:
    rows = iter(_csv_rows(name, text))
    first, header = next(rows, (1, []))
    names = column_names(name, first, header)
    missing = [column for column in ("input", "output") if column not in names]
    if missing:
        msg = (
            f"{name}: has no {' or '.join(map(repr, missing))} column (columns: "
            f"{', '.join(c.strip() for c in header) or 'none'}); a dataset to grade needs "
            "'input' and 'output' columns (and, optionally, 'labels')"
        )
        raise DatasetError(msg)
    graded: list[GradedRow] = []
    for line, row in rows:
        if not row:
            continue
        no_extra_cells(name, line, row, len(names))
        record = {n: row[i] if i < len(row) else "" for i, n in enumerate(names) if n}
        number = len(graded) + 2
        graded.append(_graded_row(name, f"row {number}", number, record))
    return graded


def _graded_jsonl(name: str, text: str) -> list[GradedRow]:
    rows: list[GradedRow] = []
    for number, line in json_lines(text):
        if not line.strip():
            continue
        try:
            item = json.loads(line, object_pairs_hook=_unique_keys(name, number))
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
    with _dataset_errors():
        return _parse_graded_text(name, suffix, decode_table(name, data))


def _parse_graded_text(name: str, suffix: str, text: str) -> list[GradedRow]:
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
