"""The worker side of a batch in another process: open the store from its target, run one input.

Both out-of-process executors run each input through `run_input_in_worker`: a thread of a
worker process (`process_batch`) and a Ray task (`ray_batch`). A `Store` is never pickled;
a worker opens its own from the store's target (a file path or a `postgresql://` URL), so
each process has its own single writer and its own checkpointer, and the processes meet
only in the database, as the runs and the pages always do.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rubric_core.batch.common import run_batch_input
from rubric_core.providers.ratelimit import use_book

if TYPE_CHECKING:
    from rubric_core.batch.common import ModelFactory
    from rubric_core.providers.ratelimit import BookLike
    from rubric_core.runs.spec import RunSpec
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
    target: str,
    spec_template: RunSpec,
    *,
    batch_id: str,
    index: int,
    text: str,
    stop_event: threading.Event,
    model_factory: ModelFactory | None,
    book: BookLike | None = None,
) -> int | None:
    """Run input `index` of a batch into the store at `target`; its run id (`None`: not started).

    `run_batch_input` on this process's store: repeating it for the same input continues
    that input's run, so a retried task or a resumed batch never stores a pass twice.
    Its requests ask `book`, the batch's rate limit (`None`: unpaced).
    """
    with use_book(book):
        return run_batch_input(
            worker_store(target),
            spec_template,
            batch_id=batch_id,
            index=index,
            text=text,
            stop_event=stop_event,
            model_factory=model_factory,
        )
