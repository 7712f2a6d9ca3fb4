"""Jobs on threads of this process: the default executor."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from rubric_core.batch.common import Drive, Units, report_progress
from rubric_core.batch.limits import local_book
from rubric_core.providers.ratelimit import use_book

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rubric_core.store import Store

__all__ = ["run_in_threads"]


def run_in_threads(store: Store, units: Units, pending: Sequence[int], drive: Drive) -> None:
    """Run units `pending` on `drive.concurrency` threads of this process; blocks until done."""
    lock = threading.Lock()
    book = local_book(drive.rate_limit)  # one budget for every thread of the job
    total = units.total
    finished = total - len(pending)

    def one(index: int) -> None:
        nonlocal finished
        if drive.stop.is_set():
            return
        with use_book(book):
            row = units.run_unit(store, index, drive.stop)
        if row is None:
            return
        with lock:
            finished += 1
            count = finished
        report_progress(drive, count, total, row, units.batch_id)

    with ThreadPoolExecutor(max_workers=drive.concurrency, thread_name_prefix="rubric-job") as pool:
        futures = [pool.submit(one, index) for index in pending]
        for future in futures:
            future.result()
