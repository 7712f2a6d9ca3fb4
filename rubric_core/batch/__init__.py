"""Jobs: a batch (one run spec over many inputs), a grade or a re-grade, on threads,
worker processes or a Ray cluster.

The modules, lowest first (each imports only those before it):

- `job`: `Job`, the one typed request (what to run: `RunInputs`, `GradeRows`,
  `RegradePasses`; the `Grader`; executor, concurrency, rate limit, resume), checked
  when built.
- `common`: what every executor shares: `Units` (a job cut into numbered units), `Drive`
  (concurrency, stop, progress, rate limit), a batch's units (`BatchInputs`, running one
  input: `run_batch_input`), stopping (`mark_interrupted`).
- `summary`: `BatchSummary`, read back from the store.
- `limits`: where a job's rate budget lives for each executor.
- `worker`: the worker side of the out-of-process executors: a store per process, one unit.
- `threads`: the default executor, threads of this process.
- `processes`: worker processes of this machine, one per core, threads in each.
- `ray_pool`, `ray_cluster`: the units on Ray workers of a cluster (`ray` imported only
  there, when used).
- `run`: `PreparedJob` (a job checked, its pending units, run on the executor named) and
  `run_batch`.
"""

from __future__ import annotations

from rubric_core.batch.common import (
    ProgressCallback,
    mark_interrupted,
    new_batch_id,
    run_batch_input,
)
from rubric_core.batch.job import (
    EXECUTORS,
    Grader,
    GraderFactory,
    GradeRows,
    Job,
    ModelFactory,
    RegradePasses,
    RunInputs,
)
from rubric_core.batch.ray_cluster import RayUnavailable, check_ray_address
from rubric_core.batch.run import PreparedJob, prepare_batch, run_batch
from rubric_core.batch.summary import (
    PASS_RATE_RULE,
    BatchSummary,
    format_rate,
    summary_for_batch,
)

__all__ = [
    "EXECUTORS",
    "PASS_RATE_RULE",
    "BatchSummary",
    "GradeRows",
    "Grader",
    "GraderFactory",
    "Job",
    "ModelFactory",
    "PreparedJob",
    "ProgressCallback",
    "RayUnavailable",
    "RegradePasses",
    "RunInputs",
    "check_ray_address",
    "format_rate",
    "mark_interrupted",
    "new_batch_id",
    "prepare_batch",
    "run_batch",
    "run_batch_input",
    "summary_for_batch",
]
