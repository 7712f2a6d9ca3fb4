"""Resuming a stopped run: the same grading run continued from its last checkpoint."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rubric_core.runs.execute import launch
from rubric_core.runs.handle import RunHandle
from rubric_core.runs.prepare import assemble, continue_from_checkpoint, release
from rubric_core.runs.recording import EvaluationListener
from rubric_core.runs.spec import SpecError, spec_from_run
from rubric_core.runs.validate import validate_spec
from rubric_core.schema import GRADED_KIND
from rubric_core.store.errors import StoreError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = ["resume_run"]

logger = logging.getLogger(__name__)

_RESUMABLE_STATUSES = ("interrupted", "error")
"""A run in one of these can be resumed; a running one is someone's, a final one is over."""


def _resumable_run(store: Store, run_id: int) -> dict[str, Any]:
    try:
        run = store.runs.get(run_id)
    except StoreError as exc:
        raise SpecError("run_id", f"no run with id {run_id}") from exc
    if run["status"] not in _RESUMABLE_STATUSES:
        raise SpecError(
            "run_id", f"run {run_id} is {run['status']!r}; only interrupted runs resume"
        )
    if run.get("agent_kind") == GRADED_KIND:
        batch = run.get("batch_id")
        how = (
            f"`grade --input-file FILE --rubric RUBRIC --grader MODEL --resume {batch}` "
            "with the same file"
            if batch
            else "grade its output again"
        )
        raise SpecError(
            "run_id", f"run {run_id} is a grade-only run (no agent to resume); continue it: {how}"
        )
    if not run.get("thread_id"):
        raise SpecError("run_id", f"run {run_id} has no checkpoint thread to resume")
    return run


def resume_run(
    store: Store,
    run_id: int,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    on_evaluation: EvaluationListener | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> RunHandle:
    """Continue an `interrupted` (or `error`) run from its last checkpoint.

    The agent is rebuilt from the stored spec and invoked with `None` on the same
    LangGraph thread, so the same grading run goes on: passes already stored keep
    their iterations and new passes follow them. Replay models are fast-forwarded
    past the turns the stored part of the run consumed.

    Args:
        store: The store the run is recorded in.
        run_id: The run to continue.
        base_url: The OpenAI-compatible endpoint the run used (it is not stored).
        api_key: The key for `base_url` or the provider (it is not stored).
        on_evaluation: Called (on the run's thread) after each new pass is committed.
        agent_llm: A model instance to use instead of resolving the stored agent model.
        grader_llm: A model instance to use instead of resolving the stored grader model.

    Raises:
        SpecError: The run does not exist, is still running or finished cleanly,
            or has no checkpoint to resume from.

    Examples:
        >>> resume_run(store, 12).wait(60)  # doctest: +SKIP
        True
    """
    run = _resumable_run(store, run_id)
    spec = spec_from_run(run, base_url=base_url, api_key=api_key)
    validate_spec(spec, store)
    stored = store.passes.of_run(run_id)
    prepared = assemble(
        store,
        spec,
        RunHandle(store, run_id, run["thread_id"]),
        None,
        on_evaluation=on_evaluation,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    try:
        if not continue_from_checkpoint(prepared, stored):
            raise SpecError("run_id", f"run {run_id} has no checkpoint to resume from")
        if run.get("error"):
            logger.warning("resuming run %s, which had stopped with: %s", run_id, run["error"])
        store.runs.resume(run_id)
    except BaseException:
        release(prepared)
        raise
    return launch(store, prepared)
