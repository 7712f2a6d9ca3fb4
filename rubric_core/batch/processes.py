"""Batches on worker processes of this machine: one process per core, several runs on threads in each.

Why processes: a run spends most of its time waiting for models, but what it does between
calls (graphs, middleware, the store, checkpoints) is Python under one GIL, so threads of
one process stop scaling near one core (0.39-0.61 of the ideal speed-up at concurrency
16). `executor="process"` starts `min(cores, concurrency)` worker processes and splits
the concurrency between them as threads: each process runs its share of inputs at once,
and the processes use every core. With 2 cores and concurrency 16 that is 2 processes of
8 threads.

How: plain `multiprocessing` processes from a `forkserver` context (`spawn` where there is
none): never `fork`, since the caller (the dashboard, the CLI) has threads of its own.
The forkserver imports the run machinery once (`set_forkserver_preload`), so later
workers start in milliseconds rather than re-importing LangChain. A task queue hands out
inputs; each worker thread takes the next input and runs it through
`workers.run_input_in_worker`, the path a Ray task takes, so a worker opens the store
from its target (one writer per process, as SQLite wants it; a `Store` is never
pickled) and records each graded pass before its loop goes on. The workers report each
input they take and finish on a result queue; the driver calls `progress` from there.

Stopping sets a shared flag every worker watches: running runs stop before their next model
call (`interrupted`), no input is taken any more, and the driver marks the runs in flight
`interrupted` at once; a worker that has not ended `_STOP_GRACE_S` later is terminated (a
crash loses nothing stored). A worker that dies leaves its runs `running` only until the
driver sees it gone and marks them `interrupted`; resuming the batch continues them.

The job's units (the spec and the caller's model or grader factory) are pickled to the
workers, so a factory must be a module-level function or a picklable object, as with Ray.
Any job runs here: a batch's inputs, a grade's rows, a re-grade's gradings.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import TYPE_CHECKING, Any

from rubric_core.batch.common import mark_interrupted, report_progress
from rubric_core.batch.limits import process_book
from rubric_core.batch.worker import close_worker_stores, run_input_in_worker
from rubric_core.runs.spec import SpecError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rubric_core.batch.common import Drive, Units
    from rubric_core.providers.ratelimit import BookLike
    from rubric_core.store import Store

__all__ = ["check_picklable", "plan_workers", "run_in_processes"]

logger = logging.getLogger(__name__)

_PRELOAD = [
    "rubric_core.batch.worker",
    "rubric_core.runs.execute",
    "rubric_core.providers",
    "langgraph.checkpoint.sqlite",
]
"""Modules the forkserver imports once, so each worker starts with them loaded."""

_POLL_S = 0.25
"""How often a waiting worker thread or the driver looks at the stop event."""

_STOP_GRACE_S = 30.0
"""How long stopped workers get to end before they are terminated."""

_CONTEXT_LOCK = threading.Lock()
_CONTEXT: list[ForkServerContext | SpawnContext] = []


def _context() -> ForkServerContext | SpawnContext:
    """This process's multiprocessing context for workers (created once)."""
    with _CONTEXT_LOCK:
        if not _CONTEXT:
            context: ForkServerContext | SpawnContext
            if "forkserver" in multiprocessing.get_all_start_methods():
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(_PRELOAD)
            else:  # pragma: no cover - Windows
                context = multiprocessing.get_context("spawn")
            _CONTEXT.append(context)
        return _CONTEXT[0]


def plan_workers(concurrency: int, pending: int, cpus: int | None = None) -> list[int]:
    """Threads per worker process: one process per core (at most), the concurrency split evenly.

    Examples:
        >>> plan_workers(16, 32, cpus=2)
        [8, 8]
        >>> plan_workers(5, 100, cpus=2)
        [3, 2]
        >>> plan_workers(16, 3, cpus=8)
        [1, 1, 1]
    """
    slots = max(1, min(concurrency, pending))
    processes = max(1, min(cpus or os.cpu_count() or 1, slots))
    share = math.ceil(slots / processes)
    plan: list[int] = []
    for _ in range(processes):
        plan.append(min(share, slots - sum(plan)))
    return [threads for threads in plan if threads > 0]


# --------------------------------------------------------------------------- the worker


def _watch(stop: Any, local: threading.Event, done: threading.Event) -> None:
    """Mirror the batch's shared stop flag into this worker's own event.

    The flag is a lock-free shared byte (`RawValue`), polled: a `multiprocessing.Event`
    would make the driver's `set()` wait for every process that ever waited on it,
    including workers that have exited or were terminated, which never answer.
    """
    while not done.wait(_POLL_S):
        if stop.value:
            local.set()
            return


