"""Run specs: what one run is, the checks that need nothing but the spec, and how a stored run reads back.

The checks against the store and the model and tool registries are `validate.validate_spec`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.errors import InputError
from rubric_core.schema import (
    AGENT_KINDS,
    CHECKS_GRADER,
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_CONCURRENCY,
    MAX_ITERATIONS_LIMIT,
    is_checks_only_grader,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_INPUT_CHARS",
    "RunSpec",
    "SpecError",
    "check_input",
    "check_static",
    "lone_surrogate",
    "spec_from_run",
    "validate_concurrency",
]

MAX_INPUT_CHARS = 200_000
"""Longest input a run accepts."""


class SpecError(InputError):
    """A run spec that cannot start; `field` names the offending field.

    Examples:
        >>> str(SpecError("input", "is empty"))
        'input: is empty'
    """

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        """The spec field (or batch argument) that is wrong."""
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run; validated by `validate_spec` before it starts.

    Examples:
        >>> spec = RunSpec(rubric_version_id=1, input="Write a haiku about rain",
        ...                agent_model="replay:haiku", grader_model="replay:haiku",
        ...                grader_tools=["count_syllables"])
        >>> spec.grader_tools
        ('count_syllables',)
        >>> spec.with_input("Write a haiku about snow").input
        'Write a haiku about snow'
    """

    rubric_version_id: int
    """Id of the stored rubric version the grader judges against."""

    input: str
    """The user's request to the agent."""

    agent_model: str
    """`provider:model-id`, `replay:<scenario>` or a model served at `base_url`."""

    grader_model: str
    """Same forms as `agent_model`; the grader's model. `checks` (or `none`) for no grader:
    every criterion of the rubric is then decided by its code check."""

    grader_tools: tuple[str, ...] = ()
    """Names of shipped grader tools (see `rubric_core.tools.TOOL_NAMES`)."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    """Cap on grading passes, 1..`MAX_ITERATIONS_LIMIT`."""

    agent_kind: str = "basic"
    """One of `AGENT_KINDS`: `basic` (`create_agent`) or `deep` (`create_deep_agent`)."""

    agent_system_prompt: str | None = None
    """System prompt of the agent; `None` for the framework's default."""

    grader_system_prompt: str | None = None
    """System prompt of the grader; `None` for the middleware's default."""

    base_url: str | None = None
    """OpenAI-compatible endpoint for both models (vLLM, llama.cpp, LM Studio, Ollama)."""

    api_key: str | None = field(default=None, repr=False, compare=False)
    """Key for `base_url` or the provider; never persisted, never shown in `repr`."""

    keep: str = "last"
    """One of `KEEP_CHOICES`: hand back the last draft, or the best-scoring pass's
    (`RubricMiddleware(keep=...)`)."""

    def __post_init__(self) -> None:
        tools: Any = self.grader_tools
        if isinstance(tools, str):
            tools = (tools,)
        object.__setattr__(self, "grader_tools", tuple(tools or ()))
        if is_checks_only_grader(self.grader_model):
            object.__setattr__(self, "grader_model", CHECKS_GRADER)

    def with_input(self, text: str) -> RunSpec:
        """A copy of this spec with another input (batch runs share everything else)."""
        return dataclasses.replace(self, input=text)


# --------------------------------------------------------------------------- checks


def check_input(text: object, field_name: str = "input") -> None:
    """Check one input to an agent: non-empty text, at most `MAX_INPUT_CHARS`, no NUL byte.

    Raises:
        SpecError: Naming `field_name` and what is wrong.

    Examples:
        >>> check_input("   ", "inputs[1]")
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: inputs[1]: is empty; give the agent something to do
    """
    if not isinstance(text, str):
        raise SpecError(field_name, f"must be text, got {type(text).__name__}")
    if not text.strip():
        raise SpecError(field_name, "is empty; give the agent something to do")
    if len(text) > MAX_INPUT_CHARS:
        raise SpecError(
            field_name, f"is {len(text):,} characters; the limit is {MAX_INPUT_CHARS:,}"
        )
    if "\x00" in text:
        raise SpecError(field_name, "contains a NUL byte; pass plain text")
    surrogate = lone_surrogate(text)
    if surrogate is not None:
        raise SpecError(field_name, surrogate)


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> str | None:
    """What is wrong with `text` if it holds a lone surrogate (U+D800..U+DFFF, e.g. from a
    JSON `"\\ud800"` escape or an undecodable command-line byte), else None: such a
    string is not Unicode text, and neither a UTF-8 file nor the store can hold it.

    Examples:
        >>> lone_surrogate("fine")
        >>> lone_surrogate("ab" + chr(0xD800))
        'holds a lone surrogate (U+D800 at character 3), which is not text and cannot be stored; write the character itself or a valid escape pair'
    """
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return (
        f"holds a lone surrogate (U+{ord(found.group()):04X} at character {found.start() + 1}), "
        "which is not text and cannot be stored; write the character itself or a valid "
        "escape pair"
    )


