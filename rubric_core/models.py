"""Chat models by name: provider strings, OpenAI-compatible endpoints and offline replay scenarios."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import Field

from rubric_core._replay import ReplayChatModel, tool_call_turn
from rubric_core.rubric import parse_rubric
from rubric_core.schema import GraderResponse

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

Role = Literal["agent", "grader"]

_REPLAY_PREFIX = "replay:"
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

DEFAULT_REPLAY_SCENARIO = "find_duplicates"
"""The scenario `default_models` names when no API key is configured."""

_FENCE_RE = re.compile(
    r"^[ \t]*```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE
)
_SCENARIO_NAME_RE = re.compile(r"^[a-z0-9_]+$")
_TURN_KINDS = ("content", "tool", "verdict", "verdict_from_tool", "raise", "tool_call")
_ERROR_TYPES: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
    "TimeoutError": TimeoutError,
    "ConnectionError": ConnectionError,
}


class ModelError(ValueError):
    """A model spec that cannot be resolved; the message names what is wrong."""


class ScriptedGraderError(RuntimeError):
    """Raised by a replay turn of kind `raise` (default error type)."""


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


# --------------------------------------------------------------------------- scenarios


def _scenario_dir() -> Any:
    return resources.files("rubric_core") / "scenarios"


@functools.cache
def _scenario_files() -> dict[str, str]:
    files: dict[str, str] = {}
    for entry in _scenario_dir().iterdir():
        if entry.name.endswith(".json"):
            files[entry.name.removesuffix(".json")] = entry.read_text(encoding="utf-8")
    return dict(sorted(files.items()))


def _join_lines(value: Any) -> Any:
    """Scenario text fields may be a list of lines for readability; join them."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    return value


def _check_turn(name: str, role: str, index: int, turn: Any, criteria: list[str]) -> None:
    where = f"scenario {name!r}: {role}_turns[{index}]"
    if not isinstance(turn, dict):
        msg = f"{where} must be an object, got {type(turn).__name__}"
        raise ModelError(msg)
    kinds = [kind for kind in _TURN_KINDS if kind in turn]
    if not kinds:
        msg = f"{where} has none of the turn keys {', '.join(_TURN_KINDS)}"
        raise ModelError(msg)
    if "verdict" in turn:
        try:
            verdict = GraderResponse.model_validate(turn["verdict"])
        except ValueError as exc:
            msg = f"{where}: verdict is not a valid GraderResponse: {exc}"
            raise ModelError(msg) from exc
        unknown = [c.name for c in verdict.criteria if c.name not in criteria]
        if unknown:
            msg = f"{where}: verdict names criteria not in the rubric: {unknown}"
            raise ModelError(msg)
    if "verdict_from_tool" in turn:
        spec = turn["verdict_from_tool"]
        for item in spec.get("criteria", []):
            if item.get("name") not in criteria:
                msg = f"{where}: verdict_from_tool names a criterion not in the rubric: {item.get('name')!r}"
                raise ModelError(msg)
            if "pass_if" in item:
                re.compile(item["pass_if"])
            elif not isinstance(item.get("passed"), bool):
                msg = f"{where}: criterion {item.get('name')!r} needs 'pass_if' or 'passed'"
                raise ModelError(msg)
    if "raise" in turn and turn.get("error_type", "RuntimeError") not in _ERROR_TYPES:
        msg = f"{where}: error_type must be one of {', '.join(_ERROR_TYPES)}"
        raise ModelError(msg)


