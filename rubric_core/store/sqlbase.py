"""What every backend (SQLite, PostgreSQL) gives the store's queries: transactions and reads.

The queries themselves live in `store.queries`, one module per aggregate, written once in
portable SQL with `?` placeholders (`INSERT ... ON CONFLICT ... RETURNING`, `UPDATE ...
FROM`, partial indexes); a backend turns `?` into its own style (`Tx`). Both schemas keep
the same column types where it matters to the queries: timestamps as ISO-8601 UTC text
(ordering and filters compare text), JSON lists as text, booleans as integers (summed in
pass rates). The few differences live in `Dialect`.

A backend subclasses `SQLBackend` and supplies `_write` (run a job in one committed
transaction), `_query` (one read, rows as dicts), `stream` (a long read, in batches of
tuples) and `snapshot` (several long reads of one snapshot).
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = ["Dialect", "SQLBackend", "SnapshotStream", "Tx", "now_iso", "parse_iso", "returned_id"]

_T = TypeVar("_T")

SnapshotStream = Callable[[str, Sequence[Any], int], Generator[list[tuple[Any, ...]], None, None]]
"""`stream(sql, params, size)` inside `SQLBackend.snapshot`: batches of `size` tuples."""


@dataclass(frozen=True)
class Dialect:
    """What differs between the backends' SQL.

    Attributes:
        name: `sqlite` or `postgres`.
        lock_row: Appended to a `SELECT` that must lock the row it reads until commit
            (SQLite has one writer, so nothing; PostgreSQL `FOR UPDATE`).
    """

    name: str
    lock_row: str = ""


class Tx(Protocol):
    """One open transaction of a backend; SQL in `?` style."""

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run `sql`; its first row, or None."""

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run `sql`; all its rows."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run `sql`, a statement without rows."""

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `sql` once per parameter row."""


def now_iso() -> str:
    """Now, as the ISO-8601 UTC text every timestamp column holds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def parse_iso(value: str) -> dt.datetime:
    """A stored timestamp as an aware datetime (naive text is taken as UTC)."""
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def returned_id(row: tuple[Any, ...] | None) -> int:
    """The id an `INSERT ... RETURNING id` (or a `SELECT id`) produced."""
    if row is None:  # pragma: no cover - RETURNING always yields a row here
        msg = "INSERT ... RETURNING gave no row"
        raise RuntimeError(msg)
    return int(row[0])


class SQLBackend(abc.ABC):
    """A backend's transactions and reads; the store's queries (`store.queries`) run through them."""

    dialect: Dialect

    refusal: str | None = None
    """Why every write is refused (a newer version migrated the database), or None."""

    @abc.abstractmethod
    def _write(self, job: Callable[[Tx], _T], *, durable: bool = True) -> _T:
        """Run `job` in one transaction; return its result once committed (flushed to
        disk unless `durable=False`)."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read, as dicts."""

    @abc.abstractmethod
    def stream(
        self, sql: str, params: Sequence[Any], size: int
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A long read on a connection of its own, `size` rows (tuples) per batch."""

    @abc.abstractmethod
    def snapshot(self) -> AbstractContextManager[SnapshotStream]:
        """One read-only transaction on a connection of its own, for several long reads
        that must see the same data: the context gives a `stream(sql, params, size)`
        whose cursors (open at the same time if need be) all read one snapshot."""

    @abc.abstractmethod
    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""

    def write(self, job: Callable[[Tx], _T], *, durable: bool = True) -> _T:
        """Run `job` (SQL in `?` style through its `Tx`) in one transaction; its result once
        committed.

        `durable=False` commits without waiting for the disk: the rows are committed
        (readers see them, a killed process keeps them), and the database's next durable
        commit flushes them with its own (SQLite's `synchronous=NORMAL` in WAL mode,
        PostgreSQL's `synchronous_commit = off`; both logs are flushed in order). Only
        for a row that a durable commit soon follows, and whose loss to a power cut
        before that costs nothing (a run's row before its first pass)."""
        return self._write(job, durable=durable)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read (SQL in `?` style), as dicts."""
        return self._query(sql, params)

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of one read, or None."""
        rows = self._query(sql, params)
        return rows[0] if rows else None
