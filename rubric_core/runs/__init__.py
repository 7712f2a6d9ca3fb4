"""Runs: specs, agents built with the rubric middleware, execution, batches and datasets.

The modules, in the order a run flows through them:

- `spec`: `RunSpec` and its validation (`SpecError` names the bad field).
- `agents`: the agent a spec describes, with `RubricMiddleware` and a stop switch.
- `checkpoints`: the LangGraph checkpoint file beside the store, one saver per process.
- `recording`: the recorder that commits each grading pass to the store before the loop
  goes on (retrying, else stopping the run), and the passes a checkpoint kept.
- `execute`: `start_run`, `run_once`, `resume_run`, the `RunHandle`.
- `batch`: `run_batch` over many inputs (threads, or Ray with `executor="ray"`), resuming a
  batch, and the `BatchSummary` read back from the store.
- `ray_batch`: each input a Ray task recording into the shared store (`ray` imported lazily).
- `datasets`: CSV/JSONL inputs from a file (`load_dataset`) or an upload (`load_upload`).
- `background`: runs and batches kept by a long-lived process (the dashboard's).
- `grade`: grade existing outputs with no agent (runs of kind `graded`), or by a person.
- `regrade`: stored drafts graded again with other settings, stored as an experiment.
- `agreement`: judge or experiment against human labels or each other, from the store;
  the labels CSV import.

`MAX_ITERATIONS_LIMIT`, `MAX_CONCURRENCY` and `AGENT_KINDS` are defined in
`rubric_core.schema` and re-exported here for callers that import them with the runs.
"""

from __future__ import annotations

from rubric_core.runs.agents import StopRun, build_agent
from rubric_core.runs.agreement import (
    NoLabelsError,
    agreement_between,
    agreement_with_labels,
    compare_stored_experiments,
    experiment_consistency,
    import_labels_csv,
    next_unlabelled,
)
from rubric_core.runs.background import BatchJob, RunRegistry, batch_progress, start_batch
from rubric_core.runs.batch import (
    EXECUTORS,
    BatchSummary,
    ModelFactory,
    ProgressCallback,
    format_rate,
    run_batch,
    run_batch_input,
    summary_for_batch,
    validate_batch,
)
from rubric_core.runs.checkpoints import checkpoint_path
from rubric_core.runs.datasets import (
    DATASET_SUFFIXES,
    DatasetError,
    GradedRow,
    load_dataset,
    load_graded_dataset,
    load_graded_upload,
    load_upload,
)
from rubric_core.runs.execute import RunHandle, resume_run, run_once, start_run
from rubric_core.runs.grade import (
    GradeSummary,
    GradingError,
    grade_by_person,
    grade_file,
    grade_one,
    grade_outputs,
    resolve_rubric,
    start_graded_batch,
)
from rubric_core.runs.ray_batch import RayUnavailable, check_ray_address
from rubric_core.runs.regrade import RegradeError, RegradeJob, RegradeResult, regrade, start_regrade
from rubric_core.runs.spec import (
    MAX_INPUT_CHARS,
    RunSpec,
    SpecError,
    check_input,
    spec_from_run,
    validate_concurrency,
    validate_spec,
)
from rubric_core.schema import AGENT_KINDS, MAX_CONCURRENCY, MAX_ITERATIONS_LIMIT

__all__ = [
    "AGENT_KINDS",
    "DATASET_SUFFIXES",
    "EXECUTORS",
    "MAX_CONCURRENCY",
    "MAX_INPUT_CHARS",
    "MAX_ITERATIONS_LIMIT",
    "BatchJob",
    "BatchSummary",
    "DatasetError",
    "GradeSummary",
    "GradedRow",
    "GradingError",
    "ModelFactory",
    "NoLabelsError",
    "ProgressCallback",
    "RayUnavailable",
    "RegradeError",
    "RegradeJob",
    "RegradeResult",
    "RunHandle",
    "RunRegistry",
    "RunSpec",
    "SpecError",
    "StopRun",
    "agreement_between",
    "agreement_with_labels",
    "batch_progress",
    "build_agent",
    "check_input",
    "check_ray_address",
    "checkpoint_path",
    "compare_stored_experiments",
    "experiment_consistency",
    "format_rate",
    "grade_by_person",
    "grade_file",
    "grade_one",
    "grade_outputs",
    "import_labels_csv",
    "load_dataset",
    "load_graded_dataset",
    "load_graded_upload",
    "load_upload",
    "next_unlabelled",
    "regrade",
    "resolve_rubric",
    "resume_run",
    "run_batch",
    "run_batch_input",
    "run_once",
    "spec_from_run",
    "start_batch",
    "start_graded_batch",
    "start_regrade",
    "start_run",
    "summary_for_batch",
    "validate_batch",
    "validate_concurrency",
    "validate_spec",
]
