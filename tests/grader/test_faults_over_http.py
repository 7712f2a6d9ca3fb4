"""Grader faults over real HTTP: LangChain's OpenAI client against a fault-injecting server.

The server speaks the OpenAI chat-completions protocol on loopback and plays a queue of
behaviours: a good verdict, a connection reset mid-response, a hang past the client's
timeout, HTTP 429 with Retry-After, HTTP 500, and verdicts that are invalid, contradict
themselves or skip criteria. The agent is a replay model, so any re-run would show.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from rubric_core import PassLimits, RetryPolicy, RubricMiddleware
from rubric_core.providers import ReplayChatModel
from tests.support.fault_server import GOOD, RUBRIC, FaultServer, SilentServer, run_loop


@pytest.mark.parametrize(
    ("fault", "label"),
    [
        (("reset", None), "connection reset mid-response"),
        (("hang", 3.0), "timeout"),
        (("status", (429, {"retry-after": "0.01"})), "HTTP 429 with Retry-After"),
        (("status", (500, {})), "HTTP 500"),
        (("status", (503, {})), "HTTP 503"),
    ],
)
def test_transient_fault_is_retried_then_succeeds(fault, label):
    with FaultServer([fault, ("ok", GOOD)]) as server:
        result, evaluations, agent_model = run_loop(server, timeout=1.0)
    assert result["_rubric_status"] == "satisfied", label
    assert evaluations[0]["grader_attempts"] == 2
    assert len(server.requests) == 2
    assert len(agent_model.calls) == 1, "a grader retry must never re-run the agent"


def test_retry_after_ms_is_honoured_by_the_graders_retry():
    """Guards issue 30: the grader's retry read `Retry-After` only, so a 429 saying
    `retry-after-ms: 1500` (OpenAI's and Azure's header) was retried after the backoff's
    10 ms, into the same throttle. Now the grader waits what the header asks (bounded by
    its `max_delay_s`), read by the same parser as the batch's rate book."""
    throttled = ("status", (429, {"retry-after-ms": "1500"}))
    with FaultServer([throttled, ("ok", GOOD)]) as server:
        started = time.monotonic()
        result, evaluations, _ = run_loop(
            server, timeout=5.0, retry=RetryPolicy(initial_delay_s=0.01, max_delay_s=5.0)
        )
        waited = time.monotonic() - started
    assert result["_rubric_status"] == "satisfied"
    assert evaluations[0]["grader_attempts"] == 2
    assert waited >= 1.5


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (("status", (500, {})), "OpenAIAPIError (HTTP 500): Error code: 500"),
        (("status", (429, {"retry-after": "0"})), "OpenAIRateLimitError (HTTP 429)"),
        (("reset", None), "OpenAIConnectionError: Connection error."),
        (("hang", 3.0), "OpenAITimeoutError: Request timed out."),
    ],
)
def test_persistent_fault_ends_as_grader_error_with_the_cause(fault, expected):
    with FaultServer([fault] * 3) as server:
        result, evaluations, agent_model = run_loop(
            server,
            timeout=1.0,
            retry=RetryPolicy(attempts=3, initial_delay_s=0.01, max_delay_s=0.05),
        )
    assert result["_rubric_status"] == "grader_error"
    assert evaluations[0]["explanation"].startswith(expected)
    assert evaluations[0]["grader_attempts"] == 3
    assert evaluations[0]["criteria"] == []
    assert len(agent_model.calls) == 1
    assert result["messages"][-1].content == "draft 1"


def test_client_errors_are_not_retried():
    with FaultServer([("status", (401, {}))]) as server:
        result, evaluations, _ = run_loop(server)
    assert result["_rubric_status"] == "grader_error"
    assert evaluations[0]["explanation"].startswith("OpenAIAuthenticationError (HTTP 401)")
    assert len(server.requests) == 1


def test_invalid_structured_output_is_corrected_in_the_same_pass():
    broken = {"criteria": [{"name": "has a title"}], "result": "maybe"}
    with FaultServer([("ok", broken), ("ok", "{not json"), ("ok", GOOD)]) as server:
        result, evaluations, agent_model = run_loop(server)
    assert result["_rubric_status"] == "satisfied"
    assert len(server.requests) == 3
    # the grader was told what was wrong with its answer
    feedback = server.requests[1]["messages"][-1]
    assert feedback["role"] == "tool" and "rejected" in feedback["content"]
    assert len(agent_model.calls) == 1


