"""Each run's final pass, kept on the run by triggers, so review queues need not look it up.

`runs.final_evaluation_id` is the run's final stored pass (latest `started_at`, then
highest id: the pass `review_items(final_only=True)` picks) and `runs.final_judged` is 1
when that pass has verdicts (a `grader_error` pass has none). Triggers on `evaluations`
and `criterion_results` keep both exact in the same transaction as the passes: a pass
added, removed or moved in time re-picks the run's final pass; a verdict added to or
removed from the final pass sets `final_judged`. With the index on
`(final_judged, rubric_version_id, final_evaluation_id)` the Review and Agreement pages
count and page a rubric version's queue from the index alone, at any store size.

Like `pass_counts`, it assumes what the store guarantees: a verdict's `run_id` is its
pass's run. Migration `0010_run_final_pass` adds the columns, fills them from the passes
stored so far, and creates the index and the triggers per dialect.
"""

from __future__ import annotations

__all__ = ["MIGRATION_NAME", "POSTGRES_STEPS", "SQLITE_STEPS"]

MIGRATION_NAME = "0010_run_final_pass"
"""The migration that adds the final-pass columns; both backends record it under this name."""

_FINAL_ID = (
    "(SELECT e.id FROM evaluations e WHERE e.run_id = runs.id "
    "ORDER BY e.started_at DESC, e.id DESC LIMIT 1)"
)

_JUDGED = (
    "CASE WHEN EXISTS (SELECT 1 FROM criterion_results c WHERE c.evaluation_id = {final}) "
    "THEN 1 ELSE 0 END"
)


def _resync(run: str) -> str:
    """Re-pick the final pass of run `run` (an SQL expression) and whether it is judged."""
    return (
        f"UPDATE runs SET final_evaluation_id = {_FINAL_ID}, "
        f"final_judged = {_JUDGED.format(final=_FINAL_ID)} WHERE id = {run}"
    )


_VERDICT_ADDED = (
    "UPDATE runs SET final_judged = 1 "
    "WHERE id = NEW.run_id AND final_evaluation_id = NEW.evaluation_id AND final_judged = 0"
)

_VERDICT_REMOVED = (
    f"UPDATE runs SET final_judged = {_JUDGED.format(final='OLD.evaluation_id')} "
    "WHERE id = OLD.run_id AND final_evaluation_id = OLD.evaluation_id"
)

_COMMON: tuple[str, ...] = (
    "ALTER TABLE runs ADD COLUMN final_evaluation_id BIGINT",
    "ALTER TABLE runs ADD COLUMN final_judged INTEGER NOT NULL DEFAULT 0",
    f"UPDATE runs SET final_evaluation_id = {_FINAL_ID}",
    f"UPDATE runs SET final_judged = {_JUDGED.format(final='runs.final_evaluation_id')}",
    # `final_judged` leads, so no query that does not ask for it takes this index for a
    # rubric-version lookup (SQLite, before `ANALYZE` has seen it, would think it selective).
    "CREATE INDEX idx_runs_final ON runs (final_judged, rubric_version_id, final_evaluation_id)",
)

SQLITE_STEPS: tuple[str, ...] = (
    *_COMMON,
    f"""CREATE TRIGGER run_final_pass_insert AFTER INSERT ON evaluations
BEGIN
    {_resync("NEW.run_id")};
END""",
    f"""CREATE TRIGGER run_final_pass_delete AFTER DELETE ON evaluations
BEGIN
    {_resync("OLD.run_id")};
END""",
    f"""CREATE TRIGGER run_final_pass_update AFTER UPDATE OF run_id, started_at ON evaluations
BEGIN
    {_resync("OLD.run_id")};
    {_resync("NEW.run_id")};
END""",
    f"""CREATE TRIGGER run_final_judged_insert AFTER INSERT ON criterion_results
BEGIN
    {_VERDICT_ADDED};
END""",
    f"""CREATE TRIGGER run_final_judged_delete AFTER DELETE ON criterion_results
BEGIN
    {_VERDICT_REMOVED};
END""",
    f"""CREATE TRIGGER run_final_judged_update
AFTER UPDATE OF evaluation_id, run_id ON criterion_results
BEGIN
    {_resync("OLD.run_id")};
    {_resync("NEW.run_id")};
END""",
)
"""SQLite: the columns, their backfill and index, and one trigger per kind of change."""

POSTGRES_STEPS: tuple[str, ...] = (
    *_COMMON,
    f"""CREATE FUNCTION run_final_pass_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        {_resync("OLD.run_id")};
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        {_resync("NEW.run_id")};
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER run_final_pass_sync
AFTER INSERT OR DELETE OR UPDATE OF run_id, started_at ON evaluations
FOR EACH ROW EXECUTE FUNCTION run_final_pass_sync()""",
    f"""CREATE FUNCTION run_final_judged_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_VERDICT_ADDED};
    ELSIF TG_OP = 'DELETE' THEN
        {_VERDICT_REMOVED};
    ELSE
        {_resync("OLD.run_id")};
        {_resync("NEW.run_id")};
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER run_final_judged_sync
AFTER INSERT OR DELETE OR UPDATE OF evaluation_id, run_id ON criterion_results
FOR EACH ROW EXECUTE FUNCTION run_final_judged_sync()""",
)
"""PostgreSQL: the same columns, backfill and index; one trigger function per table."""
