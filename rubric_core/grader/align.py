"""Mapping the grader's verdict entries onto the rubric's own criteria, in rubric order."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rubric_core.schema import CriterionVerdict, GraderResponse

_FUZZY_MATCH = 0.6
"""Least `difflib` similarity at which a paraphrased name counts as the criterion."""


def _normalise(name: str) -> str:
    name = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", name)
    return re.sub(r"\W+", " ", name).strip().casefold()


def _match(expected: Sequence[str], keys: Sequence[str]) -> dict[int, int]:
    """Expected index -> given index: exact names first, then the closest unused name."""
    used: set[int] = set()
    matched: dict[int, int] = {}
    targets = [_normalise(name) for name in expected]
    for ei, target in enumerate(targets):
        for gi, key in enumerate(keys):
            if gi not in used and key == target:
                matched[ei] = gi
                used.add(gi)
                break
    for ei, target in enumerate(targets):
        if ei in matched:
            continue
        best, best_score = None, 0.0
        for gi, key in enumerate(keys):
            if gi in used:
                continue
            score = difflib.SequenceMatcher(None, target, key).ratio()
            if target and key and (target in key or key in target):
                score = max(score, 0.9)
            if score > best_score:
                best, best_score = gi, score
        if best is not None and best_score >= _FUZZY_MATCH:
            matched[ei] = best
            used.add(best)
    return matched


def align_criteria(
    expected: Sequence[str], response: GraderResponse
) -> tuple[list[CriterionVerdict], list[str]]:
    """Map the grader's entries onto the rubric's criteria, in rubric order.

    Entries are matched by name (exact after normalising, then closest); if every name
    misses but the counts agree, by position.

    Args:
        expected: The rubric's criteria, as `parse_rubric` returns them.
        response: The grader's verdict.

    Returns:
        The verdicts under the rubric's own names, and the criteria the grader did not
        account for.

    Examples:
        >>> from rubric_core.schema import GraderResponse
        >>> response = GraderResponse.model_validate({
        ...     "criteria": [{"name": "1. The report has a title", "passed": True}],
        ...     "explanation": "Fine.", "result": "satisfied",
        ... })
        >>> align_criteria(["has a title", "cites a source"], response)
        ([{'name': 'has a title', 'passed': True}], ['cites a source'])
    """
    given = list(response.criteria)
    matched = _match(expected, [_normalise(c.name) for c in given])
    if len(matched) < len(expected) and len(given) == len(expected):
        matched = {i: i for i in range(len(expected))}
    verdicts: list[CriterionVerdict] = []
    missing: list[str] = []
    for ei, name in enumerate(expected):
        if ei not in matched:
            missing.append(name)
            continue
        verdict = given[matched[ei]].as_verdict()
        verdict["name"] = name
        verdicts.append(verdict)
    return verdicts, missing
