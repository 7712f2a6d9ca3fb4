"""The library's exceptions share one base, so callers can catch Rubric Studio's own errors."""

from __future__ import annotations


class RubricStudioError(Exception):
    """Base of every exception rubric_core raises on purpose; the message says what was wrong."""


class InputError(RubricStudioError, ValueError):
    """A value the caller gave is not acceptable; the message names it and why."""


class PassNotRecorded(RubricStudioError):
    """A graded pass could not be kept; raised by an `on_evaluation` callback to end the run.

    `RubricMiddleware` suppresses any other exception of its callback (the loop goes on),
    but lets this one through: the agent's invocation then fails with it before the pass
    enters the agent's state, so a run resumed from its checkpoint grades that pass again
    instead of going on without it.
    """
