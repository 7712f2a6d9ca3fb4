"""The rubric loop against a real OpenAI-compatible server: llama.cpp serving SmolLM2-135M."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from rubric_core import RetryPolicy
from rubric_core.middleware import RubricMiddleware
from rubric_core.rubric import parse_rubric
from rubric_core.schema import (
    RUBRIC_GRADER_MESSAGE_SOURCE,
    TERMINAL_STATUSES,
    GraderResponse,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

# A 135M model judges badly and sometimes babbles: these tests assert only what must hold
# whatever it says. Every HTTP call has a client timeout, and all the calls of one test
# share a model-time budget that ends well inside its pytest-timeout: a loaded machine
# makes a test fail with "budget spent" rather than be killed half-way, and the server
# (which stops generating when a client hangs up) is free for the next test at once.
_TEST_TIMEOUT_S = 420
_MODEL_BUDGET_S = 330
"""Model time all the calls of one test may take together."""
_CALL_TIMEOUT_S = 180
"""Longest single call: a whole verdict from the 135M model took 88 s at load 12."""
pytestmark = [pytest.mark.llm_server, pytest.mark.timeout(_TEST_TIMEOUT_S)]

_REPO = Path(__file__).resolve().parents[1]
_SCRIPT = _REPO / ".ci" / "llm_server.sh"
_SKIP_REASON = (
    "RUBRIC_STUDIO_LLM_BASE_URL is unset: these tests need the local llama.cpp server, which "
    "CI starts with .ci/llm_server.sh. Locally, run `.ci/llm_server.sh setup` and "
    "`.ci/llm_server.sh start STATE` and export the URL it prints, or set "
    "RUBRIC_STUDIO_LLM_GGUF and RUBRIC_STUDIO_LLM_PYTHON to let the tests start one."
)
_RUBRIC = "Names the capital of France\nIs a single sentence"
_INPUT = "What is the capital of France?"
_AGENT_PROMPT = "You are a helpful assistant. Answer in one short sentence."
_VERDICTS = {"satisfied", "needs_revision", "failed"}
# Statuses a run may end in. "error" is left out: it means the agent's own model failed,
# and against a healthy local server it must not.
_RUN_END_STATUSES = set(TERMINAL_STATUSES)


@dataclass(frozen=True)
class Endpoint:
    """Where the server listens and the model name it serves."""

    base_url: str
    model: str


def _served_model(base_url: str) -> str:
    named = os.environ.get("RUBRIC_STUDIO_LLM_MODEL", "").strip()
    if named:
        return named
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            models = json.load(response)["data"]
    except (OSError, ValueError, KeyError) as exc:
        pytest.fail(f"the server at {base_url} did not list its models at {url}: {exc}")
    if not models:
        pytest.fail(f"the server at {base_url} serves no model ({url} listed none)")
    return str(models[0]["id"])


def _read_state(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@pytest.fixture(scope="module")
def llm_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """The server CI started, or one started here for the module and stopped after it.

    With RUBRIC_STUDIO_LLM_BASE_URL set, that server is used as is. Otherwise, when
    RUBRIC_STUDIO_LLM_GGUF (a model file) and RUBRIC_STUDIO_LLM_PYTHON (a python with
    llama-cpp-python[server]) are set, `.ci/llm_server.sh start` runs it on a free
    loopback port and `stop` ends it afterwards, also when a test fails.
    """
    base_url = os.environ.get("RUBRIC_STUDIO_LLM_BASE_URL", "").strip()
    if base_url:
        yield Endpoint(base_url.rstrip("/"), _served_model(base_url))
        return
    gguf = os.environ.get("RUBRIC_STUDIO_LLM_GGUF", "").strip()
    python = os.environ.get("RUBRIC_STUDIO_LLM_PYTHON", "").strip()
    if not (gguf and python):
        pytest.skip(_SKIP_REASON)
    state = tmp_path_factory.mktemp("llm_server") / "state"
    env = {**os.environ, "RUBRIC_STUDIO_LLM_GGUF": gguf, "RUBRIC_STUDIO_LLM_PYTHON": python}
    try:
        started = subprocess.run(
            ["bash", str(_SCRIPT), "start", str(state)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if started.returncode != 0:
            pytest.fail(f"could not start the llama.cpp server:\n{started.stderr[-3000:]}")
        values = _read_state(state)
        base_url = values["RUBRIC_STUDIO_LLM_BASE_URL"]
        yield Endpoint(base_url, values.get("RUBRIC_STUDIO_LLM_MODEL") or _served_model(base_url))
    finally:
        subprocess.run(
            ["bash", str(_SCRIPT), "stop", str(state)],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )


class ModelClock:
    """One test's model-time budget, shared by every HTTP call its models make."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.deadline = time.monotonic() + budget_s

    def _timeout(self, request: httpx.Request) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining < 1:
            msg = f"this test's model-time budget of {self.budget_s:g} s is spent"
            raise httpx.ReadTimeout(msg, request=request)
        request.extensions["timeout"] = httpx.Timeout(min(_CALL_TIMEOUT_S, remaining)).as_dict()

    async def _atimeout(self, request: httpx.Request) -> None:
        self._timeout(request)

    def clients(self) -> dict[str, Any]:
        return {
            "http_client": httpx.Client(event_hooks={"request": [self._timeout]}),
            "http_async_client": httpx.AsyncClient(event_hooks={"request": [self._atimeout]}),
        }


