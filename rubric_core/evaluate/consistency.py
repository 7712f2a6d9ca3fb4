"""Consistency: how often repeated gradings of the same pass flip a criterion's verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from rubric_core.evaluate._errors import EvaluationError
from rubric_core.evaluate._verdicts import ItemId, Value, as_values, rate


class CriterionConsistency(TypedDict):
    """How stable one criterion's verdict is across repeats."""

    name: str
    """The criterion."""

    items: int
    """Items with at least two repeats that judged this criterion."""

    repeats: int
    """Verdicts on this criterion over those items."""

    flip_rate: float | None
    """Share of pairs of repeats (of the same item) that disagree; 0.0 is fully stable.
    `None` when no item has two verdicts on it."""

    unstable: int
    """Items whose repeats did not all agree on this criterion."""

    unstable_items: list[ItemId]
    """Those items, in input order."""

    passed: int
    """Pass verdicts over all repeats."""

    failed: int
    """Fail verdicts over all repeats."""

    insufficient: int
    """Insufficient-evidence verdicts over all repeats (a value of their own)."""


class OverallConsistency(TypedDict):
    """Every criterion pooled."""

    items: int
    """Items given."""

    flip_rate: float | None
    """Disagreeing pairs over all pairs, every criterion of every item pooled."""

    unstable: int
    """(item, criterion) cells whose repeats did not all agree."""

    cells: int
    """(item, criterion) cells with at least two verdicts."""


class ConsistencyReport(TypedDict):
    """What `consistency_report` returns."""

    overall: OverallConsistency
    criteria: list[CriterionConsistency]


def _pairs(values: Sequence[Value]) -> tuple[int, int]:
    """(disagreeing pairs, all pairs) among `values`."""
    count = len(values)
    same = sum(c * (c - 1) // 2 for c in (values.count(v) for v in (True, False, None)))
    total = count * (count - 1) // 2
    return total - same, total


def flip_rate(values: Sequence[Value]) -> float | None:
    """Share of pairs of repeats that disagree: `None` (insufficient) is its own verdict.

    Pairwise rather than "against the majority": it needs no tie rule, is 0.0 when all
    repeats agree and 1.0 when two repeats differ, and is the chance that two gradings
    of the pass, drawn at random, disagree. `None` with fewer than two values.

    Examples:
        >>> flip_rate([True, True, False])  # 3 pairs, 2 disagree
        0.6666666666666666
        >>> flip_rate([True, True]), flip_rate([True, None]), flip_rate([True])
        (0.0, 1.0, None)
    """
    flips, total = _pairs(list(values))
    return rate(flips, total)


def consistency_report(
    repeats: Mapping[Any, Sequence[Mapping[str, object] | Iterable[Mapping[str, object]]]],
) -> ConsistencyReport:
    """Per criterion and overall flip rate of passes graded several times each.

    Each item's repeats are compared pairwise (see `flip_rate`); the per-criterion and
    overall figures pool the pairs of every item, so an item graded more often weighs
    more. A repeat that did not judge a criterion (a `grader_error` repeat has no
    criteria) is left out for that criterion; `repeats` says how many verdicts counted.

    Args:
        repeats: Item id to that pass's gradings, at least two; each grading is a list of
            verdict dicts `{name, passed, insufficient?}` or a mapping
            `{criterion: True/False/None}`.

    Returns:
        `{"overall": {items, flip_rate, unstable, cells}, "criteria": [{name, items,
        repeats, flip_rate, unstable, unstable_items, passed, failed, insufficient}]}`.

    Raises:
        EvaluationError: No items, an item graded fewer than twice, a malformed verdict.

    Examples:
        >>> report = consistency_report({
        ...     "pass-1": [{"rhymes": True}, {"rhymes": False}, {"rhymes": True}],
        ...     "pass-2": [{"rhymes": True}, {"rhymes": True}, {"rhymes": True}],
        ... })
        >>> report["criteria"][0]["flip_rate"], report["criteria"][0]["unstable_items"]
        (0.3333333333333333, ['pass-1'])
    """
    if not repeats:
        msg = "no repeated gradings to compare: grade each pass at least twice"
        raise EvaluationError(msg)
    cells: dict[str, list[tuple[ItemId, list[Value]]]] = {}
    for item_id, gradings in repeats.items():
        if isinstance(gradings, str | bytes | Mapping) or len(gradings) < 2:
            got = len(gradings) if isinstance(gradings, Sequence) else type(gradings).__name__
            msg = f"item {item_id!r}: consistency needs at least two gradings of it, got {got}"
            raise EvaluationError(msg)
        maps = [
            as_values(grading, f"item {item_id!r} grading {n}")
            for n, grading in enumerate(gradings, start=1)
        ]
        for name in dict.fromkeys(name for values in maps for name in values):
            values = [values[name] for values in maps if name in values]
            cells.setdefault(name, []).append((item_id, values))
    rows: list[CriterionConsistency] = []
    all_flips = all_pairs = unstable_cells = counted_cells = 0
    for name, group in cells.items():
        counted = [(item_id, values) for item_id, values in group if len(values) > 1]
        flips = pairs = 0
        unstable: list[ItemId] = []
        for item_id, values in counted:
            f, p = _pairs(values)
            flips, pairs = flips + f, pairs + p
            if f:
                unstable.append(item_id)
        every = [value for _, values in counted for value in values]
        rows.append(
            {
                "name": name,
                "items": len(counted),
                "repeats": len(every),
                "flip_rate": rate(flips, pairs),
                "unstable": len(unstable),
                "unstable_items": unstable,
                "passed": every.count(True),
                "failed": every.count(False),
                "insufficient": every.count(None),
            }
        )
        all_flips, all_pairs = all_flips + flips, all_pairs + pairs
        unstable_cells += len(unstable)
        counted_cells += len(counted)
    return {
        "overall": {
            "items": len(repeats),
            "flip_rate": rate(all_flips, all_pairs),
            "unstable": unstable_cells,
            "cells": counted_cells,
        },
        "criteria": rows,
    }
