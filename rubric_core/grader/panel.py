"""A judge panel: several graders (or one sampled k times) decide each criterion by strict majority.

Also the verdict a person gives (`outcome_from_verdicts`): checked and aligned exactly as a
model's `GraderResponse` is, so the loop and the store cannot tell the two apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphBubbleUp

from rubric_core.evaluate import combine_panel
from rubric_core.evaluate.panel import judge_labels
from rubric_core.grader.align import align_criteria
from rubric_core.grader.logs import log_prefix
from rubric_core.grader.retry import describe_exception
from rubric_core.grader.subagent import Grader, GraderOutcome
from rubric_core.schema import GraderResponse, pass_result

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_core.messages import BaseMessage

    from rubric_core.grader.usage import GraderUsage
    from rubric_core.schema import CriterionVerdict, JudgeRecord

__all__ = ["Panel", "judge_name", "outcome_from_verdicts"]

logger = logging.getLogger(__name__)

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

    A criterion passes only when more than half of the valid judges pass it; a tie is not
    a pass and its gap says `judges split P-Q: ...`. A judge that raises (after its own
    retries and corrections: no usable verdict, a timeout) is left out of the vote and
    kept on the record as `grader_error`; the pass is decided by the judges that gave a
    verdict (`GraderOutcome.valid_judges` says how many) and is a `grader_error` only when
    none did. The pass is `failed` only when a strict majority of the valid judges answered
    `failed`. Judges run one after another, sharing the pass's `GraderUsage` (attempts and
    tokens add up).
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
        """One pass by every judge, synchronously. Raises what the first judge raised when
        no judge gave a verdict.

        `checked` (verdicts code checks decided) is shown to every judge as evidence, as
        `Grader.grade` shows it; `criteria` are the judged ones only, and only they are voted on.
        """
        outcomes: list[GraderOutcome | Exception] = []
        for grader in self.graders:
            try:
                outcomes.append(
                    grader.grade(
                        rubric, criteria, messages, iteration, usage, checked=checked, nonce=nonce
                    )
                )
            except GraphBubbleUp:
                raise
            except Exception as exc:  # a broken judge is left out of the vote
                outcomes.append(_broken(exc, iteration))
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
        outcomes: list[GraderOutcome | Exception] = []
        for grader in self.graders:
            try:
                outcomes.append(
                    await grader.agrade(
                        rubric, criteria, messages, iteration, usage, checked=checked, nonce=nonce
                    )
                )
            except GraphBubbleUp:
                raise
            except Exception as exc:  # a broken judge is left out of the vote
                outcomes.append(_broken(exc, iteration))
        return self._combine(criteria, outcomes)

    def _combine(
        self, criteria: Sequence[str], outcomes: list[GraderOutcome | Exception]
    ) -> GraderOutcome:
        names = judge_labels(self.names, len(outcomes))
        judges = [_record(name, o) for name, o in zip(names, outcomes, strict=True)]
        valid = [
            (n, o) for n, o in zip(names, outcomes, strict=True) if isinstance(o, GraderOutcome)
        ]
        if not valid:
            raise next(o for o in outcomes if isinstance(o, Exception))
        note = _validity_note(len(valid), len(outcomes), judges)
        failed = [o for _, o in valid if o.response.result == "failed"]
        if 2 * len(failed) > len(valid):
            explanation = (
                f"{len(failed)} of {len(valid)} judges found the rubric impossible to "
                f"evaluate: {failed[0].explanation}{note}"
            )
            response = GraderResponse(criteria=[], explanation=explanation, result="failed")
            return GraderOutcome(
                response=response,
                criteria=[],
                explanation=explanation,
                judges=judges,
                valid_judges=len(valid),
            )
        combined = combine_panel(
            [_votes(criteria, o) for _, o in valid],
            judges=[n for n, _ in valid],
            criteria=list(criteria),
        )
        verdicts: list[CriterionVerdict] = []
        for c in combined["criteria"]:
            verdict: CriterionVerdict = {"name": c["name"], "passed": c["passed"]}
            if not c["passed"]:
                verdict["gap"] = c.get("gap") or "the judges did not pass it"
            if c.get("insufficient"):
                verdict["insufficient"] = True
            verdicts.append(verdict)
        explanation = combined["explanation"] + note
        response = GraderResponse.model_validate(
            {"criteria": verdicts, "explanation": explanation, "result": combined["result"]}
        )
        return GraderOutcome(
            response=response,
            criteria=verdicts,
            explanation=explanation,
            judges=judges,
            valid_judges=len(valid),
        )


def _broken(exc: Exception, iteration: int) -> Exception:
    logger.warning(
        "%sa judge gave no verdict on pass %d (%s); the others decide",
        log_prefix(),
        iteration,
        describe_exception(exc),
    )
    return exc


def _record(name: str, outcome: GraderOutcome | Exception) -> JudgeRecord:
    """A judge's own verdict on the record; a judge that raised is a `grader_error`."""
    if isinstance(outcome, Exception):
        return {
            "judge": name,
            "result": "grader_error",
            "explanation": describe_exception(outcome),
            "criteria": [],
        }
    return {
        "judge": name,
        "result": outcome.response.result,
        "explanation": outcome.explanation,
        "criteria": outcome.criteria,
    }


def _validity_note(valid: int, total: int, judges: Sequence[JudgeRecord]) -> str:
    """What the explanation adds when some judges gave no verdict, else nothing.

    Examples:
        >>> _validity_note(2, 3, [{"judge": "m #2", "result": "grader_error",
        ...     "explanation": "GraderOutputError: no verdict", "criteria": []}])
        ' (2 of 3 judges gave a valid verdict; m #2: GraderOutputError: no verdict.)'
    """
    if valid == total:
        return ""
    broken = "; ".join(
        f"{j['judge']}: {j['explanation']}" for j in judges if j["result"] == "grader_error"
    )
    return f" ({valid} of {total} judges gave a valid verdict; {broken}.)"


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
