"""The limits of one grading pass, the up-front argument checks and the verdict alignment,
with scripted grader models in real agent graphs."""

from __future__ import annotations

import asyncio
import math

import jsonschema
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from rubric_core import Judges, PassLimits, RetryPolicy, RubricMiddleware
from rubric_core.grader import align_criteria
from rubric_core.grader.budget import GraderLimitError, GraderLimits, PassBudget
from rubric_core.grader.verdict_schema import verdict_json_schema
from rubric_core.providers import ReplayChatModel, tool_call_turn, verdict_turn
from rubric_core.schema import GraderResponse

RUBRIC = "- has a title\n- cites a source"
NAMES = ["has a title", "cites a source"]


def run(grader_turns, *, cycle=False, use_async=False, **kwargs):
    grader = ReplayChatModel(scenario="grader", turns=list(grader_turns), cycle=cycle)
    agent_model = ReplayChatModel(turns=[AIMessage(f"draft {i}") for i in range(1, 6)])
    evaluations: list[dict] = []
    kwargs.setdefault("retry", RetryPolicy(initial_delay_s=0.0))
    middleware = RubricMiddleware(model=grader, on_evaluation=evaluations.append, **kwargs)
    agent = create_agent(agent_model, middleware=[middleware])
    state = {"messages": [HumanMessage("Write it.")], "rubric": RUBRIC}
    result = asyncio.run(agent.ainvoke(state)) if use_async else agent.invoke(state)
    return result, evaluations, grader


def response(result, criteria, explanation="Judged."):
    return GraderResponse.model_validate(
        {"criteria": criteria, "explanation": explanation, "result": result}
    )


# -- item 8: every model call counts, replies are cut -----------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_a_grader_that_answers_in_plain_text_is_stopped_at_the_model_call_cap(use_async):
    chatter = AIMessage("I think the draft is good. " * 40_000)  # about 1 MB per reply
    result, evaluations, grader = run([chatter], cycle=True, use_async=use_async)
    assert result["_rubric_status"] == "grader_error"
    limit = GraderLimits().max_model_calls
    assert len(grader.calls) == limit
    assert f"made {limit} model calls in this pass" in evaluations[0]["explanation"]
    # each later request carries the earlier replies cut to the reply cap, not whole
    last_request = grader.calls[-1]
    assert max(len(str(m.content)) for m in last_request[1:]) < 25_000
    assert "characters cut" in str(last_request[2].content)
    # and the grader is told, after a plain-text reply, how to answer
    assert "plain text" in str(last_request[3].content)


def test_a_plain_text_reply_then_a_verdict_is_accepted():
    satisfied = verdict_turn("satisfied", [(NAMES[0], True), (NAMES[1], True)], "Both met.")
    result, evaluations, grader = run([AIMessage("Looks fine to me."), satisfied])
    assert result["_rubric_status"] == "satisfied"
    assert len(grader.calls) == 2
    assert evaluations[0]["grader_attempts"] == 2  # every request counts (issue 22)


# -- item 18: tool calls per pass ---------------------------------------------------------


@tool
def count_syllables(text: str) -> str:
    """Count the syllables of a text."""
    return f"{len(text.split()) * 2} syllables"


@pytest.mark.parametrize("use_async", [False, True])
def test_a_grader_repeating_one_tool_call_is_stopped_and_the_tool_is_named(use_async):
    repeat = tool_call_turn("count_syllables", {"text": "rain on the roof"})
    result, evaluations, grader = run(
        [repeat], cycle=True, use_async=use_async, tools=[count_syllables]
    )
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert "kept calling count_syllables with the same arguments" in explanation, explanation
    assert "GraphRecursionError" not in explanation
    limit = GraderLimits().max_identical_tool_calls
    assert len(grader.calls) == limit + 1


def test_a_grader_making_too_many_distinct_tool_calls_is_stopped_and_the_tool_is_named():
    def five_calls(turn: int) -> AIMessage:
        calls = [
            {"name": "count_syllables", "args": {"text": f"line {turn}.{i}"}, "id": f"c{turn}.{i}"}
            for i in range(5)
        ]
        return AIMessage(content="", tool_calls=calls)

    result, evaluations, _ = run([five_calls(t) for t in range(10)], tools=[count_syllables])
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert "tool calls in this pass" in explanation and "count_syllables" in explanation


