"""One agent per spec, built once and shared by every run of it in this process.

Building a run's agent (models, `RubricMiddleware`, the compiled graph) costs more CPU
than a short run spends in its graph, and every run of a batch would build the same one.
So the runner builds it once per spec (everything but the input) and checkpointer, and
runs each input on its own LangGraph thread through it. What belongs to one run, its
recorder and its stop switch, is looked up by the thread the graph is running
(`langgraph.config.get_config()`), and replay models keep their script position per
thread (`ReplayChatModel.per_thread`), so each run replays its script as a fresh model
would. Provider models hold no per-run state.

Runs given their own model instances (`agent_llm=`/`grader_llm=`) get their own agent,
as before.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from rubric_core.errors import RubricStudioError
from rubric_core.runs.agents import build_agent, resolve_models

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.language_models import BaseChatModel

    from rubric_core.runs.spec import RunSpec
    from rubric_core.schema import RubricEvaluation

__all__ = ["SharedAgent", "models_built", "shared_agent"]

_CACHE_SIZE = 16
"""Specs whose agents stay built (least recently used dropped first)."""


class UnroutedRunError(RubricStudioError, RuntimeError):
    """A shared agent ran on a thread no run is attached to (a bug in the runner)."""


@dataclass
class _Route:
    on_evaluation: Callable[[RubricEvaluation], None] | None
    stop_event: threading.Event | None


def _current_thread() -> str | None:
    from langgraph.config import get_config

    try:
        thread = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # outside a graph run
        return None
    return str(thread) if thread is not None else None


@dataclass
class SharedAgent:
    """A spec's agent and models, and the runs currently attached to it by thread id."""

    agent: Any
    """The compiled agent graph."""

    agent_llm: BaseChatModel
    """The agent's model (replay models keep one script position per thread)."""

    grader_llm: BaseChatModel | None
    """The grader's model (same); `None` for a checks-only run."""

    checkpointer: Any
    """The saver the graph was compiled with (the cache key holds only its id)."""

    _routes: dict[str, _Route] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(
        self,
        thread_id: str,
        on_evaluation: Callable[[RubricEvaluation], None] | None,
        stop_event: threading.Event | None,
    ) -> None:
        """Route the passes and the stop switch of the run on `thread_id` to it."""
        with self._lock:
            self._routes[thread_id] = _Route(on_evaluation, stop_event)

    def detach(self, thread_id: str) -> None:
        """The run on `thread_id` is done: forget its route and its replay positions."""
        with self._lock:
            self._routes.pop(thread_id, None)
        for model in (self.agent_llm, self.grader_llm):
            forget = getattr(model, "forget", None)
            if callable(forget):
                forget(thread_id)

    def _route(self) -> _Route:
        thread = _current_thread()
        with self._lock:
            route = self._routes.get(thread) if thread is not None else None
        if route is None:
            msg = f"no run is attached to thread {thread!r} of this shared agent"
            raise UnroutedRunError(msg)
        return route

    def on_evaluation(self, evaluation: RubricEvaluation) -> None:
        """The middleware's callback: the pass goes to the recorder of the run it is from."""
        route = self._route()
        if route.on_evaluation is not None:
            route.on_evaluation(evaluation)

    def stopped(self) -> bool:
        """Whether the run the graph is executing was asked to stop."""
        event = self._route().stop_event
        return event is not None and event.is_set()


_CACHE: collections.OrderedDict[tuple[Any, ...], SharedAgent] = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()


_Model = TypeVar("_Model", "BaseChatModel", "BaseChatModel | None")


def _per_thread(model: _Model) -> _Model:
    from rubric_core.providers import ReplayChatModel

    if isinstance(model, ReplayChatModel):
        model.per_thread = True
    return model


def _spec_key(spec: RunSpec) -> tuple[Any, ...]:
    # api_key is not part of a spec's equality (compare=False), so it is keyed apart.
    return (dataclasses.replace(spec, input="-"), spec.api_key)


def models_built(spec: RunSpec) -> bool:
    """Whether this process has built the models of `spec` already (for a shared agent).

    Validating a spec builds its models only to report a bad one before anything starts;
    a spec whose shared agent exists has been built, and its runs use those models.
    """
    key = _spec_key(spec)
    with _CACHE_LOCK:
        return any(cached[:2] == key for cached in _CACHE)


def shared_agent(spec: RunSpec, checkpointer: Any) -> SharedAgent:
    """The agent of `spec` (its input aside) on `checkpointer`, built on first use.

    Examples:
        >>> shared = shared_agent(spec, saver)  # doctest: +SKIP
        >>> shared.attach(thread_id, recorder, stop_event)  # doctest: +SKIP
    """
    key = (*_spec_key(spec), id(checkpointer))
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None and cached.checkpointer is checkpointer:
            _CACHE.move_to_end(key)
            return cached
        resolved_agent, resolved_grader = resolve_models(spec)
        agent_llm, grader_llm = _per_thread(resolved_agent), _per_thread(resolved_grader)
        shared = SharedAgent(
            agent=None, agent_llm=agent_llm, grader_llm=grader_llm, checkpointer=checkpointer
        )
        shared.agent = build_agent(
            spec,
            checkpointer=checkpointer,
            on_evaluation=shared.on_evaluation,
            stopped=shared.stopped,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
        _CACHE[key] = shared
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return shared
