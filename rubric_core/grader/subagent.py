"""The grader sub-agent: one grading pass with retries, a coverage check and a correction cap."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp

from rubric_core.errors import RubricStudioError
from rubric_core.grader.align import align_criteria, unmatched_entries
from rubric_core.grader.budget import (
    GraderLimits,
    PassBudget,
    PassLimits,
    ToolCallLimits,
    active_budget,
    spending,
)
from rubric_core.grader.logs import log_prefix
from rubric_core.grader.prompt import (
    GRADER_SYSTEM_PROMPT,
    coverage_correction,
    payload_parts,
    rejection_message,
    rejection_reason,
)
from rubric_core.grader.retry import GRADER_RECURSION_LIMIT, RetryPolicy, describe_exception
from rubric_core.grader.verdict_schema import verdict_model
from rubric_core.limits import (
    MAX_EXPLANATION_CHARS,
    MAX_GAP_CHARS,
    MAX_LISTED_NAMES,
    cut_text,
    quoted,
)
from rubric_core.model_check import CheckBeforeModelCall
from rubric_core.providers.registry import (
    grader_model,
    payload_message,
    provider_of,
    wants_cache_markers,
)
from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE, GraderResponse, pass_result

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import TracebackType

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph

    from rubric_core.grader.usage import GraderUsage
    from rubric_core.schema import CriterionVerdict, JudgeRecord

logger = logging.getLogger(__name__)

_MAX_CORRECTIONS = 3
"""Rejected verdicts one grader call may correct before the pass is a `grader_error`.
Each correction re-sends the growing conversation, so a weak model that cannot produce a
valid verdict would otherwise burn its whole step budget (and context window) trying."""

_SKIPPED_GAP = "Not graded: the grader skipped it."

_LAST_ATTEMPT_RAISES = "unreachable: the last attempt re-raises its failure"

_CACHED_AGENTS = 8
"""Sub-agents kept per grader, one per checklist (each has its own verdict schema)."""


class GraderOutputError(RubricStudioError, RuntimeError):
    """The grader answered, but not with a usable verdict."""


@dataclass
class GraderOutcome:
    """What one grading pass concluded, before the loop decides what to do with it.

    Attempts and tokens are not here: they are counted in the pass's `GraderUsage`,
    which also sees the calls of a pass that ends in an exception.
    """

    response: GraderResponse
    """The verdict the loop acts on (a skipped criterion turns `satisfied` into
    `needs_revision`)."""

    criteria: list[CriterionVerdict]
    """Per-criterion verdicts under the rubric's own names, in rubric order."""

    explanation: str
    """The grader's summary, with a note when it skipped criteria."""

    judges: list[JudgeRecord] | None = None
    """Only from a `Panel`: every judge's own verdict, kept on the pass's record (a judge
    that gave no verdict as `grader_error`)."""

    valid_judges: int | None = None
    """Only from a `Panel`: how many judges gave a valid verdict, the ones that decided."""

    def __post_init__(self) -> None:
        """The explanation and each gap cut to `MAX_EXPLANATION_CHARS` / `MAX_GAP_CHARS`,
        the cut marked: a grader's text is kept (and fed back) only up to the limits."""
        self.explanation = cut_text(self.explanation, MAX_EXPLANATION_CHARS)
        for verdict in self.criteria:
            gap = verdict.get("gap")
            if isinstance(gap, str):
                verdict["gap"] = cut_text(gap, MAX_GAP_CHARS)


def check_corrections(messages: Sequence[BaseMessage], limit: int) -> None:
    """Raise `GraderOutputError` once a grader call's verdicts were rejected `limit` times.

    Every GraderResponse call still in the conversation when the model is asked again was
    rejected: invalid JSON, a failed validation, a contradiction.
    """
    attempts = sum(
        1
        for m in messages
        if isinstance(m, AIMessage)
        and any(
            call.get("name") == "GraderResponse" for call in [*m.tool_calls, *m.invalid_tool_calls]
        )
    )
    if attempts > limit:
        last = next((str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage)), "")
        msg = (
            f"the grader did not produce a valid GraderResponse after {limit} "
            f"corrections; the last rejection: {rejection_reason(last)}"
        )
        raise GraderOutputError(msg)


