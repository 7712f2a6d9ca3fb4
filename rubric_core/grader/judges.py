"""Who grades a pass: one grader, a judge panel (or one model sampled k times), or no judge.

`RubricMiddleware(model=...)` (a model, `Judges([...], samples=k)`, or `None`) is checked
and turned into graders here. `model=None` asks for no judge at all: every criterion of the
rubrics must then have a code check. Not giving `model` is an error, told apart by `UNSET`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rubric_core.grader.direct import DirectGrader
from rubric_core.grader.panel import Panel, judge_name
from rubric_core.grader.subagent import Grader
from rubric_core.grader.validate import check_grader_model
from rubric_core.schema import MAX_ITERATIONS_LIMIT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from rubric_core.grader.budget import GraderLimits
    from rubric_core.grader.retry import RetryPolicy

__all__ = ["UNSET", "Judges", "Unset", "build_judges", "check_judges", "check_samples"]


class Unset(enum.Enum):
    """`model` not given at all (unlike `model=None`, which asks for code checks only)."""

    MODEL = "not given"


UNSET = Unset.MODEL


def check_samples(samples: object) -> int:
    """How many times each judge grades a pass: an int from 1 to 20.

    Examples:
        >>> check_samples(0)
        Traceback (most recent call last):
        ...
        ValueError: samples must be between 1 and 20, got 0
    """
    if isinstance(samples, bool) or not isinstance(samples, int):
        msg = f"samples must be an int, got {samples!r}"
        raise TypeError(msg)
    if not 1 <= samples <= MAX_ITERATIONS_LIMIT:
        msg = f"samples must be between 1 and {MAX_ITERATIONS_LIMIT}, got {samples}"
        raise ValueError(msg)
    return samples


@dataclass(frozen=True)
class Judges:
    """Several judges of one pass, combined by strict majority: a panel of grader models,
    each grading every pass `samples` times (`Judges(["m"], samples=3)` samples one model
    three times). Given as `RubricMiddleware(model=Judges(...))`.

    Raises:
        TypeError, ValueError: An empty panel, a judge that is not a model spec or a chat
            model (`models[i]` named), or `samples` outside 1 to 20.

    Examples:
        >>> Judges(["openai:a", "openai:b"], samples=2).graded_by()
        ['openai:a', 'openai:a', 'openai:b', 'openai:b']
        >>> Judges([])
        Traceback (most recent call last):
        ...
        ValueError: Judges.models must be a non-empty list of grader models, got []
    """

    models: Sequence[str | BaseChatModel]
    samples: int = 1

    def __post_init__(self) -> None:
        models = self.models
        if isinstance(models, str) or not isinstance(models, list | tuple) or not models:
            msg = f"Judges.models must be a non-empty list of grader models, got {models!r}"
            raise ValueError(msg)
        for index, judge in enumerate(models):
            check_grader_model(judge, f"Judges.models[{index}]")
        check_samples(self.samples)

    def graded_by(self) -> list[str | BaseChatModel]:
        """Every judge's model, a model sampled k times appearing k times."""
        return [judge for judge in self.models for _ in range(self.samples)]


def check_judges(
    model: str | BaseChatModel | Judges | Unset | None,
) -> tuple[list[str | BaseChatModel], str]:
    """Every judge's model (none for `model=None`: every criterion of the rubrics must
    then have a code check), and the parameter a bad model spec is reported under.

    Examples:
        >>> check_judges("m")
        (['m'], 'model')
        >>> check_judges(None)
        ([], 'model')
    """
    if isinstance(model, Judges):
        return model.graded_by(), "Judges.models"
    if model is UNSET:
        msg = (
            "model is required: a 'provider:model-id' string, a BaseChatModel, Judges(...) "
            "for a panel, or model=None for rubrics whose every criterion has a code check"
        )
        raise ValueError(msg)
    if model is None:
        return [], "model"
    check_grader_model(model, "model")
    return [model], "model"


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