def validate_concurrency(value: object) -> int:
    """Check how many runs a batch may execute at once: an integer, 1..`MAX_CONCURRENCY`.

    Raises:
        SpecError: On field `concurrency`.

    Examples:
        >>> validate_concurrency(4)
        4
        >>> validate_concurrency(17)
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: concurrency: must be between 1 and 16, got 17
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError("concurrency", f"must be an integer, got {value!r}")
    if not 1 <= value <= MAX_CONCURRENCY:
        raise SpecError("concurrency", f"must be between 1 and {MAX_CONCURRENCY}, got {value}")
    return value


def check_static(spec: RunSpec) -> None:
    """Checks that need neither the store nor the model/tool registries."""
    rv: object = spec.rubric_version_id
    if isinstance(rv, bool) or not isinstance(rv, int):
        raise SpecError("rubric_version_id", f"must be an integer id, got {rv!r}")
    check_input(spec.input)
    mi: object = spec.max_iterations
    if isinstance(mi, bool) or not isinstance(mi, int):
        raise SpecError(
            "max_iterations", f"must be an integer between 1 and {MAX_ITERATIONS_LIMIT}, got {mi!r}"
        )
    if not 1 <= mi <= MAX_ITERATIONS_LIMIT:
        raise SpecError("max_iterations", f"must be between 1 and {MAX_ITERATIONS_LIMIT}, got {mi}")
    if spec.agent_kind not in AGENT_KINDS:
        kinds = " or ".join(repr(kind) for kind in AGENT_KINDS)
        raise SpecError("agent_kind", f"must be {kinds}, got {spec.agent_kind!r}")
    for name in ("agent_model", "grader_model"):
        value = getattr(spec, name)
        if not isinstance(value, str) or not value.strip():
            raise SpecError(name, "is empty; name a model such as 'openai:gpt-4o-mini'")
    for name in ("agent_system_prompt", "grader_system_prompt"):
        value = getattr(spec, name)
        if value is not None and not isinstance(value, str):
            raise SpecError(name, f"must be text or None, got {type(value).__name__}")
    if spec.base_url is not None and not str(spec.base_url).startswith(("http://", "https://")):
        raise SpecError("base_url", f"must start with http:// or https://, got {spec.base_url!r}")
    if spec.keep not in KEEP_CHOICES:
        choices = " or ".join(repr(choice) for choice in KEEP_CHOICES)
        raise SpecError("keep", f"must be {choices}, got {spec.keep!r}")
    for tool in spec.grader_tools:
        if not isinstance(tool, str) or not tool.strip():
            raise SpecError("grader_tools", f"tool names must be non-empty text, got {tool!r}")


# --------------------------------------------------------------------------- stored runs


def spec_from_run(run: Mapping[str, Any], **overrides: Any) -> RunSpec:
    """Rebuild the spec of a stored run.

    `base_url` and `api_key` are never stored (a run row has no column for them):
    pass them as overrides.

    Examples:
        >>> row = {"rubric_version_id": 3, "input": "Write a haiku", "agent_model": "replay:haiku",
        ...        "grader_model": "replay:haiku", "grader_tools": ["count_syllables"],
        ...        "max_iterations": 4, "agent_kind": "basic"}
        >>> spec_from_run(row, base_url="http://127.0.0.1:8080/v1").grader_tools
        ('count_syllables',)
    """
    tools: Any = run.get("grader_tools") or ()
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            tools = [t for t in tools.split(",") if t]
    values: dict[str, Any] = {
        "rubric_version_id": run["rubric_version_id"],
        "input": run["input"],
        "agent_model": run["agent_model"],
        "grader_model": run["grader_model"],
        "grader_tools": tuple(tools),
        "max_iterations": run["max_iterations"],
        "agent_kind": run.get("agent_kind") or "basic",
        "agent_system_prompt": run.get("agent_system_prompt"),
        "grader_system_prompt": run.get("grader_system_prompt"),
        "keep": run.get("keep") or "last",
    }
    values.update(overrides)
    return RunSpec(**values)
