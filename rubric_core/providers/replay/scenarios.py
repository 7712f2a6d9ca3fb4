"""The bundled replay scenarios: loading and validating their JSON, and their scripted turns.

Each `rubric_core/scenarios/<name>.json` scripts both sides of an offline demo run (see
its README): `scenario_turns(name, "agent")` and `scenario_turns(name, "grader")` turn
the script into the turns a `ReplayChatModel` plays. Grader turns can call real grader
tools and decide from what they return, so a scripted grader really grades the draft.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from rubric_core.messages import message_text
from rubric_core.providers.base import Role
from rubric_core.providers.errors import ModelSpecError, ScriptedGraderError
from rubric_core.providers.replay.models import tool_call_turn
from rubric_core.rubric import parse_rubric
from rubric_core.schema import (
    AGENT_KINDS,
    DEFAULT_MAX_ITERATIONS,
    REPLAY_PREFIX,
    GraderResponse,
    pass_result,
)

DEFAULT_REPLAY_SCENARIO = "find_duplicates"
"""The scenario `default_models` names when no API key is configured."""

SCENARIO_RUBRIC_TAGS: tuple[str, ...] = ("scenario",)
"""The tags a bundled scenario's saved rubric carries (`run --scenario`, Try it, the pages)."""

SCENARIO_RUBRIC_NOTE = "bundled scenario"
"""The note of a version saved from a bundled scenario's rubric."""


def scenario_rubric_name(scenario: str) -> str:
    """The name a bundled scenario's rubric is saved under: the scenario's own name, the
    one rule of Try it, the Run and Batch pages' "Use scenario" and `run --scenario`, so
    a rubric filter finds every run of the demo. (Before, `run --scenario` saved it as
    `scenario-<name>`; such rubrics stay stored and readable under that name.)

    Examples:
        >>> scenario_rubric_name("replay:haiku"), scenario_rubric_name("haiku")
        ('haiku', 'haiku')
    """
    return scenario.removeprefix(REPLAY_PREFIX).split("?", 1)[0].strip()


_FENCE_RE = re.compile(
    r"^[ \t]*```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE
)
_TURN_KINDS = ("content", "tool", "verdict", "verdict_from_tool", "raise", "tool_call")
_ERROR_TYPES: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
    "TimeoutError": TimeoutError,
    "ConnectionError": ConnectionError,
}


# --------------------------------------------------------------------------- loading


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
        raise ModelSpecError(msg)
    kinds = [kind for kind in _TURN_KINDS if kind in turn]
    if not kinds:
        msg = f"{where} has none of the turn keys {', '.join(_TURN_KINDS)}"
        raise ModelSpecError(msg)
    if "verdict" in turn:
        try:
            verdict = GraderResponse.model_validate(turn["verdict"])
        except ValueError as exc:
            msg = f"{where}: verdict is not a valid GraderResponse: {exc}"
            raise ModelSpecError(msg) from exc
        unknown = [c.name for c in verdict.criteria if c.name not in criteria]
        if unknown:
            msg = f"{where}: verdict names criteria not in the rubric: {unknown}"
            raise ModelSpecError(msg)
    if "verdict_from_tool" in turn:
        spec = turn["verdict_from_tool"]
        for item in spec.get("criteria", []):
            if item.get("name") not in criteria:
                msg = f"{where}: verdict_from_tool names a criterion not in the rubric: {item.get('name')!r}"
                raise ModelSpecError(msg)
            if "pass_if" in item:
                re.compile(item["pass_if"])
            elif not isinstance(item.get("passed"), bool):
                msg = f"{where}: criterion {item.get('name')!r} needs 'pass_if' or 'passed'"
                raise ModelSpecError(msg)
    if "raise" in turn and turn.get("error_type", "RuntimeError") not in _ERROR_TYPES:
        msg = f"{where}: error_type must be one of {', '.join(_ERROR_TYPES)}"
        raise ModelSpecError(msg)


def _parse_scenario(name: str, text: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"scenario file {name}.json is not valid JSON: {exc}"
        raise ModelSpecError(msg) from exc
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
        raise ModelSpecError(msg)
    if data["name"] != name:
        msg = f"scenario file {name}.json declares name {data['name']!r}; they must match"
        raise ModelSpecError(msg)
    if data["agent_kind"] not in AGENT_KINDS:
        kinds = " or ".join(repr(kind) for kind in AGENT_KINDS)
        msg = f"scenario {name!r}: agent_kind must be {kinds}"
        raise ModelSpecError(msg)
    data.setdefault("grader_tools", [])
    data.setdefault("max_iterations", DEFAULT_MAX_ITERATIONS)
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
        ModelSpecError: If no scenario has that name; the message lists the known ones.

    Examples:
        >>> load_scenario("haiku")["grader_tools"]
        ['count_syllables']
    """
    key = name.removeprefix(REPLAY_PREFIX).strip()
    scenarios = _scenarios()
    if key not in scenarios:
        msg = f"unknown replay scenario {key!r}; known scenarios: {', '.join(scenarios)}"
        raise ModelSpecError(msg)
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
        summary["model"] = f"{REPLAY_PREFIX}{name}"
        summaries.append(summary)
    return summaries


# --------------------------------------------------------------------------- turns


def last_fenced_block(messages: list[BaseMessage], language: str = "python") -> str:
    """The last fenced code block of `language` in `messages` (`"any"`: of any language).

    The grader receives one payload holding the rubric and the agent's transcript; the
    last block of that payload is the agent's latest draft. Returns `""` if none.
    """
    found = ""
    for message in messages:
        if isinstance(message, ToolMessage):
            continue
        for lang, body in _FENCE_RE.findall(message_text(message)):
            if language == "any" or lang.lower() == language.lower():
                found = body
    return found


def _last_tool_result(messages: list[BaseMessage], tool: str | None) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and (tool is None or message.name == tool):
            return message_text(message)
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
        result = pass_result(criteria)
        satisfied = result == "satisfied"
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
    """The scripted turns of scenario `name` for `role`, ready for `ReplayChatModel`.

    Examples:
        >>> scenario_turns("haiku", "agent")[0].content.startswith("An autumn haiku")
        True
    """
    scenario = load_scenario(name)
    return [_build_turn(turn, scenario) for turn in scenario[f"{role}_turns"]]
