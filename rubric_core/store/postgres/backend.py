"""The PostgreSQL backend: psycopg 3 and a `psycopg_pool.ConnectionPool`; the SQL is `store.queries`'.

Every write takes a pooled connection, runs in one transaction and commits before it
returns (`synchronous_commit` is left on, so a committed pass survives a server crash;
only a write made with `durable=False`, a run's row before its first pass, turns it off
for its own transaction).
Many processes and hosts may share the database: migrations run under an advisory lock,
rubric versions are numbered under a row lock, and a batch input's run is unique.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from rubric_core.extras import MissingExtra

try:
    import psycopg
    from psycopg.rows import dict_row, tuple_row
    from psycopg_pool import ConnectionPool, PoolTimeout
except ModuleNotFoundError as exc:  # a postgresql:// store on the core install
    raise MissingExtra(exc.name or "psycopg", "postgres") from exc

from rubric_core.store.errors import StoreError, StoreErrorKind
from rubric_core.store.paths import DB_ENV_VAR, redact_url
from rubric_core.store.postgres.migrations import MIGRATIONS, applied_names, apply_migrations
from rubric_core.store.postgres.nul import escape_params, escape_rows, restore_dict, restore_row
from rubric_core.store.queries.runs import mark_interrupted
from rubric_core.store.schema_version import newer_schema_refusal, write_refused
from rubric_core.store.sqlbase import Dialect, SnapshotStream, SQLBackend, Tx

__all__ = ["PostgresBackend", "server_name", "translate"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_DIALECT = Dialect(name="postgres", lock_row=" FOR UPDATE")


@functools.lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (a literal `%` doubled).

    Examples:
        >>> to_pyformat("SELECT '5%' WHERE id = ?")
        "SELECT '5%%' WHERE id = %s"
    """
    return sql.replace("%", "%%").replace("?", "%s")


def _port(url: str) -> int:
    """The URL's port (5432 when it names none); `urlsplit` raises on a non-numeric one."""
    try:
        return urlsplit(url).port or 5432
    except ValueError:
        return 0


def check_url(url: str) -> None:
    """Refuse a URL psycopg could only fail on with a traceback: a port that is no number.

    Raises:
        StoreError: Of kind `invalid`, one sentence naming the port (never the password).

    Examples:
        >>> check_url("postgresql://u:pw@db:5432/studio")
        >>> check_url("postgresql://u:pw@db:fivefour/studio")
        Traceback (most recent call last):
        ...
        rubric_core.store.errors.StoreInputError: the PostgreSQL URL postgresql://u:***@db:fivefour/studio has port 'fivefour', which is not a number from 1 to 65535; fix the URL (--db or $RUBRIC_STUDIO_DB)
    """
    if _port(url):
        return
    netloc = urlsplit(url).netloc
    port = netloc.rsplit(":", 1)[-1] if ":" in netloc.rsplit("@", 1)[-1] else ""
    msg = (
        f"the PostgreSQL URL {redact_url(url)} has port {port[:20]!r}, which is not a number "
        f"from 1 to 65535; fix the URL (--db or ${DB_ENV_VAR})"
    )
    raise StoreError(msg, kind="invalid")


def server_name(url: str) -> str:
    """`user@host:port/database` of a URL, never its password.

    Examples:
        >>> server_name("postgresql://rubric:pw@127.0.0.1:5433/studio")
        'rubric@127.0.0.1:5433/studio'
    """
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return f"{user}{parts.hostname or 'localhost'}:{_port(url)}{parts.path or '/'}"[:200]


def translate(exc: BaseException, url: str) -> BaseException:
    """Turn a psycopg or pool error into a StoreError naming the server; others pass through.

    The message names host:port, user and database, never the password.
    """
    if isinstance(exc, StoreError) or not isinstance(exc, psycopg.Error | PoolTimeout):
        return exc
    where = server_name(url)
    parts = urlsplit(url)
    host = f"{parts.hostname or 'localhost'}:{_port(url)}"
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    if parts.password:
        text = text.replace(parts.password, "***")
    lowered = str(exc).lower()
    kind: StoreErrorKind = "io"
    if (
        "password authentication failed" in lowered
        or "no password supplied" in lowered
        or ("role" in lowered and "does not exist" in lowered)
    ):
        kind = "auth"
        msg = (
            f"PostgreSQL at {host} refused user {parts.username or '(none)'!r}: wrong user "
            f"name or password ({text}); fix the URL in ${DB_ENV_VAR}"
        )
    elif "database" in lowered and "does not exist" in lowered:
        kind = "missing"
        msg = f"PostgreSQL at {host} has no database {parts.path.lstrip('/')!r} ({text})"
    elif isinstance(exc, PoolTimeout | psycopg.OperationalError | psycopg.InterfaceError):
        kind = "unreachable"
        msg = (
            f"PostgreSQL at {host} does not answer or the connection was lost ({where}: "
            f"{text}); check that the server is running and reachable, then retry"
        )
    else:
        msg = f"PostgreSQL {where}: {type(exc).__name__}: {text}"
    error = StoreError(msg, kind=kind)
    error.__cause__ = exc
    return error


