"""The export datasets' reads: long, streamed, oldest run first (`rubric_core.export` shapes them).

`criteria` is read as three cursors over one read snapshot, each ordered by run then
pass (the passes, their verdicts, their labels), for the export to merge; `runs` is one
cursor. Rows come as tuples in the column order each SELECT's docstring gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from rubric_core.store.filters import RunFilters
    from rubric_core.store.queries.runs import Runs
    from rubric_core.store.sqlbase import SQLBackend

__all__ = ["CriteriaStreams", "Exports"]

Batches = Generator[list[tuple[Any, ...]], None, None]
"""Rows of one read, a batch (list of tuples) at a time."""

_PASS_SELECT = """
    SELECT r.id, rb.name, rv.version, r.input, r.agent_model, r.grader_model,
           e.grading_run_id, e.iteration, e.result, e.status,
           e.explanation, e.grader_input_tokens, e.grader_output_tokens, e.duration_s,
           e.started_at, e.score, e.id, r.status, e.draft
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    JOIN evaluations e ON e.run_id = r.id
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id
"""
"""One row per pass: the cells every criterion row of the pass shares; the pass's id
(`evaluation_id`) at index 16, its `started_at` (epoch seconds) at 14."""

_CRITERION_SELECT = """
    SELECT cr.evaluation_id, cr.criterion, cr.passed, cr.gap, cr.weight, cr.checked_by,
           cr.insufficient
    FROM runs r
    JOIN evaluations e ON e.run_id = r.id
    JOIN criterion_results cr ON cr.evaluation_id = e.id
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id, cr.position
"""
"""The verdicts, in the passes' order (the same keys), so one merge pairs them."""

_LABEL_SELECT = """
    SELECT lb.evaluation_id, lb.criterion, lb.human_passed, lb.reviewer, lb.note
    FROM labels lb
    CROSS JOIN evaluations e
    CROSS JOIN runs r
    WHERE e.id = lb.evaluation_id AND r.id = e.run_id AND {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id
"""
"""Human labels, few beside the verdicts: read apart rather than joined to every verdict.

Driven from the labels (`CROSS JOIN` fixes SQLite's join order) and sorted: walking every
run in order to find the few labelled passes took 0.18 s on 1,000,000 passes with no label
at all, before the first row of any export or preview."""

_RUNS_SELECT = """
    SELECT r.id AS run_id, rb.name AS rubric, rv.version AS rubric_version, r.input,
           r.agent_model, r.grader_model, r.grader_tools, r.agent_kind, r.max_iterations,
           r.status, r.iterations, r.last_result,
           (SELECT SUM(cr.passed) FROM criterion_results cr WHERE cr.evaluation_id = le.id)
               AS final_criteria_passed,
           (SELECT COUNT(*) FROM criterion_results cr WHERE cr.evaluation_id = le.id)
               AS final_criteria_total,
           r.final_output, r.error, r.agent_input_tokens, r.agent_output_tokens,
           r.grader_input_tokens, r.grader_output_tokens, r.started_at, r.finished_at,
           r.duration_s, r.thread_id, r.batch_id, r.keep, r.score, r.best_iteration,
           r.regression_count
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    LEFT JOIN evaluations le ON le.id = r.final_evaluation_id
    WHERE {where}
    ORDER BY r.started_at, r.id
"""
"""One row per run, in the order of `EXPORT_COLUMNS["runs"]` (`grader_tools` as JSON text)."""


class CriteriaStreams(NamedTuple):
    """The three reads of the `criteria` dataset, each ordered by run then pass."""

    passes: Batches
    """`_PASS_SELECT`'s rows: one per pass."""
    verdicts: Batches
    """`_CRITERION_SELECT`'s rows: `evaluation_id` first, then the verdict."""
    labels: Batches
    """`_LABEL_SELECT`'s rows: `evaluation_id`, `criterion`, `human_passed`, `reviewer`, `note`."""


class Exports:
    """`Store.exports`: the export datasets' reads."""

    def __init__(self, backend: SQLBackend, runs: Runs) -> None:
        self._backend = backend
        self._runs = runs

    @contextlib.contextmanager
    def criteria_streams(self, filters: RunFilters, size: int) -> Iterator[CriteriaStreams]:
        """The passes, verdicts and labels of the matching runs, in one read snapshot.

        Passes and labels come `size` rows per batch, verdicts `4 * size`. The caller
        closes the streams before leaving the context (the snapshot ends with it).

        Raises:
            StoreError: A filter value is invalid.
        """
        where, params = self._runs.filter_sql(filters)
        with self._backend.snapshot() as stream:
            yield CriteriaStreams(
                stream(_PASS_SELECT.format(where=where), params, size),
                stream(_CRITERION_SELECT.format(where=where), params, size * 4),
                stream(_LABEL_SELECT.format(where=where), params, size),
            )

    def run_batches(self, filters: RunFilters, size: int) -> Batches:
        """The `runs` dataset's rows (`_RUNS_SELECT`), `size` per batch, on a read of its own.

        Raises:
            StoreError: A filter value is invalid.
        """
        where, params = self._runs.filter_sql(filters)
        return self._backend.stream(_RUNS_SELECT.format(where=where), params, max(1, size))
