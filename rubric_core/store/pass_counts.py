"""Per-criterion pass counts kept by triggers, so pass rates need not scan every verdict.

`criterion_pass_counts` holds, per rubric version, criterion and position, how many stored
verdicts passed and how many there are. Triggers on `criterion_results` keep it exact in
the same transaction as the verdicts themselves: an insert adds one, a delete takes one
away (and drops a row whose count reaches zero), an update does both. `record_evaluation`
replaces a pass's verdicts by delete-then-insert, so an upserted pass is counted once.

It answers the pass rates of every pass of a rubric version, a rubric, or the whole store
(the Runs page's default view, a version's and a rubric's summaries) in well under a
millisecond at any size. The filters it cannot serve (model, status, dates, batch, and
each run's final pass only) select runs or passes by columns the counts do not keep;
they fall back to the scan over the matching runs' verdicts (`SQLBackend.criterion_pass_rates`),
and BENCHMARKS.md gives both costs.

The summary assumes what the store guarantees: a verdict's `run_id` is its pass's run,
and a run's `rubric_version_id` never changes. Migration `0009_criterion_pass_counts`
creates the table and its triggers per dialect and fills it from the verdicts stored so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubric_core.store.filters import RunFilters

__all__ = [
    "MIGRATION_NAME",
    "POSTGRES_STEPS",
    "SQLITE_STEPS",
    "served_by_counts",
    "summary_pass_rates_sql",
]

MIGRATION_NAME = "0009_criterion_pass_counts"
"""The migration that adds the counts; both backends record it under this name."""

_TABLE = """CREATE TABLE criterion_pass_counts (
    rubric_version_id BIGINT NOT NULL,
    criterion TEXT NOT NULL,
    position INTEGER NOT NULL,
    passed BIGINT NOT NULL,
    total BIGINT NOT NULL,
    PRIMARY KEY (rubric_version_id, criterion, position)
)"""

_BACKFILL = """INSERT INTO criterion_pass_counts
    (rubric_version_id, criterion, position, passed, total)
SELECT r.rubric_version_id, cr.criterion, cr.position, SUM(cr.passed), COUNT(*)
FROM criterion_results cr JOIN runs r ON r.id = cr.run_id
GROUP BY r.rubric_version_id, cr.criterion, cr.position"""

_ADD = """INSERT INTO criterion_pass_counts
    (rubric_version_id, criterion, position, passed, total)
SELECT r.rubric_version_id, NEW.criterion, NEW.position, NEW.passed, 1
FROM runs r WHERE r.id = NEW.run_id
ON CONFLICT (rubric_version_id, criterion, position) DO UPDATE SET
    passed = criterion_pass_counts.passed + excluded.passed,
    total = criterion_pass_counts.total + 1"""

_KEY_OLD = """rubric_version_id = (SELECT r.rubric_version_id FROM runs r WHERE r.id = OLD.run_id)
    AND criterion = OLD.criterion AND position = OLD.position"""

_TAKE = f"""UPDATE criterion_pass_counts SET passed = passed - OLD.passed, total = total - 1
WHERE {_KEY_OLD}"""

_DROP_EMPTY = f"DELETE FROM criterion_pass_counts WHERE total <= 0 AND {_KEY_OLD}"

SQLITE_STEPS: tuple[str, ...] = (
    _TABLE + " WITHOUT ROWID",
    f"""CREATE TRIGGER criterion_pass_counts_insert AFTER INSERT ON criterion_results
BEGIN
    {_ADD};
END""",
    f"""CREATE TRIGGER criterion_pass_counts_delete AFTER DELETE ON criterion_results
BEGIN
    {_TAKE};
    {_DROP_EMPTY};
END""",
    f"""CREATE TRIGGER criterion_pass_counts_update
AFTER UPDATE OF run_id, criterion, position, passed ON criterion_results
BEGIN
    {_TAKE};
    {_DROP_EMPTY};
    {_ADD};
END""",
    _BACKFILL,
)
"""SQLite: the table (clustered on its key) and one trigger per kind of change."""

POSTGRES_STEPS: tuple[str, ...] = (
    _TABLE,
    f"""CREATE FUNCTION criterion_pass_counts_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        {_TAKE};
        {_DROP_EMPTY};
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        {_ADD};
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER criterion_pass_counts_sync
AFTER INSERT OR DELETE OR UPDATE OF run_id, criterion, position, passed ON criterion_results
FOR EACH ROW EXECUTE FUNCTION criterion_pass_counts_sync()""",
    _BACKFILL,
)
"""PostgreSQL: the table, one row-level trigger function for the three kinds of change."""


def served_by_counts(filters: RunFilters, *, final_only: bool = False) -> bool:
    """Whether the counts answer pass rates under `filters` (else the verdicts are scanned).

    They keep rubric versions only: the rubric and version filters are served; a model,
    status, date or batch filter, or counting only each run's final pass, is not.

    Examples:
        >>> from rubric_core.store.filters import RunFilters
        >>> served_by_counts(RunFilters()), served_by_counts(RunFilters(rubric="haiku"))
        (True, True)
        >>> served_by_counts(RunFilters(batch_id="b")), served_by_counts(RunFilters(), final_only=True)
        (False, False)
    """
    unserved = (filters.model, filters.status, filters.since, filters.until, filters.batch_id)
    return not final_only and all(value is None for value in unserved)


def summary_pass_rates_sql(rubric_id: int | None, version_id: int | None) -> tuple[str, list[Any]]:
    """The query over the counts (`?` placeholders) for a rubric and/or version, and its parameters.

    Its rows are the scan's: `criterion, passed, total, pass_rate, position`, in rubric
    order (lowest position, then name), one per criterion name.
    """
    clauses, params = [], []
    if rubric_id is not None:
        clauses.append("v.rubric_id = ?")
        params.append(rubric_id)
    if version_id is not None:
        clauses.append("c.rubric_version_id = ?")
        params.append(version_id)
    where = " AND ".join(clauses) or "1 = 1"
    join = " JOIN rubric_versions v ON v.id = c.rubric_version_id" if rubric_id is not None else ""
    sql = f"""
        SELECT c.criterion AS criterion, SUM(c.passed) AS passed, SUM(c.total) AS total,
               CAST(SUM(c.passed) AS DOUBLE PRECISION) / SUM(c.total) AS pass_rate,
               MIN(c.position) AS position
        FROM criterion_pass_counts c{join}
        WHERE {where}
        GROUP BY c.criterion
        ORDER BY position, criterion
    """
    return sql, params
