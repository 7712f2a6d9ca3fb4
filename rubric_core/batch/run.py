"""`run_batch`: one spec over many inputs, on the executor the caller names."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.batch.common import (
    ModelFactory,
    ProgressCallback,
    check_executor,
    pending_inputs,
    validate_batch,
)
from rubric_core.batch.processes import run_in_processes
from rubric_core.batch.ray_cluster import run_on_ray
from rubric_core.batch.summary import BatchSummary, summary_for_batch
from rubric_core.batch.threads import run_in_threads

if TYPE_CHECKING:
    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.runs.spec import RunSpec
    from rubric_core.store import Store

__all__ = ["run_batch"]


def run_batch(
    store: Store,
    spec_template: RunSpec,
    inputs: Sequence[str],
    *,
    concurrency: int = 4,
    progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
    model_factory: ModelFactory | None = None,
    batch_id: str | None = None,
    resume: bool = False,
    executor: str = "thread",
    ray_address: str | None = None,
    ray_task_cpus: float = 1.0,
    rate_limit: RateLimit | None = None,
) -> BatchSummary:
    """Run one spec over many inputs, at most `concurrency` at a time; blocks until done.

    Every input becomes a run sharing one `batch_id`, keyed in the store by its position
    in `inputs`. The spec and every input are validated before the first run starts.
    Setting `stop_event` stops the running runs (`interrupted`) and starts no more.

    `executor="thread"` (the default) runs the inputs on threads of this process.
    `executor="process"` runs them on worker processes of this machine, one per core with
    the concurrency split between them as threads (see `rubric_core.batch.processes`):
    what a batch needs to use more than one core; `model_factory` must then be picklable.
    `executor="ray"` makes each input a Ray task on the cluster at `ray_address`, which
    opens the store from its URL and records into it, so the store must be PostgreSQL
    (see `rubric_core.batch.ray_cluster`); Ray retries a task whose worker died, and the
    retried task continues the input's grading run from the checkpointer.

    Args:
        store: The store the runs are recorded in.
        spec_template: The spec every run uses; its `input` is replaced per run.
        inputs: One input per run (see `load_dataset`); resuming, the same list again.
        concurrency: Runs executing at once, 1..`MAX_CONCURRENCY` (see `validate_concurrency`).
        progress: `progress(finished, total, run_row)` after each run (from a worker thread
            for threads, from this thread for Ray); a resumed batch counts from the inputs
            already finished.
        stop_event: Set it to stop the batch.
        model_factory: Builds fresh model instances per run (default: `resolve_model`);
            with Ray it is pickled to the workers.
        batch_id: Use this id instead of a new one (required with `resume`).
        resume: Continue batch `batch_id`: inputs already finished
            (`Store.finished_inputs`) are skipped, interrupted ones continue their run.
        executor: One of `EXECUTORS`.
        ray_address: The Ray head node (`HOST:PORT`); default `$RUBRIC_STUDIO_RAY_ADDRESS`.
        ray_task_cpus: CPUs each Ray task reserves (fractions let a node run several).
        rate_limit: Requests and tokens per minute per endpoint, shared by every run of the
            batch on any executor (see `rubric_core.batch.limits`); `None`: unpaced.

    Raises:
        SpecError: The spec, `concurrency`, an input, `executor` or `batch_id` is invalid.
        RayUnavailable: The Ray cluster does not answer or cannot run the batch (Ray only).

    Examples:
        >>> summary = run_batch(store, spec, load_dataset("prompts.csv"))  # doctest: +SKIP
        >>> summary.satisfied_rate  # doctest: +SKIP
        0.75
        >>> run_batch(store, spec, inputs, batch_id=summary.batch_id, resume=True)  # doctest: +SKIP
    """
    inputs = list(inputs)
    concurrency = validate_batch(store, spec_template, inputs, concurrency)
    executor = check_executor(executor)
    batch_id, pending = pending_inputs(store, batch_id, len(inputs), resume=resume)
    shared: dict[str, Any] = {
        "batch_id": batch_id,
        "concurrency": concurrency,
        "progress": progress,
        "stop": stop_event or threading.Event(),
        "model_factory": model_factory,
        "rate_limit": rate_limit,
    }
    if executor == "ray":
        run_on_ray(
            store,
            spec_template,
            inputs,
            pending,
            address=ray_address,
            task_cpus=ray_task_cpus,
            **shared,
        )
    elif executor == "process":
        run_in_processes(store, spec_template, inputs, pending, **shared)
    else:
        run_in_threads(store, spec_template, inputs, pending, **shared)
    return summary_for_batch(store, batch_id)
