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

from rubric_core.runs.execute import execute_run, prepare_run
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
    "BatchSummary",
    "ModelFactory",
    "ProgressCallback",
    "format_rate",
    "run_batch",
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
    total = store.count_runs(batch_id=batch_id)
    runs: list[dict[str, Any]] = []
    while len(runs) < total:
        chunk = store.list_runs(batch_id=batch_id, limit=_PAGE, offset=len(runs))
        if not chunk:
            break
        runs.extend(chunk)
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
) -> BatchSummary:
    """Run one spec over many inputs, at most `concurrency` at a time; blocks until done.

    Every input becomes a run sharing one `batch_id`. The spec and every input are
    validated before the first run starts. Setting `stop_event` stops the running
    runs (`interrupted`) and starts no more.

    Args:
        store: The store the runs are recorded in.
        spec_template: The spec every run uses; its `input` is replaced per run.
        inputs: One input per run (see `load_dataset`).
        concurrency: Runs executing at once, 1..`MAX_CONCURRENCY` (see `validate_concurrency`).
        progress: `progress(finished, total, run_row)` after each run (from a worker thread).
        stop_event: Set it to stop the batch.
        model_factory: Builds fresh model instances per run (default: `resolve_model`).
        batch_id: Use this id instead of a new one.

    Raises:
        SpecError: The spec, `concurrency` or one of the inputs is invalid (`validate_batch`).

    Examples:
        >>> summary = run_batch(store, spec, load_dataset("prompts.csv"))  # doctest: +SKIP
        >>> summary.satisfied_rate  # doctest: +SKIP
        0.75
    """
    inputs = list(inputs)
    concurrency = validate_batch(store, spec_template, inputs, concurrency)
    batch_id = batch_id or f"batch-{uuid.uuid4().hex[:16]}"
    stop = stop_event or threading.Event()
    lock = threading.Lock()
    finished = 0
    total = len(inputs)

    def one(text: str) -> None:
        nonlocal finished
        if stop.is_set():
            return
        spec = spec_template.with_input(text)
        agent_llm = grader_llm = None
        if model_factory is not None:
            agent_llm, grader_llm = model_factory(spec)
        try:
            prepared = prepare_run(
                store,
                spec,
                batch_id=batch_id,
                stop_event=stop,
                agent_llm=agent_llm,
                grader_llm=grader_llm,
                validate=False,
            )
        except Exception:
            logger.exception("batch %s: a run could not start", batch_id)
            return
        execute_run(store, prepared)
        if progress is not None:
            with lock:
                finished += 1
                count = finished
            try:
                progress(count, total, store.get_run(prepared.handle.run_id))
            except Exception:
                logger.exception("batch %s: progress callback raised", batch_id)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rubric-batch") as pool:
        futures = [pool.submit(one, text) for text in inputs]
        for future in futures:
            future.result()
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
