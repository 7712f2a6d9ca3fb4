"""Schema steps written once in SQL both backends run unchanged; each backend appends them.

A step here must use only what SQLite and PostgreSQL both accept: `ALTER TABLE ... ADD
COLUMN` with `INTEGER`/`TEXT`/`DOUBLE PRECISION` columns, `CREATE [UNIQUE] INDEX` (partial
ones too), a plain `UPDATE` of stored values. A table needs an identity key, which the two spell differently, so a new table
is one `CREATE TABLE` per dialect in `sqlite/migrations.py` and `postgres/migrations.py`
under the same name. Each backend applies its own steps and these in the order of their
names. Append new steps; never edit an applied one.
"""

from __future__ import annotations

__all__ = ["PORTABLE_MIGRATIONS"]

PORTABLE_MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        # Weighted scores per pass, regressions, code-checked criteria, keep
        # last/best. SQLite files record it by this name, so it keeps it. (SQLite first
        # shipped it with `REAL` columns; `DOUBLE PRECISION` has the same affinity there
        # and is PostgreSQL's 8-byte float, where `REAL` would be 4 bytes.)
        "0006_scores_checks_keep",
        (
            "ALTER TABLE evaluations ADD COLUMN score DOUBLE PRECISION",
            "ALTER TABLE evaluations ADD COLUMN regressions TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE evaluations ADD COLUMN regression_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE criterion_results ADD COLUMN weight INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE criterion_results ADD COLUMN checked_by TEXT",
            "ALTER TABLE runs ADD COLUMN keep TEXT NOT NULL DEFAULT 'last'",
            "ALTER TABLE runs ADD COLUMN score DOUBLE PRECISION",
            "ALTER TABLE runs ADD COLUMN best_iteration INTEGER",
            "ALTER TABLE runs ADD COLUMN regression_count INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    (
        # Batch inputs by position; numbered after 0007, the workbench's tables.
        "0008_runs_input_index",
        (
            # The position of a batch run's input; (batch, input) has at most one run, so a
            # retried task finds the run it started instead of adding a second one.
            "ALTER TABLE runs ADD COLUMN input_index INTEGER",
            "CREATE UNIQUE INDEX idx_runs_batch_input ON runs (batch_id, input_index) "
            "WHERE batch_id IS NOT NULL AND input_index IS NOT NULL",
        ),
    ),
    (
        # The process that grades a `running` experiment, as for runs: when it is gone,
        # opening the store marks the experiment `interrupted` (`regrade --resume` goes on).
        "0011_experiment_owner",
        (
            "ALTER TABLE experiments ADD COLUMN pid INTEGER",
            "ALTER TABLE experiments ADD COLUMN host TEXT",
            "ALTER TABLE experiments ADD COLUMN proc_start TEXT",
        ),
    ),
    (
        # One name for "code checks only": `gate --input-file` recorded `checks-only` where
        # everything else records `checks` (`schema.CHECKS_GRADER`); the Runs page's Model
        # filter listed both.
        "0012_checks_grader_name",
        (
            "UPDATE runs SET grader_model = 'checks' WHERE grader_model = 'checks-only'",
            "UPDATE experiments SET grader_model = 'checks' WHERE grader_model = 'checks-only'",
        ),
    ),
)
"""(name, statements), applied among each backend's own steps in name order."""
