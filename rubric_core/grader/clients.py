"""The grader's chat model client: a timeout on every call, and no retries of its own.

`RubricMiddleware` retries transient grader failures itself and counts each try in
`grader_attempts`; a client that also retried would multiply the requests sent behind that
count (ChatOpenAI's default: 2 more per call) and, with no timeout (ChatOpenAI's default),
could wait forever on an endpoint that never answers. So a grader given as a string is
built with `timeout` and `max_retries=0`, and a LangChain OpenAI or Anthropic model given as
an object is copied with its client's retries off and, when it has none, the timeout. Other
model objects keep their own client settings (give them a timeout and `max_retries=0`); the
pass's time budget still bounds them between calls, and cancels their async calls.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from rubric_core.errors import RubricStudioError

_OUR_PREFIXES = frozenset({"replay", "openai-compatible"})
"""Spec prefixes `models.resolve_model` knows and `init_chat_model` does not."""


def _openai_base() -> type[Any] | None:
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # no [openai] extra: the model cannot be one of its classes
        return None
    return BaseChatOpenAI


def takes_call_timeout(model: object) -> bool:
    """Whether a per-call `timeout=` reaches the HTTP request (LangChain's OpenAI models).

    Examples:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> takes_call_timeout(GenericFakeChatModel(messages=iter([])))
        False
    """
    if not _has_class_from(model, "langchain_openai"):  # no need to import the SDK to know
        return False
    base = _openai_base()
    return base is not None and isinstance(model, base)


def _has_class_from(model: object, package: str) -> bool:
    """Whether `model`'s class or a base of it is defined in `package` (already imported)."""
    return any(c.__module__.partition(".")[0] == package for c in type(model).__mro__)


def model_from_spec(spec: str, *, timeout_s: float, parameter: str = "model") -> BaseChatModel:
    """A `"provider:model-id"` string as a chat model with a timeout and no client retries.

    Touches no network, but checks what can be checked: the provider, the model id,
    the provider's package and its credentials.

    Raises:
        ValueError: Naming `parameter` and what is wrong with the spec.
    """
    from langchain.chat_models import init_chat_model

    text = spec.strip()
    provider, sep, model_id = text.partition(":")
    if sep and (not provider.strip() or not model_id.strip()):
        msg = (
            f"{parameter}={spec!r} is malformed: write provider:model-id, "
            "e.g. openai:gpt-4.1-mini or anthropic:claude-haiku-4-5"
        )
        raise ValueError(msg)
    try:
        model: BaseChatModel = init_chat_model(text, timeout=timeout_s, max_retries=0)
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"{parameter}={spec!r} cannot be used as a grader model: {detail.rstrip('.')}"
        if provider.strip() in _OUR_PREFIXES:
            msg += (
                f"; {provider.strip()}: specs are Rubric Studio's, not LangChain's: pass "
                f"rubric_core.models.resolve_model({spec!r}, role='grader') instead"
            )
        raise ValueError(msg) from exc
    return model


def _is_anthropic(model: object) -> bool:
    # An Anthropic model's class comes from langchain_anthropic, already imported then;
    # for any other model, importing it (and the anthropic SDK, seconds) is not needed.
    if not _has_class_from(model, "langchain_anthropic"):
        return False
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError:
        return False
    return isinstance(model, ChatAnthropic)


_ANTHROPIC_CACHED_CLIENTS = ("_client_params", "_client", "_async_client")
"""ChatAnthropic's clients are `cached_property`s built from `max_retries` and
`default_request_timeout`; a copy must drop any already built so its own are."""


def _anthropic_client(model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
    current = getattr(model, "default_request_timeout", None)
    if getattr(model, "max_retries", None) == 0 and current is not None:
        return model
    copied: BaseChatModel = model.model_copy(
        update={
            "max_retries": 0,
            "default_request_timeout": current if current is not None else timeout_s,
        }
    )
    for name in _ANTHROPIC_CACHED_CLIENTS:
        copied.__dict__.pop(name, None)
    return copied


def grader_client(model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
    """`model` with its client's retries off and a timeout, for LangChain's OpenAI and
    Anthropic models; other models as they are.

    The caller's object is left as it is: the copy of an OpenAI model gets clients
    derived with the OpenAI SDK's `with_options`, an Anthropic one builds its own. A
    timeout the model already has is kept.
    """
    if _is_anthropic(model):
        return _anthropic_client(model, timeout_s=timeout_s)
    if not takes_call_timeout(model):
        return model
    current = getattr(model, "request_timeout", None)
    timeout = current if current is not None else timeout_s
    if getattr(model, "max_retries", None) == 0 and current is not None:
        return model
    update: dict[str, Any] = {"max_retries": 0, "request_timeout": timeout}
    root = getattr(model, "root_client", None)
    if root is not None:
        update["root_client"] = root.with_options(max_retries=0, timeout=timeout)
        update["client"] = update["root_client"].chat.completions
    root_async = getattr(model, "root_async_client", None)
    if root_async is not None:
        update["root_async_client"] = root_async.with_options(max_retries=0, timeout=timeout)
        update["async_client"] = update["root_async_client"].chat.completions
    copied: BaseChatModel = model.model_copy(update=update)
    return copied


def grader_model(
    model: str | BaseChatModel, *, timeout_s: float, parameter: str = "model"
) -> BaseChatModel:
    """The client a grader calls: `model_from_spec` for a string, `grader_client` otherwise."""
    if isinstance(model, str):
        return model_from_spec(model, timeout_s=timeout_s, parameter=parameter)
    return grader_client(model, timeout_s=timeout_s)


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
