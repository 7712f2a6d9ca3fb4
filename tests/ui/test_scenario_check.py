"""Tests of the replay-scenario check the Run and Batch pages make before they launch."""

from __future__ import annotations

from rubric_core.providers import list_scenarios, load_scenario
from rubric_core.rubric import parse_rubric
from rubric_core.ui import replay_run_problems

BOTTLE = "satisfied_first_try"  # its grader calls text_stats


def _problems(agent: str, grader: str, criteria: list[str], tools: tuple[str, ...] = ()) -> list:
    return replay_run_problems(
        agent_model=agent,
        grader_model=grader,
        scenarios=list_scenarios(),
        criteria=criteria,
        rubric="mine v1",
        grader_tools=tools,
    )


def test_a_replay_grader_of_another_rubric_blocks_and_names_the_scenario_to_use() -> None:
    haiku = parse_rubric(load_scenario("haiku")["rubric"])
    (problem,) = _problems(f"replay:{BOTTLE}", f"replay:{BOTTLE}?latency_s=1", haiku)
    assert problem.blocking and problem.role == "grader" and problem.scenario == BOTTLE
    assert "mine v1" in problem.message and "grader_error" in problem.message
    assert "'haiku', whose rubric this is" in problem.message


def test_a_rubric_of_no_scenario_is_pointed_to_a_real_grader_or_a_person() -> None:
    (problem,) = _problems(f"replay:{BOTTLE}", f"replay:{BOTTLE}", ["rhymes", "is short"])
    assert problem.blocking
    assert "grade it yourself" in problem.message


def test_a_missing_grader_tool_blocks_once_the_rubric_fits() -> None:
    bottle = parse_rubric(load_scenario(BOTTLE)["rubric"])
    (problem,) = _problems(f"replay:{BOTTLE}", f"replay:{BOTTLE}", bottle)
    assert problem.blocking and "calls text_stats" in problem.message
    assert _problems(f"replay:{BOTTLE}", f"replay:{BOTTLE}", bottle, ("text_stats",)) == []


def test_a_replay_agent_with_a_real_grader_is_only_a_warning() -> None:
    (problem,) = _problems(f"replay:{BOTTLE}", "openai:gpt-4.1-mini", ["rhymes"])
    assert not problem.blocking and problem.role == "agent"
    assert _problems("openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5", ["rhymes"]) == []
