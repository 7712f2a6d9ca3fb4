"""The grading pass, in one place: from a transcript and a rubric to its `RubricEvaluation`.

Every front door grades through `PassPipeline`: the loop (`RubricMiddleware`), grade-only
runs and re-grading (`workbench.grade`, `workbench.regrade`) and the person grader (whose
verdict is given instead of a judge's). The stages, in order:

1. checks: the rubric's code checks run on the final answer (`tools.checks`);
2. judges: the criteria no check decides go to one model, a panel or k samples
   (`grader.judges`), or a verdict given (a person's); none for a checks-only rubric;
3. combine: the checked and judged verdicts in rubric order (`grader.checked.merge_outcome`);
4. derive: the result follows from the verdicts (`schema.pass_result`); a judge's own
   result that disagrees is noted, never kept; `failed` stands as the judge gave it;
5. validate: every verdict against the verdict rules (`schema.verdict_problem`);
6. score and regressions (`scoring`), the grading run's nonce scrubbed, the record built.

A grader that raises ends the pass as `grader_error`, saying why.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langgraph.errors import GraphBubbleUp

from rubric_core.grader import GraderLimits, GraderOutcome, GraderUsage, describe_exception
from rubric_core.grader.checked import (
    checks_only_outcome,
    judged_names,
    merge_outcome,
    require_checks_only,
)
from rubric_core.grader.judges import UNSET, Judges, Unset, build_judges, check_judges
from rubric_core.grader.logs import log_prefix, pass_context
from rubric_core.grader.nonce import grading_nonce, scrub, scrub_judges, scrub_verdicts
from rubric_core.grader.retry import RetryPolicy
from rubric_core.grader.validate import check_grader_arguments, check_pass_limits
from rubric_core.messages import final_answer, grader_feedback_message
from rubric_core.rubric import CriterionSpec, validate_criteria
from rubric_core.schema import pass_result, verdict_problem
from rubric_core.scoring import regression_gap, regressions, score_pass
from rubric_core.tools.checks import arun_checks, run_checks

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage, HumanMessage
    from langchain_core.tools import BaseTool

    from rubric_core.grader import Grader, Panel
    from rubric_core.schema import (
        CriterionVerdict,
        EvaluationResult,
        RubricEvaluation,
        RubricStatus,
    )

__all__ = ["GradingPass", "PassLimits", "PassPipeline", "record", "revision_message"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassLimits:
    """What one grading pass may spend and read. Defaults suit hosted models and local ones.

    Attributes:
        timeout_s: One grader model call, set on the grader's client (`GraderLimits`);
            a grader's client retries are off, `RetryPolicy.attempts` governs.
        budget_s: Wall-clock budget of one judge's pass: calls, corrections, tool rounds,
            retries and their waits. When it is spent the pass ends as `grader_error`,
            saying so. The pass's call caps are `grader.GraderLimits`' defaults.
        transcript_budget_chars: Characters of transcript, besides the original request
            and the final answer (always sent whole), the judge is given; at least 1,000.
        check_dir: What relative paths in code checks (`{pytest: tests/t.py}`) are
            resolved against, the working directory if `None`. Check files are read only
            from inside it (a path leading out is a check error).

    Raises:
        TypeError, ValueError: A field of the wrong type or out of range, named.

    Examples:
        >>> PassLimits(transcript_budget_chars=10)
        Traceback (most recent call last):
        ...
        ValueError: transcript_budget_chars must be at least 1000, got 10
    """

    timeout_s: float = 120.0
    budget_s: float = 600.0
    transcript_budget_chars: int = 48_000
    check_dir: str | Path | None = None

    def __post_init__(self) -> None:
        check_pass_limits(
            timeout_s=self.timeout_s,
            budget_s=self.budget_s,
            transcript_budget_chars=self.transcript_budget_chars,
            check_dir=self.check_dir,
        )

    def grader_limits(self) -> GraderLimits:
        return GraderLimits(timeout_s=float(self.timeout_s), pass_budget_s=float(self.budget_s))


@dataclass
class GradingPass:
    """One grading pass in progress: what is graded, and where it stands in its attempt."""

    rubric: str
    specs: list[CriterionSpec]
    run_id: str
    """The grading run (attempt) the pass belongs to; its nonce is derived from it."""
    iteration: int = 0
    max_iterations: int | None = None
    """The attempt's pass limit in a loop; `None` outside one (the status is the verdict)."""
    previous: list[RubricEvaluation] = field(default_factory=list)
    """The attempt's earlier passes, oldest first (for regressions)."""
    started: float = field(default_factory=time.time)
    usage: GraderUsage = field(default_factory=GraderUsage)

    @property
    def nonce(self) -> str:
        """The payload nonce of the grading run (`grader.nonce`): its passes share it."""
        return grading_nonce(self.run_id)


