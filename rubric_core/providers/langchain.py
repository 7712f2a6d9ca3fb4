"""Every other provider `init_chat_model` knows (Google, Groq, Mistral, Bedrock, ...).

One `LangChainProvider` per key of LangChain's built-in provider table, built by
`init_chat_model` with a timeout and, for a grader, `max_retries=0`. Their quirk here is
the verdict schema's dialect: LangChain's Google converters drop `prefixItems`, so for
them the entries are repeated as an `anyOf` under `items` (the count, the names and the
gaps still hold; the order is not forced).

LangChain offers no public list of the providers `init_chat_model` knows, nor its rule for
a bare model name's provider: both are read from `langchain.chat_models.base`
(`_BUILTIN_PROVIDERS`, `_attempt_infer_model_provider`), here and nowhere else.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from rubric_core import config
from rubric_core.extras import MissingExtra
from rubric_core.providers.base import BuildOptions, Provider
from rubric_core.providers.errors import ModelSpecError
from rubric_core.providers.http import deadline_http_client

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.providers.spec import ModelSpec

PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "azure_openai": ("AZURE_OPENAI_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistralai": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "upstage": ("UPSTAGE_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
}
"""Environment variables holding each provider's API key (the first is the one we name).
Providers missing here (ollama, bedrock, vertexai, ...) authenticate another way."""


@functools.cache
def builtin_packages() -> dict[str, str]:
    """`init_chat_model`'s providers, each with the module its chat model comes from."""
    from langchain.chat_models import base as chat_base

    return {name: entry[0] for name, entry in sorted(chat_base._BUILTIN_PROVIDERS.items())}


def env_key(variables: tuple[str, ...]) -> str | None:
    """The first of `variables` set (non-blank) in the environment, or `None`."""
    for var in variables:
        value = config.text(var)
        if value:
            return value
    return None


def _google_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    criteria = schema["properties"]["criteria"]
    entries = criteria["prefixItems"]
    criteria["items"] = {"anyOf": [branch for e in entries for branch in e["anyOf"]]}
    return schema


class LangChainProvider(Provider):
    """A provider `init_chat_model` builds; `package` is where its chat models live."""

    def __init__(self, name: str, *, key_vars: tuple[str, ...] = (), package: str = "") -> None:
        self.name = name
        self.key_vars = key_vars
        self.package = package.partition(".")[0]

    def owns(self, model: object) -> bool:
        return bool(self.package) and type(model).__module__.partition(".")[0] == self.package

    def verdict_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.package.startswith("langchain_google"):
            return _google_dialect(schema)
        return schema

    def client_kwargs(self, http_client: Any = None) -> dict[str, Any]:
        """Client arguments this provider's models get besides the timeout and the key
        (`http_client`: the one chosen so far, if any)."""
        return {}

    def build(self, spec: ModelSpec, options: BuildOptions) -> BaseChatModel:
        from langchain.chat_models import init_chat_model

        if not options.api_key and self.key_vars and not env_key(self.key_vars):
            variables = " or ".join(self.key_vars)
            msg = (
                f"model {spec.text!r} needs an API key: set {variables} in the environment "
                "(or pick a replay:<scenario> model to run offline)"
            )
            raise ModelSpecError(msg)
        kwargs: dict[str, Any] = {"timeout": options.timeout_s}
        if options.role == "grader":
            kwargs["max_retries"] = 0  # the middleware retries transient grader failures itself
            if self.name == "openai":
                kwargs["http_client"] = deadline_http_client()
        if options.api_key:
            kwargs["api_key"] = options.api_key
        kwargs.update(self.client_kwargs(kwargs.get("http_client")))
        try:
            chat_model: BaseChatModel = init_chat_model(
                spec.model, model_provider=self.name, **kwargs
            )
            return chat_model
        except ImportError as exc:
            package = self.package.replace("_", "-") or self.name
            msg = f"model provider {self.name!r} needs the package {package}: pip install {package}"
            if self.name in ("openai", "anthropic"):  # extras of this distribution
                msg = str(MissingExtra(package, self.name))
            raise ModelSpecError(msg) from exc
        except Exception as exc:
            msg = f"could not create model {spec.text!r}: {type(exc).__name__}: {exc}"
            raise ModelSpecError(msg) from exc


def inferred_provider(model_name: str) -> str | None:
    """The provider `init_chat_model` infers for a bare model name (`claude-*` is
    `anthropic`, `gpt-*` `openai`), or `None`. LangChain's rule is private
    (`_attempt_infer_model_provider`): read here and nowhere else.

    Examples:
        >>> inferred_provider("claude-haiku-4-5"), inferred_provider("my-own-model")
        ('anthropic', None)
    """
    from langchain.chat_models import base as chat_base

    return chat_base._attempt_infer_model_provider(model_name)
