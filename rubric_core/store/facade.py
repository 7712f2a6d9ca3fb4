"""`Store`: the one store API, its queries (`store.queries`) over one backend, SQLite or PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_core.store.errors import StoreError
from rubric_core.store.paths import default_db_target, is_postgres_url, redact_url
from rubric_core.store.queries.experiments import Experiments
from rubric_core.store.queries.export import Exports
from rubric_core.store.queries.labels import Labels
from rubric_core.store.queries.passes import Passes
from rubric_core.store.queries.rubrics import Rubrics
from rubric_core.store.queries.runs import Runs
from rubric_core.store.sqlbase import SQLBackend
from rubric_core.store.sqlite import SQLiteBackend
from rubric_core.store.validation import require_int

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Store"]


class Store:
    """Rubrics, runs, grading passes and transcripts, kept in one database.

    The queries live in one object per aggregate, each a module of
    `rubric_core.store.queries`, as sqlite-utils gives each table its verbs:
    `store.rubrics` (versions and tags), `store.runs` (a run's row and transcript, the run
    filters, batches), `store.passes` (grading passes, verdicts, pass rates),
    `store.experiments` (re-grading experiments), `store.labels` (human labels, the
    review queue) and `store.exports` (the export datasets' reads). Two backends, one
    set of queries:

    - SQLite (a file path; `rubric_core.store.sqlite`): every write goes to one writer
      thread that owns the only write connection and commits before the call returns;
      reads use one read-only connection per thread.
    - PostgreSQL (a `postgresql://` URL; `rubric_core.store.postgres`): a psycopg 3
      connection pool; every write is one transaction committed before the call
      returns. Many processes and hosts may share the database.

    Each query checks its arguments, then runs its SQL through the backend; this class
    opens the backend, composes the aggregates over it, and adds closing, backups and the
    raw reads (`stream_rows`).

    Safe to share across threads.

    Run queries (`runs.find`, `runs.count`, `passes.criterion_pass_rates`, the exports) take
    a `RunFilters` as `filters`, or its fields as keyword arguments (which refine
    `filters` when both are given).

    Examples:
        >>> import tempfile, pathlib
        >>> from rubric_core.store import RunFilters
        >>> store = Store(pathlib.Path(tempfile.mkdtemp()) / "s.db")
        >>> version = store.rubrics.save_version("haiku", "- 5/7/5 syllables")
        >>> version["version"], version["criteria"]
        (1, ['5/7/5 syllables'])
        >>> store.runs.count(RunFilters(rubric="haiku"))
        0
        >>> store.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_s: float = 5.0,
        pool_size: int = 8,
    ):
        """Open (or create) the database, apply pending migrations, mark dead runs interrupted.

        Args:
            path: A database file (SQLite), or a `postgresql://` URL (PostgreSQL);
                `default_db_target()` (`$RUBRIC_STUDIO_DB`) when None. Missing parent
                directories of a file are created.
            busy_timeout_s: How long a write waits for another process's lock (SQLite),
                or for a server connection (PostgreSQL), before it fails with StoreError.
            pool_size: Most connections a PostgreSQL store holds open (ignored by SQLite).

        Raises:
            StoreError: The file is read-only, locked, not a database, or cannot be created;
                the server does not answer (`unreachable`), refuses the user or password
                (`auth`), or has no such database (`missing`).
        """
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, int | float):
            msg = f"busy_timeout_s must be a number of seconds, got {busy_timeout_s!r}"
            raise StoreError(msg, kind="invalid")
        if busy_timeout_s < 0:
            msg = f"busy_timeout_s must be at least 0, got {busy_timeout_s}"
            raise StoreError(msg, kind="invalid")
        require_int(pool_size, "pool_size", minimum=1)
        self.busy_timeout_s = float(busy_timeout_s)
        target = path if path is not None else default_db_target()
        self._backend: SQLBackend
        if is_postgres_url(target):
            from rubric_core.store.postgres import PostgresBackend

            self.target = str(target).strip()
            self._path: Path | None = None
            self._backend = PostgresBackend(
                self.target, timeout_s=max(1.0, self.busy_timeout_s), max_size=pool_size
            )
        else:
            self._path = Path(target).expanduser().resolve()
            self.target = str(self._path)
            self._backend = SQLiteBackend(self._path, busy_timeout_s=self.busy_timeout_s)
        backend = self._backend
        self.rubrics = Rubrics(backend)
        self.runs = Runs(backend, self.rubrics)
        self.passes = Passes(backend, self.runs, self.rubrics)
        self.experiments = Experiments(backend)
        self.labels = Labels(backend, self.runs, self.passes, self.experiments)
        self.exports = Exports(backend, self.runs)

    @property
    def is_postgres(self) -> bool:
        """Whether the store is a PostgreSQL database (else a SQLite file)."""
        return self._path is None

    @property
    def url(self) -> str:
        """The database as given: the file path, or the URL with its password as `***`."""
        return redact_url(self.target)

    @property
    def path(self) -> Path:
        """The SQLite file.

        Raises:
            StoreError: A PostgreSQL store has no file.
        """
        if self._path is None:
            msg = f"store {self.url} is a PostgreSQL database and has no file path"
            raise StoreError(msg, kind="invalid")
        return self._path

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""
        self._backend.close()

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Copy the store, as committed now, to the single SQLite file `dest`; returns its path.

        Uses SQLite's online backup API, so runs may go on writing meanwhile; the copy
        holds every committed row (the write-ahead log's too) in one file, ready to be
        opened as a store.

        Raises:
            StoreError: The store is PostgreSQL (back it up with `pg_dump`); `dest` exists
                (without `overwrite`), is the store's own file, or cannot be written.
        """
        if not isinstance(self._backend, SQLiteBackend):
            msg = (
                f"store {self.url} is a PostgreSQL database; back it up with the server's "
                "own tools, e.g. `pg_dump --format=custom --file=studio.dump DBNAME`"
            )
            raise StoreError(msg, kind="invalid")
        return self._backend.backup(Path(dest), overwrite=overwrite)

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only SQLite connection (rows as `sqlite3.Row`); the caller closes it.

        SQLite only; code meant for both backends uses a named query or `stream_rows`.

        Raises:
            StoreError: The store is a PostgreSQL database.
        """
        if not isinstance(self._backend, SQLiteBackend):
            msg = f"store {self.url} is PostgreSQL: use a named query or stream_rows"
            raise StoreError(msg, kind="invalid")
        return self._backend.connect_readonly()

    def _query_rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read-only query, as dicts, on either backend (for tests: callers
        use the named queries). `sql` is portable SQL with `?` placeholders."""
        return self._backend.query(sql, params)

    def stream_rows(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 1000
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A long read-only query on a connection of its own, `size` rows (tuples) per batch.

        Memory stays flat however many rows match; closing the generator releases the
        connection. `sql` is portable SQL with `?` placeholders.
        """
        return self._backend.stream(sql, params, max(1, int(size)))
