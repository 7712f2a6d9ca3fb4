"""Runs and batches working in the background of a long-lived process (the dashboard's).

The process keeps their handles in a `RunRegistry`, so a run keeps its Stop button when
the person who started it switches page or reloads. Progress is never read from the
handles: background work writes to the store, and whoever shows it polls the store.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rubric_core.batch.common import new_batch_id, validate_batch
from rubric_core.batch.ray_cluster import check_ray_address
from rubric_core.batch.run import run_batch

if TYPE_CHECKING:
    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.runs.handle import RunHandle
    from rubric_core.runs.spec import RunSpec
    from rubric_core.store import Store

__all__ = ["BatchJob", "RunRegistry", "batch_progress", "start_batch"]


@dataclass
class BatchJob:
    """A batch running on a background thread; progress is read from the store."""

    batch_id: str
    """The `batch_id` every run of the batch is stored with."""

    total: int
    """How many inputs the batch runs."""

    stop_event: threading.Event = field(default_factory=threading.Event)
    """Set by `stop()`; the batch's runs watch it."""

    thread: threading.Thread | None = None
    """The thread running the batch, once started."""

    error: str | None = None
    """Why the batch stopped early, if it raised."""

    def done(self) -> bool:
        """Whether the batch thread has finished."""
        return self.thread is not None and not self.thread.is_alive()

    def stop(self) -> None:
        """Stop the running runs (they end `interrupted`) and start no more."""
        self.stop_event.set()


class RunRegistry:
    """Run handles and batch jobs of this process, keyed by id; shared by every session.

    The dashboard holds one in `st.cache_resource`. Thread-safe.

    Examples:
        >>> registry = RunRegistry()
        >>> registry.run(1) is None, registry.active_runs()
        (True, [])
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, RunHandle] = {}
        self._batches: dict[str, BatchJob] = {}

    def add_run(self, handle: RunHandle) -> None:
        """Keep a `RunHandle` under its `run_id`."""
        with self._lock:
            self._runs[int(handle.run_id)] = handle

    def run(self, run_id: int | None) -> RunHandle | None:
        """The handle of `run_id` if this process started it, else `None`."""
        if run_id is None:
            return None
        with self._lock:
            return self._runs.get(int(run_id))

    def active_runs(self) -> list[int]:
        """Ids of runs started here that have not finished, newest first."""
        with self._lock:
            return sorted((i for i, h in self._runs.items() if not h.done()), reverse=True)

    def add_batch(self, job: BatchJob) -> None:
        """Keep a batch job under its `batch_id`."""
        with self._lock:
            self._batches[job.batch_id] = job

    def batch(self, batch_id: str | None) -> BatchJob | None:
        """The job of `batch_id` if this process started it, else `None`."""
        if batch_id is None:
            return None
        with self._lock:
            return self._batches.get(batch_id)


def start_batch(
    store: Store,
    spec: RunSpec,
    inputs: Sequence[str],
    *,
    concurrency: int,
    executor: str = "thread",
    ray_address: str | None = None,
    ray_task_cpus: float = 1.0,
    rate_limit: RateLimit | None = None,
) -> BatchJob:
    """Validate a batch, then run it on a background thread; returns at once.

    The batch is checked completely first (`validate_batch`: the concurrency, every input,
    the spec), so a bad row or a missing API key is reported here rather than from the thread.
    For `executor="ray"` the cluster's address is checked to answer too (within seconds:
    `check_ray_address`); connecting and running happen on the thread, and what goes wrong
    there lands in `job.error`.

    Args:
        store: The store the runs are recorded in.
        spec: The spec every run uses; its `input` is replaced per run.
        inputs: One input per run.
        concurrency: Runs executing at once (see `validate_concurrency`).
        executor: `thread` or `ray` (see `run_batch`).
        ray_address: The Ray head node; default `$RUBRIC_STUDIO_RAY_ADDRESS`.
        ray_task_cpus: CPUs each Ray task reserves.
        rate_limit: Requests and tokens per minute per endpoint, for every run of the batch.

    Returns:
        The job, its thread started; keep it in a `RunRegistry` to find it again.

    Raises:
        SpecError: Naming the field that is wrong (`concurrency`, `inputs`, a spec field).
        RayUnavailable: `executor="ray"` and the cluster does not answer.
    """
    concurrency = validate_batch(store, spec, inputs, concurrency)
    if executor == "ray":
        ray_address = check_ray_address(ray_address)
    job = BatchJob(batch_id=new_batch_id(), total=len(inputs))

    def work() -> None:
        try:
            run_batch(
                store,
                spec,
                list(inputs),
                concurrency=concurrency,
                stop_event=job.stop_event,
                batch_id=job.batch_id,
                executor=executor,
                ray_address=ray_address,
                ray_task_cpus=ray_task_cpus,
                rate_limit=rate_limit,
            )
        except Exception as exc:  # shown on the Batch page; runs stored so far are kept
            job.error = f"{type(exc).__name__}: {exc}"

    job.thread = threading.Thread(target=work, name=f"rubric-{job.batch_id}", daemon=True)
    job.thread.start()
    return job


def batch_progress(store: Store, batch_id: str, total: int) -> tuple[int, int]:
    """`(finished, started)` runs of a batch, counted in the store.

    `total` is the batch's size; it is not needed for the count and kept for callers that
    pass the job's size alongside.
    """
    del total
    started = int(store.count_runs(batch_id=batch_id))
    running = int(store.count_runs(batch_id=batch_id, status="running"))
    return started - running, started
