"""Rubric Studio's library: make an agent evaluate itself against a rubric and iterate."""

from __future__ import annotations

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
    "RubricEvaluation",
    "RubricMiddleware",
    "RubricStatus",
]


def __getattr__(name: str) -> object:
    # The middleware pulls in LangChain; keep `import rubric_core.schema` light.
    if name == "RubricMiddleware":
        from rubric_core.middleware import RubricMiddleware

        return RubricMiddleware
    msg = f"module 'rubric_core' has no attribute {name!r}"
    raise AttributeError(msg)
