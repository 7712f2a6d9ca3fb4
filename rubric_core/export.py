"""Streaming CSV and JSONL exports of the evaluation dataset held in the store."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from rubric_core.store import RunFilters, StoreInputError

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "DATASETS",
    "EXPORT_COLUMNS",
    "FORMATS",
    "ExportError",
    "csv_chunks",
    "export_file",
    "iter_rows",
    "jsonl_chunks",
    "neutralise_cell",
    "open_export",
    "write_csv",
    "write_jsonl",
]

Dataset = Literal["criteria", "runs"]
Format = Literal["csv", "jsonl"]

DATASETS: tuple[str, ...] = ("criteria", "runs")
"""`criteria`: one row per criterion per grading pass. `runs`: one row per run."""

FORMATS: tuple[str, ...] = ("csv", "jsonl")

_FILTER_NAMES = tuple(field.name for field in dataclasses.fields(RunFilters))
_FETCH_ROWS = 1_000
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_CHARS = frozenset(_FORMULA_PREFIXES)

_CRITERIA_SELECT = """
    SELECT r.id AS run_id, rb.name AS rubric, rv.version AS rubric_version, r.input,
           r.agent_model, r.grader_model, e.grading_run_id, e.iteration, e.result, e.status,
           cr.criterion, cr.passed, cr.gap, e.explanation, e.grader_input_tokens,
           e.grader_output_tokens, e.duration_s, e.started_at, cr.weight, cr.checked_by,
           e.score, e.id AS evaluation_id, cr.insufficient, lb.human_passed, lb.reviewer,
           lb.note AS label_note
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    JOIN evaluations e ON e.run_id = r.id
    JOIN criterion_results cr ON cr.evaluation_id = e.id
    LEFT JOIN labels lb ON lb.evaluation_id = e.id AND lb.criterion = cr.criterion
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id, cr.position
"""

_RUNS_SELECT = """
    SELECT r.id AS run_id, rb.name AS rubric, rv.version AS rubric_version, r.input,
           r.agent_model, r.grader_model, r.grader_tools, r.agent_kind, r.max_iterations,
           r.status, r.iterations, r.last_result,
           (SELECT SUM(cr.passed) FROM criterion_results cr WHERE cr.evaluation_id = le.id)
               AS final_criteria_passed,
           (SELECT COUNT(*) FROM criterion_results cr WHERE cr.evaluation_id = le.id)
               AS final_criteria_total,
           r.final_output, r.error, r.agent_input_tokens, r.agent_output_tokens,
           r.grader_input_tokens, r.grader_output_tokens, r.started_at, r.finished_at,
           r.duration_s, r.thread_id, r.batch_id, r.keep, r.score, r.best_iteration,
           r.regression_count
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    LEFT JOIN evaluations le ON le.id = (
        SELECT e.id FROM evaluations e WHERE e.run_id = r.id
        ORDER BY e.started_at DESC, e.id DESC LIMIT 1
    )
    WHERE {where}
    ORDER BY r.started_at, r.id
"""

EXPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    "criteria": (
        "run_id",
        "rubric",
        "rubric_version",
        "input",
        "agent_model",
        "grader_model",
        "grading_run_id",
        "iteration",
        "result",
        "status",
        "criterion",
        "passed",
        "gap",
        "explanation",
        "grader_input_tokens",
        "grader_output_tokens",
        "duration_s",
        "started_at",
        "weight",
        "checked_by",
        "score",
        "evaluation_id",
        "insufficient",
        "human_passed",
        "reviewer",
        "label_note",
    ),
    "runs": (
        "run_id",
        "rubric",
        "rubric_version",
        "input",
        "agent_model",
        "grader_model",
        "grader_tools",
        "agent_kind",
        "max_iterations",
        "status",
        "iterations",
        "last_result",
        "final_criteria_passed",
        "final_criteria_total",
        "final_output",
        "error",
        "agent_input_tokens",
        "agent_output_tokens",
        "grader_input_tokens",
        "grader_output_tokens",
        "started_at",
        "finished_at",
        "duration_s",
        "thread_id",
        "batch_id",
        "keep",
        "score",
        "best_iteration",
        "regression_count",
    ),
}
"""Column order of each dataset, as written to CSV headers and JSONL objects.

