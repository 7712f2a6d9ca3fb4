"""Attempts of the rubric loop: when one goes on, and the id a new one gets.

An attempt (a grading run) is the passes of one rubric on one thread until a final
status; a new request after that, or a new rubric, starts the next one.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from rubric_core.schema import TERMINAL_STATUSES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langgraph.runtime import Runtime

__all__ = ["attempt_goes_on", "new_grading_run_id"]

_GRADING_RUN_NAMESPACE = uuid.UUID("5d0c6f3e-2b8a-4f1e-9c47-0a1b2c3d4e5f")


def attempt_goes_on(state: Mapping[str, Any], rubric: str) -> bool:
    """Whether the state's attempt continues (or resumes after an interruption).

    Examples:
        >>> attempt_goes_on({"_active_rubric": "- a", "_current_grading_run_id": "g",
        ...                  "_rubric_status": "needs_revision"}, "- a")
        True
        >>> attempt_goes_on({"_active_rubric": "- a", "_current_grading_run_id": "g",
        ...                  "_rubric_status": "satisfied"}, "- a")
        False
    """
    return bool(
        state.get("_active_rubric") == rubric
        and state.get("_current_grading_run_id")
        and state.get("_rubric_status") not in TERMINAL_STATUSES
    )


def new_grading_run_id(runtime: Runtime[Any] | None) -> str:
    """The id of the attempt a pass starts: derived from the graph task grading it.

    LangGraph derives a task's id from its checkpoint, so the task that runs again after
    a crash or an interrupt (the pass graded again on resume) gets the same grading run
    id, and a pass the store has already is recognised as the same pass. Outside a graph
    task, a fresh uuid.
    """
    info = getattr(runtime, "execution_info", None)
    task = getattr(info, "task_id", None)
    if isinstance(task, str) and task:
        return str(uuid.uuid5(_GRADING_RUN_NAMESPACE, task))
    return str(uuid.uuid4())
