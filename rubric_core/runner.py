"""Run specs, agents built with the rubric middleware, single and batch runs, and the recorder."""

from __future__ import annotations

import collections
import contextlib
import csv
import io
import json
import logging
import math
import sqlite3
import statistics
import threading
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from rubric_core.rubric import RubricError, validate_rubric
from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE, RubricEvaluation

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.sqlite import SqliteSaver

    from rubric_core.store import Store

logger = logging.getLogger(__name__)

MAX_INPUT_CHARS = 200_000
"""Longest input a run accepts."""

MAX_ITERATIONS_LIMIT = 20
"""Highest `max_iterations` a run spec may ask for."""

MAX_CONCURRENCY = 16
"""Most runs a batch executes at once."""

AGENT_KINDS = ("basic", "deep")
"""`basic`: `langchain.agents.create_agent`; `deep`: `deepagents.create_deep_agent`."""

_RECURSION_STEPS_PER_PASS = 100
"""Graph steps allowed per grading pass (tool-calling agents take many steps per draft)."""

_BINARY_SNIFF_BYTES = 8192
_DATASET_SUFFIXES_CSV = (".csv",)
_DATASET_SUFFIXES_JSONL = (".jsonl", ".ndjson")


class SpecError(ValueError):
    """A run spec that cannot start; `field` names the offending field."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


class DatasetError(ValueError):
    """A dataset file that cannot be read; the message names the file and the row or line."""


class StopRun(Exception):
    """Raised inside the agent loop when `RunHandle.stop()` was called."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run; validated by `validate_spec` before it starts.

    Examples:
        >>> spec = RunSpec(rubric_version_id=1, input="Write a haiku about rain",
        ...                agent_model="replay:haiku", grader_model="replay:haiku",
        ...                grader_tools=["count_syllables"])
        >>> spec.grader_tools
        ('count_syllables',)
    """

    rubric_version_id: int
    """Id of the stored rubric version the grader judges against."""

    input: str
    """The user's request to the agent."""

    agent_model: str
    """`provider:model-id`, `replay:<scenario>` or a model served at `base_url`."""

    grader_model: str
    """Same forms as `agent_model`; the grader's model."""

    grader_tools: tuple[str, ...] = ()
    """Names of shipped grader tools (see `rubric_core.tools.TOOL_NAMES`)."""

    max_iterations: int = 3
    """Cap on grading passes, 1..20."""

    agent_kind: str = "basic"
    """`basic` (`create_agent`) or `deep` (`create_deep_agent`)."""

    agent_system_prompt: str | None = None
    """System prompt of the agent; `None` for the framework's default."""

    grader_system_prompt: str | None = None
    """System prompt of the grader; `None` for the middleware's default."""

    base_url: str | None = None
    """OpenAI-compatible endpoint for both models (vLLM, llama.cpp, LM Studio, Ollama)."""

    api_key: str | None = field(default=None, repr=False, compare=False)
    """Key for `base_url` or the provider; never persisted, never shown in `repr`."""

    def __post_init__(self) -> None:
        tools = self.grader_tools
        if isinstance(tools, str):
            tools = (tools,)
        object.__setattr__(self, "grader_tools", tuple(tools or ()))

    def with_input(self, text: str) -> RunSpec:
        """A copy of this spec with another input (batch runs share everything else)."""
        return RunSpec(
            rubric_version_id=self.rubric_version_id,
            input=text,
            agent_model=self.agent_model,
            grader_model=self.grader_model,
            grader_tools=self.grader_tools,
            max_iterations=self.max_iterations,
            agent_kind=self.agent_kind,
            agent_system_prompt=self.agent_system_prompt,
            grader_system_prompt=self.grader_system_prompt,
            base_url=self.base_url,
            api_key=self.api_key,
        )


# --------------------------------------------------------------------------- validation


def _check_input(text: object, field_name: str = "input") -> None:
    if not isinstance(text, str):
        raise SpecError(field_name, f"must be text, got {type(text).__name__}")
    if not text.strip():
        raise SpecError(field_name, "is empty; give the agent something to do")
    if len(text) > MAX_INPUT_CHARS:
        raise SpecError(
            field_name, f"is {len(text):,} characters; the limit is {MAX_INPUT_CHARS:,}"
        )
    if "\x00" in text:
        raise SpecError(field_name, "contains a NUL byte; pass plain text")


