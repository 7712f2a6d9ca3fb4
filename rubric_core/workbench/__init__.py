"""The workbench: the services the CLI and the dashboard's pages call.

The modules, lowest first (each imports only those before it):

- `datasets`: CSV/JSONL inputs from a file (`load_dataset`) or an upload (`load_upload`),
  and graded datasets (inputs with the outputs to grade, and their labels).
- `background`: runs and batches kept by a long-lived process (the dashboard's).
- `grade`: grade existing outputs with no agent (runs of kind `graded`), or by a person.
- `regrade`: stored drafts graded again with other settings, stored as an experiment.
- `agreement`: a judge or an experiment against human labels or each other, from the
  store; the labels CSV import.

It is also the one front of the run and batch services for the dashboard and the CLI:
starting a run (`RunSpec`, `start_run`, `SpecError`) and a batch's summary and executors
are re-exported here from `rubric_core.runs` and `rubric_core.batch`, so a page imports
`rubric_core.ui`, `rubric_core.workbench` and the store, and nothing deeper.
"""

from __future__ import annotations

from rubric_core.batch import (
    EXECUTORS,
    BatchSummary,
    RayUnavailable,
    format_rate,
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
from rubric_core.workbench.background import BatchJob, RunRegistry, batch_progress, start_batch
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
    start_graded_batch,
)
from rubric_core.workbench.regrade import RegradeError, RegradeResult, regrade
from rubric_core.workbench.regrade_job import RegradeJob, start_regrade

__all__ = [
    "DATASET_SUFFIXES",
    "EXECUTORS",
    "BatchJob",
    "BatchSummary",
    "DatasetError",
    "GradeSummary",
    "GradedRow",
    "GradingError",
    "NoLabelsError",
    "RateLimit",
    "RayUnavailable",
    "RegradeError",
    "RegradeJob",
    "RegradeResult",
    "RunHandle",
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
    "rate_limit_from_env",
    "regrade",
    "resolve_rubric",
    "resume_run",
    "spec_from_run",
    "start_batch",
    "start_graded_batch",
    "start_regrade",
    "start_run",
    "summary_for_batch",
]
