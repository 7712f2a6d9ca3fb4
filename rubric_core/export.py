"""Streaming CSV and JSONL exports of the evaluation dataset held in the store."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import itertools
import json
import math
import operator
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple

from rubric_core.cells import PLAIN_CELL, csv_cell, neutralise_cell
from rubric_core.store import RunFilters, StoreError, StoreInputError

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

_PASS_SELECT = """
    SELECT r.id, rb.name, rv.version, r.input, r.agent_model, r.grader_model,
           e.grading_run_id, e.iteration, e.result, e.status,
           e.explanation, e.grader_input_tokens, e.grader_output_tokens, e.duration_s,
           e.started_at, e.score, e.id, r.status, e.draft
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    JOIN evaluations e ON e.run_id = r.id
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id
"""
"""One row per pass: the cells every criterion row of the pass shares (see `_criteria_row`)."""

_CRITERION_SELECT = """
    SELECT cr.evaluation_id, cr.criterion, cr.passed, cr.gap, cr.weight, cr.checked_by,
           cr.insufficient
    FROM runs r
    JOIN evaluations e ON e.run_id = r.id
    JOIN criterion_results cr ON cr.evaluation_id = e.id
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id, cr.position
"""
"""The verdicts, in the passes' order (the same keys), so one merge pairs them."""

_LABEL_SELECT = """
    SELECT lb.evaluation_id, lb.criterion, lb.human_passed, lb.reviewer, lb.note
    FROM labels lb
    CROSS JOIN evaluations e
    CROSS JOIN runs r
    WHERE e.id = lb.evaluation_id AND r.id = e.run_id AND {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id
"""
"""Human labels, few beside the verdicts: read apart rather than joined to every verdict.

Driven from the labels (`CROSS JOIN` fixes SQLite's join order) and sorted: walking every
run in order to find the few labelled passes took 0.18 s on 1,000,000 passes with no label
at all, before the first row of any export or preview."""
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
        "run_status",
        "draft",
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

