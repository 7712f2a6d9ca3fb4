"""The Run page's form: what blocks Launch, what a replay scenario fills in, the Try-it demo.

Streamlit's number inputs with bounds refuse an out-of-range value in the browser and
keep sending the last valid one, so a run would silently use a number the person no
longer sees. The pages therefore take any number and ask `max_iterations_problem`;
Launch stays disabled while it has something to say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_core import config
from rubric_core.providers.replay import (
    SCENARIO_RUBRIC_NOTE,
    SCENARIO_RUBRIC_TAGS,
    scenario_rubric_name,
)
from rubric_core.providers.replay.fit import replay_grader_mismatch
from rubric_core.rubric import parse_rubric
from rubric_core.runs.spec import RunSpec
from rubric_core.schema import (
    DEFAULT_MAX_ITERATIONS,
    MAX_ITERATIONS_LIMIT,
    REPLAY_PREFIX,
    is_checks_only_grader,
)
from rubric_core.ui.models import replay_scenario_mismatch, replay_spec

__all__ = [
    "DEMO_LATENCY_S",
    "DEMO_SCENARIO",
    "ScenarioForm",
    "demo_latency_s",
    "max_iterations_problem",
    "replay_mismatch_problem",
    "scenario_for_rubric",
    "scenario_form",
]

DEMO_SCENARIO = "haiku"
"""The scenario the landing page's "Try it" runs: a syllable counter catches a long line,
the agent revises, the second pass is satisfied."""

DEMO_LATENCY_S = 1.0
"""Seconds per model call in the demo by default: slow enough to watch each pass arrive and
to press Stop on a quiet machine."""

DEMO_LATENCY_ENV = "RUBRIC_STUDIO_DEMO_LATENCY_S"


def demo_latency_s() -> float:
    """Seconds per model call in the demo: `RUBRIC_STUDIO_DEMO_LATENCY_S`, 1 when unset.

    A slower pace suits a loaded or slow machine, where the Run page may take longer to
    draw than a one-second demo takes to finish.

    Raises:
        InputError: The variable is not a number from 0 to 60 (the replay models' bound).

    Examples:
        >>> demo_latency_s() == DEMO_LATENCY_S
        True
    """
    return config.seconds(DEMO_LATENCY_ENV, high=60)


def max_iterations_problem(value: Any) -> str | None:
    """Why `value` cannot be a run's max iterations, or `None` when it can.

    Examples:
        >>> max_iterations_problem(3) is None
        True
        >>> max_iterations_problem(21)
        'Max iterations must be a whole number from 1 to 20, got 21.'
        >>> max_iterations_problem(-3)
        'Max iterations must be a whole number from 1 to 20, got -3.'
    """
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole and 1 <= value <= MAX_ITERATIONS_LIMIT:
        return None
    return f"Max iterations must be a whole number from 1 to {MAX_ITERATIONS_LIMIT}, got {value}."


def scenario_for_rubric(
    scenarios: Iterable[Mapping[str, Any]], criteria: Sequence[str]
) -> str | None:
    """The replay scenario whose scripted rubric has exactly `criteria`, if one does.

    Examples:
        >>> scenario_for_rubric([{"name": "haiku", "rubric": "- three lines"}], ["three lines"])
        'haiku'
        >>> scenario_for_rubric([{"name": "haiku", "rubric": "- three lines"}], ["rhymes"]) is None
        True
    """
    wanted = list(criteria)
    for scenario in scenarios:
        if parse_rubric(str(scenario.get("rubric") or "")) == wanted:
            return str(scenario["name"])
    return None


def replay_mismatch_problem(
    models: Mapping[str, str], scenarios: Sequence[Mapping[str, Any]], version: Mapping[str, Any]
) -> str | None:
    """Why a run of these models on rubric `version` must not start, or `None`.

    `models` maps a role (`"agent"`, `"grader"`) to its model string. A replay model
    plays a script written for its scenario's own rubric and request: on another rubric
    its grader names criteria the rubric does not have (the run ends in `grader_error`)
    and its agent answers another request. The message says what to use instead.

    Examples:
        >>> scenarios = [{"name": "haiku", "rubric": "- three lines"}]
        >>> version = {"name": "notes", "version": 2, "criteria": ["cites a date"]}
        >>> replay_mismatch_problem({"agent": "replay:haiku"}, scenarios, version).split(":")[0]
        "The agent model replays the scenario 'haiku', scripted for its own rubric, not for notes v2"
        >>> replay_mismatch_problem({"agent": "openai:gpt-4.1"}, scenarios, version) is None
        True
    """
    criteria = list(version.get("criteria") or [])
    where = f"{version.get('name')} v{version.get('version')}"
    grader = models.get("grader", "")
    found = replay_grader_mismatch(grader, criteria, rubric=where, scenarios=scenarios)
    if found is not None:  # the library's one check, as the CLI makes it
        return found.message + _GRADE_YOURSELF
    for role, spec in models.items():
        if role == "grader" or is_checks_only_grader(grader):
            continue  # no grader: the checks judge whatever drafts the replay agent plays
        scenario = replay_scenario_mismatch(spec, scenarios, criteria)
        if scenario is None:
            continue
        own = scenario_for_rubric(scenarios, criteria)
        instead = (
            f"this rubric is the scenario {own!r}'s, so pick that scenario for both models"
            if own
            else f"load the scenario {scenario!r} with its own rubric (Offline demo above)"
        )
        return (
            f"The {role} model replays the scenario {scenario!r}, scripted for its own rubric, "
            f"not for {version.get('name')} v{version.get('version')}: its verdicts would name "
            "other criteria (the run ends in grader_error) and its agent answers another "
            f"request. Use instead: {instead}; "
            "or a provider or server model; or, to test your own rubric offline, switch on "
            "“Grade an output you already have” above and grade it yourself."
        )
    return None


_GRADE_YOURSELF = (
    " To test your own rubric offline, switch on “Grade an output you already have” above "
    "and grade it yourself."
)


@dataclass(frozen=True)
class ScenarioForm:
    """The Run page's fields as a replay scenario fills them (its rubric, input and tools)."""

    scenario: str
    """The scenario's name; also the name its rubric is saved under (`rubric_name`)."""
    rubric_text: str
    """The scenario's rubric, to save as a version before the run."""
    input: str
    """The request the scenario's agent script answers."""
    grader_tools: tuple[str, ...]
    """The grader tools its script calls (only those the dashboard offers)."""
    max_iterations: int
    """The cap the scenario is written for."""
    agent_kind: str
    """`basic` or `deep`."""
    latency_s: float
    """Seconds each replay call waits (0: as fast as it can)."""

    @property
    def rubric_name(self) -> str:
        """The name its rubric is saved under: `run --scenario`'s rule, the scenario's name."""
        return scenario_rubric_name(self.scenario)

    def save_rubric(self, store: Any) -> dict[str, Any]:
        """Save the scenario's rubric as `run --scenario` does (name, tags, note); the version.

        Raises:
            StoreError: The rubric could not be saved.
        """
        version: dict[str, Any] = store.rubrics.save_version(
            self.rubric_name, self.rubric_text, tags=list(SCENARIO_RUBRIC_TAGS),
            note=SCENARIO_RUBRIC_NOTE,
        )  # fmt: skip
        return version

    @property
    def model(self) -> str:
        """The replay model string both roles use."""
        return replay_spec(self.scenario, self.latency_s)

    def run_spec(self, rubric_version_id: int) -> RunSpec:
        """The run these fields launch, on the saved version of the scenario's rubric."""
        return RunSpec(
            rubric_version_id=rubric_version_id,
            input=self.input,
            agent_model=self.model,
            grader_model=self.model,
            grader_tools=self.grader_tools,
            max_iterations=self.max_iterations,
            agent_kind=self.agent_kind,
        )


def scenario_form(
    scenario: Mapping[str, Any], *, tool_names: Iterable[str], latency_s: float = 0.0
) -> ScenarioForm:
    """The Run page's fields for a bundled scenario (`models.list_scenarios()` entry).

    Examples:
        >>> form = scenario_form(
        ...     {"name": "haiku", "rubric": "- a", "input": "Write", "grader_tools": ["count_syllables"],
        ...      "max_iterations": 3, "agent_kind": "basic"},
        ...     tool_names=["count_syllables"], latency_s=1.0)
        >>> form.model, form.grader_tools
        ('replay:haiku?latency_s=1', ('count_syllables',))
    """
    offered = set(tool_names)
    name = str(scenario["name"]).removeprefix(REPLAY_PREFIX)
    return ScenarioForm(
        scenario=name,
        rubric_text=str(scenario["rubric"]),
        input=str(scenario["input"]),
        grader_tools=tuple(t for t in scenario.get("grader_tools") or () if t in offered),
        max_iterations=int(scenario.get("max_iterations") or DEFAULT_MAX_ITERATIONS),
        agent_kind=str(scenario.get("agent_kind") or "basic"),
        latency_s=float(latency_s),
    )
