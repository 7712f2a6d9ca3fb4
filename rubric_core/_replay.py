"""A chat model that replays scripted turns: the offline demo models and the tests' fakes."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

ScriptedTurn = AIMessage | Callable[[list[BaseMessage]], AIMessage]
"""One scripted reply: a fixed message, or a function of the conversation so far
(used where a replayed grader reads a real tool result before it answers)."""


class ReplayExhaustedError(RuntimeError):
    """The replay model was asked for more turns than its script holds."""


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


class ReplayChatModel(BaseChatModel):
    """Replays scripted responses; it is not a language model and reads nothing.

    Each call returns the next scripted turn (tool calls included), so a whole
    agent run can be shown offline and deterministically. Token usage is an
    estimate (characters / 4) so token accounting has something to show.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> model = ReplayChatModel(scenario="demo", turns=[AIMessage("hello")])
        >>> model.invoke("hi").content
        'hello'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scenario: str = "scripted"
    """Name shown in `model_name` as `replay:<scenario>`."""

    turns: Sequence[Any] = Field(default_factory=list)
    """The script: `AIMessage`s or callables `messages -> AIMessage`, in order."""

    latency_s: float = 0.0
    """Seconds each call sleeps, to imitate a real provider's latency."""

    cycle: bool = False
    """Start the script again when it is exhausted instead of raising."""

    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    calls: list[list[BaseMessage]] = Field(default_factory=list, exclude=True)
    """Every conversation the model was called with, for tests and inspection."""

    @property
    def model_name(self) -> str:
        return f"replay:{self.scenario}"

    @property
    def _llm_type(self) -> str:
        return "replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"scenario": self.scenario}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReplayChatModel:
        # The script already says which tools are called; binding changes nothing.
        return self

    def _next_turn(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self.calls.append(list(messages))
            if self._index >= len(self.turns):
                if not self.cycle or not self.turns:
                    msg = (
                        f"replay model 'replay:{self.scenario}' has replayed all "
                        f"{len(self.turns)} scripted turns and has nothing more to say"
                    )
                    raise ReplayExhaustedError(msg)
                self._index = 0
            turn = self.turns[self._index]
            self._index += 1
        message = turn(list(messages)) if callable(turn) else turn
        message = message.model_copy(deep=True)
        if not message.id:
            message.id = f"replay-{uuid.uuid4().hex[:12]}"
        if message.usage_metadata is None:
            prompt_tokens = sum(_estimate_tokens(_message_text(m)) for m in messages)
            output_tokens = _estimate_tokens(_message_text(message)) + 8 * len(message.tool_calls)
            message.usage_metadata = {
                "input_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "total_tokens": prompt_tokens + output_tokens,
            }
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return ChatResult(generations=[ChatGeneration(message=self._next_turn(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return ChatResult(generations=[ChatGeneration(message=self._next_turn(messages))])

    def reset(self) -> None:
        """Rewind the script to its first turn and forget recorded calls."""
        with self._lock:
            self._index = 0
            self.calls.clear()


def verdict_turn(
    result: str,
    criteria: Sequence[tuple[str, bool] | tuple[str, bool, str]],
    explanation: str = "",
) -> AIMessage:
    """A grader turn that answers with a `GraderResponse` tool call.

    Examples:
        >>> turn = verdict_turn("satisfied", [("has a title", True)], "All good.")
        >>> turn.tool_calls[0]["name"]
        'GraderResponse'
    """
    items = []
    for entry in criteria:
        name, passed = entry[0], entry[1]
        item: dict[str, Any] = {"name": name, "passed": passed}
        if not passed:
            item["gap"] = entry[2] if len(entry) > 2 else f"{name}: not met yet"
        items.append(item)
    return AIMessage(
        content="",
        tool_calls=[
            {
                "name": "GraderResponse",
                "args": {"criteria": items, "explanation": explanation, "result": result},
                "id": f"call_{uuid.uuid4().hex[:10]}",
                "type": "tool_call",
            }
        ],
    )


def tool_call_turn(name: str, args: dict[str, Any], content: str = "") -> AIMessage:
    """A turn that calls one tool."""
    return AIMessage(
        content=content,
        tool_calls=[
            {
                "name": name,
                "args": args,
                "id": f"call_{uuid.uuid4().hex[:10]}",
                "type": "tool_call",
            }
        ],
    )
