"""A grader's model call that returned no reply at all: told apart, and a clear error.

(Its client settings, a timeout and no retries of its own, are its provider's:
`rubric_core.providers.registry.grader_model`.)
"""

from __future__ import annotations

from rubric_core.errors import RubricStudioError


class EmptyReplyError(RubricStudioError, RuntimeError):
    """The grader's model call returned no message at all (e.g. an empty `choices` list)."""


def raised_for_no_reply(exc: IndexError) -> bool:
    """Whether `exc` is LangChain's chat model indexing a result that has no generation,
    which is how an OpenAI-compatible server's empty `choices` list surfaces.

    Told by where it was raised (a chat model's `invoke`/`ainvoke`), so an `IndexError`
    from anywhere else (a tool, our own code) keeps its own description.
    """
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return False
    code = frame.tb_frame.f_code
    return code.co_name in {"invoke", "ainvoke"} and code.co_filename.endswith(
        ("language_models/chat_models.py", "language_models\\chat_models.py")
    )


def no_reply_error(exc: IndexError) -> EmptyReplyError:
    """The clear error for `raised_for_no_reply`."""
    msg = (
        "the grader's model returned no reply at all (an OpenAI-compatible server answered "
        "with an empty `choices` list)"
    )
    error = EmptyReplyError(msg)
    error.__cause__ = exc
    return error
