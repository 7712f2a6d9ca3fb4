"""Who grades a pass: one grader, a judge panel (or one model sampled k times), or no judge.

`RubricMiddleware(model=..., panel=..., samples=...)` is checked and turned into graders
here. `model=None` asks for no judge at all: every criterion of the rubrics must then have
a code check. Not giving `model` (nor `panel`) is an error, told apart by `UNSET`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from rubric_core.grader.direct import DirectGrader
from rubric_core.grader.panel import Panel, judge_name
from rubric_core.grader.subagent import Grader
from rubric_core.schema import MAX_ITERATIONS_LIMIT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from rubric_core.grader.budget import GraderLimits
    from rubric_core.grader.retry import RetryPolicy

__all__ = ["UNSET", "Unset", "build_judges", "check_judges"]


class Unset(enum.Enum):
    """`model` not given at all (unlike `model=None`, which asks for code checks only)."""

    MODEL = "not given"


UNSET = Unset.MODEL


def check_judges(
    model: str | BaseChatModel | Unset | None,
    panel: Sequence[str | BaseChatModel] | None,
    samples: int,
) -> list[str | BaseChatModel]:
    """Every judge's model, a model sampled k times appearing k times; none for
    `model=None` (every criterion of the rubrics must then have a code check).

    Examples:
        >>> check_judges("m", None, 2)
        ['m', 'm']
        >>> check_judges(None, None, 1)
        []
    """
    if isinstance(samples, bool) or not isinstance(samples, int):
        msg = f"samples must be an int, got {samples!r}"
        raise TypeError(msg)
    if not 1 <= samples <= MAX_ITERATIONS_LIMIT:
        msg = f"samples must be between 1 and {MAX_ITERATIONS_LIMIT}, got {samples}"
        raise ValueError(msg)
    if panel is not None:
        if model is not UNSET and model is not None:
            msg = "give the grader as model or as panel, not both"
            raise ValueError(msg)
        if isinstance(panel, str) or not list(panel) or not all(panel):
            msg = f"panel must be a non-empty list of grader models, got {panel!r}"
            raise ValueError(msg)
        return [judge for judge in panel for _ in range(samples)]
    if model is UNSET:
        msg = (
            "model is required: a 'provider:model-id' string or a BaseChatModel, a panel, "
            "or model=None for rubrics whose every criterion has a code check"
        )
        raise ValueError(msg)
    if model is None:
        return []
    if not model:
        msg = (
            "model must be a 'provider:model-id' string or a BaseChatModel "
            "(or None for rubrics whose every criterion has a code check)"
        )
        raise ValueError(msg)
    return [model] * samples


def build_judges(
    judges: Sequence[str | BaseChatModel],
    *,
    system_prompt: str | None,
    tools: Sequence[BaseTool],
    retry: RetryPolicy,
    budget_chars: int,
    limits: GraderLimits | None = None,
    parameter: str = "model",
) -> Grader | Panel | None:
    """One `Grader` per judge: the grader itself when there is one, a `Panel` of several,
    `None` when there is none (code checks only).

    Without tools a judge is a `DirectGrader` (its model called directly, no sub-agent
    graph); with tools, a `Grader` whose sub-agent runs the tool loop.

    Raises:
        ValueError: A judge given as a string names no usable model; the message names
            `parameter` (`model`, or `panel` for a panel's judges).
    """
    graders = [
        Grader(
            judge,
            system_prompt=system_prompt,
            tools=list(tools),
            retry=retry,
            budget_chars=budget_chars,
            limits=limits,
            parameter=parameter,
        )
        if tools
        else DirectGrader(
            judge,
            system_prompt=system_prompt,
            retry=retry,
            budget_chars=budget_chars,
            limits=limits,
            parameter=parameter,
        )
        for judge in judges
    ]
    if not graders:
        return None
    if len(graders) == 1:
        return graders[0]
    return Panel(graders=graders, names=[judge_name(j) for j in judges])