class _CorrectionLimit(CheckBeforeModelCall):
    """Ends a grader call whose verdicts keep being rejected, after `limit` corrections.

    A check around the model call (not a hook node): every node of the grader would add
    checkpoints to the caller's thread.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def check(self, request: ModelRequest[Any]) -> None:
        check_corrections(request.messages, self.limit)


def _config() -> RunnableConfig:
    return {"recursion_limit": GRADER_RECURSION_LIMIT, "run_name": "rubric_grader"}


def _verdict(result: dict[str, Any]) -> GraderResponse:
    response = result.get("structured_response")
    if isinstance(response, dict):
        response = GraderResponse.model_validate(response)
    if not isinstance(response, GraderResponse):
        msg = "the grader finished without calling GraderResponse"
        raise GraderOutputError(msg)
    return response


def _check(
    criteria: Sequence[str], response: GraderResponse
) -> tuple[list[CriterionVerdict], list[str]]:
    """The verdicts in rubric order and the criteria the grader left out.

    A `failed` verdict is aligned like any other, so criteria the rubric does not have
    are never kept; the criteria it leaves out are not counted as skipped (it judged the
    rubric as a whole).
    """
    verdicts, missing = align_criteria(criteria, response)
    if response.result == "failed":
        return verdicts, []
    return verdicts, missing


def _finish(
    response: GraderResponse, verdicts: list[CriterionVerdict], missing: list[str]
) -> GraderOutcome:
    explanation = response.explanation.strip()
    if missing:
        # Twice the grader skipped criteria: they are unverified, so they count as
        # failing and a `satisfied` claim cannot stand.
        skipped: list[CriterionVerdict] = [
            {"name": name, "passed": False, "gap": _SKIPPED_GAP} for name in missing
        ]
        verdicts = [*verdicts, *skipped]
        note = f"The grader skipped {len(missing)} criterion(s) twice; they count as failing."
        if response.result == "satisfied":
            response = response.model_copy(update={"result": pass_result(verdicts)})
        explanation = f"{explanation} ({note})" if explanation else note
    return GraderOutcome(response=response, criteria=verdicts, explanation=explanation)


def _conclude(criteria: Sequence[str], response: GraderResponse) -> GraderOutcome:
    outcome = _finish(response, *_check(criteria, response))
    invented = unmatched_entries(criteria, response)
    if invented:
        listed = ", ".join(quoted(name) for name in invented[:MAX_LISTED_NAMES])
        if len(invented) > MAX_LISTED_NAMES:
            listed += f", and {len(invented) - MAX_LISTED_NAMES:,} more"
        note = (
            f"The verdict also named criteria the rubric does not have ({listed}); they were "
            "not kept"
            + (
                ", and the grader may have misread the rubric."
                if response.result == "failed"
                else "."
            )
        )
        explained = f"{outcome.explanation} ({note})" if outcome.explanation else note
        outcome.explanation = cut_text(explained, MAX_EXPLANATION_CHARS)
    return outcome


def _coverage_problem(
    criteria: Sequence[str], response: GraderResponse, iteration: int
) -> str | None:
    """The correction to send when the verdict left checklist items out, else `None`.

    A `failed` verdict is asked again only when it named criteria the rubric does not
    have: the grader may have misread the rubric rather than found it faulty.
    """
    _, missing = align_criteria(criteria, response)
    if response.result == "failed" and not unmatched_entries(criteria, response):
        return None
    if not missing:
        return None
    logger.warning("%sgrader skipped criteria on pass %d; asking again", log_prefix(), iteration)
    return coverage_correction(missing)


def _budget() -> PassBudget:
    budget = active_budget()
    if budget is None:  # pragma: no cover - grade/agrade always set one
        msg = "a grader call outside a pass: no PassBudget is active"
        raise RuntimeError(msg)
    return budget


@contextmanager
def _keeping_the_first_verdict() -> Iterator[None]:
    """Around the coverage retry: if it fails, log it and let the first verdict stand."""
    try:
        yield
    except GraphBubbleUp:
        raise
    except Exception:
        logger.exception("%scoverage retry failed; keeping the first verdict", log_prefix())


class _Attempt:
    """One grader call of a pass: counted, its tokens added, a retryable failure held back.

    Used as `with attempt: return call()`. When the call fails and the policy allows
    another try, the exception is swallowed and `delay` says how long to wait first;
    otherwise (the last attempt, a lasting failure, `GraphBubbleUp`) it propagates.
    """

    def __init__(
        self, index: int, policy: RetryPolicy, usage: GraderUsage, budget: PassBudget
    ) -> None:
        self.index = index
        self.delay = 0.0
        self._policy = policy
        self._usage = usage
        self._budget = budget
        self._counting = ExitStack()

    def __enter__(self) -> None:
        self._counting.enter_context(self._usage.counting())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self._counting.close()
        if not isinstance(exc, Exception) or isinstance(exc, GraphBubbleUp):
            return False
        delay = self._policy.backoff(exc, self.index)
        if delay is None:
            return False
        # Raises (chained to `exc`) when no time is left for the wait and another call.
        delay = self._budget.retry_delay(delay, describe_exception(exc))
        logger.warning(
            "%stransient grader failure (%s); retry %d in %.2fs",
            log_prefix(),
            describe_exception(exc),
            self.index + 1,
            delay,
        )
        self.delay = delay
        return True


def _attempts(policy: RetryPolicy, usage: GraderUsage, budget: PassBudget) -> Iterator[_Attempt]:
    # At least one call; the policy never lets the last one be swallowed.
    for index in range(max(policy.attempts, 1)):
        yield _Attempt(index, policy, usage, budget)


class Grader:
    """Runs the grader sub-agent for one pass: retries, coverage check, token count.

    Args:
        model: The grader's chat model, or a `"provider:model-id"` for `init_chat_model`.
        system_prompt: Instructions replacing `GRADER_SYSTEM_PROMPT` (`None` keeps it).
        tools: Tools the grader may call for evidence.
        retry: How transient failures are retried.
        budget_chars: Transcript budget (see `render_transcript`).
        limits: Timeout per call, time budget per pass, caps on model and tool calls
            and on the reply text kept (see `GraderLimits`).
        parameter: What the caller calls `model`, for its errors (`model`, `panel`).

    Raises:
        ValueError: `model` is a string that names no usable model (see
            `providers.registry.grader_model`): checked here, before any agent runs.
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        system_prompt: str | None,
        tools: Sequence[BaseTool],
        retry: RetryPolicy,
        budget_chars: int,
        limits: GraderLimits | None = None,
        parameter: str = "model",
    ) -> None:
        self.limits = limits or GraderLimits()
        # Built now (no network): a spec that cannot work fails here, not after the agent ran.
        self.model = grader_model(model, timeout_s=self.limits.timeout_s, parameter=parameter)
        self._system_prompt = system_prompt or GRADER_SYSTEM_PROMPT
        self._tools = list(tools)
        self._retry = retry
        self._budget_chars = budget_chars
        self._cache_markers = wants_cache_markers(model)
        self._agents: dict[tuple[str, ...], CompiledStateGraph[Any, Any, Any, Any]] = {}

    def agent(self, criteria: Sequence[str]) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The grader sub-agent for this checklist (its verdict schema names the items),
        built on first use so constructing the middleware is cheap."""
        key = tuple(criteria)
        if key not in self._agents:
            if len(self._agents) >= _CACHED_AGENTS:
                self._agents.pop(next(iter(self._agents)))
            self._agents[key] = create_agent(
                self.model,
                tools=self._tools,
                system_prompt=self._system_prompt,
                response_format=ToolStrategy(
                    verdict_model(key, dialect=provider_of(self.model)),
                    handle_errors=rejection_message,
                ),
                middleware=[
                    _CorrectionLimit(_MAX_CORRECTIONS),
                    PassLimits(),
                    *([ToolCallLimits()] if self._tools else []),
                ],
                name=RUBRIC_GRADER_MESSAGE_SOURCE,
            )
        return self._agents[key]

    def grade(
        self,
        rubric: str,
        criteria: Sequence[str],
        messages: Sequence[BaseMessage],
        iteration: int,
        usage: GraderUsage,
        *,
        checked: Sequence[CriterionVerdict] = (),
        nonce: str | None = None,
    ) -> GraderOutcome:
        """One grading pass, synchronously.

        A verdict that leaves checklist items out is asked for once more, with a
        correction; if that call fails, the first verdict stands.

        Args:
            rubric: The rubric as written.
            criteria: Its checklist, as `parse_rubric` returns it.
            messages: The agent's conversation.
            iteration: Zero-based index of the pass.
            usage: Where the pass's attempts and tokens are added, even if it raises.
            checked: Verdicts code checks decided this pass, shown to the grader as
                evidence; `criteria` must not include them.
            nonce: The grading run's payload nonce (`nonce.grading_nonce`), so its passes
                share a payload prefix; a fresh one per payload if `None`.

        Raises:
            Exception: Whatever the grader raised once retries were spent (the loop
                records it as `grader_error`); `GraphBubbleUp` at once.
        """
        ask = functools.partial(
            self._input, rubric, criteria, messages, iteration, checked, nonce=nonce
        )
        call = functools.partial(self._call, criteria, usage=usage)
        budget = PassBudget(self.limits)
        try:
            with spending(budget):
                first = call(ask())
                if (correction := _coverage_problem(criteria, first, iteration)) is not None:
                    with _keeping_the_first_verdict():
                        return _conclude(criteria, call(ask(correction)))
        finally:
            usage.attempts += budget.requests  # every request sent, however the pass ended
        return _conclude(criteria, first)

    async def agrade(
        self,
        rubric: str,
        criteria: Sequence[str],
        messages: Sequence[BaseMessage],
        iteration: int,
        usage: GraderUsage,
        *,
        checked: Sequence[CriterionVerdict] = (),
        nonce: str | None = None,
    ) -> GraderOutcome:
        """One grading pass, asynchronously. Mirrors `grade`; only the calls are awaited."""
        ask = functools.partial(
            self._input, rubric, criteria, messages, iteration, checked, nonce=nonce
        )
        call = functools.partial(self._acall, criteria, usage=usage)
        budget = PassBudget(self.limits)
        try:
            with spending(budget):
                first = await call(ask())
                if (correction := _coverage_problem(criteria, first, iteration)) is not None:
                    with _keeping_the_first_verdict():
                        return _conclude(criteria, await call(ask(correction)))
        finally:
            usage.attempts += budget.requests
        return _conclude(criteria, first)

    def _input(
        self,
        rubric: str,
        criteria: Sequence[str],
        messages: Sequence[BaseMessage],
        iteration: int,
        checked: Sequence[CriterionVerdict],
        correction: str | None = None,
        *,
        nonce: str | None = None,
    ) -> dict[str, Any]:
        parts = payload_parts(
            rubric,
            criteria,
            messages,
            iteration=iteration,
            budget_chars=self._budget_chars,
            correction=correction,
            checked=checked,
            nonce=nonce,
        )
        return {"messages": [payload_message(parts, cache_markers=self._cache_markers)]}

    # The retry loops: `_Attempt` holds everything but the call and the wait.

    def _call(
        self,
        criteria: Sequence[str],
        grader_input: dict[str, Any],
        *,
        usage: GraderUsage,
    ) -> GraderResponse:
        agent = self.agent(criteria)
        for attempt in _attempts(self._retry, usage, _budget()):
            with attempt:
                return _verdict(agent.invoke(grader_input, _config()))
            time.sleep(attempt.delay)
        raise AssertionError(_LAST_ATTEMPT_RAISES)

    async def _acall(
        self,
        criteria: Sequence[str],
        grader_input: dict[str, Any],
        *,
        usage: GraderUsage,
    ) -> GraderResponse:
        agent = self.agent(criteria)
        for attempt in _attempts(self._retry, usage, _budget()):
            with attempt:
                return _verdict(await agent.ainvoke(grader_input, _config()))
            await asyncio.sleep(attempt.delay)
        raise AssertionError(_LAST_ATTEMPT_RAISES)
