"""Chat models that replay scripted turns: the offline demo models and the tests' fakes.

They are not language models: every reply comes from a script, in order, so a run is
offline and deterministic. `replay:<scenario>` specs resolve to `ScenarioReplayChatModel`.
"""

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

from rubric_core.messages import message_text
from rubric_core.providers.errors import ReplayExhaustedError
from rubric_core.schema import REPLAY_PREFIX

ScriptedTurn = AIMessage | Callable[[list[BaseMessage]], AIMessage]
"""One scripted reply: a fixed message, or a function of the conversation so far
(used where a replayed grader reads a real tool result before it answers)."""


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _ends_attempt(turn: Any) -> bool:
    """Whether a scripted grader turn ends a grader attempt (a verdict or a scripted failure)."""
    if callable(turn):
        try:
            turn = turn([])
        except Exception:  # a scripted failure ends the attempt
            return True
    return any(call["name"] == "GraderResponse" for call in getattr(turn, "tool_calls", []))


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

    per_thread: bool = False
    """Keep one script position per LangGraph thread (the `thread_id` of the run calling
    it), so one instance serves every run of a batch as a fresh one would serve each.
    Such a model does not record `calls` (they would pile up over a batch)."""

    _index: int = PrivateAttr(default=0)
    _positions: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    calls: list[list[BaseMessage]] = Field(default_factory=list, exclude=True)
    """Every conversation the model was called with, for tests and inspection."""

    @property
    def model_name(self) -> str:
        return f"{REPLAY_PREFIX}{self.scenario}"

    @property
    def _llm_type(self) -> str:
        return "replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"scenario": self.scenario}

    def __repr_args__(self) -> Any:
        # What names a replay model; not its script or its recorded calls. LangChain's
        # callbacks serialise every model through repr() once per instance, and comparing
        # and printing a whole scenario script cost more than the replay itself.
        return [("scenario", self.scenario), ("latency_s", self.latency_s), ("cycle", self.cycle)]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReplayChatModel:
        # The script already says which tools are called; binding changes nothing.
        return self

    def _thread(self) -> str | None:
        """The calling run's thread when positions are kept per thread, else `None`."""
        if not self.per_thread:
            return None
        from langgraph.config import get_config

        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # called outside a graph run
            return None
        return str(thread) if thread is not None else None

    def _next_turn(self, messages: list[BaseMessage]) -> AIMessage:
        thread = self._thread()
        with self._lock:
            if thread is None:
                self.calls.append(list(messages))
            index = self._index if thread is None else self._positions.get(thread, 0)
            if index >= len(self.turns):
                if not self.cycle or not self.turns:
                    msg = (
                        f"replay model {self.model_name!r} has replayed all "
                        f"{len(self.turns)} scripted turns and has nothing more to say"
                    )
                    raise ReplayExhaustedError(msg)
                index = 0
            turn = self.turns[index]
            if thread is None:
                self._index = index + 1
            else:
                self._positions[thread] = index + 1
        scripted: AIMessage = turn(list(messages)) if callable(turn) else turn
        message = scripted.model_copy(deep=True)
        if not message.id:
            message.id = f"replay-{uuid.uuid4().hex[:12]}"
        if message.usage_metadata is None:
            prompt_tokens = sum(_estimate_tokens(message_text(m)) for m in messages)
            output_tokens = _estimate_tokens(message_text(message)) + 8 * len(message.tool_calls)
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
            self._positions.clear()
            self.calls.clear()

    def forget(self, thread_id: str) -> None:
        """Drop the script position of a thread (a `per_thread` model's run is done)."""
        with self._lock:
            self._positions.pop(thread_id, None)

    def fast_forward(
        self, consumed: int, *, verdicts_only: bool, thread_id: str | None = None
    ) -> None:
        """Skip the turns of the script that the stored part of a resumed run used up.

        A resumed run gets fresh replay models whose scripts start at turn 0.

        Args:
            consumed: For the agent, its answers already in the checkpoint: that many
                turns are skipped. For the grader, the grader attempts already made.
            verdicts_only: Count only the turns that end a grader attempt (a
                `GraderResponse` call, or a scripted failure): each attempt's tool-call
                turns are skipped along with the verdict that ends it.
            thread_id: For a `per_thread` model, the thread whose position moves.

        Examples:
            >>> from langchain_core.messages import AIMessage
            >>> grader = ReplayChatModel(turns=[
            ...     tool_call_turn("count_syllables", {"text": "a"}),
            ...     verdict_turn("needs_revision", [("is a haiku", False)]),
            ...     verdict_turn("satisfied", [("is a haiku", True)]),
            ... ])
            >>> grader.fast_forward(1, verdicts_only=True)
            >>> grader.invoke("grade").tool_calls[0]["args"]["result"]
            'satisfied'
        """
        turns = list(self.turns)
        if consumed <= 0 or not turns:
            return
        index = consumed
        if verdicts_only:
            ends: dict[int, bool] = {}
            index = seen = 0
            while seen < consumed and (index < len(turns) or self.cycle):
                position = index % len(turns)
                if position not in ends:
                    ends[position] = _ends_attempt(turns[position])
                elif not any(ends.values()):
                    break  # a cycling script without a verdict: no attempt ever ends
                seen += ends[position]
                index += 1
        if self.cycle:
            index %= len(turns)
        with self._lock:
            if self.per_thread and thread_id is not None:
                self._positions[thread_id] = min(index, len(turns))
            else:
                self._index = min(index, len(turns))


class ScenarioReplayChatModel(ReplayChatModel):
    """Replays the scripted turns of a bundled scenario; it is not a language model.

    Every answer comes from `rubric_core/scenarios/<scenario>.json`, in order, so a run
    is offline and deterministic. Its `model_name` is `replay:<scenario>`.
    """

    description: str = Field(
        default="Replays scripted responses from a bundled scenario; not a real model.",
    )
    """One sentence a dashboard can show next to the model name."""

    role: str = "agent"
    """Which side of the scenario this model plays: `agent` or `grader`."""


def tool_call_turn(name: str, args: dict[str, Any], content: str = "") -> AIMessage:
    """A turn that calls one tool.

    Examples:
        >>> tool_call_turn("text_stats", {"text": "hi"}).tool_calls[0]["args"]
        {'text': 'hi'}
    """
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
    return tool_call_turn(
        "GraderResponse", {"criteria": items, "explanation": explanation, "result": result}
    )
