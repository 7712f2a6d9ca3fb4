"""What one grading pass may spend: wall-clock time, model calls, tool calls, reply size.

Every grader model call and tool call of a pass goes through one `PassBudget`, whatever
path makes it (the sub-agent graph's middleware `PassLimits`, or a direct model call):
`start_model_call` before each model call, `keep_reply` on what comes back,
`start_tool_call` before each tool runs, `retry_delay` before a backoff sleep. A limit
that is hit raises `GraderLimitError`, which is not transient, so the pass ends as a
`grader_error` whose explanation names the limit (and the tool the grader kept calling).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import threading
import time
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.errors import RubricStudioError
from rubric_core.grader.prompt import PLAIN_TEXT_CORRECTION
from rubric_core.grader.replies import no_reply_error, raised_for_no_reply
from rubric_core.providers.registry import takes_call_timeout

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.messages import BaseMessage, ToolMessage
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command

_CUT_NOTE = "\n[... {cut} characters cut: the grader keeps at most {limit} characters of a reply]"


@dataclass(frozen=True)
class GraderLimits:
    """The bounds of one judge's grading pass. Defaults suit hosted models and local ones.

    Attributes:
        timeout_s: One model call (one HTTP request). Applied to the client of a grader
            given as a `"provider:model-id"` string or as a LangChain OpenAI model, and to
            each call's own `timeout` where the client takes one.
        pass_budget_s: Everything one judge does for one pass: calls, corrections, tool
            rounds, retries and their waits. No call starts, and no retry waits, past it.
        max_model_calls: Model calls per pass (corrections, coverage re-asks, tool rounds
            and plain-text replies all count; retries after transient failures too).
        max_tool_calls: Tool calls per pass.
        max_identical_tool_calls: Calls of one tool with the same arguments per pass.
        max_reply_chars: Characters of one reply's text the grader keeps in its
            conversation (the rest is cut), so a rambling model cannot grow every later
            request by its whole reply.

    Examples:
        >>> GraderLimits().timeout_s, GraderLimits().pass_budget_s
        (120.0, 600.0)
    """

    timeout_s: float = 120.0
    pass_budget_s: float = 600.0
    max_model_calls: int = 12
    max_tool_calls: int = 24
    max_identical_tool_calls: int = 3
    max_reply_chars: int = 20_000

    def __post_init__(self) -> None:
        for name in ("timeout_s", "pass_budget_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                msg = f"{name} must be a finite number of seconds above 0, got {value!r}"
                raise ValueError(msg)
        for name in (
            "max_model_calls",
            "max_tool_calls",
            "max_identical_tool_calls",
            "max_reply_chars",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"{name} must be an int of at least 1, got {value!r}"
                raise ValueError(msg)


class GraderLimitError(RubricStudioError, RuntimeError):
    """A grading pass hit one of its `GraderLimits`; never retried."""


class GraderCallTimeout(RubricStudioError, TimeoutError):
    """One grader model call ran past its timeout as a whole; transient, so retried.

    A client's timeout bounds each read: a server that sends a byte now and then keeps a
    call alive for ever. This one bounds the call from its start to its reply.
    """


def _seconds(value: float) -> str:
    return f"{value:g} s"


class PassBudget:
    """What one judge's pass has spent, checked against its `GraderLimits`.

    Thread-safe: a grader's parallel tool calls may report at once.

    Examples:
        >>> budget = PassBudget(GraderLimits(max_identical_tool_calls=1))
        >>> budget.start_tool_call("count_words", {"text": "a b"})
        >>> budget.start_tool_call("count_words", {"text": "a b"})
        Traceback (most recent call last):
        ...
        rubric_core.grader.budget.GraderLimitError: the grader kept calling count_words with the same arguments (2 times in this pass; at most 1) instead of answering with GraderResponse
    """

    def __init__(
        self, limits: GraderLimits, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._deadline = clock() + limits.pass_budget_s
        self._lock = threading.Lock()
        self.model_calls = 0
        self.requests = 0
        """Model calls that went ahead (one HTTP request each: the grader's clients do not
        retry by themselves); a call refused by a limit is not one."""
        self.tool_calls = 0
        self._by_tool: Counter[str] = Counter()
        self._identical: Counter[tuple[str, str]] = Counter()

    def remaining_s(self) -> float:
        """Seconds left of the pass's budget (never negative)."""
        return max(0.0, self._deadline - self._clock())

    def out_of_time(self, what: str) -> GraderLimitError:
        return GraderLimitError(
            f"the grader's time budget of {_seconds(self.limits.pass_budget_s)} per pass "
            f"ran out {what} ({self.model_calls} model call(s) made)"
        )

    def start_model_call(self) -> float:
        """Count a model call about to be made; the seconds left for it.

        Raises:
            GraderLimitError: The pass's time or its model calls are spent.
        """
        remaining = self.remaining_s()
        if remaining <= 0:
            raise self.out_of_time("before the next model call")
        with self._lock:
            self.model_calls += 1
            calls = self.model_calls
        if calls > self.limits.max_model_calls:
            msg = (
                f"the grader made {self.limits.max_model_calls} model calls in this pass "
                "(the limit) without a usable GraderResponse"
            )
            raise GraderLimitError(msg)
        with self._lock:
            self.requests += 1
        return remaining

    def keep_reply(self, message: BaseMessage) -> BaseMessage:
        """The reply as the grader keeps it: its text cut to `max_reply_chars`.

        Examples:
            >>> budget = PassBudget(GraderLimits(max_reply_chars=5))
            >>> budget.keep_reply(AIMessage("abcdefgh")).content.splitlines()[0]
            'abcde'
        """
        if not isinstance(message, AIMessage):
            return message
        limit = self.limits.max_reply_chars
        text = message.content if isinstance(message.content, str) else message.text
        invalid = [
            {**call, "args": _cut(call.get("args"), limit)} for call in message.invalid_tool_calls
        ]
        if len(text) <= limit and invalid == message.invalid_tool_calls:
            return message
        content = text if len(text) <= limit else _cut(text, limit)
        return message.model_copy(update={"content": content, "invalid_tool_calls": invalid})

    def start_tool_call(self, name: str, args: object) -> None:
        """Count a tool call about to run.

        Raises:
            GraderLimitError: Naming the tool, when the grader repeats one call or makes
                too many; or when the pass's time is spent.
        """
        if self.remaining_s() <= 0:
            raise self.out_of_time(f"before a call of {name}")
        key = (name, json.dumps(args, sort_keys=True, default=str))
        with self._lock:
            self.tool_calls += 1
            self._by_tool[name] += 1
            self._identical[key] += 1
            repeats, total = self._identical[key], self.tool_calls
            most, most_count = self._by_tool.most_common(1)[0]
        if repeats > self.limits.max_identical_tool_calls:
            msg = (
                f"the grader kept calling {name} with the same arguments ({repeats} times in "
                f"this pass; at most {self.limits.max_identical_tool_calls}) instead of "
                "answering with GraderResponse"
            )
            raise GraderLimitError(msg)
        if total > self.limits.max_tool_calls:
            msg = (
                f"the grader made more than {self.limits.max_tool_calls} tool calls in this "
                f"pass without answering (it kept calling {most}: {most_count} times)"
            )
            raise GraderLimitError(msg)

    def retry_delay(self, delay: float, failure: str) -> float:
        """The backoff `delay` if a retry still fits the pass's time budget.

        Raises:
            GraderLimitError: No time is left for the wait and another call.
        """
        if delay >= self.remaining_s():
            raise self.out_of_time(f"waiting to retry after {failure}")
        return delay


