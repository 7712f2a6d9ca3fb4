"""`human:<reviewer>`: a pass a person graded. It names who judged; no model is called."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_core.providers.base import BuildOptions, Provider
from rubric_core.providers.errors import ModelSpecError
from rubric_core.schema import HUMAN_GRADER_PREFIX

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.providers.spec import ModelSpec


class HumanProvider(Provider):
    """`human:<reviewer>`, the `grader_model` of a person's verdict: it builds no model."""

    name = HUMAN_GRADER_PREFIX.removesuffix(":")

    def build(self, spec: ModelSpec, options: BuildOptions) -> BaseChatModel:
        msg = (
            f"model spec {spec.text!r} names a person ({spec.model!r}), whose verdicts are "
            "recorded, not a model that can be called"
        )
        raise ModelSpecError(msg)
