"""Grader requests over real loopback HTTP: what `grader_attempts` counts, and a server
that drips its reply cannot hold a call past its timeout or a pass past its budget."""

from __future__ import annotations

import pytest

from tests.test_grader_faults import GOOD, FaultServer, run_loop

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