def _cut(value: Any, limit: int) -> Any:
    if not isinstance(value, str) or len(value) <= limit:
        return value
    return value[:limit] + _CUT_NOTE.format(cut=len(value) - limit, limit=limit)


_ACTIVE: ContextVar[PassBudget | None] = ContextVar("rubric_grader_budget", default=None)


@contextmanager
def spending(budget: PassBudget) -> Iterator[PassBudget]:
    """Make `budget` the one every grader model and tool call inside the block counts against."""
    token = _ACTIVE.set(budget)
    try:
        yield budget
    finally:
        _ACTIVE.reset(token)


def active_budget() -> PassBudget | None:
    """The budget of the pass being graded in this context, if any."""
    return _ACTIVE.get()


def call_timeout(model: object, remaining: float) -> float | None:
    """The per-call `timeout` to send: `remaining` where the client honours one (OpenAI's)
    and the pass has less time left than the client's own timeout, else `None`."""
    if not takes_call_timeout(model):
        return None
    own = getattr(model, "request_timeout", None)
    if own is not None and (not isinstance(own, int | float) or own <= remaining):
        return None  # the client's own timeout comes first (or is not a plain number)
    return remaining


def _with_call_timeout(request: ModelRequest[Any], remaining: float) -> ModelRequest[Any]:
    """The request with a per-call `timeout` where `call_timeout` gives one."""
    timeout = call_timeout(request.model, remaining)
    if timeout is None:
        return request
    return request.override(model_settings={**request.model_settings, "timeout": timeout})