`criteria.status` is the loop's status after that pass; `criteria.started_at` is when
the pass began (ISO-8601 UTC). `runs.status` is the run's final status and
`final_criteria_*` count the verdicts of its last pass. `criteria.weight` is the
criterion's rubric weight (negative: a penalty), `criteria.checked_by` is `code` when a
code check decided it, `criteria.score` the pass's score; `runs.score` is the score of
the draft the run handed back (its best pass's with `keep=best`), `runs.best_iteration`
that pass, and `runs.regression_count` its regressions (a criterion that passed in one pass and
failed in the next, counted once when it happens). `criteria.insufficient` says the
grader could not verify the criterion (then `passed` is false); `human_passed`, `reviewer`
and `label_note` hold the human label beside the judge's `passed` (empty when unlabelled),
and the file imports back with `python -m rubric_core label --input-file F`.
"""


class ExportError(StoreInputError):
    """An export asked for an unknown dataset, format or filter (a `StoreError` of kind `invalid`)."""


def neutralise_cell(value: str) -> str:
    """Prefix a cell a spreadsheet would run as a formula with an apostrophe.

    Cells starting with `=`, `+`, `-`, `@`, a tab or a carriage return are
    neutralised (OWASP "CSV injection"); everything else is returned as is.

    Examples:
        >>> neutralise_cell("=HYPERLINK(\\"http://x\\")")
        '\\'=HYPERLINK("http://x")'
        >>> neutralise_cell("fine")
        'fine'
    """
    return "'" + value if value.startswith(_FORMULA_PREFIXES) else value


def _check(dataset: str, filters: RunFilters | None, filter_args: dict[str, Any]) -> RunFilters:
    """Validate the dataset and the filters; the filters as one `RunFilters`."""
    if dataset not in DATASETS:
        msg = f"unknown export dataset {dataset!r}; choose one of {', '.join(DATASETS)}"
        raise ExportError(msg)
    unknown = sorted(set(filter_args) - set(_FILTER_NAMES))
    if unknown:
        msg = f"unknown export filter {', '.join(unknown)}; filters are {', '.join(_FILTER_NAMES)}"
        raise ExportError(msg)
    return RunFilters.from_args(filters, **filter_args)


def _iso(value: float | None) -> str | None:
    if value is None:
        return None
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="microseconds")


_PASSED = EXPORT_COLUMNS["criteria"].index("passed")
_PASS_STARTED = EXPORT_COLUMNS["criteria"].index("started_at")
_INSUFFICIENT = EXPORT_COLUMNS["criteria"].index("insufficient")
_HUMAN_PASSED = EXPORT_COLUMNS["criteria"].index("human_passed")
_TOOLS = EXPORT_COLUMNS["runs"].index("grader_tools")


def _raw_batches(
    store: Store, dataset: str, filters: RunFilters, size: int = _FETCH_ROWS
) -> Generator[list[tuple[Any, ...]], None, None]:
    """Stream the dataset's rows as tuples, `size` per batch (the query is built at once)."""
    where, params = store.run_filter_sql(filters)
    sql = (_CRITERIA_SELECT if dataset == "criteria" else _RUNS_SELECT).format(where=where)
    return store.stream_rows(sql, params, size=max(1, size))


def iter_rows(
    store: Store,
    dataset: Dataset | str = "criteria",
    *,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> Iterator[dict[str, Any]]:
    """Stream the rows of a dataset, oldest run first, from one server-side cursor.

    Rows are fetched a thousand at a time on a dedicated read-only connection,
    so memory stays flat however many rows match. Values are Python values:
    `passed` a bool, `grader_tools` a list, timestamps ISO-8601 UTC strings.

    Args:
        store: The store to read.
        dataset: `criteria` or `runs` (see `EXPORT_COLUMNS`).
        filters: Which runs, as in `Store.list_runs`.
        **filter_args: `RunFilters` fields (`rubric`, `version_id`, `model`, `status`,
            `since`, `until`, `batch_id`), refining `filters`.

    Raises:
        ExportError: Unknown dataset or filter name.
        StoreError: A filter value is invalid.

    Examples:
        >>> import tempfile, pathlib
        >>> from rubric_core.store import Store
        >>> store = Store(pathlib.Path(tempfile.mkdtemp()) / "s.db")
        >>> _ = store.save_rubric_version("haiku", "- 5/7/5 syllables")
        >>> list(iter_rows(store, "criteria", rubric="haiku"))
        []
        >>> store.close()
    """
    batches = _raw_batches(store, dataset, _check(dataset, filters, filter_args))
    return _dicts(batches, dataset)


def _dicts(
    batches: Generator[list[tuple[Any, ...]], None, None], dataset: str
) -> Iterator[dict[str, Any]]:
    columns = EXPORT_COLUMNS[dataset]
    criteria = dataset == "criteria"
    try:
        for batch in batches:
            for values in batch:
                row = dict(zip(columns, values, strict=True))
                if criteria:
                    row["passed"] = bool(row["passed"])
                    row["insufficient"] = bool(row["insufficient"])
                    if row["human_passed"] is not None:
                        row["human_passed"] = bool(row["human_passed"])
                    row["started_at"] = _iso(row["started_at"])
                else:
                    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
                yield row
    finally:
        batches.close()  # closes the read connection at once


def _csv_cells(batch: list[tuple[Any, ...]], criteria: bool) -> Iterator[list[Any]]:
    formula = _FORMULA_CHARS
    for values in batch:
        # None is written as an empty cell by the csv module itself.
        cells: list[Any] = [
            "'" + value if value.__class__ is str and value[:1] in formula else value
            for value in values
        ]
        if criteria:
            cells[_PASSED] = "true" if cells[_PASSED] else "false"
            cells[_INSUFFICIENT] = "true" if cells[_INSUFFICIENT] else "false"
            if cells[_HUMAN_PASSED] is not None:
                cells[_HUMAN_PASSED] = "true" if cells[_HUMAN_PASSED] else "false"
            cells[_PASS_STARTED] = _iso(cells[_PASS_STARTED])
        yield cells


def _csv_text(
    batches: Generator[list[tuple[Any, ...]], None, None],
    dataset: str,
    *,
    bom: bool,
    rows_per_chunk: int,
    counter: list[int],
) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    if bom:
        buffer.write("\ufeff")
    writer.writerow(EXPORT_COLUMNS[dataset])
    criteria = dataset == "criteria"
    pending = 0
    try:
        for batch in batches:
            writer.writerows(_csv_cells(batch, criteria))
            counter[0] += len(batch)
            pending += len(batch)
            if pending >= rows_per_chunk:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
                pending = 0
    finally:
        batches.close()  # closes the read connection at once
    yield buffer.getvalue()


def _jsonl_text(
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
    """A dataset as UTF-8 CSV, yielded in chunks of bytes (header first).

    Args:
        bom: Start with a UTF-8 byte order mark so Excel reads the encoding right.
        rows_per_chunk: Rows per yielded chunk.
        filters: Which runs; `filter_args` refine them, as in `iter_rows`.
    """
    chosen = _check(dataset, filters, filter_args)
    batches = _raw_batches(store, dataset, chosen, min(_FETCH_ROWS, rows_per_chunk))
    for text in _csv_text(batches, dataset, bom=bom, rows_per_chunk=rows_per_chunk, counter=[0]):
        yield text.encode("utf-8")


def jsonl_chunks(
    store: Store,
    dataset: Dataset | str = "criteria",
    *,
    rows_per_chunk: int = 500,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> Iterator[bytes]:
    """A dataset as JSON Lines (one object per row, UTF-8), yielded in chunks of bytes."""
    rows = iter_rows(store, dataset, filters=filters, **filter_args)
    for text in _jsonl_text(rows, rows_per_chunk=rows_per_chunk, counter=[0]):
        yield text.encode("utf-8")


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
    batches = _raw_batches(store, dataset, _check(dataset, filters, filter_args))
    counter = [0]
    _write(fp, _csv_text(batches, dataset, bom=bom, rows_per_chunk=_FETCH_ROWS, counter=counter))
    return counter[0]


def write_jsonl(
    store: Store,
    fp: IO[Any],
    dataset: Dataset | str = "criteria",
    *,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> int:
    """Write a dataset as JSON Lines to an open file (text or binary); returns rows written."""
    rows = iter_rows(store, dataset, filters=filters, **filter_args)
    counter = [0]
    _write(fp, _jsonl_text(rows, rows_per_chunk=500, counter=counter))
    return counter[0]


def _format_for(path: Path, fmt: str | None) -> str:
    if fmt is None:
        suffix = path.suffix.lower().lstrip(".")
        fmt = {"jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv"}.get(suffix)
        if fmt is None:
            msg = f"cannot tell the export format from {path.name!r}; name it .csv or .jsonl"
            raise ExportError(msg)
    if fmt not in FORMATS:
        msg = f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}"
        raise ExportError(msg)
    return fmt


def export_file(
    store: Store,
    path: str | Path,
    *,
    fmt: Format | str | None = None,
    dataset: Dataset | str = "criteria",
    bom: bool = False,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> int:
    """Export a dataset to a file; the format follows the suffix unless `fmt` is given.

    The file is written next to its destination and renamed into place, so a
    failed export never leaves half a file behind.

    Returns:
        The number of data rows written.
    """
    path = Path(path)
    fmt = _format_for(path, fmt)
    chosen = _check(dataset, filters, filter_args)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as fp:
            if fmt == "csv":
                count = write_csv(store, fp, dataset, bom=bom, filters=chosen)
            else:
                count = write_jsonl(store, fp, dataset, filters=chosen)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
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
    chosen = _check(dataset, filters, filter_args)
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
