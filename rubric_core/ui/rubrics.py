"""The Rubrics page's helpers: templates to start from, tags, version labels and diffs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rubric_core.rubric import (
    CriterionSpec,
    RubricError,
    criteria_from_healthbench,
    tool_warnings,
    validate_criteria,
    validate_rubric,
)
from rubric_core.ui.format import format_timestamp
from rubric_core.ui.passes import draft_diff

__all__ = [
    "RUBRIC_TEMPLATES",
    "RubricError",
    "criteria_changes",
    "criteria_from_healthbench",
    "criteria_preview",
    "parse_tags",
    "scenario_templates",
    "tool_warnings",
    "validate_rubric",
    "version_diff",
    "version_label",
]

RUBRIC_TEMPLATES: dict[str, str] = {
    "Code with tests": (
        "- The answer contains one Python function that solves the task\n"
        "- All unit tests pass when the test suite is run\n"
        "- The function has a docstring that states its inputs and output\n"
        "- Empty and invalid inputs are handled without crashing\n"
    ),
    "Haiku": (
        "- The poem has exactly three lines\n"
        "- The lines have 5, 7 and 5 syllables\n"
        "- It names or evokes a season\n"
        "- There is no title and no commentary around the poem\n"
    ),
    "Report sections": (
        "- Starts with a one-line title\n"
        "- Has a section headed Summary\n"
        "- Has a section headed Findings with at least three findings\n"
        "- Has a section headed Recommendations\n"
        "- Each recommendation follows from a finding\n"
    ),
}
"""Starting points on the Rubrics page: one checklist per common kind of task."""


def parse_tags(text: str | Iterable[str]) -> list[str]:
    """Tags from a comma-separated string (or a list), trimmed, lower-cased, de-duplicated.

    Examples:
        >>> parse_tags(" Haiku, poetry,, haiku ")
        ['haiku', 'poetry']
    """
    parts = text.split(",") if isinstance(text, str) else list(text)
    tags: list[str] = []
    for part in parts:
        tag = " ".join(str(part).split()).lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def version_label(version: Mapping[str, Any]) -> str:
    """How a rubric version appears in pickers: `"v2 · 2025-01-31 12:00 · tighter title rule"`.

    Examples:
        >>> version_label({"version": 2, "created_at": "2025-01-31T12:00:00+00:00", "note": "x"})
        'v2 · 2025-01-31 12:00 · x'
    """
    parts = [f"v{version['version']}", format_timestamp(version.get("created_at"))]
    note = " ".join(str(version.get("note") or "").split())
    if note:
        parts.append(note[:60])
    return " · ".join(p for p in parts if p)


def version_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Unified diff between two rubric versions' texts, labelled with their version numbers.

    Examples:
        >>> print(version_diff({"name": "r", "version": 1, "text": "- a"},
        ...                    {"name": "r", "version": 2, "text": "- b"}))
        --- r v1
        +++ r v2
        @@ -1 +1 @@
        -- a
        +- b
    """
    return draft_diff(
        str(old.get("text") or ""),
        str(new.get("text") or ""),
        label_a=f"{old.get('name', 'rubric')} v{old.get('version', '?')}",
        label_b=f"{new.get('name', 'rubric')} v{new.get('version', '?')}",
    )


def criteria_changes(old: Sequence[str], new: Sequence[str]) -> dict[str, list[str]]:
    """Criteria added to and removed from a rubric between two versions.

    Examples:
        >>> criteria_changes(["a", "b"], ["b", "c"])
        {'added': ['c'], 'removed': ['a']}
    """
    old_set, new_set = set(old), set(new)
    return {
        "added": [c for c in new if c not in old_set],
        "removed": [c for c in old if c not in new_set],
    }


def scenario_templates(scenarios: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Rubric templates from the replay scenarios, keyed `"Scenario: <title>"`.

    Examples:
        >>> scenario_templates([{"name": "haiku", "title": "Haiku demo", "rubric": "- a"}])
        {'Scenario: Haiku demo': '- a'}
    """
    return {
        f"Scenario: {s.get('title') or s['name']}": str(s["rubric"])
        for s in scenarios
        if s.get("rubric")
    }


def _marks(criterion: CriterionSpec) -> str:
    marks = []
    if criterion.penalty:
        marks.append(f"penalty {criterion.weight}")
    elif criterion.weight != 1:
        marks.append(f"weight {criterion.weight}")
    if criterion.check is not None:
        marks.append(f"⚙ {criterion.check}")
    return "".join(f"  · {mark}" for mark in marks)


def criteria_preview(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """What the Rubrics page shows as you type: one row per criterion, or the error.

    Each row has `#`, `criterion`, `weight` (`-5 (penalty)` for a penalty), `check`
    (the code check that decides it, `judge` when the grader does) and `marks`, the
    suffix the page prints after the name: empty for a judged criterion of weight 1.
    A malformed line gives no rows and the error naming it; so does a rubric past the
    limits Save enforces (`validate_criteria`), checked before anything is parsed or
    drawn: a pasted 200 KB text is one error, not a thousand rows.

    Examples:
        >>> rows, error = criteria_preview("- [3] Cites the date\\n- Three lines {lines == 3}")
        >>> [(r["weight"], r["check"]) for r in rows], error
        ([('3', 'judge'), ('1', '⚙ {lines == 3}')], None)
        >>> [r["marks"] for r in rows]
        ['  · weight 3', '  · ⚙ {lines == 3}']
        >>> criteria_preview("- [0] Nothing")[1]
        "line 1 ('- [0] Nothing'): weight [0] counts for nothing; use 1 to 100, or -1 to -100 for a penalty"
        >>> criteria_preview("- x" * 10_000)[1].split(".")[0]
        'rubric is 30,000 characters; the limit is 20,000'
        >>> criteria_preview("   ")
        ([], None)
    """
    if not text.strip():
        return [], None
    try:
        criteria = validate_criteria(text)
    except RubricError as exc:
        return [], str(exc)
    rows = [
        {
            "#": number,
            "criterion": criterion.name,
            "weight": f"{criterion.weight} (penalty)"
            if criterion.penalty
            else str(criterion.weight),
            "check": f"⚙ {criterion.check}" if criterion.check is not None else "judge",
            "marks": _marks(criterion),
        }
        for number, criterion in enumerate(criteria, start=1)
    ]
    return rows, None