class PassPipeline:
    """Grades one pass: checks, judges, combine, derive, validate, score, regressions.

    Built once and used for any number of passes, from any thread (it keeps no state).

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> pipeline = PassPipeline.build(None)  # no judge: code checks only
        >>> record = pipeline.grade_transcript(
        ...     [HumanMessage("Say hi twice"), AIMessage("hi\\nhi")], "- Two lines {lines == 2}")
        >>> record["status"], record["score"]
        ('satisfied', 1.0)
    """

    def __init__(
        self,
        grader: Grader | Panel | None = None,
        *,
        check_dir: str | Path | None = None,
    ) -> None:
        self.grader = grader
        self.check_dir = check_dir

    @classmethod
    def build(
        cls,
        model: str | BaseChatModel | Judges | Unset | None = UNSET,
        *,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
        retry: RetryPolicy | None = None,
        limits: PassLimits | None = None,
    ) -> PassPipeline:
        """The pipeline of a judge (`model`), a panel or k samples (`Judges`), or none
        (`model=None`: every criterion of the rubrics must then have a code check).

        Raises:
            TypeError: An argument of the wrong type; the message names it.
            ValueError: `model` not given, out of range, or naming no usable model.
        """
        retry = RetryPolicy() if retry is None else retry
        limits = PassLimits() if limits is None else limits
        check_grader_arguments(system_prompt=system_prompt, tools=tools, retry=retry)
        if not isinstance(limits, PassLimits):
            msg = f"limits must be a PassLimits, got {type(limits).__name__}"
            raise TypeError(msg)
        judges, parameter = check_judges(model)
        grader = build_judges(
            judges,
            system_prompt=system_prompt,
            tools=list(tools or []),
            retry=retry,
            budget_chars=limits.transcript_budget_chars,
            limits=limits.grader_limits(),
            parameter=parameter,
        )
        return cls(grader, check_dir=limits.check_dir)

    # -- stages 1-3: checks, judges, combine ----------------------------------------------

    def require_grader(self, specs: Sequence[CriterionSpec]) -> Grader | Panel:
        """The judge; with none, a rubric with a judged criterion is refused (`InputError`)."""
        if self.grader is None:
            require_checks_only(specs, rubric="RubricMiddleware(model=None): the rubric")
        assert self.grader is not None
        return self.grader

    def outcome(
        self,
        graded: GradingPass,
        messages: Sequence[BaseMessage],
        *,
        given: GraderOutcome | None = None,
    ) -> GraderOutcome:
        """The code checks, then the judge on the rest (or the verdict `given` on them)."""
        checked = run_checks(graded.specs, final_answer(messages), base_dir=self.check_dir)
        judged = judged_names(graded.specs)
        if not judged:
            return checks_only_outcome(checked)
        if given is None:
            given = self.require_grader(graded.specs).grade(
                *_judge_args(graded, judged, messages),
                checked=[*checked.values()],
                nonce=graded.nonce,
            )
        return merge_outcome(graded.specs, checked, derived(given))

    async def aoutcome(
        self,
        graded: GradingPass,
        messages: Sequence[BaseMessage],
        *,
        given: GraderOutcome | None = None,
    ) -> GraderOutcome:
        """Async twin of `outcome`; the checks and the judge are awaited."""
        checked = await arun_checks(graded.specs, final_answer(messages), base_dir=self.check_dir)
        judged = judged_names(graded.specs)
        if not judged:
            return checks_only_outcome(checked)
        if given is None:
            given = await self.require_grader(graded.specs).agrade(
                *_judge_args(graded, judged, messages),
                checked=[*checked.values()],
                nonce=graded.nonce,
            )
        return merge_outcome(graded.specs, checked, derived(given))

    # -- the whole pass ---------------------------------------------------------------------

    def run(
        self,
        graded: GradingPass,
        messages: Sequence[BaseMessage],
        *,
        given: GraderOutcome | None = None,
    ) -> RubricEvaluation:
        """The pass's record; a grader that raised makes it a `grader_error`."""
        outcome: GraderOutcome | Exception
        try:
            outcome = self.outcome(graded, messages, given=given)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            outcome = exc
        return record(graded, messages, outcome)

    async def arun(
        self,
        graded: GradingPass,
        messages: Sequence[BaseMessage],
        *,
        given: GraderOutcome | None = None,
    ) -> RubricEvaluation:
        """Async twin of `run`."""
        outcome: GraderOutcome | Exception
        try:
            outcome = await self.aoutcome(graded, messages, given=given)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            outcome = exc
        return record(graded, messages, outcome)

    def grade_transcript(
        self,
        messages: Sequence[BaseMessage],
        rubric: str,
        *,
        grading_run_id: str | None = None,
        outcome: GraderOutcome | None = None,
    ) -> RubricEvaluation:
        """Grade a finished transcript once, outside any loop: its `status` is its verdict.

        Args:
            messages: The conversation to judge, e.g. `[HumanMessage(input), AIMessage(output)]`.
            rubric: The rubric (validated as in the loop).
            grading_run_id: The record's `grading_run_id` (a fresh uuid by default).
            outcome: A verdict already given on the judged criteria, by a person for
                instance (`grader.outcome_from_verdicts`): it takes the judge's place, so
                no model is called; the code checks still run and decide theirs.

        Returns:
            The pass's `RubricEvaluation` (`grader_error` if the grader raised, or when
            there is no judge and a criterion has no code check). No `regressions`: it
            has no earlier pass.
        """
        graded = GradingPass(
            rubric=rubric,
            specs=validate_criteria(rubric),
            run_id=grading_run_id or str(uuid.uuid4()),
        )
        with pass_context(graded.run_id):
            return self.run(graded, messages, given=outcome)


