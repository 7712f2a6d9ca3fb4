"""Grader requests over real loopback HTTP: what `grader_attempts` counts, and a server
that drips its reply cannot hold a call past its timeout or a pass past its budget."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.support.fault_server import GOOD, DripServer, FaultServer, run_loop

PLAIN = {
    "id": "chatcmpl-plain",
    "object": "chat.completion",
    "created": 0,
    "model": "fault-server",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Looks good to me."},
            "finish_reason": "stop",
        }
    ],
}
PARTIAL = {
    "criteria": [{"name": "has a title", "passed": True}],
    "explanation": "Title present.",
    "result": "satisfied",
}
CONTRADICTION = {
    "criteria": [
        {"name": "has a title", "passed": True},
        {"name": "cites a source", "passed": False, "gap": "No source."},
    ],
    "explanation": "Fine.",
    "result": "satisfied",
}

FAULT_MODES = {
    "HTTP 500, then a verdict": [("status", (500, {}))],
    "HTTP 429 twice": [("status", (429, {"retry-after": "0"}))] * 2,
    "a reset mid-reply": [("reset", None)],
    "a timeout": [("hang", 2.0)],
    "invalid JSON arguments, corrected": [("ok", "{not json")] * 2,
    "a verdict missing a field, corrected": [("ok", {"criteria": [], "result": "maybe"})],
    "plain text, reminded": [("raw", PLAIN)] * 2,
    "a verdict skipping a criterion": [("ok", PARTIAL)],
    "a self-contradicting verdict": [("ok", CONTRADICTION)],
    "never valid": [("ok", "{not json")] * 40,
    "an empty choices list": [("raw", dict(PLAIN, choices=[]))] * 3,
    "HTTP 500 forever": [("status", (500, {}))] * 40,
}


@pytest.mark.parametrize("mode", list(FAULT_MODES))
def test_grader_attempts_is_the_number_of_requests_the_server_received(mode):
    """Issue 22: `grader_attempts` was 1 where the server received 4 to 12 requests."""
    with FaultServer([*FAULT_MODES[mode], ("ok", GOOD)]) as server:
        _result, evaluations, _agent = run_loop(server, timeout=0.5, max_iterations=1)
        received = len(server.requests)
    assert evaluations, mode
    assert evaluations[0]["grader_attempts"] == received, mode


@pytest.mark.parametrize(
    "mode", ["HTTP 500, then a verdict", "invalid JSON arguments, corrected", "never valid"]
)
def test_a_grader_with_tools_counts_its_requests_too(mode):
    from rubric_core.tools import get_tools

    with FaultServer([*FAULT_MODES[mode], ("ok", GOOD)]) as server:
        _result, evaluations, _agent = run_loop(
            server, timeout=0.5, max_iterations=1, tools=get_tools(["text_stats"])
        )
        received = len(server.requests)
    assert evaluations[0]["grader_attempts"] == received, mode


# -- a server that drips its reply --------------------------------------------------------


_HANG_BOUND_S = 90
"""Not a timing assertion: a bound so that a call that never ends fails the test instead
of hanging it (on main, the pass was still grading after 120 s)."""


def _within_bound(fn):
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(result=fn()), daemon=True)
    worker.start()
    worker.join(_HANG_BOUND_S)
    assert "result" in box, f"the grading pass was still running after {_HANG_BOUND_S} s"
    return box["result"]


def _dripped_loop(
    server: DripServer, *, use_async: bool, tools: bool, attempts: int, budget_s: float
):
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_openai import ChatOpenAI

    from rubric_core import PassLimits, RetryPolicy, RubricMiddleware
    from rubric_core.providers import ReplayChatModel
    from rubric_core.tools import get_tools

    grader = ChatOpenAI(
        model="m", base_url=server.base_url, api_key="sk-test", timeout=1.0, max_retries=0
    )
    evaluations: list[dict] = []
    middleware = RubricMiddleware(
        model=grader,
        on_evaluation=evaluations.append,
        tools=get_tools(["text_stats"]) if tools else [],
        max_iterations=1,
        retry=RetryPolicy(attempts=attempts, initial_delay_s=0.01, max_delay_s=0.05),
        limits=PassLimits(budget_s=budget_s),
    )
    agent = create_agent(ReplayChatModel(turns=[AIMessage("draft 1")]), middleware=[middleware])
    state = {"messages": [HumanMessage("Write it.")], "rubric": "- has a title"}
    if use_async:
        result = _within_bound(lambda: asyncio.run(agent.ainvoke(state)))
    else:
        result = _within_bound(lambda: agent.invoke(state))
    return result, evaluations


@pytest.mark.parametrize("tools", [False, True], ids=["direct", "sub-agent"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_dripping_server_cannot_hold_a_call_past_its_timeout(use_async, tools):
    """Issue 22: headers, then a byte every 2 s, kept a 6 s-timeout call going for ever."""
    with DripServer(every_s=0.3) as server:
        result, evaluations = _dripped_loop(
            server, use_async=use_async, tools=tools, attempts=2, budget_s=60
        )
        requests = server.requests
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert explanation.startswith("GraderCallTimeout: "), explanation
    assert "took longer than its timeout of 1 s" in explanation
    assert evaluations[0]["grader_attempts"] == requests == 2  # each call ended, then retried


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_dripping_server_cannot_hold_a_pass_past_its_budget(use_async):
    """The pass budget holds for sync calls too: each call's own 1 s timeout would allow
    more retries than the 2.5 s budget has room for."""
    with DripServer(every_s=0.3) as server:
        result, evaluations = _dripped_loop(
            server, use_async=use_async, tools=False, attempts=20, budget_s=2.5
        )
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert "time budget of 2.5 s per pass ran out" in explanation, explanation
    assert evaluations[0]["grader_attempts"] < 20


def test_an_abandoned_call_of_a_grader_given_as_a_string_ends_its_connection(monkeypatch):
    """The documented path, `model="openai:..."`: its client reads a response only until
    the call's timeout, so a call the pass gave up on does not read a dripping reply on
    for ever (one thread and one connection per retry, per pass, in a batch)."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    from rubric_core import PassLimits, RetryPolicy, RubricMiddleware
    from rubric_core.providers import ReplayChatModel

    with DripServer(every_s=0.2) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        evaluations: list[dict] = []
        middleware = RubricMiddleware(
            model="openai:gpt-4.1-mini",
            on_evaluation=evaluations.append,
            limits=PassLimits(timeout_s=1.0),
            retry=RetryPolicy(attempts=2, initial_delay_s=0.01),
            max_iterations=1,
        )
        agent = create_agent(ReplayChatModel(turns=[AIMessage("draft 1")]), middleware=[middleware])
        result = _within_bound(
            lambda: agent.invoke({"messages": [HumanMessage("Write it.")], "rubric": "- a title"})
        )
        assert result["_rubric_status"] == "grader_error"
        assert evaluations[0]["grader_attempts"] == server.requests == 2
        deadline = time.monotonic() + _HANG_BOUND_S  # an outer bound, not a timing assertion
        while server.closed_by_client < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.closed_by_client == 2, "an abandoned call kept reading the dripping reply"