@pytest.fixture
def model_clock() -> ModelClock:
    return ModelClock(_MODEL_BUDGET_S)


def _chat(endpoint: Endpoint, clock: ModelClock, *, max_tokens: int) -> ChatOpenAI:
    # max_tokens keeps a rambling 135M model quick; the grader's budget leaves room for a
    # full GraderResponse (its arguments are grammar-constrained JSON).
    return ChatOpenAI(
        base_url=endpoint.base_url,
        api_key="not-needed",
        model=endpoint.model,
        timeout=_CALL_TIMEOUT_S,
        max_retries=0,
        max_tokens=max_tokens,
        **clock.clients(),
    )


def _agent_model(endpoint: Endpoint, clock: ModelClock) -> ChatOpenAI:
    return _chat(endpoint, clock, max_tokens=96)


def _grader_model(endpoint: Endpoint, clock: ModelClock) -> ChatOpenAI:
    return _chat(endpoint, clock, max_tokens=1024)


def _assert_pass_recorded(
    evaluation: dict[str, Any], criteria: Sequence[str], *, streamed: bool = False
) -> None:
    """A pass is a verdict with its criteria, or a grader_error that says why.

    Args:
        evaluation: The pass as the state, the callback or the store has it.
        criteria: The rubric's criteria.
        streamed: The grader's model streamed: llama.cpp's server sends no usage on a
            stream (it ignores `stream_options.include_usage`), so no token counts.
    """
    result = evaluation["result"]
    assert result in {*_VERDICTS, "grader_error"}, evaluation
    assert evaluation["grader_attempts"] >= 1, evaluation
    if result == "grader_error":
        assert evaluation["status"] == "grader_error", evaluation
        assert evaluation["criteria"] == [], evaluation
        assert evaluation["explanation"].strip(), "a grader_error must carry its cause"
        return
    if not streamed:
        # The verdict came back over HTTP through the GraderResponse tool: the server counted it.
        assert evaluation["grader_input_tokens"] > 0, evaluation
        assert evaluation["grader_output_tokens"] > 0, evaluation
    verdicts = evaluation["criteria"]
    for verdict in verdicts:
        assert isinstance(verdict["passed"], bool), verdict
        assert verdict["name"].strip(), verdict
        if not verdict["passed"]:
            assert (verdict.get("gap") or "").strip(), f"failing criterion without a gap: {verdict}"
    if result == "failed":
        return  # the grader judged the rubric itself; it may list any criteria, or none
    # satisfied / needs_revision: one verdict per rubric criterion, under the rubric's names.
    assert sorted(v["name"] for v in verdicts) == sorted(criteria), evaluation
    passed = [v["passed"] for v in verdicts]
    if result == "satisfied":
        assert all(passed), evaluation
    else:
        assert not all(passed), evaluation


