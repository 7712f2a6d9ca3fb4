"""OpenAI and OpenAI-compatible endpoints (llama.cpp, vLLM, Ollama): `ChatOpenAI`.

Quirks: a per-call `timeout=` reaches the HTTP request (so a pass's remaining time can be
sent with each call); a grader's client gets `max_retries=0` and a timeout, and a model
object given to the grader is copied with clients derived by the OpenAI SDK's public
`with_options`. OpenAI caches a request's longest seen prefix by itself: no markers.
An endpoint's key is its own (`OPENAI_COMPATIBLE_API_KEY`): OpenAI's key only ever goes
to api.openai.com.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pydantic import SecretStr

from rubric_core import config
from rubric_core.extras import MissingExtra
from rubric_core.providers.base import BuildOptions, Provider, has_class_from
from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.http import deadline_http_client
from rubric_core.providers.langchain import LangChainProvider
from rubric_core.providers.ratelimit_http import limited_http_client, with_rate_limit
from rubric_core.schema import BASE_URL_ENV

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.providers.spec import ModelSpec


def _openai_base() -> type[Any] | None:
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # no [openai] extra: the model cannot be one of its classes
        return None
    return BaseChatOpenAI


def is_openai_client(model: object) -> bool:
    """Whether `model` is LangChain's OpenAI model or a subclass (Azure, DeepSeek, xAI ...).

    Examples:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> is_openai_client(GenericFakeChatModel(messages=iter([])))
        False
    """
    if not has_class_from(model, "langchain_openai"):  # no need to import the SDK to know
        return False
    base = _openai_base()
    return base is not None and isinstance(model, base)


def openai_grader_client(model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
    """A copy of an OpenAI `model` with its client's retries off and a timeout (its own
    timeout kept); the model itself when it already has both."""
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


class OpenAIProvider(LangChainProvider):
    """`openai:<model>`: built by `init_chat_model`, OpenAI's client quirks."""

    def __init__(self) -> None:
        super().__init__("openai", key_vars=("OPENAI_API_KEY",), package="langchain_openai")

    def owns(self, model: object) -> bool:
        return is_openai_client(model)

    def takes_call_timeout(self, model: object) -> bool:
        return is_openai_client(model)

    def grader_client(self, model: BaseChatModel, *, timeout_s: float) -> BaseChatModel:
        return openai_grader_client(model, timeout_s=timeout_s)

    def client_kwargs(self, http_client: Any = None) -> dict[str, Any]:
        # Requests go through the batch's rate limit, if any (providers.ratelimit_http).
        if http_client is not None:
            return {"http_client": with_rate_limit(http_client)}
        return {"http_client": limited_http_client()}


def compatible_model(
    model: str, *, base_url: str, api_key: str | None, timeout_s: float, role: str
) -> BaseChatModel:
    """A `ChatOpenAI` on the endpoint `base_url`, with no client retries.

    Raises:
        ModelSpecError: A base URL that is not http(s), or no model name.
    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:  # a bad spec to the caller, as a provider's missing package is
        raise ModelSpecError(str(MissingExtra("langchain_openai", "openai"))) from exc

    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        msg = f"base_url must be an http(s) URL such as http://127.0.0.1:8080/v1, got {base_url!r}"
        raise ModelSpecError(msg)
    if not model.strip():
        msg = "an OpenAI-compatible endpoint needs a model name: openai-compatible:<model>"
        raise ModelSpecError(msg)
    # Only hand the OpenAI key to OpenAI itself; a local server gets its own key or none.
    env_key = config.text("OPENAI_COMPATIBLE_API_KEY")
    if parsed.hostname == "api.openai.com":
        env_key = env_key or config.text("OPENAI_API_KEY")
    return ChatOpenAI(
        model=model.strip(),
        base_url=base_url,
        api_key=SecretStr(api_key or env_key or "not-needed"),
        timeout=timeout_s,
        # A grader's response must arrive whole in time (providers.http); every request is
        # paced by a rate-limited batch's book, if any (providers.ratelimit_http).
        http_client=with_rate_limit(deadline_http_client())
        if role == "grader"
        else limited_http_client(),
        # The middleware retries the grader itself; the agent gets no hidden retries either,
        # so a failing endpoint surfaces at once as a clear run error.
        max_retries=0,
        metadata={"rubric_studio_role": role},
    )


class CompatibleProvider(Provider):
    """`openai-compatible:<model>`: a `ChatOpenAI` on the endpoint of `base_url` or
    `RUBRIC_STUDIO_LLM_BASE_URL`. Its models are OpenAI's (`OpenAIProvider` owns them)."""

    name = "openai-compatible"

    def build(self, spec: ModelSpec, options: BuildOptions) -> BaseChatModel:
        base_url = options.base_url or config.text(BASE_URL_ENV) or None
        if not base_url:
            msg = (
                f"model {spec.text!r} needs a base URL: pass base_url (e.g. "
                f"http://127.0.0.1:8080/v1) or set {BASE_URL_ENV}"
            )
            raise ModelSpecError(msg)
        return self.on_endpoint(spec.model, base_url, options)

    def on_endpoint(self, model_id: str, base_url: str, options: BuildOptions) -> BaseChatModel:
        """`model_id` on the endpoint `base_url` (what any spec becomes with a base URL)."""
        return compatible_model(
            model_id,
            base_url=base_url,
            api_key=options.api_key,
            timeout_s=options.timeout_s,
            role=options.role,
        )

    def describe(self, spec: ModelSpec) -> str:
        return f"Model {spec.model!r} on an OpenAI-compatible endpoint."
