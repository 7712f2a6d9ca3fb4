"""LangGraph checkpoints of runs, in the store's backend: one saver per database per process.

A SQLite store keeps its checkpoints in a SQLite file beside it (`SqliteSaver`); a
PostgreSQL store keeps them in the same PostgreSQL database (`PostgresSaver` on a small
pool of its own, `.setup()` once per process under an advisory lock, so many workers
starting at once create its tables once; the lock is polled for, never waited on inside a
statement, see `_take_setup_lock`).
"""

from __future__ import annotations

import collections
import contextlib
import sqlite3
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from rubric_core.extras import require
from rubric_core.store.errors import StoreError
from rubric_core.store.paths import is_postgres_url, redact_url

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from rubric_core.store import Store

__all__ = ["CHECKPOINTERS", "CheckpointerPool", "checkpoint_path"]

_SETUP_LOCK = 0x52554252_43503131
"""The advisory lock key held around `PostgresSaver.setup()` ("RUBRCP11")."""
_SETUP_LOCK_WAIT_S = 60.0
"""How long a process waits for another one's checkpointer setup before it gives up."""
_SETUP_LOCK_POLL_S = 0.1
_PG_WAIT_S = 5.0
"""Longest wait of a checkpoint read or write for a pooled connection (and to connect)."""
_PG_POOL_SIZE = 4


def checkpoint_path(store: Store) -> str:
    """Where a store's checkpoints live: `<db>.checkpoints.sqlite`, or the store's own URL.

    Examples:
        >>> checkpoint_path(Store("/data/studio.db"))  # doctest: +SKIP
        '/data/studio.db.checkpoints.sqlite'
    """
    if store.is_postgres:
        return store.target
    return f"{store.path}.checkpoints.sqlite"


def _open_sqlite(path: str) -> BaseCheckpointSaver[str]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def _open_postgres(url: str) -> BaseCheckpointSaver[str]:
    for module in ("psycopg", "psycopg_pool", "langgraph.checkpoint.postgres"):
        require(module, "postgres", feature="PostgreSQL checkpoints")
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        min_size=1,
        max_size=_PG_POOL_SIZE,
        # What PostgresSaver needs of its connections (see its from_conn_string).
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "connect_timeout": round(_PG_WAIT_S),
        },
        # A checkpoint write waits this long for a connection, not the pool's default 30 s:
        # a lost server ends the run within the store's retry bound (`store.retry`).
        timeout=_PG_WAIT_S,
        check=ConnectionPool.check_connection,
        name="rubric-checkpoints",
        open=False,
    )
    pool.open(wait=True, timeout=30)
    try:
        saver = PostgresSaver(pool)
        with psycopg.connect(url, autocommit=True, connect_timeout=30) as lock:
            _take_setup_lock(lock, url)
            try:
                saver.setup()
            finally:
                lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
    except BaseException:
        pool.close()
        raise
    return saver


def _take_setup_lock(lock: Any, url: str) -> None:
    """Take the setup lock on `lock` (an autocommit connection), polling for it.

    Not `pg_advisory_lock`: a session waiting in that statement is inside a transaction
    until it gets the lock, and the holder's `setup()` runs `CREATE INDEX CONCURRENTLY`,
    which waits for every transaction of the database older than itself to end. The
    holder would wait for the waiters and the waiters for the holder, in a cycle that
    passes through the client processes, so PostgreSQL never reports it. Each
    `pg_try_advisory_lock` here is one short autocommitted statement, and between tries
    the session holds no transaction (nor does the holder's lock session, idle after its
    try); a CIC at worst waits out one try.

    Raises:
        StoreError: Of kind `locked`, when another process held the lock for
            `_SETUP_LOCK_WAIT_S` (its setup waits on a transaction that does not end).
    """
    deadline = time.monotonic() + _SETUP_LOCK_WAIT_S
    while not lock.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,)).fetchone()[0]:
        if time.monotonic() >= deadline:
            msg = (
                f"the checkpoint tables of {redact_url(url)} are being set up by another "
                f"process, which has not finished in {_SETUP_LOCK_WAIT_S:.0f} s (its "
                "CREATE INDEX CONCURRENTLY waits for the database's open transactions "
                "to end; see pg_stat_activity)"
            )
            raise StoreError(msg, kind="locked")
        time.sleep(_SETUP_LOCK_POLL_S)


