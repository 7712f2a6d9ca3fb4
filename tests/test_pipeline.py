"""The pass pipeline (`rubric_core.pipeline`): one grading pass, whoever asks for it."""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from rubric_core import PassPipeline, RubricMiddleware
from rubric_core.grader import GraderOutcome
from rubric_core.schema import Criterion, GraderResponse

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = "- has a title\n- cites a source\n- Two lines {lines == 2}"
MESSAGES = [HumanMessage("Write it."), AIMessage("Title\nbody")]


class _Judge:
    """A judge that gives one prepared outcome and counts how often it is asked."""

    def __init__(self, outcome: GraderOutcome) -> None:
        self.outcome = outcome
        self.calls = 0

    def grade(self, *args, **kwargs) -> GraderOutcome:
        self.calls += 1
        return self.outcome

    async def agrade(self, *args, **kwargs) -> GraderOutcome:
        return self.grade(*args, **kwargs)


def _outcome(result: str, verdicts: list[tuple[str, bool]]) -> GraderOutcome:
    # model_construct: a reply whose result contradicts its criteria, as a weak model gives
    response = GraderResponse.model_construct(
        result=result,
        explanation="Looks good.",
        criteria=[
            Criterion(name=n, evidence="", passed=p, gap=None if p else "missing")
            for n, p in verdicts
        ],
    )
    criteria = [{"name": n, "passed": p, **({} if p else {"gap": "missing"})} for n, p in verdicts]
    return GraderOutcome(response=response, criteria=criteria, explanation="Looks good.")


def test_a_judges_result_that_contradicts_its_criteria_is_derived_not_asked_again():
    """Finding 6: a verdict saying `satisfied` beside a failed criterion cost re-asks and
    often the pass; the criteria decide, in one request, and the explanation says so."""
    judge = _Judge(_outcome("satisfied", [("has a title", True), ("cites a source", False)]))
    record = PassPipeline(judge).grade_transcript(MESSAGES, RUBRIC)
    assert judge.calls == 1
    assert record["result"] == record["status"] == "needs_revision"
    assert "disagreed with its criteria" in record["explanation"]
    assert [c["passed"] for c in record["criteria"]] == [True, False, True]


def test_a_judge_that_names_no_criterion_cannot_satisfy_the_pass():
    """Finding 7: `satisfied` with no verdicts stood where the rule says needs_revision."""
    rubric = "- has a title"
    record = PassPipeline(_Judge(_outcome("satisfied", []))).grade_transcript(MESSAGES, rubric)
    assert record["result"] == "needs_revision"


def test_a_verdict_breaking_the_verdict_rules_is_a_grader_error_naming_it():
    """A passed verdict marked insufficient is refused, never recorded as a pass."""
    outcome = _outcome("satisfied", [("has a title", True), ("cites a source", True)])
    outcome.criteria[1]["insufficient"] = True
    record = PassPipeline(_Judge(outcome)).grade_transcript(MESSAGES, RUBRIC)
    assert record["result"] == "grader_error" and record["score"] is None
    assert "'cites a source' is both passed and insufficient" in record["explanation"]


def test_the_async_pass_gives_the_same_record_as_the_sync_one():
    """The sync and async twins run the same stages (checks and judge awaited)."""
    from rubric_core.pipeline import GradingPass
    from rubric_core.rubric import validate_criteria

    judge = _Judge(_outcome("needs_revision", [("has a title", True), ("cites a source", False)]))
    pipeline = PassPipeline(judge)

    def graded() -> GradingPass:
        return GradingPass(RUBRIC, validate_criteria(RUBRIC), "g", started=0.0)

    sync = pipeline.run(graded(), MESSAGES)
    asynchronous = asyncio.run(pipeline.arun(graded(), MESSAGES))
    for record in (sync, asynchronous):
        record.pop("duration_s")
    assert sync == asynchronous


def test_a_loops_last_pass_is_max_iterations_reached_and_a_one_off_pass_is_its_verdict():
    """The loop's limit applies in the loop only; outside it the status is the verdict."""
    from rubric_core.pipeline import GradingPass
    from rubric_core.rubric import validate_criteria

    judge = _Judge(_outcome("needs_revision", [("has a title", True), ("cites a source", False)]))
    specs = validate_criteria(RUBRIC)
    last = GradingPass(RUBRIC, specs, "g", iteration=1, max_iterations=2)
    assert PassPipeline(judge).run(last, MESSAGES)["status"] == "max_iterations_reached"
    one_off = GradingPass(RUBRIC, specs, "g")
    assert PassPipeline(judge).run(one_off, MESSAGES)["status"] == "needs_revision"


def test_the_middleware_constructor_takes_at_most_eight_keyword_arguments():
    """Issue 30: the constructor took 15; the seed's five plus retry, limits and keep."""
    parameters = list(inspect.signature(RubricMiddleware.__init__).parameters)[1:]
    assert parameters == [
        "model",
        "system_prompt",
        "tools",
        "max_iterations",
        "on_evaluation",
        "retry",
        "limits",
        "keep",
    ]


def test_only_the_run_builder_constructs_a_rubric_middleware():
    """Grade-only, re-grade and the person grader built a whole middleware to grade one
    pass; they build the pipeline now, and only `runs/agents.py` builds the loop."""
    builders = set()
    for path in (ROOT / "rubric_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "RubricMiddleware":
                builders.add(path.relative_to(ROOT).as_posix())
    assert builders == {"rubric_core/runs/agents.py"}


@pytest.mark.parametrize("samples", [0, 21])
def test_samples_out_of_range_are_refused_by_the_workbench_builder(samples):
    """The grade-only front door checks samples with the pipeline's own rule."""
    from rubric_core.workbench.grade import build_grader

    with pytest.raises(ValueError, match="samples must be between 1 and 20"):
        build_grader(None, samples=samples)
