"""The SQLite schema as named, transactional sqlite-utils migrations, applied on open."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from rubric_core.store import final_pass, pass_counts
from rubric_core.store.portable import PORTABLE_MIGRATIONS

__all__ = ["MIGRATIONS", "apply_migrations"]

MIGRATIONS = Migrations("rubric_studio")
"""Named, transactional schema migrations; append new steps, never edit applied ones.

SQLite's own steps (`_step`, below) and the portable ones (`store/portable.py`) are
registered together in the order of their names, which sqlite-utils applies them in (a
file records each by name, so one made by any earlier build migrates from where it is).
"""

_OWN: dict[str, Callable[[Database], None]] = {}


def _step(name: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    def register(function: Callable[[Database], None]) -> Callable[[Database], None]:
        _OWN[name] = function
        return function

    return register


@_step("0001_rubrics")
def _m0001_rubrics(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE rubrics (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE rubric_versions (
            id INTEGER PRIMARY KEY,
            rubric_id INTEGER NOT NULL REFERENCES rubrics(id),
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            criteria TEXT NOT NULL,  -- JSON list of criterion strings, rubric order
            note TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            UNIQUE (rubric_id, version)
        );
        CREATE TABLE rubric_tags (
            rubric_id INTEGER NOT NULL REFERENCES rubrics(id),
            tag TEXT NOT NULL,
            PRIMARY KEY (rubric_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX idx_rubric_tags_tag ON rubric_tags (tag);
        """
    )


@_step("0002_runs")
def _m0002_runs(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            rubric_id INTEGER NOT NULL REFERENCES rubrics(id),
            rubric_version_id INTEGER NOT NULL REFERENCES rubric_versions(id),
            input TEXT NOT NULL,
            agent_model TEXT NOT NULL,
            grader_model TEXT NOT NULL,
            grader_tools TEXT NOT NULL DEFAULT '[]',  -- JSON list of tool names
            max_iterations INTEGER NOT NULL,
            agent_kind TEXT NOT NULL,
            agent_system_prompt TEXT,
            grader_system_prompt TEXT,
            thread_id TEXT,
            batch_id TEXT,
            status TEXT NOT NULL,
            iterations INTEGER NOT NULL DEFAULT 0,
            last_result TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            duration_s REAL,
            final_output TEXT NOT NULL DEFAULT '',
            error TEXT,
            agent_input_tokens INTEGER NOT NULL DEFAULT 0,
            agent_output_tokens INTEGER NOT NULL DEFAULT 0,
            grader_input_tokens INTEGER NOT NULL DEFAULT 0,
            grader_output_tokens INTEGER NOT NULL DEFAULT 0,
            pid INTEGER,
            host TEXT,
            proc_start TEXT
        );
        CREATE INDEX idx_runs_started ON runs (started_at, id);
        CREATE INDEX idx_runs_rubric ON runs (rubric_id, started_at, id);
        CREATE INDEX idx_runs_version ON runs (rubric_version_id, started_at, id);
        CREATE INDEX idx_runs_status ON runs (status, started_at, id);
        CREATE INDEX idx_runs_agent_model ON runs (agent_model, started_at, id);
        CREATE INDEX idx_runs_grader_model ON runs (grader_model, started_at, id);
        CREATE INDEX idx_runs_batch ON runs (batch_id, started_at, id) WHERE batch_id IS NOT NULL;
        CREATE INDEX idx_runs_thread ON runs (thread_id) WHERE thread_id IS NOT NULL;
        """
    )


@_step("0003_evaluations")
def _m0003_evaluations(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE evaluations (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            grading_run_id TEXT NOT NULL,
            iteration INTEGER NOT NULL,
            result TEXT NOT NULL,
            status TEXT NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            draft TEXT NOT NULL DEFAULT '',
            started_at REAL NOT NULL,  -- Unix time, as in RubricEvaluation
            duration_s REAL NOT NULL DEFAULT 0,
            grader_attempts INTEGER NOT NULL DEFAULT 0,
            grader_input_tokens INTEGER NOT NULL DEFAULT 0,
            grader_output_tokens INTEGER NOT NULL DEFAULT 0,
            recorded_at TEXT NOT NULL,
            UNIQUE (run_id, grading_run_id, iteration)
        );
        CREATE INDEX idx_evaluations_run_time ON evaluations (run_id, started_at);
        -- Clustered by pass: a run's detail, the export and pass rates read ranges of it.
        CREATE TABLE criterion_results (
            evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
            position INTEGER NOT NULL,
            run_id INTEGER NOT NULL,
            criterion TEXT NOT NULL,
            passed INTEGER NOT NULL,
            gap TEXT,
            PRIMARY KEY (evaluation_id, position)
        ) WITHOUT ROWID;
        """
    )


