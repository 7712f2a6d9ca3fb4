"""Scores, regressions, code-checked criteria and keep="best", through real create_agent graphs."""

from __future__ import annotations

import asyncio
import re

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from rubric_core import RetryPolicy, RubricMiddleware
from rubric_core.errors import InputError
from rubric_core.providers import ReplayChatModel, verdict_turn
from rubric_core.schema import BEST_DRAFT_KEY

RUBRIC = "- [3] Cites the release date\n- Names the product\n- [-2] Invents a price"
DATE, PRODUCT, PRICE = "Cites the release date", "Names the product", "Invents a price"


def turn(date: bool, product: bool, price_absent: bool = True):
    verdicts = [
        (DATE, True) if date else (DATE, False, "Give the release date."),
        (PRODUCT, True) if product else (PRODUCT, False, "Name the product."),
        (PRICE, True) if price_absent else (PRICE, False, "Remove the invented price."),
    ]
    ok = date and product and price_absent
    return verdict_turn("satisfied" if ok else "needs_revision", verdicts, "Checked.")


def agent_with(grader_turns, *, checkpointer=None, agent_turns=None, **kwargs):
    agent_model = ReplayChatModel(
        scenario="agent",
        turns=agent_turns or [AIMessage(f"draft {i}") for i in range(1, 8)],
    )
    grader = ReplayChatModel(scenario="grader", turns=list(grader_turns)) if grader_turns else None
    evaluations: list[dict] = []
    middleware = RubricMiddleware(
        model=grader,
        on_evaluation=evaluations.append,
        retry=RetryPolicy(initial_delay_s=0.0),
        **kwargs,
    )
    agent = create_agent(agent_model, middleware=[middleware], checkpointer=checkpointer)
    return agent, grader, evaluations


def ask(rubric=RUBRIC):
    return {"messages": [HumanMessage("Write the note.")], "rubric": rubric}


def invoke(agent, state, *, use_async: bool, config=None):
    if use_async:
        return asyncio.run(agent.ainvoke(state, config))
    return agent.invoke(state, config)


# -- score and regressions -----------------------------------------------------------


def test_every_pass_carries_its_score():
    # pass 1: date only (3/4); pass 2: product only (1/4); pass 3: everything (1)
    agent, _, evaluations = agent_with(
        [turn(True, False), turn(False, True), turn(True, True)], max_iterations=3
    )
    result = agent.invoke(ask())
    assert result["_rubric_status"] == "satisfied"
    assert [e["score"] for e in evaluations] == [0.75, 0.25, 1.0]


def test_a_grader_error_pass_has_no_score():
    def explode(messages):
        raise RuntimeError("down")

    agent, _, evaluations = agent_with([explode])
    agent.invoke(ask())
    assert evaluations[0]["score"] is None
    assert evaluations[0]["regressions"] == []


def test_regressions_are_listed_and_named_in_the_feedback():
    agent, _, evaluations = agent_with(
        [turn(True, False), turn(False, True), turn(True, True)], max_iterations=3
    )
    result = agent.invoke(ask())
    assert evaluations[0]["regressions"] == []
    assert evaluations[1]["regressions"] == [{"name": DATE, "passed_in": 1}]
    feedback = [m for m in result["messages"] if isinstance(m, HumanMessage)][2]
    assert (
        f"- {DATE}: this passed in pass 1 and fails now: Give the release date." in feedback.content
    )
    # a criterion that never passed is not called a regression
    assert f"- {PRODUCT}: Name the product." in result["messages"][2].content


# -- keep ----------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpointed"])
def test_keep_best_hands_back_the_middle_pass_draft(use_async, checkpointed):
    # scores 0.25, 0.75, -0.5 (unclipped, as HealthBench): the middle pass is best
    agent, _, evaluations = agent_with(
        [turn(False, True), turn(True, False), turn(False, False, False)],
        max_iterations=3,
        keep="best",
        checkpointer=InMemorySaver() if checkpointed else None,
    )
    config = {"configurable": {"thread_id": "t"}} if checkpointed else None
    result = invoke(agent, ask(), use_async=use_async, config=config)
    assert result["_rubric_status"] == "max_iterations_reached"
    assert [e["score"] for e in evaluations] == [0.25, 0.75, -0.5]
    assert result["_rubric_best_iteration"] == 1
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == "draft 2"
    assert last.additional_kwargs[BEST_DRAFT_KEY] == {"iteration": 1, "score": 0.75}
    assert result["messages"][-2].content == "draft 3"
    if checkpointed:
        state = agent.get_state(config).values
        assert state["_rubric_best_iteration"] == 1
        assert state["messages"][-1].content == "draft 2"


