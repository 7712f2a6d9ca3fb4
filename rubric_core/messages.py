"""Message text and grader-feedback detection: one rule each, for live and stored messages.

Live messages are LangChain `BaseMessage`s; stored ones are the mappings the store's
transcript table returns (`role`, `name`, `content`, `is_grader`, ...). Both go through
the same two rules here, so the grader, the runner, the replay models, the store and the
dashboard agree on what a message says and on which turns the rubric loop injected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE

__all__ = [
    "content_text",
    "final_answer",
    "grader_feedback_message",
    "is_grader_feedback",
    "message_text",
]


def content_text(content: object) -> str:
    """The text of a message's `content`, by LangChain's rule for `BaseMessage.text`.

    A string is its own text; a list of content blocks gives the concatenation of its
    text blocks (plain strings and `{"type": "text", "text": ...}`); other blocks (images,
    tool-use blocks) carry no text. `None` is empty; any other value is shown as JSON so
    nothing stored is silently dropped.

    Examples:
        >>> content_text("plain")
        'plain'
        >>> content_text([{"type": "text", "text": "a"}, {"type": "image_url"}, "b"])
        'ab'
        >>> content_text(None)
        ''
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, Mapping)
                and block.get("type", "text") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def message_text(message: BaseMessage | Mapping[str, Any]) -> str:
    """The text of a live message (`BaseMessage.text`) or of a stored one (its `content`).

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> message_text(AIMessage(content=[{"type": "text", "text": "done"}]))
        'done'
        >>> message_text({"role": "ai", "content": "stored"})
        'stored'
    """
    if isinstance(message, BaseMessage):
        return message.text
    return content_text(message.get("content"))


def is_grader_feedback(message: BaseMessage | Mapping[str, Any]) -> bool:
    """Whether the rubric loop injected this message (the grader's feedback to the agent).

    The loop marks its feedback with `name` and `additional_kwargs["lc_source"]` set to
    `RUBRIC_GRADER_MESSAGE_SOURCE`; either mark is enough, so a provider that drops one of
    them still round-trips. Stored messages also carry the store's `is_grader` flag.

    Examples:
        >>> is_grader_feedback(grader_feedback_message("fix line 2"))
        True
        >>> from langchain_core.messages import HumanMessage
        >>> is_grader_feedback(HumanMessage(content="fix line 2"))
        False
        >>> is_grader_feedback({"role": "human", "is_grader": 1, "content": "..."})
        True
    """
    if isinstance(message, BaseMessage):
        name = message.name
        extra: object = message.additional_kwargs
        flagged = False
    else:
        name = message.get("name")
        extra = message.get("additional_kwargs") or {}
        flagged = bool(message.get("is_grader"))
    return (
        flagged
        or name == RUBRIC_GRADER_MESSAGE_SOURCE
        or (isinstance(extra, Mapping) and extra.get("lc_source") == RUBRIC_GRADER_MESSAGE_SOURCE)
    )


def grader_feedback_message(text: str) -> HumanMessage:
    """The message the loop injects to hand the grader's feedback back to the agent."""
    return HumanMessage(
        content=text,
        name=RUBRIC_GRADER_MESSAGE_SOURCE,
        additional_kwargs={"lc_source": RUBRIC_GRADER_MESSAGE_SOURCE},
    )


def final_answer(messages: Sequence[BaseMessage], *, skip_empty: bool = False) -> str:
    """The text of the agent's last reply: the draft a pass judges.

    With `skip_empty`, replies without text (a bare tool call, an empty turn) are passed
    over, which is what a run stores as its final output.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> final_answer([HumanMessage("hi"), AIMessage("draft 1"), AIMessage("")])
        ''
        >>> final_answer([HumanMessage("hi"), AIMessage("draft 1"), AIMessage("")], skip_empty=True)
        'draft 1'
    """
    for message in reversed(messages):
        if isinstance(message, AIMessage) and not is_grader_feedback(message):
            text = message.text
            if text.strip() or not skip_empty:
                return text
    return ""