def _check_static(spec: RunSpec) -> None:
    """Checks that need neither the store nor the model/tool registries."""
    rv = spec.rubric_version_id
    if isinstance(rv, bool) or not isinstance(rv, int):
        raise SpecError("rubric_version_id", f"must be an integer id, got {rv!r}")
    _check_input(spec.input)
    mi = spec.max_iterations
    if isinstance(mi, bool) or not isinstance(mi, int):
        raise SpecError(
            "max_iterations", f"must be an integer between 1 and {MAX_ITERATIONS_LIMIT}, got {mi!r}"
        )
    if not 1 <= mi <= MAX_ITERATIONS_LIMIT:
        raise SpecError("max_iterations", f"must be between 1 and {MAX_ITERATIONS_LIMIT}, got {mi}")
    if spec.agent_kind not in AGENT_KINDS:
        raise SpecError("agent_kind", f"must be 'basic' or 'deep', got {spec.agent_kind!r}")
    for name in ("agent_model", "grader_model"):
        value = getattr(spec, name)
        if not isinstance(value, str) or not value.strip():
            raise SpecError(name, "is empty; name a model such as 'openai:gpt-4o-mini'")
    for name in ("agent_system_prompt", "grader_system_prompt"):
        value = getattr(spec, name)
        if value is not None and not isinstance(value, str):
            raise SpecError(name, f"must be text or None, got {type(value).__name__}")
    if spec.base_url is not None and not str(spec.base_url).startswith(("http://", "https://")):
        raise SpecError("base_url", f"must start with http:// or https://, got {spec.base_url!r}")
    for tool in spec.grader_tools:
        if not isinstance(tool, str) or not tool.strip():
            raise SpecError("grader_tools", f"tool names must be non-empty text, got {tool!r}")


def validate_spec(spec: RunSpec, store: Store) -> None:
    """Check a run spec completely before anything starts.

    Models are constructed (never called), so a missing API key or an unknown
    provider is reported here rather than half-way through a run.

    Raises:
        SpecError: Naming the field that is wrong and why.

    Examples:
        >>> validate_spec(RunSpec(1, "", "replay:haiku", "replay:haiku"), store)  # doctest: +SKIP
        Traceback (most recent call last):
        SpecError: input: is empty; give the agent something to do
    """
    from rubric_core.models import ModelError, resolve_model
    from rubric_core.store import StoreError
    from rubric_core.tools import UnknownToolError, get_tools

    if not isinstance(spec, RunSpec):
        msg = f"expected a RunSpec, got {type(spec).__name__}"
        raise TypeError(msg)
    _check_static(spec)
    try:
        version = store.get_rubric_version(spec.rubric_version_id)
    except StoreError as exc:
        raise SpecError(
            "rubric_version_id", f"no rubric version with id {spec.rubric_version_id} ({exc})"
        ) from exc
    try:
        validate_rubric(version["text"])
    except RubricError as exc:
        raise SpecError("rubric_version_id", str(exc)) from exc
    try:
        get_tools(list(spec.grader_tools))
    except UnknownToolError as exc:
        raise SpecError("grader_tools", str(exc)) from exc
    for name, role in (("agent_model", "agent"), ("grader_model", "grader")):
        try:
            resolve_model(
                getattr(spec, name), role=role, base_url=spec.base_url, api_key=spec.api_key
            )
        except ModelError as exc:
            raise SpecError(name, str(exc)) from exc


# --------------------------------------------------------------------------- agent


