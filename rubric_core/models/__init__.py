"""Chat models by name: provider strings, OpenAI-compatible endpoints and offline replays.

- `providers`: `resolve_model` ("provider:model-id", `openai-compatible:`, `replay:`),
  `api_key_status`, `default_models`, `describe_model`.
- `scenarios`: the bundled replay scenarios (`rubric_core/scenarios/*.json`): loading,
  validating, and turning them into scripted turns.
- `replay`: `ReplayChatModel` and its scenario flavour; they replay scripted turns and
  are not language models.
- `errors`: `ModelSpecError`, `ReplayExhaustedError`, `ScriptedGraderError`.
"""

from __future__ import annotations

from rubric_core.models.errors import ModelSpecError, ReplayExhaustedError, ScriptedGraderError
from rubric_core.models.providers import (
    api_key_status,
    default_models,
    describe_model,
    resolve_model,
)
from rubric_core.models.replay import (
    ReplayChatModel,
    ScenarioReplayChatModel,
    ScriptedTurn,
    tool_call_turn,
    verdict_turn,
)
from rubric_core.models.scenarios import (
    DEFAULT_REPLAY_SCENARIO,
    Role,
    last_fenced_block,
    list_scenarios,
    load_scenario,
    scenario_turns,
)

__all__ = [
    "DEFAULT_REPLAY_SCENARIO",
    "ModelSpecError",
    "ReplayChatModel",
    "ReplayExhaustedError",
    "Role",
    "ScenarioReplayChatModel",
    "ScriptedGraderError",
    "ScriptedTurn",
    "api_key_status",
    "default_models",
    "describe_model",
    "last_fenced_block",
    "list_scenarios",
    "load_scenario",
    "resolve_model",
    "scenario_turns",
    "tool_call_turn",
    "verdict_turn",
]
