"""Parsing a rubric (a newline-separated checklist) into criteria, and validating it."""

from __future__ import annotations

import re

from rubric_core.errors import InputError

MAX_RUBRIC_CHARS = 20_000
"""Longest rubric accepted. A checklist is read by a model on every pass; past this
size it is almost certainly a pasted document, not a checklist."""

MAX_CRITERIA = 100
"""Most criteria one rubric may hold."""

MAX_CRITERION_CHARS = 1_000
"""Longest single criterion accepted."""

_BULLET_RE = re.compile(
    r"""^\s*(?:
        [-*+\u2022\u2013]\s+(?:\[[ xX]?\]\s*)?   # - item, * item, - [ ] item
      | \[[ xX]?\]\s*                          # [ ] item
      | \(?\d{1,3}[.)]\s+                      # 1. item, 1) item, (1) item
      | [a-zA-Z][.)]\s+(?=\S)                  # a) item
    )""",
    re.VERBOSE,
)

_TOOL_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\b(tests?|pytest|unit[- ]tests?|test suite|passes|compiles?|runs?)\b", re.I),
        "run_test_suite",
    ),
    (re.compile(r"\bsyllables?\b|\bhaiku\b|\b5[-/ ]7[-/ ]5\b", re.I), "count_syllables"),
    (
        re.compile(
            r"\b(\d+|exactly|at most|at least|no more than|fewer than|under)\s+\w*\s*"
            r"(words?|characters?|chars|lines?|sentences?)\b",
            re.I,
        ),
        "text_stats",
    ),
    (re.compile(r"\b(matches|regex|regular expression|pattern)\b", re.I), "regex_check"),
)


class RubricError(InputError):
    """A rubric that cannot be used, with a message that says why."""


def _strip_bullet(line: str) -> str:
    return _BULLET_RE.sub("", line, count=1).strip()


def parse_rubric(text: str) -> list[str]:
    """Split a rubric into its criteria, one per non-empty line.

    Bullets (`-`, `*`, `1.`, `[ ]`) are removed; blank lines and Markdown
    headings (`# Section`) are skipped; duplicates are kept once.

    Examples:
        >>> parse_rubric("- has a title\\n\\n2. cites a source\\n# notes")
        ['has a title', 'cites a source']
    """
    criteria: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        criterion = _strip_bullet(raw)
        if not criterion:
            continue
        key = criterion.casefold()
        if key in seen:
            continue
        seen.add(key)
        criteria.append(criterion)
    return criteria


def validate_rubric(text: object) -> list[str]:
    """Parse a rubric and reject one that cannot be graded; returns the criteria.

    Raises:
        RubricError: The rubric is not a string, is empty, or is too large.
    """
    if not isinstance(text, str):
        msg = f"rubric must be a string, got {type(text).__name__}"
        raise RubricError(msg)
    if "\x00" in text:
        msg = "rubric contains a NUL byte; paste it as plain text"
        raise RubricError(msg)
    if len(text) > MAX_RUBRIC_CHARS:
        msg = (
            f"rubric is {len(text):,} characters; the limit is {MAX_RUBRIC_CHARS:,}. "
            "A rubric is a checklist, one short criterion per line."
        )
        raise RubricError(msg)
    criteria = parse_rubric(text)
    if not criteria:
        msg = "rubric is empty: write at least one criterion, one per line"
        raise RubricError(msg)
    if len(criteria) > MAX_CRITERIA:
        msg = f"rubric has {len(criteria)} criteria; the limit is {MAX_CRITERIA}"
        raise RubricError(msg)
    for index, criterion in enumerate(criteria, start=1):
        if len(criterion) > MAX_CRITERION_CHARS:
            msg = (
                f"criterion {index} is {len(criterion):,} characters; "
                f"the limit is {MAX_CRITERION_CHARS:,}"
            )
            raise RubricError(msg)
    return criteria


def suggested_tool(criterion: str) -> str | None:
    """Name the shipped grader tool a criterion likely needs, or `None`.

    A criterion such as "all tests pass" or "lines have 5/7/5 syllables" cannot be
    confirmed from a transcript alone; a grader without the tool has to guess.
    """
    for pattern, tool in _TOOL_HINTS:
        if pattern.search(criterion):
            return tool
    return None


def tool_warnings(text: str, available_tools: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Warnings for criteria a transcript alone cannot establish, given the grader's tools."""
    warnings: list[str] = []
    for criterion in parse_rubric(text):
        tool = suggested_tool(criterion)
        if tool and tool not in available_tools:
            warnings.append(
                f"{criterion!r} is hard to judge from the transcript alone; "
                f"give the grader the {tool} tool."
            )
    return warnings