@_step("0004_transcripts")
def _m0004_transcripts(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE transcript_messages (
            run_id INTEGER NOT NULL REFERENCES runs(id),
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            content TEXT NOT NULL DEFAULT '',
            is_grader INTEGER NOT NULL DEFAULT 0,
            tool_calls TEXT NOT NULL DEFAULT '[]',  -- JSON list of {name, args, id}
            tool_call_id TEXT,
            PRIMARY KEY (run_id, position)
        ) WITHOUT ROWID;
        """
    )


@_step("0005_runs_status_within_rubric_indexes")
def _m0005_runs_status_within_rubric(db: Database) -> None:
    # The Runs page filters a rubric (or version) by status; count it from the index alone.
    db.executescript(
        """
        CREATE INDEX idx_runs_rubric_status ON runs (rubric_id, status, started_at, id);
        CREATE INDEX idx_runs_version_status ON runs (rubric_version_id, status, started_at, id);
        """
    )


@_step("0007_insufficient_judges_labels_experiments")
def _m0007_workbench(db: Database) -> None:
    # The rubric testing workbench. Portable SQL (SQLite and PostgreSQL): the
    # booleans are 0/1 integers as in the tables above, JSON travels as text.
    # Early builds applied this as 0006_insufficient_judges_labels_experiments; a
    # store made by one already has it (under the old name) and is left as it is.
    if "labels" in db.table_names():
        return
    db.executescript(
        """
        ALTER TABLE criterion_results ADD COLUMN insufficient INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE evaluations ADD COLUMN judges TEXT;  -- JSON list of JudgeRecord, panels only
        -- One human label per pass and criterion; labelling it again replaces it.
        CREATE TABLE labels (
            evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
            criterion TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            human_passed INTEGER NOT NULL,
            reviewer TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            labelled_at TEXT NOT NULL,
            PRIMARY KEY (evaluation_id, criterion)
        );
        CREATE INDEX idx_labels_run ON labels (run_id, evaluation_id);
        -- A re-grading of stored passes with other settings; the source runs are not changed.
        CREATE TABLE experiments (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            rubric_id INTEGER NOT NULL REFERENCES rubrics(id),
            rubric_version_id INTEGER NOT NULL REFERENCES rubric_versions(id),
            grader_model TEXT NOT NULL,
            grader_system_prompt TEXT,
            grader_tools TEXT NOT NULL DEFAULT '[]',  -- JSON list of tool names
            samples INTEGER NOT NULL DEFAULT 1,
            all_passes INTEGER NOT NULL DEFAULT 0,
            source TEXT NOT NULL DEFAULT '{}',  -- JSON: how the passes were selected
            status TEXT NOT NULL,
            error TEXT,
            created_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX idx_experiments_rubric ON experiments (rubric_id, id);
        -- One grading of one source pass (sample 0..samples-1).
        CREATE TABLE experiment_items (
            id INTEGER PRIMARY KEY,
            experiment_id INTEGER NOT NULL REFERENCES experiments(id),
            evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
            run_id INTEGER NOT NULL REFERENCES runs(id),
            sample INTEGER NOT NULL DEFAULT 0,
            result TEXT NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            judges TEXT,
            started_at REAL NOT NULL,
            duration_s REAL NOT NULL DEFAULT 0,
            grader_attempts INTEGER NOT NULL DEFAULT 0,
            grader_input_tokens INTEGER NOT NULL DEFAULT 0,
            grader_output_tokens INTEGER NOT NULL DEFAULT 0,
            UNIQUE (experiment_id, evaluation_id, sample)
        );
        CREATE TABLE experiment_criteria (
            item_id INTEGER NOT NULL REFERENCES experiment_items(id),
            position INTEGER NOT NULL,
            criterion TEXT NOT NULL,
            passed INTEGER NOT NULL,
            insufficient INTEGER NOT NULL DEFAULT 0,
            gap TEXT,
            PRIMARY KEY (item_id, position)
        );
        """
    )


@_step(pass_counts.MIGRATION_NAME)
def _m0009_criterion_pass_counts(db: Database) -> None:
    # Pass rates from counts kept by triggers (see store/pass_counts.py).
    for statement in pass_counts.SQLITE_STEPS:
        db.execute(statement)


@_step(final_pass.MIGRATION_NAME)
def _m0010_run_final_pass(db: Database) -> None:
    # Each run's final pass kept on the run (see store/final_pass.py).
    for statement in final_pass.SQLITE_STEPS:
        db.execute(statement)


def _portable_step(statements: tuple[str, ...]) -> Callable[[Database], None]:
    def step(db: Database) -> None:
        for statement in statements:
            db.execute(statement)

    return step


# The portable steps keep their names, the ones SQLite files already record as applied
# (0006_scores_checks_keep is older than the PostgreSQL backend), so a file migrates from wherever it stands.
_STEPS = {**_OWN, **{name: _portable_step(sql) for name, sql in PORTABLE_MIGRATIONS}}
if len(_STEPS) != len(_OWN) + len(PORTABLE_MIGRATIONS):  # pragma: no cover
    msg = "a migration name is used twice"
    raise RuntimeError(msg)
for _name in sorted(_STEPS):
    MIGRATIONS(name=_name)(_STEPS[_name])


def apply_migrations(db: Database) -> None:
    """Apply every pending migration; a race with another process migrating is retried once."""
    for attempt in range(2):
        try:
            MIGRATIONS.apply(db)
            return
        except sqlite3.OperationalError as exc:
            # Another process migrated the same file at the same moment: look again.
            if attempt or "already exists" not in str(exc):
                raise
