"""The export datasets as rows: the store's reads merged and shaped, one dict per row."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import operator
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from rubric_core.export.columns import EXPORT_COLUMNS, FETCH_ROWS, Dataset, check_request
from rubric_core.store import RunFilters, StoreError

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "Label",
    "PassRow",
    "StoredPass",
    "VerdictRow",
    "criteria_row",
    "iter_rows",
    "read_passes",
    "read_run_batches",
]

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
"""A pass row of `Store.exports.criteria_streams`: the run and pass cells, `evaluation_id` at index 16."""
VerdictRow = tuple[Any, ...]
"""A verdict row of `Store.exports.criteria_streams`: `evaluation_id` first, then the verdict."""
Label = tuple[Any, Any, Any]
"""A human label's `human_passed`, `reviewer` and `note`."""
_NO_VERDICT: VerdictRow = (None,) * 7
"""The verdict cells of a pass that has none (a `grader_error` pass)."""
_NO_LABEL: Label = (None, None, None)


class StoredPass(NamedTuple):
    """One pass of the `criteria` dataset: its row, its verdicts, its labels."""

    row: PassRow
    verdicts: list[VerdictRow]
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


def read_passes(
    store: Store, filters: RunFilters, size: int = FETCH_ROWS
) -> Generator[StoredPass, None, None]:
    """Each matching pass with its verdicts (in rubric order) and labels, oldest run first.

    Three cursors in one read snapshot (`Store.exports.criteria_streams`), each ordered by
    run then pass: one row per pass, one per verdict, one per label, merged here, so the
    cells a pass's rows share are read and formatted once and no verdict pays for a join
    with the labels.
    """
    with store.exports.criteria_streams(filters, size) as (passes, verdicts, labels):
        try:
            verdict_groups, verdict = _grouped(verdicts)
            label_groups, label = _grouped(labels)
            for batch in passes:
                for row in batch:
                    evaluation_id = row[16]
                    rows: list[VerdictRow] = []
                    marks: dict[str, Label] = {}
                    if verdict[0] == evaluation_id:
                        rows = list(verdict[1])
                        verdict = next(verdict_groups, _DONE)
                    if label[0] == evaluation_id:
                        marks = {mark[1]: mark[2:] for mark in label[1]}
                        label = next(label_groups, _DONE)
                    yield StoredPass(row, rows, marks)
            for left in (verdict, label):
                if left is not _DONE:  # one snapshot, one order: never
                    msg = f"export read a row of pass {left[0]} outside its pass"
                    raise StoreError(msg, kind="invalid")
        finally:
            for cursor in (labels, verdicts, passes):
                cursor.close()  # every cursor closed before the snapshot ends


def criteria_row(row: PassRow, verdict: VerdictRow, label: Label) -> tuple[Any, ...]:
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


def read_run_batches(
    store: Store, filters: RunFilters, size: int = FETCH_ROWS
) -> Generator[list[tuple[Any, ...]], None, None]:
    """Stream the `runs` dataset's rows as tuples, `size` per batch."""
    return store.exports.run_batches(filters, size)


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
        filters: Which runs, as in `Store.runs.find`.
        **filter_args: `RunFilters` fields (`rubric`, `version_id`, `model`, `status`,
            `since`, `until`, `batch_id`), refining `filters`.

    Raises:
        ExportError: Unknown dataset or filter name.
        StoreError: A filter value is invalid.

    Examples:
        >>> import tempfile, pathlib
        >>> from rubric_core.store import Store
        >>> store = Store(pathlib.Path(tempfile.mkdtemp()) / "s.db")
        >>> _ = store.rubrics.save_version("haiku", "- 5/7/5 syllables")
        >>> list(iter_rows(store, "criteria", rubric="haiku"))
        []
        >>> store.close()
    """
    chosen = check_request(dataset, filters, filter_args)
    if dataset == "criteria":
        return _criteria_dicts(read_passes(store, chosen))
    return _run_dicts(read_run_batches(store, chosen))


def _criteria_dicts(passes: Generator[StoredPass, None, None]) -> Iterator[dict[str, Any]]:
    columns = EXPORT_COLUMNS["criteria"]
    try:
        for row, verdicts, labels in passes:
            row = (*row[:14], _iso(row[14]), *row[15:])
            for verdict in verdicts or (_NO_VERDICT,):
                label = labels.get(verdict[1], _NO_LABEL) if labels else _NO_LABEL
                record = dict(zip(columns, criteria_row(row, verdict, label), strict=True))
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