def _parse_scenario(name: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"scenario file {name}.json is not valid JSON: {exc}"
        raise ModelError(msg) from exc
    for key in ("tests", "rubric", "input", "description"):
        if key in data:
            data[key] = _join_lines(data[key])
    required = (
        "name", "title", "description", "rubric", "input", "agent_kind", "expected_status",
        "agent_turns", "grader_turns",
    )  # fmt: skip
    missing = [key for key in required if key not in data]
    if missing:
        msg = f"scenario {name!r} is missing {', '.join(missing)}"
        raise ModelError(msg)
    if data["name"] != name:
        msg = f"scenario file {name}.json declares name {data['name']!r}; they must match"
        raise ModelError(msg)
    if data["agent_kind"] not in ("basic", "deep"):
        msg = f"scenario {name!r}: agent_kind must be 'basic' or 'deep'"
        raise ModelError(msg)
    data.setdefault("grader_tools", [])
    data.setdefault("max_iterations", 3)
    data.setdefault("cycle", False)
    criteria = parse_rubric(data["rubric"])
    for role in ("agent", "grader"):
        for index, turn in enumerate(data[f"{role}_turns"]):
            _check_turn(name, role, index, turn, criteria)
            if "content" in turn:
                turn["content"] = _join_lines(turn["content"])
    return data


@functools.cache
def _scenarios() -> dict[str, dict[str, Any]]:
    return {name: _parse_scenario(name, text) for name, text in _scenario_files().items()}


def load_scenario(name: str) -> dict[str, Any]:
    """The whole bundled scenario `name` (a fresh copy the caller may change).

    Args:
        name: Scenario name, with or without the `replay:` prefix.

    Raises:
        ModelError: If no scenario has that name; the message lists the known ones.

    Examples:
        >>> load_scenario("haiku")["grader_tools"]
        ['count_syllables']
    """
    key = name.removeprefix(_REPLAY_PREFIX).strip()
    scenarios = _scenarios()
    if key not in scenarios:
        msg = f"unknown replay scenario {key!r}; known scenarios: {', '.join(scenarios)}"
        raise ModelError(msg)
    return copy.deepcopy(scenarios[key])


def list_scenarios() -> list[dict[str, Any]]:
    """A summary of every bundled scenario, sorted by name.

    Each entry has `name, title, description, rubric, input, grader_tools, agent_kind,
    expected_status`, plus `max_iterations` (what the scenario is meant to run with)
    and `model` (the `replay:<name>` spec for both agent and grader).
    """
    keys = (
        "name", "title", "description", "rubric", "input", "grader_tools", "agent_kind",
        "expected_status", "max_iterations",
    )  # fmt: skip
    summaries = []
    for name, data in _scenarios().items():
        summary = {key: copy.deepcopy(data[key]) for key in keys}
        summary["model"] = f"{_REPLAY_PREFIX}{name}"
        summaries.append(summary)
    return summaries


# --------------------------------------------------------------------------- replay turns


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def last_fenced_block(messages: list[BaseMessage], language: str = "python") -> str:
    """The last fenced code block of `language` in `messages` (`"any"`: of any language).

    The grader receives one payload holding the rubric and the agent's transcript; the
    last block of that payload is the agent's latest draft. Returns `""` if none.
    """
    found = ""
    for message in messages:
        if isinstance(message, ToolMessage):
            continue
        for lang, body in _FENCE_RE.findall(_message_text(message)):
            if language == "any" or lang.lower() == language.lower():
                found = body
    return found


def _last_tool_result(messages: list[BaseMessage], tool: str | None) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and (tool is None or message.name == tool):
            return _message_text(message)
    return None


def _tool_turn(turn: dict[str, Any], scenario: dict[str, Any]) -> Callable[..., AIMessage]:
    draft_spec = turn.get("args_from_draft") or {}
    if isinstance(draft_spec, str):
        draft_spec = {draft_spec: "python"}
    from_scenario = turn.get("args_from_scenario") or {}

    def build(messages: list[BaseMessage]) -> AIMessage:
        args = dict(turn.get("args", {}))
        for arg, key in from_scenario.items():
            args[arg] = scenario[key]
        for arg, language in draft_spec.items():
            args[arg] = last_fenced_block(messages, language)
        return tool_call_turn(turn["tool"], args, content=turn.get("content", ""))

    return build


def _verdict_from_tool(spec: dict[str, Any]) -> Callable[..., AIMessage]:
    def build(messages: list[BaseMessage]) -> AIMessage:
        default_tool = spec.get("tool")
        criteria: list[dict[str, Any]] = []
        for item in spec["criteria"]:
            entry: dict[str, Any] = {"name": item["name"]}
            if "pass_if" in item:
                tool = item.get("tool", default_tool)
                result = _last_tool_result(messages, tool)
                if result is None:
                    entry["passed"] = False
                    entry["gap"] = f"{tool or 'the tool'} was not run, so this is unconfirmed"
                else:
                    entry["passed"] = re.search(item["pass_if"], result) is not None
                    entry["evidence"] = f"{tool or 'tool'} said: {result.strip()[:300]}"
                    if not entry["passed"]:
                        template = item.get("gap", "{tool} reported: {result}")
                        entry["gap"] = template.format(
                            tool=tool or "the tool", result=_failure_summary(result)
                        )
            else:
                entry["passed"] = item["passed"]
                if not item["passed"]:
                    entry["gap"] = item.get("gap", f"{item['name']}: not met yet")
            criteria.append(entry)
        satisfied = all(entry["passed"] for entry in criteria)
        result = "satisfied" if satisfied else "needs_revision"
        explanation = spec.get(
            "explanation_pass" if satisfied else "explanation_fail",
            "Every criterion passed." if satisfied else "Some criteria failed; see the gaps.",
        )
        return tool_call_turn(
            "GraderResponse",
            {"criteria": criteria, "explanation": explanation, "result": result},
        )

    return build


def _failure_summary(result: str, limit: int = 400) -> str:
    """The informative lines of a tool result (failures first), clipped for a gap."""
    result = result.split("\n--- ", 1)[0]  # drop the raw output a tool appends after its summary
    lines = [line.strip() for line in result.splitlines() if line.strip()]
    failing = [line for line in lines if line.startswith(("FAILED", "ERROR", "TIMEOUT", "KILLED"))]
    text = "; ".join(failing or lines)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _raise_turn(turn: dict[str, Any]) -> Callable[..., AIMessage]:
    error_type = _ERROR_TYPES.get(turn.get("error_type", ""), ScriptedGraderError)

    def build(messages: list[BaseMessage]) -> AIMessage:
        raise error_type(turn["raise"])

    return build


def _build_turn(turn: dict[str, Any], scenario: dict[str, Any]) -> Any:
    if "raise" in turn:
        return _raise_turn(turn)
    if "verdict" in turn:
        verdict = turn["verdict"]
        return tool_call_turn("GraderResponse", copy.deepcopy(verdict))
    if "verdict_from_tool" in turn:
        return _verdict_from_tool(turn["verdict_from_tool"])
    if "tool" in turn:
        return _tool_turn(turn, scenario)
    if "tool_call" in turn:
        call = turn["tool_call"]
        return tool_call_turn(call["name"], copy.deepcopy(call.get("args", {})))
    calls = [
        {
            "name": call["name"],
            "args": call.get("args", {}),
            "id": f"call_{index}_{os.urandom(4).hex()}",
            "type": "tool_call",
        }
        for index, call in enumerate(turn.get("tool_calls", []))
    ]
    return AIMessage(content=_join_lines(turn["content"]), tool_calls=calls)


def scenario_turns(name: str, role: Role) -> list[Any]:
    """The scripted turns of scenario `name` for `role`, ready for `ReplayChatModel`."""
    scenario = load_scenario(name)
    return [_build_turn(turn, scenario) for turn in scenario[f"{role}_turns"]]


# --------------------------------------------------------------------------- resolving specs


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
    fallback = f"{_REPLAY_PREFIX}{DEFAULT_REPLAY_SCENARIO}"
    for provider, spec in _DEFAULT_PROVIDER_MODELS:
        if _env_key(provider):
            fallback = spec
            break
    return agent or fallback, grader or agent or fallback


def describe_model(spec: str) -> str:
    """A one-line, human description of a model spec, for the dashboard."""
    text = spec.strip()
    if text.startswith(_REPLAY_PREFIX):
        name = text.removeprefix(_REPLAY_PREFIX).split("?", 1)[0]
        return (
            f"Offline demo: replays the scripted turns of scenario {name!r}; "
            "it is not a language model and judges nothing itself."
        )
    if text.startswith(_COMPATIBLE_PREFIX):
        return f"Model {text.removeprefix(_COMPATIBLE_PREFIX)!r} on an OpenAI-compatible endpoint."
    return f"Model {text!r} through its provider's API."


def _replay_model(spec: str, role: Role) -> ScenarioReplayChatModel:
    rest = spec.removeprefix(_REPLAY_PREFIX).strip()
    name, _, query = rest.partition("?")
    latency_s = 0.0
    if query:
        key, _, value = query.partition("=")
        if key != "latency_s":
            msg = f"replay spec {spec!r}: the only option is ?latency_s=<seconds>, got {key!r}"
            raise ModelError(msg)
        try:
            latency_s = float(value)
        except ValueError:
            latency_s = -1.0
        if not 0 <= latency_s <= 60:
            msg = f"replay spec {spec!r}: latency_s must be a number from 0 to 60, got {value!r}"
            raise ModelError(msg)
    if not name:
        msg = f"replay spec {spec!r} names no scenario; use replay:<scenario>"
        raise ModelError(msg)
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
    from langchain_openai import ChatOpenAI

    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        msg = f"base_url must be an http(s) URL such as http://127.0.0.1:8080/v1, got {base_url!r}"
        raise ModelError(msg)
    if not model.strip():
        msg = "an OpenAI-compatible endpoint needs a model name: openai-compatible:<model>"
        raise ModelError(msg)
    # Only hand the OpenAI key to OpenAI itself; a local server gets its own key or none.
    env_key = os.environ.get("OPENAI_COMPATIBLE_API_KEY", "").strip()
    if parsed.hostname == "api.openai.com":
        env_key = env_key or os.environ.get("OPENAI_API_KEY", "").strip()
    return ChatOpenAI(
        model=model.strip(),
        base_url=base_url,
        api_key=api_key or env_key or "not-needed",
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
        raise ModelError(msg)
    known = sorted(chat_base._BUILTIN_PROVIDERS)
    if provider not in known:
        msg = (
            f"unknown model provider {provider_text.strip()!r} in {spec!r}; known providers: "
            f"{', '.join(known)} (or replay:<scenario>, or openai-compatible:<model> with a base URL)"
        )
        raise ModelError(msg)
    if not api_key and provider in _PROVIDER_KEYS and not _env_key(provider):
        variables = " or ".join(_PROVIDER_KEYS[provider])
        msg = (
            f"model {spec!r} needs an API key: set {variables} in the environment "
            "(or pick a replay:<scenario> model to run offline)"
        )
        raise ModelError(msg)
    kwargs: dict[str, Any] = {"timeout": timeout_s}
    if role == "grader":
        kwargs["max_retries"] = 0  # the middleware retries transient grader failures itself
    if api_key:
        kwargs["api_key"] = api_key
    try:
        return init_chat_model(model, model_provider=provider, **kwargs)
    except ImportError as exc:
        package = chat_base._BUILTIN_PROVIDERS[provider][0].split(".")[0].replace("_", "-")
        msg = f"model provider {provider!r} needs the package {package}: pip install {package}"
        raise ModelError(msg) from exc
    except Exception as exc:
        msg = f"could not create model {spec!r}: {type(exc).__name__}: {exc}"
        raise ModelError(msg) from exc


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
        ModelError: Naming the problem: malformed spec, unknown provider or scenario,
            missing API key (with the variable to set), bad base URL.

    Examples:
        >>> resolve_model("replay:haiku", role="grader").model_name
        'replay:haiku'
    """
    if role not in ("agent", "grader"):
        msg = f"role must be 'agent' or 'grader', got {role!r}"
        raise ModelError(msg)
    if not isinstance(spec, str) or not spec.strip():
        msg = "model spec is empty: write provider:model-id, openai-compatible:<model> or replay:<scenario>"
        raise ModelError(msg)
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= 3600):
        msg = f"timeout_s must be between 0 and 3600 seconds, got {timeout_s!r}"
        raise ModelError(msg)
    text = spec.strip()
    if text.startswith(_REPLAY_PREFIX):
        return _replay_model(text, role)
    base_url = (base_url or "").strip() or None
    if text.startswith(_COMPATIBLE_PREFIX):
        base_url = base_url or os.environ.get("RUBRIC_STUDIO_LLM_BASE_URL", "").strip() or None
        if not base_url:
            msg = (
                f"model {spec!r} needs a base URL: pass base_url (e.g. "
                "http://127.0.0.1:8080/v1) or set RUBRIC_STUDIO_LLM_BASE_URL"
            )
            raise ModelError(msg)
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
        raise ModelError(msg)
    return _provider_model(text, api_key=api_key, timeout_s=timeout_s, role=role)


__all__ = [
    "DEFAULT_REPLAY_SCENARIO",
    "ModelError",
    "ScenarioReplayChatModel",
    "ScriptedGraderError",
    "api_key_status",
    "default_models",
    "describe_model",
    "last_fenced_block",
    "list_scenarios",
    "load_scenario",
    "resolve_model",
    "scenario_turns",
]
