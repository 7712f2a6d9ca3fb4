"""Which run and grading run a log line of the loop belongs to.

Concurrent runs share one log; each line the loop (the middleware and its grader) writes
starts with `run 7, grading run 3f2a…: ` so they can be told apart. The run is what the
runner put in the LangGraph config (`RUN_CONFIG_KEY`; `runs.agents.run_config` does), or
what a grade-only caller set with `run_context`, else the LangGraph thread; the grading
run is the pass's, set by the middleware around each pass (`pass_context`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = ["RUN_CONFIG_KEY", "log_prefix", "pass_context", "run_context"]

RUN_CONFIG_KEY = "rubric_run_id"
"""The key of `config["configurable"]` holding the stored run's id, for log lines."""

_RUN: contextvars.ContextVar[str] = contextvars.ContextVar("rubric_log_run", default="")
_PASS: contextvars.ContextVar[str] = contextvars.ContextVar("rubric_log_pass", default="")


def _run_from_config() -> str:
    try:
        from langgraph.config import get_config

        configurable: dict[str, Any] = dict(get_config().get("configurable") or {})
    except Exception:  # outside a graph: no config
        return ""
    if configurable.get(RUN_CONFIG_KEY) is not None:
        return f"run {configurable[RUN_CONFIG_KEY]}"
    thread = configurable.get("thread_id")
    return f"thread {thread}" if thread else ""


@contextlib.contextmanager
def run_context(run_id: object) -> Iterator[None]:
    """Log lines inside the block name `run <run_id>` (a grade-only pass, outside a graph)."""
    token = _RUN.set(f"run {run_id}")
    try:
        yield
    finally:
        _RUN.reset(token)


@contextlib.contextmanager
def pass_context(grading_run_id: str) -> Iterator[None]:
    """Log lines inside the block name this grading run (and the run, as `log_prefix` says)."""
    run = _RUN.get() or _run_from_config() or "run (none)"
    token = _PASS.set(f"{run}, grading run {grading_run_id}")
    try:
        yield
    finally:
        _PASS.reset(token)


def log_prefix() -> str:
    """`run 7, grading run 3f2a…: ` inside a pass, else the run alone, else nothing.

    Examples:
        >>> with run_context(7), pass_context("g1"):
        ...     log_prefix()
        'run 7, grading run g1: '
        >>> log_prefix()
        ''
    """
    label = _PASS.get() or _RUN.get()
    return f"{label}: " if label else ""
