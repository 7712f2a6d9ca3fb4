"""Side by side: our RubricMiddleware against deepagents' on the same create_agent graph.

Both run with the same scripted (replay) models, so every difference is the middleware's.
Figures are ratios ours/theirs measured in one run:

1. loop overhead per run: zero-latency models, a needs_revision pass then a satisfied one;
   median over interleaved runs (ours, theirs, ours, ...), so drift hits both alike;
2. the grader's input on a long transcript (60 messages, 20 kB tool outputs): its size,
   and whether the original request and the final answer reach the grader whole;
3. prompt-cache reuse across passes: on the same 60-message transcript graded three
   times (needs_revision, needs_revision, satisfied; the agent revises its final answer
   in between), the share of pass N+1's grader input that is a byte prefix of pass N's;
4. peak memory (tracemalloc) of 1,000 checkpointed runs, one thread each, sharing one
   InMemorySaver (one "thread family"), and what the checkpointer retains afterwards.

Usage:
    python bench/bench_reference.py [--runs 200] [--memory-runs 1000] [--out bench/results/reference.md]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

from deepagents.middleware.rubric import RubricMiddleware as TheirMiddleware  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from rubric_core import RubricMiddleware as OurMiddleware  # noqa: E402
from rubric_core.providers import ReplayChatModel, tool_call_turn, verdict_turn  # noqa: E402

RUBRIC = "- has a title\n- cites a source"
NAMES = ["has a title", "cites a source"]


def _verdicts():
    return [
        verdict_turn(
            "needs_revision", [(NAMES[0], True), (NAMES[1], False, "Add a source.")], "No source."
        ),
        verdict_turn("satisfied", [(NAMES[0], True), (NAMES[1], True)], "Done."),
    ]


def build(which: str, *, agent_turns, grader_turns, tools=(), checkpointer=None, cycle=False):
    agent_model = ReplayChatModel(scenario="agent", turns=agent_turns, cycle=cycle)
    grader_model = ReplayChatModel(scenario="grader", turns=grader_turns, cycle=cycle)
    if which == "ours":
        middleware = OurMiddleware(model=grader_model, max_iterations=3)
    else:
        middleware = TheirMiddleware(model=grader_model, max_iterations=3)
    agent = create_agent(
        agent_model, tools=list(tools), middleware=[middleware], checkpointer=checkpointer
    )
    return agent, agent_model, grader_model


def status_of(agent, result, config=None):
    if "_rubric_status" in result:
        return result["_rubric_status"]
    return agent.get_state(config).values.get("_rubric_status")


def bench_overhead(runs: int) -> dict:
    agents = {
        which: build(
            which,
            agent_turns=[AIMessage("draft 1"), AIMessage("draft 2")],
            grader_turns=_verdicts(),
            cycle=True,
        )
        for which in ("ours", "theirs")
    }
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for which, (agent, _, _) in agents.items():  # warm-up, and a check both loop twice
        config = {"configurable": {"thread_id": "warm"}}
        result = agent.invoke({"messages": [HumanMessage("go")], "rubric": RUBRIC}, config)
        assert len(result["messages"]) == 4, which
    for i in range(runs):
        order = ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")
        for which in order:
            agent, agent_model, grader_model = agents[which]
            agent_model.reset()
            grader_model.reset()
            state = {"messages": [HumanMessage("go")], "rubric": RUBRIC}
            start = time.perf_counter()
            agent.invoke(state)
            times[which].append(time.perf_counter() - start)
    ours, theirs = statistics.median(times["ours"]), statistics.median(times["theirs"])
    return {"ours_ms": ours * 1e3, "theirs_ms": theirs * 1e3, "ratio": ours / theirs}


def bench_payload() -> dict:
    request = "REQUEST-START " + "Please summarise these pages. " * 300 + "REQUEST-END"
    final = "FINAL-START " + "The summary says this. " * 400 + "FINAL-END"

    @tool
    def fetch(page: int) -> str:
        """Fetch a page."""
        return f"page {page}: " + ("lorem ipsum " * 1_700)

    agent_turns = [tool_call_turn("fetch", {"page": i}) for i in range(29)] + [AIMessage(final)]
    out = {}
    for which in ("ours", "theirs"):
        agent, _, grader_model = build(
            which,
            agent_turns=agent_turns,
            grader_turns=[_verdicts()[1]],
            tools=[fetch],
        )
        result = agent.invoke({"messages": [HumanMessage(request)], "rubric": RUBRIC})
        assert len(result["messages"]) == 60, len(result["messages"])
        received = grader_model.calls[0]
        text = "\n".join(str(m.content) for m in received)
        out[which] = {
            "chars": len(text),
            "request_whole": request in text,
            "final_whole": final in text,
            "tool_outputs_seen": sum(f"page {i}:" in text for i in range(29)),
        }
    out["ratio"] = out["ours"]["chars"] / out["theirs"]["chars"]
    return out


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def bench_prefix() -> dict:
    request = "REQUEST-START " + "Please summarise these pages. " * 300 + "REQUEST-END"

    @tool
    def fetch(page: int) -> str:
        """Fetch a page."""
        return f"page {page}: " + ("lorem ipsum " * 1_700)

    finals = [f"FINAL-{n} " + f"The summary, version {n}, says this. " * 250 for n in (1, 2, 3)]
    agent_turns = [tool_call_turn("fetch", {"page": i}) for i in range(29)]
    agent_turns += [AIMessage(final) for final in finals]
    grader_turns = [_verdicts()[0], _verdicts()[0], _verdicts()[1]]
    out = {}
    for which in ("ours", "theirs"):
        agent, _, grader_model = build(
            which, agent_turns=agent_turns, grader_turns=grader_turns, tools=[fetch]
        )
        result = agent.invoke({"messages": [HumanMessage(request)], "rubric": RUBRIC})
        assert len(grader_model.calls) == 3, (which, len(grader_model.calls))
        assert len(result["messages"]) >= 60, len(result["messages"])
        inputs = ["\n".join(str(m.content) for m in call) for call in grader_model.calls]
        shares = [
            _common_prefix(inputs[n], inputs[n + 1]) / len(inputs[n + 1])
            for n in range(len(inputs) - 1)
        ]
        out[which] = {"shares": shares, "chars": [len(text) for text in inputs]}
    return out


def bench_memory(runs: int) -> dict:
    out = {}
    for which in ("ours", "theirs"):
        gc.collect()
        saver = InMemorySaver()
        agent, agent_model, grader_model = build(
            which,
            agent_turns=[AIMessage("draft 1"), AIMessage("draft 2")],
            grader_turns=_verdicts(),
            checkpointer=saver,
            cycle=True,
        )
        tracemalloc.start()
        for i in range(runs):
            agent_model.reset()
            grader_model.reset()
            config = {"configurable": {"thread_id": f"family/run-{i}"}}
            agent.invoke({"messages": [HumanMessage(f"go {i}")], "rubric": RUBRIC}, config)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        last = agent.get_state({"configurable": {"thread_id": f"family/run-{runs - 1}"}})
        assert last.values["_rubric_status"] == "satisfied", which
        out[which] = {"peak_mb": peak / 2**20, "retained_mb": current / 2**20}
        del agent, saver
    out["peak_ratio"] = out["ours"]["peak_mb"] / out["theirs"]["peak_mb"]
    out["retained_ratio"] = out["ours"]["retained_mb"] / out["theirs"]["retained_mb"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--memory-runs", type=int, default=1000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "reference.md"))
    args = parser.parse_args()

    overhead = bench_overhead(args.runs)
    payload = bench_payload()
    prefix = bench_prefix()
    memory = bench_memory(args.memory_runs)

    yes = {True: "yes", False: "no"}
    lines = [
        "| measure | ours | deepagents | ours/theirs |",
        "|---|---|---|---|",
        f"| loop overhead per run, median of {args.runs} interleaved (ms) | "
        f"{overhead['ours_ms']:.2f} | {overhead['theirs_ms']:.2f} | {overhead['ratio']:.2f} |",
        f"| grader input on a 60-message transcript (chars) | {payload['ours']['chars']:,} | "
        f"{payload['theirs']['chars']:,} | {payload['ratio']:.2f} |",
        f"| original request reaches the grader whole | {yes[payload['ours']['request_whole']]} | "
        f"{yes[payload['theirs']['request_whole']]} | |",
        f"| final answer reaches the grader whole | {yes[payload['ours']['final_whole']]} | "
        f"{yes[payload['theirs']['final_whole']]} | |",
        f"| tool outputs represented (of 29) | {payload['ours']['tool_outputs_seen']} | "
        f"{payload['theirs']['tool_outputs_seen']} | |",
        *(
            f"| grader input of pass {n + 2} that is a byte prefix of pass {n + 1}'s "
            f"(60-message transcript) | {prefix['ours']['shares'][n]:.0%} | "
            f"{prefix['theirs']['shares'][n]:.0%} | |"
            for n in range(2)
        ),
        f"| peak memory, {args.memory_runs} checkpointed runs (MiB) | "
        f"{memory['ours']['peak_mb']:.1f} | {memory['theirs']['peak_mb']:.1f} | "
        f"{memory['peak_ratio']:.2f} |",
        f"| memory retained by the checkpointer afterwards (MiB) | "
        f"{memory['ours']['retained_mb']:.1f} | {memory['theirs']['retained_mb']:.1f} | "
        f"{memory['retained_ratio']:.2f} |",
    ]
    table = "\n".join(lines)
    command = "python bench/bench_reference.py " + " ".join(sys.argv[1:])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(f"`{command.strip()}`\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
