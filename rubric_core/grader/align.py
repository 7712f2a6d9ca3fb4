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

_POSITION_MATCH = 0.35
"""Least similarity at which an entry at a criterion's own position counts as it, when
the counts agree (a looser paraphrase than `_FUZZY_MATCH`, but not `foo` for `has a title`)."""

_WORD = re.compile(r"\w{4,}")


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


def _close(target: str, key: str) -> bool:
    """Whether a name at the criterion's own position may stand for it: similar enough,
    or sharing a word of four letters or more.

    Examples:
        >>> _close("has a title", "title present"), _close("has a title", "foo")
        (True, False)
    """
    if not target or not key:
        return False
    if set(_WORD.findall(target)) & set(_WORD.findall(key)):
        return True
    return difflib.SequenceMatcher(None, target, key).ratio() >= _POSITION_MATCH


def unmatched_entries(expected: Sequence[str], response: GraderResponse) -> list[str]:
    """The names of the grader's entries that `align_criteria` matched to no criterion.

    Examples:
        >>> from rubric_core.schema import GraderResponse
        >>> response = GraderResponse.model_validate({
        ...     "criteria": [{"name": "foo", "passed": True}],
        ...     "explanation": "Fine.", "result": "satisfied",
        ... })
        >>> unmatched_entries(["has a title"], response)
        ['foo']
    """
    used = set(_alignment(expected, response).values())
    return [c.name for gi, c in enumerate(response.criteria) if gi not in used]


def _alignment(expected: Sequence[str], response: GraderResponse) -> dict[int, int]:
    """Expected index -> entry index, by name, then by position where `_close`."""
    keys = [_normalise(c.name) for c in response.criteria]
    matched = _match(expected, keys)
    if len(matched) < len(expected) and len(keys) == len(expected):
        used = set(matched.values())
        for ei, name in enumerate(expected):
            if ei not in matched and ei not in used and _close(_normalise(name), keys[ei]):
                matched[ei] = ei
                used.add(ei)
    return matched


def align_criteria(
    expected: Sequence[str], response: GraderResponse
) -> tuple[list[CriterionVerdict], list[str]]:
    """Map the grader's entries onto the rubric's criteria, in rubric order.

    Entries are matched by name (exact after normalising, then closest). When the counts
    agree, a criterion no name matched takes the entry at its own position, if that
    entry is unused and its name is close (`_close`); entries named after criteria the
    rubric does not have are dropped, and those criteria count as not accounted for.

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
    matched = _alignment(expected, response)
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
