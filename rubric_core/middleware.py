"""RubricMiddleware: grade the agent against a rubric when it would finish, and loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentState,
    ModelRequest,
    OmitFromInput,
    hook_config,
)
from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp

from rubric_core.attempt import attempt_goes_on, new_grading_run_id
from rubric_core.errors import PassNotRecorded
from rubric_core.grader.checked import judged_names
from rubric_core.grader.judges import UNSET, Judges, Unset
from rubric_core.grader.logs import log_prefix, pass_context
from rubric_core.model_check import CheckBeforeModelCall
from rubric_core.pipeline import GradingPass, PassLimits, PassPipeline, revision_message
from rubric_core.rubric import validate_criteria
from rubric_core.schema import (
    BEST_DRAFT_KEY,
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_ITERATIONS_LIMIT,
    TERMINAL_STATUSES,
    KeepChoice,
    RubricEvaluation,
    RubricStatus,
)
from rubric_core.scoring import best_pass

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.runtime import Runtime

    from rubric_core.grader import Grader, Panel, RetryPolicy

logger = logging.getLogger(__name__)


def _append(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [*(left or []), *(right or [])]


class RubricState(AgentState):
    """State the middleware adds to the agent.

    `rubric` is the only input. The rest is bookkeeping that callers read back from
    the dict `invoke()` returns or from `agent.get_state(config).values`; it is
    omitted from the input schema so a caller cannot forge it.
    """

    rubric: NotRequired[str]
    """The checklist the work must meet, one criterion per line. Sticky on a thread."""

    _rubric_status: NotRequired[Annotated[RubricStatus | None, OmitFromInput]]
    """The loop's status after the latest pass (`None` before the first pass of an attempt)."""

    _rubric_iterations: NotRequired[Annotated[int, OmitFromInput]]
    """Grading passes completed in the current attempt."""

    _rubric_evaluations: NotRequired[Annotated[list[RubricEvaluation], OmitFromInput, _append]]
    """Every pass on this thread, oldest first. The reducer appends each pass (it must
    be the last annotation: LangGraph only reads the final metadata item as a reducer)."""

    _current_grading_run_id: NotRequired[Annotated[str, OmitFromInput]]
    """Identifier of the current rubric attempt, shared by its passes."""

    _active_rubric: NotRequired[Annotated[str, OmitFromInput]]
    """The rubric that started the current attempt."""

    _rubric_best_iteration: NotRequired[Annotated[int | None, OmitFromInput]]
    """With `keep="best"`: the zero-based pass whose draft the attempt ended with (its
    highest score, ties to the later); `None` before the attempt ends or without a score."""


def _check_max_iterations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"max_iterations must be an int between 1 and {MAX_ITERATIONS_LIMIT}, got {value!r}"
        raise TypeError(msg)
    if not 1 <= value <= MAX_ITERATIONS_LIMIT:
        msg = f"max_iterations must be between 1 and {MAX_ITERATIONS_LIMIT}, got {value}"
        raise ValueError(msg)
    return value


