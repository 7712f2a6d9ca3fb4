"""The option set `run` and `batch` share, and the one function that turns it into a `RunSpec`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import click

from rubric_core.cli.common import BadInput, load_scenario, version_row
from rubric_core.providers.spec import spec_kind
from rubric_core.schema import (
    AGENT_KINDS,
    CHECKS_GRADER,
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_ITERATIONS_LIMIT,
    REPLAY_PREFIX,
)

if TYPE_CHECKING:
    from rubric_core.runs import RunSpec
    from rubric_core.store import Store

__all__ = [
    "ExecutorOptions",
    "SpecOptions",
    "build_spec",
    "check_spec",
    "db_option",
    "executor_options",
    "rate_limit_options",
    "spec_options",
]


def db_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--db`: a SQLite store file or a `postgresql://` URL; unset, the store reads
    `$RUBRIC_STUDIO_DB` through `rubric_core.config`, as every caller does."""
    return click.option(
        "--db",
        type=str,
        default=None,
        help="SQLite store file, or a postgresql://user:password@host:port/db URL "
        "[default: $RUBRIC_STUDIO_DB, else ./rubric_studio.db].",
    )(function)


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a job (batch, grade, re-grade) runs: `--executor`, `--ray-address`, `--ray-task-cpus`."""

    executor: str = "thread"
    """`--executor`: `thread` (this process), `process` (worker processes) or `ray` (a Ray cluster)."""
    ray_address: str | None = None
    """`--ray-address` (also `$RUBRIC_STUDIO_RAY_ADDRESS`): the head node, `HOST:PORT`."""
    ray_task_cpus: float = 1.0
    """`--ray-task-cpus`: CPUs each Ray worker of a batch reserves."""

    def job_options(self) -> dict[str, Any]:
        """These options as `Job` fields (`Job(work, **executor.job_options(), ...)`)."""
        return {
            "executor": self.executor,
            "ray_address": self.ray_address,
            "ray_task_cpus": self.ray_task_cpus,
        }


_EXECUTOR_FIELDS = tuple(f.name for f in fields(ExecutorOptions))

_EXECUTOR_OPTIONS = (
    click.option(
        "--executor",
        type=click.Choice(("thread", "process", "ray")),
        default="thread",
        show_default=True,
        help="thread: runs in this process; process: worker processes, one per core; "
        "ray: Ray workers on a cluster, one input (row, grading) each at a time (needs a "
        "postgresql:// store).",
    ),
    click.option(
        "--ray-address",
        default=None,
        help="Head node of the Ray cluster, HOST:PORT (what `ray start --head` printed) "
        "[default: $RUBRIC_STUDIO_RAY_ADDRESS].",
    ),
    click.option(
        "--ray-task-cpus",
        type=click.FloatRange(min=0.01),
        default=1.0,
        show_default=True,
        help="CPUs each Ray worker reserves; below 1 lets a node run several at once.",
    ),
)


def executor_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Add the executor options to a command; it receives them as `executor`."""

    @functools.wraps(function)
    def command(**kwargs: Any) -> Any:
        executor = ExecutorOptions(**{name: kwargs.pop(name) for name in _EXECUTOR_FIELDS})
        return function(executor=executor, **kwargs)

    for option in reversed(_EXECUTOR_OPTIONS):
        command = option(command)
    return command


_RATE_LIMIT_OPTIONS = (
    click.option(
        "--rpm",
        type=int,
        default=None,
        help="Requests per minute to each model endpoint, shared by every run "
        "(threads, processes or Ray) [default: $RUBRIC_STUDIO_RATE_LIMIT_RPM, else unlimited].",
    ),
    click.option(
        "--tpm",
        type=int,
        default=None,
        help="Tokens per minute to each model endpoint, shared likewise "
        "[default: $RUBRIC_STUDIO_RATE_LIMIT_TPM, else unlimited].",
    ),
    click.option(
        "--learn-rate-limits/--no-learn-rate-limits",
        "learn_rate_limits",
        default=None,
        help="Take each endpoint's limits from its x-ratelimit-* headers (they only lower "
        "--rpm/--tpm) [default: $RUBRIC_STUDIO_RATE_LIMIT_LEARN, else off].",
    ),
)