def _serve(
    target: str,
    units: Units,
    threads: int,
    tasks: Any,
    results: Any,
    stop: Any,
    book: BookLike | None = None,
) -> None:
    """A worker process: `threads` threads take unit indexes from `tasks` until a `None` each.

    `book` is the job's rate limit (a proxy of the manager's book), asked by every unit."""
    # Ctrl-C reaches the whole process group; the driver stops the batch, not each worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    local_stop, done = threading.Event(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(stop, local_stop, done), daemon=True)
    watcher.start()
    pid = os.getpid()

    def loop() -> None:
        while not local_stop.is_set():
            try:
                item = tasks.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if item is None:
                return
            index = int(item)
            results.put(("started", pid, index, None))
            row = None
            try:
                row = run_input_in_worker(target, units, index, local_stop, book)
            except Exception:  # a unit logs and stores its own failures
                logger.exception(
                    "batch %s: input %d failed in worker %d", units.batch_id, index, pid
                )
            results.put(("finished", pid, index, row))

    workers = [
        threading.Thread(target=loop, name=f"rubric-batch-{n}", daemon=True) for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    close_worker_stores()


# --------------------------------------------------------------------------- the driver


class _Driver:
    """The driver's view of a process batch: which worker runs which input, what finished."""

    def __init__(
        self, store: Store, batch_id: str, total: int, finished: int, drive: Drive
    ) -> None:
        self.store, self.batch_id, self.total = store, batch_id, total
        self.finished, self.drive = finished, drive
        self.in_flight: dict[int, set[int]] = {}  # pid -> input indexes
        self.reported = 0  # inputs of this batch the workers have reported finished

    def handle(self, message: tuple[str, int, int, dict[str, Any] | None]) -> None:
        kind, pid, index, row = message
        if kind == "started":
            self.in_flight.setdefault(pid, set()).add(index)
            return
        self.in_flight.get(pid, set()).discard(index)
        self.reported += 1
        if row is None:
            return
        self.finished += 1
        report_progress(self.drive, self.finished, self.total, row, self.batch_id)

    def lost(self, pid: int, reason: str) -> None:
        """Worker `pid` is gone: its runs in flight end `interrupted`."""
        indexes = self.in_flight.pop(pid, set())
        if indexes:
            mark_interrupted(self.store, self.batch_id, reason, indexes=indexes)


def _drain(results: Any, driver: _Driver) -> None:
    while True:
        try:
            driver.handle(results.get_nowait())
        except queue.Empty:
            return


def check_picklable(units: Units) -> None:
    """A job's units travel to the workers by pickle; refuse them before any unit runs
    if they cannot (the caller's factory is what can fail: a lambda or a closure).

    Raises:
        SpecError: Naming `units.factory_field`.
    """
    try:
        pickle.dumps(units)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        msg = (
            "must be picklable to reach worker processes (a module-level function, not a "
            f"lambda or a closure) for executor='process' or 'ray': {exc}"
        )
        raise SpecError(units.factory_field, msg) from exc


def run_in_processes(store: Store, units: Units, pending: Sequence[int], drive: Drive) -> None:
    """Run units `pending` of a job on worker processes, at most `drive.concurrency` at once.

    The job's runner calls this for `executor="process"` after checking the job. Setting
    `drive.stop` stops the workers' runs (`interrupted`, marked at once), takes no more
    units, and terminates a worker still going `_STOP_GRACE_S` later. A rate limit is
    held by a manager process for the job's length, every worker's units asking it.

    Raises:
        SpecError: The units (their factory) cannot be pickled to the workers.
    """
    check_picklable(units)
    if not pending:
        return
    context = _context()
    with process_book(drive.rate_limit, context) as book:
        _run_workers(store, units, pending, context, book, drive)


def _run_workers(
    store: Store,
    units: Units,
    pending: Sequence[int],
    context: ForkServerContext | SpawnContext,
    book: BookLike | None,
    drive: Drive,
) -> None:
    stop = drive.stop
    plan = plan_workers(drive.concurrency, len(pending))
    tasks: Any = context.Queue()
    results: Any = context.Queue()
    shared_stop: Any = context.RawValue("b", 0)
    for index in pending:
        tasks.put(index)
    for _ in range(sum(plan)):
        tasks.put(None)
    processes = [
        context.Process(
            target=_serve,
            args=(store.target, units, threads),
            kwargs={"tasks": tasks, "results": results, "stop": shared_stop, "book": book},
            name=f"rubric-batch-worker-{n}",
            daemon=True,
        )
        for n, threads in enumerate(plan)
    ]
    driver = _Driver(store, units.batch_id, units.total, units.total - len(pending), drive)
    try:
        for process in processes:
            process.start()
        alive = {process.pid: process for process in processes}
        # Until every input has reported (the workers then only close their stores and
        # exit, which _stop_workers waits for) or every worker is gone.
        while alive and driver.reported < len(pending):
            if stop.is_set():
                break
            with contextlib.suppress(queue.Empty):
                driver.handle(results.get(timeout=_POLL_S))
            for pid, process in list(alive.items()):
                if not process.is_alive():
                    _drain(results, driver)
                    del alive[pid]
                    if process.exitcode:
                        driver.lost(int(pid or 0), f"its worker process died ({process.exitcode})")
        _drain(results, driver)
    finally:
        _stop_workers(processes, shared_stop, results, driver, stopped=stop.is_set())
        for channel in (tasks, results):
            channel.cancel_join_thread()
            channel.close()


def _stop_workers(
    processes: list[Any], shared_stop: Any, results: Any, driver: _Driver, *, stopped: bool
) -> None:
    """End the workers: on a stop their runs are marked at once, and the workers get a bound.

    The result queue is read meanwhile: a worker exits only once what it reported is read.
    """
    if stopped:
        shared_stop.value = 1
        mark_interrupted(driver.store, driver.batch_id, "the batch was stopped")
    deadline = time.monotonic() + (_STOP_GRACE_S if stopped else 5.0)
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        _drain(results, driver)
        for process in processes:
            process.join(0.05)
    _drain(results, driver)
    for process in processes:
        if process.is_alive():
            logger.warning("batch %s: terminating worker %s", driver.batch_id, process.pid)
            process.terminate()
            process.join(5.0)
        driver.lost(int(process.pid or 0), "its worker process was stopped")
