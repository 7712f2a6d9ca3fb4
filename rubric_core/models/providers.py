"""Model specs to chat models: "provider:model-id", OpenAI-compatible endpoints, `replay:`.

`resolve_model` touches no network: it checks the spec, the provider and its API key,
then builds the client. `api_key_status`, `default_models` and `describe_model` are what
pickers and help texts show.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pydantic import SecretStr

from rubric_core.extras import MissingExtra
from rubric_core.models.errors import ModelSpecError
from rubric_core.models.replay import ScenarioReplayChatModel
from rubric_core.models.scenarios import (
    DEFAULT_REPLAY_SCENARIO,
    Role,
    load_scenario,
    scenario_turns,
)
from rubric_core.schema import BASE_URL_ENV, REPLAY_PREFIX

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

_COMPATIBLE_PREFIX = "openai-compatible:"

_PROVIDER_ALIASES: dict[str, str] = {
    "google": "google_genai",
    "gemini": "google_genai",
    "azure": "azure_openai",
    "mistral": "mistralai",
    "vertexai": "google_vertexai",
}
"""Friendly provider names people type, mapped to `init_chat_model`'s keys."""

_PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "azure_openai": ("AZURE_OPENAI_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistralai": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "upstage": ("UPSTAGE_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
}
"""Environment variables holding each provider's API key (the first is the one we name).
Providers missing here (ollama, bedrock, vertexai, ...) authenticate another way."""

_DEFAULT_PROVIDER_MODELS: tuple[tuple[str, str], ...] = (
    ("openai", "openai:gpt-4.1-mini"),
    ("anthropic", "anthropic:claude-haiku-4-5"),
    ("google_genai", "google_genai:gemini-2.5-flash"),
)
"""What `default_models` picks, in order, for the first provider with a key."""


def _env_key(provider: str) -> str | None:
    for var in _PROVIDER_KEYS.get(provider, ()):
        if os.environ.get(var, "").strip():
            return os.environ[var].strip()
    return None


def api_key_status() -> list[dict[str, Any]]:
    """Which providers have an API key in the environment (never the key itself).

    Returns:
        One dict per provider: `{provider, env_var, configured}`, where `env_var` is
        the variable that holds the key, or the primary one when none is set.
    """
    status = []
    for provider, variables in _PROVIDER_KEYS.items():
        set_var = next((var for var in variables if os.environ.get(var, "").strip()), None)
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
    agent = os.environ.get("RUBRIC_STUDIO_AGENT_MODEL", "").strip()
    grader = os.environ.get("RUBRIC_STUDIO_GRADER_MODEL", "").strip()
    fallback = f"{REPLAY_PREFIX}{DEFAULT_REPLAY_SCENARIO}"
    for provider, spec in _DEFAULT_PROVIDER_MODELS:
        if _env_key(provider):
            fallback = spec
            break
    return agent or fallback, grader or agent or fallback


def describe_model(spec: str) -> str:
    """A one-line, human description of a model spec, for the dashboard."""
    text = spec.strip()
    if text.startswith(REPLAY_PREFIX):
        name = text.removeprefix(REPLAY_PREFIX).split("?", 1)[0]
        return (
            f"Offline demo: replays the scripted turns of scenario {name!r}; "
            "it is not a language model and judges nothing itself."
        )
    if text.startswith(_COMPATIBLE_PREFIX):
        return f"Model {text.removeprefix(_COMPATIBLE_PREFIX)!r} on an OpenAI-compatible endpoint."
    return f"Model {text!r} through its provider's API."


def _replay_model(spec: str, role: Role) -> ScenarioReplayChatModel:
    rest = spec.removeprefix(REPLAY_PREFIX).strip()
    name, _, query = rest.partition("?")
    latency_s = 0.0
    if query:
        key, _, value = query.partition("=")
        if key != "latency_s":
            msg = f"replay spec {spec!r}: the only option is ?latency_s=<seconds>, got {key!r}"
            raise ModelSpecError(msg)
        try:
            latency_s = float(value)
        except ValueError:
            latency_s = -1.0
        if not 0 <= latency_s <= 60:
            msg = f"replay spec {spec!r}: latency_s must be a number from 0 to 60, got {value!r}"
            raise ModelSpecError(msg)
    if not name:
        msg = f"replay spec {spec!r} names no scenario; use replay:<scenario>"
        raise ModelSpecError(msg)
    scenario = load_scenario(name)
    return ScenarioReplayChatModel(
        scenario=name,
        turns=scenario_turns(name, role),
        latency_s=latency_s,
        cycle=bool(scenario["cycle"]),
        role=role,
        description=(
            f"Replays the scripted {role} turns of the bundled scenario {name!r} "
            f"({scenario['title']}); not a real model."
        ),
    )


def _compatible_model(
    model: str, *, base_url: str, api_key: str | None, timeout_s: float, role: Role
) -> BaseChatModel:
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:  # a bad spec to the caller, as a provider's missing package is
        raise ModelSpecError(str(MissingExtra("langchain_openai", "openai"))) from exc

    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        msg = f"base_url must be an http(s) URL such as http://127.0.0.1:8080/v1, got {base_url!r}"
        raise ModelSpecError(msg)
    if not model.strip():
        msg = "an OpenAI-compatible endpoint needs a model name: openai-compatible:<model>"
        raise ModelSpecError(msg)
    # Only hand the OpenAI key to OpenAI itself; a local server gets its own key or none.
    env_key = os.environ.get("OPENAI_COMPATIBLE_API_KEY", "").strip()
    if parsed.hostname == "api.openai.com":
        env_key = env_key or os.environ.get("OPENAI_API_KEY", "").strip()
    return ChatOpenAI(
        model=model.strip(),
        base_url=base_url,
        api_key=SecretStr(api_key or env_key or "not-needed"),
        timeout=timeout_s,
        # The middleware retries the grader itself; the agent gets no hidden retries either,
        # so a failing endpoint surfaces at once as a clear run error.
        max_retries=0,
        metadata={"rubric_studio_role": role},
    )


def _provider_model(
    spec: str, *, api_key: str | None, timeout_s: float, role: Role
) -> BaseChatModel:
    from langchain.chat_models import base as chat_base
    from langchain.chat_models import init_chat_model

    provider_text, _, model = spec.partition(":")
    provider = provider_text.strip().lower().replace("-", "_")
    provider = _PROVIDER_ALIASES.get(provider, provider)
    model = model.strip()
    if not provider or not model:
        msg = (
            f"model spec {spec!r} is malformed: write provider:model-id, "
            "e.g. openai:gpt-4.1-mini or anthropic:claude-haiku-4-5"
        )
        raise ModelSpecError(msg)
    known = sorted(chat_base._BUILTIN_PROVIDERS)
    if provider not in known:
        msg = (
            f"unknown model provider {provider_text.strip()!r} in {spec!r}; known providers: "
            f"{', '.join(known)} (or replay:<scenario>, or openai-compatible:<model> with a base URL)"
        )
        raise ModelSpecError(msg)
    if not api_key and provider in _PROVIDER_KEYS and not _env_key(provider):
        variables = " or ".join(_PROVIDER_KEYS[provider])
        msg = (
            f"model {spec!r} needs an API key: set {variables} in the environment "
            "(or pick a replay:<scenario> model to run offline)"
        )
        raise ModelSpecError(msg)
    kwargs: dict[str, Any] = {"timeout": timeout_s}
    if role == "grader":
        kwargs["max_retries"] = 0  # the middleware retries transient grader failures itself
    if api_key:
        kwargs["api_key"] = api_key
    try:
        chat_model: BaseChatModel = init_chat_model(model, model_provider=provider, **kwargs)
        return chat_model
    except ImportError as exc:
        package = chat_base._BUILTIN_PROVIDERS[provider][0].split(".")[0].replace("_", "-")
        msg = f"model provider {provider!r} needs the package {package}: pip install {package}"
        if provider in ("openai", "anthropic"):  # extras of this distribution
            msg = str(MissingExtra(package, provider))
        raise ModelSpecError(msg) from exc
    except Exception as exc:
        msg = f"could not create model {spec!r}: {type(exc).__name__}: {exc}"
        raise ModelSpecError(msg) from exc


def resolve_model(
    spec: str,
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
            `RUBRIC_STUDIO_LLM_BASE_URL`), or `provider:model-id` for `init_chat_model`.
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
    if not isinstance(spec, str) or not spec.strip():
        msg = "model spec is empty: write provider:model-id, openai-compatible:<model> or replay:<scenario>"
        raise ModelSpecError(msg)
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= 3600):
        msg = f"timeout_s must be between 0 and 3600 seconds, got {timeout_s!r}"
        raise ModelSpecError(msg)
    text = spec.strip()
    if text.startswith(REPLAY_PREFIX):
        return _replay_model(text, role)
    base_url = (base_url or "").strip() or None
    if text.startswith(_COMPATIBLE_PREFIX):
        base_url = base_url or os.environ.get(BASE_URL_ENV, "").strip() or None
        if not base_url:
            msg = (
                f"model {spec!r} needs a base URL: pass base_url (e.g. "
                f"http://127.0.0.1:8080/v1) or set {BASE_URL_ENV}"
            )
            raise ModelSpecError(msg)
        model = text.removeprefix(_COMPATIBLE_PREFIX)
        return _compatible_model(
            model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, role=role
        )
    if base_url:
        model = text.removeprefix("openai:")
        return _compatible_model(
            model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, role=role
        )
    if ":" not in text:
        msg = (
            f"model spec {spec!r} is malformed: it has no provider; write provider:model-id "
            f"(e.g. openai:{text}), replay:<scenario>, or give a base URL"
        )
        raise ModelSpecError(msg)
    return _provider_model(text, api_key=api_key, timeout_s=timeout_s, role=role)