def _close(saver: BaseCheckpointSaver[str]) -> None:
    conn = getattr(saver, "conn", None)
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


class CheckpointerPool:
    """One saver per checkpoint database, shared by the runs of a process.

    A SQLite file gets a `SqliteSaver` (own connection, WAL); a PostgreSQL URL a
    `PostgresSaver` on its own pool.

    `SqliteSaver` serialises its writes with a lock, so concurrent runs share one
    connection instead of competing for SQLite's file lock. The connection stays
    open between runs (closing it checkpoints the WAL, ~20 ms) and is closed once
    no run uses it and the store it belongs to has been garbage-collected.
    The checkpoint database uses `synchronous=NORMAL`: in WAL mode a killed process
    loses nothing committed; only a power cut may drop the last checkpoints, which
    costs a resumed run some repeated steps, never a stored grading pass.
    The store keeps `synchronous=FULL` on purpose: it must never be behind the
    checkpoints. A checkpoint lost to a power cut makes the resumed run grade that pass
    again (stored once, under the same iteration); a stored pass lost while the
    checkpoint that follows it survived would never be graded again. So the passes pay
    an fsync each (grouped across concurrent runs by the store's writer) and the
    checkpoints, several per pass, do not. The agent writes them with
    `agents.RUN_DURABILITY` (`"sync"`). A grader without tools writes none at all (it is
    called directly, `grader.direct`); a grader with tools runs a sub-agent whose
    checkpoints go under its own namespace in the run's thread, so a tool that
    interrupts (human in the loop) resumes where it stopped.

    Every `acquire` is paired with one `release` of the same path.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._savers: dict[str, BaseCheckpointSaver[str]] = {}
        self._refs: dict[str, int] = {}
        self._owners: dict[str, set[int]] = {}
        # Finalizers may run during garbage collection inside a locked section, so
        # they only queue the owner here; the next acquire/release handles it.
        self._gone: collections.deque[tuple[str, int]] = collections.deque()

    def acquire(self, path: str, owner: object = None) -> BaseCheckpointSaver[str]:
        """The saver of `path` (a file or a URL), opened on first use; `owner` (the store) keeps it open."""
        with self._lock:
            self._collect()
            saver = self._savers.get(path)
            if saver is None:
                saver = _open_postgres(path) if is_postgres_url(path) else _open_sqlite(path)
                self._savers[path] = saver
            self._refs[path] = self._refs.get(path, 0) + 1
            owners = self._owners.setdefault(path, set())
            if owner is not None and id(owner) not in owners:
                owners.add(id(owner))
                weakref.finalize(owner, self._gone.append, (path, id(owner)))
            return saver

    def release(self, path: str) -> None:
        """A run is done with `path`'s saver; it closes once unused and unowned."""
        with self._lock:
            self._refs[path] = max(0, self._refs.get(path, 0) - 1)
            self._collect()
            self._close_if_unused(path)

    def _collect(self) -> None:
        while self._gone:
            path, owner_id = self._gone.popleft()
            self._owners.get(path, set()).discard(owner_id)
            self._close_if_unused(path)

    def _close_if_unused(self, path: str) -> None:
        if self._refs.get(path, 0) > 0 or self._owners.get(path):
            return
        saver = self._savers.pop(path, None)
        self._refs.pop(path, None)
        self._owners.pop(path, None)
        if saver is not None:
            _close(saver)


CHECKPOINTERS = CheckpointerPool()
"""The process's pool; every run of every store in this process goes through it."""
