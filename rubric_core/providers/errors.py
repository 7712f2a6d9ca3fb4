"""The exceptions of `rubric_core.providers`: a bad model spec, and the replay models' own."""

from __future__ import annotations

from rubric_core.errors import InputError, RubricStudioError


class ModelSpecError(InputError):
    """A model spec or scenario that cannot be resolved; the message names what is wrong.

    (Not `ModelError`: that is `langchain_core.exceptions.ModelError`, which a provider
    raises about a real model's behaviour.)
    """


class ReplayExhaustedError(RubricStudioError, RuntimeError):
    """The replay model was asked for more turns than its script holds."""


class ScriptedGraderError(RubricStudioError, RuntimeError):
    """Raised by a replay turn of kind `raise` (default error type)."""