def test_keep_best_ties_go_to_the_later_pass_and_last_best_appends_nothing():
    agent, _, _ = agent_with([turn(True, False), turn(True, False)], max_iterations=2, keep="best")
    result = agent.invoke(ask())
    assert result["_rubric_best_iteration"] == 1
    assert result["messages"][-1].content == "draft 2"
    assert BEST_DRAFT_KEY not in result["messages"][-1].additional_kwargs


def test_keep_best_after_a_grader_error_returns_the_scored_draft():
    def explode(messages):
        raise RuntimeError("down")

    agent, _, _ = agent_with([turn(True, False), explode], max_iterations=3, keep="best")
    result = agent.invoke(ask())
    assert result["_rubric_status"] == "grader_error"
    assert result["_rubric_best_iteration"] == 0
    assert result["messages"][-1].content == "draft 1"
    assert result["messages"][-1].additional_kwargs[BEST_DRAFT_KEY]["iteration"] == 0


def test_keep_last_is_the_default_and_leaves_the_last_answer():
    agent, _, _ = agent_with(
        [turn(False, True), turn(True, False), turn(False, False, False)], max_iterations=3
    )
    result = agent.invoke(ask())
    assert result["messages"][-1].content == "draft 3"
    assert result.get("_rubric_best_iteration") is None


def test_keep_must_be_last_or_best():
    with pytest.raises(ValueError, match="keep must be one of 'last', 'best', got 'first'"):
        RubricMiddleware(model="openai:x", keep="first")  # type: ignore[arg-type]


# -- code checks ---------------------------------------------------------------------

CHECKED = "- [2] Exactly three lines {lines == 3}\n- [-3] Quotes a price {regex: \\$\\d}"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_checks_only_rubric_runs_offline_without_a_grader_model(use_async):
    agent, _, evaluations = agent_with(
        [],
        agent_turns=[AIMessage("one line for $5"), AIMessage("rain\non the\nroof")],
    )
    result = invoke(agent, ask(CHECKED), use_async=use_async)
    assert result["_rubric_status"] == "satisfied"
    first, second = evaluations
    assert first["criteria"] == [
        {
            "name": "Exactly three lines",
            "passed": False,
            "checked_by": "code",
            "evidence": "1 line; needs exactly 3",
            "gap": "1 line; needs exactly 3",
        },
        {
            "name": "Quotes a price",
            "passed": False,
            "checked_by": "code",
            "evidence": first["criteria"][1]["evidence"],
            "gap": first["criteria"][1]["gap"],
        },
    ]
    assert first["criteria"][1]["evidence"].startswith("MATCH")
    assert first["score"] == -1.5 and second["score"] == 1.0  # unclipped, as HealthBench
    assert "- Exactly three lines: 1 line; needs exactly 3" in result["messages"][2].content


def test_model_none_with_judged_criteria_is_a_clear_error():
    agent, _, _ = agent_with([])
    with pytest.raises(InputError, match=r"model=None.*'Names the product'"):
        agent.invoke(ask("- Names the product\n- Three lines {lines == 3}"))


def test_the_judge_sees_checked_outcomes_and_is_not_asked_about_them():
    rubric = "- Mentions rain\n- Exactly three lines {lines == 3}"
    judge = verdict_turn("satisfied", [("Mentions rain", True)], "Rain is there.")
    agent, grader, evaluations = agent_with(
        [judge, judge], agent_turns=[AIMessage("rain"), AIMessage("rain\nfalls\nsoftly")]
    )
    result = agent.invoke(ask(rubric))
    payload = grader.calls[0][-1].content
    checklist = re.search(r"<checklist-\w+>\n(.*?)</checklist-", payload, re.DOTALL).group(1)
    assert "Mentions rain" in checklist and "Exactly three lines" not in checklist
    assert "- Exactly three lines: FAILED (1 line; needs exactly 3)" in payload
    # the judge said satisfied, but a check failed: the pass needs revision
    assert [e["result"] for e in evaluations] == ["needs_revision", "satisfied"]
    assert [c["name"] for c in evaluations[0]["criteria"]] == [
        "Mentions rain",
        "Exactly three lines",
    ]
    assert result["_rubric_status"] == "satisfied"
