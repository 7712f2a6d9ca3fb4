"""Offline demo: a deep agent revises find_duplicates until a real pytest suite passes.

Both models here are replay models: they replay scripted turns and are not language
models. What is real: the deep agent graph and its file tools, RubricMiddleware's loop,
and the grader's `run_test_suite` tool, which runs the pytest suite (test_unhashable
included) against the agent's code in a sandboxed subprocess with a timeout. The scripted
grader decides its verdict from what the tests really report.

Run it with:

    python examples/find_duplicates.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from rubric_core import STATUS_DESCRIPTIONS, RubricMiddleware
from rubric_core.providers import ReplayChatModel, load_scenario, resolve_model, tool_call_turn
from rubric_core.tools import get_tools

_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def scripted_agent(scenario: dict) -> ReplayChatModel:
    """The agent's script: write each draft to /solution.py, then present it."""
    turns = []
    for turn in scenario["agent_turns"]:
        text = turn["content"] if isinstance(turn["content"], str) else "\n".join(turn["content"])
        code = _FENCE.search(text).group(1)
        turns.append(tool_call_turn("write_file", {"file_path": "/solution.py", "content": code}))
        turns.append(AIMessage(text))
    return ReplayChatModel(scenario="find_duplicates-deep-agent", turns=turns)


def print_pass(evaluation: dict) -> None:
    print(f"\n--- grading pass {evaluation['iteration']}: {evaluation['result']}")
    for criterion in evaluation["criteria"]:
        mark = "PASS" if criterion["passed"] else "FAIL"
        print(f"  [{mark}] {criterion['name']}")
        if not criterion["passed"]:
            print(f"         gap: {criterion['gap']}")
    print(f"  explanation: {evaluation['explanation']}")


def main() -> int:
    scenario = load_scenario("find_duplicates")
    grader_model = resolve_model("replay:find_duplicates", role="grader")
    agent = create_deep_agent(
        model=scripted_agent(scenario),
        system_prompt="You write small, well-tested Python functions.",
        middleware=[
            RubricMiddleware(
                model=grader_model,
                tools=get_tools(["run_test_suite"]),
                max_iterations=3,
                on_evaluation=print_pass,
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "find-duplicates-demo"}}
    print("Replay models: scripted turns, not a language model. The test runs are real.")
    print(f"Rubric:\n{scenario['rubric']}")
    result = agent.invoke(
        {"messages": [HumanMessage(scenario["input"])], "rubric": scenario["rubric"]}, config
    )
    tool_results = [m.content for m in grader_model.calls[-1] if getattr(m, "type", "") == "tool"]
    status = result["_rubric_status"]
    print(f"\nFinal status: {status}: {STATUS_DESCRIPTIONS[status]}")
    print(f"Last test run:\n{tool_results[-1] if tool_results else '(none)'}")
    print(f"\nFiles the deep agent wrote: {sorted(result.get('files', {}))}")
    return 0 if status == "satisfied" else 1


if __name__ == "__main__":
    raise SystemExit(main())