def test_a_self_contradicting_result_is_decided_by_the_criteria_without_a_re_ask():
    """Over HTTP, as a real server answers: a `satisfied` result beside a failed criterion
    is not accepted as-is, and not re-asked either (finding 6): the criteria decide, in
    the one request the pass made."""
    contradiction = {
        "criteria": [
            {"name": "has a title", "passed": True},
            {"name": "cites a source", "passed": False, "gap": "No source."},
        ],
        "explanation": "Fine.",
        "result": "satisfied",
    }
    with FaultServer([("ok", contradiction), ("ok", GOOD)]) as server:
        result, evaluations, _ = run_loop(server)
    assert [e["result"] for e in evaluations] == ["needs_revision", "satisfied"]
    assert [e["grader_attempts"] for e in evaluations] == [1, 1]
    assert len(server.requests) == 2
    assert "said 'satisfied' although 'cites a source' failed" in evaluations[0]["explanation"]
    assert result["_rubric_status"] == "satisfied"


def test_a_grader_that_never_answers_validly_is_a_grader_error():
    with FaultServer([("ok", "{not json")] * 60) as server:
        result, evaluations, _ = run_loop(server)
    assert result["_rubric_status"] == "grader_error"
    assert (
        "did not produce a valid GraderResponse after 3 corrections"
        in (evaluations[0]["explanation"])
    )
    assert len(server.requests) == 4
    assert evaluations[0]["grader_input_tokens"] == 4 * 120


def test_verdict_missing_criteria_is_retried_once_then_trusted_only_for_what_it_covers():
    partial = {
        "criteria": [{"name": "has a title", "passed": True}],
        "explanation": "Title present.",
        "result": "satisfied",
    }
    with FaultServer([("ok", partial), ("ok", partial), ("ok", GOOD)]) as server:
        result, evaluations, _ = run_loop(server)
    first = evaluations[0]
    assert first["grader_attempts"] == 2
    correction = server.requests[1]["messages"][-1]["content"]
    assert "did not account for 1 checklist item(s): 'cites a source'" in correction
    assert first["result"] == "needs_revision"
    assert first["criteria"][1]["passed"] is False
    assert result["_rubric_status"] == "satisfied"


# -- bounded waits and honest counts ----------------------------------------------------


@pytest.fixture
def openai_env(monkeypatch):
    """The documented grader path, `model="openai:..."`, pointed at a local endpoint."""

    def point_at(base_url: str) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        monkeypatch.setenv("OPENAI_API_BASE", base_url)

    return point_at


