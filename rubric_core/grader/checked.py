"""Criteria decided by code checks, merged with the judge's verdicts in rubric order.

A pass runs the rubric's code checks first (`rubric_core.tools.checks`), then asks the
judge about the remaining criteria only, showing it the checked outcomes as evidence.
`merge_outcome` puts both back together under the rubric's order and re-derives the
pass's verdict from all of them: the judge cannot call a pass `satisfied` when a check
failed. A rubric made only of checked criteria needs no judge: `checks_only_outcome`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rubric_core.errors import InputError
from rubric_core.grader.subagent import GraderOutcome
from rubric_core.rubric import parse_criteria
from rubric_core.schema import Criterion, GraderResponse, pass_result

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from rubric_core.rubric import CriterionSpec
    from rubric_core.schema import CriterionVerdict, GraderVerdict

__all__ = [
    "NoGraderError",
    "checks_only_outcome",
    "checks_only_problem",
    "judged_names",
    "merge_outcome",
    "require_checks_only",
]


class NoGraderError(InputError):
    """No grader was given for a rubric that has a criterion no code check decides."""


def judged_names(criteria: Sequence[CriterionSpec]) -> list[str]:
    """The names of the criteria the judge decides (those without a code check).

    Examples:
        >>> from rubric_core.rubric import parse_criteria
        >>> judged_names(parse_criteria("- Mentions rain\\n- Three lines {lines == 3}"))
        ['Mentions rain']
    """
    return [criterion.name for criterion in criteria if criterion.check is None]


def checks_only_problem(
    criteria: str | Sequence[CriterionSpec], *, rubric: str = "this rubric"
) -> str | None:
    """Why `criteria` cannot be graded without a grader (code checks only), or `None`.

    The one rule every front door applies (`RubricMiddleware(model=None)`, the CLI's
    `--grader none`, the pages' "no grader: checks only"): every criterion needs a code
    check; the message names those that have none.

    Examples:
        >>> checks_only_problem("- Three lines {lines == 3}") is None
        True
        >>> checks_only_problem("- Mentions rain\\n- Three lines {lines == 3}", rubric="haiku v1")
        "haiku v1 needs a grader model: no code check decides 'Mentions rain' (give a grader, or add a {check} such as {lines == 3} to it)"
    """
    specs = parse_criteria(criteria) if isinstance(criteria, str) else criteria
    judged = judged_names(specs)
    if not judged:
        return None
    names = ", ".join(repr(name) for name in judged)
    return (
        f"{rubric} needs a grader model: no code check decides {names} (give a grader, or "
        "add a {check} such as {lines == 3} to "
        f"{'it' if len(judged) == 1 else 'each'})"
    )


def require_checks_only(
    criteria: str | Sequence[CriterionSpec], *, rubric: str = "this rubric"
) -> None:
    """Raise `NoGraderError` (an `InputError`) with `checks_only_problem`'s message, if any."""
    problem = checks_only_problem(criteria, rubric=rubric)
    if problem is not None:
        raise NoGraderError(problem)


def _explain(verdicts: Sequence[CriterionVerdict]) -> str:
    failing = [v["name"] for v in verdicts if not v["passed"]]
    if not failing:
        return f"All {len(verdicts)} code-checked criteria passed."
    return f"Code checks failed {len(failing)} of {len(verdicts)} criteria: " + "; ".join(failing)


def _response(verdicts: Sequence[CriterionVerdict], explanation: str) -> GraderResponse:
    result: GraderVerdict = pass_result(verdicts)
    return GraderResponse(
        criteria=[
            Criterion(
                name=v["name"],
                evidence=v.get("evidence", ""),
                passed=v["passed"],
                gap=v.get("gap") or (None if v["passed"] else "not met"),
            )
            for v in verdicts
        ],
        explanation=explanation,
        result=result,
    )


def checks_only_outcome(checked: Mapping[str, CriterionVerdict]) -> GraderOutcome:
    """The pass's outcome when code checks decided every criterion (no judge called).

    Examples:
        >>> outcome = checks_only_outcome({"three lines": {"name": "three lines",
        ...     "passed": False, "checked_by": "code", "gap": "2 lines; needs exactly 3"}})
        >>> outcome.response.result, outcome.explanation
        ('needs_revision', 'Code checks failed 1 of 1 criteria: three lines')
    """
    verdicts = list(checked.values())
    explanation = _explain(verdicts)
    return GraderOutcome(
        response=_response(verdicts, explanation), criteria=verdicts, explanation=explanation
    )


def merge_outcome(
    criteria: Sequence[CriterionSpec],
    checked: Mapping[str, CriterionVerdict],
    judged: GraderOutcome,
) -> GraderOutcome:
    """The judge's outcome with the checked verdicts put back, all in rubric order.

    The pass is `satisfied` only if every criterion, checked or judged, passed; a
    `failed` verdict (the rubric cannot be evaluated) stands as the judge gave it. A
    criterion the judge found insufficient evidence for is not passed, so not satisfied.
    Judged verdicts the rubric does not name (none, normally) keep their place after.
    """
    if not checked:
        return judged
    by_name = {v["name"]: v for v in judged.criteria if v["name"] not in checked}
    merged: list[CriterionVerdict] = []
    for criterion in criteria:
        verdict = checked.get(criterion.name) or by_name.pop(criterion.name, None)
        if verdict is not None:
            merged.append(verdict)
    merged.extend(by_name.values())
    response = judged.response
    if response.result != "failed":
        result = pass_result(merged)
        response = response.model_copy(update={"result": result})
    explanation = judged.explanation
    failed_checks = [v for v in checked.values() if not v["passed"]]
    if failed_checks:
        note = _explain(list(checked.values()))
        explanation = f"{explanation} ({note})" if explanation else note
    # A panel's own records (its judges voted on the judged criteria only) stay on the pass.
    return GraderOutcome(
        response=response, criteria=merged, explanation=explanation, judges=judged.judges
    )
