"""What a provider is: how it builds a model from an id, and its quirks the grader follows.

A `Provider` answers for one spec prefix (`openai`, `anthropic`, `replay`, ...) and for
the model objects it makes. Its quirks, each with a default that suits most providers:

- `build`: the chat model for a model id, with a timeout and (for graders) no client retries;
- `grader_client`: a model object given to the grader, made to time out and not retry;
- `takes_call_timeout`: whether a per-call `timeout=` reaches the HTTP request;
- `cache_markers`: whether the grader's payload goes as blocks with prompt-cache breakpoints;
- `verdict_schema`: the provider's dialect of the verdict's JSON schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage

from rubric_core.providers.errors import ModelSpecError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

    from rubric_core.providers.spec import ModelSpec

Role = Literal["agent", "grader"]
"""Which side a model plays: a replay model's side of its scenario, and whether the
client may retry by itself (a grader's may not: the middleware retries it)."""


@dataclass(frozen=True)
class BuildOptions:
    """What `resolve_model` was asked for besides the spec."""

    role: Role = "agent"
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 120


def has_class_from(model: object, package: str) -> bool:
    """Whether `model`'s class or a base of it is defined in `package` (already imported).

    Examples:
        >>> has_class_from(ValueError("x"), "builtins"), has_class_from(1, "langchain_openai")
        (True, False)
    """
    return any(c.__module__.partition(".")[0] == package for c in type(model).__mro__)


class Provider:
    """One provider family: the default quirks; subclasses override what differs."""

    name: str = ""
    """The spec prefix (`name:model-id`) this provider answers for."""

    key_vars: tuple[str, ...] = ()
    """Environment variables holding its API key (the first is the one we name)."""

    cache_markers: bool = False
    """Whether it caches only up to explicit breakpoints (Anthropic's `cache_control`)."""

    def build(self, spec: ModelSpec, options: BuildOptions) -> BaseChatModel:
        """The chat model `spec` names (touching no network)."""
        msg = f"model spec {spec.text!r}: provider {self.name!r} builds no model"
        raise ModelSpecError(msg)

    def describe(self, spec: ModelSpec) -> str:
        """A one-line, human description of a spec of this provider."""
        return f"Model {spec.text!r} through its provider's API."

    def owns(self, model: object) -> bool:
        """Whether `model` is one of this provider's models."""
        return False

    def grader_client(self, model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
        """`model` as the grader calls it; by default as it is (its own client settings)."""
        return model

    def takes_call_timeout(self, model: object) -> bool:
        """Whether a per-call `timeout=` reaches the HTTP request of `model`."""
        return False

    def payload_message(self, parts: Sequence[str]) -> HumanMessage:
        """The grader's user message from `prompt.payload_parts`: the parts joined.

        Examples:
            >>> Provider().payload_message(["head ", "step", " tail"]).content
            'head step tail'
        """
        return HumanMessage("".join(parts))

    def verdict_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The verdict's JSON schema in this provider's dialect; by default as it is."""
        return schema

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
