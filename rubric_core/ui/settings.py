"""What the run, batch, grading and re-grading forms offer: grader tools, agent kinds, caps.

The values are defined once in `schema` and `tools`; the pages read them here, so that a
page imports the library's presentation layer only.
"""

from __future__ import annotations

from rubric_core.schema import (
    AGENT_KINDS,
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_CONCURRENCY,
    MAX_ITERATIONS_LIMIT,
)
from rubric_core.tools import TOOL_NAMES

__all__ = [
    "AGENT_KINDS",
    "DEFAULT_MAX_ITERATIONS",
    "KEEP_CHOICES",
    "MAX_CONCURRENCY",
    "MAX_ITERATIONS_LIMIT",
    "TOOL_NAMES",
]
