"""Every environment variable Rubric Studio reads: its name, default and meaning, in one place.

Each setting is a `Setting` declared here; the accessors (`text`, `flag`, `integer`,
`seconds`) read
the environment when they are called, never at import, so a test's `monkeypatch.setenv`
is seen at once. Our own variables share the prefix `RUBRIC_STUDIO_`; the sandbox's
older names (`RUBRIC_SANDBOX_*`) are still read, with a `DeprecationWarning` naming the
new one. The API keys belong to the providers' SDKs and keep their names; they are listed
so `python -m rubric_core config` shows every variable that changes what happens.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Literal

from rubric_core.errors import InputError

__all__ = [
    "PREFIX",
    "SETTINGS",
    "Setting",
    "describe",
    "flag",
    "integer",
    "seconds",
    "setting",
    "shown_value",
    "text",
]

PREFIX = "RUBRIC_STUDIO_"
"""The prefix of every variable that is Rubric Studio's own."""

Group = Literal["store", "models", "keys", "sandbox", "runs", "tests"]


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, default, meaning, and older names it replaces.

    Examples:
        >>> Setting("RUBRIC_STUDIO_X", "what X does").default
        ''
    """

    name: str
    meaning: str
    default: str = ""
    group: Group = "models"
    secret: bool = False
    deprecated: tuple[str, ...] = ()
    """Older names still read (with a `DeprecationWarning`) when `name` is unset."""
    unset: str = ""
    """What applies when the variable is unset, for help texts (the reader decides it)."""


_TRUE = ("1", "true", "yes")

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "RUBRIC_STUDIO_DB",
        "The store: a SQLite file path or a postgresql:// URL.",
        group="store",
        unset="./rubric_studio.db",
    ),
    Setting(
        "RUBRIC_STUDIO_RAY_ADDRESS",
        "The Ray head node (HOST:PORT) batches may run on; also --ray-address.",
        group="runs",
        unset="no cluster",
    ),
    Setting(
        "RUBRIC_STUDIO_RAY_POOL_IDLE_S",
        "Seconds a process keeps its Ray workers after its last Ray batch (0: end them with it).",
        default="60",
        group="runs",
    ),
    Setting(
        "RUBRIC_STUDIO_DEMO_LATENCY_S",
        "Seconds each scripted reply of the dashboard's Try it demo waits (0 to 60).",
        default="1",
        group="runs",
    ),
    Setting(
        "RUBRIC_STUDIO_RATE_LIMIT_RPM",
        "Requests per minute a batch, grade or regrade sends to each endpoint; also --rpm.",
        group="runs",
        unset="unlimited",
    ),
    Setting(
        "RUBRIC_STUDIO_RATE_LIMIT_TPM",
        "Tokens per minute a batch, grade or regrade sends to each endpoint; also --tpm.",
        group="runs",
        unset="unlimited",
    ),
    Setting(
        "RUBRIC_STUDIO_RATE_LIMIT_LEARN",
        "1: batches learn each endpoint's limits from its x-ratelimit-* headers; also "
        "--learn-rate-limits.",
        group="runs",
        unset="off (a 429's Retry-After is still honoured under --rpm/--tpm)",
    ),
    Setting(
        "RUBRIC_STUDIO_AGENT_MODEL",
        "The agent model spec preselected in the dashboard and CLI (provider:model-id).",
        unset="the first provider with a key, else replay:find_duplicates",
    ),
    Setting(
        "RUBRIC_STUDIO_GRADER_MODEL",
        "The grader model spec preselected.",
        unset="the agent's",
    ),
    Setting(
        "RUBRIC_STUDIO_LLM_BASE_URL",
        "An OpenAI-compatible endpoint (e.g. http://127.0.0.1:8080/v1) for openai-compatible: specs.",
        unset="none",
    ),
    Setting(
        "RUBRIC_STUDIO_LLM_MODEL",
        "The model name the dashboard asks that endpoint for.",
    ),
    Setting(
        "OPENAI_COMPATIBLE_API_KEY",
        "The key sent to an OpenAI-compatible endpoint (OpenAI's own key only goes to "
        "api.openai.com).",
        unset="none",
        group="keys",
        secret=True,
    ),
    *(
        Setting(
            name, f"{provider}'s API key, read by its LangChain package.", group="keys", secret=True
        )
        for provider, name in (
            ("OpenAI", "OPENAI_API_KEY"),
            ("Anthropic", "ANTHROPIC_API_KEY"),
            ("Google GenAI", "GOOGLE_API_KEY"),
            ("Google GenAI", "GEMINI_API_KEY"),
            ("Azure OpenAI", "AZURE_OPENAI_API_KEY"),
            ("Groq", "GROQ_API_KEY"),
            ("Mistral", "MISTRAL_API_KEY"),
            ("DeepSeek", "DEEPSEEK_API_KEY"),
            ("xAI", "XAI_API_KEY"),
            ("Fireworks", "FIREWORKS_API_KEY"),
            ("Together", "TOGETHER_API_KEY"),
            ("Cohere", "COHERE_API_KEY"),
            ("Perplexity", "PPLX_API_KEY"),
            ("Perplexity", "PERPLEXITY_API_KEY"),
            ("OpenRouter", "OPENROUTER_API_KEY"),
            ("Upstage", "UPSTAGE_API_KEY"),
            ("NVIDIA", "NVIDIA_API_KEY"),
        )
    ),
    Setting(
        "RUBRIC_STUDIO_SANDBOX_ALLOW_WEAK",
        "1: without bubblewrap, run the grader's tests under the older, weaker fences (warns).",
        unset="refuse without bubblewrap",
        group="sandbox",
        deprecated=("RUBRIC_SANDBOX_ALLOW_WEAK",),
    ),
    Setting(
        "RUBRIC_STUDIO_SANDBOX_UID",
        "A fixed uid for sandboxed test runs (root hosts).",
        unset="a fresh uid per run",
        group="sandbox",
        deprecated=("RUBRIC_SANDBOX_UID",),
    ),
    Setting(
        "RUBRIC_STUDIO_SANDBOX_BWRAP",
        "The bubblewrap binary.",
        unset="bwrap on PATH",
        group="sandbox",
        deprecated=("RUBRIC_SANDBOX_BWRAP",),
    ),
    Setting(
        "RUBRIC_STUDIO_SANDBOX_NO_NAMESPACES",
        "Set: the weak fences create no namespaces.",
        unset="namespaces on",
        group="sandbox",
        deprecated=("RUBRIC_SANDBOX_NO_NAMESPACES",),
    ),
    Setting(
        "RUBRIC_STUDIO_PG_URL",
        "Tests only: the PostgreSQL server of the pg tests (.ci/postgres.sh writes it).",
        group="tests",
        secret=True,
    ),
    Setting(
        "RUBRIC_STUDIO_REQUIRE_SERVERS",
        "Tests only: 1 makes the pg and ray tests fail instead of skipping without servers.",
        group="tests",
    ),
)
"""Every variable, in the order `python -m rubric_core config` lists them."""

_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The declared setting `name`.

    Raises:
        InputError: If no setting has that name.

    Examples:
        >>> setting("RUBRIC_STUDIO_DB").group
        'store'
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        msg = f"no setting named {name!r}; known: {', '.join(_BY_NAME)}"
        raise InputError(msg) from None


def _raw(item: Setting) -> str | None:
    value = os.environ.get(item.name)
    if value is not None:
        return value
    for old in item.deprecated:
        value = os.environ.get(old)
        if value is not None:
            warnings.warn(
                f"{old} is deprecated; set {item.name} instead",
                DeprecationWarning,
                stacklevel=4,
            )
            return value
    return None


def text(name: str) -> str:
    """The setting's value, stripped; its default when unset or blank. A deprecated
    name is read when the new one is unset, with a `DeprecationWarning`.

    Raises:
        InputError: If `name` is not a declared setting.
    """
    item = setting(name)
    value = (_raw(item) or "").strip()
    return value or item.default


def flag(name: str) -> bool:
    """Whether the setting is `1`, `true` or `yes` (any case)."""
    return text(name).lower() in _TRUE


def integer(name: str) -> int | None:
    """The setting as an integer, `None` when unset.

    Raises:
        InputError: If it is set to something that is not an integer.
    """
    value = text(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        msg = f"{name} must be an integer, got {value!r}"
        raise InputError(msg) from None


def seconds(name: str, *, high: float) -> float:
    """The setting as a number of seconds from 0 to `high`; its default when unset.

    Raises:
        InputError: If it is not a number, or lies outside 0 to `high`; the message names
            the variable and the value.

    Examples:
        >>> seconds("RUBRIC_STUDIO_RAY_POOL_IDLE_S", high=86_400)
        60.0
    """
    value = text(name)
    try:
        number = float(value)
    except ValueError:
        msg = f"{name} must be a number of seconds, got {value!r}"
        raise InputError(msg) from None
    if not 0 <= number <= high:  # NaN fails this too
        msg = f"{name} must be between 0 and {high:g} seconds, got {value!r}"
        raise InputError(msg)
    return number


def shown_value(item: Setting) -> str:
    """The current value as it may be shown: a secret's only as `set` or empty."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        value = (_raw(item) or "").strip()
    if item.secret and value:
        return "*** (set)"
    return value


def describe() -> list[dict[str, str]]:
    """One row per setting: `{name, value, default, meaning}` (secrets masked; `default`
    is what applies when unset), for help texts.

    Examples:
        >>> rows = describe()
        >>> {"name", "value", "default", "meaning"} <= set(rows[0])
        True
    """
    rows = []
    for item in SETTINGS:
        meaning = item.meaning
        if item.deprecated:
            meaning += f" (formerly {', '.join(item.deprecated)})"
        rows.append(
            {
                "name": item.name,
                "value": shown_value(item),
                "default": item.default or item.unset,
                "meaning": meaning,
            }
        )
    return rows