@contextlib.contextmanager
def translating(url: str) -> Iterator[None]:
    """Raise psycopg and pool errors inside the block as `translate` turns them."""
    try:
        yield
    except Exception as exc:
        error = translate(exc, url)
        if error is exc:
            raise
        raise error from exc


class _PgTx:
    """A `Tx` over one psycopg connection inside its transaction; NULs escaped (`nul`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        cursor = self.conn.cursor(row_factory=tuple_row)
        row: tuple[Any, ...] | None = cursor.execute(
            to_pyformat(sql), escape_params(params)
        ).fetchone()
        return None if row is None else restore_row(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.conn.cursor(row_factory=tuple_row)
        rows = cursor.execute(to_pyformat(sql), escape_params(params)).fetchall()
        return [restore_row(row) for row in rows]

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(to_pyformat(sql), escape_params(params))

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.conn.cursor().executemany(to_pyformat(sql), escape_rows(rows))


class PostgresBackend(SQLBackend):
    """Rubrics, runs, grading passes and transcripts in one PostgreSQL database.

    Opening checks the server answers (a clear `StoreError` if not), applies pending
    migrations under an advisory lock, and marks `interrupted` the runs of dead
    processes on this host. Runs owned by other hosts are left alone: their pid cannot
    be checked from here (a retried batch input takes its run over instead).
    """

    dialect = _DIALECT

    def __init__(self, url: str, *, timeout_s: float, max_size: int = 8) -> None:
        check_url(url)
        self.url = url
        self.timeout_s = timeout_s
        connect_timeout = max(1, round(timeout_s))
        with translating(url), psycopg.connect(url, connect_timeout=connect_timeout) as conn:
            known = [name for name, _ in MIGRATIONS]
            self.refusal = newer_schema_refusal(redact_url(url), applied_names(conn), known)
            conn.rollback()
            applied = [] if self.refusal is not None else apply_migrations(conn)
        if self.refusal is not None:
            _log.warning("%s", self.refusal)
        if applied:
            _log.info("applied %s to %s", ", ".join(applied), redact_url(url))
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"connect_timeout": connect_timeout, "row_factory": dict_row},
            timeout=timeout_s,
            check=ConnectionPool.check_connection,
            name="rubric-store",
            open=False,
        )
        try:
            with translating(url):
                self.pool.open(wait=True, timeout=timeout_s)
            if self.refusal is None:
                self._write(lambda tx: mark_interrupted(tx, redact_url(url)))
        except BaseException:
            self.pool.close()
            raise

    def close(self) -> None:
        """Close every pooled connection. Idempotent."""
        self.pool.close()

    def _closed_error(self) -> StoreError:
        return StoreError(f"store {redact_url(self.url)} is closed", kind="invalid")

    def _write(self, job: Callable[[Tx], _T], *, durable: bool = True) -> _T:
        if self.pool.closed:
            raise self._closed_error()
        if self.refusal is not None:
            raise write_refused(self.refusal)
        # The pool commits when the block ends without error, rolls back otherwise.
        with translating(self.url), self.pool.connection() as conn:
            if not durable:  # this transaction only; the next synchronous commit flushes it
                conn.execute("SET LOCAL synchronous_commit = off")
            return job(_PgTx(conn))

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        if self.pool.closed:
            raise self._closed_error()
        with translating(self.url), self.pool.connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            rows = cursor.execute(to_pyformat(sql), escape_params(params)).fetchall()
            return [restore_dict(row) for row in rows]

    def stream(
        self, sql: str, params: Sequence[Any], size: int
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A server-side cursor on a pooled connection, `size` rows per batch."""
        if self.pool.closed:
            raise self._closed_error()
        with (
            translating(self.url),
            self.pool.connection() as conn,
            conn.cursor(name="rubric_stream", row_factory=tuple_row) as cursor,
        ):
            cursor.execute(to_pyformat(sql), escape_params(params))
            while batch := cursor.fetchmany(size):
                yield [restore_row(row) for row in batch]

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SnapshotStream]:
        """A `REPEATABLE READ, READ ONLY` transaction; each stream a named (server-side) cursor."""
        if self.pool.closed:
            raise self._closed_error()
        names = itertools.count()
        with translating(self.url), self.pool.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

            def stream(
                sql: str, params: Sequence[Any], size: int
            ) -> Generator[list[tuple[Any, ...]], None, None]:
                name = f"rubric_snapshot_{next(names)}"
                with (
                    translating(self.url),
                    conn.cursor(name=name, row_factory=tuple_row) as cursor,
                ):
                    cursor.execute(to_pyformat(sql), escape_params(params))
                    while batch := cursor.fetchmany(max(1, size)):
                        yield [restore_row(row) for row in batch]

            yield stream
