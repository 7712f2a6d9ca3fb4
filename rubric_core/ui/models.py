"""The Run and Batch pages' model pickers: which models can run, and what a choice means."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_core import config
from rubric_core.errors import InputError
from rubric_core.grader.checked import checks_only_problem
from rubric_core.providers import (
    DEFAULT_REPLAY_SCENARIO,
    api_key_status,
    list_scenarios,
    load_scenario,
)
from rubric_core.providers.replay.fit import replay_grader_mismatch
from rubric_core.providers.spec import spec_kind
from rubric_core.rubric import parse_rubric
from rubric_core.schema import (
    BASE_URL_ENV,
    CHECKS_GRADER,
    MODEL_ENV,
    REPLAY_PREFIX,
)

__all__ = [
    "CHECKS_SOURCE",
    "DEFAULT_REPLAY_SCENARIO",
    "MAX_REPLAY_LATENCY_S",
    "MODEL_SOURCES",
    "REPLAY_PREFIX",
    "ModelsMode",
    "base_url_presets",
    "checks_only_rubric",
    "combine_models",
    "configured_models_mode",
    "grader_sources",
    "list_scenarios",
    "load_scenario",
    "matching_scenario",
    "model_choice",
    "models_mode",
    "replay_scenario_mismatch",
    "replay_spec",
    "spec_error_hint",
]

MODEL_SOURCES: dict[str, str] = {
    "replay": "Replay scenario (offline)",
    "provider": "Provider model (provider:model-id)",
    "base_url": "OpenAI-compatible server (base URL)",
}
"""The Run page's ways to pick a model, with their labels."""

CHECKS_SOURCE = "checks"
"""The grader picker's source for no grader at all: the rubric's code checks decide."""


def checks_only_rubric(version: Mapping[str, Any]) -> bool:
    """Whether every criterion of rubric `version` has a code check (no grader needed).

    Examples:
        >>> checks_only_rubric({"text": "- Three lines {lines == 3}"})
        True
        >>> checks_only_rubric({"text": "- Three lines {lines == 3}\\n- Mentions rain"})
        False
    """
    return checks_only_problem(str(version.get("text") or "")) is None


def grader_sources(version: Mapping[str, Any]) -> dict[str, str]:
    """The grader picker's sources for `version`: "no grader: checks only" first when
    every criterion has a code check, then the model sources.

    Examples:
        >>> list(grader_sources({"text": "- Three lines {lines == 3}"}))
        ['checks', 'replay', 'provider', 'base_url']
        >>> list(grader_sources({"text": "- Mentions rain"}))
        ['replay', 'provider', 'base_url']
    """
    if checks_only_rubric(version):
        return {CHECKS_SOURCE: "No grader: checks only", **MODEL_SOURCES}
    return dict(MODEL_SOURCES)


@dataclass(frozen=True)
class ModelsMode:
    """Whether the dashboard can run real models or only offline replays, for the sidebar."""

    real: bool
    """A provider API key or an OpenAI-compatible base URL is configured."""
    providers: tuple[str, ...]
    """Providers whose API key is set."""
    base_url: str | None
    """The configured OpenAI-compatible endpoint, if any."""
    summary: str
    """One or two sentences saying which it is, plainly."""


def models_mode(key_status: Iterable[Mapping[str, Any]], base_url: str | None = None) -> ModelsMode:
    """Describe which models can run, from `providers.api_key_status()` and the base URL.

    Examples:
        >>> models_mode([{"provider": "openai", "configured": False}]).real
        False
        >>> models_mode([{"provider": "openai", "configured": True}]).providers
        ('openai',)
    """
    providers = tuple(str(s["provider"]) for s in key_status if s.get("configured"))
    base_url = (base_url or "").strip() or None
    if providers or base_url:
        found = [f"API key for {', '.join(providers)}"] if providers else []
        if base_url:
            found.append(f"OpenAI-compatible server at {base_url}")
        summary = "Real models: " + "; ".join(found) + ". Replay scenarios stay available offline."
        return ModelsMode(True, providers, base_url, summary)
    summary = (
        "Offline replay: no API key or base URL is configured, so the models replay "
        "scripted responses (no network, no cost; they judge nothing themselves). "
        "Put API keys in .streamlit/secrets.toml to use real models."
    )
    return ModelsMode(False, (), None, summary)


