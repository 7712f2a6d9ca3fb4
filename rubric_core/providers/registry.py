"""The one registry of providers: a model spec to a chat model, a model to its quirks.

`PROVIDERS` maps each spec prefix to its `Provider`: `replay`, `openai-compatible`,
`human`, `openai`, `anthropic`, and every other provider `init_chat_model` knows.
Every spec is read by `providers.spec.parse_model_spec` and resolved here, once:
`resolve_model` (the runners') and `grader_model` (the grader's, a bare model name's
provider inferred as LangChain infers it) both build through `_build`, and so do the
grader's questions about a model: `takes_call_timeout`, `wants_cache_markers`,
`provider_of(model).verdict_schema` and `.payload_message`.

`resolve_model` touches no network: it checks the spec, the provider and its API key,
then builds the client. `api_key_status`, `default_models` and `describe_model` are what
pickers and help texts show.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rubric_core import config
from rubric_core.providers.anthropic import AnthropicProvider
from rubric_core.providers.base import BuildOptions, Provider, Role
from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.human import HumanProvider
from rubric_core.providers.langchain import (
    PROVIDER_KEYS,
    LangChainProvider,
    builtin_packages,
    env_key,
    inferred_provider,
)
from rubric_core.providers.openai import CompatibleProvider, OpenAIProvider
from rubric_core.providers.replay.provider import ReplayProvider
from rubric_core.providers.replay.scenarios import DEFAULT_REPLAY_SCENARIO
from rubric_core.providers.spec import ModelSpec, parse_model_spec
from rubric_core.schema import REPLAY_PREFIX

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import HumanMessage

_DEFAULT_PROVIDER_MODELS: tuple[tuple[str, str], ...] = (
    ("openai", "openai:gpt-4.1-mini"),
    ("anthropic", "anthropic:claude-haiku-4-5"),
    ("google_genai", "google_genai:gemini-2.5-flash"),
)
"""What `default_models` picks, in order, for the first provider with a key."""

_GENERIC = Provider()
"""The quirks of a model object no provider owns: none (its own client settings)."""


class _Registry(Mapping[str, Provider]):
    """Prefix -> provider; LangChain's providers are added on first use (an import)."""

    def __init__(self, *own: Provider) -> None:
        self._own = {provider.name: provider for provider in own}
        self._all: dict[str, Provider] | None = None

    def _table(self) -> dict[str, Provider]:
        if self._all is None:
            table = dict(self._own)
            for name, package in builtin_packages().items():
                if name not in table:
                    keys = PROVIDER_KEYS.get(name, ())
                    table[name] = LangChainProvider(name, key_vars=keys, package=package)
            self._all = table
        return self._all

    def __getitem__(self, prefix: str) -> Provider:
        return self._table()[prefix]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def own(self, prefix: str) -> Provider | None:
        """One of Rubric Studio's own providers, without building the rest."""
        return self._own.get(prefix)


_REPLAY_PROVIDER = ReplayProvider()
_COMPATIBLE_PROVIDER = CompatibleProvider()
_REGISTRY = _Registry(
    AnthropicProvider(), OpenAIProvider(), _REPLAY_PROVIDER, _COMPATIBLE_PROVIDER, HumanProvider()
)

PROVIDERS: Mapping[str, Provider] = _REGISTRY
"""Every provider by its spec prefix. Model objects are matched to a provider in this
order (Anthropic's type first, so a model of that type gets its cache markers)."""

_REPLAY = ReplayProvider.name
_COMPATIBLE = CompatibleProvider.name


