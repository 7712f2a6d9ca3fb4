"""The payload as a message, with Anthropic-style prompt-cache markers where they help.

OpenAI-style providers cache a request's longest previously seen prefix by themselves;
all they need is a payload whose passes share their beginning (`prompt.payload_parts`).
Anthropic caches only up to explicit `cache_control` breakpoints (at most 4 per request),
and a later request hits the cache when it has the same bytes up to a block boundary at
or shortly before one of its own breakpoints. So for an Anthropic grader the payload goes
as content blocks, one per piece, with two breakpoints:

- the end of the head (instructions, rubric, checklist, request): the same for every pass
  of a grading run, whatever happened to the steps;
- the end of the last step: the next pass's steps go on from there (its new steps are a
  few blocks further on, within the lookback Anthropic checks).

Joined, the blocks are the same text any other model gets as a string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["payload_message", "wants_cache_markers"]

_ANTHROPIC_LLM_TYPES = frozenset({"anthropic-chat"})
_MARKER: dict[str, str] = {"type": "ephemeral"}


def wants_cache_markers(model: object) -> bool:
    """Whether a grader model is Anthropic's (a `ChatAnthropic`, or an `anthropic:` spec).

    Examples:
        >>> wants_cache_markers("anthropic:claude-sonnet-4-5"), wants_cache_markers("openai:gpt-4.1")
        (True, False)
    """
    if isinstance(model, str):
        provider, _, name = model.partition(":")
        return provider == "anthropic" or (not name and provider.startswith("claude"))
    return getattr(model, "_llm_type", None) in _ANTHROPIC_LLM_TYPES


def payload_message(parts: Sequence[str], *, cache_markers: bool) -> HumanMessage:
    """The grader's user message from `prompt.payload_parts`: one string, or with
    `cache_markers` one text block per part and breakpoints after the head and the steps.

    Examples:
        >>> payload_message(["head ", "step", " tail"], cache_markers=False).content
        'head step tail'
        >>> blocks = payload_message(["head ", "step", " tail"], cache_markers=True).content
        >>> [("cache_control" in b) for b in blocks]
        [True, True, False]
    """
    if not cache_markers:
        return HumanMessage("".join(parts))
    last_step = len(parts) - 2
    blocks: list[str | dict[str, Any]] = []
    for index, text in enumerate(parts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if index in (0, last_step):
            block["cache_control"] = dict(_MARKER)
        blocks.append(block)
    return HumanMessage(content=blocks)