def rate_limit_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--rpm`, `--tpm`, `--learn-rate-limits`; the command receives `rate_limit`
    (a `RateLimit`, or `None` when nothing limits it)."""

    @functools.wraps(function)
    def command(**kwargs: Any) -> Any:
        from rubric_core.errors import InputError
        from rubric_core.providers.ratelimit import rate_limit_from_env

        rpm, tpm = kwargs.pop("rpm"), kwargs.pop("tpm")
        try:
            limit = rate_limit_from_env(rpm, tpm, kwargs.pop("learn_rate_limits"))
        except InputError as exc:
            text = str(exc)
            if text.startswith(("rpm ", "tpm ")) and (rpm if text[0] == "r" else tpm) is not None:
                text = "--" + text
            raise BadInput(text) from exc
        return function(rate_limit=limit if limit.active else None, **kwargs)

    for option in reversed(_RATE_LIMIT_OPTIONS):
        command = option(command)
    return command


@dataclass(frozen=True)
class SpecOptions:
    """What `run` and `batch` were told about the run spec; `None` where nothing was given."""

    rubric_name: str | None = None
    """`--rubric`: a stored rubric's name."""
    rubric_version: int | None = None
    """`--version`: its version number (the latest when `None`)."""
    agent_model: str | None = None
    """`--agent-model`."""
    grader_model: str | None = None
    """`--grader-model`."""
    base_url: str | None = None
    """`--base-url`: one OpenAI-compatible endpoint for both models."""
    grader_tools: tuple[str, ...] = ()
    """`--grader-tool`, repeated."""
    max_iterations: int | None = None
    """`--max-iterations`."""
    agent_kind: str | None = None
    """`--agent-kind`."""
    agent_system_prompt: str | None = None
    """`--agent-system-prompt`."""
    grader_system_prompt: str | None = None
    """`--grader-system-prompt`."""
    scenario: str | None = None
    """`--scenario`: a bundled replay scenario that fills in what was not given."""
    keep: str | None = None
    """`--keep`: `last` or `best`, the draft a run that ends unmet hands back."""


_SPEC_FIELDS = tuple(f.name for f in fields(SpecOptions))

_SPEC_OPTIONS = (
    click.option("--rubric", "rubric_name", help="Name of a stored rubric."),
    click.option(
        "--version",
        "rubric_version",
        type=int,
        default=None,
        help="Rubric version number [default: the latest].",
    ),
    click.option(
        "--agent-model",
        default=None,
        help="Agent model: 'provider:model-id', 'replay:<scenario>' or a model at --base-url.",
    ),
    click.option(
        "--grader-model",
        "--grader",
        "grader_model",
        default=None,
        help=(
            "Grader model (same forms), or 'none': code checks only, for a rubric whose "
            "every criterion has a {check} [default for such a rubric]."
        ),
    ),
    click.option(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint (vLLM, llama.cpp, LM Studio, Ollama) for both models.",
    ),
    click.option(
        "--grader-tool",
        "grader_tools",
        multiple=True,
        help="A grader tool by name; repeat for several (see `scenarios` for examples).",
    ),
    click.option(
        "--max-iterations",
        type=int,
        default=None,
        help=(
            f"Grading passes allowed, 1-{MAX_ITERATIONS_LIMIT} [default: {DEFAULT_MAX_ITERATIONS}]."
        ),
    ),
    click.option(
        "--agent-kind",
        type=click.Choice(AGENT_KINDS),
        default=None,
        help="basic: create_agent; deep: create_deep_agent [default: basic].",
    ),
    click.option("--agent-system-prompt", default=None, help="System prompt of the agent."),
    click.option(
        "--grader-system-prompt", default=None, help="Grading instructions for the grader."
    ),
    click.option(
        "--keep",
        type=click.Choice(KEEP_CHOICES),
        default=None,
        help=(
            "Which draft a run that ends unmet hands back: the last, or the best-scoring "
            "pass's [default: last]."
        ),
    ),
    click.option(
        "--scenario",
        default=None,
        help=(
            "Fill rubric, input, models, tools and agent kind from a bundled replay "
            "scenario (offline demo); other options override it."
        ),
    ),
)


def spec_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Add the run-spec options and `--db` to a command; it receives them as `spec` and `db`.

    The command's other parameters pass through unchanged.
    """

    @functools.wraps(function)
    def command(**kwargs: Any) -> Any:
        spec = SpecOptions(**{name: kwargs.pop(name) for name in _SPEC_FIELDS})
        return function(spec=spec, **kwargs)

    for option in reversed((*_SPEC_OPTIONS, db_option)):
        command = option(command)
    return command


def _with_scenario(store: Store, options: SpecOptions) -> SpecOptions:
    """The options with what `--scenario` fills in; its rubric is saved if none was named."""
    name = options.scenario
    if not name:
        return options
    data = load_scenario(name)
    rubric_name = options.rubric_name
    if rubric_name is None:
        from rubric_core.providers.replay import (
            SCENARIO_RUBRIC_NOTE,
            SCENARIO_RUBRIC_TAGS,
            scenario_rubric_name,
        )

        rubric_name = scenario_rubric_name(name)
        try:
            store.rubrics.save_version(
                rubric_name, data["rubric"], tags=list(SCENARIO_RUBRIC_TAGS),
                note=SCENARIO_RUBRIC_NOTE,
            )  # fmt: skip
        except Exception as exc:
            raise BadInput(f"scenario {name!r}: {exc}") from exc
    replay = f"{REPLAY_PREFIX}{name}"
    return replace(
        options,
        rubric_name=rubric_name,
        agent_model=options.agent_model or replay,
        grader_model=options.grader_model or replay,
        grader_tools=options.grader_tools or tuple(data.get("grader_tools") or ()),
        agent_kind=options.agent_kind or data.get("agent_kind") or "basic",
        max_iterations=(
            data.get("max_iterations") if options.max_iterations is None else options.max_iterations
        ),
    )


def build_spec(store: Store, options: SpecOptions, input_text: str) -> RunSpec:
    """The `RunSpec` the options describe, for `input_text`.

    A `--scenario` saves its rubric (under the scenario's name, `scenario_rubric_name`,
    unless `--rubric` names one)
    and fills the models, tools, agent kind and iteration cap that were not given;
    models still unset come from `models.default_models()`.

    Raises:
        BadInput: No rubric was named, or the named rubric or version does not exist.
    """
    from rubric_core.grader.checked import checks_only_problem
    from rubric_core.providers import default_models
    from rubric_core.runs import RunSpec

    options = _with_scenario(store, options)
    if not options.rubric_name:
        raise BadInput("--rubric is required (or --scenario for an offline demo)")
    version = version_row(store, options.rubric_name, options.rubric_version)
    agent_model, grader_model = options.agent_model, options.grader_model
    if grader_model is None and checks_only_problem(str(version["text"])) is None:
        grader_model = CHECKS_GRADER  # every criterion has a code check: no judge needed
    if agent_model is None or grader_model is None:
        default_agent, default_grader = default_models()
        agent_model = agent_model or default_agent
        grader_model = grader_model or default_grader
    if options.base_url and all(
        spec_kind(m) in ("replay", "checks") for m in (agent_model, grader_model)
    ):
        raise BadInput(
            f"--base-url {options.base_url} would not be used: both models are replay models "
            f"({agent_model}, {grader_model}), which replay scripted turns offline; drop "
            "--base-url, or name a model served there with --agent-model or --grader-model"
        )
    return RunSpec(
        rubric_version_id=version["id"],
        input=input_text,
        agent_model=agent_model,
        grader_model=grader_model,
        grader_tools=tuple(options.grader_tools),
        max_iterations=(
            DEFAULT_MAX_ITERATIONS if options.max_iterations is None else options.max_iterations
        ),
        agent_kind=options.agent_kind or "basic",
        agent_system_prompt=options.agent_system_prompt,
        grader_system_prompt=options.grader_system_prompt,
        base_url=options.base_url,
        keep=options.keep or "last",
    )


def check_spec(store: Store, spec: RunSpec) -> None:
    """Validate a spec before anything starts.

    Raises:
        BadInput: With the `SpecError`'s message (the field and what is wrong).
    """
    from rubric_core.runs import SpecError, grader_problem, validate_spec

    try:
        validate_spec(spec, store)
    except SpecError as exc:
        raise BadInput(str(exc)) from exc
    problem = grader_problem(spec.grader_model, store.rubrics.version(spec.rubric_version_id))
    if problem is not None:
        raise BadInput(f"grader_model: {problem}")
