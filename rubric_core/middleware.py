"""RubricMiddleware: grade the agent against a rubric when it would finish, and loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, cast

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
from rubric_core.grader import (
    Grader,
    GraderOutcome,
    GraderUsage,
    Panel,
    RetryPolicy,
    describe_exception,
)
from rubric_core.grader.checked import (
    checks_only_outcome,
    judged_names,
    merge_outcome,
    require_checks_only,
)
from rubric_core.grader.judges import UNSET, Unset, build_judges, check_judges
from rubric_core.grader.logs import log_prefix, pass_context
from rubric_core.grader.nonce import grading_nonce, scrub, scrub_judges, scrub_verdicts
from rubric_core.grader.validate import check_middleware_arguments
from rubric_core.messages import final_answer, grader_feedback_message
from rubric_core.model_check import CheckBeforeModelCall
from rubric_core.rubric import CriterionSpec, validate_criteria
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
from rubric_core.scoring import best_pass, regression_gap, regressions, score_pass
from rubric_core.tools.checks import arun_checks, run_checks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from pathlib import Path

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage, HumanMessage
    from langchain_core.tools import BaseTool
    from langgraph.runtime import Runtime

    from rubric_core.schema import CriterionVerdict, EvaluationResult, GraderVerdict

logger = logging.getLogger(__name__)

_DEFAULT_TRANSCRIPT_BUDGET = 48_000


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


@dataclass
class _Pass:
    """One grading pass in progress."""

    rubric: str
    specs: list[CriterionSpec]
    run_id: str
    iteration: int
    started: float = field(default_factory=time.time)
    usage: GraderUsage = field(default_factory=GraderUsage)
    previous: list[RubricEvaluation] = field(default_factory=list)
    """The attempt's earlier passes, oldest first."""
    looping: bool = True
    """`False` for `grade_transcript`: one pass outside a loop, its status is its verdict."""
    start: dict[str, Any] = field(default_factory=dict)
    """The state update that starts a new attempt with this pass (empty when it goes on)."""

    @property
    def criteria(self) -> list[str]:
        return [spec.name for spec in self.specs]

    @property
    def nonce(self) -> str:
        """The payload nonce of the grading run (`grader.nonce`): its passes share it."""
        return grading_nonce(self.run_id)


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