def _assert_loop_consistent(
    evaluations: Sequence[dict[str, Any]], final_status: str, max_iterations: int
) -> None:
    assert final_status in _RUN_END_STATUSES, final_status
    assert 1 <= len(evaluations) <= max_iterations, evaluations
    assert [e["iteration"] for e in evaluations] == list(range(len(evaluations)))
    assert len({e["grading_run_id"] for e in evaluations}) == 1
    for earlier in evaluations[:-1]:
        assert earlier["status"] == "needs_revision", earlier
    assert evaluations[-1]["status"] == final_status


def _tool_call(message: AIMessage) -> dict[str, Any]:
    assert len(message.tool_calls) == 1, (message.tool_calls, message.invalid_tool_calls)
    call = message.tool_calls[0]
    assert call["name"] == "GraderResponse", call
    return call["args"]


def _assert_verdict_shape(args: dict[str, Any]) -> None:
    """What the server's JSON-schema grammar guarantees, whatever the model thinks."""
    assert isinstance(args["criteria"], list), args
    assert isinstance(args["explanation"], str), args
    assert args["result"] in _VERDICTS, args
    for criterion in args["criteria"]:
        assert isinstance(criterion["name"], str), criterion
        assert isinstance(criterion["passed"], bool), criterion


_GRADER_MESSAGES = [
    SystemMessage("You grade an answer against a checklist. Answer with the GraderResponse tool."),
    HumanMessage(
        "Checklist:\n1. Names the capital of France\n\n"
        "Answer to grade: The capital of France is Paris."
    ),
]


def test_grader_verdict_arrives_as_a_graderresponse_tool_call(
    llm_endpoint: Endpoint, model_clock: ModelClock
) -> None:
    # tool_choice="any" is what create_agent's ToolStrategy sends for the grader; the
    # stock llama.cpp handler answered it with HTTP 500 before .ci/llm_server.sh's launcher.
    grader = _grader_model(llm_endpoint, model_clock).bind_tools(
        [GraderResponse], tool_choice="any"
    )

    _assert_verdict_shape(_tool_call(grader.invoke(_GRADER_MESSAGES)))


def test_streamed_grader_verdict_names_its_tool_once(
    llm_endpoint: Endpoint, model_clock: ModelClock
) -> None:
    grader = _grader_model(llm_endpoint, model_clock).bind_tools(
        [GraderResponse], tool_choice="any"
    )

    chunks = list(grader.stream(_GRADER_MESSAGES))
    message = chunks[0]
    for chunk in chunks[1:]:
        message = message + chunk

    assert isinstance(message, AIMessageChunk)
    _assert_verdict_shape(_tool_call(message))


def test_rubric_loop_through_create_agent_against_the_server(
    llm_endpoint: Endpoint, model_clock: ModelClock
) -> None:
    criteria = parse_rubric(_RUBRIC)
    seen: list[dict[str, Any]] = []
    agent = create_agent(
        _agent_model(llm_endpoint, model_clock),
        tools=[],
        system_prompt=_AGENT_PROMPT,
        middleware=[
            RubricMiddleware(
                model=_grader_model(llm_endpoint, model_clock),
                max_iterations=2,
                on_evaluation=seen.append,
                retry=RetryPolicy(attempts=2, initial_delay_s=0.5),
            )
        ],
        checkpointer=InMemorySaver(),
    )

    state = agent.invoke(
        {"messages": [HumanMessage(_INPUT)], "rubric": _RUBRIC},
        {"configurable": {"thread_id": "llm-server-loop"}},
    )

    evaluations = state["_rubric_evaluations"]
    _assert_loop_consistent(evaluations, state["_rubric_status"], max_iterations=2)
    assert seen == evaluations, "on_evaluation must see every pass the state keeps"
    for evaluation in evaluations:
        _assert_pass_recorded(evaluation, criteria)
    messages = state["messages"]
    assert messages[0].content == _INPUT
    agent_answers = [m for m in messages if isinstance(m, AIMessage)]
    assert len(agent_answers) == len(evaluations), "one agent answer per grading pass"
    feedback = [m for m in messages if m.name == RUBRIC_GRADER_MESSAGE_SOURCE]
    revisions = [e for e in evaluations if e["status"] == "needs_revision"]
    assert len(feedback) == len(revisions)