`criteria` holds one row per criterion per pass, and one row for a pass that has no
verdicts (a `grader_error` pass: `result` says so, `explanation` holds the error, and the
verdict columns `criterion` to `gap`, `weight`, `checked_by`, `insufficient` and the label
are empty), so a dataset holds every pass. `criteria.status` is the loop's status after
that pass; `criteria.run_status` is the run's own (final) status, the one the `status`
filter selects on; `criteria.draft` is the answer the pass judged. `criteria.started_at`
is when the pass began (ISO-8601 UTC). `runs.status` is the run's final status and
`final_criteria_*` count the verdicts of its last pass. `criteria.weight` is the
criterion's rubric weight (negative: a penalty), `criteria.checked_by` is `code` when a
code check decided it, `criteria.score` the pass's score; `runs.score` is the score of
the draft the run handed back (its best pass's with `keep=best`), `runs.best_iteration`
that pass, and `runs.regression_count` its regressions (a criterion that passed in one pass and
failed in the next, counted once when it happens). `criteria.insufficient` says the
grader could not verify the criterion (then `passed` is false); `human_passed`, `reviewer`
and `label_note` hold the human label beside the judge's `passed` (empty when unlabelled),
and the file imports back with `python -m rubric_core label --input-file F`.

CSV is for spreadsheets: a text cell a spreadsheet would read as a formula starts with an
apostrophe (`neutralise_cell`). JSONL is for programs: its values are written as stored,
never neutralised, so do not open it in a spreadsheet.
"""


class ExportError(StoreInputError):
    """An export asked for an unknown dataset, format or filter (a `StoreError` of kind `invalid`)."""


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


_EPOCH = dt.date(1970, 1, 1)
_DAYS: dict[int, str] = {}
"""`YYYY-MM-DDT` by days since the epoch: a store's passes share few days."""


def _iso(value: float | None) -> str | None:
    """`datetime.fromtimestamp(value, UTC).isoformat(timespec="microseconds")`, about twice
    as fast (once per pass of an export).

    The microseconds are rounded as CPython's `fromtimestamp` rounds them (half to even,
    carried into the second); the tests compare the two on boundary values.
    """
    if value is None:
        return None
    fraction, whole = math.modf(value)
    micro = round(fraction * 1e6)
    seconds = int(whole)
    if micro >= 1_000_000:
        micro -= 1_000_000
        seconds += 1
    elif micro < 0:
        micro += 1_000_000
        seconds -= 1
    day, seconds = divmod(seconds, 86_400)
    date = _DAYS.get(day)
    if date is None:
        if len(_DAYS) > 10_000:
            _DAYS.clear()
        date = _DAYS[day] = f"{(_EPOCH + dt.timedelta(days=day)).isoformat()}T"
    hour, seconds = divmod(seconds, 3600)
    minute, second = divmod(seconds, 60)
    return f"{date}{hour:02}:{minute:02}:{second:02}.{micro:06}+00:00"


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


PassRow = tuple[Any, ...]
"""A row of `_PASS_SELECT`: the run and pass cells, `evaluation_id` at index 16."""
Verdict = tuple[Any, ...]
"""A row of `_CRITERION_SELECT`: `evaluation_id` first, then the verdict."""
Label = tuple[Any, Any, Any]
"""A human label's `human_passed`, `reviewer` and `note`."""
_NO_VERDICT: Verdict = (None,) * 7
"""The verdict cells of a pass that has none (a `grader_error` pass)."""
_NO_LABEL: Label = (None, None, None)


class _Pass(NamedTuple):
    row: PassRow
    verdicts: list[Verdict]
    labels: dict[str, Label]
    """The pass's human labels by criterion (the labels table's key), mostly empty."""


def _grouped(
    batches: Iterator[list[tuple[Any, ...]]],
) -> tuple[Iterator[tuple[Any, Iterator[tuple[Any, ...]]]], tuple[Any, Any]]:
    """Rows grouped by their first value (a pass's id), and the first group (or a sentinel)."""
    groups = itertools.groupby(itertools.chain.from_iterable(batches), key=operator.itemgetter(0))
    return groups, next(groups, _DONE)


_DONE: tuple[Any, Any] = (object(), iter(()))
"""No group left: a key no pass has."""


def _passes(
    store: Store, filters: RunFilters, size: int = _FETCH_ROWS
) -> Generator[_Pass, None, None]:
    """Each matching pass with its verdicts (in rubric order) and labels, oldest run first.

    Three cursors in one read snapshot, each ordered by run then pass: one row per pass,
    one per verdict, one per label, merged here, so the cells a pass's rows share are
    read and formatted once and no verdict pays for a join with the labels.
    """
    where, params = store.run_filter_sql(filters)
    with store.read_snapshot() as stream:
        passes = stream(_PASS_SELECT.format(where=where), params, size)
        verdicts = stream(_CRITERION_SELECT.format(where=where), params, size * 4)
        labels = stream(_LABEL_SELECT.format(where=where), params, size)
        try:
            verdict_groups, verdict = _grouped(verdicts)
            label_groups, label = _grouped(labels)
            for batch in passes:
                for row in batch:
                    evaluation_id = row[16]
                    rows: list[Verdict] = []
                    marks: dict[str, Label] = {}
                    if verdict[0] == evaluation_id:
                        rows = list(verdict[1])
                        verdict = next(verdict_groups, _DONE)
                    if label[0] == evaluation_id:
                        marks = {mark[1]: mark[2:] for mark in label[1]}
                        label = next(label_groups, _DONE)
                    yield _Pass(row, rows, marks)
            for left in (verdict, label):
                if left is not _DONE:  # one snapshot, one order: never
                    msg = f"export read a row of pass {left[0]} outside its pass"
                    raise StoreError(msg, kind="invalid")
        finally:
            for cursor in (labels, verdicts, passes):
                cursor.close()  # every cursor closed before the snapshot ends


def _criteria_row(row: PassRow, verdict: Verdict, label: Label) -> tuple[Any, ...]:
    """The values of one `criteria` row, in `EXPORT_COLUMNS` order (as stored)."""
    return (
        *row[0:10],
        *verdict[1:4],
        *row[10:15],
        *verdict[4:6],
        *row[15:17],
        verdict[6],
        *label,
        *row[17:19],
    )


def _raw_batches(
    store: Store, filters: RunFilters, size: int = _FETCH_ROWS
) -> Generator[list[tuple[Any, ...]], None, None]:
    """Stream the `runs` dataset's rows as tuples, `size` per batch."""
    where, params = store.run_filter_sql(filters)
    return store.stream_rows(_RUNS_SELECT.format(where=where), params, size=max(1, size))


def iter_rows(
    store: Store,
    dataset: Dataset | str = "criteria",
    *,
    filters: RunFilters | None = None,
    **filter_args: Any,
) -> Iterator[dict[str, Any]]:
    """Stream the rows of a dataset, oldest run first, on a read-only connection of its own.

    Rows are fetched a thousand at a time, so memory stays flat however many rows match.
    Values are Python values: `passed` a bool (`None` on a pass with no verdicts),
    `grader_tools` a list, timestamps ISO-8601 UTC strings.

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
    chosen = _check(dataset, filters, filter_args)
    if dataset == "criteria":
        return _criteria_dicts(_passes(store, chosen))
    return _run_dicts(_raw_batches(store, chosen))


def _criteria_dicts(passes: Generator[_Pass, None, None]) -> Iterator[dict[str, Any]]:
    columns = EXPORT_COLUMNS["criteria"]
    try:
        for row, verdicts, labels in passes:
            row = (*row[:14], _iso(row[14]), *row[15:])
            for verdict in verdicts or (_NO_VERDICT,):
                label = labels.get(verdict[1], _NO_LABEL) if labels else _NO_LABEL
                record = dict(zip(columns, _criteria_row(row, verdict, label), strict=True))
                record["passed"] = _bool(record["passed"])
                record["insufficient"] = _bool(record["insufficient"])
                record["human_passed"] = _bool(record["human_passed"])
                yield record
    finally:
        passes.close()  # closes the read connection at once


def _run_dicts(batches: Generator[list[tuple[Any, ...]], None, None]) -> Iterator[dict[str, Any]]:
    columns = EXPORT_COLUMNS["runs"]
    try:
        for batch in batches:
            for values in batch:
                row = dict(zip(columns, values, strict=True))
                row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
                yield row
    finally:
        batches.close()  # closes the read connection at once


def _flag(value: Any) -> str:
    return "" if value is None else ("true" if value else "false")


def _criteria_lines(passes: Generator[_Pass, None, None]) -> Generator[list[str], None, None]:
    """The `criteria` dataset's CSV lines, one list per pass.

    Byte for byte what `csv.writer` writes for `_criteria_row` after `neutralise_cell`
    (tests/export_reference.py is that slow path; the tests compare the two), but each
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


def _csv_text(
    store: Store,
    dataset: str,
    filters: RunFilters,
    *,
    bom: bool,
    rows_per_chunk: int,
    counter: list[int],
) -> Iterator[str]:
    """The CSV text of a dataset in chunks of about `rows_per_chunk` rows (header first)."""
    size = min(_FETCH_ROWS, max(1, rows_per_chunk))
    groups = (
        _criteria_lines(_passes(store, filters, size))
        if dataset == "criteria"
        else _runs_lines(_raw_batches(store, filters, size))
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
    """A dataset as UTF-8 CSV for spreadsheets, yielded in chunks of bytes (header first).

    Cells a spreadsheet would run as formulas are neutralised (`neutralise_cell`).

    Args:
        bom: Start with a UTF-8 byte order mark so Excel reads the encoding right.
        rows_per_chunk: Rows per yielded chunk.
        filters: Which runs; `filter_args` refine them, as in `iter_rows`.
    """
    chosen = _check(dataset, filters, filter_args)
    text = _csv_text(store, dataset, chosen, bom=bom, rows_per_chunk=rows_per_chunk, counter=[0])
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
    chosen = _check(dataset, filters, filter_args)
    counter = [0]
    text = _csv_text(store, dataset, chosen, bom=bom, rows_per_chunk=_FETCH_ROWS, counter=counter)
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
