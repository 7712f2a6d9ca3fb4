"""The `replay` provider: models that replay scripted turns, and the bundled scenarios.

- `models`: `ReplayChatModel` and its scenario flavour; they replay scripted turns and
  are not language models.
- `scenarios`: the bundled replay scenarios (`rubric_core/scenarios/*.json`): loading,
  validating, and turning them into scripted turns.
- `fit`: whether a replay grader can judge a rubric (`replay_grader_problem`).
- `provider`: `ReplayProvider`, what `replay:<scenario>` specs resolve through.
"""

from __future__ import annotations

from rubric_core.providers.replay.fit import (
    ReplayMismatch,
    replay_grader_mismatch,
    replay_grader_problem,
    scenario_of,
)
from rubric_core.providers.replay.models import (
    ReplayChatModel,
    ScenarioReplayChatModel,
    ScriptedTurn,
    tool_call_turn,
    verdict_turn,
)
from rubric_core.providers.replay.provider import ReplayProvider
from rubric_core.providers.replay.scenarios import (
    DEFAULT_REPLAY_SCENARIO,
    SCENARIO_RUBRIC_NOTE,
    SCENARIO_RUBRIC_TAGS,
    last_fenced_block,
    list_scenarios,
    load_scenario,
    scenario_rubric_name,
    scenario_turns,
)

__all__ = [
    "DEFAULT_REPLAY_SCENARIO",
    "SCENARIO_RUBRIC_NOTE",
    "SCENARIO_RUBRIC_TAGS",
    "ReplayChatModel",
    "ReplayMismatch",
    "ReplayProvider",
    "ScenarioReplayChatModel",
    "ScriptedTurn",
    "last_fenced_block",
    "list_scenarios",
    "load_scenario",
    "replay_grader_mismatch",
    "replay_grader_problem",
    "scenario_of",
    "scenario_rubric_name",
    "scenario_turns",
    "tool_call_turn",
    "verdict_turn",
]
