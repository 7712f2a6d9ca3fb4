"""What every executor of a job shares: its units, how they are driven, stopping.

A job's work is cut into units, numbered from 0 (a batch's inputs, a grade's rows, a
re-grade's gradings); an executor (`threads`, `processes`, `ray_cluster`, and the worker
side of the out-of-process ones, `worker`) runs the pending ones through `Units.run_unit`
and nothing else, so every kind of job runs on every executor. All of them import this
module and nothing of each other, so the batch package has no import circle.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rubric_core.batch.job import EXECUTORS, ModelFactory, check_executor
from rubric_core.runs.execute import execute_run
from rubric_core.runs.prepare import prepare_batch_run
from rubric_core.runs.spec import SpecError
from rubric_core.runs.validate import validate_spec
from rubric_core.store import RunEnd

if TYPE_CHECKING:
    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.runs.spec import RunSpec
    from rubric_core.store import Store

__all__ = [
    "EXECUTORS",
    "BatchInputs",
    "Drive",
    "ModelFactory",
    "ProgressCallback",
    "Units",
    "check_executor",
    "mark_interrupted",
    "new_batch_id",
    "pending_inputs",
    "report_progress",
    "run_batch_input",
    "validate_batch",
]

logger = logging.getLogger(__name__)

_PAGE = 500
"""Runs read from the store per query when marking a batch's runs."""

ProgressCallback = Callable[[int, int, dict[str, Any]], None]
"""`progress(finished, total, row)`, called once per finished unit (for a batch or a
grade the unit's run row; for a re-grade the experiment item)."""


class Units(Protocol):
    """A job's work made ready, cut into units `0..total-1`; picklable for the workers."""

    @property
    def batch_id(self) -> str:
        """What the job's runs are stored under (`mark_interrupted` on a stop), its logs' name."""
        ...

    @property
    def factory_field(self) -> str:
        """The field holding the caller's code (a factory): named when it cannot be pickled."""
        ...

    @property
    def total(self) -> int:
        """How many units the job has."""
        ...

    def run_unit(
        self, store: Store, index: int, stop_event: threading.Event
    ) -> dict[str, Any] | None:
        """Do unit `index` into `store`; the row to report (`None`: it did not run).

        Doing it again for a unit that was cut short continues it, and does nothing for a
        finished one: resuming and a retried Ray task rely on that. Never raises for a
        unit that fails: the outcome is what it stored."""
        ...


@dataclass(frozen=True)
class Drive:
    """How an executor drives a job's units; the same for every executor."""

    concurrency: int
    """Units at once."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set: running units stop (runs end `interrupted`), no more start."""
    progress: ProgressCallback | None = None
    rate_limit: RateLimit | None = None
    """One budget for every unit of the job (see `batch.limits`); `None`: unpaced."""


def report_progress(
    drive: Drive, finished: int, total: int, row: dict[str, Any], batch_id: str
) -> None:
    """Call the job's progress callback; one that raises is logged, the job goes on."""
    if drive.progress is None:
        return
    try:
        drive.progress(finished, total, row)
    except Exception:
        logger.exception("batch %s: progress callback raised", batch_id)


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

    Every executor runs each input through this: a thread of this process, of a worker
    process, or a Ray worker on another machine. Repeating it for the same
    `(batch_id, index)` continues the input's stored run rather than starting another
    (`prepare_batch_run`), and does nothing once that run is final. Never raises for a
    run that fails: the outcome is its stored status.
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


@dataclass(frozen=True)
class BatchInputs:
    """The units of a batch: input `index` run with `spec_template` (`run_batch_input`)."""

    spec_template: RunSpec
    inputs: tuple[str, ...]
    batch_id: str
    model_factory: ModelFactory | None = None
    factory_field: str = "model_factory"

    @property
    def total(self) -> int:
        return len(self.inputs)

    def run_unit(
        self, store: Store, index: int, stop_event: threading.Event
    ) -> dict[str, Any] | None:
        run_id = run_batch_input(
            store,
            self.spec_template,
            batch_id=self.batch_id,
            index=index,
            text=self.inputs[index],
            stop_event=stop_event,
            model_factory=self.model_factory,
        )
        return None if run_id is None else store.runs.get(run_id)


def validate_batch(store: Store, spec_template: RunSpec, inputs: tuple[str, ...]) -> None:
    """Check a batch's spec against the store with its first input (as `validate_spec`
    does for one run); the inputs themselves were checked when the `Job` was built.

    Raises:
        SpecError: Naming a spec field.
    """
    validate_spec(spec_template.with_input(inputs[0]), store)


def new_batch_id() -> str:
    """A fresh batch id (`batch-` and 16 hex digits): the one a batch job makes when given none.

    A caller that must name the batch before it ends (the CLI, to stop it and summarise
    it after a Ctrl-C) makes it here and passes it as `Job(batch_id=...)`.

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
    over it. Resuming the batch (`Job(batch_id=..., resume=True)`) continues these runs.
    """
    if indexes is not None and not indexes:
        return 0
    running: list[dict[str, Any]] = []
    while chunk := store.runs.find(
        batch_id=batch_id, status="running", limit=_PAGE, offset=len(running)
    ):
        running.extend(chunk)
    marked = 0
    for run in running:
        if indexes is None or run.get("input_index") in indexes:
            try:
                store.runs.finish(int(run["id"]), RunEnd(status="interrupted", error=reason))
                marked += 1
            except Exception:
                logger.exception("batch %s: could not mark run %s interrupted", batch_id, run["id"])
    return marked


def pending_inputs(
    store: Store, batch_id: str | None, total: int, *, resume: bool
) -> tuple[str, list[int]]:
    """The batch id to use and the input indexes still to run (all but finished ones)."""
    if not resume:
        return batch_id or new_batch_id(), list(range(total))
    if not batch_id:
        raise SpecError("batch_id", "resuming a batch needs the batch_id of the one to resume")
    if store.runs.count(batch_id=batch_id) == 0:
        raise SpecError("batch_id", f"no batch {batch_id!r} in the store to resume")
    finished = store.runs.finished_inputs(batch_id)
    return batch_id, [index for index in range(total) if index not in finished]