# -- stages 4-6: derive, validate, score; the record -------------------------------------


def _judge_args(
    graded: GradingPass, judged: list[str], messages: Sequence[BaseMessage]
) -> tuple[str, list[str], Sequence[BaseMessage], int, GraderUsage]:
    """What `Grader.grade`/`agrade` are called with: the judged criteria only."""
    return graded.rubric, judged, messages, graded.iteration, graded.usage


def derived(outcome: GraderOutcome) -> GraderOutcome:
    """The outcome with its result following from its verdicts (`schema.pass_result`): a
    judge's `result` that contradicts them costs nothing, the explanation notes it.

    Examples:
        >>> from rubric_core.schema import Criterion, GraderResponse
        >>> verdict = {"name": "a", "passed": False, "gap": "missing"}
        >>> response = GraderResponse.model_construct(result="satisfied", explanation="ok",
        ...     criteria=[Criterion(name="a", evidence="", passed=False, gap="missing")])
        >>> fixed = derived(GraderOutcome(response=response, criteria=[verdict], explanation="ok"))
        >>> fixed.response.result, fixed.explanation
        ('needs_revision', "ok (The judge's result 'satisfied' disagreed with its criteria; the criteria decide: needs_revision.)")
    """
    given = outcome.response.result
    result = pass_result(outcome.criteria)
    if given in ("failed", result):
        return outcome
    note = (
        f"The judge's result {given!r} disagreed with its criteria; the criteria decide: {result}."
    )
    return GraderOutcome(
        response=outcome.response.model_copy(update={"result": result}),
        criteria=outcome.criteria,
        explanation=f"{outcome.explanation} ({note})" if outcome.explanation else note,
        judges=outcome.judges,
    )


