"""Building a run's agent: its models, `RubricMiddleware` as grader, and the stop switch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware

from rubric_core.errors import RubricStudioError
from rubric_core.schema import MAX_ITERATIONS_LIMIT, RubricEvaluation

if TYPE_CHECKING:
    import threading

    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

    from rubric_core.runs.spec import RunSpec

__all__ = ["StopRun", "build_agent", "resolve_models", "run_config"]

_RECURSION_STEPS_PER_PASS = 100
"""Graph steps allowed per grading pass (tool-calling agents take many steps per draft)."""


def run_config(thread_id: str) -> RunnableConfig:
    """The LangGraph config a run's agent is invoked (and its state read) with.

    Examples:
        >>> run_config("run-1")
        {'configurable': {'thread_id': 'run-1'}, 'recursion_limit': 2000}
    """
    return {
        "configurable": {"thread_id": thread_id},
        "recursion_limit": _RECURSION_STEPS_PER_PASS * MAX_ITERATIONS_LIMIT,
    }


class StopRun(RubricStudioError):
    """Raised inside the agent loop when a run was asked to stop (`RunHandle.stop()`)."""


class _StopMiddleware(AgentMiddleware[Any, Any, Any]):
    """Raises `StopRun` before the agent's next model call once a stop was requested."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self._event = event

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self._event.is_set():
            msg = "stopped on request"
            raise StopRun(msg)
        return None


def resolve_models(spec: RunSpec) -> tuple[BaseChatModel, BaseChatModel]:
    """Fresh agent and grader model instances for one run.

    Fresh, because a replay model's script position belongs to its instance.
    """
    from rubric_core.models import resolve_model

    agent = resolve_model(
        spec.agent_model, role="agent", base_url=spec.base_url, api_key=spec.api_key
    )
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
) -> Any:
    """Create the agent a spec describes, with `RubricMiddleware` as its grader.

    Args:
        spec: The run spec (validated by the caller).
        checkpointer: A LangGraph checkpointer; runs use a SQLite one so they can resume.
        on_evaluation: Called with every grading pass (a run's recorder).
        stop_event: When set, the agent stops before its next model call (`StopRun`).
        agent_llm: Use this model instance instead of resolving `spec.agent_model`.
        grader_llm: Use this model instance instead of resolving `spec.grader_model`.

    Returns:
        The compiled agent graph.

    Examples:
        >>> agent = build_agent(spec, agent_llm=agent_model, grader_llm=grader_model)  # doctest: +SKIP
        >>> agent.invoke({"messages": [("user", spec.input)], "rubric": rubric})  # doctest: +SKIP
    """
    from rubric_core.middleware import RubricMiddleware
    from rubric_core.tools import get_tools

    if agent_llm is None or grader_llm is None:
        resolved_agent, resolved_grader = resolve_models(spec)
        agent_llm = agent_llm or resolved_agent
        grader_llm = grader_llm or resolved_grader
    grader = RubricMiddleware(
        model=grader_llm,
        tools=get_tools(list(spec.grader_tools)),
        system_prompt=spec.grader_system_prompt,
        max_iterations=spec.max_iterations,
        on_evaluation=on_evaluation,
        keep="best" if spec.keep == "best" else "last",
    )
    middleware: list[AgentMiddleware[Any, Any, Any]] = []
    if stop_event is not None:
        middleware.append(_StopMiddleware(stop_event))
    middleware.append(grader)
    if spec.agent_kind == "deep":
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
