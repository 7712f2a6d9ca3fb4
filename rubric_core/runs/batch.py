"""Batches: one spec over many inputs, a bounded number at a time, and their summary."""

from __future__ import annotations

import logging
import math
import statistics
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.runs.execute import execute_run, prepare_batch_run
from rubric_core.runs.spec import (
    RunSpec,
    SpecError,
    check_input,
    validate_concurrency,
    validate_spec,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = [
    "EXECUTORS",
    "BatchSummary",
    "ModelFactory",
    "ProgressCallback",
    "format_rate",
    "mark_interrupted",
    "new_batch_id",
    "run_batch",
    "run_batch_input",
    "summary_for_batch",
    "validate_batch",
]

logger = logging.getLogger(__name__)

_PAGE = 500
"""Runs read from the store per query when summarising a batch."""

ProgressCallback = Callable[[int, int, dict[str, Any]], None]
"""`progress(finished, total, run_row)`, called once per finished run."""

ModelFactory = Callable[[RunSpec], tuple["BaseChatModel", "BaseChatModel"]]
"""`factory(spec) -> (agent_model, grader_model)`: fresh instances for one run."""

EXECUTORS = ("thread", "process", "ray")
"""Where a batch's runs execute: threads of this process, worker processes of this machine
(one per core, threads in each), or tasks on a Ray cluster."""


@dataclass(frozen=True)
class BatchSummary:
    """What a batch of runs over one rubric version came to, computed from the store."""

    batch_id: str
    """Shared by every run of the batch."""

    total: int
    """Runs in the batch (started so far, when it is still going)."""

    by_status: dict[str, int]
    """Number of runs per status (`running` included while the batch goes on)."""

    satisfied_rate: float
    """Share of the batch's *ended* runs that ended `satisfied`.

    The denominator is every run whose status is no longer `running`: `error`,
    `interrupted`, `grader_error`, `failed` and `max_iterations_reached` runs count
    against the rate; runs still going count for nothing yet. Once a batch is over
    this is satisfied / `total`; while it goes on it is the rate so far rather than
    one that rises as runs finish. 0.0 when no run has ended.
    """

    mean_iterations_to_satisfied: float | None
    """Mean grading passes the satisfied runs took; `None` if none was satisfied."""

    iterations_to_satisfied: dict[int, int]
    """Passes taken -> number of satisfied runs that took that many."""

    criterion_pass_rates: list[dict[str, Any]]
    """`{criterion, passed, total, pass_rate}` over every pass of the batch."""

    grader_errors: int
    """Runs that ended `grader_error` (their grader broke)."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    """`{run_id, input, error}` for runs that ended `error`."""

    scores: list[float] = field(default_factory=list)
    """The score of every scored run (the draft it handed back), in run order: the
    distribution the Batch page plots."""

    @property
    def mean_score(self) -> float | None:
        """Mean of `scores`; `None` when no run has a score yet.

        Examples:
            >>> BatchSummary("b", 2, {}, 0.0, None, {}, [], 0, scores=[0.5, 1.0]).mean_score
            0.75
        """
        return statistics.fmean(self.scores) if self.scores else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "batch_id": self.batch_id,
            "total": self.total,
            "by_status": dict(self.by_status),
            "satisfied_rate": self.satisfied_rate,
            "mean_iterations_to_satisfied": self.mean_iterations_to_satisfied,
            "iterations_to_satisfied": {str(k): v for k, v in self.iterations_to_satisfied.items()},
            "criterion_pass_rates": list(self.criterion_pass_rates),
            "grader_errors": self.grader_errors,
            "errors": list(self.errors),
            "mean_score": self.mean_score,
            "scores": list(self.scores),
        }


def _satisfied_rate(by_status: Counter[str]) -> float:
    """Satisfied runs over ended runs (see `BatchSummary.satisfied_rate`).

    Examples:
        >>> _satisfied_rate(Counter(satisfied=2, grader_error=1, running=1))
        0.6666666666666666
        >>> _satisfied_rate(Counter(running=3))
        0.0
    """
    ended = sum(count for status, count in by_status.items() if status != "running")
    return by_status.get("satisfied", 0) / ended if ended else 0.0


def summary_for_batch(store: Store, batch_id: str) -> BatchSummary:
    """Compute a batch's summary from the store (the CLI and the Batch page show this).

    Examples:
        >>> summary_for_batch(store, "batch-1a2b").satisfied_rate  # doctest: +SKIP
        0.75
    """
    runs = store.batch_runs(batch_id)
    by_status = Counter(str(run["status"]) for run in runs)
    satisfied_iterations = [int(run["iterations"]) for run in runs if run["status"] == "satisfied"]
    errors = [
        {"run_id": run["id"], "input": run.get("input", "")[:200], "error": run.get("error")}
        for run in runs
        if run["status"] == "error"
    ]
    mean = statistics.fmean(satisfied_iterations) if satisfied_iterations else None
    return BatchSummary(
        batch_id=batch_id,
        total=len(runs),
        by_status=dict(sorted(by_status.items())),
        satisfied_rate=_satisfied_rate(by_status),
        mean_iterations_to_satisfied=mean,
        iterations_to_satisfied=dict(sorted(Counter(satisfied_iterations).items())),
        criterion_pass_rates=list(store.criterion_pass_rates(batch_id=batch_id)),
        grader_errors=by_status.get("grader_error", 0),
        errors=errors,
        scores=[float(run["score"]) for run in runs if run.get("score") is not None],
    )


def validate_batch(
    store: Store, spec_template: RunSpec, inputs: Sequence[str], concurrency: object
) -> int:
    """Check a batch completely before any of its runs starts; returns the concurrency.

    The concurrency, then that there are inputs, then every input, then the spec
    (with the first input, as `validate_spec` does for one run).

    Raises:
        SpecError: Naming `concurrency`, `inputs`, `inputs[<index>]` or a spec field.

    Examples:
        >>> validate_batch(store, spec, ["fine", "  "], 4)  # doctest: +SKIP
        Traceback (most recent call last):
        SpecError: inputs[1]: is empty; give the agent something to do
    """
    checked = validate_concurrency(concurrency)
    if not inputs:
        raise SpecError("inputs", "the dataset has no inputs")
    for index, text in enumerate(inputs):
        check_input(text, f"inputs[{index}]")
    validate_spec(spec_template.with_input(inputs[0]), store)
    return checked


def run_batch_input(
    store: Store,
    spec_template: RunSpec,
    *,
    batch_id: str,
    index: int,
    text: str,
    stop_event: threading.Event,
    model_factory: ModelFactory | None = None,
) -> int | None:
    """Run input `index` of a batch to the end; returns its run id (`None`: it did not start).

    Both executors run each input through this: a thread of `run_batch`, or a Ray task on
    another machine. Repeating it for the same `(batch_id, index)` continues the input's
    stored run rather than starting another (`prepare_batch_run`), and does nothing once
    that run is final. Never raises for a run that fails: the outcome is its stored status.
    """
    if stop_event.is_set():
        return None
    spec = spec_template.with_input(text)
    agent_llm = grader_llm = None
    if model_factory is not None:
        agent_llm, grader_llm = model_factory(spec)
    try:
        prepared = prepare_batch_run(
            store,
            spec,
            batch_id=batch_id,
            input_index=index,
            stop_event=stop_event,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
    except Exception:
        logger.exception("batch %s: the run of input %d could not start", batch_id, index)
        return None
    if prepared is None:
        return None
    execute_run(store, prepared)
    return prepared.handle.run_id


def new_batch_id() -> str:
    """A fresh batch id (`batch-` and 16 hex digits): the one `run_batch` makes when given none.

    A caller that must name the batch before it ends (the CLI, to stop it and summarise
    it after a Ctrl-C) makes it here and passes it as `run_batch(batch_id=...)`.

    Examples:
        >>> new_batch_id().startswith("batch-"), len(new_batch_id())
        (True, 22)
    """
    return f"batch-{uuid.uuid4().hex[:16]}"


def mark_interrupted(
    store: Store, batch_id: str, reason: str, *, indexes: set[int] | None = None
) -> int:
    """End the batch's still-`running` runs as `interrupted` with `reason`; returns how many.

    `indexes` limits it to those inputs (default: every running run of the batch). A
    stopped batch calls this at once, so the store shows its in-flight runs as stopped
    while their workers wind down; a run's own end, when its worker gets there, is stored
    over it. Resuming the batch (`run_batch(..., resume=True)`) continues these runs.
    """
    if indexes is not None and not indexes:
        return 0
    running: list[dict[str, Any]] = []
    while chunk := store.list_runs(
        batch_id=batch_id, status="running", limit=_PAGE, offset=len(running)
    ):
        running.extend(chunk)
    marked = 0
    for run in running:
        if indexes is None or run.get("input_index") in indexes:
            try:
                store.finish_run(int(run["id"]), status="interrupted", error=reason)
                marked += 1
            except Exception:
                logger.exception("batch %s: could not mark run %s interrupted", batch_id, run["id"])
    return marked


def _check_executor(executor: object) -> str:
    if executor not in EXECUTORS:
        *others, last = (repr(name) for name in EXECUTORS)
        choices = f"{', '.join(others)} or {last}"
        raise SpecError("executor", f"must be {choices}, got {executor!r}")
    return str(executor)


def _pending_inputs(
    store: Store, batch_id: str | None, total: int, *, resume: bool
) -> tuple[str, list[int]]:
    """The batch id to use and the input indexes still to run (all but finished ones)."""
    if not resume:
        return batch_id or new_batch_id(), list(range(total))
    if not batch_id:
        raise SpecError("batch_id", "resuming a batch needs the batch_id of the one to resume")
    if store.count_runs(batch_id=batch_id) == 0:
        raise SpecError("batch_id", f"no batch {batch_id!r} in the store to resume")
    finished = store.finished_inputs(batch_id)
    return batch_id, [index for index in range(total) if index not in finished]


def _run_in_threads(
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
) -> None:
    lock = threading.Lock()
    finished = len(inputs) - len(pending)
    total = len(inputs)

    def one(index: int) -> None:
        nonlocal finished
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
) -> BatchSummary:
    """Run one spec over many inputs, at most `concurrency` at a time; blocks until done.

    Every input becomes a run sharing one `batch_id`, keyed in the store by its position
    in `inputs`. The spec and every input are validated before the first run starts.
    Setting `stop_event` stops the running runs (`interrupted`) and starts no more.

    `executor="thread"` (the default) runs the inputs on threads of this process.
    `executor="process"` runs them on worker processes of this machine, one per core with
    the concurrency split between them as threads (see `rubric_core.runs.process_batch`):
    what a batch needs to use more than one core; `model_factory` must then be picklable.
    `executor="ray"` makes each input a Ray task on the cluster at `ray_address`, which
    opens the store from its URL and records into it, so the store must be PostgreSQL
    (see `rubric_core.runs.ray_batch`); Ray retries a task whose worker died, and the
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
    executor = _check_executor(executor)
    batch_id, pending = _pending_inputs(store, batch_id, len(inputs), resume=resume)
    shared: dict[str, Any] = {
        "batch_id": batch_id,
        "concurrency": concurrency,
        "progress": progress,
        "stop": stop_event or threading.Event(),
        "model_factory": model_factory,
    }
    if executor == "ray":
        from rubric_core.runs.ray_batch import run_on_ray

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
        from rubric_core.runs.process_batch import run_in_processes

        run_in_processes(store, spec_template, inputs, pending, **shared)
    else:
        _run_in_threads(store, spec_template, inputs, pending, **shared)
    return summary_for_batch(store, batch_id)


def format_rate(value: float | None) -> str:
    """A rate as a percentage for people; `None` or NaN is `'n/a'`.

    Examples:
        >>> format_rate(2 / 3)
        '66.7%'
        >>> format_rate(None)
        'n/a'
    """
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value * 100:.1f}%"
