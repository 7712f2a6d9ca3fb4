"""Rubric Studio's library: make an agent evaluate itself against a rubric and iterate."""

from __future__ import annotations

from rubric_core.grader.judges import Judges
from rubric_core.grader.retry import RetryPolicy
from rubric_core.middleware import RubricMiddleware, RubricState
from rubric_core.pipeline import PassLimits, PassPipeline
from rubric_core.rubric import (
    CriterionSpec,
    RubricError,
    criteria_from_healthbench,
    parse_criteria,
    parse_rubric,
    validate_rubric,
)
from rubric_core.schema import (
    RUBRIC_GRADER_MESSAGE_SOURCE,
    STATUS_DESCRIPTIONS,
    GraderResponse,
    RubricEvaluation,
    RubricStatus,
)
from rubric_core.scoring import regressions, score_pass

__all__ = [
    "RUBRIC_GRADER_MESSAGE_SOURCE",
    "STATUS_DESCRIPTIONS",
    "CriterionSpec",
    "GraderResponse",
    "Judges",
    "PassLimits",
    "PassPipeline",
    "RetryPolicy",
    "RubricError",
    "RubricEvaluation",
    "RubricMiddleware",
    "RubricState",
    "RubricStatus",
    "criteria_from_healthbench",
    "parse_criteria",
    "parse_rubric",
    "regressions",
    "score_pass",
    "validate_rubric",
]