def verdicts_problem(criteria: Sequence[CriterionVerdict]) -> str | None:
    """What breaks the verdict rules among a pass's verdicts (`schema.verdict_problem`).

    Examples:
        >>> verdicts_problem([{"name": "a", "passed": True, "insufficient": True}])
        "criterion 'a' is both passed and insufficient; insufficient evidence is not a pass"
    """
    for verdict in criteria:
        problem = verdict_problem(
            verdict.get("name"),
            verdict.get("passed"),
            insufficient=verdict.get("insufficient", False),
            gap=verdict.get("gap"),
            require_gap=False,
        )
        if problem is not None:
            return problem
    return None


def _status(graded: GradingPass, result: EvaluationResult) -> RubricStatus:
    limit = graded.max_iterations
    if limit is not None and result == "needs_revision" and graded.iteration + 1 >= limit:
        logger.info("%srubric not met after %d grading passes", log_prefix(), limit)
        return "max_iterations_reached"
    return result


def record(
    graded: GradingPass,
    messages: Sequence[BaseMessage],
    outcome: GraderOutcome | Exception,
) -> RubricEvaluation:
    """The pass's `RubricEvaluation`: the result derived and validated, the nonce
    scrubbed from what goes back, the score and the regressions against earlier passes."""
    problem = None if isinstance(outcome, Exception) else verdicts_problem(outcome.criteria)
    criteria: list[CriterionVerdict]
    if isinstance(outcome, Exception) or problem is not None:
        explanation = (
            describe_exception(outcome)
            if isinstance(outcome, Exception)
            else f"the grader's verdicts break the verdict rules: {problem}"
        )
        logger.warning(
            "%sgrader failed on pass %d: %s", log_prefix(), graded.iteration, explanation
        )
        result: EvaluationResult = "grader_error"
        status: RubricStatus = "grader_error"
        criteria = []
    else:
        outcome = derived(outcome)
        result, explanation = outcome.response.result, outcome.explanation
        status = _status(graded, result)
        criteria = outcome.criteria
    # The nonce lives for the whole grading run: nothing the agent reads may carry it.
    explanation = scrub(explanation, graded.nonce)
    criteria = scrub_verdicts(criteria, graded.nonce)
    evaluation: RubricEvaluation = {
        "grading_run_id": graded.run_id,
        "iteration": graded.iteration,
        "result": result,
        "status": status,
        "explanation": explanation,
        "criteria": criteria,
        "draft": final_answer(messages),
        "started_at": graded.started,
        "duration_s": round(time.time() - graded.started, 6),
        "grader_attempts": graded.usage.attempts,
        "grader_input_tokens": graded.usage.input_tokens,
        "grader_output_tokens": graded.usage.output_tokens,
        "score": None if result == "grader_error" else score_pass(graded.specs, criteria),
        "regressions": regressions(list(graded.previous), criteria) if criteria else [],
    }
    if isinstance(outcome, GraderOutcome) and problem is None and outcome.judges is not None:
        evaluation["judges"] = scrub_judges(outcome.judges, graded.nonce)
    return evaluation


def revision_message(evaluation: RubricEvaluation) -> HumanMessage:
    """The feedback turn injected after a `needs_revision` pass."""
    failing = [c for c in evaluation["criteria"] if not c["passed"]]
    passing = [c for c in evaluation["criteria"] if c["passed"]]
    lines = [
        f"A grader checked your answer against the rubric (pass {evaluation['iteration'] + 1}) "
        "and it needs revision before it can be accepted."
    ]
    if evaluation["explanation"]:
        lines += ["", f"Grader's summary: {evaluation['explanation'].strip()}"]
    if failing:
        regressed = {r["name"]: r["passed_in"] for r in evaluation.get("regressions") or []}
        lines += ["", "Failing criteria, with what to change:"]
        for c in failing:
            gap = c.get("gap", "").strip() or "not met"
            if c["name"] in regressed:
                gap = regression_gap(gap, regressed[c["name"]])
            lines.append(f"- {c['name']}: {gap}")
    if passing:
        lines += ["", "Passing criteria (keep them passing):"]
        lines += [f"- {c['name']}" for c in passing]
    lines += [
        "",
        "Revise your work to fix every failing criterion without breaking the passing ones, "
        "then give your complete final answer again.",
    ]
    return grader_feedback_message("\n".join(lines))
