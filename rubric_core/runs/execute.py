"""Executing a prepared run: on the caller's thread (`execute_run`, `run_once`) or its own (`start_run`).

The run's end is stored whatever happens: its status, the draft it hands back, usage, and
an error that names what broke. Resuming a stopped run is `resume`, on top of this module.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage

from rubric_core.errors import PassNotRecorded
from rubric_core.messages import final_answer, is_grader_feedback
from rubric_core.runs.agents import (
    RUN_DURABILITY,
    StopRun,
    run_config,
)
from rubric_core.runs.handle import RunHandle
from rubric_core.runs.prepare import PreparedRun, prepare_run, release
from rubric_core.runs.recording import (
    EvaluationListener,
    error_text,
    make_recorder,
    store_missing_passes,
    store_run_end,
)
from rubric_core.runs.spec import RunSpec

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = [
    "RunHandle",
    "execute_run",
    "launch",
    "make_recorder",
    "run_once",
    "start_run",
]

logger = logging.getLogger(__name__)


def _best(values: Mapping[str, Any]) -> tuple[int | None, float | None]:
    """The pass a `keep="best"` run handed back and its score, from the final state.

    Examples:
        >>> _best({"_rubric_best_iteration": 1, "_current_grading_run_id": "g",
        ...        "_rubric_evaluations": [{"grading_run_id": "g", "iteration": 1, "score": 0.5}]})
        (1, 0.5)
        >>> _best({})
        (None, None)
    """
    best = values.get("_rubric_best_iteration")
    if not isinstance(best, int):
        return None, None
    run = values.get("_current_grading_run_id")
    for evaluation in reversed(values.get("_rubric_evaluations") or []):
        if evaluation.get("grading_run_id") == run and evaluation.get("iteration") == best:
            return best, evaluation.get("score")
    return best, None


def _agent_usage(messages: Iterable[BaseMessage]) -> tuple[int, int]:
    """Input and output tokens of the agent's own model calls (grader calls excluded)."""
    tokens_in = tokens_out = 0
    for message in messages:
        if not isinstance(message, AIMessage) or is_grader_feedback(message):
            continue
        usage = message.usage_metadata
        if usage is not None:
            tokens_in += int(usage.get("input_tokens") or 0)
            tokens_out += int(usage.get("output_tokens") or 0)
    return tokens_in, tokens_out


def _from_checkpointer(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) was raised inside LangGraph's checkpoint saver."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame, _ in traceback.walk_tb(current.__traceback__):
            name = frame.f_code.co_filename.replace("\\", "/")
            if "/langgraph/checkpoint/" in name:
                return True
        current = current.__cause__ or current.__context__
    return False


def _failure_text(store: Store, run_id: int, exc: BaseException) -> str:
    """The stored error of a run the agent's invoke ended with `exc`: the exception; for a
    fault of the run's checkpoint store (a full disk under the checkpoint file, a lost
    server), which store it was and after which grading pass, as for the store itself."""
    text = error_text(exc)
    if not _from_checkpointer(exc):
        return text
    from rubric_core.runs.checkpoints import checkpoint_path
    from rubric_core.store.paths import redact_url

    where = redact_url(checkpoint_path(store))
    after = "after its last stored grading pass"
    if not store.is_postgres:  # on PostgreSQL the store is on the failed server too: no wait
        with contextlib.suppress(Exception):
            passes = len(store.passes.of_run(run_id))
            after = f"after grading pass {passes}" if passes else "before the first grading pass"
    return (
        f"the run's checkpoint store {where} failed {after} ({text}); every pass graded "
        f"until then is stored; fix the checkpoint store (free the disk, reach the server), "
        f"then `resume {run_id}`"
    )


# --------------------------------------------------------------------------- executing


