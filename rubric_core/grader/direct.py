"""The grader without a sub-graph: its model called directly, with the verdict tool bound.

A grader that has no tools needs no agent loop: every step is one model call that either
answers with a valid `GraderResponse` or gets a correction. `DirectGrader` runs that
conversation itself, so a pass costs a model call and nothing of LangGraph (no sub-graph
to run, no checkpoints written into the caller's thread, no middleware wrapper traced per
call). It keeps what the sub-agent does, step for step:

- the same system message, payload and bound tool (`tool_choice="any"`, the tool that
  `ToolStrategy(GraderResponse)` builds);
- a verdict that fails to parse or validate, several verdicts at once, or malformed
  arguments get a rejection (`prompt.rejection_message`) as the tool's answer, and the
  model is asked again (a plain-text reply is reminded to use the tool); after
  `_MAX_CORRECTIONS` rejections the call is a `GraderOutputError`;
- the same per-rubric verdict schema (`verdict_schema.verdict_model`), and the same
  `PassBudget`: every model call counted against its cap and its time, a per-call
  timeout where the client takes one, async calls cancelled when the time runs out,
  each reply's text cut to the kept size, an empty reply an `EmptyReplyError`;
- retries, coverage retry and attempts as `Grader` (it is one).

Tokens are read from each reply's `usage_metadata` instead of through a callback handler:
the same numbers (the callback reads the same field), without a handler per call.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from langchain.agents.structured_output import (
    MultipleStructuredOutputsError,
    OutputToolBinding,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.errors import GraphRecursionError

from rubric_core.grader.budget import (
    PassBudget,
    acall_model,
    call_model,
    call_timeout,
    whole_call_s,
)
from rubric_core.grader.prompt import PLAIN_TEXT_CORRECTION, rejection_message
from rubric_core.grader.retry import GRADER_RECURSION_LIMIT
from rubric_core.grader.subagent import (
    _CACHED_AGENTS,
    _LAST_ATTEMPT_RAISES,
    _MAX_CORRECTIONS,
    Grader,
    _Attempt,
    _budget,
    check_corrections,
)
from rubric_core.grader.verdict_schema import verdict_model
from rubric_core.providers.registry import provider_of
from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE, GraderResponse

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import Runnable, RunnableConfig

    from rubric_core.grader.budget import GraderLimits
    from rubric_core.grader.retry import RetryPolicy
    from rubric_core.grader.usage import GraderUsage

__all__ = ["DirectGrader"]

_CONFIG: RunnableConfig = {"run_name": RUBRIC_GRADER_MESSAGE_SOURCE}
_STEP_LIMIT_MESSAGE = (
    f"Recursion limit of {GRADER_RECURSION_LIMIT} reached without a valid GraderResponse"
)


class _UncountedAttempt(_Attempt):
    """An attempt whose tokens the conversation adds itself (no callback handler)."""

    def __enter__(self) -> None:
        return None


def _attempts(
    policy: RetryPolicy, usage: GraderUsage, budget: PassBudget
) -> Iterator[_UncountedAttempt]:
    for index in range(max(policy.attempts, 1)):
        yield _UncountedAttempt(index, policy, usage, budget)


class _Conversation:
    """One grader call's messages, and what each model reply does to them."""

    def __init__(self, system: SystemMessage, grader_input: dict[str, Any]) -> None:
        self.messages: list[BaseMessage] = [system, *grader_input["messages"]]
        self.steps = 0

    def before_call(self) -> None:
        """Raise if the call has spent its steps or its corrections."""
        if self.steps >= GRADER_RECURSION_LIMIT:
            raise GraphRecursionError(_STEP_LIMIT_MESSAGE)
        check_corrections(self.messages, _MAX_CORRECTIONS)
        self.steps += 1

    def take(self, reply: BaseMessage, usage: GraderUsage) -> GraderResponse | None:
        """Add a reply (and its rejection, if any); the verdict once one is valid."""
        if not isinstance(reply, AIMessage):
            msg = f"the grader model returned a {type(reply).__name__}, not an AIMessage"
            raise TypeError(msg)
        reply.name = RUBRIC_GRADER_MESSAGE_SOURCE
        if reply.usage_metadata is not None:
            usage.input_tokens += int(reply.usage_metadata.get("input_tokens", 0) or 0)
            usage.output_tokens += int(reply.usage_metadata.get("output_tokens", 0) or 0)
        self.messages.append(reply)
        verdicts = [c for c in reply.tool_calls if c["name"] == GraderResponse.__name__]
        if len(verdicts) > 1:
            several = MultipleStructuredOutputsError([c["name"] for c in verdicts], reply)
            self._reject(several, [c["id"] for c in verdicts])
            return None
        if verdicts:
            try:
                return GraderResponse.model_validate(verdicts[0]["args"])
            except Exception as exc:
                error = StructuredOutputValidationError(verdicts[0]["name"], exc, reply)
                self._reject(error, [verdicts[0]["id"]])
                return None
        for call in reply.invalid_tool_calls:
            # Malformed JSON arguments: answered so the conversation stays well formed.
            self._reject(
                ValueError(
                    f"the arguments of tool call {call.get('name') or 'unknown'} were "
                    "malformed or truncated JSON"
                ),
                [call.get("id")],
                name=call.get("name") or "unknown",
            )
        if not reply.tool_calls and not reply.invalid_tool_calls:
            # Plain text: asked again with a reminder, as the sub-agent's `PassLimits` does.
            self.messages.append(HumanMessage(PLAIN_TEXT_CORRECTION))
        return None

    def _reject(
        self, error: Exception, call_ids: list[str | None], *, name: str = "GraderResponse"
    ) -> None:
        content = rejection_message(error)
        self.messages.extend(
            ToolMessage(content=content, tool_call_id=call_id, name=name, status="error")
            for call_id in call_ids
            if call_id is not None
        )


