"""`replay:<scenario>[?latency_s=<seconds>]`: the provider of the bundled scenarios' models.

Its models replay scripted turns (`ScenarioReplayChatModel`); they are not language
models. They take no client settings, so a grader's replay model is used as it is.
"""

from __future__ import annotations

from rubric_core.providers.base import BuildOptions, Provider
from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.replay.models import ReplayChatModel, ScenarioReplayChatModel
from rubric_core.providers.replay.scenarios import load_scenario, scenario_turns
from rubric_core.schema import REPLAY_PREFIX


class ReplayProvider(Provider):
    """`replay:<scenario>`: a `ScenarioReplayChatModel` playing `role`'s side."""

    name = REPLAY_PREFIX.removesuffix(":")

    def build(self, spec: str, model_id: str, options: BuildOptions) -> ScenarioReplayChatModel:
        name, _, query = model_id.strip().partition("?")
        latency_s = 0.0
        if query:
            key, _, value = query.partition("=")
            if key != "latency_s":
                msg = f"replay spec {spec!r}: the only option is ?latency_s=<seconds>, got {key!r}"
                raise ModelSpecError(msg)
            try:
                latency_s = float(value)
            except ValueError:
                latency_s = -1.0
            if not 0 <= latency_s <= 60:
                msg = (
                    f"replay spec {spec!r}: latency_s must be a number from 0 to 60, got {value!r}"
                )
                raise ModelSpecError(msg)
        if not name:
            msg = f"replay spec {spec!r} names no scenario; use replay:<scenario>"
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

    def describe(self, spec: str) -> str:
        name = spec.removeprefix(REPLAY_PREFIX).split("?", 1)[0]
        return (
            f"Offline demo: replays the scripted turns of scenario {name!r}; "
            "it is not a language model and judges nothing itself."
        )

    def owns(self, model: object) -> bool:
        return isinstance(model, ReplayChatModel)