def _kept(budget: PassBudget, response: ModelResponse[Any]) -> ModelResponse[Any]:
    """The response as the grader keeps it: replies cut, and a plain-text reply (no tool
    call, no verdict) followed by a reminder to answer with the verdict tool (otherwise a
    grader without tools is simply asked again with the same conversation)."""
    kept: list[BaseMessage] = [budget.keep_reply(m) for m in response.result]
    if response.structured_response is None and not any(
        isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls) for m in kept
    ):
        kept.append(HumanMessage(PLAIN_TEXT_CORRECTION))
    response.result = kept
    return response


def _call_model(
    request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
) -> ModelResponse[Any]:
    try:
        return handler(request)
    except IndexError as exc:
        if raised_for_no_reply(exc):
            raise no_reply_error(exc) from exc
        raise


_Reply = TypeVar("_Reply")


def whole_call_s(model: object, limits: GraderLimits) -> float:
    """How long one call of `model` may take from start to reply: the client's own
    timeout when it is a plain number of seconds (the grader gives its clients
    `GraderLimits.timeout_s`, and keeps a model object's own), else `timeout_s`."""
    for name in ("request_timeout", "default_request_timeout"):
        own = getattr(model, name, None)
        if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
            return float(own)
    return limits.timeout_s


_GRACE_S = 0.5
"""How much longer than its timeout a call is waited for, so that a client's own timeout,
which names its cause, is the one reported when it fires."""


def _timed_out(budget: PassBudget, timeout_s: float) -> Exception:
    if budget.remaining_s() <= 0:
        return budget.out_of_time("during a model call")
    return GraderCallTimeout(
        f"the grader's model call took longer than its timeout of {_seconds(timeout_s)} "
        "from request to reply (a server that answers slowly, or drips its reply)"
    )


def call_model(call: Callable[[], _Reply], budget: PassBudget, timeout_s: float) -> _Reply:
    """Make a sync grader model call, bounded as a whole by `timeout_s` and by the pass's
    remaining time; an empty reply becomes an `EmptyReplyError`.

    The call runs on a worker thread (in a copy of this context), so it can be abandoned
    at the deadline: a sync HTTP client cannot be interrupted, and its timeout bounds
    each read, not the call. An abandoned call's thread ends when its connection does.
    """
    wait = min(timeout_s + _GRACE_S, budget.remaining_s())
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["reply"] = context.run(call)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="rubric-grader-call", daemon=True).start()
    if not done.wait(wait):
        raise _timed_out(budget, timeout_s)
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, IndexError) and raised_for_no_reply(exc):
            raise no_reply_error(exc) from exc
        raise exc
    reply: _Reply = outcome["reply"]
    return reply


async def acall_model(
    call: Awaitable[_Reply], budget: PassBudget, timeout_s: float | None = None
) -> _Reply:
    """Await a grader model call, cancelled when `timeout_s` (the whole call) or the
    pass's time runs out; an empty reply becomes an `EmptyReplyError`."""
    limit = budget.limits.timeout_s if timeout_s is None else timeout_s
    try:
        return await asyncio.wait_for(call, timeout=min(limit + _GRACE_S, budget.remaining_s()))
    except TimeoutError:  # asyncio's (an HTTP client's timeouts are other types)
        raise _timed_out(budget, limit) from None
    except IndexError as exc:
        if raised_for_no_reply(exc):
            raise no_reply_error(exc) from exc
        raise


class PassLimits(AgentMiddleware[AgentState[Any], Any, Any]):
    """The sub-agent's side of `PassBudget`: every model and tool call is counted and bounded.

    Every model call is bounded as a whole, from request to reply, by its client's
    timeout and by the pass's remaining time: async calls are cancelled, sync ones run on
    a worker thread that is abandoned at the deadline (`call_model`).
    """

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        budget = active_budget()
        if budget is None:
            return _call_model(request, handler)
        seconds = budget.start_model_call()
        timed = _with_call_timeout(request, seconds)
        response = call_model(
            lambda: handler(timed), budget, whole_call_s(request.model, budget.limits)
        )
        return _kept(budget, response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        budget = active_budget()
        if budget is None:
            return await handler(request)
        seconds = budget.start_model_call()
        response = await acall_model(
            handler(_with_call_timeout(request, seconds)),
            budget,
            whole_call_s(request.model, budget.limits),
        )
        return _kept(budget, response)


class ToolCallLimits(AgentMiddleware[AgentState[Any], Any, Any]):
    """Every tool call of the grader counted against the pass's `PassBudget`.

    Separate from `PassLimits` and added only to a grader that has tools: a middleware
    that wraps tool calls gives the graph a tool node, and with it a plain-text reply
    would end the call instead of being asked again.
    """

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        budget = active_budget()
        if budget is not None:
            budget.start_tool_call(request.tool_call["name"], request.tool_call.get("args"))
        return handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        budget = active_budget()
        if budget is not None:
            budget.start_tool_call(request.tool_call["name"], request.tool_call.get("args"))
        return await handler(request)
