"""Batches on threads of this process: the default executor."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from rubric_core.batch.common import ModelFactory, ProgressCallback, run_batch_input
from rubric_core.batch.limits import local_book
from rubric_core.providers.ratelimit import RateLimit, use_book

if TYPE_CHECKING:
    from rubric_core.runs.spec import RunSpec
    from rubric_core.store import Store

__all__ = ["run_in_threads"]

logger = logging.getLogger(__name__)


def run_in_threads(
    store: Store,
    spec_template: RunSpec,
    inputs: list[str],
    pending: list[int],
    *,
    batch_id: str,
    concurrency: int,
    progress: ProgressCallback | None,
    stop: threading.Event,
    model_factory: ModelFactory | None,
    rate_limit: RateLimit | None = None,
) -> None:
    lock = threading.Lock()
    book = local_book(rate_limit)  # one budget for every thread of the batch
    finished = len(inputs) - len(pending)
    total = len(inputs)

    def one(index: int) -> None:
        nonlocal finished
        with use_book(book):
            run_id = run_batch_input(
                store,
                spec_template,
                batch_id=batch_id,
                index=index,
                text=inputs[index],
                stop_event=stop,
                model_factory=model_factory,
            )
        if run_id is None or progress is None:
            return
        with lock:
            finished += 1
            count = finished
        try:
            progress(count, total, store.get_run(run_id))
        except Exception:
            logger.exception("batch %s: progress callback raised", batch_id)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rubric-batch") as pool:
        futures = [pool.submit(one, index) for index in pending]
        for future in futures:
            future.result()
