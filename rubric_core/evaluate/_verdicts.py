"""Criterion verdicts as the evaluate functions read them: pass, fail or insufficient."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import TypeAlias

from rubric_core.evaluate._errors import EvaluationError
from rubric_core.schema import CriterionVerdict, verdict_problem

ItemId: TypeAlias = Hashable
"""What identifies a graded item: a run id, an evaluation id, a dataset row... (JSON-able)."""

Value: TypeAlias = bool | None
"""One criterion's verdict reduced to a value: `True` pass, `False` fail, `None` insufficient."""


Verdict: TypeAlias = CriterionVerdict
"""One criterion's verdict as a grader (or a judge of a panel) states it: the core's one
verdict type, `schema.CriterionVerdict` (`name`, `passed`, `gap` on a failure,
`insufficient` when the grader could not verify it)."""


def as_value(value: object, where: str) -> Value:
    """A verdict value: a bool, `None`, or 0/1 (SQLite's booleans); anything else raises."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    msg = f"{where}: a verdict must be true, false or None (insufficient), got {value!r}"
    raise EvaluationError(msg)


def verdict_value(verdict: Mapping[str, object], where: str = "verdict") -> Value:
    """`None` for an insufficient-evidence verdict, else whether it passed.

    Examples:
        >>> verdict_value({"name": "cites a source", "passed": False, "insufficient": True})
        >>> verdict_value({"name": "has a title", "passed": True})
        True
    """
    name = verdict.get("name")
    if not isinstance(name, str) or not name.strip():
        msg = f"{where}: every verdict needs a non-empty 'name', got {name!r}"
        raise EvaluationError(msg)
    passed = as_value(verdict.get("passed"), f"{where} {name!r}")
    insufficient = bool(verdict.get("insufficient"))
    problem = verdict_problem(name, passed, insufficient=insufficient, require_gap=False)
    if problem is not None:  # the verdict rules, as the judge's verdict is held to them
        msg = f"{where}: {problem}"
        raise EvaluationError(msg)
    if insufficient:
        return None
    if passed is None:
        msg = f"{where} {name!r}: 'passed' is missing; say true or false (or insufficient)"
        raise EvaluationError(msg)
    return passed


def iter_verdicts(
    verdicts: object, where: str
) -> Iterator[tuple[str, Value, Mapping[str, object]]]:
    """`(name, value, verdict)` for each verdict dict of a list; malformed or repeated raise."""
    if isinstance(verdicts, str | bytes | Mapping) or not isinstance(verdicts, Iterable):
        msg = f"{where}: expected a list of verdicts {{name, passed, gap?}}, got {verdicts!r}"
        raise EvaluationError(msg)
    seen: set[str] = set()
    for verdict in verdicts:
        if not isinstance(verdict, Mapping):
            msg = f"{where}: each verdict must be a dict with 'name' and 'passed', got {verdict!r}"
            raise EvaluationError(msg)
        value = verdict_value(verdict, where)
        name = str(verdict["name"])
        if name in seen:
            msg = f"{where}: criterion {name!r} is judged twice"
            raise EvaluationError(msg)
        seen.add(name)
        yield name, value, verdict


def as_values(
    verdicts: Mapping[str, object] | Iterable[Mapping[str, object]], where: str
) -> dict[str, Value]:
    """One pass's verdicts as `{criterion: True/False/None}`, in their order.

    Accepts the mapping itself, or a list of verdict dicts `{name, passed, insufficient?}`
    (the shape of `RubricEvaluation.criteria`). A criterion named twice raises.
    """
    if isinstance(verdicts, Mapping):
        return {str(name): as_value(value, f"{where} {name!r}") for name, value in verdicts.items()}
    return {name: value for name, value, _ in iter_verdicts(verdicts, where)}


def rate(numerator: int, denominator: int) -> float | None:
    """`numerator / denominator`, or `None` when there is nothing to divide by."""
    return numerator / denominator if denominator else None
