"""`RunFilters`: the one set of run filters the store, the export, the CLI and the pages share."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from rubric_core.schema import RUN_STATUSES
from rubric_core.store.errors import StoreError
from rubric_core.store.validation import clean_name, require_int, require_text

__all__ = ["RunFilters", "TimeBound", "normalise_time"]

TimeBound = dt.date | dt.datetime | str | float | None
"""A `since`/`until` bound: a date, a datetime (naive means UTC), an ISO-8601 string,
or Unix seconds."""


def normalise_time(value: object, name: str, *, end_of_day: bool = False) -> str | None:
    """An ISO-8601 UTC string comparable with stored `started_at`, or None.

    A bare date means the start of that day, or (for `until`, which is exclusive)
    the start of the next day, so `until=2025-01-31` includes the 31st.

    Raises:
        StoreError: Of kind `invalid`: not a date, datetime, ISO-8601 string or number.

    Examples:
        >>> normalise_time("2025-01-31", "until", end_of_day=True)
        '2025-02-01T00:00:00.000000+00:00'
        >>> normalise_time(dt.datetime(2025, 1, 31, 12), "since")
        '2025-01-31T12:00:00.000000+00:00'
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = (
                dt.date.fromisoformat(text) if len(text) == 10 else dt.datetime.fromisoformat(text)
            )
        except ValueError:
            msg = f"{name} must be an ISO-8601 date or datetime such as 2025-01-31, got {text!r}"
            raise StoreError(msg, kind="invalid") from None
    if isinstance(value, bool):
        msg = f"{name} must be a date, datetime or ISO-8601 string, got {value!r}"
        raise StoreError(msg, kind="invalid")
    if isinstance(value, int | float):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    elif isinstance(value, dt.date):
        day = value + dt.timedelta(days=1) if end_of_day else value
        moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    else:
        msg = f"{name} must be a date, datetime or ISO-8601 string, got {type(value).__name__}"
        raise StoreError(msg, kind="invalid")
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def _statuses(status: object) -> tuple[str, ...]:
    statuses = (status,) if isinstance(status, str) else status
    if not isinstance(statuses, Iterable):
        msg = f"status must be a status or a list of statuses, got {type(status).__name__}"
        raise StoreError(msg, kind="invalid")
    statuses = tuple(statuses)
    unknown = [s for s in statuses if s not in RUN_STATUSES]
    if unknown or not statuses:
        msg = (
            f"unknown status {', '.join(map(repr, unknown)) or '(empty list)'}; "
            f"statuses are {', '.join(RUN_STATUSES)}"
        )
        raise StoreError(msg, kind="invalid")
    return statuses


@dataclasses.dataclass(frozen=True)
class RunFilters:
    """Which runs to read: every filter given must match; `None` means no filter.

    Validated when built, without a database: a value of the wrong type, an unknown
    status or an unreadable date raises at once. Whether the rubric and the version
    exist is checked by the store when the filters are used.

    `Store.runs.find`, `count_runs`, `criterion_pass_rates` and every export take a
    `RunFilters` as `filters=`, or the same names as keyword arguments.

    Raises:
        StoreError: Of kind `invalid`, naming the filter and what was wrong with it.

    Examples:
        >>> filters = RunFilters(rubric=" haiku ", status=["satisfied", "failed"])
        >>> filters.as_kwargs()
        {'rubric': 'haiku', 'status': ('satisfied', 'failed')}
        >>> RunFilters(until="2025-01-31").time_range()
        (None, '2025-02-01T00:00:00.000000+00:00')
        >>> RunFilters(status="done")
        Traceback (most recent call last):
        ...
        rubric_core.store.errors.StoreInputError: unknown status 'done'; statuses are running, satisfied, needs_revision, failed, grader_error, max_iterations_reached, interrupted, error
    """

    rubric: str | None = None
    """The rubric's name (any of its versions); stored stripped."""

    version_id: int | None = None
    """One rubric version, by id."""

    model: str | None = None
    """Matches the agent model or the grader model; stored stripped."""

    status: str | tuple[str, ...] | None = None
    """One run status (`schema.RUN_STATUSES`) or several (any of them); a list is
    stored as a tuple."""

    since: TimeBound = None
    """Runs started at or after this moment; a bare date is the start of that day (UTC)."""

    until: TimeBound = None
    """Runs started before this moment; a bare date includes that whole day (UTC)."""

    batch_id: str | None = None
    """Runs of one batch."""

    def __post_init__(self) -> None:
        if self.rubric is not None:
            object.__setattr__(self, "rubric", clean_name(self.rubric))
        if self.version_id is not None:
            require_int(self.version_id, "version_id")
        if self.model is not None:
            object.__setattr__(self, "model", require_text(self.model, "model").strip())
        if self.status is not None:
            statuses = _statuses(self.status)
            if not isinstance(self.status, str):
                object.__setattr__(self, "status", statuses)
        self.time_range()
        if self.batch_id is not None:
            require_text(self.batch_id, "batch_id")

    @classmethod
    def from_args(cls, filters: RunFilters | None = None, /, **kwargs: Any) -> RunFilters:
        """`filters`, refined by keyword arguments of the same names (they win).

        The one place store methods and exports turn what they were given into filters.

        Raises:
            StoreError: `filters` is not a `RunFilters`, or a value is invalid.
            TypeError: A keyword is not a filter name.

        Examples:
            >>> RunFilters.from_args(RunFilters(rubric="haiku"), status="failed").as_kwargs()
            {'rubric': 'haiku', 'status': 'failed'}
        """
        if filters is None:
            return cls(**kwargs)
        if not isinstance(filters, RunFilters):
            msg = f"filters must be a RunFilters, got {type(filters).__name__}"
            raise StoreError(msg, kind="invalid")
        return dataclasses.replace(filters, **kwargs) if kwargs else filters

    def as_kwargs(self) -> dict[str, Any]:
        """The filters that are set, as keyword arguments for the store and the exports."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) is not None
        }

    def statuses(self) -> tuple[str, ...]:
        """The statuses to match, as a tuple (empty when no status filter is set)."""
        return () if self.status is None else _statuses(self.status)

    def time_range(self) -> tuple[str | None, str | None]:
        """`(since, until)` as ISO-8601 UTC strings comparable with a run's `started_at`."""
        return (
            normalise_time(self.since, "since"),
            normalise_time(self.until, "until", end_of_day=True),
        )