def revision_message(evaluation: RubricEvaluation) -> HumanMessage:
    """The feedback turn injected after a `needs_revision` pass."""
    failing = [c for c in evaluation["criteria"] if not c["passed"]]
    passing = [c for c in evaluation["criteria"] if c["passed"]]
    lines = [
        f"A grader checked your answer against the rubric (pass {evaluation['iteration'] + 1}) "
        "and it needs revision before it can be accepted."
    ]
    if evaluation["explanation"]:
        lines += ["", f"Grader's summary: {evaluation['explanation'].strip()}"]
    if failing:
        regressed = {r["name"]: r["passed_in"] for r in evaluation.get("regressions") or []}
        lines += ["", "Failing criteria, with what to change:"]
        for c in failing:
            gap = c.get("gap", "").strip() or "not met"
            if c["name"] in regressed:
                gap = regression_gap(gap, regressed[c["name"]])
            lines.append(f"- {c['name']}: {gap}")
    if passing:
        lines += ["", "Passing criteria (keep them passing):"]
        lines += [f"- {c['name']}" for c in passing]
    lines += [
        "",
        "Revise your work to fix every failing criterion without breaking the passing ones, "
        "then give your complete final answer again.",
    ]
    return grader_feedback_message("\n".join(lines))


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
        model: The grader's chat model: a `"provider:model-id"` string (resolved with
            `init_chat_model`) or a `BaseChatModel`. `None` is allowed when every
            criterion of the rubrics it will see has a code check (no judge is needed).
            Give `model` or `panel`; giving neither is an error.
        system_prompt: Grading instructions replacing the built-in grader prompt.
        tools: Tools the grader may call for evidence before its verdict.
        max_iterations: Grading passes allowed per rubric attempt, 1 to 20.
        on_evaluation: Called with each `RubricEvaluation` after every pass, sync or
            async. Its exceptions are logged and suppressed, except `PassNotRecorded`,
            which ends the invocation (the pass is not added to the state).
        retry_attempts: Grader calls allowed per pass when failures are transient
            (connection errors, timeouts, HTTP 429 and 5xx); 1 disables retrying.
        retry_initial_delay_s: First backoff delay; doubles per retry. `Retry-After`
            headers take precedence.
        retry_max_delay_s: Cap on any single backoff delay.
        transcript_budget_chars: Characters of transcript, besides the original request
            and the final answer (always sent whole), the grader is given.
        keep: `"last"` leaves the last answer as it is. `"best"`: when an attempt ends in
            `max_iterations_reached`, or in `grader_error` after a scored pass, the draft
            of the highest-scoring pass (ties: the later) is appended as the agent's last
            message, marked with `additional_kwargs["rubric_best_draft"]`, unless it is the
            last answer already; `_rubric_best_iteration` records that pass.
        check_dir: What relative paths in code checks (`{pytest: tests/t.py}`,
            `{json: schema.json}`) are resolved against; the working directory if `None`.
            Check files are read only from inside it (a path leading out is a check error).
        panel: A judge panel instead of `model`: grader models (strings or
            `BaseChatModel`s) that each grade every pass. Give `model` or `panel`.
        samples: How many times each judge grades every pass (default 1). `model="m",
            samples=3` samples one model three times; with `panel`, every judge k times.
        grader_timeout_s: Timeout of one grader model call (default 120 s). Set on the
            client of a grader given as a string (which also gets no client-side retries:
            `retry_attempts` governs) and of a LangChain OpenAI or Anthropic model object,
            copied with its client retries off (its own timeout, if set, is kept).
        grader_budget_s: Wall-clock budget of one judge's grading pass (default 600 s):
            calls, corrections, tool rounds, retries and their waits. When it is spent the
            pass ends as `grader_error`, saying so. Each pass also caps the grader's model
            calls (12), tool calls (24; 3 identical ones) and the reply text it keeps
            (`grader.GraderLimits`).

    With more than one judge (`panel`, or `samples` above 1) each criterion passes by
    strict majority (`evaluate.combine_panel`): more than half of the judges pass it. A
    tie is not a pass and its gap starts `judges split P-Q:`; the pass is `failed` only if
    most judges say so. Each `RubricEvaluation` then carries `judges`: every judge's own
    `{judge, result, explanation, criteria}`, in panel order. One judge (the default)
    grades exactly as before, and its records have no `judges`. Code-checked criteria are
    decided once, before the judges, who vote only on the others.

    Raises:
        TypeError: A parameter has the wrong type (`model=42`, `tools="x"`, a string
            `transcript_budget_chars`, ...); the message names it.
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
        model: str | BaseChatModel | Unset | None = UNSET,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        on_evaluation: Callable[[RubricEvaluation], Any] | None = None,
        retry_attempts: int = 3,
        retry_initial_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        transcript_budget_chars: int = _DEFAULT_TRANSCRIPT_BUDGET,
        keep: KeepChoice = "last",
        check_dir: str | Path | None = None,
        panel: Sequence[str | BaseChatModel] | None = None,
        samples: int = 1,
        grader_timeout_s: float = 120.0,
        grader_budget_s: float = 600.0,
    ) -> None:
        super().__init__()
        limits = check_middleware_arguments(
            model=model,
            panel=panel,
            system_prompt=system_prompt,
            tools=tools,
            retry_attempts=retry_attempts,
            retry_initial_delay_s=retry_initial_delay_s,
            retry_max_delay_s=retry_max_delay_s,
            transcript_budget_chars=transcript_budget_chars,
            check_dir=check_dir,
            grader_timeout_s=grader_timeout_s,
            grader_budget_s=grader_budget_s,
        )
        judges = check_judges(model, panel, samples)
        if keep not in KEEP_CHOICES:
            msg = f"keep must be one of {', '.join(map(repr, KEEP_CHOICES))}, got {keep!r}"
            raise ValueError(msg)
        max_iterations = _check_max_iterations(max_iterations)
        if on_evaluation is not None and not callable(on_evaluation):
            msg = f"on_evaluation must be callable, got {type(on_evaluation).__name__}"
            raise TypeError(msg)
        self.max_iterations = max_iterations
        self.on_evaluation = on_evaluation
        self.keep: KeepChoice = keep
        self.check_dir = check_dir
        retry = RetryPolicy(
            attempts=retry_attempts,
            initial_delay_s=retry_initial_delay_s,
            max_delay_s=retry_max_delay_s,
        )
        # No judge at all with model=None: the rubrics must be checked by code alone.
        self.grader: Grader | Panel | None = build_judges(
            judges,
            system_prompt=system_prompt,
            tools=list(tools or []),
            retry=retry,
            budget_chars=transcript_budget_chars,
            limits=limits,
            parameter="model" if panel is None else "panel",
        )

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
        graded = self._pending_pass(state, runtime)
        if graded is None:
            return None
        with pass_context(graded.run_id):
            try:
                outcome: GraderOutcome | Exception = self._grade(graded, state["messages"])
            except GraphBubbleUp:
                raise
            except Exception as exc:
                outcome = exc
            evaluation, pending_callback = self._conclude(state, runtime, graded, outcome)
            if pending_callback is not None:
                self._guard(_run_coroutine_blocking, pending_callback)
        return self._update(evaluation, {**graded.start, **self._best_update(graded, evaluation)})

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: RubricState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`; only the grader call and the callback are awaited."""
        graded = self._pending_pass(state, runtime)
        if graded is None:
            return None
        with pass_context(graded.run_id):
            try:
                outcome: GraderOutcome | Exception = await self._agrade(graded, state["messages"])
            except GraphBubbleUp:
                raise
            except Exception as exc:
                outcome = exc
            evaluation, pending_callback = self._conclude(state, runtime, graded, outcome)
            if pending_callback is not None:
                await self._aguard(pending_callback)
        return self._update(evaluation, {**graded.start, **self._best_update(graded, evaluation)})

    # -- outside a loop ----------------------------------------------------------------

    def grade_transcript(
        self,
        messages: Sequence[BaseMessage],
        rubric: str,
        *,
        grading_run_id: str | None = None,
        outcome: GraderOutcome | None = None,
    ) -> RubricEvaluation:
        """Grade a finished transcript once, outside any agent loop, as a pass of the loop.

        The same grader, payload and record as `after_agent` (grade-only runs and re-grading
        use it), but no revision follows: the record's `status` is the verdict itself.
        `on_evaluation` is called as in the loop.

        Args:
            messages: The conversation to judge, e.g. `[HumanMessage(input), AIMessage(output)]`.
            rubric: The rubric (validated as in the loop).
            grading_run_id: The record's `grading_run_id` (a fresh uuid by default).
            outcome: A verdict already given on the judged criteria, by a person for
                instance (`grader.outcome_from_verdicts`): it takes the judge's place, so
                the grader is not called; the code checks still run and decide theirs.

        Code checks run first and the judge (or panel) decides the other criteria, as in
        the loop; the record carries its `score` (no `regressions`: it has no earlier pass).

        Returns:
            The pass's `RubricEvaluation` (`grader_error` if the grader raised, or when
            `model=None` and a criterion has no code check).
        """
        graded = _Pass(
            rubric=rubric,
            specs=validate_criteria(rubric),
            run_id=grading_run_id or str(uuid.uuid4()),
            iteration=0,
            looping=False,
        )
        with pass_context(graded.run_id):
            judged: GraderOutcome | Exception
            try:
                judged = self._grade(graded, messages, given=outcome)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                judged = exc
            state = cast("RubricState", {"messages": list(messages)})
            evaluation, pending_callback = self._conclude(state, None, graded, judged)
            if pending_callback is not None:
                self._guard(_run_coroutine_blocking, pending_callback)
        return evaluation

    # -- shared logic ------------------------------------------------------------------

    def _grade(
        self,
        graded: _Pass,
        messages: Sequence[BaseMessage],
        *,
        given: GraderOutcome | None = None,
    ) -> GraderOutcome:
        """One pass, synchronously: the code checks, then the judge on the rest (or the
        verdict `given` on them, a person's)."""
        checked = run_checks(graded.specs, final_answer(messages), base_dir=self.check_dir)
        judged = judged_names(graded.specs)
        if given is not None:
            return self._with_checks(graded, checked, given if judged else None)
        return self._with_checks(
            graded,
            checked,
            self._require_grader(graded.specs).grade(
                *self._grade_args(graded, judged, messages),
                checked=list(checked.values()),
                nonce=graded.nonce,
            )
            if judged
            else None,
        )

    async def _agrade(self, graded: _Pass, messages: Sequence[BaseMessage]) -> GraderOutcome:
        """Async twin of `_grade`; the checks and the judge are awaited."""
        checked = await arun_checks(graded.specs, final_answer(messages), base_dir=self.check_dir)
        judged = judged_names(graded.specs)
        return self._with_checks(
            graded,
            checked,
            await self._require_grader(graded.specs).agrade(
                *self._grade_args(graded, judged, messages),
                checked=list(checked.values()),
                nonce=graded.nonce,
            )
            if judged
            else None,
        )

    @staticmethod
    def _grade_args(
        graded: _Pass, judged: list[str], messages: Sequence[BaseMessage]
    ) -> tuple[str, list[str], Any, int, GraderUsage]:
        """What `Grader.grade`/`agrade` are called with: the judged criteria only."""
        return graded.rubric, judged, messages, graded.iteration, graded.usage

    @staticmethod
    def _with_checks(
        graded: _Pass, checked: dict[str, CriterionVerdict], judged: GraderOutcome | None
    ) -> GraderOutcome:
        """The pass's outcome: the judge's with the checked verdicts merged in rubric
        order, or the checks' alone when no criterion needed the judge."""
        if judged is None:
            return checks_only_outcome(checked)
        return merge_outcome(graded.specs, checked, judged)

    def _require_grader(self, specs: Sequence[CriterionSpec]) -> Grader | Panel:
        if self.grader is None:
            require_checks_only(specs, rubric="RubricMiddleware(model=None): the rubric")
        assert self.grader is not None
        return self.grader

    def _check_new_attempt(self, state: Mapping[str, Any]) -> None:
        rubric = state.get("rubric")
        if rubric is None or rubric == "" or attempt_goes_on(state, rubric):
            return
        specs = validate_criteria(rubric)
        if judged_names(specs):
            self._require_grader(specs)

    def _pending_pass(self, state: RubricState, runtime: Runtime[Any]) -> _Pass | None:
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
                self._require_grader(specs)
            run_id, iteration = new_grading_run_id(runtime), 0
            start = {
                "_active_rubric": rubric,
                "_current_grading_run_id": run_id,
                "_rubric_best_iteration": None,
            }
        graded = _Pass(
            rubric=rubric,
            specs=specs,
            run_id=run_id,
            iteration=iteration,
            start=start,
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
        return graded

    def _status_after(self, result: GraderVerdict, iteration: int, looping: bool) -> RubricStatus:
        if looping and result == "needs_revision" and iteration + 1 >= self.max_iterations:
            logger.info(
                "%srubric not met after %d grading passes", log_prefix(), self.max_iterations
            )
            return "max_iterations_reached"
        return result

    def _conclude(
        self,
        state: RubricState,
        runtime: Runtime[Any] | None,
        graded: _Pass,
        outcome: GraderOutcome | Exception,
    ) -> tuple[RubricEvaluation, Awaitable[Any] | None]:
        """Build the pass's record, emit its end event and fire the callback.

        Returns the record and, for an async callback, the awaitable still to run.
        """
        result: EvaluationResult
        status: RubricStatus
        criteria: list[CriterionVerdict]
        if isinstance(outcome, Exception):
            logger.warning(
                "%sgrader failed on pass %d: %s",
                log_prefix(),
                graded.iteration,
                describe_exception(outcome),
            )
            result, status = "grader_error", "grader_error"
            explanation, criteria = describe_exception(outcome), []
        else:
            result = outcome.response.result
            status = self._status_after(result, graded.iteration, graded.looping)
            explanation, criteria = outcome.explanation, outcome.criteria
        # The nonce lives for the whole grading run: nothing the agent reads may carry it.
        explanation, criteria = (
            scrub(explanation, graded.nonce),
            scrub_verdicts(criteria, graded.nonce),
        )
        score = None if result == "grader_error" else score_pass(graded.specs, criteria)
        evaluation: RubricEvaluation = {
            "grading_run_id": graded.run_id,
            "iteration": graded.iteration,
            "result": result,
            "status": status,
            "explanation": explanation,
            "criteria": criteria,
            "draft": final_answer(state["messages"]),
            "started_at": graded.started,
            "duration_s": round(time.time() - graded.started, 6),
            "grader_attempts": graded.usage.attempts,
            "grader_input_tokens": graded.usage.input_tokens,
            "grader_output_tokens": graded.usage.output_tokens,
            "score": score,
            "regressions": regressions(list(graded.previous), criteria) if criteria else [],
        }
        if not isinstance(outcome, Exception) and outcome.judges is not None:
            evaluation["judges"] = scrub_judges(outcome.judges, graded.nonce)
        self._emit_end(runtime, evaluation)
        callback_result = self._call_back(evaluation)
        return evaluation, callback_result if inspect.isawaitable(callback_result) else None

    def _best_update(self, graded: _Pass, evaluation: RubricEvaluation) -> dict[str, Any]:
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