class DirectGrader(Grader):
    """A `Grader` without tools: its model is called directly, no sub-agent graph.

    Same arguments, payload, corrections, retries and records as `Grader`
    (`judges.build_judges` picks it whenever the grader has no tools).
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        system_prompt: str | None,
        retry: RetryPolicy,
        budget_chars: int,
        limits: GraderLimits | None = None,
        parameter: str = "model",
    ) -> None:
        super().__init__(
            model,
            system_prompt=system_prompt,
            tools=(),
            retry=retry,
            budget_chars=budget_chars,
            limits=limits,
            parameter=parameter,
        )
        self._bound: dict[tuple[str, ...], Runnable[Any, Any]] = {}
        self._system = SystemMessage(self._system_prompt)

    def bound_model(self, criteria: Sequence[str]) -> Runnable[Any, Any]:
        """The grader model with this checklist's `GraderResponse` bound and forced, built
        on first use (one per checklist: each has its own verdict schema)."""
        key = tuple(criteria)
        if key not in self._bound:
            if len(self._bound) >= _CACHED_AGENTS:
                self._bound.pop(next(iter(self._bound)))
            schema = verdict_model(key, dialect=provider_of(self.model))
            binding = OutputToolBinding.from_schema_spec(ToolStrategy(schema).schema_specs[0])
            self._bound[key] = self.model.bind_tools([binding.tool], tool_choice="any")
        return self._bound[key]

    def _timeout(self, budget: PassBudget) -> dict[str, float]:
        """Counts the model call about to be made; its `timeout=` keyword, if any."""
        timeout = call_timeout(self.model, budget.start_model_call())
        return {} if timeout is None else {"timeout": timeout}

    def _call(
        self, criteria: Sequence[str], grader_input: dict[str, Any], *, usage: GraderUsage
    ) -> GraderResponse:
        bound, budget = self.bound_model(criteria), _budget()
        for attempt in _attempts(self._retry, usage, budget):
            with attempt:
                conversation = _Conversation(self._system, grader_input)
                while True:
                    conversation.before_call()
                    timeout = self._timeout(budget)
                    sent = list(conversation.messages)
                    reply = call_model(
                        lambda: bound.invoke(sent, _CONFIG, **timeout),  # noqa: B023
                        budget,
                        whole_call_s(self.model, budget.limits),
                    )
                    if (verdict := conversation.take(budget.keep_reply(reply), usage)) is not None:
                        return verdict
            time.sleep(attempt.delay)
        raise AssertionError(_LAST_ATTEMPT_RAISES)

    async def _acall(
        self, criteria: Sequence[str], grader_input: dict[str, Any], *, usage: GraderUsage
    ) -> GraderResponse:
        bound, budget = self.bound_model(criteria), _budget()
        for attempt in _attempts(self._retry, usage, budget):
            with attempt:
                conversation = _Conversation(self._system, grader_input)
                while True:
                    conversation.before_call()
                    call = bound.ainvoke(conversation.messages, _CONFIG, **self._timeout(budget))
                    reply = await acall_model(call, budget, whole_call_s(self.model, budget.limits))
                    if (verdict := conversation.take(budget.keep_reply(reply), usage)) is not None:
                        return verdict
            await asyncio.sleep(attempt.delay)
        raise AssertionError(_LAST_ATTEMPT_RAISES)
