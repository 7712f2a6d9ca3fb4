"""The SQLite backend: one file via sqlite-utils, its writer thread and readers; the SQL is `store.queries`'."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from rubric_core.store.queries.runs import mark_interrupted
from rubric_core.store.schema_version import newer_schema_refusal, write_refused
from rubric_core.store.sqlbase import Dialect, SnapshotStream, SQLBackend, Tx
from rubric_core.store.sqlite.backup import backup_file
from rubric_core.store.sqlite.connection import SQLiteConnections, translate
from rubric_core.store.sqlite.migrations import MIGRATIONS, apply_migrations

__all__ = ["SQLiteBackend"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


class _SQLiteTx:
    """A `Tx` over the writer's connection, inside the writer's transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(sql, params)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)


class SQLiteBackend(SQLBackend):
    """Rubrics, runs, grading passes and transcripts in one SQLite file (via sqlite-utils).

    Opening applies pending migrations and marks runs of dead processes on this host
    `interrupted`; a file a newer version migrated is opened read-only instead
    (`store.schema_version`).
    """

    dialect = Dialect(name="sqlite")

    def __init__(self, path: Path, *, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.refusal: str | None = None
        self.connections = SQLiteConnections(
            path, busy_timeout_s=busy_timeout_s, prepare=self._prepare
        )

    def _prepare(self, db: Database) -> None:
        applied = [step.name for step in MIGRATIONS.applied(db)]
        known = [step.name for step in MIGRATIONS._migrations]
        self.refusal = newer_schema_refusal(str(self.path), applied, known)
        if self.refusal is not None:
            _log.warning("%s", self.refusal)
            return
        apply_migrations(db)
        try:
            with db.atomic():
                mark_interrupted(_SQLiteTx(db.conn), str(self.path))
        except sqlite3.OperationalError as exc:
            # Locked by another writer: leave them for the next open rather than fail.
            _log.warning("could not mark interrupted runs in %s: %s", self.path, exc)

    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""
        self.connections.close()

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only connection (rows as `sqlite3.Row`); the caller closes it."""
        return self.connections.connect_readonly()

    def _write(self, job: Callable[[Tx], _T], *, durable: bool = True) -> _T:
        if self.refusal is not None:
            raise write_refused(self.refusal)
        return self.connections.write(lambda db: job(_SQLiteTx(db.conn)), durable=durable)

    def backup(self, dest: Path, *, overwrite: bool) -> Path:
        """Copy the database, as committed now, to the one file `dest` (`sqlite.backup`)."""
        self.connections.check_open()
        return backup_file(self.path, dest, busy_timeout_s=self.busy_timeout_s, overwrite=overwrite)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return self.connections.query(sql, params)

    def stream(
        self, sql: str, params: Sequence[Any], size: int
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A dedicated read-only connection, `size` rows per batch; closed when done."""
        conn = self.connections.connect_readonly()
        conn.row_factory = None
        try:
            try:
                cursor = conn.execute(sql, params)
                while batch := cursor.fetchmany(size):
                    yield batch
            except sqlite3.Error as exc:
                raise translate(exc, self.path, self.busy_timeout_s) from exc
        finally:
            conn.close()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SnapshotStream]:
        """One read transaction (`BEGIN`, so every cursor reads one WAL snapshot)."""
        conn = self.connections.connect_readonly()
        conn.row_factory = None

        def stream(
            sql: str, params: Sequence[Any], size: int
        ) -> Generator[list[tuple[Any, ...]], None, None]:
            try:
                cursor = conn.execute(sql, params)
                while batch := cursor.fetchmany(max(1, size)):
                    yield batch
            except sqlite3.Error as exc:
                raise translate(exc, self.path, self.busy_timeout_s) from exc

        try:
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, self.busy_timeout_s) from exc
            yield stream
        finally:
            conn.close()  # ends the read transaction
