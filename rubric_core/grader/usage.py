"""Token and attempt accounting for grader calls, whatever the provider calls its usage."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration
from langchain_core.tracers.context import register_configure_hook

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_core.outputs import LLMResult


class _TokenCounter(BaseCallbackHandler):
    """Sums the token usage every chat model call reports, whatever its provider names it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.input_tokens = 0
        self.output_tokens = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                if not isinstance(generation, ChatGeneration):
                    continue
                usage = getattr(generation.message, "usage_metadata", None) or {}
                with self._lock:
                    self.input_tokens += int(usage.get("input_tokens", 0) or 0)
                    self.output_tokens += int(usage.get("output_tokens", 0) or 0)


_COUNTER: ContextVar[_TokenCounter | None] = ContextVar("rubric_grader_usage", default=None)
# Registered once: every chat model call made while `_COUNTER` holds a handler reports its
# token usage to it, failed grader calls included. (langchain's get_usage_metadata_callback
# registers a new hook on every use, which would grow a global list with every pass.)
register_configure_hook(_COUNTER, inheritable=True)


@dataclass
class GraderUsage:
    """What one grading pass has spent so far, retries and corrections included.

    The middleware creates one per pass and hands it to `Grader.grade`, so the counts
    survive a grader call that raises: a `grader_error` pass still reports its tokens.

    Attributes:
        attempts: Requests sent to the grader's model: every model call of the pass
            (transient-failure retries, corrections, coverage re-asks and tool rounds
            count). The grader turns its OpenAI and Anthropic clients' own retries off,
            so each is one HTTP request; another model object's client may retry inside
            a call unseen (give it `max_retries=0`).
        input_tokens: Input tokens the grader's model reported (0 if it reports none).
        output_tokens: Output tokens the grader's model reported (0 if it reports none).

    Examples:
        >>> usage = GraderUsage()
        >>> with usage.counting():
        ...     pass
        >>> usage
        GraderUsage(attempts=0, input_tokens=0, output_tokens=0)
    """

    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Add the tokens of every chat model call made inside the block, even if it raises."""
        counter = _TokenCounter()
        token = _COUNTER.set(counter)
        try:
            yield
        finally:
            _COUNTER.reset(token)
            self.input_tokens += counter.input_tokens
            self.output_tokens += counter.output_tokens
