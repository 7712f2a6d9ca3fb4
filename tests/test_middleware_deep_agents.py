"""RubricMiddleware inside deepagents' create_deep_agent graph."""

from __future__ import annotations

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from rubric_core import RUBRIC_GRADER_MESSAGE_SOURCE, RubricMiddleware
from rubric_core.providers import ReplayChatModel, tool_call_turn, verdict_turn

RUBRIC = "- notes.md exists\n- notes.md lists three risks"


def test_deep_agent_revises_until_the_rubric_is_met():
    agent_model = ReplayChatModel(
        scenario="deep",
        turns=[
            tool_call_turn("write_file", {"file_path": "/notes.md", "content": "- risk one\n"}),
            AIMessage("I wrote /notes.md with the risks."),
            tool_call_turn(
                "edit_file",
                {
                    "file_path": "/notes.md",
                    "old_string": "- risk one\n",
                    "new_string": "- risk one\n- risk two\n- risk three\n",
                },
            ),
            AIMessage("Added the two missing risks to /notes.md."),
        ],
    )
    grader_model = ReplayChatModel(
        scenario="deep-grader",
        turns=[
            verdict_turn(
                "needs_revision",
                [("notes.md exists", True), ("notes.md lists three risks", False, "Only one.")],
                "One risk listed, three required.",
            ),
            verdict_turn(
                "satisfied",
                [("notes.md exists", True), ("notes.md lists three risks", True)],
                "Three risks listed.",
            ),
        ],
    )
    evaluations: list[dict] = []
    agent = create_deep_agent(
        model=agent_model,
        system_prompt="You keep notes.",
        middleware=[RubricMiddleware(model=grader_model, on_evaluation=evaluations.append)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "deep-1"}}
    events = list(
        agent.stream(
            {"messages": [HumanMessage("List the project's risks in /notes.md")], "rubric": RUBRIC},
            config,
            stream_mode="custom",
        )
    )
    state = agent.get_state(config).values

    assert state["_rubric_status"] == "satisfied"
    assert [(e["result"], e["status"]) for e in evaluations] == [
        ("needs_revision", "needs_revision"),
        ("satisfied", "satisfied"),
    ]
    ends = [e for e in events if isinstance(e, dict) and e.get("type") == "rubric_evaluation_end"]
    assert [e["result"] for e in ends] == ["needs_revision", "satisfied"]
    # the deep agent's own tools really ran: the file holds three risks
    assert state["files"]["/notes.md"]["content"] in (
        ["- risk one", "- risk two", "- risk three", ""],
        "- risk one\n- risk two\n- risk three\n",
    )
    feedback = [
        m
        for m in state["messages"]
        if isinstance(m, HumanMessage) and m.name == RUBRIC_GRADER_MESSAGE_SOURCE
    ]
    assert len(feedback) == 1 and "Only one." in feedback[0].content
    # the grader saw the agent's tool calls and their results in the transcript
    first_payload = grader_model.calls[0][-1].content
    assert "write_file" in first_payload
    assert any(isinstance(m, ToolMessage) for m in state["messages"])