def _run_coroutine_blocking(awaitable: Awaitable[Any]) -> None:
    """Run an async callback to completion from sync code, with or without a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_await(awaitable))
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _await(awaitable)).result()


async def _await(awaitable: Awaitable[Any]) -> None:
    await awaitable


class RubricMiddleware(CheckBeforeModelCall):
    """Have the agent evaluate itself against a rubric and iterate until it is met.

    When the agent would finish (a model reply with no tool calls), a separate grader
    sub-agent checks every criterion of the rubric passed in the invocation state. On
    `needs_revision` the per-criterion feedback goes back into the conversation and the
    agent runs again; the loop ends on `satisfied`, `failed`, `grader_error` or
    `max_iterations_reached`, leaving the agent's last answer as it is (or, with
    `keep="best"`, appending the highest-scoring pass's draft). Without a `rubric` in
    state the middleware does nothing.

    Criteria bound to a code check (`- Three lines {lines == 3}`) are decided by the
    check every pass, before the judge, which sees their outcomes as evidence and is not
    asked about them. Every pass carries a `score` and the criteria that `regressions`
    (passed in an earlier pass, fail now); the feedback to the agent names them.

    Args:
        model: The judge: a `"provider:model-id"` string (resolved with `init_chat_model`)
            or a `BaseChatModel`; `Judges([m1, m2, ...], samples=k)` for a panel, or one
            model sampled k times; `None` when every criterion of the rubrics it will see
            has a code check (no judge is needed). Not giving it is an error.
        system_prompt: Grading instructions replacing the built-in grader prompt.
        tools: Tools the grader may call for evidence before its verdict.
        max_iterations: Grading passes allowed per rubric attempt, 1 to 20.
        on_evaluation: Called with each `RubricEvaluation` after every pass, sync or
            async. Its exceptions are logged and suppressed, except `PassNotRecorded`,
            which ends the invocation (the pass is not added to the state).
        retry: `grader.RetryPolicy`: grader calls per pass when failures are transient
            (connection errors, timeouts, HTTP 429 and 5xx; `attempts=1` disables
            retrying), the first backoff delay (doubling) and its cap. `Retry-After`
            headers take precedence.
        limits: `PassLimits`: one grader call's timeout (120 s), one judge's pass budget
            (600 s), the transcript characters the judge is shown (48,000) and the
            directory code checks may read from (the working directory). Each pass also
            caps the grader's model calls (12), tool calls (24; 3 identical ones) and the
            reply text it keeps (`grader.GraderLimits`).
        keep: `"last"` leaves the last answer as it is. `"best"`: when an attempt ends in
            `max_iterations_reached`, or in `grader_error` after a scored pass, the draft
            of the highest-scoring pass (ties: the later) is appended as the agent's last
            message, marked with `additional_kwargs["rubric_best_draft"]`, unless it is the
            last answer already; `_rubric_best_iteration` records that pass.

    Each pass is graded by `pipeline.PassPipeline` (checks, judges, the result derived from
    the verdicts, score, regressions); the middleware keeps the loop: state, hooks, events
    and the callback. With more than one judge each criterion passes by strict majority
    (`evaluate.combine_panel`); a tie is not a pass and its gap starts `judges split P-Q:`;
    the pass is `failed` only if most judges say so. Each `RubricEvaluation` then carries
    `judges`: every judge's own `{judge, result, explanation, criteria}`, in panel order.

    Raises:
        TypeError: A parameter has the wrong type (`model=42`, `tools="x"`, a string
            `PassLimits.transcript_budget_chars`, ...); the message names it.
        ValueError: A parameter is out of range (NaN or infinite delays too), or `model`
            names no usable model (`"nonsense"`, `"openai:"`, a provider without its API
            key or package).
        InputError: At invocation, `model` is `None` and the rubric has criteria without
            a code check.

    Examples:
        ```python
        from langchain.agents import create_agent
        from rubric_core import RubricMiddleware

        agent = create_agent(
            "openai:gpt-4.1",
            middleware=[RubricMiddleware(model="openai:gpt-4.1-mini", max_iterations=3)],
        )
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "Write a haiku about rain"}],
             "rubric": "- three lines\\n- 5/7/5 syllables\\n- mentions rain"}
        )
        print(result["_rubric_status"])
        ```
    """

    state_schema = RubricState

    def __init__(
        self,
        *,
        model: str | BaseChatModel | Judges | Unset | None = UNSET,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        on_evaluation: Callable[[RubricEvaluation], Any] | None = None,
        retry: RetryPolicy | None = None,
        limits: PassLimits | None = None,
        keep: KeepChoice = "last",
    ) -> None:
        super().__init__()
        if keep not in KEEP_CHOICES:
            msg = f"keep must be one of {', '.join(map(repr, KEEP_CHOICES))}, got {keep!r}"
            raise ValueError(msg)
        max_iterations = _check_max_iterations(max_iterations)
        if on_evaluation is not None and not callable(on_evaluation):
            msg = f"on_evaluation must be callable, got {type(on_evaluation).__name__}"
            raise TypeError(msg)
        self.pipeline = PassPipeline.build(
            model, system_prompt=system_prompt, tools=tools, retry=retry, limits=limits
        )
        self.max_iterations = max_iterations
        self.on_evaluation = on_evaluation
        self.keep: KeepChoice = keep

    @property
    def grader(self) -> Grader | Panel | None:
        """The pass's judge (`None` with `model=None`: code checks only)."""
        return self.pipeline.grader

    # -- hooks -------------------------------------------------------------------------

    # A new attempt (grading run) starts at the first pass after the rubric changed or
    # the last attempt ended; `after_agent` starts it, so the loop adds no graph step of
    # its own before the agent (one step and one checkpoint less per run). What must
    # fail before the agent spends a model call, an invalid rubric or a judged criterion
    # without a grader, is checked around the model call instead.

    def check(self, request: ModelRequest[Any]) -> None:
        """Refuse a rubric the loop cannot grade before the agent's first model call."""
        self._check_new_attempt(request.state)

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Grade the finished turn; loop back to the model on `needs_revision`."""
        pending = self._pending_pass(state, runtime)
        if pending is None:
            return None
        graded, start = pending
        with pass_context(graded.run_id):
            evaluation = self.pipeline.run(graded, state["messages"])
            pending_callback = self._conclude(runtime, evaluation)
            if pending_callback is not None:
                self._guard(_run_coroutine_blocking, pending_callback)
        return self._update(evaluation, {**start, **self._best_update(graded, evaluation)})

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: RubricState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`; the checks, the grader and the callback are awaited."""
        pending = self._pending_pass(state, runtime)
        if pending is None:
            return None
        graded, start = pending
        with pass_context(graded.run_id):
            evaluation = await self.pipeline.arun(graded, state["messages"])
            pending_callback = self._conclude(runtime, evaluation)
            if pending_callback is not None:
                await self._aguard(pending_callback)
        return self._update(evaluation, {**start, **self._best_update(graded, evaluation)})

    # -- loop control ------------------------------------------------------------------

    def _check_new_attempt(self, state: Mapping[str, Any]) -> None:
        rubric = state.get("rubric")
        if rubric is None or rubric == "" or attempt_goes_on(state, rubric):
            return
        specs = validate_criteria(rubric)
        if judged_names(specs):
            self.pipeline.require_grader(specs)

    def _pending_pass(
        self, state: RubricState, runtime: Runtime[Any]
    ) -> tuple[GradingPass, dict[str, Any]] | None:
        """The pass to grade now, and the state update that starts its attempt (empty
        when the attempt goes on); `None` without a rubric."""
        rubric = state.get("rubric")
        if rubric is None or rubric == "":
            return None
        specs = validate_criteria(rubric)
        start: dict[str, Any] = {}
        if attempt_goes_on(state, rubric):
            run_id = str(state.get("_current_grading_run_id"))
            iteration = state.get("_rubric_iterations") or 0
        else:
            if judged_names(specs):
                self.pipeline.require_grader(specs)
            run_id, iteration = new_grading_run_id(runtime), 0
            start = {
                "_active_rubric": rubric,
                "_current_grading_run_id": run_id,
                "_rubric_best_iteration": None,
            }
        graded = GradingPass(
            rubric=rubric,
            specs=specs,
            run_id=run_id,
            iteration=iteration,
            max_iterations=self.max_iterations,
            previous=sorted(
                (
                    e
                    for e in state.get("_rubric_evaluations") or []
                    if e.get("grading_run_id") == run_id and e.get("iteration", 0) < iteration
                ),
                key=lambda e: e["iteration"],
            ),
        )
        self._emit(
            runtime,
            {
                "type": "rubric_evaluation_start",
                "grading_run_id": graded.run_id,
                "iteration": graded.iteration,
            },
        )
        return graded, start

    def _conclude(
        self, runtime: Runtime[Any] | None, evaluation: RubricEvaluation
    ) -> Awaitable[Any] | None:
        """Emit the pass's end event and fire the callback; for an async callback, the
        awaitable still to run."""
        self._emit_end(runtime, evaluation)
        callback_result = self._call_back(evaluation)
        return callback_result if inspect.isawaitable(callback_result) else None

    def _best_update(self, graded: GradingPass, evaluation: RubricEvaluation) -> dict[str, Any]:
        """With `keep="best"`, at the end of an attempt: the best pass, and its draft
        appended as the last answer when it is not the last answer already."""
        status = evaluation["status"]
        if self.keep != "best" or status not in TERMINAL_STATUSES or status == "failed":
            return {}
        passes = [*graded.previous, evaluation]
        index = best_pass([p.get("score") for p in passes])
        if index is None:
            return {}
        best = passes[index]
        update: dict[str, Any] = {"_rubric_best_iteration": best["iteration"]}
        if best is not evaluation and status in ("max_iterations_reached", "grader_error"):
            marker = {"iteration": best["iteration"], "score": best.get("score")}
            update["messages"] = [
                AIMessage(
                    content=best["draft"],
                    id=f"rubric-best-{graded.run_id}-{graded.iteration}",
                    additional_kwargs={BEST_DRAFT_KEY: marker},
                )
            ]
        return update

    @staticmethod
    def _update(evaluation: RubricEvaluation, extra: dict[str, Any]) -> dict[str, Any]:
        update: dict[str, Any] = {
            **extra,
            "_rubric_evaluations": [evaluation],
            "_rubric_iterations": evaluation["iteration"] + 1,
            "_rubric_status": evaluation["status"],
        }
        if evaluation["status"] == "needs_revision":
            update["messages"] = [revision_message(evaluation)]
            update["jump_to"] = "model"
        return update

    @staticmethod
    def _guard(function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except (GraphBubbleUp, PassNotRecorded):
            raise
        except Exception:
            logger.exception("%son_evaluation callback raised; the loop goes on", log_prefix())
            return None

    @staticmethod
    async def _aguard(awaitable: Awaitable[Any]) -> None:
        try:
            await awaitable
        except (GraphBubbleUp, PassNotRecorded):
            raise
        except Exception:
            logger.exception("%son_evaluation callback raised; the loop goes on", log_prefix())

    def _call_back(self, evaluation: RubricEvaluation) -> Any:
        if self.on_evaluation is None:
            return None
        return self._guard(self.on_evaluation, dict(evaluation))

    @staticmethod
    def _emit(runtime: Runtime[Any] | None, payload: dict[str, Any]) -> None:
        writer = getattr(runtime, "stream_writer", None)
        if writer is None:
            return
        try:
            writer(payload)
        except Exception:
            logger.debug(
                "%scustom stream writer raised; event dropped", log_prefix(), exc_info=True
            )

    def _emit_end(self, runtime: Runtime[Any] | None, evaluation: RubricEvaluation) -> None:
        self._emit(
            runtime,
            {
                "type": "rubric_evaluation_end",
                "grading_run_id": evaluation["grading_run_id"],
                "iteration": evaluation["iteration"],
                "result": evaluation["result"],
                "status": evaluation["status"],
                "explanation": evaluation["explanation"],
                "criteria": evaluation["criteria"],
                "score": evaluation["score"],
                "regressions": evaluation["regressions"],
            },
        )
