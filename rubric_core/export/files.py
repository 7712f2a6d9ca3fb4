"""The export datasets written to files: open ones, a path (renamed into place), a spool."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rubric_core.export.columns import (
    FETCH_ROWS,
    FORMATS,
    Dataset,
    ExportError,
    Format,
    check_request,
)
from rubric_core.export.rows import iter_rows
from rubric_core.export.streams import csv_chunks, csv_text, jsonl_chunks, jsonl_text
from rubric_core.export.training import TRAINING_FORMATS, TrainingOptions, write_training
from rubric_core.outputs import open_output

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = ["export_file", "is_parquet", "open_export", "write_csv", "write_jsonl"]


def _write(fp: IO[Any], chunks: Iterator[str]) -> None:
    binary = isinstance(fp, io.RawIOBase | io.BufferedIOBase) or "b" in getattr(fp, "mode", "")
    for chunk in chunks:
        fp.write(chunk.encode("utf-8") if binary else chunk)


def write_csv(
    store: Store,
    fp: IO[Any],
    dataset: Dataset | str = "criteria",
    *,
    bom: bool = False,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> int:
    """Write a dataset as CSV to an open file (text opened with `newline=""`, or binary).

    Returns:
        The number of data rows written (the header not counted).
    """
    chosen = check_request(dataset, filters, filter_args)
    counter = [0]
    text = csv_text(store, dataset, chosen, bom=bom, rows_per_chunk=FETCH_ROWS, counter=counter)
    _write(fp, text)
    return counter[0]


def write_jsonl(
    store: Store,
    fp: IO[Any],
    dataset: Dataset | str = "criteria",
    *,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> int:
    """Write a dataset as JSON Lines (for programs, not neutralised) to an open file (text or
    binary); returns rows written."""
    rows = iter_rows(store, dataset, filters=filters, **filter_args)
    counter = [0]
    _write(fp, jsonl_text(rows, rows_per_chunk=500, counter=counter))
    return counter[0]


def _format_for(path: Path, fmt: str | None) -> str:
    if fmt is None:
        suffix = path.suffix.lower().lstrip(".")
        fmt = {"jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv"}.get(suffix)
        if fmt is None:
            msg = f"cannot tell the export format from {path.name!r}; name it .csv or .jsonl"
            raise ExportError(msg)
    if fmt not in FORMATS and fmt not in TRAINING_FORMATS:
        known = ", ".join((*FORMATS, *TRAINING_FORMATS))
        msg = f"unknown export format {fmt!r}; choose one of {known}"
        raise ExportError(msg)
    return fmt


def is_parquet(path: str | Path) -> bool:
    """A training export to this path is written as Parquet (its suffix is `.parquet`)."""
    return Path(path).suffix.lower() == ".parquet"


def export_file(
    store: Store,
    path: str | Path,
    *,
    fmt: Format | str | None = None,
    dataset: Dataset | str = "criteria",
    bom: bool = False,
    filters: RunFilters | None = None,
    training: TrainingOptions | None = None,
    **filter_args: Any,
) -> int:
    """Export a dataset to a file; the format follows the suffix unless `fmt` is given.

    `fmt` may also be a training format (`sft`, `preference`, `trajectories`: see
    `rubric_core.export.training`; `dataset` is then not used), written as JSON Lines, or
    as Parquet when the path ends in `.parquet`.

    A regular file (or a symlink to one: its target) is written next to its destination
    and renamed into place, so a failed export never leaves half a file behind; `-` is
    standard output, and a device, FIFO or socket is written in place
    (`rubric_core.outputs`).

    Returns:
        The number of data rows written.
    """
    path = Path(path)
    fmt = _format_for(path, fmt)
    if fmt not in TRAINING_FORMATS and is_parquet(path):
        msg = f"{fmt} exports are CSV or JSON Lines; Parquet is for sft, preference, trajectories"
        raise ExportError(msg)
    chosen = check_request(dataset, filters, filter_args)
    with open_output(path, binary=True) as fp:
        if fmt in TRAINING_FORMATS:
            count = write_training(store, fp, fmt, chosen, training, parquet=is_parquet(path))
        elif fmt == "csv":
            count = write_csv(store, fp, dataset, bom=bom, filters=chosen)
        else:
            count = write_jsonl(store, fp, dataset, filters=chosen)
    return count


def open_export(
    store: Store,
    fmt: Format | str = "csv",
    dataset: Dataset | str = "criteria",
    *,
    bom: bool = False,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> IO[bytes]:
    """The export as a rewound binary file, spooled to disk past a few megabytes.

    Fits `st.download_button(data=lambda: open_export(store, ...))`: nothing is
    built until the button is pressed and memory stays bounded.
    """
    if fmt not in FORMATS:
        msg = f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}"
        raise ExportError(msg)
    chosen = check_request(dataset, filters, filter_args)
    chunks = (
        csv_chunks(store, dataset, bom=bom, filters=chosen)
        if fmt == "csv"
        else jsonl_chunks(store, dataset, filters=chosen)
    )
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 - returned
    try:
        for chunk in chunks:
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool
