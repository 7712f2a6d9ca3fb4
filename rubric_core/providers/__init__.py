"""Chat models by spec, through one registry of providers, and each provider's quirks.

- `registry`: `PROVIDERS` (spec prefix -> `Provider`), `provider_for(spec)`,
  `provider_of(model)`; `resolve_model` ("provider:model-id", `openai-compatible:`,
  `replay:`), `grader_model`, `api_key_status`, `default_models`, `describe_model`.
- `base`: `Provider`, the quirks a provider may override (building, the grader's client,
  per-call timeouts, prompt-cache markers, the verdict schema's dialect).
- `openai` (OpenAI and OpenAI-compatible endpoints), `anthropic`, `human`, `replay/`
  (models that replay scripted turns, not language models, and the bundled scenarios),
  `langchain` (every other provider `init_chat_model` knows).
- `spec`: `parse_model_spec`, the one parser of model specs (`ModelSpec`, `spec_kind`);
  the registry resolves what it parses.
- `errors`: `ModelSpecError`, `ReplayExhaustedError`, `ScriptedGraderError`.
- `headers`: `rate_headers`, the one reader of `Retry-After`, `retry-after-ms` and
  `x-ratelimit-*` (the batch's rate book and the grader's retry both ask it).
"""

from __future__ import annotations

from rubric_core.providers.base import BuildOptions, Provider, Role
from rubric_core.providers.errors import ModelSpecError, ReplayExhaustedError, ScriptedGraderError
from rubric_core.providers.registry import (
    PROVIDERS,
    api_key_status,
    default_models,
    describe_model,
    grader_model,
    provider_for,
    provider_of,
    resolve_model,
)
from rubric_core.providers.replay import (
    DEFAULT_REPLAY_SCENARIO,
    ReplayChatModel,
    ScenarioReplayChatModel,
    ScriptedTurn,
    last_fenced_block,
    list_scenarios,
    load_scenario,
    replay_grader_problem,
    scenario_turns,
    tool_call_turn,
    verdict_turn,
)
from rubric_core.providers.spec import ModelSpec, parse_model_spec, spec_kind

__all__ = [
    "DEFAULT_REPLAY_SCENARIO",
    "PROVIDERS",
    "BuildOptions",
    "ModelSpec",
    "ModelSpecError",
    "Provider",
    "ReplayChatModel",
    "ReplayExhaustedError",
    "Role",
    "ScenarioReplayChatModel",
    "ScriptedGraderError",
    "ScriptedTurn",
    "api_key_status",
    "default_models",
    "describe_model",
    "grader_model",
    "last_fenced_block",
    "list_scenarios",
    "load_scenario",
    "parse_model_spec",
    "provider_for",
    "provider_of",
    "replay_grader_problem",
    "resolve_model",
    "scenario_turns",
    "spec_kind",
    "tool_call_turn",
    "verdict_turn",
]
