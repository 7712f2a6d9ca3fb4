"""The Runs and Export pages' filter widgets, validated into the store's `RunFilters`."""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING, Any

from rubric_core.errors import InputError
from rubric_core.schema import RUN_STATUSES
from rubric_core.store import RunFilters

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = ["ANY", "known_models", "parse_run_filters"]

ANY = "(any)"
"""The filter choice that means no filter."""

_ANY_WORDS = {"", "any", "(any)", "all", "(all)"}


def _chosen(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in _ANY_WORDS:
        return None
    return value


def _as_date(value: dt.date | str | None, which: str) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        msg = f"{which} date {value!r} is not a date; use YYYY-MM-DD"
        raise InputError(msg) from None


def parse_run_filters(
    *,
    rubric: str | None = None,
    version_id: int | None = None,
    model: str | None = None,
    status: str | None = None,
    since: dt.date | str | None = None,
    until: dt.date | str | None = None,
    batch: str | None = None,
) -> RunFilters:
    """Validate the filter widgets into a `RunFilters`; "(any)" and blanks mean no filter.

    Dates are whole days in UTC: the store reads `since` from its midnight and
    `until` to the end of its day.

    Args:
        rubric: A rubric name, or "(any)".
        version_id: A rubric version's id, or `None`.
        model: A model string (agent or grader), or "(any)".
        status: One of `schema.RUN_STATUSES`, or "(any)".
        since: First day, as a date or `YYYY-MM-DD`.
        until: Last day, as a date or `YYYY-MM-DD`.
        batch: A batch id, or "(any)".

    Raises:
        InputError: An unknown status, a malformed date, or `since` after `until`.

    Examples:
        >>> parse_run_filters(status="(any)", since=dt.date(2025, 1, 2)).as_kwargs()
        {'since': '2025-01-02'}
        >>> parse_run_filters(batch="batch-1a2b").batch_id
        'batch-1a2b'
    """
    status = _chosen(status)
    if status is not None and status not in RUN_STATUSES:
        msg = f"unknown status {status!r}; choose one of {', '.join(RUN_STATUSES)}"
        raise InputError(msg)
    since_day = _as_date(_chosen(since), "since")
    until_day = _as_date(_chosen(until), "until")
    if since_day and until_day and since_day > until_day:
        msg = f"the 'from' date {since_day} is after the 'to' date {until_day}; swap them"
        raise InputError(msg)
    version = _chosen(version_id)
    return RunFilters(
        rubric=_chosen(rubric),
        version_id=int(version) if version is not None else None,
        model=_chosen(model),
        status=status,
        since=since_day.isoformat() if since_day else None,
        until=until_day.isoformat() if until_day else None,
        batch_id=_chosen(batch),
    )


_SEEN_MODELS: dict[str, tuple[int, frozenset[str]]] = {}
"""Per store target: the last run id read and the models of the runs up to it."""

_SEEN_LOCK = threading.Lock()

_RECHECKED_IDS = 1_000
"""Run ids below the last one seen that are read again: on PostgreSQL a run can commit
after one with a higher id, so the newest few are not taken as final."""


def known_models(store: Store, limit: int = 200) -> list[str]:
    """Model strings used by stored runs (agent or grader), for the model filter.

    Runs are never deleted and their models never change, so this process remembers the
    models of the runs it has read, per store, and reads only newer runs on later calls:
    the filter costs a scan of every run once (about 0.3 s at 200,000 runs), then as many
    rows as runs were added.
    """
    with _SEEN_LOCK:
        last, models = _SEEN_MODELS.get(store.target, (0, frozenset()))
    top = store.runs.last_id()
    if top < last:  # another database at the same place (a replaced file)
        last, models = 0, frozenset()
    since = max(0, last - _RECHECKED_IDS)
    models = models | store.runs.models_after(since)
    with _SEEN_LOCK:
        _SEEN_MODELS[store.target] = (top, models)
    return sorted(models)[: int(limit)]
