"""The one parser of model specs: what a person writes for a model, as a typed value.

A spec is one of:

- `provider:model-id` (`openai:gpt-4.1-mini`, `ollama:qwen2.5:7b`, `gemini:...`): a
  provider `init_chat_model` knows; its name is matched as LangChain matches it (any case,
  `-` for `_`) and the friendly names of `ALIASES` are understood;
- `openai-compatible:<model>`: that model on an OpenAI-compatible endpoint (a base URL);
- `replay:<scenario>` with options after `?` (`replay:haiku?latency_s=1`): a bundled
  scenario's scripted turns, not a language model;
- `human:<reviewer>`: a person's verdicts, no model;
- `checks` (or `none`): no judge, the rubric's code checks only;
- a bare model name (`gpt-4.1`): no provider; only LangChain's inference or a base URL
  gives it one.

`parse_model_spec` checks the form and names what is wrong; whether the provider exists,
its package and its key is the registry's question (`providers.registry.resolve_model`).
Rubric Studio's own prefixes (`replay`, `openai-compatible`, `human`) match only as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl

from rubric_core.providers.errors import ModelSpecError
from rubric_core.schema import (
    CHECKS_GRADER,
    HUMAN_GRADER_PREFIX,
    REPLAY_PREFIX,
    is_checks_only_grader,
)

__all__ = [
    "ALIASES",
    "COMPATIBLE_PREFIX",
    "SPEC_FORMS",
    "ModelSpec",
    "SpecKind",
    "parse_model_spec",
    "spec_kind",
]

COMPATIBLE_PREFIX = "openai-compatible:"
"""`openai-compatible:<model>`: a model on an OpenAI-compatible endpoint."""

ALIASES: dict[str, str] = {
    "google": "google_genai",
    "gemini": "google_genai",
    "azure": "azure_openai",
    "mistral": "mistralai",
    "vertexai": "google_vertexai",
}
"""Friendly provider names people type, mapped to the registry's (`init_chat_model`'s) keys."""

SPEC_FORMS = "provider:model-id, openai-compatible:<model>, replay:<scenario> or checks"
"""The forms a spec may take, as error messages list them."""

_REPLAY = REPLAY_PREFIX.removesuffix(":")
_HUMAN = HUMAN_GRADER_PREFIX.removesuffix(":")
_COMPATIBLE = COMPATIBLE_PREFIX.removesuffix(":")
_OWN = frozenset({_REPLAY, _HUMAN, _COMPATIBLE})

SpecKind = Literal["checks", "replay", "human", "compatible", "provider", "bare"]
"""What a spec names: no judge, a replay scenario, a person, a model on an endpoint, a
provider's model, or a model name without a provider."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec (`parse_model_spec`); `str()` gives it back as written."""

    text: str
    """The spec as written, without surrounding blanks."""
    provider: str
    """The registry's key: `replay`, `human`, `openai-compatible`, `checks`, a LangChain
    provider (`openai`, `google_genai`, aliases resolved), or `""` for a bare name."""
    model: str
    """The model id, scenario or reviewer (options dropped); `""` for `checks`."""
    options: Mapping[str, str] = field(default_factory=dict)
    """A replay spec's options (`?latency_s=1` -> `{"latency_s": "1"}`), else empty."""

    @property
    def kind(self) -> SpecKind:
        """What the spec names (see `SpecKind`).

        Examples:
            >>> [parse_model_spec(s).kind for s in ("none", "replay:haiku", "gpt-4.1")]
            ['checks', 'replay', 'bare']
        """
        if self.provider == CHECKS_GRADER:
            return "checks"
        if self.provider == _REPLAY:
            return "replay"
        if self.provider == _HUMAN:
            return "human"
        if self.provider == _COMPATIBLE:
            return "compatible"
        return "provider" if self.provider else "bare"

    def __str__(self) -> str:
        return self.text


def _malformed(text: str, what: str) -> ModelSpecError:
    return ModelSpecError(f"model spec {text!r} is malformed: {what}")


def _replay_options(text: str, query: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise _malformed(text, f"options go as ?key=value&key=value, got {query!r}") from None
    options = dict(pairs)
    if len(options) != len(pairs):
        raise _malformed(text, "an option is given twice")
    return options


def _provider_name(prefix: str) -> str:
    """A LangChain provider's key as `init_chat_model` matches it; one of our own prefixes
    in another case stays as written, so the registry names it unknown."""
    key = prefix.lower().replace("-", "_")
    return prefix if key.replace("_", "-") in _OWN else ALIASES.get(key, key)


def parse_model_spec(spec: object) -> ModelSpec:
    """`spec` as a `ModelSpec`: its provider, model and options.

    Raises:
        ModelSpecError: The spec is not text, is empty, has an empty provider or model,
            or a replay spec's options are not `key=value` pairs; the message quotes it.

    Examples:
        >>> parse_model_spec(" replay:haiku?latency_s=1 ")
        ModelSpec(text='replay:haiku?latency_s=1', provider='replay', model='haiku', options={'latency_s': '1'})
        >>> s = parse_model_spec("Gemini:gemini-2.5-flash")
        >>> s.kind, s.provider, s.model
        ('provider', 'google_genai', 'gemini-2.5-flash')
        >>> parse_model_spec("ollama:qwen2.5:7b").model, parse_model_spec("human:ana").kind
        ('qwen2.5:7b', 'human')
        >>> parse_model_spec("openai:")
        Traceback (most recent call last):
        ...
        rubric_core.providers.errors.ModelSpecError: model spec 'openai:' is malformed: write provider:model-id, e.g. openai:gpt-4.1-mini or anthropic:claude-haiku-4-5
    """
    if not isinstance(spec, str):
        msg = f"a model spec is text ({SPEC_FORMS}), got {type(spec).__name__} {spec!r}"
        raise ModelSpecError(msg)
    if not spec.strip():
        msg = f"model spec is empty: write {SPEC_FORMS}"
        raise ModelSpecError(msg)
    text = spec.strip()
    if is_checks_only_grader(text):
        return ModelSpec(text, CHECKS_GRADER, "")
    prefix, sep, rest = text.partition(":")
    if not sep:
        return ModelSpec(text, "", text)
    prefix, rest = prefix.strip(), rest.strip()
    if prefix == _REPLAY:
        name, _, query = rest.partition("?")
        if not name.strip():
            raise _malformed(text, "it names no scenario; write replay:<scenario>")
        options = _replay_options(text, query) if query else {}
        return ModelSpec(text, _REPLAY, name.strip(), options)
    if prefix == _COMPATIBLE and not rest:
        raise _malformed(
            text,
            "an OpenAI-compatible endpoint needs a model name: write openai-compatible:<model>",
        )
    if prefix == _HUMAN and not rest:
        raise _malformed(text, "it names no reviewer; write human:<name>")
    if not prefix or not rest:
        raise _malformed(
            text, "write provider:model-id, e.g. openai:gpt-4.1-mini or anthropic:claude-haiku-4-5"
        )
    if prefix in _OWN:
        return ModelSpec(text, prefix, rest)
    return ModelSpec(text, _provider_name(prefix), rest)


def spec_kind(spec: object) -> SpecKind | None:
    """What `spec` names (`ModelSpec.kind`), or `None` when it is no spec at all: for the
    checks that only ask (is it a replay model? no judge?) and leave errors to resolving.

    Examples:
        >>> spec_kind("replay:haiku?latency_s=1"), spec_kind(" None "), spec_kind("openai:")
        ('replay', 'checks', None)
    """
    try:
        return parse_model_spec(spec).kind
    except ModelSpecError:
        return None
