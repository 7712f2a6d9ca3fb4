"""Executing runs: the run handle, the recorder that commits each pass, start, run once, resume."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from rubric_core.errors import PassNotRecorded
from rubric_core.messages import final_answer, is_grader_feedback
from rubric_core.runs.agents import (
    RUN_DURABILITY,
    StopRun,
    build_agent,
    resolve_models,
    run_config,
)
from rubric_core.runs.checkpoints import CHECKPOINTERS, checkpoint_path
from rubric_core.runs.recording import (
    EvaluationListener,
    error_text,
    make_recorder,
    store_missing_passes,
    store_run_end,
    verdicts_kept_for_failed_steps,
)
from rubric_core.runs.shared import SharedAgent, shared_agent
from rubric_core.runs.spec import RunSpec, SpecError, spec_from_run, validate_spec

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.store import Store

__all__ = [
    "PreparedRun",
    "RunHandle",
    "execute_run",
    "make_recorder",
    "prepare_batch_run",
    "prepare_run",
    "resume_run",
    "run_once",
    "start_run",
]

logger = logging.getLogger(__name__)

_RESUMABLE_STATUSES = ("interrupted", "error")

_TAKE_OVER_STATUSES = ("running", "interrupted")
"""A batch input's stored run in one of these is continued; any other status is final."""