async def test_single_pass_streams_its_events_asynchronously(
    llm_endpoint: Endpoint, model_clock: ModelClock
) -> None:
    # Async hooks, and "messages" stream mode, which makes the grader's ChatOpenAI stream
    # its tool call over SSE.
    criteria = parse_rubric(_RUBRIC)
    agent = create_agent(
        _agent_model(llm_endpoint, model_clock),
        tools=[],
        system_prompt=_AGENT_PROMPT,
        middleware=[
            RubricMiddleware(
                model=_grader_model(llm_endpoint, model_clock),
                max_iterations=1,
                retry=RetryPolicy(attempts=2),
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "llm-server-async"}}
    events: list[dict[str, Any]] = []

    async for mode, chunk in agent.astream(
        {"messages": [HumanMessage(_INPUT)], "rubric": _RUBRIC},
        config,
        stream_mode=["custom", "messages"],
    ):
        if mode == "custom" and isinstance(chunk, dict):
            events.append(chunk)

    state = (await agent.aget_state(config)).values
    evaluations = state["_rubric_evaluations"]
    _assert_loop_consistent(evaluations, state["_rubric_status"], max_iterations=1)
    (evaluation,) = evaluations
    _assert_pass_recorded(evaluation, criteria, streamed=True)
    assert evaluation["status"] != "needs_revision"  # one pass allowed: it must end the run
    kinds = [e.get("type") for e in events]
    assert kinds == ["rubric_evaluation_start", "rubric_evaluation_end"], events
    assert events[-1]["status"] == evaluation["status"]
    assert events[-1]["grading_run_id"] == evaluation["grading_run_id"]


def test_runner_stores_a_real_run(llm_endpoint: Endpoint, tmp_path: Path) -> None:
    from rubric_core.runs import RunSpec, run_once
    from rubric_core.store import Store

    db = tmp_path / "studio.db"
    store = Store(db)
    try:
        version = store.rubrics.save_version("capital", _RUBRIC)
        spec = RunSpec(
            rubric_version_id=version["id"],
            input=_INPUT,
            agent_model=llm_endpoint.model,
            grader_model=llm_endpoint.model,
            max_iterations=2,
            agent_system_prompt=_AGENT_PROMPT,
            base_url=llm_endpoint.base_url,
        )

        run = run_once(store, spec)
    finally:
        store.close()

    # Read everything back through a fresh handle: what was stored is what a user sees.
    store = Store(db)
    try:
        stored = store.runs.get(run["id"])
        evaluations = store.passes.of_run(run["id"])
        transcript = store.runs.transcript(run["id"])
    finally:
        store.close()

    assert stored["status"] != "error", f"the agent's model failed: {stored.get('error')}"
    _assert_loop_consistent(evaluations, stored["status"], max_iterations=2)
    for evaluation in evaluations:
        _assert_pass_recorded(evaluation, version["criteria"])
    assert stored["agent_model"] == llm_endpoint.model
    assert stored["grader_model"] == llm_endpoint.model
    assert transcript, "the run's transcript must be stored"
    assert [row["position"] for row in transcript] == sorted(row["position"] for row in transcript)
    assert _INPUT in transcript[0]["content"]
    grader_rows = [row for row in transcript if row["is_grader"]]
    revisions = [e for e in evaluations if e["status"] == "needs_revision"]
    assert len(grader_rows) == len(revisions)
    answers = [row for row in transcript if row["role"] in {"ai", "assistant"}]
    assert len(answers) == len(evaluations), transcript


def test_server_names_the_model_after_its_gguf_file(llm_endpoint: Endpoint) -> None:
    # Any GGUF used to be served as "smollm2-135m".
    gguf = (
        os.environ.get("RUBRIC_STUDIO_LLM_GGUF", "").strip()
        or subprocess.run(
            ["bash", str(_SCRIPT), "gguf"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    )
    url = llm_endpoint.base_url + "/models"
    with urllib.request.urlopen(url, timeout=30) as response:
        served = [model["id"] for model in json.load(response)["data"]]
    assert served == [Path(gguf).stem]
    assert llm_endpoint.model == Path(gguf).stem
