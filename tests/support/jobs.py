"""The tests' short forms of a `Job`: one call builds the job and runs it.

Each takes the job's parts as keywords, sorted into the `Job`, its work and its `Grader`
here, so a test names only what it is about (`batch(store, spec, inputs, concurrency=2)`).
"""

from __future__ import annotations

from typing import Any

from rubric_core.batch import Grader, GradeRows, Job, RegradePasses, RunInputs, run_batch
from rubric_core.workbench.grade import grade_file, grade_outputs
from rubric_core.workbench.regrade import regrade

_RUN = ("progress", "stop_event")
_GRADER = {
    "grader_model": "model",
    "grader_tools": "tools",
    "grader_system_prompt": "system_prompt",
    "samples": "samples",
    "base_url": "base_url",
    "api_key": "api_key",
    "grader_llm_factory": "factory",
}
_SELECTION = ("run_ids", "batch_id", "filters", "rubric_version_id", "all_passes", "name")


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run keywords, grader fields, job fields) out of `options`."""
    run = {key: options.pop(key) for key in _RUN if key in options}
    if "max_concurrency" in options:
        options["concurrency"] = options.pop("max_concurrency")
    grader = {_GRADER[key]: options.pop(key) for key in list(options) if key in _GRADER}
    if "tools" in grader:
        grader["tools"] = tuple(grader["tools"])
    return run, grader, options


def batch_of(store: Any, spec: Any, inputs: Any, **options: Any) -> Any:
    """`run_batch` of `spec` over `inputs`; `model_factory` goes to the `RunInputs`."""
    run, _, job = _split(options)
    work = RunInputs(spec, tuple(inputs), job.pop("model_factory", None))
    return run_batch(store, Job(work, **job), **run)


def grade_of(store: Any, rows: Any, *, rubric_version_id: int, **options: Any) -> Any:
    """`grade_outputs` of `rows`; `grader_*` keywords make its `Grader`."""
    run, grader, job = _split(options)
    source = job.pop("source", "dataset")
    work = GradeRows(tuple(rows), rubric_version_id, Grader(**grader), source=source)
    return grade_outputs(store, Job(work, **job), **run)


def grade_path(store: Any, path: str, *, rubric: str, **options: Any) -> Any:
    """`grade_file` of `path`; `grader_*` keywords make its `Grader`."""
    _, grader, job = _split(options)
    return grade_file(store, path, rubric=rubric, grader=Grader(**grader), **job)


def regrade_of(store: Any, **options: Any) -> Any:
    """`regrade` of the passes selected; `experiment_id` continues that experiment."""
    run, grader, job = _split(options)
    selection = {key: job.pop(key) for key in _SELECTION if key in job}
    if "run_ids" in selection and selection["run_ids"] is not None:
        selection["run_ids"] = tuple(selection["run_ids"])
    experiment_id = job.pop("experiment_id", None)
    work = RegradePasses(
        Grader(**grader) if "model" in grader else None,
        experiment_id=experiment_id,
        **selection,
    )
    if experiment_id is not None:
        job["resume"] = True
    return regrade(store, Job(work, **job), **run)
