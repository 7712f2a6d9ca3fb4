"""What every executor of a batch shares: its callbacks, checking it, one input's run, stopping.

The thread, process and Ray executors (`threads`, `processes`, `ray_cluster`) and the
worker side of the out-of-process ones (`worker`) all import this module and nothing of
each other, so the batch package has no import circle.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.runs.execute import execute_run
from rubric_core.runs.prepare import prepare_batch_run
from rubric_core.runs.spec import RunSpec, SpecError, check_input, validate_concurrency
from rubric_core.runs.validate import validate_spec

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = [
    "EXECUTORS",
    "ModelFactory",
    "ProgressCallback",
    "check_executor",
    "mark_interrupted",
    "new_batch_id",
    "pending_inputs",
    "run_batch_input",
    "validate_batch",
]

logger = logging.getLogger(__name__)

_PAGE = 500
"""Runs read from the store per query when marking a batch's runs."""

ProgressCallback = Callable[[int, int, dict[str, Any]], None]
"""`progress(finished, total, run_row)`, called once per finished run."""

ModelFactory = Callable[[RunSpec], tuple["BaseChatModel", "BaseChatModel"]]
"""`factory(spec) -> (agent_model, grader_model)`: fresh instances for one run."""

EXECUTORS = ("thread", "process", "ray")
"""Where a batch's runs execute: threads of this process, worker processes of this machine
(one per core, threads in each), or tasks on a Ray cluster."""


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


def check_executor(executor: object) -> str:
    """`executor` if it is one of `EXECUTORS`, else a `SpecError` naming the choices."""
    if executor not in EXECUTORS:
        *others, last = (repr(name) for name in EXECUTORS)
        choices = f"{', '.join(others)} or {last}"
        raise SpecError("executor", f"must be {choices}, got {executor!r}")
    return str(executor)


def pending_inputs(
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