class RunHandle:
    """A run executing off the caller's thread.

    Progress is read from the store, the one thing the run and its watchers share.
    The executor drives the handle through `stop_event`, `note_record_failure` and
    `mark_finished`; watchers use the rest.

    Examples:
        >>> handle = start_run(store, spec)  # doctest: +SKIP
        >>> handle.wait(60); handle.status  # doctest: +SKIP
        'satisfied'
    """

    def __init__(
        self,
        store: Store,
        run_id: int,
        thread_id: str,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.run_id = run_id
        """Id of the run row."""
        self.thread_id = thread_id
        """LangGraph thread id; `resume_run` continues it."""
        self.error: str | None = None
        """The exception text if the agent raised (status `error`)."""
        self.final_status: str | None = None
        """The status the run ended with, once it ended; `error` when storing its end
        failed (the stored row may then still say `running`)."""
        self._store = store
        self._stop_event = stop_event if stop_event is not None else threading.Event()
        self._finished = threading.Event()
        self._record_failures: list[str] = []

    # ---------------------------------------------------------------- stopping

    @property
    def stop_event(self) -> threading.Event:
        """The event `stop()` sets; the agent's stop middleware watches it."""
        return self._stop_event

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was asked for (by `stop()` or by setting the shared event)."""
        return self._stop_event.is_set()

    def stop(self) -> None:
        """Ask the run to stop before its next agent model call; it ends `interrupted`.

        Passes already graded stay stored. Stopping a finished run does nothing.
        """
        self._stop_event.set()

    # ---------------------------------------------------------------- executor side

    def note_record_failure(self, message: str) -> None:
        """Note that a grading pass could not be stored; the run then ends `error` with it."""
        self._record_failures.append(message)

    @property
    def record_failures(self) -> tuple[str, ...]:
        """Why grading passes could not be stored, in order (empty when all were)."""
        return tuple(self._record_failures)

    def mark_finished(self) -> None:
        """Wake `wait()`ers: the run's terminal status is stored (or storing it failed)."""
        self._finished.set()

    # ---------------------------------------------------------------- watching

    def done(self) -> bool:
        """Whether the run has finished (its terminal status is stored)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run finishes or `timeout` seconds pass; returns `done()`."""
        return self._finished.wait(timeout)

    def run(self) -> dict[str, Any]:
        """The run's row as stored now (status, iterations, tokens, ...)."""
        return self._store.get_run(self.run_id)

    @property
    def status(self) -> str:
        """The run's latest status as stored (`running` until it ends)."""
        return str(self.run()["status"])

    @property
    def iteration(self) -> int:
        """Number of grading passes stored so far."""
        return len(self._store.run_evaluations(self.run_id))

    def latest_evaluation(self) -> dict[str, Any] | None:
        """The most recent stored grading pass, or `None` before the first."""
        evaluations = self._store.run_evaluations(self.run_id)
        return evaluations[-1] if evaluations else None


# --------------------------------------------------------------------------- helpers


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


# --------------------------------------------------------------------------- preparing


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

    grader_llm: BaseChatModel
    """The grader's model instance."""

    shared: SharedAgent | None = None
    """The spec's shared agent this run is attached to (`None`: an agent of its own)."""


def _assemble(
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


def _release(prepared: PreparedRun) -> None:
    """The run is done with its agent and its checkpointer."""
    if prepared.shared is not None:
        prepared.shared.detach(prepared.handle.thread_id)
    CHECKPOINTERS.release(prepared.checkpoint_path)


def _create_run(
    store: Store, spec: RunSpec, batch_id: str | None, input_index: int | None
) -> tuple[int, str]:
    """Store a spec's run row; `(run_id, thread_id)`, the row's own thread for an existing one."""
    thread_id = f"run-{uuid.uuid4().hex}"
    run_id = store.create_run(
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
    version = store.get_rubric_version(spec.rubric_version_id)
    agent_input = {"messages": [HumanMessage(spec.input)], "rubric": version["text"]}
    try:
        return _assemble(
            store,
            spec,
            handle,
            agent_input,
            on_evaluation=on_evaluation,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
    except Exception as exc:
        store.finish_run(handle.run_id, status="error", error=error_text(exc))
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
    and continues it. A `running` or `interrupted` run is taken over (`Store.resume_run`)
    and continues its checkpointed LangGraph thread, the same grading run, so the passes
    already stored are not graded again (and, recorded idempotently, never stored
    twice); one that never reached its first checkpoint starts over on the same thread.
    Any other status means the input is done: `None`.

    The spec is not validated here (the batch validated it before its first run).

    Raises:
        Exception: Building the agent failed; a new run row is stored as `error`.
    """
    run_id, thread_id = _create_run(store, spec, batch_id, input_index)
    row = store.get_run(run_id)
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
    stored = store.run_evaluations(run_id)
    try:
        if _continue_from_checkpoint(prepared, stored):
            prepared = dataclasses.replace(prepared, agent_input=None)
        store.resume_run(run_id)
    except BaseException:
        _release(prepared)
        raise
    return prepared


# --------------------------------------------------------------------------- executing


def execute_run(store: Store, prepared: PreparedRun) -> None:
    """Invoke the agent to the end and store the transcript and terminal status.

    Never raises for a failing agent or store: the outcome is the stored status and
    `handle.error`. Releases the run's checkpointer and marks the handle finished.
    """
    handle, agent = prepared.handle, prepared.agent
    config = run_config(handle.thread_id)
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
                status, error = "error", error_text(exc)
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
        _release(prepared)
        handle.mark_finished()


def _launch(store: Store, prepared: PreparedRun) -> RunHandle:
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
        >>> handle.wait(); store.get_run(handle.run_id)["status"]  # doctest: +SKIP
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
    return _launch(store, prepared)


def run_once(
    store: Store,
    spec: RunSpec,
    *,
    on_evaluation: EvaluationListener | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Run a spec to the end on the calling thread; returns `store.get_run(run_id)`.

    Examples:
        >>> run_once(store, spec)["status"]  # doctest: +SKIP
        'satisfied'
    """
    prepared = prepare_run(
        store, spec, on_evaluation=on_evaluation, agent_llm=agent_llm, grader_llm=grader_llm
    )
    execute_run(store, prepared)
    return store.get_run(prepared.handle.run_id)


# --------------------------------------------------------------------------- resuming


def _resumable_run(store: Store, run_id: int) -> dict[str, Any]:
    from rubric_core.store import StoreError

    try:
        run = store.get_run(run_id)
    except StoreError as exc:
        raise SpecError("run_id", f"no run with id {run_id}") from exc
    if run["status"] not in _RESUMABLE_STATUSES:
        raise SpecError(
            "run_id", f"run {run_id} is {run['status']!r}; only interrupted runs resume"
        )
    if not run.get("thread_id"):
        raise SpecError("run_id", f"run {run_id} has no checkpoint thread to resume")
    return run


def _fast_forward(
    model: BaseChatModel, consumed: int, *, verdicts_only: bool, thread_id: str
) -> None:
    """Skip what the stored part of a run used of a replay model's script (others: nothing)."""
    from rubric_core.providers import ReplayChatModel

    if isinstance(model, ReplayChatModel):
        model.fast_forward(consumed, verdicts_only=verdicts_only, thread_id=thread_id)


def _continue_from_checkpoint(prepared: PreparedRun, stored: Sequence[Mapping[str, Any]]) -> bool:
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
    stored = store.run_evaluations(run_id)
    prepared = _assemble(
        store,
        spec,
        RunHandle(store, run_id, run["thread_id"]),
        None,
        on_evaluation=on_evaluation,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    try:
        if not _continue_from_checkpoint(prepared, stored):
            raise SpecError("run_id", f"run {run_id} has no checkpoint to resume from")
        if run.get("error"):
            logger.warning("resuming run %s, which had stopped with: %s", run_id, run["error"])
        store.resume_run(run_id)
    except BaseException:
        _release(prepared)
        raise
    return _launch(store, prepared)