def run_in_thread(agent, state, *, wait_s: float = 60.0):
    """Invoke in a daemon thread; `None` if it is still waiting after `wait_s` (a hang)."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=agent.invoke(state)), daemon=True)
    thread.start()
    thread.join(wait_s)
    return box.get("result")


def string_spec_loop(**kwargs):
    agent_model = ReplayChatModel(turns=[AIMessage(f"draft {i}") for i in range(1, 6)])
    evaluations: list[dict] = []
    kwargs.setdefault("retry", RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05))
    middleware = RubricMiddleware(
        model="openai:gpt-4.1-mini", on_evaluation=evaluations.append, **kwargs
    )
    agent = create_agent(agent_model, middleware=[middleware])
    return agent, evaluations


def test_a_grader_endpoint_that_never_answers_ends_in_grader_error_not_a_hang(openai_env):
    with SilentServer() as server:
        openai_env(server.base_url)
        agent, evaluations = string_spec_loop(
            limits=PassLimits(timeout_s=0.5),
            retry=RetryPolicy(attempts=2, initial_delay_s=0.01, max_delay_s=0.05),
        )
        result = run_in_thread(agent, {"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
        assert result is not None, "the grader call never returned"
        assert len(server.connections) == 2, "one request per attempt, no hidden client retries"
    assert result["_rubric_status"] == "grader_error"
    assert evaluations[0]["explanation"].startswith("OpenAITimeoutError")
    assert evaluations[0]["grader_attempts"] == 2


def test_the_pass_budget_stops_retrying_and_says_so(openai_env):
    with SilentServer() as server:
        openai_env(server.base_url)
        agent, evaluations = string_spec_loop(
            limits=PassLimits(timeout_s=0.4, budget_s=1.0),
            retry=RetryPolicy(attempts=10, initial_delay_s=0.01, max_delay_s=0.05),
        )
        result = run_in_thread(agent, {"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
        assert result is not None, "the grader call never returned"
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert "time budget of 1 s per pass ran out" in explanation, explanation
    assert evaluations[0]["grader_attempts"] < 10


def test_an_async_pass_is_cancelled_when_its_budget_runs_out():
    with SilentServer() as server:
        # the client's own timeout is longer than the pass's whole budget
        grader = ChatOpenAI(
            model="m", base_url=server.base_url, api_key="sk-test", timeout=300, max_retries=0
        )
        agent_model = ReplayChatModel(turns=[AIMessage("draft 1")])
        evaluations: list[dict] = []
        middleware = RubricMiddleware(
            model=grader, on_evaluation=evaluations.append, limits=PassLimits(budget_s=0.5)
        )
        agent = create_agent(agent_model, middleware=[middleware])

        def run():
            return asyncio.run(
                agent.ainvoke({"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
            )

        box: dict = {}
        thread = threading.Thread(target=lambda: box.update(result=run()), daemon=True)
        thread.start()
        thread.join(60)
        assert "result" in box, "the async grader call never returned"
    assert box["result"]["_rubric_status"] == "grader_error"
    assert "time budget of 0.5 s per pass ran out" in evaluations[0]["explanation"]


@pytest.mark.parametrize("given_as", ["string", "ChatOpenAI(max_retries=2)"])
def test_grader_attempts_count_every_request_the_server_saw(given_as, openai_env):
    with FaultServer([("status", (500, {}))] * 12) as server:
        if given_as == "string":
            openai_env(server.base_url)
            agent, evaluations = string_spec_loop(
                retry=RetryPolicy(attempts=3, initial_delay_s=0.01, max_delay_s=0.05)
            )
            agent.invoke({"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
        else:
            grader = ChatOpenAI(
                model="m", base_url=server.base_url, api_key="sk-test", max_retries=2
            )
            agent_model = ReplayChatModel(turns=[AIMessage("draft 1")])
            evaluations = []
            middleware = RubricMiddleware(
                model=grader,
                on_evaluation=evaluations.append,
                retry=RetryPolicy(attempts=3, initial_delay_s=0.01),
            )
            create_agent(agent_model, middleware=[middleware]).invoke(
                {"messages": [HumanMessage("Write it.")], "rubric": RUBRIC}
            )
            assert grader.max_retries == 2, "the caller's model object is left as it was"
    assert evaluations[0]["result"] == "grader_error"
    assert evaluations[0]["grader_attempts"] == 3
    assert len(server.requests) == 3


def test_an_anthropic_grader_object_sends_no_hidden_retries():
    from langchain_anthropic import ChatAnthropic

    with FaultServer([("status", (500, {}))] * 12) as server:
        grader = ChatAnthropic(
            model="claude-test", base_url=server.base_url.removesuffix("/v1"), api_key="sk-test"
        )
        # its client is built already (a copy must not reuse it)
        assert grader._client.max_retries == 2
        agent_model = ReplayChatModel(turns=[AIMessage("draft 1")])
        evaluations: list[dict] = []
        middleware = RubricMiddleware(
            model=grader,
            on_evaluation=evaluations.append,
            retry=RetryPolicy(attempts=3, initial_delay_s=0.01),
        )
        create_agent(agent_model, middleware=[middleware]).invoke(
            {"messages": [HumanMessage("Write it.")], "rubric": RUBRIC}
        )
    assert evaluations[0]["result"] == "grader_error"
    assert evaluations[0]["grader_attempts"] == 3
    assert len(server.requests) == 3
    assert grader.max_retries == 2, "the caller's model object is left as it was"
    assert middleware.grader.model.default_request_timeout == 120.0


def test_passed_as_a_string_is_rejected_and_corrected():
    yes = {
        "criteria": [
            {"name": "has a title", "passed": "yes"},
            {"name": "cites a source", "passed": "yes"},
        ],
        "explanation": "Fine.",
        "result": "satisfied",
    }
    with FaultServer([("ok", yes), ("ok", GOOD)]) as server:
        result, evaluations, _ = run_loop(server)
    assert len(server.requests) == 2
    feedback = server.requests[1]["messages"][-1]
    assert feedback["role"] == "tool" and "valid boolean" in feedback["content"]
    assert result["_rubric_status"] == "satisfied"


def test_an_empty_choices_list_is_a_clear_grader_error():
    empty = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
    with FaultServer([("raw", empty)] * 3) as server:
        result, evaluations, _ = run_loop(server)
    assert result["_rubric_status"] == "grader_error"
    explanation = evaluations[0]["explanation"]
    assert explanation.startswith("EmptyReplyError"), explanation
    assert "empty `choices` list" in explanation
    assert len(server.requests) == 1, "an empty reply is not retried as if transient"


def test_the_verdict_schema_sent_fixes_every_checklist_item_in_order():
    with FaultServer([("ok", GOOD)]) as server:
        run_loop(server)
    (tool,) = [t for t in server.requests[0]["tools"] if t["function"]["name"] == "GraderResponse"]
    criteria = tool["function"]["parameters"]["properties"]["criteria"]
    assert criteria["minItems"] == criteria["maxItems"] == 2
    names = [
        {branch["properties"]["name"]["enum"][0] for branch in entry["anyOf"]}
        for entry in criteria["prefixItems"]
    ]
    assert names == [{"has a title"}, {"cites a source"}]
    failing = [
        branch
        for branch in criteria["prefixItems"][1]["anyOf"]
        if branch["properties"]["passed"]["enum"] == [False]
    ]
    assert "gap" in failing[0]["required"]
    assert failing[0]["properties"]["gap"]["minLength"] == 1
