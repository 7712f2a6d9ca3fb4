"""What our loop's shape costs LangGraph: the floor graph with our state keys, our wrappers.

`bench/floor.py`'s graph (the run's steps, checkpointer, replay models, nothing of ours),
measured in this process against variants of itself: with the seven state keys of
`RubricState` written as the loop writes them (a pass record appended per pass, the
status, the pass count, and the attempt's keys at its start), with one or two
pass-through `wrap_model_call` middlewares (LangChain wraps each in a tracing span), and
with both. Rounds alternate the variants' order; CPU is `time.process_time` (all
threads), the figure is each variant's CPU over the floor's in the same round.

Usage:
    python bench/floor_shapes.py [--rounds 8] [--runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NotRequired

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain.agents.middleware.types import AgentState, OmitFromInput
from langchain_core.messages import HumanMessage

from rubric_core.providers import ReplayChatModel
from rubric_core.providers.replay.scenarios import scenario_turns
from rubric_core.runs.agents import RUN_DURABILITY
from rubric_core.runs.checkpoints import _open_sqlite

_SCENARIO = "needs_revision_then_satisfied"


def _append(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [*(left or []), *(right or [])]


class _LoopState(AgentState):  # type: ignore[type-arg]
    """`RubricState`'s keys, as the loop declares them."""

    rubric: NotRequired[str]
    _rubric_status: NotRequired[Annotated[str | None, OmitFromInput]]
    _rubric_iterations: NotRequired[Annotated[int, OmitFromInput]]
    _rubric_evaluations: NotRequired[Annotated[list[Any], OmitFromInput, _append]]
    _current_grading_run_id: NotRequired[Annotated[str, OmitFromInput]]
    _active_rubric: NotRequired[Annotated[str, OmitFromInput]]
    _rubric_best_iteration: NotRequired[Annotated[int | None, OmitFromInput]]


def _build(path: str, *, keys: bool, wrappers: int) -> Callable[[int], None]:
    def replay(role: Any) -> ReplayChatModel:
        turns = scenario_turns(_SCENARIO, role)
        return ReplayChatModel(scenario=f"shape-{role}", turns=turns, cycle=True, per_thread=True)

    agent_model, grader_model = replay("agent"), replay("grader")

    class Grade(AgentMiddleware):  # type: ignore[type-arg]
        if keys:
            state_schema = _LoopState

        @hook_config(can_jump_to=["model"])
        def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            draft = state["messages"][-1].content
            grader_model.invoke([HumanMessage(f"Grade: {draft}")])
            passes = sum(1 for m in state["messages"] if m.type == "ai")
            update: dict[str, Any] = {}
            if keys:
                verdicts = [{"name": f"c{n}", "passed": True, "gap": ""} for n in range(3)]
                record = {"grading_run_id": "g", "iteration": passes - 1, "draft": draft,
                          "criteria": verdicts, "explanation": "x"}  # fmt: skip
                update = {
                    "_rubric_evaluations": [record],
                    "_rubric_iterations": passes,
                    "_rubric_status": "needs_revision" if passes < 2 else "satisfied",
                }
                if passes == 1:
                    update |= {"_active_rubric": "r", "_current_grading_run_id": "g",
                               "_rubric_best_iteration": None}  # fmt: skip
            if passes < 2:
                return {**update, "messages": [HumanMessage("Revise it.")], "jump_to": "model"}
            return update or None

    class Wrap(AgentMiddleware):  # type: ignore[type-arg]
        def __init__(self, number: int) -> None:
            super().__init__()
            self._name = f"Wrap{number}"

        @property
        def name(self) -> str:
            return self._name

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    middleware = [*(Wrap(n) for n in range(wrappers)), Grade()]
    agent = create_agent(
        model=agent_model, tools=[], middleware=middleware, checkpointer=_open_sqlite(path)
    )

    def run(n: int) -> None:
        thread = uuid.uuid4().hex
        given: dict[str, Any] = {"messages": [HumanMessage(f"Input {n}")]}
        if keys:
            given["rubric"] = "- a\n- b"
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
        agent.invoke(given, config, durability=RUN_DURABILITY)
        for model in (agent_model, grader_model):
            model.forget(thread)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    variants = {
        "floor": {"keys": False, "wrappers": 0},
        "+ state keys": {"keys": True, "wrappers": 0},
        "+ 1 wrapper": {"keys": False, "wrappers": 1},
        "+ 2 wrappers": {"keys": False, "wrappers": 2},
        "+ state keys + 2 wrappers": {"keys": True, "wrappers": 2},
    }
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            name: _build(str(Path(tmp) / f"{n}.sqlite"), **shape)  # type: ignore[arg-type]
            for n, (name, shape) in enumerate(variants.items())
        }
        for run in runs.values():  # warm-up
            for n in range(10):
                run(n)
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for r in range(args.rounds):
            for name in list(runs) if r % 2 == 0 else list(reversed(list(runs))):
                started = time.process_time()
                for n in range(args.runs):
                    runs[name](n)
                cpu[name].append((time.process_time() - started) / args.runs * 1e3)
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"Load before `{load_before}`, after `{load_after}`\n")
    print("| variant | CPU per run (ms, median) | of the floor (paired median) |")
    print("|---|---:|---:|")
    for name, values in cpu.items():
        ratio = statistics.median(v / f for v, f in zip(values, cpu["floor"], strict=True))
        print(f"| {name} | {statistics.median(values):.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
