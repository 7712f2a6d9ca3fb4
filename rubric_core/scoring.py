"""Scores for grading passes, the best pass of a run, and the criteria that regressed.

The score of a pass, as HealthBench's reference scorer (openai/simple-evals,
`calculate_score`) computes an example's:

    score = (sum of the weights of passed positive criteria
             - sum of the |weights| of failed penalties) / (sum of positive weights)

left unclipped (a pass whose penalties outweigh what it earned scores below 0), as it is
stored and exported. A mean over passes or runs is HealthBench's too: the mean of the
unclipped scores, then clipped to [0, 1] (`mean_score`); one pass shown on its own is
shown as stored, unclipped (`shown_score`), so every page, report and export agree on it. A rubric of penalties only (HealthBench has no score
for it) scores `1 - failed penalty weight / all penalty weight`. A criterion is matched to
its verdict by `rubric.criterion_key` (whitespace folded, case ignored), as
`criteria_from_healthbench` spells its criteria. A criterion with no verdict counts against the work whichever its sign:
a positive one as failed, a penalty as present, so a score never credits what no
verdict established. A pass with no verdicts at all (a `grader_error` pass) and a
rubric with no criteria have no score: `None`, never 0.

Pass numbers in feedback are 1-based, as the dashboard labels passes
(`rubric_core.ui.passes.pass_label`): iteration 0 is "pass 1".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_core.rubric import CriterionSpec, criterion_key, parse_criteria
from rubric_core.schema import Regression

_key = criterion_key


def _verdict_list(
    item: Sequence[Mapping[str, Any]] | Mapping[str, Any],
) -> Sequence[Mapping[str, Any]]:
    """A pass's verdicts, from the verdict list itself or an evaluation holding `criteria`."""
    if isinstance(item, Mapping):
        return item.get("criteria") or []
    return item


def _passed_by_name(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for verdict in verdicts:
        if isinstance(verdict, Mapping) and "name" in verdict:
            found.setdefault(_key(verdict["name"]), verdict.get("passed") is True)
    return found


def score_pass(
    criteria: str | Sequence[CriterionSpec],
    verdicts: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None,
) -> float | None:
    """The pass's score, unclipped (at most 1, below 0 when penalties outweigh what it
    earned), or `None` when there is nothing to score.

    Args:
        criteria: The rubric's criteria (from `parse_criteria`), or the rubric text.
        verdicts: The pass's `{name, passed, gap?}` verdicts, or the evaluation that
            holds them under `criteria`.

    Examples:
        >>> rubric = "- [3] Cites the date\\n- Names the product\\n- [-2] Invents a price"
        >>> score_pass(rubric, [{"name": "Cites the date", "passed": True},
        ...                     {"name": "Names the product", "passed": False},
        ...                     {"name": "Invents a price", "passed": True}])
        0.75
        >>> score_pass(rubric, [{"name": "Cites the date", "passed": True},
        ...                     {"name": "Names the product", "passed": True},
        ...                     {"name": "Invents a price", "passed": False}])
        0.5
        >>> score_pass(rubric, []) is None
        True
    """
    if isinstance(criteria, str):
        criteria = parse_criteria(criteria)
    verdict_list = _verdict_list(verdicts) if verdicts is not None else []
    if not criteria or not verdict_list:
        return None
    passed = _passed_by_name(verdict_list)
    positive_total = sum(c.weight for c in criteria if c.weight > 0)
    penalty_total = sum(-c.weight for c in criteria if c.weight < 0)
    earned = sum(c.weight for c in criteria if c.weight > 0 and passed.get(_key(c.name), False))
    lost = sum(-c.weight for c in criteria if c.weight < 0 and not passed.get(_key(c.name), False))
    if positive_total == 0:
        return 1.0 - lost / penalty_total
    return (earned - lost) / positive_total


def shown_score(score: float | None) -> float | None:
    """One pass's (or run's) score as shown on its own: as stored, unclipped, so the pages,
    the report, the CLI and the CSV export show one number for it. (Only a mean is clipped:
    `mean_score`.)

    Examples:
        >>> shown_score(-0.3), shown_score(0.7), shown_score(None) is None
        (-0.3, 0.7, True)
    """
    return None if score is None else float(score)


def mean_score(scores: Sequence[float | None]) -> float | None:
    """The mean of unclipped scores, clipped to [0, 1], as HealthBench aggregates
    (`None` scores left out; `None` when none is left).

    Examples:
        >>> round(mean_score([0.7, -0.3, -3.0]), 3), mean_score([None]) is None
        (0.0, True)
        >>> round(mean_score([0.7, -0.3, 0.5]), 3)
        0.3
    """
    values = [float(s) for s in scores if s is not None]
    if not values:
        return None
    return min(1.0, max(0.0, sum(values) / len(values)))


def best_pass(scores: Sequence[float | None]) -> int | None:
    """The zero-based index of the highest score (ties: the later pass), or `None`.

    Passes without a score (`None`, a grader error) are never the best.

    Examples:
        >>> best_pass([0.5, 0.8, 0.8, 0.2])
        2
        >>> best_pass([None, None]) is None
        True
    """
    best: int | None = None
    best_score = 0.0
    for index, score in enumerate(scores):
        if score is not None and (best is None or score >= best_score):
            best, best_score = index, score
    return best


def regressions(
    previous_passes: Sequence[Sequence[Mapping[str, Any]] | Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]] | Mapping[str, Any],
) -> list[Regression]:
    """Criteria failing in `current` that passed in an earlier pass of the same grading run.

    Args:
        previous_passes: The run's earlier passes, oldest first: each a verdict list or
            an evaluation holding one under `criteria`.
        current: This pass's verdicts (or its evaluation).

    Returns:
        `{name, passed_in}` per regressed criterion, in the current pass's order;
        `passed_in` is the last (1-based) pass in which it passed.

    Examples:
        >>> first = [{"name": "a", "passed": True}, {"name": "b", "passed": False}]
        >>> second = [{"name": "a", "passed": True}, {"name": "b", "passed": True}]
        >>> third = [{"name": "a", "passed": False}, {"name": "b", "passed": False}]
        >>> regressions([first, second], third)
        [{'name': 'a', 'passed_in': 2}, {'name': 'b', 'passed_in': 2}]
    """
    history = [_passed_by_name(_verdict_list(item)) for item in previous_passes]
    found: list[Regression] = []
    seen: set[str] = set()
    for verdict in _verdict_list(current):
        if not isinstance(verdict, Mapping) or verdict.get("passed") is True:
            continue
        key = _key(verdict.get("name", ""))
        if key in seen:
            continue
        seen.add(key)
        for number in range(len(history), 0, -1):
            if history[number - 1].get(key) is True:
                found.append({"name": str(verdict["name"]), "passed_in": number})
                break
    return found


def regression_gap(gap: str, passed_in: int) -> str:
    """A failing criterion's gap, told that it passed before and fails now.

    Examples:
        >>> regression_gap("Give the date.", 2)
        'this passed in pass 2 and fails now: Give the date.'
    """
    return f"this passed in pass {passed_in} and fails now: {gap.strip()}"


__all__ = [
    "Regression",
    "best_pass",
    "mean_score",
    "regression_gap",
    "regressions",
    "score_pass",
    "shown_score",
]
