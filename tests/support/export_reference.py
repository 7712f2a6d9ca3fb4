"""The slow, obviously right criteria CSV export: the fast path in `rubric_core.export` must
write these bytes.

This is the export as it was before the fast path (one joined query, `csv.writer`, every cell
neutralised on its own), with the columns and rules added since: the run's status and the
judged draft on each row, a row for a pass without verdicts (LEFT JOIN), and the formula
rule of `neutralise_cell`. `bench/bench_export.py` times it as the baseline.
"""

from __future__ import annotations

import csv
import datetime as dt
from typing import IO, TYPE_CHECKING, Any

from rubric_core.export import EXPORT_COLUMNS, neutralise_cell

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

REFERENCE_SELECT = """
    SELECT r.id AS run_id, rb.name AS rubric, rv.version AS rubric_version, r.input,
           r.agent_model, r.grader_model, e.grading_run_id, e.iteration, e.result, e.status,
           cr.criterion, cr.passed, cr.gap, e.explanation, e.grader_input_tokens,
           e.grader_output_tokens, e.duration_s, e.started_at, cr.weight, cr.checked_by,
           e.score, e.id AS evaluation_id, cr.insufficient, lb.human_passed, lb.reviewer,
           lb.note AS label_note, r.status AS run_status, e.draft
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
    JOIN evaluations e ON e.run_id = r.id
    LEFT JOIN criterion_results cr ON cr.evaluation_id = e.id
    LEFT JOIN labels lb ON lb.evaluation_id = e.id AND lb.criterion = cr.criterion
    WHERE {where}
    ORDER BY r.started_at, r.id, e.started_at, e.id, cr.position
"""

_COLUMNS = EXPORT_COLUMNS["criteria"]
_FLAGS = tuple(_COLUMNS.index(name) for name in ("passed", "insufficient", "human_passed"))
_STARTED = _COLUMNS.index("started_at")


def _flag(value: Any) -> str | None:
    return None if value is None else ("true" if value else "false")


def reference_criteria_csv(store: Store, fp: IO[str], filters: RunFilters) -> int:
    """Write the criteria dataset the slow way; returns the rows written."""
    where, params = store.runs.filter_sql(filters)
    writer = csv.writer(fp, lineterminator="\r\n")
    writer.writerow(_COLUMNS)
    count = 0
    batches = store.stream_rows(REFERENCE_SELECT.format(where=where), params, size=1000)
    try:
        for batch in batches:
            for values in batch:
                cells = [neutralise_cell(v) if isinstance(v, str) else v for v in values]
                for index in _FLAGS:
                    cells[index] = _flag(cells[index])
                started = cells[_STARTED]
                cells[_STARTED] = dt.datetime.fromtimestamp(started, dt.UTC).isoformat(
                    timespec="microseconds"
                )
                writer.writerow(cells)
                count += 1
    finally:
        batches.close()
    return count
