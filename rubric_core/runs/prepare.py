"""Preparing a run: its row, its agent and its recorder, or a batch input's stored run taken over.

A prepared run has not started; `execute.execute_run` runs it on the caller's thread and
`execute.launch` on a thread of its own. A run continued from its checkpoint (taken over
here, or resumed by `resume`) first brings fresh replay models up to that checkpoint.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.messages import is_grader_feedback
from rubric_core.providers import ReplayChatModel
from rubric_core.runs.agents import build_agent, resolve_models, run_config
from rubric_core.runs.checkpoints import CHECKPOINTERS, checkpoint_path
from rubric_core.runs.handle import RunHandle
from rubric_core.runs.recording import (
    EvaluationListener,
    error_text,
    make_recorder,
    verdicts_kept_for_failed_steps,
)
from rubric_core.runs.shared import SharedAgent, shared_agent
from rubric_core.runs.spec import RunSpec
from rubric_core.runs.validate import validate_spec
from rubric_core.store import NewRun, RunEnd

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = [
    "PreparedRun",
    "assemble",
    "continue_from_checkpoint",
    "prepare_batch_run",
    "prepare_run",
    "release",
]


_TAKE_OVER_STATUSES = ("running", "interrupted")
"""A batch input's stored run in one of these is continued; any other status is final."""


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to execute; it holds one checkpointer reference until `execute_run` ends."""

    handle: RunHandle
    """The run's handle."""

    agent: Any
    """The compiled agent graph."""

    agent_input: dict[str, Any] | None
    """What the agent is invoked with; `None` continues the checkpointed thread."""

    checkpoint_path: str
    """The checkpoint file whose saver this run holds."""

    agent_llm: BaseChatModel
    """The agent's model instance."""

    grader_llm: BaseChatModel | None
    """The grader's model instance."""

    shared: SharedAgent | None = None
    """The spec's shared agent this run is attached to (`None`: an agent of its own)."""


