"""Checking a grading pass's arguments before anything runs, each error naming its parameter.

What cannot work fails at construction, not after the agent has run: a grader model that
is neither a string nor a chat model (a string spec is checked when its grader is built,
see `providers.registry.grader_model`), tools that are not tools, a system prompt that is not
text, counts that are not ints, and delays or timeouts that are not finite numbers.
"""

from __future__ import annotations

import math
import os

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from rubric_core.grader.retry import RetryPolicy

_MIN_TRANSCRIPT_BUDGET = 1_000


def _shown(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def check_grader_model(value: object, parameter: str) -> None:
    """A grader model is a `"provider:model-id"` string or a `BaseChatModel`.

    Examples:
        >>> check_grader_model(42, "model")
        Traceback (most recent call last):
        ...
        TypeError: model must be a 'provider:model-id' string or a BaseChatModel, got int 42
    """
    if isinstance(value, str):
        if not value.strip():
            msg = (
                f"{parameter} must not be empty: write provider:model-id, e.g. openai:gpt-4.1-mini"
            )
            raise ValueError(msg)
        return
    if not isinstance(value, BaseChatModel):
        msg = (
            f"{parameter} must be a 'provider:model-id' string or a BaseChatModel, "
            f"got {_shown(value)}"
        )
        raise TypeError(msg)


def check_tools(tools: object) -> None:
    """`tools` is `None` or a list of `BaseTool`s or functions.

    Examples:
        >>> check_tools("notatool")
        Traceback (most recent call last):
        ...
        TypeError: tools must be a list of tools (BaseTool instances or functions), got str 'notatool'
    """
    if tools is None:
        return
    if isinstance(tools, str | bytes | dict) or not isinstance(tools, list | tuple):
        msg = (
            f"tools must be a list of tools (BaseTool instances or functions), got {_shown(tools)}"
        )
        raise TypeError(msg)
    for index, tool in enumerate(tools):
        if not isinstance(tool, BaseTool) and not callable(tool):
            msg = f"tools[{index}] must be a BaseTool or a function, got {_shown(tool)}"
            raise TypeError(msg)


def _finite_seconds(value: object, parameter: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{parameter} must be a number of seconds, got {_shown(value)}"
        raise TypeError(msg)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "above 0" if positive else "at least 0"
        msg = f"{parameter} must be a finite number of seconds {bound}, got {value!r}"
        raise ValueError(msg)
    return float(value)


def check_grader_arguments(*, system_prompt: object, tools: object, retry: object) -> None:
    """Check what a pass's judges are built with, besides their models.

    Raises:
        TypeError: A parameter has the wrong type (the message names it).
        ValueError: A parameter is out of range (the message names it).

    Examples:
        >>> check_grader_arguments(system_prompt=None, tools=None, retry=RetryPolicy(attempts=0))
        Traceback (most recent call last):
        ...
        ValueError: retry.attempts must be at least 1, got 0
    """
    if system_prompt is not None and not isinstance(system_prompt, str):
        msg = f"system_prompt must be a string (or None for the built-in one), got {_shown(system_prompt)}"
        raise TypeError(msg)
    check_tools(tools)
    if not isinstance(retry, RetryPolicy):
        msg = f"retry must be a RetryPolicy, got {_shown(retry)}"
        raise TypeError(msg)
    if isinstance(retry.attempts, bool) or not isinstance(retry.attempts, int):
        msg = f"retry.attempts must be an int, got {retry.attempts!r}"
        raise TypeError(msg)
    if retry.attempts < 1:
        msg = f"retry.attempts must be at least 1, got {retry.attempts}"
        raise ValueError(msg)
    _finite_seconds(retry.initial_delay_s, "retry.initial_delay_s", positive=False)
    _finite_seconds(retry.max_delay_s, "retry.max_delay_s", positive=False)
    _finite_seconds(retry.jitter, "retry.jitter", positive=False)


def check_pass_limits(
    *, timeout_s: object, budget_s: object, transcript_budget_chars: object, check_dir: object
) -> None:
    """Check the fields of a pass's limits (`pipeline.PassLimits`), each error naming its field.

    Examples:
        >>> check_pass_limits(timeout_s=0, budget_s=1, transcript_budget_chars=5000, check_dir=None)
        Traceback (most recent call last):
        ...
        ValueError: timeout_s must be a finite number of seconds above 0, got 0
    """
    _finite_seconds(timeout_s, "timeout_s", positive=True)
    _finite_seconds(budget_s, "budget_s", positive=True)
    if isinstance(transcript_budget_chars, bool) or not isinstance(transcript_budget_chars, int):
        msg = f"transcript_budget_chars must be an int, got {_shown(transcript_budget_chars)}"
        raise TypeError(msg)
    if transcript_budget_chars < _MIN_TRANSCRIPT_BUDGET:
        msg = (
            f"transcript_budget_chars must be at least {_MIN_TRANSCRIPT_BUDGET}, "
            f"got {transcript_budget_chars}"
        )
        raise ValueError(msg)
    if check_dir is not None and not isinstance(check_dir, str | os.PathLike):
        msg = f"check_dir must be a path (str or Path), got {_shown(check_dir)}"
        raise TypeError(msg)
