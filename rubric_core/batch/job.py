"""`Job`: one typed request for a batch, a grade or a re-grade, checked once when built.

The CLI and the pages build a `Job`; the library runs it (`run_batch`, `grade_outputs`,
`regrade`, `workbench.start_job`) on the executor it names, with the same resume,
progress, rate limit and stop as any other job. What to do is its `work`:

- `RunInputs`: an agent spec over many inputs (a batch);
- `GradeRows`: existing outputs graded, no agent (runs of kind `graded`);
- `RegradePasses`: stored passes graded again, stored as an experiment.

Everything that needs no store is checked here, in `__post_init__`, with an `InputError`
(a `SpecError`) naming the field; what needs the store (the spec's rubric version, the
rows' labels against the rubric) is checked when the job is prepared, before anything
is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.runs.spec import SpecError, check_input, validate_concurrency

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.runs.spec import RunSpec
    from rubric_core.store import RunFilters

__all__ = [
    "EXECUTORS",
    "MAX_SAMPLES",
    "GradeRows",
    "Grader",
    "GraderFactory",
    "Job",
    "ModelFactory",
    "RegradePasses",
    "RunInputs",
    "check_executor",
]

EXECUTORS = ("thread", "process", "ray")
"""Where a job's units execute: threads of this process, worker processes of this machine
(one per core, threads in each), or workers on a Ray cluster."""

MAX_SAMPLES = 20
"""Most gradings of one pass a grade or re-grade job may ask for (the middleware's bound)."""

ModelFactory = Callable[["RunSpec"], tuple["BaseChatModel", "BaseChatModel"]]
"""`factory(spec) -> (agent_model, grader_model)`: fresh instances for one run of a batch."""

GraderFactory = Callable[[], "BaseChatModel | None"]
"""Makes a fresh grader model per pass (a replay model's position belongs to its instance);
`None` for no grader (code checks only). Pickled to the workers of the process and Ray
executors, so there it must be a module-level function or a picklable object."""


def check_executor(executor: object) -> str:
    """`executor` if it is one of `EXECUTORS`, else a `SpecError` naming the choices.

    Examples:
        >>> check_executor("dask")
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: executor: must be 'thread', 'process' or 'ray', got 'dask'
    """
    if executor not in EXECUTORS:
        *others, last = (repr(name) for name in EXECUTORS)
        choices = f"{', '.join(others)} or {last}"
        raise SpecError("executor", f"must be {choices}, got {executor!r}")
    return str(executor)


def _text(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(name, f"must be non-empty text, got {value!r}")


@dataclass(frozen=True)
class Grader:
    """Who grades a grade or re-grade job: a model spec and how to reach and prompt it.

    Examples:
        >>> Grader("none").samples
        1
        >>> Grader("replay:haiku", samples=0)
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: grader.samples: must be an integer from 1 to 20, got 0
    """

    model: str
    """`"provider:model-id"`, `replay:<scenario>`, or `none` (code checks only)."""
    tools: tuple[str, ...] = ()
    """The grader's evidence tools, by name."""
    system_prompt: str | None = None
    samples: int = 1
    """Gradings per pass (grade: the judge's samples; re-grade: one experiment item each)."""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    factory: GraderFactory | None = field(default=None, compare=False)
    """Makes each pass's grader model instead of resolving `model`."""

    def __post_init__(self) -> None:
        _text(self.model, "grader.model")
        object.__setattr__(self, "tools", tuple(self.tools))
        for index, name in enumerate(self.tools):
            _text(name, f"grader.tools[{index}]")
        samples = self.samples
        if isinstance(samples, bool) or not isinstance(samples, int):
            samples = -1
        if not 1 <= samples <= MAX_SAMPLES:
            msg = f"must be an integer from 1 to {MAX_SAMPLES}, got {self.samples!r}"
            raise SpecError("grader.samples", msg)


@dataclass(frozen=True)
class RunInputs:
    """A batch: the agent spec `spec` run once per input (its `input` replaced per run)."""

    spec: RunSpec
    inputs: tuple[str, ...]
    """One input per run (see `load_dataset`); resuming, the same list again."""
    model_factory: ModelFactory | None = field(default=None, compare=False)
    """Builds fresh model instances per run (default: `resolve_model`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        if not self.inputs:
            raise SpecError("inputs", "the dataset has no inputs")
        for index, text in enumerate(self.inputs):
            check_input(text, f"inputs[{index}]")

    @property
    def total(self) -> int:
        return len(self.inputs)


@dataclass(frozen=True)
class GradeRows:
    """Existing outputs graded by `grader`, one pass per row, against a rubric version."""

    rows: tuple[Mapping[str, Any], ...]
    """`GradedRow`s, from `load_graded_dataset` / `load_graded_upload`."""
    rubric_version_id: int
    grader: Grader
    source: str = "dataset"
    """The reviewer name of the rows' labels (the file's name)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))
        if not self.rows:
            raise SpecError("rows", "no rows to grade")
        version: object = self.rubric_version_id
        if isinstance(version, bool) or not isinstance(version, int):
            raise SpecError("rubric_version_id", f"must be an integer id, got {version!r}")

    @property
    def total(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class RegradePasses:
    """Stored passes graded again by `grader`, stored as an experiment.

    Select them by `run_ids`, `batch_id` or `filters` (any one, or several to narrow);
    or continue experiment `experiment_id` (with `Job(resume=True)`): its own selection
    and settings, `grader` then giving only how to reach the model (`None`: as stored).
    """

    grader: Grader | None = None
    run_ids: tuple[int, ...] | None = None
    batch_id: str | None = None
    filters: RunFilters | None = None
    rubric_version_id: int | None = None
    """The version to grade against; default the runs' own. A version of their rubric."""
    all_passes: bool = False
    """Every stored pass, not only each run's final one."""
    name: str | None = None
    """The experiment's name (default: rubric@version by grader)."""
    experiment_id: int | None = None
    """The unfinished experiment a resumed job continues."""

    def __post_init__(self) -> None:
        if self.run_ids is not None:
            object.__setattr__(self, "run_ids", tuple(self.run_ids))
        if self.experiment_id is None and self.grader is None:
            raise SpecError("grader", "a re-grade needs a grader")


Work = RunInputs | GradeRows | RegradePasses


@dataclass(frozen=True)
class Job:
    """One batch, grade or re-grade request: what to do (`work`) and how to run it.

    Examples:
        >>> Job(RegradePasses(Grader("none"), batch_id="b"), concurrency=0)
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: concurrency: must be between 1 and 16, got 0
        >>> Job(RegradePasses(Grader("none"), batch_id="b"), resume=True)
        Traceback (most recent call last):
        ...
        rubric_core.runs.spec.SpecError: experiment_id: resuming a re-grade needs the experiment to continue
    """

    work: Work
    executor: str = "thread"
    """One of `EXECUTORS`. Out-of-process executors pickle the work to their workers."""
    concurrency: int = 4
    """Units (runs, rows, gradings) at once, 1..`MAX_CONCURRENCY` (`validate_concurrency`)."""
    rate_limit: RateLimit | None = None
    """Requests and tokens per minute per endpoint, shared by every unit on any executor."""
    batch_id: str | None = None
    """The batch id to use (required to resume a batch or a grade)."""
    resume: bool = False
    """Continue batch `batch_id` (or experiment `work.experiment_id`): finished units are
    skipped, interrupted ones continue."""
    ray_address: str | None = None
    """The Ray head node (`HOST:PORT`); default `$RUBRIC_STUDIO_RAY_ADDRESS`."""
    ray_task_cpus: float = 1.0
    """CPUs each Ray worker reserves (fractions let a node run several)."""

    def __post_init__(self) -> None:
        if not isinstance(self.work, RunInputs | GradeRows | RegradePasses):
            msg = f"must be RunInputs, GradeRows or RegradePasses, got {type(self.work).__name__}"
            raise SpecError("work", msg)
        check_executor(self.executor)
        validate_concurrency(self.concurrency)
        cpus: object = self.ray_task_cpus
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0:
            raise SpecError("ray_task_cpus", f"must be a positive number of CPUs, got {cpus!r}")
        if self.resume and isinstance(self.work, RegradePasses):
            if self.work.experiment_id is None:
                msg = "resuming a re-grade needs the experiment to continue"
                raise SpecError("experiment_id", msg)
        elif self.resume and not self.batch_id:
            raise SpecError("batch_id", "resuming a batch needs the batch_id of the one to resume")

    @property
    def kind(self) -> str:
        """`batch`, `grade` or `regrade`."""
        if isinstance(self.work, RunInputs):
            return "batch"
        return "grade" if isinstance(self.work, GradeRows) else "regrade"