def configured_models_mode() -> ModelsMode:
    """`models_mode` of this process: its providers' API keys and `$RUBRIC_STUDIO_LLM_BASE_URL`."""
    return models_mode(api_key_status(), config.text(BASE_URL_ENV) or None)


def base_url_presets() -> tuple[str, str]:
    """The base-URL fields' presets, `(base_url, model_name)`, from the environment (or empty)."""
    return config.text(BASE_URL_ENV), config.text(MODEL_ENV)


MAX_REPLAY_LATENCY_S = 60.0
"""The longest delay per call a replay model takes (`replay:<name>?latency_s=`)."""


def replay_spec(scenario: str, latency_s: float = 0.0) -> str:
    """The model string for a replay scenario, with its delay per call when there is one.

    Examples:
        >>> replay_spec("haiku")
        'replay:haiku'
        >>> replay_spec("haiku", latency_s=1.0)
        'replay:haiku?latency_s=1'
    """
    spec = f"{REPLAY_PREFIX}{scenario}"
    return f"{spec}?latency_s={latency_s:g}" if latency_s else spec


def model_choice(
    source: str,
    *,
    scenario: str = "",
    provider_string: str = "",
    base_url: str = "",
    base_url_model: str = "",
    latency_s: float = 0.0,
) -> tuple[str, str | None]:
    """Turn one model picker of the Run page into `(model_spec, base_url)`.

    Args:
        source: `"replay"`, `"provider"` or `"base_url"` (see `MODEL_SOURCES`).
        scenario: The replay scenario's name (source `"replay"`).
        latency_s: Seconds each replay call waits (source `"replay"`), 0 to 60, so a
            person can watch the passes arrive.
        provider_string: `"provider:model-id"` (source `"provider"`).
        base_url: OpenAI-compatible endpoint (source `"base_url"`).
        base_url_model: Model name to request from that endpoint.

    Raises:
        InputError: Naming the missing or malformed field.

    Examples:
        >>> model_choice("checks")
        ('checks', None)
        >>> model_choice("replay", scenario="haiku")
        ('replay:haiku', None)
        >>> model_choice("replay", scenario="haiku", latency_s=1.5)
        ('replay:haiku?latency_s=1.5', None)
        >>> model_choice("base_url", base_url="http://127.0.0.1:8080/v1", base_url_model="m")
        ('openai-compatible:m', 'http://127.0.0.1:8080/v1')
    """
    if source == CHECKS_SOURCE:
        return CHECKS_GRADER, None
    if source == "replay":
        if not scenario.strip():
            msg = "pick a replay scenario"
            raise InputError(msg)
        if not 0 <= latency_s <= MAX_REPLAY_LATENCY_S:
            msg = f"seconds per call must be from 0 to {MAX_REPLAY_LATENCY_S:g}, got {latency_s:g}"
            raise InputError(msg)
        return replay_spec(scenario.strip(), latency_s), None
    if source == "provider":
        spec = provider_string.strip()
        if spec_kind(spec) in (None, "bare"):
            msg = (
                f"model {spec!r} is not of the form provider:model-id "
                "(for example openai:gpt-4.1-mini or anthropic:claude-haiku-4-5)"
            )
            raise InputError(msg)
        return spec, None
    if source == "base_url":
        url = base_url.strip()
        if not url.startswith(("http://", "https://")):
            msg = (
                f"base URL {url!r} must start with http:// or https:// "
                "(for example http://127.0.0.1:8080/v1)"
            )
            raise InputError(msg)
        name = base_url_model.strip()
        if not name:
            msg = "name the model to ask the server for (the llama.cpp alias, e.g. smollm2-135m)"
            raise InputError(msg)
        return f"openai-compatible:{name}", url
    msg = f"unknown model source {source!r}; use one of {', '.join(MODEL_SOURCES)}"
    raise InputError(msg)


