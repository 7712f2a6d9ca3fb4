"""Grader tools that ship with Rubric Studio, registered by name."""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.tools import BaseTool

from rubric_core.errors import InputError
from rubric_core.tools.checks import (
    BUILTIN_CHECKS,
    CheckResult,
    arun_checks,
    check_names,
    register_check,
    run_checks,
    unregister_check,
)
from rubric_core.tools.test_runner import make_run_test_suite, run_pytest, run_test_suite
from rubric_core.tools.text import count_syllables, regex_check, syllable_count, text_stats

_REGISTRY: dict[str, BaseTool] = {
    "run_test_suite": run_test_suite,
    "count_syllables": count_syllables,
    "text_stats": text_stats,
    "regex_check": regex_check,
}

TOOL_NAMES: tuple[str, ...] = tuple(_REGISTRY)
"""Every shipped grader tool, by the name a run spec uses."""

TOOL_DESCRIPTIONS: dict[str, str] = {
    "run_test_suite": (
        "Runs a pytest suite against the agent's Python code in a sandbox (no network, "
        "no secrets, CPU/memory/process limits, 30 s timeout)."
    ),
    "count_syllables": "Counts syllables per line of a poem (English heuristic) and reports the pattern, e.g. 5/7/5.",
    "text_stats": "Counts words, characters, lines, sentences and paragraphs.",
    "regex_check": "Checks whether a regular expression matches a text; bad or runaway patterns are reported, not raised.",
}
"""One sentence per tool, for pickers and help text."""


class UnknownToolError(InputError):
    """A grader tool name that is not registered; the message lists the known ones."""

    def __init__(self, unknown: list[str]) -> None:
        self.unknown = unknown
        names = ", ".join(repr(name) for name in unknown)
        noun = "tool" if len(unknown) == 1 else "tools"
        super().__init__(f"unknown grader {noun} {names}; available tools: {', '.join(TOOL_NAMES)}")


def get_tools(names: Iterable[str]) -> list[BaseTool]:
    """The registered tools for `names`, in the order given, duplicates dropped.

    Raises:
        UnknownToolError: Naming every unknown name and listing the available ones.

    Examples:
        >>> [t.name for t in get_tools(["count_syllables"])]
        ['count_syllables']
    """
    if isinstance(names, str):
        names = [names]
    wanted = list(dict.fromkeys(name.strip() for name in names))
    unknown = [name for name in wanted if name not in _REGISTRY]
    if unknown:
        raise UnknownToolError(unknown)
    return [_REGISTRY[name] for name in wanted]


__all__ = [
    "BUILTIN_CHECKS",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMES",
    "CheckResult",
    "UnknownToolError",
    "arun_checks",
    "check_names",
    "count_syllables",
    "get_tools",
    "make_run_test_suite",
    "regex_check",
    "register_check",
    "run_checks",
    "run_pytest",
    "run_test_suite",
    "syllable_count",
    "text_stats",
    "unregister_check",
]
