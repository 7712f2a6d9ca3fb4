"""The export datasets as text: CSV for spreadsheets, JSON Lines for programs, in chunks."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from rubric_core.cells import PLAIN_CELL, csv_cell
from rubric_core.export.columns import EXPORT_COLUMNS, FETCH_ROWS, Dataset, check_request
from rubric_core.export.rows import (
    Label,
    StoredPass,
    _iso,
    iter_rows,
    read_passes,
    read_run_batches,
)

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = ["csv_chunks", "csv_text", "jsonl_chunks", "jsonl_text"]


def _flag(value: Any) -> str:
    return "" if value is None else ("true" if value else "false")


def _criteria_lines(passes: Generator[StoredPass, None, None]) -> Generator[list[str], None, None]:
    """The `criteria` dataset's CSV lines, one list per pass.

    Byte for byte what `csv.writer` writes for `rows.criteria_row` after `neutralise_cell`
    (tests/support/export_reference.py is that slow path; the tests compare the two), but each
    pass's shared cells are quoted once, the text values that repeat (criterion names,
    results, statuses) are quoted once per export, and each verdict row is one f-string.
    """
    cells: dict[
        str, str
    ] = {}  # few values (names, statuses); text only: 1, 1.0 and True hash alike

    def cell(value: str) -> str:
        text = cells.get(value)
        if text is None:
            if len(cells) > 10_000:
                cells.clear()
            text = cells[value] = csv_cell(value)
        return text

    plain = PLAIN_CELL.match  # most gaps need no quoting: skip the call to csv_cell
    run_id, run_head, run_status = None, "", ""
    grading_run, grading_cell = None, ""  # a grading run's id repeats on each of its passes
    try:
        for row, verdicts, labels in passes:
            if row[0] != run_id:  # a run's cells are the same on each of its passes
                run_id, run_head, run_status = (
                    row[0],
                    ",".join(map(csv_cell, row[0:6])),
                    cell(row[17]),
                )
            # Numbers NOT NULL in both schemas (iteration, tokens, duration, the pass's id, a
            # verdict's weight) are written as `str` writes them, which is what csv_cell does.
            if row[6] != grading_run:
                grading_run, grading_cell = row[6], csv_cell(row[6])
            head = f"{run_head},{grading_cell},{row[7]},{cell(row[8])},{cell(row[9])},"
            middle = f",{csv_cell(row[10])},{row[11]},{row[12]},{row[13]},{_iso(row[14])},"
            after = f",{csv_cell(row[15])},{row[16]},"
            end = f"{run_status},{csv_cell(row[18])}\r\n"
            if not verdicts:  # empty verdict and label cells
                yield [f"{head},,{middle},{after},,,,{end}"]
                continue
            unlabelled = f",,,,{end}"
            ends = (  # a labelled criterion's row ends in its label
                {name: f",{_label_cells(label)},{end}" for name, label in labels.items()}
                if labels
                else None
            )
            yield [
                f"{head}{cells.get(name) or cell(name)}{',true,' if passed else ',false,'}"
                f"{'' if gap is None else gap if plain(gap) else csv_cell(gap)}{middle}{weight},"
                f"{'' if checked_by is None else csv_cell(checked_by)}{after}"
                f"{'true' if insufficient else 'false'}"
                f"{ends.get(name, unlabelled) if ends else unlabelled}"
                for _, name, passed, gap, weight, checked_by, insufficient in verdicts
            ]
    finally:
        passes.close()  # closes the read connection at once


def _label_cells(label: Label) -> str:
    human, reviewer, note = label
    return f"{_flag(human)},{csv_cell(reviewer)},{csv_cell(note)}"


def _runs_lines(
    batches: Generator[list[tuple[Any, ...]], None, None],
) -> Generator[list[str], None, None]:
    """The `runs` dataset's CSV lines, one list per fetched batch."""
    try:
        for batch in batches:
            yield [",".join(map(csv_cell, values)) + "\r\n" for values in batch]
    finally:
        batches.close()  # closes the read connection at once


def csv_text(
    store: Store,
    dataset: str,
    filters: RunFilters,
    *,
    bom: bool,
    rows_per_chunk: int,
    counter: list[int],
) -> Iterator[str]:
    """The CSV text of a dataset in chunks of about `rows_per_chunk` rows (header first)."""
    size = min(FETCH_ROWS, max(1, rows_per_chunk))
    groups = (
        _criteria_lines(read_passes(store, filters, size))
        if dataset == "criteria"
        else _runs_lines(read_run_batches(store, filters, size))
    )
    chunk = [("\ufeff" if bom else "") + ",".join(EXPORT_COLUMNS[dataset]) + "\r\n"]
    pending = 0
    try:
        for lines in groups:
            chunk.extend(lines)
            counter[0] += len(lines)
            pending += len(lines)
            if pending >= rows_per_chunk:
                yield "".join(chunk)
                chunk.clear()
                pending = 0
    finally:
        groups.close()  # closes the read connection at once
    yield "".join(chunk)


def jsonl_text(
    rows: Iterator[dict[str, Any]], *, rows_per_chunk: int, counter: list[int]
) -> Iterator[str]:
    lines: list[str] = []
    for row in rows:
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        counter[0] += 1
        if len(lines) >= rows_per_chunk:
            yield "".join(lines)
            lines.clear()
    if lines:
        yield "".join(lines)


def csv_chunks(
    store: Store,
    dataset: Dataset | str = "criteria",
    *,
    bom: bool = False,
    rows_per_chunk: int = 500,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> Iterator[bytes]:
    """A dataset as UTF-8 CSV for spreadsheets, yielded in chunks of bytes (header first).

    Cells a spreadsheet would run as formulas are neutralised (`neutralise_cell`).

    Args:
        bom: Start with a UTF-8 byte order mark so Excel reads the encoding right.
        rows_per_chunk: Rows per yielded chunk.
        filters: Which runs; `filter_args` refine them, as in `iter_rows`.
    """
    chosen = check_request(dataset, filters, filter_args)
    text = csv_text(store, dataset, chosen, bom=bom, rows_per_chunk=rows_per_chunk, counter=[0])
    for part in text:
        yield part.encode("utf-8")


def jsonl_chunks(
    store: Store,
    dataset: Dataset | str = "criteria",
    *,
    rows_per_chunk: int = 500,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> Iterator[bytes]:
    """A dataset as JSON Lines (one object per row, UTF-8), yielded in chunks of bytes.

    Meant for programs: values are written as stored, never neutralised against
    spreadsheet formulas; give a spreadsheet the CSV instead.
    """
    rows = iter_rows(store, dataset, filters=filters, **filter_args)
    for text in jsonl_text(rows, rows_per_chunk=rows_per_chunk, counter=[0]):
        yield text.encode("utf-8")
