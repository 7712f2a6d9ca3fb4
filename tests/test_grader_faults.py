"""Grader faults over real HTTP: LangChain's OpenAI client against a fault-injecting server.

The server speaks the OpenAI chat-completions protocol on loopback and plays a queue of
behaviours: a good verdict, a connection reset mid-response, a hang past the client's
timeout, HTTP 429 with Retry-After, HTTP 500, and verdicts that are invalid, contradict
themselves or skip criteria. The agent is a replay model, so any re-run would show.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from rubric_core import RubricMiddleware
from rubric_core.models import ReplayChatModel

RUBRIC = "- has a title\n- cites a source"
GOOD = {
    "criteria": [
        {"name": "has a title", "passed": True},
        {"name": "cites a source", "passed": True},
    ],
    "explanation": "Both criteria are met.",
    "result": "satisfied",
}


def completion(arguments: dict | str) -> bytes:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return json.dumps(
        {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fault-server",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{time.monotonic_ns()}",
                                "type": "function",
                                "function": {"name": "GraderResponse", "arguments": args},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
        }
    ).encode()


class FaultServer:
    """An OpenAI-compatible endpoint that plays scripted behaviours, one per request."""

    def __init__(self, behaviours: list[tuple[str, object]]):
        self.behaviours = list(behaviours)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append(json.loads(body or b"{}"))
                kind, value = server.behaviours.pop(0) if server.behaviours else ("ok", GOOD)
                if kind == "ok":
                    self._send(200, completion(value))
                elif kind == "status":
                    status, headers = value
                    payload = json.dumps({"error": {"message": f"fault {status}"}}).encode()
                    self._send(status, payload, headers)
                elif kind == "reset":
                    # headers and half a body, then an RST instead of the rest
                    payload = completion(GOOD)
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                elif kind == "hang":
                    time.sleep(float(value))
                    self.close_connection = True

            def _send(self, status, payload, headers=None):
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, val in (headers or {}).items():
                    self.send_header(key, val)
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_loop(server: FaultServer, *, timeout: float = 5.0, **kwargs):
    grader = ChatOpenAI(
        model="fault-server",
        base_url=server.base_url,
        api_key="not-needed",
        timeout=timeout,
        max_retries=0,
    )
    agent_model = ReplayChatModel(turns=[AIMessage(f"draft {i}") for i in range(1, 6)])
    evaluations: list[dict] = []
    kwargs.setdefault("retry_initial_delay_s", 0.01)
    kwargs.setdefault("retry_max_delay_s", 0.05)
    agent = create_agent(
        agent_model,
        middleware=[RubricMiddleware(model=grader, on_evaluation=evaluations.append, **kwargs)],
    )
    result = agent.invoke({"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
    return result, evaluations, agent_model


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
        result, evaluations, agent_model = run_loop(server, timeout=1.0, retry_attempts=3)
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


def test_self_contradicting_verdict_is_not_accepted_as_is():
    contradiction = {
        "criteria": [
            {"name": "has a title", "passed": True},
            {"name": "cites a source", "passed": False, "gap": "No source."},
        ],
        "explanation": "Fine.",
        "result": "satisfied",
    }
    fixed = dict(contradiction, result="needs_revision")
    with FaultServer([("ok", contradiction), ("ok", fixed), ("ok", GOOD)]) as server:
        result, evaluations, _ = run_loop(server)
    assert [e["result"] for e in evaluations] == ["needs_revision", "satisfied"]
    assert "these criteria failed: cites a source" in server.requests[1]["messages"][-1]["content"]
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
