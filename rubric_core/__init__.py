"""Rubric Studio's library: make an agent evaluate itself against a rubric and iterate."""

from __future__ import annotations

from rubric_core.middleware import RubricMiddleware, RubricState
from rubric_core.rubric import RubricError, parse_rubric, validate_rubric
from rubric_core.schema import (
    RUBRIC_GRADER_MESSAGE_SOURCE,
    STATUS_DESCRIPTIONS,
    GraderResponse,
    RubricEvaluation,
    RubricStatus,
)

__all__ = [
    "RUBRIC_GRADER_MESSAGE_SOURCE",
    "STATUS_DESCRIPTIONS",
    "GraderResponse",
    "RubricError",
    "RubricEvaluation",
    "RubricMiddleware",
    "RubricState",
    "RubricStatus",
    "parse_rubric",
    "validate_rubric",
]