def test_tool_calls_within_the_limits_still_lead_to_the_verdict():
    turns = [
        tool_call_turn("count_syllables", {"text": "rain"}),
        tool_call_turn("count_syllables", {"text": "rain"}),
        verdict_turn("satisfied", [(NAMES[0], True), (NAMES[1], True)], "Counted."),
    ]
    result, _, _ = run(turns, tools=[count_syllables])
    assert result["_rubric_status"] == "satisfied"


def test_pass_budget_refuses_a_retry_that_would_outlast_it():
    now = [0.0]
    budget = PassBudget(GraderLimits(pass_budget_s=10), clock=lambda: now[0])
    assert budget.retry_delay(2.0, "HTTP 500") == 2.0
    now[0] = 9.0
    with pytest.raises(GraderLimitError, match="time budget of 10 s per pass ran out"):
        budget.retry_delay(2.0, "HTTP 500")
    now[0] = 10.0
    with pytest.raises(GraderLimitError, match="before the next model call"):
        budget.start_model_call()


# -- item 13: strict alignment ------------------------------------------------------------


def test_unrelated_names_are_not_matched_by_position():
    verdicts, missing = align_criteria(
        NAMES,
        response("satisfied", [{"name": "foo", "passed": True}, {"name": "bar", "passed": True}]),
    )
    assert verdicts == [] and missing == NAMES


def test_close_names_at_the_same_position_still_match():
    given = [{"name": "title present", "passed": True}, {"name": "a source", "passed": True}]
    verdicts, missing = align_criteria(NAMES, response("satisfied", given))
    assert [v["name"] for v in verdicts] == NAMES and missing == []


def test_foo_bar_verdict_is_not_accepted_as_satisfied():
    foo_bar = verdict_turn("satisfied", [("foo", True), ("bar", True)], "All good.")
    _, evaluations, grader = run([foo_bar, foo_bar], max_iterations=1)
    assert len(grader.calls) == 2, "asked once more, with a correction"
    assert evaluations[0]["result"] == "needs_revision"
    assert [c["name"] for c in evaluations[0]["criteria"]] == NAMES
    assert all(not c["passed"] for c in evaluations[0]["criteria"])
    assert "'foo'" in evaluations[0]["explanation"]


def test_passed_must_be_a_real_boolean():
    for value in ("yes", 1, "true"):
        with pytest.raises(ValueError, match="valid boolean"):
            response("satisfied", [{"name": "has a title", "passed": value}])


# -- item 19: a `failed` verdict is aligned too -------------------------------------------


def test_a_failed_verdict_keeps_no_invented_criteria_and_says_the_grader_may_be_wrong():
    invented = verdict_turn("failed", [("foo", False, "Cannot tell.")], "The rubric is unclear.")
    result, evaluations, grader = run([invented, invented])
    assert result["_rubric_status"] == "failed"
    assert len(grader.calls) == 2, "a failed verdict naming other criteria is asked again"
    evaluation = evaluations[0]
    assert all(c["name"] in NAMES for c in evaluation["criteria"])
    assert "'foo'" in evaluation["explanation"]
    assert "may have misread the rubric" in evaluation["explanation"]


def test_a_failed_verdict_on_the_rubric_own_criteria_is_kept_in_rubric_order():
    failed = verdict_turn(
        "failed",
        [(NAMES[1], False, "No way to check sources."), (NAMES[0], True)],
        "The rubric cannot be judged from the transcript.",
    )
    _, evaluations, grader = run([failed])
    assert len(grader.calls) == 1
    assert [c["name"] for c in evaluations[0]["criteria"]] == NAMES
    assert evaluations[0]["explanation"] == "The rubric cannot be judged from the transcript."


# -- item 17: the verdict schema makes a valid verdict by construction ---------------------


