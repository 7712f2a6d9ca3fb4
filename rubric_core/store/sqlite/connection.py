"""SQLite connections: one writer thread with group commit, one read-only connection per thread."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlite_utils import Database

from rubric_core.store.errors import StoreError, StoreErrorKind
from rubric_core.store.paths import DB_ENV_VAR, DEFAULT_DB_NAME

__all__ = ["SQLiteConnections", "translate"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_GROUP_COMMIT_MAX = 64

CHECKPOINT_INTERVAL_S = 30.0
"""Within this long of a commit, busy or idle, the writer merges the write-ahead log into
the file (a passive checkpoint: it never blocks readers or waits for them), so a plain
copy of the `.db` file lags the store by about this much at most (a reader in a long
transaction can hold part of the log back until it ends). Closing the store merges all
of it. `backup` makes a copy that lags by nothing."""

Job = Callable[[Database], Any]
"""A unit of writing: runs on the writer thread inside the shared transaction."""

_Queued = tuple[Job, "Future[Any]", bool]
"""A job, the future its caller waits on, and whether its commit must be fsynced."""


def translate(exc: BaseException, path: Path, busy_timeout_s: float) -> BaseException:
    """Turn a sqlite3 error into a StoreError a person can act on; others pass through.

    Examples:
        >>> error = translate(sqlite3.OperationalError("database is locked"), Path("x.db"), 5)
        >>> error.kind, str(error)[:40]
        ('locked', 'database x.db is locked by another write')
    """
    if not isinstance(exc, sqlite3.Error):
        return exc
    text = str(exc)
    lowered = text.lower()
    kind: StoreErrorKind = "io"
    if "locked" in lowered or "busy" in lowered:
        kind = "locked"
        msg = (
            f"database {path} is locked by another writer and stayed locked for "
            f"{busy_timeout_s:g}s; close the other program using it (or wait) and try again"
        )
    elif "readonly" in lowered or "read-only" in lowered:
        kind = "read_only"
        msg = (
            f"database {path} is read-only ({text}); make the file and its directory "
            f"writable, or point ${DB_ENV_VAR} at a writable copy"
        )
    elif "not a database" in lowered or "malformed" in lowered:
        msg = f"{path} is not a usable SQLite database ({text})"
    elif "unable to open" in lowered:
        kind = "missing"
        msg = f"cannot open database {path} ({text}); check the path and its permissions"
    elif "disk i/o" in lowered or "disk is full" in lowered or "full" in lowered:
        msg = f"database {path} could not be written ({text}); check free space and the file"
    else:
        msg = f"database {path}: {type(exc).__name__}: {text}"
    error = StoreError(msg, kind=kind)
    error.__cause__ = exc
    return error


def check_openable(path: Path) -> None:
    """Refuse, with what to do, a path that is a folder or that cannot be written.

    Raises:
        StoreError: Of kind `invalid` (a folder), `read_only` or `io`.
    """
    if path.is_dir():
        msg = f"database path {path} is a directory; give a file name such as {DEFAULT_DB_NAME}"
        raise StoreError(msg, kind="invalid")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create the directory for database {path}: {exc}"
        kind: StoreErrorKind = "read_only" if isinstance(exc, PermissionError) else "io"
        raise StoreError(msg, kind=kind) from exc
    if path.exists():
        mode = path.stat().st_mode
        # Root ignores permission bits; honour them anyway so a file marked
        # read-only is never written.
        if not os.access(path, os.W_OK) or not mode & 0o222:
            msg = (
                f"database {path} is read-only (permissions {oct(mode & 0o777)}); "
                f"make it writable, or point ${DB_ENV_VAR} at a writable copy"
            )
            raise StoreError(msg, kind="read_only")
    if not os.access(path.parent, os.W_OK):
        msg = (
            f"directory {path.parent} is not writable, so database {path.name} "
            "cannot keep its write-ahead log there"
        )
        raise StoreError(msg, kind="read_only")


class SQLiteConnections:
    """The connections of one SQLite file, safe to share across threads.

    Every write goes to one writer thread that owns the only write connection and
    commits before the call returns (calls that queue up meanwhile share one
    transaction, each in its own savepoint); reads use one read-only connection per
    thread (WAL mode), as datasette does.

    A commit is fsynced (`synchronous=FULL`) unless every job in it was written with
    `durable=False`: such a commit (`synchronous=NORMAL`) is in the write-ahead log, so
    readers see it and a killed process keeps it, but only the next fsynced commit of
    the file makes it survive a power cut (the log is one file, synced as a whole).
    """

    def __init__(
        self, path: Path, *, busy_timeout_s: float, prepare: Callable[[Database], None]
    ) -> None:
        """Open the writer (WAL, `prepare` run on it once) and wait until it is ready.

        Args:
            path: The database file (resolved); created if missing.
            busy_timeout_s: How long a write waits for another process's lock.
            prepare: Run on the write connection before any job: migrations and the like.

        Raises:
            StoreError: The file is read-only, locked, not a database, or cannot be created.
        """
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._prepare = prepare
        self._closed = False
        self._local = threading.local()
        self._readers: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Queued | None] = queue.SimpleQueue()
        self._identity: tuple[int, int] | None = None
        self._recovered_to: Path | None = None
        self._checkpoint_every_s = CHECKPOINT_INTERVAL_S
        self._checkpointed_at = time.monotonic()
        self._synchronous = "FULL"  # the write connection's setting, kept by the writer
        check_openable(self.path)
        ready: Future[None] = Future()
        self._writer = threading.Thread(
            target=self._writer_main,
            args=(ready,),
            name=f"rubric-store-writer:{self.path.name}",
            daemon=True,
        )
        self._writer.start()
        try:
            ready.result()
        except BaseException:
            self._closed = True
            self._writer.join(timeout=5)
            raise

    def _closed_error(self) -> StoreError:
        return StoreError(f"store {self.path} is closed", kind="invalid")

    # --- the writer ---------------------------------------------------------------------

    def _writer_main(self, ready: Future[None]) -> None:
        try:
            db = self._open_writer()
        except BaseException as exc:
            ready.set_exception(translate(exc, self.path, self.busy_timeout_s))
            return
        ready.set_result(None)
        unmerged = False  # commits since the last checkpoint
        try:
            while True:
                due = self._checkpointed_at + self._checkpoint_every_s - time.monotonic()
                wait = max(0.0, due) if unmerged and math.isfinite(due) else None
                try:
                    first = self._queue.get(timeout=wait)
                except queue.Empty:  # idle with commits still in the log: merge them now
                    self._checkpoint(db, "PASSIVE")
                    unmerged = False
                    continue
                batch = [first]
                # Group commit: whatever queued up meanwhile shares one transaction.
                while len(batch) < _GROUP_COMMIT_MAX:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                jobs = [item for item in batch if item is not None]
                if jobs:
                    self._run_batch(db, jobs)
                    unmerged = True
                    if time.monotonic() - self._checkpointed_at >= self._checkpoint_every_s:
                        self._checkpoint(db, "PASSIVE")
                        unmerged = False
                if len(jobs) < len(batch):
                    break
        finally:
            # Readers of this process may outlive the writer, and a read-only connection
            # cannot merge the log when it closes last: merge it all now.
            self._checkpoint(db, "TRUNCATE")
            with contextlib.suppress(sqlite3.Error):
                db.close()
            closed = self._closed_error()
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None and item[1].set_running_or_notify_cancel():
                    item[1].set_exception(closed)

    def _open_writer(self) -> Database:
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        db = Database(conn, execute_plugins=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            db.enable_wal()
            if db.journal_mode != "wal":
                msg = f"database {self.path} could not be switched to WAL mode"
                raise StoreError(msg, kind="io")
            conn.execute("PRAGMA synchronous = FULL")
            self._prepare(db)
            stat = self.path.stat()
            self._identity = (stat.st_dev, stat.st_ino)
        except BaseException:
            conn.close()
            raise
        return db

    def _checkpoint(self, db: Database, mode: str) -> None:
        """Merge the write-ahead log into the database file (`PRAGMA wal_checkpoint`).

        A reader still inside a transaction can keep part of the log from being merged;
        that part is merged by a later checkpoint. Failures are logged, never raised: the
        rows are safe in the log either way.
        """
        self._checkpointed_at = time.monotonic()
        try:
            busy, _log_pages, _merged = db.conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:
            _log.warning("could not checkpoint %s: %s", self.path, exc)
            return
        if busy:
            _log.info("checkpoint of %s left some of its log for later (readers busy)", self.path)

    def _check_file(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            stat = None
        if stat is None or (stat.st_dev, stat.st_ino) != self._identity:
            what = "deleted" if stat is None else "replaced by another file"
            msg = f"database {self.path} was {what} while the store was open"
            if self._recovered_to is not None:
                msg += f"; the rows committed until then were saved to {self._recovered_to}"
            raise StoreError(msg, kind="missing")

    def _recover(self, db: Database) -> None:
        """Copy what this connection still sees of a deleted file next to where it was."""
        if self._recovered_to is not None:
            return
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.stem}.recovered-{stamp}{self.path.suffix}")
        try:
            db.conn.execute("VACUUM INTO ?", (str(target),))
        except sqlite3.Error as exc:
            _log.error("could not recover %s into %s: %s", self.path, target, exc)
            return
        self._recovered_to = target

    def _run_batch(self, db: Database, jobs: list[_Queued]) -> None:
        """Run jobs in one transaction, each in its own savepoint; resolve them after COMMIT.

        A job that raises is rolled back alone; the others still commit. No
        caller hears "done" before its rows are committed.
        """
        live = [item for item in jobs if item[1].set_running_or_notify_cancel()]
        if not live:
            return
        # Fsynced unless no job asked for it: one durable job makes the whole commit so.
        synchronous = "FULL" if any(durable for _, _, durable in live) else "NORMAL"

        def fail_all(exc: BaseException) -> None:
            error = translate(exc, self.path, self.busy_timeout_s)
            for _job, future, _durable in live:
                future.set_exception(error)

        conn = db.conn
        try:
            try:
                self._check_file()
            except StoreError:
                self._recover(db)
                self._check_file()  # raises again, now naming the recovery file
            if synchronous != self._synchronous:
                conn.execute(f"PRAGMA synchronous = {synchronous}")
                self._synchronous = synchronous
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            fail_all(exc)
            return
        outcomes: list[tuple[Future[Any], Any, BaseException | None]] = []
        try:
            for job, future, _durable in live:
                conn.execute("SAVEPOINT store_job")
                try:
                    result = job(db)
                except BaseException as exc:
                    if not conn.in_transaction:
                        raise  # the error ended the whole transaction: nothing committed
                    conn.execute("ROLLBACK TO store_job")
                    conn.execute("RELEASE store_job")
                    outcomes.append((future, None, exc))
                else:
                    conn.execute("RELEASE store_job")
                    outcomes.append((future, result, None))
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            fail_all(exc)
            return
        for future, result, error in outcomes:
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(translate(error, self.path, self.busy_timeout_s))

    def write(self, job: Callable[[Database], _T], *, durable: bool = True) -> _T:
        """Run `job` on the writer thread; returns its result once it is committed.

        `durable=False`: the commit need not be fsynced on its own (see the class).

        Raises:
            StoreError: The store is closed, the file is gone or locked, or `job` raised it.
        """
        if self._closed:
            raise self._closed_error()
        future: Future[_T] = Future()
        self._queue.put((job, future, durable))
        return future.result()

    # --- readers ------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise what a read would: the store is closed, or its file is gone or replaced.

        Raises:
            StoreError: Of kind `invalid` (closed) or `missing`.
        """
        if self._closed:
            raise self._closed_error()
        self._check_file()

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only connection (rows as `sqlite3.Row`); the caller closes it.

        Used for long streaming reads such as exports, which should not share the
        per-thread connection.
        """
        if self._closed:
            raise self._closed_error()
        self._check_file()
        uri = f"file:{quote(str(self.path))}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout_s) from exc
        conn.row_factory = sqlite3.Row
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = self.connect_readonly()
        self._local.conn = conn
        with self._readers_lock:
            # Close connections of threads that have ended (Streamlit starts many).
            alive = []
            for thread_ref, other in self._readers:
                thread = thread_ref()
                if thread is None or not thread.is_alive():
                    with contextlib.suppress(sqlite3.Error):
                        other.close()
                else:
                    alive.append((thread_ref, other))
            alive.append((weakref.ref(threading.current_thread()), conn))
            self._readers = alive
        return conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read, as dicts, on this thread's read-only connection."""
        if self._closed:
            raise self._closed_error()
        self._check_file()
        try:
            cursor = self._reader().execute(sql, params)
            return [dict(row) for row in cursor.fetchall()]
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout_s) from exc

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of one read, or None."""
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        if threading.current_thread() is not self._writer:
            self._writer.join()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for _thread, conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
