"""LangGraph checkpoints of runs: one SQLite file beside the store, one saver per file per process."""

from __future__ import annotations

import collections
import contextlib
import sqlite3
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from rubric_core.store import Store

__all__ = ["CHECKPOINTERS", "CheckpointerPool", "checkpoint_path"]


def checkpoint_path(store: Store) -> str:
    """The checkpoint file that sits next to the store's database (`<db>.checkpoints.sqlite`).

    Examples:
        >>> checkpoint_path(Store("/data/studio.db"))  # doctest: +SKIP
        '/data/studio.db.checkpoints.sqlite'
    """
    return f"{store.path}.checkpoints.sqlite"


class CheckpointerPool:
    """One `SqliteSaver` (own connection, WAL) per checkpoint file, shared by runs in a process.

    `SqliteSaver` serialises its writes with a lock, so concurrent runs share one
    connection instead of competing for SQLite's file lock. The connection stays
    open between runs (closing it checkpoints the WAL, ~20 ms) and is closed once
    no run uses it and the store it belongs to has been garbage-collected.
    The checkpoint database uses `synchronous=NORMAL`: in WAL mode a killed process
    loses nothing committed; only a power cut may drop the last checkpoints, which
    costs a resumed run some repeated steps, never a stored grading pass.

    Every `acquire` is paired with one `release` of the same path.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._savers: dict[str, SqliteSaver] = {}
        self._refs: dict[str, int] = {}
        self._owners: dict[str, set[int]] = {}
        # Finalizers may run during garbage collection inside a locked section, so
        # they only queue the owner here; the next acquire/release handles it.
        self._gone: collections.deque[tuple[str, int]] = collections.deque()

    def acquire(self, path: str, owner: object = None) -> SqliteSaver:
        """The saver of `path`, opened on first use; `owner` (the store) keeps it open."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        with self._lock:
            self._collect()
            saver = self._savers.get(path)
            if saver is None:
                conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                saver = SqliteSaver(conn)
                saver.setup()
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
            with contextlib.suppress(sqlite3.Error):
                saver.conn.close()


CHECKPOINTERS = CheckpointerPool()
"""The process's pool; every run of every store in this process goes through it."""
