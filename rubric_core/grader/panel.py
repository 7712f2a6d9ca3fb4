"""A judge panel: several graders (or one sampled k times) decide each criterion by strict majority.

Also the verdict a person gives (`outcome_from_verdicts`): checked and aligned exactly as a
model's `GraderResponse` is, so the loop and the store cannot tell the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_core.evaluate import combine_panel
from rubric_core.grader.align import align_criteria
from rubric_core.grader.subagent import Grader, GraderOutcome
from rubric_core.schema import GraderResponse, pass_result

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_core.messages import BaseMessage

    from rubric_core.grader.usage import GraderUsage
    from rubric_core.schema import CriterionVerdict, JudgeRecord

__all__ = ["Panel", "judge_name", "outcome_from_verdicts"]

_UNJUDGEABLE_GAP = "This judge found the rubric impossible to evaluate: {explanation}"


def judge_name(model: object) -> str:
    """How a judge is named on the record: its `"provider:model-id"`, or the model's name.

    Examples:
        >>> judge_name("openai:gpt-4.1-mini")
        'openai:gpt-4.1-mini'
    """
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _votes(criteria: Sequence[str], outcome: GraderOutcome) -> list[CriterionVerdict]:
    """A judge's verdicts on every criterion; a `failed` judge could verify none of them."""
    if outcome.response.result != "failed":
        return outcome.criteria
    gap = _UNJUDGEABLE_GAP.format(explanation=outcome.explanation or "no reason given")
    return [{"name": name, "passed": False, "gap": gap, "insufficient": True} for name in criteria]


@dataclass
class Panel:
    """Judges that grade one pass each, combined by `evaluate.combine_panel`.

    A criterion passes only when more than half of the judges pass it; a tie is not a pass
    and its gap says `judges split P-Q: ...`. The pass is `failed` only when a strict majority
    of judges answered `failed`. A judge that raises (after its own retries) makes the pass
    a `grader_error`, as a single grader's would. Judges run one after another, sharing the
    pass's `GraderUsage` (attempts and tokens add up).
    """

    graders: list[Grader]
    """One per judge (a model sampled k times sits k times)."""

    names: list[str]
    """The judges' names, one per grader (repeats are numbered on the record)."""

    def grade(
        self,
        rubric: str,
        criteria: Sequence[str],
        messages: Sequence[BaseMessage],
        iteration: int,
        usage: GraderUsage,
        *,
        checked: Sequence[CriterionVerdict] = (),
        nonce: str | None = None,
    ) -> GraderOutcome:
        """One pass by every judge, synchronously. Raises what a judge raised.

        `checked` (verdicts code checks decided) is shown to every judge as evidence, as
        `Grader.grade` shows it; `criteria` are the judged ones only, and only they are voted on.
        """
        outcomes = [
            g.grade(rubric, criteria, messages, iteration, usage, checked=checked, nonce=nonce)
            for g in self.graders
        ]
        return self._combine(criteria, outcomes)

    async def agrade(
        self,
        rubric: str,
        criteria: Sequence[str],
        messages: Sequence[BaseMessage],
        iteration: int,
        usage: GraderUsage,
        *,
        checked: Sequence[CriterionVerdict] = (),
        nonce: str | None = None,
    ) -> GraderOutcome:
        """One pass by every judge, asynchronously; mirrors `grade`."""
        outcomes = [
            await g.agrade(
                rubric, criteria, messages, iteration, usage, checked=checked, nonce=nonce
            )
            for g in self.graders
        ]
        return self._combine(criteria, outcomes)

    def _combine(self, criteria: Sequence[str], outcomes: list[GraderOutcome]) -> GraderOutcome:
        combined = combine_panel(
            [_votes(criteria, o) for o in outcomes], judges=self.names, criteria=list(criteria)
        )
        names = combined["judges"]
        judges: list[JudgeRecord] = [
            {
                "judge": name,
                "result": o.response.result,
                "explanation": o.explanation,
                "criteria": o.criteria,
            }
            for name, o in zip(names, outcomes, strict=True)
        ]
        failed = [o for o in outcomes if o.response.result == "failed"]
        if 2 * len(failed) > len(outcomes):
            explanation = (
                f"{len(failed)} of {len(outcomes)} judges found the rubric impossible to "
                f"evaluate: {failed[0].explanation}"
            )
            response = GraderResponse(criteria=[], explanation=explanation, result="failed")
            return GraderOutcome(
                response=response, criteria=[], explanation=explanation, judges=judges
            )
        verdicts: list[CriterionVerdict] = []
        for c in combined["criteria"]:
            verdict: CriterionVerdict = {"name": c["name"], "passed": c["passed"]}
            if not c["passed"]:
                verdict["gap"] = c.get("gap") or "the judges did not pass it"
            if c.get("insufficient"):
                verdict["insufficient"] = True
            verdicts.append(verdict)
        response = GraderResponse.model_validate(
            {
                "criteria": verdicts,
                "explanation": combined["explanation"],
                "result": combined["result"],
            }
        )
        return GraderOutcome(
            response=response,
            criteria=verdicts,
            explanation=combined["explanation"],
            judges=judges,
        )


def outcome_from_verdicts(
    criteria: Sequence[str],
    verdicts: Sequence[Mapping[str, Any]],
    *,
    explanation: str = "",
) -> GraderOutcome:
    """A verdict given by someone other than a model (a person), as the loop records one.

    It is validated by the grader's own `GraderResponse` schema (a failing or insufficient
    criterion needs a gap; insufficient is never a pass) and aligned onto the rubric's
    criteria as a model's would be; the result is `satisfied` when every criterion passed,
    else `needs_revision`.

    Args:
        criteria: The rubric's checklist (`parse_rubric`).
        verdicts: `{name, passed, gap?, insufficient?}` for every criterion.
        explanation: A summary; default says how many criteria passed.

    Raises:
        ValueError: A verdict is malformed (pydantic's `ValidationError` names the field),
            or a criterion has no verdict.

    Examples:
        >>> outcome = outcome_from_verdicts(
        ...     ["has a title"], [{"name": "has a title", "passed": False, "gap": "add one"}])
        >>> outcome.response.result, outcome.criteria
        ('needs_revision', [{'name': 'has a title', 'passed': False, 'gap': 'add one'}])
    """
    passed = sum(bool(v.get("passed")) for v in verdicts)
    response = GraderResponse.model_validate(
        {
            "criteria": [dict(v) for v in verdicts],
            "explanation": explanation.strip()
            or f"{passed} of {len(criteria)} criteria passed (graded by a person).",
            "result": pass_result(verdicts),
        }
    )
    aligned, missing = align_criteria(criteria, response)
    if missing:
        msg = f"no verdict given for {', '.join(map(repr, missing))}; judge every criterion"
        raise ValueError(msg)
    if len(verdicts) > len(criteria):
        named = {c.strip() for c in criteria}
        extra = [
            str(v.get("name")) for v in verdicts if str(v.get("name", "")).strip() not in named
        ]
        msg = f"verdicts for criteria not in the rubric: {', '.join(map(repr, extra))}"
        raise ValueError(msg)
    return GraderOutcome(response=response, criteria=aligned, explanation=response.explanation)