def execute_run(store: Store, prepared: PreparedRun) -> None:
    """Invoke the agent to the end and store the transcript and terminal status.

    Never raises for a failing agent or store: the outcome is the stored status and
    `handle.error`. Releases the run's checkpointer and marks the handle finished.
    """
    handle, agent = prepared.handle, prepared.agent
    config = run_config(handle.thread_id, handle.run_id)
    status: str = "error"
    error: str | None = None
    values: dict[str, Any] = {}
    try:
        try:
            result = agent.invoke(prepared.agent_input, config, durability=RUN_DURABILITY)
            values = dict(result or {})
            if "_rubric_status" not in values:  # the output lacks the loop's state: read it
                with contextlib.suppress(Exception):
                    values = {**values, **agent.get_state(config).values}
            status = values.get("_rubric_status") or "error"
            if status == "error":
                error = "the agent finished without a grading pass"
        except StopRun:
            status = "interrupted"
        except PassNotRecorded as exc:  # the recorder stopped the loop; it said why
            status, error = "error", str(exc)
        except Exception as exc:  # any failure of the agent or its models ends the run
            if handle.stop_requested and isinstance(exc.__cause__, StopRun):
                status = "interrupted"
            else:
                status, error = "error", _failure_text(store, handle.run_id, exc)
                logger.warning("run %s failed: %s", handle.run_id, error)
        if not values:
            with contextlib.suppress(Exception):
                values = dict(agent.get_state(config).values)
        unstored = store_missing_passes(store, handle.run_id, values)
        if unstored is not None and error is None:
            status, error = "error", unstored
        messages: list[BaseMessage] = list(values.get("messages") or [])
        failures = handle.record_failures
        if failures and status != "error":
            status, error = "error", failures[0]
        tokens_in, tokens_out = _agent_usage(messages)
        best_iteration, best_score = _best(values)
        end = {
            "final_output": final_answer(messages, skip_empty=True),
            "agent_input_tokens": tokens_in,
            "agent_output_tokens": tokens_out,
            "best_iteration": best_iteration,
            "score": best_score,
        }
        try:
            status, error = store_run_end(store, handle, messages, status, error, end)
        except Exception as exc:
            prefix = f"{handle.error}; " if handle.error else ""
            handle.error = f"{prefix}its end ({status}) could not be stored: {error_text(exc)}"
            raise
        handle.final_status = status
    except Exception:  # the store itself failed; keep the handle truthful
        handle.final_status = "error"
        if handle.error is None:
            handle.error = "the run could not be finished in the store"
        logger.exception("run %s could not be finished in the store", handle.run_id)
    finally:
        release(prepared)
        handle.mark_finished()


def launch(store: Store, prepared: PreparedRun) -> RunHandle:
    thread = threading.Thread(
        target=execute_run,
        args=(store, prepared),
        name=f"rubric-run-{prepared.handle.run_id}",
        daemon=True,
    )
    thread.start()
    return prepared.handle


def start_run(
    store: Store,
    spec: RunSpec,
    *,
    batch_id: str | None = None,
    on_evaluation: EvaluationListener | None = None,
    stop_event: threading.Event | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> RunHandle:
    """Validate a spec, create its run row and execute it on a background thread.

    Every grading pass is committed to the store as it is graded; the run ends
    with its rubric status, `error` (the agent raised) or `interrupted` (stopped).

    Args:
        store: The store the run is recorded in.
        spec: What to run.
        batch_id: Groups runs of one batch.
        on_evaluation: Called (on the run's thread) after each pass is committed.
        stop_event: An event that stops the run when set (`RunHandle.stop()` sets it too).
        agent_llm: A model instance to use instead of resolving `spec.agent_model`.
        grader_llm: A model instance to use instead of resolving `spec.grader_model`.

    Raises:
        SpecError: The spec is invalid; nothing was created.

    Examples:
        >>> handle = start_run(store, spec)  # doctest: +SKIP
        >>> handle.wait(); store.runs.get(handle.run_id)["status"]  # doctest: +SKIP
        'satisfied'
    """
    prepared = prepare_run(
        store,
        spec,
        batch_id=batch_id,
        on_evaluation=on_evaluation,
        stop_event=stop_event,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    return launch(store, prepared)


def run_once(
    store: Store,
    spec: RunSpec,
    *,
    on_evaluation: EvaluationListener | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Run a spec to the end on the calling thread; returns `store.runs.get(run_id)`.

    Examples:
        >>> run_once(store, spec)["status"]  # doctest: +SKIP
        'satisfied'
    """
    prepared = prepare_run(
        store, spec, on_evaluation=on_evaluation, agent_llm=agent_llm, grader_llm=grader_llm
    )
    execute_run(store, prepared)
    return store.runs.get(prepared.handle.run_id)
