"""Batches: one run spec over many inputs, on threads, worker processes or a Ray cluster.

The modules, lowest first (each imports only those before it):

- `common`: what every executor shares: `ProgressCallback`, `ModelFactory`, checking a
  batch, running one input (`run_batch_input`), stopping (`mark_interrupted`).
- `summary`: `BatchSummary`, read back from the store.
- `worker`: the worker side of the out-of-process executors: a store per process, one input.
- `threads`: the default executor, threads of this process.
- `processes`: worker processes of this machine, one per core, threads in each.
- `ray_cluster`: one Ray task per input on a cluster (`ray` imported only there, when used).
- `run`: `run_batch`, which checks a batch and hands it to the executor named.
"""

from __future__ import annotations

from rubric_core.batch.common import (
    EXECUTORS,
    ModelFactory,
    ProgressCallback,
    mark_interrupted,
    new_batch_id,
    run_batch_input,
    validate_batch,
)
from rubric_core.batch.ray_cluster import RayUnavailable, check_ray_address
from rubric_core.batch.run import run_batch
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
    "ModelFactory",
    "ProgressCallback",
    "RayUnavailable",
    "check_ray_address",
    "format_rate",
    "mark_interrupted",
    "new_batch_id",
    "run_batch",
    "run_batch_input",
    "summary_for_batch",
    "validate_batch",
]
