"""Building a run's agent: its models, `RubricMiddleware` as grader, and the stop switch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware

from rubric_core.errors import RubricStudioError
from rubric_core.extras import require
from rubric_core.grader.logs import RUN_CONFIG_KEY
from rubric_core.middleware import RubricMiddleware
from rubric_core.schema import MAX_ITERATIONS_LIMIT, RubricEvaluation, is_checks_only_grader

if TYPE_CHECKING:
    import threading

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import Durability

    from rubric_core.runs.spec import RunSpec

__all__ = ["RUN_DURABILITY", "StopRun", "build_agent", "resolve_models", "run_config"]

RUN_DURABILITY: Durability = "sync"
"""How a run's agent writes its checkpoints (`agent.invoke(..., durability=...)`).

`"sync"`: each step's checkpoint is written before the next step starts. A graded pass
is committed to the store (synchronous=FULL) inside its `after_agent` step and that
step's checkpoint follows at once, so a killed process resumes after the last pass it
stored and goes on with the same grading run. LangGraph's default, `"async"`, writes a
step's checkpoint while the next step runs: a kill just after a pass was stored could
lose its checkpoint, and the resumed run would grade that pass again and replace its
record (`tests/runs/test_execute.py::test_killed_process_keeps_its_passes_and_the_run_resumes`
catches exactly that). Its CPU cost is within noise (BENCHMARKS.md, section 8); the
wait for each write is milliseconds, nothing next to a model call. `"exit"` writes only at the end: a crashed run could not
resume its grading run at all.
"""

_RECURSION_STEPS_PER_PASS = 100
"""Graph steps allowed per grading pass (tool-calling agents take many steps per draft)."""


def run_config(thread_id: str, run_id: int | None = None) -> RunnableConfig:
    """The LangGraph config a run's agent is invoked (and its state read) with; `run_id`
    (the stored run) names the run in the loop's log lines (`grader.logs`).

    Examples:
        >>> run_config("run-1")
        {'configurable': {'thread_id': 'run-1'}, 'recursion_limit': 2000}
    """
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if run_id is not None:
        configurable[RUN_CONFIG_KEY] = run_id
    return {
        "configurable": configurable,
        "recursion_limit": _RECURSION_STEPS_PER_PASS * MAX_ITERATIONS_LIMIT,
    }


class StopRun(RubricStudioError):
    """Raised inside the agent loop when a run was asked to stop (`RunHandle.stop()`)."""


class _StoppableRubricMiddleware(RubricMiddleware):
    """`RubricMiddleware` that also raises `StopRun` before the agent's next model call
    once a stop was requested.

    One middleware rather than a stop middleware beside the grader: LangChain wraps every
    middleware's `wrap_model_call` in a tracing span of its own, so each one more costs
    every model call of every run. The stop is checked first, then the rubric. Its name
    stays `RubricMiddleware`, the name of its graph node (`RubricMiddleware.after_agent`)
    in checkpoints written before it existed.
    """

    def __init__(self, stopped: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stopped = stopped

    @property
    def name(self) -> str:
        return RubricMiddleware.__name__

    def check(self, request: ModelRequest[Any]) -> None:
        if self._stopped():
            msg = "stopped on request"
            raise StopRun(msg)
        super().check(request)


def resolve_models(spec: RunSpec) -> tuple[BaseChatModel, BaseChatModel | None]:
    """Fresh agent and grader model instances for one run; no grader for `checks`.

    Fresh, because a replay model's script position belongs to its instance.
    """
    from rubric_core.providers import resolve_model

    agent = resolve_model(
        spec.agent_model, role="agent", base_url=spec.base_url, api_key=spec.api_key
    )
    if is_checks_only_grader(spec.grader_model):
        return agent, None  # code checks decide every criterion (validate_spec made sure)
    grader = resolve_model(
        spec.grader_model, role="grader", base_url=spec.base_url, api_key=spec.api_key
    )
    return agent, grader


def build_agent(
    spec: RunSpec,
    *,
    checkpointer: Any = None,
    on_evaluation: Callable[[RubricEvaluation], None] | None = None,
    stop_event: threading.Event | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
    stopped: Callable[[], bool] | None = None,
) -> Any:
    """Create the agent a spec describes, with `RubricMiddleware` as its grader.

    Args:
        spec: The run spec (validated by the caller).
        checkpointer: A LangGraph checkpointer; runs use a SQLite one so they can resume.
        on_evaluation: Called with every grading pass (a run's recorder).
        stop_event: When set, the agent stops before its next model call (`StopRun`).
        agent_llm: Use this model instance instead of resolving `spec.agent_model`.
        grader_llm: Use this model instance instead of resolving `spec.grader_model`.
        stopped: Instead of `stop_event`: asked before each model call whether to stop
            (a shared agent asks the stop switch of the run it is executing).

    Returns:
        The compiled agent graph.

    Examples:
        >>> agent = build_agent(spec, agent_llm=agent_model, grader_llm=grader_model)  # doctest: +SKIP
        >>> agent.invoke({"messages": [("user", spec.input)], "rubric": rubric})  # doctest: +SKIP
    """
    from rubric_core.tools import get_tools

    if agent_llm is None or grader_llm is None:
        resolved_agent, resolved_grader = resolve_models(spec)
        agent_llm = agent_llm or resolved_agent
        grader_llm = grader_llm or resolved_grader
    assert agent_llm is not None
    grading: dict[str, Any] = {
        "model": grader_llm,
        "tools": get_tools(list(spec.grader_tools)),
        "system_prompt": spec.grader_system_prompt,
        "max_iterations": spec.max_iterations,
        "on_evaluation": on_evaluation,
        "keep": "best" if spec.keep == "best" else "last",
    }
    if stopped is None and stop_event is not None:
        stopped = stop_event.is_set
    grader = (
        RubricMiddleware(**grading)
        if stopped is None
        else _StoppableRubricMiddleware(stopped, **grading)
    )
    middleware: list[AgentMiddleware[Any, Any, Any]] = [grader]
    if spec.agent_kind == "deep":
        require("deepagents", "deepagents")
        from deepagents import create_deep_agent

        return create_deep_agent(
            model=agent_llm,
            system_prompt=spec.agent_system_prompt,
            middleware=middleware,
            checkpointer=checkpointer,
        )
    from langchain.agents import create_agent

    return create_agent(
        agent_llm,
        tools=[],
        system_prompt=spec.agent_system_prompt,
        middleware=middleware,
        checkpointer=checkpointer,
    )
