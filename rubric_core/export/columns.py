"""The export datasets and formats, their columns, and the checks every export makes first."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from rubric_core.store import RunFilters, StoreInputError

__all__ = [
    "DATASETS",
    "EXPORT_COLUMNS",
    "FETCH_ROWS",
    "FORMATS",
    "Dataset",
    "ExportError",
    "Format",
    "check_request",
]

Dataset = Literal["criteria", "runs"]
Format = Literal["csv", "jsonl"]

DATASETS: tuple[str, ...] = ("criteria", "runs")
"""`criteria`: one row per criterion per grading pass. `runs`: one row per run."""

FORMATS: tuple[str, ...] = ("csv", "jsonl")

_FILTER_NAMES = tuple(field.name for field in dataclasses.fields(RunFilters))
FETCH_ROWS = 1_000

EXPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    "criteria": (
        "run_id",
        "rubric",
        "rubric_version",
        "input",
        "agent_model",
        "grader_model",
        "grading_run_id",
        "iteration",
        "result",
        "status",
        "criterion",
        "passed",
        "gap",
        "explanation",
        "grader_input_tokens",
        "grader_output_tokens",
        "duration_s",
        "started_at",
        "weight",
        "checked_by",
        "score",
        "evaluation_id",
        "insufficient",
        "human_passed",
        "reviewer",
        "label_note",
        "run_status",
        "draft",
    ),
    "runs": (
        "run_id",
        "rubric",
        "rubric_version",
        "input",
        "agent_model",
        "grader_model",
        "grader_tools",
        "agent_kind",
        "max_iterations",
        "status",
        "iterations",
        "last_result",
        "final_criteria_passed",
        "final_criteria_total",
        "final_output",
        "error",
        "agent_input_tokens",
        "agent_output_tokens",
        "grader_input_tokens",
        "grader_output_tokens",
        "started_at",
        "finished_at",
        "duration_s",
        "thread_id",
        "batch_id",
        "keep",
        "score",
        "best_iteration",
        "regression_count",
    ),
}
"""Column order of each dataset, as written to CSV headers and JSONL objects.

`criteria` holds one row per criterion per pass, and one row for a pass that has no
verdicts (a `grader_error` pass: `result` says so, `explanation` holds the error, and the
verdict columns `criterion` to `gap`, `weight`, `checked_by`, `insufficient` and the label
are empty), so a dataset holds every pass. `criteria.status` is the loop's status after
that pass; `criteria.run_status` is the run's own (final) status, the one the `status`
filter selects on; `criteria.draft` is the answer the pass judged. `criteria.started_at`
is when the pass began (ISO-8601 UTC). `runs.status` is the run's final status and
`final_criteria_*` count the verdicts of its last pass. `criteria.weight` is the
criterion's rubric weight (negative: a penalty), `criteria.checked_by` is `code` when a
code check decided it, `criteria.score` the pass's score; `runs.score` is the score of
the draft the run handed back (its best pass's with `keep=best`), `runs.best_iteration`
that pass, and `runs.regression_count` its regressions (a criterion that passed in one pass and
failed in the next, counted once when it happens). `criteria.insufficient` says the
grader could not verify the criterion (then `passed` is false); `human_passed`, `reviewer`
and `label_note` hold the human label beside the judge's `passed` (empty when unlabelled),
and the file imports back with `python -m rubric_core label --input-file F`.

CSV is for spreadsheets: a text cell a spreadsheet would read as a formula starts with an
apostrophe (`neutralise_cell`). JSONL is for programs: its values are written as stored,
never neutralised, so do not open it in a spreadsheet.
"""


class ExportError(StoreInputError):
    """An export asked for an unknown dataset, format or filter (a `StoreError` of kind `invalid`)."""


def check_request(
    dataset: str, filters: RunFilters | None, filter_args: dict[str, Any]
) -> RunFilters:
    """Validate the dataset and the filters; the filters as one `RunFilters`."""
    if dataset not in DATASETS:
        msg = f"unknown export dataset {dataset!r}; choose one of {', '.join(DATASETS)}"
        raise ExportError(msg)
    unknown = sorted(set(filter_args) - set(_FILTER_NAMES))
    if unknown:
        msg = f"unknown export filter {', '.join(unknown)}; filters are {', '.join(_FILTER_NAMES)}"
        raise ExportError(msg)
    return RunFilters.from_args(filters, **filter_args)