def test_every_verdict_the_schema_admits_is_complete_and_valid():
    schema = verdict_json_schema(NAMES)
    validator = jsonschema.Draft202012Validator(schema)
    complete = {
        "criteria": [
            {"name": NAMES[0], "evidence": "A title.", "passed": True},
            {"name": NAMES[1], "evidence": "None.", "passed": False, "gap": "Cite one."},
        ],
        "explanation": "No source.",
        "result": "needs_revision",
    }
    assert validator.is_valid(complete)
    verdicts, missing = align_criteria(NAMES, GraderResponse.model_validate(complete))
    assert missing == [] and [v["name"] for v in verdicts] == NAMES
    incomplete = dict(complete, criteria=complete["criteria"][:1])
    no_gap = dict(
        complete, criteria=[complete["criteria"][0], {**complete["criteria"][1], "gap": ""}]
    )
    swapped = dict(complete, criteria=complete["criteria"][::-1])
    renamed = dict(
        complete, criteria=[{**complete["criteria"][0], "name": "foo"}, complete["criteria"][1]]
    )
    yes = dict(
        complete, criteria=[{**complete["criteria"][0], "passed": "yes"}, complete["criteria"][1]]
    )
    for bad in (incomplete, no_gap, swapped, renamed, yes):
        assert not validator.is_valid(bad), bad


# -- item 12: the constructor refuses what cannot work ------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"model": "nonsense"}, ValueError, "model='nonsense'"),
        ({"model": "openai:"}, ValueError, "model='openai:'"),
        ({"model": "openai:gpt-4.1-mini"}, ValueError, "OPENAI_API_KEY"),
        ({"model": 42}, TypeError, "model must be"),
        (
            {"model": lambda: Judges([ReplayChatModel(turns=[]), "nonsense"])},
            ValueError,
            "Judges.models='nonsense'",
        ),
        ({"model": lambda: Judges([42])}, TypeError, "Judges.models[0]"),
        ({"model": lambda: Judges(["openai:x"], samples=0)}, ValueError, "samples"),
        ({"tools": "notatool"}, TypeError, "tools must be a list"),
        ({"tools": [3]}, TypeError, "tools[0]"),
        ({"system_prompt": 123}, TypeError, "system_prompt"),
        (
            {"limits": lambda: PassLimits(transcript_budget_chars="5000")},
            TypeError,
            "transcript_budget_chars",
        ),
        (
            {"retry": lambda: RetryPolicy(initial_delay_s=math.nan)},
            ValueError,
            "retry.initial_delay_s",
        ),
        ({"retry": lambda: RetryPolicy(max_delay_s=math.inf)}, ValueError, "retry.max_delay_s"),
        ({"retry": lambda: RetryPolicy(initial_delay_s="1")}, TypeError, "retry.initial_delay_s"),
        ({"retry": lambda: RetryPolicy(attempts=0)}, ValueError, "retry.attempts"),
        ({"retry": lambda: 3}, TypeError, "retry must be a RetryPolicy"),
        ({"limits": lambda: PassLimits(timeout_s=0)}, ValueError, "timeout_s"),
        ({"limits": lambda: PassLimits(budget_s=math.inf)}, ValueError, "budget_s"),
        ({"limits": lambda: PassLimits(check_dir=5)}, TypeError, "check_dir"),
        ({"limits": lambda: {"timeout_s": 1}}, TypeError, "limits must be a PassLimits"),
    ],
)
def test_constructor_rejects_what_cannot_work_naming_the_parameter(no_keys, kwargs, error, named):
    defaults = {"model": ReplayChatModel(turns=[])}
    with pytest.raises(error) as raised:
        # an option object's own checks are part of the call: build it inside the raises
        given = {k: v() if callable(v) else v for k, v in kwargs.items()}
        RubricMiddleware(**{**defaults, **given})
    assert named in str(raised.value)


def test_a_string_grader_gets_the_default_timeout_and_no_client_retries(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    grader = RubricMiddleware(model="openai:gpt-4.1-mini").grader
    assert grader.model.request_timeout == 120.0
    assert grader.model.max_retries == 0
    configured = RubricMiddleware(
        model="openai:gpt-4.1-mini", limits=PassLimits(timeout_s=7.5)
    ).grader
    assert configured.model.request_timeout == 7.5