def provider_for(spec: str | ModelSpec, *, infer: bool = False) -> Provider:
    """The provider of a spec (`provider:model-id`, aliases such as `google:` understood);
    with `infer`, a bare model name's provider as `init_chat_model` infers it (`claude-*`).

    Raises:
        ModelSpecError: The spec is malformed, names no model (`checks`), has no provider,
            or its prefix names none; the message names it and lists the known ones.

    Examples:
        >>> provider_for("replay:haiku").name, provider_for("gemini:gemini-2.5-flash").name
        ('replay', 'google_genai')
        >>> provider_for("claude-haiku-4-5", infer=True).name
        'anthropic'
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    if parsed.kind == "checks":
        msg = f"model spec {parsed.text!r} names no model: the rubric's code checks grade alone"
        raise ModelSpecError(msg)
    own = _REGISTRY.own(parsed.provider)
    if own is not None:
        return own
    name = parsed.provider or (inferred_provider(parsed.model) if infer else None)
    if not name:
        msg = (
            f"model spec {parsed.text!r} is malformed: it has no provider; write "
            f"provider:model-id (e.g. openai:{parsed.text}), replay:<scenario>, or give a base URL"
        )
        raise ModelSpecError(msg)
    provider = PROVIDERS.get(name)
    if isinstance(provider, LangChainProvider):
        return provider
    known = sorted(name for name in PROVIDERS if name not in (_REPLAY, _COMPATIBLE, "human"))
    prefix = parsed.text.partition(":")[0].strip()
    msg = (
        f"unknown model provider {prefix!r} in {parsed.text!r}; known providers: "
        f"{', '.join(known)} (or replay:<scenario>, or openai-compatible:<model> with a base URL)"
    )
    raise ModelSpecError(msg)


def provider_of(model: object) -> Provider:
    """The provider whose model `model` is (a provider with no quirks when none owns it).

    Examples:
        >>> from rubric_core.providers.replay import ReplayChatModel
        >>> provider_of(ReplayChatModel(turns=[])).name
        'replay'
    """
    for provider in PROVIDERS.values():
        if provider.owns(model):
            return provider
    return _GENERIC


def api_key_status() -> list[dict[str, Any]]:
    """Which providers have an API key in the environment (never the key itself).

    Returns:
        One dict per provider: `{provider, env_var, configured}`, where `env_var` is
        the variable that holds the key, or the primary one when none is set.
    """
    status = []
    for provider, variables in PROVIDER_KEYS.items():
        set_var = next((var for var in variables if config.text(var)), None)
        status.append(
            {
                "provider": provider,
                "env_var": set_var or variables[0],
                "configured": set_var is not None,
            }
        )
    return status


def default_models() -> tuple[str, str]:
    """`(agent, grader)` specs to preselect.

    `RUBRIC_STUDIO_AGENT_MODEL` / `RUBRIC_STUDIO_GRADER_MODEL` win when set; otherwise
    the first provider with an API key; otherwise the offline replay scenario, so a
    fresh machine runs something without credentials.
    """
    agent = config.text("RUBRIC_STUDIO_AGENT_MODEL")
    grader = config.text("RUBRIC_STUDIO_GRADER_MODEL")
    fallback = f"{REPLAY_PREFIX}{DEFAULT_REPLAY_SCENARIO}"
    for provider, spec in _DEFAULT_PROVIDER_MODELS:
        if env_key(PROVIDER_KEYS[provider]):
            fallback = spec
            break
    return agent or fallback, grader or agent or fallback


def describe_model(spec: str) -> str:
    """A one-line, human description of a model spec, for the dashboard (what is wrong
    with it, when it is malformed).

    Examples:
        >>> describe_model("openai:gpt-4.1")
        "Model 'openai:gpt-4.1' through its provider's API."
    """
    try:
        parsed = parse_model_spec(spec)
    except ModelSpecError as exc:
        return str(exc)
    return (_REGISTRY.own(parsed.provider) or _GENERIC).describe(parsed)


def _build(spec: ModelSpec, options: BuildOptions, *, infer: bool) -> BaseChatModel:
    """The one resolver: a parsed spec to a chat model, by its provider (see `resolve_model`)."""
    if spec.kind == "replay":
        return _REPLAY_PROVIDER.build(spec, options)
    if spec.kind == "compatible":
        return _COMPATIBLE_PROVIDER.build(spec, options)
    if options.base_url and spec.kind in ("provider", "bare"):
        name = spec.model if spec.provider == "openai" else spec.text
        return _COMPATIBLE_PROVIDER.on_endpoint(name, options.base_url, options)
    return provider_for(spec, infer=infer).build(spec, options)


def resolve_model(
    spec: str | ModelSpec,
    *,
    role: Role = "agent",
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 120,
) -> BaseChatModel:
    """Turn a model spec into a chat model, touching no network.

    Args:
        spec: `replay:<scenario>` (offline scripted turns; `?latency_s=0.2` adds a fixed
            delay per call), `openai-compatible:<model>` (needs `base_url` or
            `RUBRIC_STUDIO_LLM_BASE_URL`), or `provider:model-id` for `init_chat_model`
            (read by `providers.spec.parse_model_spec`).
            With `base_url`, any other spec is the model name on that endpoint (an
            `openai:` prefix is dropped; Ollama names such as `qwen2.5:7b` stay whole).
        role: `agent` or `grader`: which side of a replay scenario to play; graders
            get no client-side retries (the middleware retries them).
        base_url: An OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8080/v1`.
        api_key: Overrides the key from the environment.
        timeout_s: Request timeout for real models.

    Raises:
        ModelSpecError: Naming the problem: malformed spec, unknown provider or scenario,
            missing API key (with the variable to set), bad base URL.

    Examples:
        >>> resolve_model("replay:haiku", role="grader").model_name
        'replay:haiku'
    """
    if role not in ("agent", "grader"):
        msg = f"role must be 'agent' or 'grader', got {role!r}"
        raise ModelSpecError(msg)
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= 3600):
        msg = f"timeout_s must be between 0 and 3600 seconds, got {timeout_s!r}"
        raise ModelSpecError(msg)
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    options = BuildOptions(
        role=role, base_url=(base_url or "").strip() or None, api_key=api_key, timeout_s=timeout_s
    )
    return _build(parsed, options, infer=False)


def grader_model(
    model: str | BaseChatModel, *, timeout_s: float, parameter: str = "model"
) -> BaseChatModel:
    """The client a grader calls, with a timeout and no client-side retries.

    `RubricMiddleware` retries transient grader failures itself and counts each try in
    `grader_attempts`; a client that also retried would multiply the requests sent behind
    that count (ChatOpenAI's default: 2 more per call) and, with no timeout (ChatOpenAI's
    default), could wait forever on an endpoint that never answers. So a string is built
    with `timeout` and `max_retries=0`, and a model object goes through its provider's `grader_client`
    (OpenAI's and Anthropic's: retries off and, when it has none, the timeout; the
    caller's object is left as it is). Other model objects keep their own client settings
    (give them a timeout and `max_retries=0`); the pass's time budget still bounds them
    between calls, and cancels their async calls.

    A string goes through the same parser and resolver as a run's models
    (`resolve_model` with `role="grader"`), so `replay:<scenario>` and
    `openai-compatible:<model>` work here too, and a bare name (`gpt-4.1`) gets the
    provider `init_chat_model` infers.

    Raises:
        ModelSpecError: `model` is a string that names no usable model, naming `parameter`.
    """
    if isinstance(model, str):
        try:
            parsed = parse_model_spec(model)
            return _build(parsed, BuildOptions(role="grader", timeout_s=timeout_s), infer=True)
        except ModelSpecError as exc:
            msg = f"{parameter}={model!r} cannot be used as a grader model: {exc}"
            raise ModelSpecError(msg) from exc
    return provider_of(model).grader_client(model, timeout_s=timeout_s)


def takes_call_timeout(model: object) -> bool:
    """Whether a per-call `timeout=` reaches the HTTP request (LangChain's OpenAI models).

    Examples:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> takes_call_timeout(GenericFakeChatModel(messages=iter([])))
        False
    """
    return PROVIDERS["openai"].takes_call_timeout(model)


def wants_cache_markers(model: object) -> bool:
    """Whether a grader model is Anthropic's (of its type, or an `anthropic:` spec).

    Examples:
        >>> wants_cache_markers("anthropic:claude-sonnet-4-5"), wants_cache_markers("openai:gpt-4.1")
        (True, False)
    """
    if isinstance(model, str):
        try:  # a bare `claude-*` is Anthropic's, as init_chat_model infers
            return provider_for(model, infer=True).cache_markers
        except ModelSpecError:
            return False
    return provider_of(model).cache_markers


def payload_message(parts: Sequence[str], *, cache_markers: bool) -> HumanMessage:
    """The grader's user message from `prompt.payload_parts`: one string, or with
    `cache_markers` as Anthropic's blocks with breakpoints (`anthropic.cached_payload`).

    Examples:
        >>> payload_message(["head ", "step", " tail"], cache_markers=False).content
        'head step tail'
    """
    provider = PROVIDERS["anthropic"] if cache_markers else _GENERIC
    return provider.payload_message(parts)