def assemble(
    store: Store,
    spec: RunSpec,
    handle: RunHandle,
    agent_input: dict[str, Any] | None,
    *,
    on_evaluation: EvaluationListener | None,
    agent_llm: BaseChatModel | None,
    grader_llm: BaseChatModel | None,
) -> PreparedRun:
    """Models, checkpointer and agent of a run; new runs and resumed runs both come here.

    Without model instances from the caller the run goes through its spec's shared agent
    (`runs.shared`), built once per spec in this process."""
    recorder = make_recorder(store, handle.run_id, on_evaluation, handle.note_record_failure)
    if agent_llm is None and grader_llm is None:
        path = checkpoint_path(store)
        checkpointer = CHECKPOINTERS.acquire(path, store)
        try:
            shared = shared_agent(spec, checkpointer)
        except BaseException:
            CHECKPOINTERS.release(path)
            raise
        shared.attach(handle.thread_id, recorder, handle.stop_event)
        return PreparedRun(
            handle,
            shared.agent,
            agent_input,
            path,
            shared.agent_llm,
            shared.grader_llm,
            shared,
        )
    if agent_llm is None or grader_llm is None:
        resolved_agent, resolved_grader = resolve_models(spec)
        agent_llm = agent_llm if agent_llm is not None else resolved_agent
        grader_llm = grader_llm if grader_llm is not None else resolved_grader
    path = checkpoint_path(store)
    checkpointer = CHECKPOINTERS.acquire(path, store)
    try:
        agent = build_agent(
            spec,
            checkpointer=checkpointer,
            on_evaluation=recorder,
            stop_event=handle.stop_event,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
    except BaseException:
        CHECKPOINTERS.release(path)
        raise
    return PreparedRun(handle, agent, agent_input, path, agent_llm, grader_llm)


def release(prepared: PreparedRun) -> None:
    """The run is done with its agent and its checkpointer."""
    if prepared.shared is not None:
        prepared.shared.detach(prepared.handle.thread_id)
    CHECKPOINTERS.release(prepared.checkpoint_path)


def _create_run(
    store: Store, spec: RunSpec, batch_id: str | None, input_index: int | None
) -> tuple[int, str]:
    """Store a spec's run row; `(run_id, thread_id)`, the row's own thread for an existing one.

    The row's commit is not fsynced on its own (`durable=False`): the run's first graded
    pass, fsynced before the loop goes on, flushes it with itself, and so does its end
    if it ends before a pass. One fsync less per run; a power cut before the first pass
    can lose only a row with nothing graded (a batch input then starts again)."""
    thread_id = f"run-{uuid.uuid4().hex}"
    run_id = store.runs.create(
        NewRun(
            rubric_version_id=spec.rubric_version_id,
            input=spec.input,
            agent_model=spec.agent_model,
            grader_model=spec.grader_model,
            grader_tools=list(spec.grader_tools),
            max_iterations=spec.max_iterations,
            agent_kind=spec.agent_kind,
            agent_system_prompt=spec.agent_system_prompt,
            grader_system_prompt=spec.grader_system_prompt,
            thread_id=thread_id,
            batch_id=batch_id,
            input_index=input_index,
            keep=spec.keep,
        ),
        durable=False,
    )
    return run_id, thread_id


def _prepare_created(
    store: Store,
    spec: RunSpec,
    handle: RunHandle,
    *,
    on_evaluation: EvaluationListener | None,
    agent_llm: BaseChatModel | None,
    grader_llm: BaseChatModel | None,
) -> PreparedRun:
    """The agent of a run row just created; if it cannot be built the row ends `error`."""
    version = store.rubrics.version(spec.rubric_version_id)
    agent_input = {"messages": [HumanMessage(spec.input)], "rubric": version["text"]}
    try:
        return assemble(
            store,
            spec,
            handle,
            agent_input,
            on_evaluation=on_evaluation,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
    except Exception as exc:
        store.runs.finish(handle.run_id, RunEnd(status="error", error=error_text(exc)))
        raise


def prepare_run(
    store: Store,
    spec: RunSpec,
    *,
    batch_id: str | None = None,
    on_evaluation: EvaluationListener | None = None,
    stop_event: threading.Event | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
    validate: bool = True,
) -> PreparedRun:
    """Create a spec's run row and build its agent; `execute_run` then runs it.

    The arguments are `start_run`'s (which is this, then `execute_run` on a thread),
    plus `validate=False` for a caller that has validated the spec already (a batch).

    Raises:
        SpecError: The spec is invalid; nothing was created.
        Exception: Building the agent failed; the run row is stored as `error`.
    """
    if validate:
        validate_spec(spec, store)
    run_id, thread_id = _create_run(store, spec, batch_id, None)
    return _prepare_created(
        store,
        spec,
        RunHandle(store, run_id, thread_id, stop_event),
        on_evaluation=on_evaluation,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )


def prepare_batch_run(
    store: Store,
    spec: RunSpec,
    *,
    batch_id: str,
    input_index: int,
    stop_event: threading.Event | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> PreparedRun | None:
    """The run of input `input_index` of a batch, new or taken over; `None` if it is final.

    The store keys batch runs by `(batch_id, input_index)`, so this is safe to repeat:
    a Ray task retried after its worker died, or a resumed batch, finds the input's run
    and continues it. A `running` or `interrupted` run is taken over (`Store.runs.resume`)
    and continues its checkpointed LangGraph thread, the same grading run, so the passes
    already stored are not graded again (and, recorded idempotently, never stored
    twice); one that never reached its first checkpoint starts over on the same thread.
    Any other status means the input is done: `None`.

    The spec is not validated here (the batch validated it before its first run).

    Raises:
        Exception: Building the agent failed; a new run row is stored as `error`.
    """
    run_id, thread_id = _create_run(store, spec, batch_id, input_index)
    row = store.runs.get(run_id)
    created = row.get("thread_id") == thread_id  # else the input had a run already
    if not created and (row["status"] not in _TAKE_OVER_STATUSES or not row.get("thread_id")):
        return None
    prepared = _prepare_created(
        store,
        spec,
        RunHandle(store, run_id, str(row["thread_id"]), stop_event),
        on_evaluation=None,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    if created:
        return prepared
    stored = store.passes.of_run(run_id)
    try:
        if continue_from_checkpoint(prepared, stored):
            prepared = dataclasses.replace(prepared, agent_input=None)
        store.runs.resume(run_id)
    except BaseException:
        release(prepared)
        raise
    return prepared


def _fast_forward(
    model: BaseChatModel | None, consumed: int, *, verdicts_only: bool, thread_id: str
) -> None:
    """Skip what the stored part of a run used of a replay model's script (others: nothing)."""
    if isinstance(model, ReplayChatModel):
        model.fast_forward(consumed, verdicts_only=verdicts_only, thread_id=thread_id)


def continue_from_checkpoint(prepared: PreparedRun, stored: Sequence[Mapping[str, Any]]) -> bool:
    """Bring fresh replay models up to the thread's checkpoint; `False` if it has none.

    A resumed run gets fresh replay models whose scripts start at turn 0: the agent's
    skips the answers already in the checkpoint, the grader's the attempts of the stored
    passes the checkpoint holds. A pass stored just before the process died, but not yet
    in a checkpoint, is graded again on resume (and stored again under its iteration), so
    its attempts are not skipped: the script replays that pass's verdict, not the next.
    """
    snapshot = prepared.agent.get_state(run_config(prepared.handle.thread_id))
    if not snapshot.values:
        return False
    in_checkpoint = len(snapshot.values.get("_rubric_evaluations") or [])
    grader_attempts = sum(
        int(e.get("grader_attempts") or 1) for e in stored if int(e["iteration"]) < in_checkpoint
    )
    messages = snapshot.values.get("messages") or []
    answers = sum(1 for m in messages if isinstance(m, AIMessage) and not is_grader_feedback(m))
    thread = prepared.handle.thread_id
    _fast_forward(prepared.agent_llm, answers, verdicts_only=False, thread_id=thread)
    kept = verdicts_kept_for_failed_steps(prepared.agent, thread, snapshot.tasks)
    _fast_forward(prepared.grader_llm, grader_attempts + kept, verdicts_only=True, thread_id=thread)
    return True
