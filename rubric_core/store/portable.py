"""Schema steps written once in SQL both backends run unchanged; each backend appends them.

A step here must use only what SQLite and PostgreSQL both accept: `ALTER TABLE ... ADD
COLUMN` with `INTEGER`/`TEXT`/`DOUBLE PRECISION` columns, `CREATE [UNIQUE] INDEX` (partial
ones too). A table needs an identity key, which the two spell differently, so a new table
is one `CREATE TABLE` per dialect in `sqlite/migrations.py` and `postgres/migrations.py`
under the same name. Append new steps; never edit an applied one.
"""

from __future__ import annotations

__all__ = ["PORTABLE_MIGRATIONS"]

PORTABLE_MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0006_runs_input_index",
        (
            # The position of a batch run's input; (batch, input) has at most one run, so a
            # retried task finds the run it started instead of adding a second one.
            "ALTER TABLE runs ADD COLUMN input_index INTEGER",
            "CREATE UNIQUE INDEX idx_runs_batch_input ON runs (batch_id, input_index) "
            "WHERE batch_id IS NOT NULL AND input_index IS NOT NULL",
        ),
    ),
)
"""(name, statements) in order, applied after each backend's own steps of lower number."""