class _StopMiddleware(AgentMiddleware):
    """Raises `StopRun` before the agent's next model call once a stop was requested."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self._event = event

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if self._event.is_set():
            msg = "stopped on request"
            raise StopRun(msg)
        return None


def _resolve_models(spec: RunSpec) -> tuple[BaseChatModel, BaseChatModel]:
    """Fresh model instances for one run (a replay model's script position is per instance)."""
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
        on_evaluation: Called with every grading pass (the runner's recorder).
        stop_event: When set, the agent stops before its next model call (`StopRun`).
        agent_llm: Use this model instance instead of resolving `spec.agent_model`.
        grader_llm: Use this model instance instead of resolving `spec.grader_model`.

    Returns:
        The compiled agent graph.
    """
    from rubric_core.middleware import RubricMiddleware
    from rubric_core.tools import get_tools

    if agent_llm is None or grader_llm is None:
        resolved_agent, resolved_grader = _resolve_models(spec)
        agent_llm = agent_llm or resolved_agent
        grader_llm = grader_llm or resolved_grader
    grader = RubricMiddleware(
        model=grader_llm,
        tools=get_tools(list(spec.grader_tools)),
        system_prompt=spec.grader_system_prompt,
        max_iterations=spec.max_iterations,
        on_evaluation=on_evaluation,
    )
    middleware: list[AgentMiddleware] = []
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


# --------------------------------------------------------------------------- checkpointer


class _CheckpointerPool:
    """One `SqliteSaver` (own connection, WAL) per checkpoint file, shared by runs in a process.

    `SqliteSaver` serialises its writes with a lock, so concurrent runs share one
    connection instead of competing for SQLite's file lock. The connection stays
    open between runs (closing it checkpoints the WAL, ~20 ms) and is closed once
    no run uses it and the store it belongs to has been garbage-collected.
    The checkpoint database uses `synchronous=NORMAL`: in WAL mode a killed process
    loses nothing committed; only a power cut may drop the last checkpoints, which
    costs a resumed run some repeated steps, never a stored grading pass.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._savers: dict[str, SqliteSaver] = {}
        self._refs: dict[str, int] = {}
        self._owners: dict[str, set[int]] = {}
        # Finalizers may run during garbage collection inside a locked section, so
        # they only queue the owner here; the next acquire/release handles it.
        self._gone: collections.deque[tuple[str, int]] = collections.deque()

    def acquire(self, path: str, owner: object = None) -> SqliteSaver:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with self._lock:
            self._collect()
            saver = self._savers.get(path)
            if saver is None:
                conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                saver = SqliteSaver(conn)
                saver.setup()
                self._savers[path] = saver
            self._refs[path] = self._refs.get(path, 0) + 1
            owners = self._owners.setdefault(path, set())
            if owner is not None and id(owner) not in owners:
                owners.add(id(owner))
                weakref.finalize(owner, self._gone.append, (path, id(owner)))
            return saver

    def release(self, path: str) -> None:
        with self._lock:
            self._refs[path] = max(0, self._refs.get(path, 0) - 1)
            self._collect()
            self._close_if_unused(path)

    def _collect(self) -> None:
        while self._gone:
            path, owner_id = self._gone.popleft()
            self._owners.get(path, set()).discard(owner_id)
            self._close_if_unused(path)

    def _close_if_unused(self, path: str) -> None:
        if self._refs.get(path, 0) > 0 or self._owners.get(path):
            return
        saver = self._savers.pop(path, None)
        self._refs.pop(path, None)
        self._owners.pop(path, None)
        if saver is not None:
            with contextlib.suppress(sqlite3.Error):
                saver.conn.close()


_CHECKPOINTERS = _CheckpointerPool()


def checkpoint_path(store: Store) -> str:
    """The checkpoint file that sits next to the store's database (`<db>.checkpoints.sqlite`)."""
    db = getattr(store, "path", None) or getattr(store, "db_path", None)
    if db is None or str(db) == ":memory:":
        return ":memory:"
    return f"{db}.checkpoints.sqlite"


# --------------------------------------------------------------------------- helpers


def _is_grader_message(message: BaseMessage) -> bool:
    return (
        getattr(message, "name", None) == RUBRIC_GRADER_MESSAGE_SOURCE
        or message.additional_kwargs.get("lc_source") == RUBRIC_GRADER_MESSAGE_SOURCE
    )


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
    return "".join(parts)


def _agent_usage(messages: Iterable[BaseMessage]) -> tuple[int, int]:
    """Input and output tokens of the agent's own model calls (grader calls excluded)."""
    tokens_in = tokens_out = 0
    for message in messages:
        if not isinstance(message, AIMessage) or _is_grader_message(message):
            continue
        usage = message.usage_metadata or {}
        tokens_in += int(usage.get("input_tokens") or 0)
        tokens_out += int(usage.get("output_tokens") or 0)
    return tokens_in, tokens_out


def _final_output(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and not _is_grader_message(message):
            text = _message_text(message)
            if text.strip():
                return text
    return ""


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_verdict_turn(turn: Any) -> bool:
    """Whether a scripted grader turn ends a grader attempt (a verdict or a scripted failure)."""
    if callable(turn):
        try:
            turn = turn([])
        except Exception:  # a scripted failure ends the attempt
            return True
    return any(call["name"] == "GraderResponse" for call in getattr(turn, "tool_calls", []))


def _fast_forward_replay(model: Any, consumed: int, *, verdicts_only: bool) -> None:
    """Skip the turns of a replay model's script that the stored part of a run used up.

    A resumed run gets fresh replay models whose scripts start at turn 0. For the
    agent, `consumed` counts its answers already in the checkpoint. For the grader,
    it counts grader attempts already made; each attempt's tool-call turns are
    skipped along with the verdict (or scripted failure) that ends it.
    """
    from rubric_core._replay import ReplayChatModel

    if not isinstance(model, ReplayChatModel) or consumed <= 0:
        return
    turns = list(model.turns)
    if not turns:
        return
    index = 0
    if not verdicts_only:
        index = consumed
    else:
        seen = 0
        while seen < consumed and (index < len(turns) or model.cycle):
            if _is_verdict_turn(turns[index % len(turns)]):
                seen += 1
            index += 1
    if model.cycle:
        index %= len(turns)
    model._index = min(index, len(turns))


# --------------------------------------------------------------------------- runs


class RunHandle:
    """A run executing off the caller's thread.

    Progress is read from the store, the one thing the run and its watchers share.

    Examples:
        >>> handle = start_run(store, spec)  # doctest: +SKIP
        >>> handle.wait(60); handle.status  # doctest: +SKIP
        'satisfied'
    """

    def __init__(self, store: Store, run_id: int, thread_id: str, stop_event: threading.Event):
        self.run_id = run_id
        """Id of the run row."""
        self.thread_id = thread_id
        """LangGraph thread id; `resume_run` continues it."""
        self.error: str | None = None
        """The exception text if the agent raised (status `error`)."""
        self._store = store
        self._stop_event = stop_event
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._record_failures: list[str] = []

    def stop(self) -> None:
        """Ask the run to stop before its next agent model call; it ends `interrupted`.

        Passes already graded stay stored. Stopping a finished run does nothing.
        """
        self._stop_event.set()

    def done(self) -> bool:
        """Whether the run has finished (its terminal status is stored)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run finishes or `timeout` seconds pass; returns `done()`."""
        return self._finished.wait(timeout)

    def run(self) -> dict[str, Any]:
        """The run's row as stored now (status, iterations, tokens, ...)."""
        return self._store.get_run(self.run_id)

    @property
    def status(self) -> str:
        """The run's latest status as stored (`running` until it ends)."""
        return self.run()["status"]

    @property
    def iteration(self) -> int:
        """Number of grading passes stored so far."""
        return len(self._store.run_evaluations(self.run_id))

    def latest_evaluation(self) -> dict[str, Any] | None:
        """The most recent stored grading pass, or `None` before the first."""
        evaluations = self._store.run_evaluations(self.run_id)
        return evaluations[-1] if evaluations else None


def _recorder(
    store: Store,
    run_id: int,
    listener: Callable[[RubricEvaluation], None] | None,
    failures: list[str] | None = None,
) -> Callable[[RubricEvaluation], None]:
    """`on_evaluation` for the middleware: commit each pass before the loop goes on.

    The middleware logs and suppresses its callback's exceptions, so a pass the store
    could not take is noted in `failures` and the run ends `error` with it.
    """

    def record(evaluation: RubricEvaluation) -> None:
        try:
            store.record_evaluation(run_id, evaluation)
        except Exception as exc:
            if failures is not None:
                failures.append(
                    f"storing grading pass {evaluation.get('iteration')} failed: {_error_text(exc)}"
                )
            raise
        if listener is not None:
            try:
                listener(evaluation)
            except Exception:  # a watcher's bug must not end the run
                logger.exception("on_evaluation listener of run %s raised", run_id)

    return record


def _execute(
    store: Store,
    handle: RunHandle,
    agent: Any,
    agent_input: dict[str, Any] | None,
    ckpt_path: str,
) -> None:
    """Invoke the agent to the end and store the transcript and terminal status."""
    config = {
        "configurable": {"thread_id": handle.thread_id},
        "recursion_limit": _RECURSION_STEPS_PER_PASS * MAX_ITERATIONS_LIMIT,
    }
    status: str = "error"
    error: str | None = None
    values: dict[str, Any] = {}
    try:
        try:
            result = agent.invoke(agent_input, config)
            values = dict(result or {})
            with contextlib.suppress(Exception):
                values = {**values, **agent.get_state(config).values}
            status = values.get("_rubric_status") or "error"
            if status == "error":
                error = "the agent finished without a grading pass"
        except StopRun:
            status = "interrupted"
        except Exception as exc:  # any failure of the agent or its models ends the run
            if handle._stop_event.is_set() and isinstance(exc.__cause__, StopRun):
                status = "interrupted"
            else:
                status, error = "error", _error_text(exc)
                logger.warning("run %s failed: %s", handle.run_id, error)
        if not values:
            with contextlib.suppress(Exception):
                values = dict(agent.get_state(config).values)
        messages = list(values.get("messages") or [])
        if messages:
            try:
                store.save_transcript(handle.run_id, messages)
            except Exception as exc:
                logger.exception("could not save the transcript of run %s", handle.run_id)
                if error is None and status != "interrupted":
                    status, error = "error", f"saving the transcript failed: {_error_text(exc)}"
        if handle._record_failures and status != "error":
            status, error = "error", handle._record_failures[0]
        tokens_in, tokens_out = _agent_usage(messages)
        handle.error = error
        store.finish_run(
            handle.run_id,
            status=status,
            final_output=_final_output(messages),
            error=error,
            agent_input_tokens=tokens_in,
            agent_output_tokens=tokens_out,
        )
    except Exception as exc:  # the store itself failed; keep the handle truthful
        handle.error = handle.error or _error_text(exc)
        logger.exception("run %s could not be finished in the store", handle.run_id)
    finally:
        _CHECKPOINTERS.release(ckpt_path)
        handle._finished.set()


def _prepare(
    store: Store,
    spec: RunSpec,
    *,
    batch_id: str | None,
    on_evaluation: Callable[[RubricEvaluation], None] | None,
    stop_event: threading.Event | None,
    agent_llm: BaseChatModel | None,
    grader_llm: BaseChatModel | None,
    validate: bool = True,
) -> tuple[RunHandle, Any, dict[str, Any], str]:
    if validate:
        validate_spec(spec, store)
    version = store.get_rubric_version(spec.rubric_version_id)
    thread_id = f"run-{uuid.uuid4().hex}"
    run_id = store.create_run(
        rubric_version_id=spec.rubric_version_id,
        input=spec.input,
        agent_model=spec.agent_model,
        grader_model=spec.grader_model,
        grader_tools=list(spec.grader_tools),
        max_iterations=spec.max_iterations,
        agent_kind=spec.agent_kind,
        agent_system_prompt=spec.agent_system_prompt,
        grader_system_prompt=spec.grader_system_prompt,
        thread_id=thread_id,
        batch_id=batch_id,
    )
    handle = RunHandle(store, run_id, thread_id, stop_event or threading.Event())
    ckpt_path = checkpoint_path(store)
    try:
        checkpointer = _CHECKPOINTERS.acquire(ckpt_path, store)
        try:
            agent = build_agent(
                spec,
                checkpointer=checkpointer,
                on_evaluation=_recorder(store, run_id, on_evaluation, handle._record_failures),
                stop_event=handle._stop_event,
                agent_llm=agent_llm,
                grader_llm=grader_llm,
            )
        except BaseException:
            _CHECKPOINTERS.release(ckpt_path)
            raise
    except Exception as exc:
        store.finish_run(run_id, status="error", error=_error_text(exc))
        raise
    agent_input = {"messages": [HumanMessage(spec.input)], "rubric": version["text"]}
    return handle, agent, agent_input, ckpt_path


def _launch(store: Store, handle: RunHandle, agent: Any, agent_input: Any, path: str) -> None:
    thread = threading.Thread(
        target=_execute,
        args=(store, handle, agent, agent_input, path),
        name=f"rubric-run-{handle.run_id}",
        daemon=True,
    )
    handle._thread = thread
    thread.start()


def start_run(
    store: Store,
    spec: RunSpec,
    *,
    batch_id: str | None = None,
    on_evaluation: Callable[[RubricEvaluation], None] | None = None,
    stop_event: threading.Event | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> RunHandle:
    """Validate a spec, create its run row and execute it on a background thread.

    Every grading pass is committed to the store as it is graded; the run ends
    with its rubric status, `error` (the agent raised) or `interrupted` (stopped).

    Args:
        store: The store the run is recorded in.
        spec: What to run.
        batch_id: Groups runs of one batch.
        on_evaluation: Called (on the run's thread) after each pass is committed.
        stop_event: An event that stops the run when set (`RunHandle.stop()` sets it too).
        agent_llm: A model instance to use instead of resolving `spec.agent_model`.
        grader_llm: A model instance to use instead of resolving `spec.grader_model`.

    Raises:
        SpecError: The spec is invalid; nothing was created.

    Examples:
        >>> handle = start_run(store, spec)  # doctest: +SKIP
        >>> handle.wait(); store.get_run(handle.run_id)["status"]  # doctest: +SKIP
        'satisfied'
    """
    handle, agent, agent_input, path = _prepare(
        store,
        spec,
        batch_id=batch_id,
        on_evaluation=on_evaluation,
        stop_event=stop_event,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    _launch(store, handle, agent, agent_input, path)
    return handle


def run_once(
    store: Store,
    spec: RunSpec,
    *,
    on_evaluation: Callable[[RubricEvaluation], None] | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Run a spec to the end on the calling thread; returns `store.get_run(run_id)`.

    Examples:
        >>> run_once(store, spec)["status"]  # doctest: +SKIP
        'satisfied'
    """
    handle, agent, agent_input, path = _prepare(
        store,
        spec,
        batch_id=None,
        on_evaluation=on_evaluation,
        stop_event=None,
        agent_llm=agent_llm,
        grader_llm=grader_llm,
    )
    _execute(store, handle, agent, agent_input, path)
    return store.get_run(handle.run_id)


def spec_from_run(run: dict[str, Any], **overrides: Any) -> RunSpec:
    """Rebuild the spec of a stored run (`base_url`/`api_key` are not stored: pass them)."""
    tools = run.get("grader_tools") or ()
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            tools = [t for t in tools.split(",") if t]
    values: dict[str, Any] = {
        "rubric_version_id": run["rubric_version_id"],
        "input": run["input"],
        "agent_model": run["agent_model"],
        "grader_model": run["grader_model"],
        "grader_tools": tuple(tools),
        "max_iterations": run["max_iterations"],
        "agent_kind": run.get("agent_kind") or "basic",
        "agent_system_prompt": run.get("agent_system_prompt"),
        "grader_system_prompt": run.get("grader_system_prompt"),
        "base_url": run.get("base_url"),
    }
    values.update(overrides)
    return RunSpec(**values)


def resume_run(
    store: Store,
    run_id: int,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    on_evaluation: Callable[[RubricEvaluation], None] | None = None,
    agent_llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
) -> RunHandle:
    """Continue an `interrupted` (or `error`) run from its last checkpoint.

    The agent is rebuilt from the stored spec and invoked with `None` on the same
    LangGraph thread, so the same grading run goes on: passes already stored keep
    their iterations and new passes follow them. Replay models are fast-forwarded
    past the turns the stored part of the run consumed.

    Raises:
        SpecError: The run does not exist, is still running or finished cleanly,
            or has no checkpoint to resume from.
    """
    from rubric_core.store import StoreError

    try:
        run = store.get_run(run_id)
    except StoreError as exc:
        raise SpecError("run_id", f"no run with id {run_id}") from exc
    if run["status"] not in ("interrupted", "error"):
        raise SpecError(
            "run_id", f"run {run_id} is {run['status']!r}; only interrupted runs resume"
        )
    thread_id = run.get("thread_id")
    if not thread_id:
        raise SpecError("run_id", f"run {run_id} has no checkpoint thread to resume")
    overrides: dict[str, Any] = {"api_key": api_key}
    if base_url is not None:
        overrides["base_url"] = base_url
    spec = spec_from_run(run, **overrides)
    validate_spec(spec, store)
    evaluations = store.run_evaluations(run_id)
    if agent_llm is None or grader_llm is None:
        resolved_agent, resolved_grader = _resolve_models(spec)
        agent_llm = agent_llm or resolved_agent
        grader_llm = grader_llm or resolved_grader
    handle = RunHandle(store, run_id, thread_id, threading.Event())
    path = checkpoint_path(store)
    checkpointer = _CHECKPOINTERS.acquire(path, store)
    try:
        agent = build_agent(
            spec,
            checkpointer=checkpointer,
            on_evaluation=_recorder(store, run_id, on_evaluation, handle._record_failures),
            stop_event=handle._stop_event,
            agent_llm=agent_llm,
            grader_llm=grader_llm,
        )
        config = {"configurable": {"thread_id": thread_id}}
        snapshot = agent.get_state(config)
        if not snapshot.values:
            raise SpecError("run_id", f"run {run_id} has no checkpoint to resume from")
        messages = snapshot.values.get("messages") or []
        answers = sum(1 for m in messages if isinstance(m, AIMessage) and not _is_grader_message(m))
        attempts = sum(int(e.get("grader_attempts") or 1) for e in evaluations)
        _fast_forward_replay(agent_llm, answers, verdicts_only=False)
        _fast_forward_replay(grader_llm, attempts, verdicts_only=True)
        store.resume_run(run_id)
    except BaseException:
        _CHECKPOINTERS.release(path)
        raise
    _launch(store, handle, agent, None, path)
    return handle


# --------------------------------------------------------------------------- datasets


def _decode(path: Path, data: bytes) -> str:
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        msg = f"{path}: looks like a binary file (NUL bytes), not CSV or JSONL text"
        raise DatasetError(msg)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        msg = (
            f"{path}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}); save it as UTF-8"
        )
        raise DatasetError(msg) from exc


def _load_csv(path: Path, text: str) -> list[str]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        msg = f"{path}: line 1 is not valid CSV: {exc}"
        raise DatasetError(msg) from exc
    while header is not None and not any(cell.strip() for cell in header):
        header = next(reader, None)
    if header is None:
        msg = f"{path}: is empty; expected a header row with an 'input' column"
        raise DatasetError(msg)
    names = [cell.strip().lstrip("\ufeff").casefold() for cell in header]
    if "input" in names:
        column = names.index("input")
    elif len(names) == 1:
        column = 0
    else:
        msg = (
            f"{path}: has no 'input' column (columns: {', '.join(c.strip() for c in header)}); "
            "name the column holding the inputs 'input'"
        )
        raise DatasetError(msg)
    inputs: list[str] = []
    row_number = 1
    try:
        for row in reader:
            row_number += 1
            if not row:
                continue  # a blank line; a row of empty cells is an empty input
            value = row[column] if column < len(row) else ""
            _check_dataset_value(path, f"row {row_number} (line {reader.line_num})", value)
            inputs.append(value)
    except csv.Error as exc:
        msg = f"{path}: line {reader.line_num} is not valid CSV: {exc}"
        raise DatasetError(msg) from exc
    if not inputs:
        msg = f"{path}: has a header but no rows"
        raise DatasetError(msg)
    return inputs


def _check_dataset_value(path: Path, where: str, value: object) -> None:
    if not isinstance(value, str):
        msg = f"{path}: {where}: 'input' must be text, got {type(value).__name__}"
        raise DatasetError(msg)
    if not value.strip():
        msg = f"{path}: {where} has an empty input"
        raise DatasetError(msg)
    if len(value) > MAX_INPUT_CHARS:
        msg = (
            f"{path}: {where}: input is {len(value):,} characters; the limit is {MAX_INPUT_CHARS:,}"
        )
        raise DatasetError(msg)


def _load_jsonl(path: Path, text: str) -> list[str]:
    inputs: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{path}: line {number} is not valid JSON ({exc.msg} at column {exc.colno})"
            raise DatasetError(msg) from exc
        if isinstance(item, dict):
            if "input" not in item:
                keys = ", ".join(map(str, item)) or "none"
                msg = f"{path}: line {number} has no 'input' key (keys: {keys})"
                raise DatasetError(msg)
            item = item["input"]
        elif not isinstance(item, str):
            msg = (
                f"{path}: line {number} must be an object with an 'input' key or a string, "
                f"got {type(item).__name__}"
            )
            raise DatasetError(msg)
        _check_dataset_value(path, f"line {number}", item)
        inputs.append(item)
    if not inputs:
        msg = f"{path}: is empty; expected one JSON object or string per line"
        raise DatasetError(msg)
    return inputs


def load_dataset(path: str | Path) -> list[str]:
    """Read a dataset of inputs, one run per row.

    CSV: the first row is the header; the column named `input` is used, or the only
    column if there is one. JSONL: one `{"input": ...}` object or one JSON string per
    line. Blank lines are skipped; UTF-8 with or without a byte-order mark.

    Raises:
        DatasetError: Naming the file and the row or line that is wrong.

    Examples:
        >>> load_dataset("prompts.jsonl")  # doctest: +SKIP
        ['Write a haiku about rain', 'Write a haiku about snow']
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        msg = f"{path}: no such file"
        raise DatasetError(msg) from exc
    except IsADirectoryError as exc:
        msg = f"{path}: is a directory, not a dataset file"
        raise DatasetError(msg) from exc
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror})"
        raise DatasetError(msg) from exc
    text = _decode(path, data)
    if not text.strip():
        msg = f"{path}: is empty"
        raise DatasetError(msg)
    suffix = path.suffix.casefold()
    if suffix in _DATASET_SUFFIXES_JSONL:
        return _load_jsonl(path, text)
    if suffix in _DATASET_SUFFIXES_CSV:
        return _load_csv(path, text)
    msg = f"{path}: unknown dataset type {suffix or '(no extension)'!r}; use .csv or .jsonl"
    raise DatasetError(msg)


# --------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class BatchSummary:
    """What a batch of runs over one rubric version came to, computed from the store."""

    batch_id: str
    """Shared by every run of the batch."""

    total: int
    """Runs in the batch."""

    by_status: dict[str, int]
    """Number of runs per status."""

    satisfied_rate: float
    """Share of runs that ended `satisfied` (0.0 for an empty batch)."""

    mean_iterations_to_satisfied: float | None
    """Mean grading passes the satisfied runs took; `None` if none was satisfied."""

    iterations_to_satisfied: dict[int, int]
    """Passes taken -> number of satisfied runs that took that many."""

    criterion_pass_rates: list[dict[str, Any]]
    """`{criterion, passed, total, pass_rate}` over every pass of the batch."""

    grader_errors: int
    """Grading passes whose grader broke (result `grader_error`)."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    """`{run_id, input, error}` for runs that ended `error`."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "batch_id": self.batch_id,
            "total": self.total,
            "by_status": dict(self.by_status),
            "satisfied_rate": self.satisfied_rate,
            "mean_iterations_to_satisfied": self.mean_iterations_to_satisfied,
            "iterations_to_satisfied": {str(k): v for k, v in self.iterations_to_satisfied.items()},
            "criterion_pass_rates": list(self.criterion_pass_rates),
            "grader_errors": self.grader_errors,
            "errors": list(self.errors),
        }


def _iterations_of(store: Store, run: dict[str, Any]) -> int:
    value = run.get("iterations")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return len(store.run_evaluations(run["id"]))


def summary_for_batch(store: Store, batch_id: str) -> BatchSummary:
    """Compute a batch's summary from the store (the dashboard's Batch page uses this)."""
    total = store.count_runs(batch_id=batch_id)
    runs: list[dict[str, Any]] = []
    page = 500
    while len(runs) < total:
        chunk = store.list_runs(batch_id=batch_id, limit=page, offset=len(runs))
        if not chunk:
            break
        runs.extend(chunk)
    by_status = Counter(run["status"] for run in runs)
    satisfied_iterations = [
        _iterations_of(store, run) for run in runs if run["status"] == "satisfied"
    ]
    grader_errors = by_status.get("grader_error", 0)
    errors = [
        {"run_id": run["id"], "input": run.get("input", "")[:200], "error": run.get("error")}
        for run in runs
        if run["status"] == "error"
    ]
    rate = by_status.get("satisfied", 0) / len(runs) if runs else 0.0
    mean = statistics.fmean(satisfied_iterations) if satisfied_iterations else None
    return BatchSummary(
        batch_id=batch_id,
        total=len(runs),
        by_status=dict(sorted(by_status.items())),
        satisfied_rate=rate,
        mean_iterations_to_satisfied=mean,
        iterations_to_satisfied=dict(sorted(Counter(satisfied_iterations).items())),
        criterion_pass_rates=list(store.criterion_pass_rates(batch_id=batch_id)),
        grader_errors=grader_errors,
        errors=errors,
    )


ProgressCallback = Callable[[int, int, dict[str, Any]], None]
"""`progress(finished, total, run_row)`, called once per finished run."""

ModelFactory = Callable[[RunSpec], tuple["BaseChatModel", "BaseChatModel"]]
"""`factory(spec) -> (agent_model, grader_model)`: fresh instances for one run."""


def run_batch(
    store: Store,
    spec_template: RunSpec,
    inputs: Sequence[str],
    *,
    concurrency: int = 4,
    progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
    model_factory: ModelFactory | None = None,
    batch_id: str | None = None,
) -> BatchSummary:
    """Run one spec over many inputs, at most `concurrency` at a time; blocks until done.

    Every input becomes a run sharing one `batch_id`. The spec and every input are
    validated before the first run starts. Setting `stop_event` stops the running
    runs (`interrupted`) and starts no more.

    Args:
        store: The store the runs are recorded in.
        spec_template: The spec every run uses; its `input` is replaced per run.
        inputs: One input per run (see `load_dataset`).
        concurrency: Runs executing at once, 1..16.
        progress: `progress(finished, total, run_row)` after each run (from a worker thread).
        stop_event: Set it to stop the batch.
        model_factory: Builds fresh model instances per run (default: `resolve_model`).
        batch_id: Use this id instead of a new one.

    Raises:
        SpecError: The spec, `concurrency` or one of the inputs is invalid.

    Examples:
        >>> summary = run_batch(store, spec, load_dataset("prompts.csv"))  # doctest: +SKIP
        >>> summary.satisfied_rate  # doctest: +SKIP
        0.75
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise SpecError("concurrency", f"must be an integer, got {concurrency!r}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise SpecError(
            "concurrency", f"must be between 1 and {MAX_CONCURRENCY}, got {concurrency}"
        )
    inputs = list(inputs)
    if not inputs:
        raise SpecError("inputs", "the dataset has no inputs")
    for index, text in enumerate(inputs):
        _check_input(text, f"inputs[{index}]")
    validate_spec(spec_template.with_input(inputs[0]), store)
    batch_id = batch_id or f"batch-{uuid.uuid4().hex[:16]}"
    stop_event = stop_event or threading.Event()
    lock = threading.Lock()
    finished = 0
    total = len(inputs)

    def one(text: str) -> None:
        nonlocal finished
        if stop_event.is_set():
            return
        spec = spec_template.with_input(text)
        agent_llm = grader_llm = None
        if model_factory is not None:
            agent_llm, grader_llm = model_factory(spec)
        try:
            handle, agent, agent_input, path = _prepare(
                store,
                spec,
                batch_id=batch_id,
                on_evaluation=None,
                stop_event=stop_event,
                agent_llm=agent_llm,
                grader_llm=grader_llm,
                validate=False,
            )
        except Exception:
            logger.exception("batch %s: a run could not start", batch_id)
            return
        _execute(store, handle, agent, agent_input, path)
        if progress is not None:
            with lock:
                finished += 1
                count = finished
            try:
                progress(count, total, store.get_run(handle.run_id))
            except Exception:
                logger.exception("batch %s: progress callback raised", batch_id)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rubric-batch") as pool:
        futures = [pool.submit(one, text) for text in inputs]
        for future in futures:
            future.result()
    return summary_for_batch(store, batch_id)


def format_rate(value: float | None) -> str:
    """`0.6667` -> `'66.7%'`; `None` -> `'n/a'`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value * 100:.1f}%"


__all__ = [
    "AGENT_KINDS",
    "MAX_CONCURRENCY",
    "MAX_INPUT_CHARS",
    "MAX_ITERATIONS_LIMIT",
    "BatchSummary",
    "DatasetError",
    "RunHandle",
    "RunSpec",
    "SpecError",
    "StopRun",
    "build_agent",
    "checkpoint_path",
    "format_rate",
    "load_dataset",
    "resume_run",
    "run_batch",
    "run_once",
    "spec_from_run",
    "start_run",
    "summary_for_batch",
    "validate_spec",
]
