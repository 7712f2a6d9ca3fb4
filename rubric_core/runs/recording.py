"""Recording a run's passes: commit each before the loop goes on, and recover what the checkpoint kept.

The store is the record a run leaves; the LangGraph checkpoint is what a resumed run
continues. The recorder keeps the two in step: a pass enters the agent's state only
once it is stored (else `PassNotRecorded` ends the run before it does), and resuming a
run stores any pass its checkpoint holds that the store lacks.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from rubric_core.errors import PassNotRecorded
from rubric_core.schema import RubricEvaluation
from rubric_core.store import RunEnd
from rubric_core.store.retry import retry_write

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

    from rubric_core.store import Store

__all__ = [
    "EvaluationListener",
    "error_text",
    "make_recorder",
    "store_missing_passes",
    "store_run_end",
    "verdicts_kept_for_failed_steps",
]

logger = logging.getLogger(__name__)

EvaluationListener = Callable[[RubricEvaluation], None]
"""`listener(evaluation)`, called once per grading pass."""


def error_text(exc: BaseException) -> str:
    """`Type: message` of an exception, for a run's stored error.

    Examples:
        >>> error_text(ValueError("bad gateway"))
        'ValueError: bad gateway'
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def make_recorder(
    store: Store,
    run_id: int,
    listener: EvaluationListener | None = None,
    on_failure: Callable[[str], None] | None = None,
) -> EvaluationListener:
    """`on_evaluation` for the middleware: commit each pass before the loop goes on.

    A write that fails for a reason that may pass (a lock, a full disk, a lost server)
    is retried with backoff (`store.retry`). A pass that still cannot be stored ends the
    run: the message goes to `on_failure` and `PassNotRecorded` stops the loop before the
    pass enters the agent's state, so resuming the run grades that pass again.
    `listener` is called after the commit; its exceptions are logged, never raised.
    """

    def record(evaluation: RubricEvaluation) -> None:
        number = int(evaluation.get("iteration") or 0) + 1
        try:
            retry_write(
                lambda: store.passes.record(run_id, evaluation),
                what=f"grading pass {number} of run {run_id}",
            )
        except Exception as exc:
            message = (
                f"grading pass {number} could not be stored, so the run stopped before "
                f"going on without it (resume the run to grade it again): {error_text(exc)}"
            )
            logger.error("run %s: %s", run_id, message)
            if on_failure is not None:
                on_failure(message)
            raise PassNotRecorded(message) from exc
        if listener is not None:
            try:
                listener(evaluation)
            except Exception:  # a watcher's bug must not end the run
                logger.exception("on_evaluation listener of run %s raised", run_id)

    return record


def store_missing_passes(store: Store, run_id: int, values: Mapping[str, Any]) -> str | None:
    """Store the passes the run's checkpointed state holds but the store lacks; why not, or None.

    A pass reaches the state only after the recorder stored it, so this finds nothing
    unless a pass was lost before that rule (a run recorded by an older version, which
    went on without it): resuming such a run stores it from the state instead of
    finishing with a gap in its iterations.
    """
    graded = [e for e in values.get("_rubric_evaluations") or [] if isinstance(e, Mapping)]
    try:
        if int(store.runs.get(run_id).get("iterations") or 0) >= len(graded):
            return None
        stored = {(e["grading_run_id"], e["iteration"]) for e in store.passes.of_run(run_id)}
        missing = [e for e in graded if (e.get("grading_run_id"), e.get("iteration")) not in stored]
        for evaluation in missing:
            retry_write(
                functools.partial(
                    store.passes.record, run_id, cast("RubricEvaluation", evaluation)
                ),
                what=f"grading pass {int(evaluation.get('iteration') or 0) + 1} of run {run_id}",
            )
            logger.warning(
                "run %s: stored grading pass %s from the checkpoint, where it was kept",
                run_id,
                int(evaluation.get("iteration") or 0) + 1,
            )
    except Exception as exc:
        return f"graded passes of this run are missing from the store: {error_text(exc)}"
    return None


def verdicts_kept_for_failed_steps(agent: Any, thread_id: str, tasks: Iterable[Any]) -> int:
    """Grader verdicts that failed grading steps will reuse on resume instead of asking again.

    A pass whose recording failed (`PassNotRecorded`) is run again on resume, and
    LangGraph continues the grader sub-agent of that step from its own checkpoint: when
    it had reached its verdict, the verdict is reused and the grader model is not called
    again, so a replay grader must skip it too.
    """
    failed = {task.id for task in tasks if getattr(task, "error", None) is not None}
    checkpointer = getattr(agent, "checkpointer", None)
    if not failed or checkpointer is None:
        return 0
    latest: dict[str, bool] = {}  # the newest checkpoint of each failed step's grader
    scope: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    for saved in checkpointer.list(scope):
        namespace = str(saved.config["configurable"].get("checkpoint_ns") or "")
        step = next((task_id for task_id in failed if namespace.endswith(task_id)), None)
        if step is not None and step not in latest:
            latest[step] = "structured_response" in saved.checkpoint["channel_values"]
    return sum(latest.values())


def store_run_end(
    store: Store,
    handle: Any,
    messages: list[BaseMessage],
    status: str,
    error: str | None,
    end: Mapping[str, Any],
) -> tuple[str, str | None]:
    """Store a run's transcript and its end (`end`: `finish_run`'s other columns).

    Both share one commit. If that fails, the transcript is written alone, so that its
    failure is told apart from the end's: a transcript that cannot be stored ends the run
    in `error` saying so, with its passes kept. `handle.error` is set before the end is
    committed, so whoever sees the final status sees the error. Returns the status and
    error stored.

    Raises:
        Exception: The end itself could not be stored (after retries).
    """

    def finish(transcript: list[BaseMessage] | None) -> None:
        retry_write(
            lambda: store.runs.finish(
                handle.run_id, RunEnd(status=status, error=error, transcript=transcript, **end)
            ),
            what=f"the end of run {handle.run_id}",
        )

    if messages:
        handle.error = error
        try:
            finish(messages)
            return status, error
        except Exception:
            logger.debug("run %s: transcript and end in one write failed", handle.run_id)
        try:
            retry_write(
                lambda: store.runs.save_transcript(handle.run_id, messages),
                what=f"the transcript of run {handle.run_id}",
            )
        except Exception as exc:
            logger.exception("could not save the transcript of run %s", handle.run_id)
            if error is None and status != "interrupted":
                status, error = "error", f"saving the transcript failed: {error_text(exc)}"
    handle.error = error
    finish(None)
    return status, error
