"""The library's exceptions share one base, so callers can catch Rubric Studio's own errors."""

from __future__ import annotations


class RubricStudioError(Exception):
    """Base of every exception rubric_core raises on purpose; the message says what was wrong."""


class InputError(RubricStudioError, ValueError):
    """A value the caller gave is not acceptable; the message names it and why."""
