"""The workbench: the services the CLI and the dashboard's pages call.

The modules, lowest first (each imports only those before it):

- `datasets`: CSV/JSONL inputs from a file (`load_dataset`) or an upload (`load_upload`),
  and graded datasets (inputs with the outputs to grade, and their labels).
- `grade`: grade existing outputs with no agent (runs of kind `graded`), or by a person.
- `regrade`: stored drafts graded again with other settings, stored as an experiment.
- `background`: `start_job`, the one way a batch, grade or re-grade starts on a thread,
  and the registry of a long-lived process's jobs and runs (the dashboard's).
- `agreement`: a judge or an experiment against human labels or each other, from the
  store; the labels CSV import.

It is also the one front of the run and batch services for the dashboard and the CLI:
starting a run (`RunSpec`, `start_run`, `SpecError`), the job object (`Job` and its
work: `RunInputs`, `GradeRows`, `RegradePasses`, `Grader`) and a batch's summary and
executors are re-exported here from `rubric_core.runs` and `rubric_core.batch`, so a page imports
`rubric_core.ui`, `rubric_core.workbench` and the store, and nothing deeper.
"""

from __future__ import annotations

from rubric_core.batch import (
    EXECUTORS,
    BatchSummary,
    Grader,
    GradeRows,
    Job,
    RayUnavailable,
    RegradePasses,
    RunInputs,
    format_rate,
    run_batch,
    summary_for_batch,
)
from rubric_core.batch.ray_cluster import configured_ray_address, offered_executors
from rubric_core.providers.ratelimit import RateLimit, rate_limit_from_env
from rubric_core.runs import RunHandle, RunSpec, SpecError, resume_run, spec_from_run, start_run
from rubric_core.workbench.agreement import (
    NoLabelsError,
    agreement_between,
    agreement_with_labels,
    compare_stored_experiments,
    experiment_consistency,
    import_labels_csv,
    next_unlabelled,
)
from rubric_core.workbench.background import (
    JobHandle,
    RunRegistry,
    batch_progress,
    prepare_job,
    start_job,
)
from rubric_core.workbench.datasets import (
    DATASET_SUFFIXES,
    DatasetError,
    GradedRow,
    load_dataset,
    load_graded_dataset,
    load_graded_upload,
    load_upload,
)
from rubric_core.workbench.grade import (
    GradeSummary,
    GradingError,
    grade_by_person,
    grade_file,
    grade_one,
    grade_outputs,
    resolve_rubric,
)
from rubric_core.workbench.regrade import RegradeError, RegradeResult, regrade

__all__ = [
    "DATASET_SUFFIXES",
    "EXECUTORS",
    "BatchSummary",
    "DatasetError",
    "GradeRows",
    "GradeSummary",
    "GradedRow",
    "Grader",
    "GradingError",
    "Job",
    "JobHandle",
    "NoLabelsError",
    "RateLimit",
    "RayUnavailable",
    "RegradeError",
    "RegradePasses",
    "RegradeResult",
    "RunHandle",
    "RunInputs",
    "RunRegistry",
    "RunSpec",
    "SpecError",
    "agreement_between",
    "agreement_with_labels",
    "batch_progress",
    "compare_stored_experiments",
    "configured_ray_address",
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
    "offered_executors",
    "prepare_job",
    "rate_limit_from_env",
    "regrade",
    "resolve_rubric",
    "resume_run",
    "run_batch",
    "spec_from_run",
    "start_job",
    "start_run",
    "summary_for_batch",
]
