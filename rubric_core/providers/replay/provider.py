"""`replay:<scenario>[?latency_s=<seconds>]`: the provider of the bundled scenarios' models.

Its models replay scripted turns (`ScenarioReplayChatModel`); they are not language
models. They take no client settings, so a grader's replay model is used as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_core.providers.base import BuildOptions, Provider
from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.replay.models import ReplayChatModel, ScenarioReplayChatModel
from rubric_core.providers.replay.scenarios import load_scenario, scenario_turns
from rubric_core.schema import REPLAY_PREFIX

if TYPE_CHECKING:
    from rubric_core.providers.spec import ModelSpec


class ReplayProvider(Provider):
    """`replay:<scenario>`: a `ScenarioReplayChatModel` playing `role`'s side."""

    name = REPLAY_PREFIX.removesuffix(":")

    def build(self, spec: ModelSpec, options: BuildOptions) -> ScenarioReplayChatModel:
        name, latency_s = spec.model, 0.0
        for key, value in spec.options.items():
            if key != "latency_s":
                msg = f"replay spec {spec.text!r}: the only option is ?latency_s=<seconds>, got {key!r}"
                raise ModelSpecError(msg)
            try:
                latency_s = float(value)
            except ValueError:
                latency_s = -1.0
            if not 0 <= latency_s <= 60:
                msg = f"replay spec {spec.text!r}: latency_s must be a number from 0 to 60, got {value!r}"
                raise ModelSpecError(msg)
        scenario = load_scenario(name)
        role = options.role
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

    def describe(self, spec: ModelSpec) -> str:
        return (
            f"Offline demo: replays the scripted turns of scenario {spec.model!r}; "
            "it is not a language model and judges nothing itself."
        )

    def owns(self, model: object) -> bool:
        return isinstance(model, ReplayChatModel)
