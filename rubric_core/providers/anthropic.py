"""Anthropic: `ChatAnthropic`, its client settings and its prompt-cache breakpoints.

Client: ChatAnthropic builds its SDK clients once, from `max_retries` and
`default_request_timeout`, so a grader's copy is constructed anew from the model's own
fields (its public constructor parameters) with `max_retries=0` and a timeout: a copy
made with `model_copy` would keep the clients already built, retries and all.

Caching: OpenAI-style providers cache a request's longest previously seen prefix by
themselves; all they need is a payload whose passes share their beginning
(`prompt.payload_parts`). Anthropic caches only up to explicit `cache_control`
breakpoints (at most 4 per request), and a later request hits the cache when it has the
same bytes up to a block boundary at or shortly before one of its own breakpoints. So for
an Anthropic grader the payload goes as content blocks, one per piece, with two
breakpoints:

- the end of the head (instructions, rubric, checklist, request): the same for every pass
  of a grading run, whatever happened to the steps;
- the end of the last step: the next pass's steps go on from there (its new steps are a
  few blocks further on, within the lookback Anthropic checks).

Joined, the blocks are the same text any other model gets as a string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from rubric_core.providers.base import has_class_from
from rubric_core.providers.langchain import LangChainProvider

if TYPE_CHECKING:
    from collections.abc import Sequence

_LLM_TYPES = frozenset({"anthropic-chat"})
"""The model type (`BaseChatModel.asdict()["_type"]`) of Anthropic's chat models."""

_MARKER: dict[str, str] = {"type": "ephemeral"}


def is_anthropic_model(model: object) -> bool:
    """Whether `model` is a chat model of Anthropic's type (`ChatAnthropic` and the like).

    Examples:
        >>> is_anthropic_model(object())
        False
    """
    if not isinstance(model, BaseChatModel):
        return False
    try:
        kind = model.asdict().get("_type")
    except Exception:  # a model whose identifying parameters cannot be read
        return False
    return kind in _LLM_TYPES


def _is_chat_anthropic(model: object) -> bool:
    # Its class comes from langchain_anthropic, already imported then; for any other
    # model, importing it (and the anthropic SDK, seconds) is not needed.
    if not has_class_from(model, "langchain_anthropic"):
        return False
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError:  # pragma: no cover - imported already when its class is there
        return False
    return isinstance(model, ChatAnthropic)


def anthropic_grader_client(model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
    """For a `ChatAnthropic`, a new one of the same class and fields with `max_retries=0`
    and a timeout (its own timeout kept); the model itself when it already has both, and
    any other model of Anthropic's type as it is (its client is not LangChain's)."""
    if not _is_chat_anthropic(model):
        return model
    current = getattr(model, "default_request_timeout", None)
    if getattr(model, "max_retries", None) == 0 and current is not None:
        return model
    fields = {name: getattr(model, name) for name in model.model_fields_set}
    fields.update(
        max_retries=0, default_request_timeout=current if current is not None else timeout_s
    )
    return type(model)(**fields)


def cached_payload(parts: Sequence[str]) -> HumanMessage:
    """One text block per part, with breakpoints after the head and the last step.

    Examples:
        >>> blocks = cached_payload(["head ", "step", " tail"]).content
        >>> [("cache_control" in b) for b in blocks]
        [True, True, False]
    """
    last_step = len(parts) - 2
    blocks: list[str | dict[str, Any]] = []
    for index, text in enumerate(parts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if index in (0, last_step):
            block["cache_control"] = dict(_MARKER)
        blocks.append(block)
    return HumanMessage(content=blocks)


class AnthropicProvider(LangChainProvider):
    """`anthropic:<model>`: built by `init_chat_model`; cache breakpoints, rebuilt clients."""

    cache_markers = True

    def __init__(self) -> None:
        super().__init__(
            "anthropic", key_vars=("ANTHROPIC_API_KEY",), package="langchain_anthropic"
        )

    def owns(self, model: object) -> bool:
        return is_anthropic_model(model)

    def grader_client(self, model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
        return anthropic_grader_client(model, timeout_s=timeout_s)

    def payload_message(self, parts: Sequence[str]) -> HumanMessage:
        return cached_payload(parts)
