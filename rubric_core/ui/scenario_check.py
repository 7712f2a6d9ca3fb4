"""Whether a replay scenario fits the run a page is about to launch: its rubric and its tools.

Replay models play a scenario's scripted turns (they are not language models). A replay
grader's verdicts name its own scenario's criteria and its script may call grader tools;
pointed at another rubric, or without those tools, the run cannot judge anything and
ends in `grader_error` or `ReplayExhaustedError`. The Run and Batch pages check this
before they launch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_core.providers.replay.fit import replay_grader_mismatch, scenario_of
from rubric_core.rubric import parse_rubric

__all__ = ["ScenarioProblem", "replay_run_problems", "replay_scenario_name"]


@dataclass(frozen=True)
class ScenarioProblem:
    """One way a replay scenario does not fit the run about to start."""

    scenario: str
    """The replay scenario the model plays."""
    role: str
    """`"agent"` or `"grader"`."""
    blocking: bool
    """The run could not judge anything: launching it is refused."""
    message: str
    """What is wrong and what to use instead, as one paragraph."""


def replay_scenario_name(model_spec: str) -> str | None:
    """The scenario a `replay:` model string plays (options after `?` dropped), else None.

    Examples:
        >>> replay_scenario_name("replay:haiku?latency_s=1"), replay_scenario_name("openai:gpt")
        ('haiku', None)
    """
    return scenario_of(model_spec)


def replay_run_problems(
    *,
    agent_model: str,
    grader_model: str,
    scenarios: Iterable[Mapping[str, Any]],
    criteria: Sequence[str],
    rubric: str,
    grader_tools: Iterable[str] = (),
) -> list[ScenarioProblem]:
    """What keeps a replay scenario from judging `criteria`: one problem per finding.

    A replay grader whose scenario scripts another rubric is blocking (it would name
    none of these criteria), and so, once the rubric fits, is one whose script calls a
    grader tool that is not chosen. A replay agent with another scenario's rubric is only worth a warning
    when a real grader judges its scripted drafts.

    Args:
        agent_model: The agent's model string.
        grader_model: The grader's model string.
        scenarios: `models.list_scenarios()`.
        criteria: The chosen rubric version's criteria.
        rubric: How to name that version in the message, e.g. `"haiku v2"`.
        grader_tools: The grader tools the run will have.

    Examples:
        >>> scenarios = [{"name": "bottle", "rubric": "- two sentences",
        ...               "grader_tools": ["text_stats"]}]
        >>> [p.blocking for p in replay_run_problems(agent_model="replay:bottle",
        ...     grader_model="replay:bottle", scenarios=scenarios,
        ...     criteria=["two sentences"], rubric="bottle v1")]
        [True]
        >>> replay_run_problems(agent_model="replay:bottle", grader_model="replay:bottle",
        ...     scenarios=scenarios, criteria=["two sentences"], rubric="bottle v1",
        ...     grader_tools=["text_stats"])
        []
    """
    known = list(scenarios)
    by_name = {str(s["name"]): s for s in known}
    problems: list[ScenarioProblem] = []
    grader_name = replay_scenario_name(grader_model)
    grader = by_name.get(grader_name or "")
    if grader is not None and grader_name is not None:
        # A wrong rubric first: loading the right scenario also sets its tools.
        found = replay_grader_mismatch(grader_model, criteria, rubric=rubric, scenarios=known)
        if found is not None:  # the library's one check, as the CLI makes it
            problems.append(ScenarioProblem(grader_name, "grader", True, found.message))
        missing = [t for t in grader.get("grader_tools") or [] if t not in set(grader_tools)]
        if missing and not problems:
            problems.append(
                ScenarioProblem(
                    grader_name,
                    "grader",
                    True,
                    f"The replay grader {grader_name!r} calls {', '.join(missing)} in its "
                    f"script: add {'it' if len(missing) == 1 else 'them'} to Grader tools "
                    "(loading the scenario fills them in), or its script cannot go on.",
                )
            )
    agent_name = replay_scenario_name(agent_model)
    agent = by_name.get(agent_name or "")
    if (
        agent is not None
        and agent_name is not None
        and grader is None
        and parse_rubric(str(agent.get("rubric") or "")) != list(criteria)
    ):
        problems.append(
            ScenarioProblem(
                agent_name,
                "agent",
                False,
                f"The replay agent {agent_name!r} plays drafts scripted for its own rubric, "
                f"not for {rubric}; the grader will judge those drafts against your "
                "criteria, and they will not change with its feedback.",
            )
        )
    return problems
