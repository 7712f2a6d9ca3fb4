"""The LangGraph floor of a run: the graph a run executes, with nothing of ours in it.

What the loop cannot go below without doing fewer LangGraph steps. It is the run's graph
shape, step for step: `create_agent` with the run's two scripted agent turns, and an
`after_agent` hook that calls the grader model once per pass and jumps back to the model
after the first. The checkpointer is the one runs use (`_open_sqlite`: WAL,
`synchronous=NORMAL`), and the graph runs with the runs' `durability="sync"`. The replay
models are the run's own, keeping one script position per thread, with the same latency.

What the floor leaves out is everything that is ours: the store (the run's row, each
pass, the transcript and the end, each fsynced), the grader's payload, verdict parsing
and criterion alignment, scoring, the stop switch, spec and rubric validation, the
run's recorder. A run's CPU minus the floor's is what our code costs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

SCENARIO = "needs_revision_then_satisfied"
"""The scenario every run benchmark uses: two agent turns, two grader verdicts."""


def build_floor(checkpoint_path: str, latency_s: float = 0.0) -> Callable[[int], None]:
    """A function that runs the floor graph once (input `n`) on a fresh thread id."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, hook_config
    from langchain_core.messages import HumanMessage

    from rubric_core.providers import ReplayChatModel
    from rubric_core.providers.replay.scenarios import scenario_turns
    from rubric_core.runs.agents import RUN_DURABILITY
    from rubric_core.runs.checkpoints import _open_sqlite

    def replay(role: Any) -> ReplayChatModel:
        return ReplayChatModel(
            scenario=f"floor-{role}",
            turns=scenario_turns(SCENARIO, role),
            cycle=True,
            per_thread=True,
            latency_s=latency_s,
        )

    agent_model, grader_model = replay("agent"), replay("grader")

    class GradeOnce(AgentMiddleware):  # type: ignore[type-arg]
        """One grader call per pass; back to the model after the first pass."""

        @hook_config(can_jump_to=["model"])
        def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            grader_model.invoke([HumanMessage(f"Grade: {state['messages'][-1].content}")])
            if sum(1 for m in state["messages"] if m.type == "ai") < 2:
                return {"messages": [HumanMessage("Revise it.")], "jump_to": "model"}
            return None

    agent = create_agent(
        model=agent_model,
        tools=[],
        middleware=[GradeOnce()],
        checkpointer=_open_sqlite(checkpoint_path),
    )

    def run(n: int) -> None:
        thread = uuid.uuid4().hex
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
        out = agent.invoke(
            {"messages": [HumanMessage(f"Input {n}")]}, config, durability=RUN_DURABILITY
        )
        if sum(1 for m in out["messages"] if m.type == "ai") != 2:
            msg = f"the floor graph made {len(out['messages'])} messages, not two passes"
            raise AssertionError(msg)
        for model in (agent_model, grader_model):
            model.forget(thread)

    return run


def floor_worker(checkpoint_path: str, inputs: list[int], threads: int, latency_s: float) -> None:
    """A worker process of a floor batch: its own graph and saver, `threads` at a time."""
    run = build_floor(checkpoint_path, latency_s)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, inputs))
