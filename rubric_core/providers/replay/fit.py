"""Whether a replay grader can judge a rubric: the one check every front door applies.

A replay grader (`replay:<scenario>`) plays verdicts scripted for its own scenario's
rubric; pointed at another rubric it names none of its criteria (the pass would end in
`grader_error`) or, worse, replays a verdict that reads as a judgement of the wrong work.
`replay_grader_problem` is what `validate_spec` (the CLI's `run` and `batch`, the Run and
Batch pages), the grade-only services (`grade`, the pages' grade-only forms) and `regrade`
all call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.replay.scenarios import list_scenarios
from rubric_core.providers.spec import parse_model_spec
from rubric_core.rubric import parse_rubric

__all__ = ["ReplayMismatch", "replay_grader_mismatch", "replay_grader_problem", "scenario_of"]


@dataclass(frozen=True)
class ReplayMismatch:
    """A replay grader scripted for another rubric than the one it is asked to judge."""

    scenario: str
    """The scenario the grader replays."""
    own: str | None
    """The scenario whose rubric the graded rubric is, if one is."""
    message: str
    """What is wrong and what to use instead, one paragraph."""


def scenario_of(model_spec: object) -> str | None:
    """The scenario a `replay:` spec plays (options after `?` dropped), else `None`.

    Examples:
        >>> scenario_of("replay:haiku?latency_s=1"), scenario_of("openai:gpt-4.1")
        ('haiku', None)
    """
    try:
        spec = parse_model_spec(model_spec)
    except ModelSpecError:
        return None
    return spec.model if spec.kind == "replay" else None


def _criteria_of(scenario: Mapping[str, Any]) -> list[str]:
    return parse_rubric(str(scenario.get("rubric") or ""))


def replay_grader_mismatch(
    grader_model: object,
    criteria: Sequence[str],
    *,
    rubric: str = "this rubric",
    scenarios: Iterable[Mapping[str, Any]] | None = None,
) -> ReplayMismatch | None:
    """The mismatch when `grader_model` replays a scenario scripted for other criteria.

    `None` for any grader that is not a known replay scenario, and for one whose
    scenario's rubric has exactly these criteria.

    Args:
        grader_model: The grader's model spec.
        criteria: The rubric version's criteria (`parse_rubric`).
        rubric: How to name the rubric in the message, e.g. `"notes v2"`.
        scenarios: The bundled scenarios (default `list_scenarios()`).

    Examples:
        >>> found = replay_grader_mismatch("replay:haiku", ["Cites a date"], rubric="notes v1")
        >>> found.scenario, found.own
        ('haiku', None)
        >>> replay_grader_mismatch("openai:gpt-4.1", ["Cites a date"]) is None
        True
    """
    name = scenario_of(grader_model)
    if name is None:
        return None
    known = list(list_scenarios() if scenarios is None else scenarios)
    scenario = next((s for s in known if s.get("name") == name), None)
    wanted = list(criteria)
    if scenario is None or _criteria_of(scenario) == wanted:
        return None
    own = next((str(s["name"]) for s in known if _criteria_of(s) == wanted), None)
    instead = (
        f"the replay scenario {own!r}, whose rubric this is"
        if own
        else "a provider or server model; `none` (code checks only) when every criterion "
        "has a {check}; or grade it yourself (the person grader)"
    )
    message = (
        f"The replay grader {name!r} plays verdicts scripted for its own scenario's rubric, "
        f"not for {rubric}: it would judge none of these criteria, so the pass would end in "
        f"grader_error or replay a verdict about other work. Use instead: {instead}."
    )
    return ReplayMismatch(scenario=name, own=own, message=message)


def replay_grader_problem(
    grader_model: object, criteria: Sequence[str], *, rubric: str = "this rubric"
) -> str | None:
    """`replay_grader_mismatch`'s message, or `None` when the grader fits."""
    found = replay_grader_mismatch(grader_model, criteria, rubric=rubric)
    return None if found is None else found.message
