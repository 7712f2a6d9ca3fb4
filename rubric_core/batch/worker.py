"""The worker side of a job in another process: open the store from its target, run one unit.

Both out-of-process executors run each unit through `run_input_in_worker`: a thread of a
worker process (`processes`) and a Ray worker (`ray_pool`). A `Store` is never pickled;
a worker opens its own from the store's target (a file path or a `postgresql://` URL), so
each process has its own single writer and its own checkpointer, and the processes meet
only in the database, as the runs and the pages always do.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from rubric_core.providers.ratelimit import use_book

if TYPE_CHECKING:
    from rubric_core.batch.common import Units
    from rubric_core.providers.ratelimit import BookLike
    from rubric_core.store import Store

__all__ = ["close_worker_stores", "run_input_in_worker", "worker_store"]

_WORKER_STORES: dict[str, Store] = {}
"""The stores this (worker) process opened, by target, least recently used first."""

_WORKER_STORES_KEPT = 4
"""Stores a worker keeps open; the least recently used beyond that is closed."""

_LOCK = threading.Lock()


def worker_store(target: str) -> Store:
    """This process's store for `target`, opened on first use and kept for later inputs."""
    from rubric_core.store import Store

    with _LOCK:
        store = _WORKER_STORES.pop(target, None)
        if store is None:
            store = Store(target)
        _WORKER_STORES[target] = store
        while len(_WORKER_STORES) > _WORKER_STORES_KEPT:
            oldest = next(iter(_WORKER_STORES))
            _WORKER_STORES.pop(oldest).close()
        return store


def close_worker_stores() -> None:
    """Close every store this process opened (a worker process about to exit)."""
    with _LOCK:
        while _WORKER_STORES:
            _WORKER_STORES.popitem()[1].close()


def run_input_in_worker(
    target: str, units: Units, index: int, stop_event: threading.Event, book: BookLike | None
) -> dict[str, Any] | None:
    """Run unit `index` of a job into the store at `target`; its row (`None`: not run).

    `Units.run_unit` on this process's store: repeating it for the same unit continues
    it, so a retried task or a resumed job never stores a pass twice. Its requests ask
    `book`, the job's rate limit (`None`: unpaced).
    """
    with use_book(book):
        return units.run_unit(worker_store(target), index, stop_event)
