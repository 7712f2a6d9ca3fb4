"""Running a job's units on the executor it names; `run_batch`, the batch's own front door.

A job is prepared first (checked against the store, its pending units found; nothing runs),
then run (`PreparedJob.run`): the same executors, resume, progress, rate limit and stop
for a batch, a grade and a re-grade. `workbench.start_job` runs a prepared job on a
background thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubric_core.batch.common import (
    BatchInputs,
    Drive,
    ProgressCallback,
    Units,
    pending_inputs,
    validate_batch,
)
from rubric_core.batch.job import Job, RunInputs
from rubric_core.batch.processes import check_picklable, run_in_processes
from rubric_core.batch.ray_cluster import check_ray_address, run_on_ray
from rubric_core.batch.summary import BatchSummary, summary_for_batch
from rubric_core.batch.threads import run_in_threads
from rubric_core.runs.spec import SpecError

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = ["PreparedJob", "execute_units", "prepare_batch", "run_batch"]

R = TypeVar("R")


def execute_units(
    store: Store, units: Units, pending: Sequence[int], job: Job, drive: Drive
) -> None:
    """Run units `pending` on the executor `job` names; blocks until done or stopped."""
    if job.executor == "ray":
        run_on_ray(
            store, units, pending, drive, address=job.ray_address, task_cpus=job.ray_task_cpus
        )
    elif job.executor == "process":
        run_in_processes(store, units, pending, drive)
    else:
        run_in_threads(store, units, pending, drive)


def check_reachable(job: Job, units: Units) -> None:
    """What an out-of-process executor needs, checked before anything runs: units that
    pickle, a Ray cluster that answers (within seconds: `check_ray_address`).

    Raises:
        SpecError: The units' factory cannot be pickled.
        RayUnavailable: `executor="ray"` and the cluster does not answer.
    """
    if job.executor != "thread":
        check_picklable(units)
    if job.executor == "ray":
        check_ray_address(job.ray_address)


@dataclass
class PreparedJob(Generic[R]):
    """A job checked and made ready: its units and those still to run; `run` runs them.

    `collect(row)` sees every finished unit's row before the caller's progress does;
    `finish(stopped)` makes the result once the executor is done; `failed(exc)` records
    a job the executor raised out of (an experiment ends `error`), before it propagates.
    """

    store: Store
    job: Job
    units: Units
    pending: list[int]
    finish: Callable[[bool], R]
    collect: Callable[[dict[str, Any]], None] | None = None
    failed: Callable[[BaseException], None] | None = None
    experiment_id: int | None = None
    """The experiment a re-grade stores into."""

    @property
    def batch_id(self) -> str:
        return self.units.batch_id

    @property
    def total(self) -> int:
        return self.units.total

    def run(
        self,
        *,
        progress: ProgressCallback | None = None,
        stop_event: threading.Event | None = None,
    ) -> R:
        """Run the pending units to the end (or until `stop_event` is set); the result."""
        collect = self.collect

        def report(finished: int, total: int, row: dict[str, Any]) -> None:
            if collect is not None:
                collect(row)
            if progress is not None:
                progress(finished, total, row)

        drive = Drive(
            concurrency=self.job.concurrency,
            stop=stop_event or threading.Event(),
            progress=report,
            rate_limit=self.job.rate_limit,
        )
        try:
            execute_units(self.store, self.units, self.pending, self.job, drive)
        except BaseException as exc:
            if self.failed is not None:
                self.failed(exc)
            raise
        return self.finish(drive.stop.is_set())


def prepare_batch(store: Store, job: Job) -> PreparedJob[BatchSummary]:
    """Check a batch job completely before any of its runs starts; ready to `run`.

    The spec against the store (with the first input, as `validate_spec` does for one
    run), the batch to resume, the executor's reach (`check_reachable`).

    Raises:
        SpecError: The job is no batch, or a spec field or `batch_id` is invalid.
        RayUnavailable: `executor="ray"` and the cluster does not answer.
    """
    work = job.work
    if not isinstance(work, RunInputs):
        raise SpecError("work", f"a batch runs RunInputs, got {type(work).__name__}")
    validate_batch(store, work.spec, work.inputs)
    batch_id, pending = pending_inputs(store, job.batch_id, work.total, resume=job.resume)
    units = BatchInputs(work.spec, work.inputs, batch_id, work.model_factory)
    check_reachable(job, units)
    return PreparedJob(
        store, job, units, pending, finish=lambda _stopped: summary_for_batch(store, batch_id)
    )


def run_batch(
    store: Store,
    job: Job,
    *,
    progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
) -> BatchSummary:
    """Run one spec over many inputs (`job.work`, a `RunInputs`); blocks until done.

    Every input becomes a run sharing one `batch_id`, keyed in the store by its position
    in the inputs. The spec and every input are checked before the first run starts.
    Setting `stop_event` stops the running runs (`interrupted`) and starts no more.

    `job.executor="thread"` (the default) runs the inputs on threads of this process.
    `"process"` runs them on worker processes of this machine, one per core with the
    concurrency split between them as threads (see `rubric_core.batch.processes`): what a
    batch needs to use more than one core; the model factory must then be picklable.
    `"ray"` runs each input on a Ray worker of the cluster at `job.ray_address`, which
    opens the store from its URL and records into it, so the store must be PostgreSQL
    (see `rubric_core.batch.ray_cluster`); Ray retries an input whose worker died, and the
    retried input continues its grading run from the checkpointer. With `job.resume`,
    batch `job.batch_id` continues: finished inputs (`Store.runs.finished_inputs`) are
    skipped, interrupted ones continue their run.

    Args:
        store: The store the runs are recorded in.
        job: What to run and how (`Job(RunInputs(spec, inputs), concurrency=...)`).
        progress: `progress(finished, total, run_row)` after each run (from a worker
            thread for threads, from this thread otherwise); a resumed batch counts from
            the inputs already finished.
        stop_event: Set it to stop the batch.

    Raises:
        SpecError: The spec, an input or `batch_id` is invalid.
        RayUnavailable: The Ray cluster does not answer or cannot run the batch (Ray only).

    Examples:
        >>> summary = run_batch(store, Job(RunInputs(spec, load_dataset("in.csv"))))  # doctest: +SKIP
        >>> summary.satisfied_rate  # doctest: +SKIP
        0.75
        >>> again = Job(RunInputs(spec, inputs), batch_id=summary.batch_id, resume=True)  # doctest: +SKIP
        >>> run_batch(store, again)  # doctest: +SKIP
    """
    return prepare_batch(store, job).run(progress=progress, stop_event=stop_event)
