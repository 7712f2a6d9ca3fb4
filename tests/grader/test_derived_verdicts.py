"""The criteria decide a pass: a judge's `result` never costs a request or the pass.

The judge is a replay model (scripted replies, no server), the agent a replay model too;
each test runs the loop as a user would, with `create_agent` and `RubricMiddleware`.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from rubric_core import Judges, RetryPolicy, RubricMiddleware
from rubric_core.grader.prompt import REJECTED_PREFIX
from rubric_core.providers import ReplayChatModel, tool_call_turn, verdict_turn
from rubric_core.providers.replay.scenarios import _verdict_from_tool
from rubric_core.schema import GraderResponse

RUBRIC = "- has a title\n- cites a source"
TITLE, SOURCE = "has a title", "cites a source"


def grade_once(grader: ReplayChatModel, samples: int = 1) -> dict:
    """One pass (`max_iterations=1`) of a scripted draft; its record."""
    evaluations: list[dict] = []
    middleware = RubricMiddleware(
        model=grader if samples == 1 else Judges([grader], samples=samples),
        max_iterations=1,
        on_evaluation=evaluations.append,
        retry=RetryPolicy(initial_delay_s=0.0),
    )
    agent = create_agent(
        ReplayChatModel(turns=[AIMessage("# Report\nNo source.")]), middleware=[middleware]
    )
    agent.invoke({"messages": [HumanMessage("Write the report.")], "rubric": RUBRIC})
    assert len(evaluations) == 1
    return evaluations[0]


def unusable_verdict() -> AIMessage:
    """A verdict no correction fixes when repeated: `passed` given as a string."""
    return tool_call_turn(
        "GraderResponse",
        {
            "criteria": [{"name": TITLE, "passed": "yes"}, {"name": SOURCE, "passed": "no"}],
            "explanation": "?",
            "result": "satisfied",
        },
    )


def test_a_satisfied_result_with_a_failed_criterion_is_derived_in_one_request():
    """Finding 6: a judge saying `satisfied` while a criterion failed was re-asked three
    times, then the pass ended `grader_error`. The criteria now decide at once, and the
    explanation says the judge's result was overruled."""
    contradiction = verdict_turn(
        "satisfied", [(TITLE, True), (SOURCE, False, "Cite where the figure comes from.")], "Fine."
    )
    grader = ReplayChatModel(scenario="judge", turns=[contradiction], cycle=True)
    evaluation = grade_once(grader)
    assert evaluation["result"] == "needs_revision"
    assert evaluation["grader_attempts"] == 1
    assert len(grader.calls) == 1
    assert [c["passed"] for c in evaluation["criteria"]] == [True, False]
    assert evaluation["explanation"] == (
        "Fine. (The grader said 'satisfied' although 'cites a source' failed; the criteria decide.)"
    )


def test_a_needs_revision_result_with_every_criterion_passed_is_satisfied():
    """The other direction of finding 6: every criterion passed, the judge said
    `needs_revision`; the pass is `satisfied`, in one request, and says why."""
    grader = ReplayChatModel(
        scenario="judge",
        turns=[verdict_turn("needs_revision", [(TITLE, True), (SOURCE, True)], "Close.")],
    )
    evaluation = grade_once(grader)
    assert (evaluation["result"], evaluation["status"]) == ("satisfied", "satisfied")
    assert evaluation["grader_attempts"] == 1
    assert "said 'needs_revision' although every criterion passed" in evaluation["explanation"]


def test_a_failed_result_keeps_its_reason():
    """`failed` (the rubric cannot be evaluated) is the judge's to give: not derived."""
    response = GraderResponse.model_validate(
        {"criteria": [], "explanation": "The rubric contradicts itself.", "result": "failed"}
    )
    assert (response.result, response.explanation) == ("failed", "The rubric contradicts itself.")


def test_a_failure_without_a_gap_is_re_asked_naming_the_criterion():
    """A re-ask is kept for what is missing, and it is not the first request again: it
    names the entry and the criterion whose gap is missing, without pydantic's noise."""
    gapless = tool_call_turn(
        "GraderResponse",
        {
            "criteria": [{"name": TITLE, "passed": True}, {"name": SOURCE, "passed": False}],
            "explanation": "No source.",
            "result": "needs_revision",
        },
    )
    fixed = verdict_turn("needs_revision", [(TITLE, True), (SOURCE, False, "Cite it.")])
    grader = ReplayChatModel(scenario="judge", turns=[gapless, fixed])
    evaluation = grade_once(grader)
    assert evaluation["result"] == "needs_revision"
    assert evaluation["grader_attempts"] == 2
    first, second = grader.calls
    assert second[: len(first)] == first and len(second) > len(first)
    correction = second[-1]
    assert isinstance(correction, ToolMessage)
    assert correction.content.startswith(
        f"{REJECTED_PREFIX}criteria entry 2: criterion 'cites a source' failed but has no gap"
    )
    assert "errors.pydantic.dev" not in correction.content
    assert "result" not in correction.content.split(":", 1)[1].split(". Call")[0]


def test_three_samples_with_one_broken_are_decided_by_the_two_valid_ones():
    """`samples=3` ended the pass `grader_error` on the first broken sample; now the
    valid samples decide (strict majority of them), and the record says how many were
    valid and why the other gave nothing."""
    judged = verdict_turn("needs_revision", [(TITLE, True), (SOURCE, False, "Cite it.")])
    # sample 1 valid; sample 2 answers unusably four times (1 + 3 corrections); sample 3 valid
    grader = ReplayChatModel(scenario="judge", turns=[judged, *[unusable_verdict()] * 4, judged])
    evaluation = grade_once(grader, samples=3)
    assert evaluation["result"] == "needs_revision"
    assert [c["passed"] for c in evaluation["criteria"]] == [True, False]
    assert [j["result"] for j in evaluation["judges"]] == [
        "needs_revision",
        "grader_error",
        "needs_revision",
    ]
    assert evaluation["judges"][1]["judge"] == "replay:judge #2"
    assert "GraderOutputError" in evaluation["judges"][1]["explanation"]
    assert "2 of 3 judges gave a valid verdict" in evaluation["explanation"]
    assert "of 2 judges" in evaluation["explanation"]
    assert evaluation["grader_attempts"] == 6


def test_samples_that_all_break_are_a_grader_error():
    """Only when no sample gives a verdict is the pass a `grader_error`."""
    grader = ReplayChatModel(scenario="judge", turns=[unusable_verdict()], cycle=True)
    evaluation = grade_once(grader, samples=2)
    assert evaluation["result"] == "grader_error"
    assert evaluation["explanation"].startswith("GraderOutputError")


def test_replay_verdicts_follow_the_one_rule():
    """Finding 7: a replay verdict built from tool results said `satisfied` with no
    criteria, where `schema.pass_result` says `needs_revision`."""
    reply = _verdict_from_tool({"criteria": []})([])
    assert reply.tool_calls[0]["args"]["result"] == "needs_revision"
    reply = _verdict_from_tool({"criteria": [{"name": TITLE, "passed": True}]})([])
    assert reply.tool_calls[0]["args"]["result"] == "satisfied"