def combine_models(
    agent: tuple[str, str | None], grader: tuple[str, str | None]
) -> tuple[str, str, str | None]:
    """Merge the agent's and grader's choices into `(agent_spec, grader_spec, base_url)`.

    A run has one base URL for both models (replay models ignore it), so two
    different servers, or a server for one and a provider model for the other,
    cannot be combined; the error says so.

    Raises:
        InputError: The two choices need different endpoints.

    Examples:
        >>> combine_models(("openai-compatible:m", "http://h/v1"), ("replay:haiku", None))
        ('openai-compatible:m', 'replay:haiku', 'http://h/v1')
    """
    (agent_spec, agent_url), (grader_spec, grader_url) = agent, grader
    urls = {u for u in (agent_url, grader_url) if u}
    if len(urls) > 1:
        msg = "the agent and the grader must use the same base URL (a run has one server)"
        raise InputError(msg)
    base_url = next(iter(urls), None)
    if base_url:
        for role, spec, url in (
            ("agent", agent_spec, agent_url),
            ("grader", grader_spec, grader_url),
        ):
            if not url and spec_kind(spec) not in ("replay", "checks"):
                msg = (
                    f"the {role} uses {spec!r} while the other model uses the server at "
                    f"{base_url}; a run sends both non-replay models to that server, so pick "
                    f"the server (or a replay scenario) for the {role} too"
                )
                raise InputError(msg)
    return agent_spec, grader_spec, base_url


def replay_scenario_mismatch(
    model_spec: str, scenarios: Iterable[Mapping[str, Any]], criteria: Sequence[str]
) -> str | None:
    """The replay scenario a model plays if its scripted rubric differs from `criteria`, else None.

    The library's one check (`providers.replay.fit.replay_grader_mismatch`), by name.

    Examples:
        >>> scenarios = [{"name": "haiku", "rubric": "- three lines"}]
        >>> replay_scenario_mismatch("replay:haiku", scenarios, ["five lines"])
        'haiku'
        >>> replay_scenario_mismatch("replay:haiku", scenarios, ["three lines"]) is None
        True
    """
    found = replay_grader_mismatch(model_spec, criteria, scenarios=scenarios)
    return None if found is None else found.scenario


def matching_scenario(
    scenarios: Iterable[Mapping[str, Any]], criteria: Sequence[str], default: str = ""
) -> str:
    """The replay scenario whose scripted rubric shares most criteria with `criteria`.

    A replay grader judges only its own scenario's criteria, so the grader pickers start
    on the scenario that fits the chosen rubric version; `default` when none shares any.

    Examples:
        >>> scenarios = [{"name": "haiku", "rubric": "- three lines"},
        ...              {"name": "bottle", "rubric": "- two sentences\\n- is short"}]
        >>> matching_scenario(scenarios, ["two sentences", "is short", "says cold"])
        'bottle'
        >>> matching_scenario(scenarios, ["rhymes"], default="haiku")
        'haiku'
    """
    wanted = set(criteria)
    best, best_shared = default, 0
    for scenario in scenarios:
        shared = len(wanted & set(parse_rubric(str(scenario.get("rubric") or ""))))
        if shared > best_shared:
            best, best_shared = str(scenario["name"]), shared
    return best


def spec_error_hint(message: str) -> str:
    """Add what to do to a run-spec error (missing keys go in `.streamlit/secrets.toml`).

    Examples:
        >>> spec_error_hint("input: is empty")
        'input: is empty'
    """
    if "API key" in message:
        return (
            f"{message}. Put the key in .streamlit/secrets.toml (see secrets.toml.example) "
            "and restart the dashboard, or choose a replay scenario."
        )
    return message
