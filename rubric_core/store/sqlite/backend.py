"""The SQL of every store operation on SQLite: row layout (ISO-8601 text, JSON lists), queries."""

from __future__ import annotations

import datetime as dt
import json
import logging
import socket
import sqlite3
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from rubric_core.store.errors import unknown_rubric, unknown_run, unknown_version
from rubric_core.store.filters import RunFilters
from rubric_core.store.owner import Owner, pid_alive
from rubric_core.store.rows import CriterionRow, MessageRow, stored_verdict
from rubric_core.store.sqlite.connection import SQLiteConnections
from rubric_core.store.sqlite.migrations import apply_migrations

__all__ = ["SQLiteBackend"]

_log = logging.getLogger(__name__)

_RUN_COLUMNS = """
    r.id, r.rubric_id, rb.name AS rubric, r.rubric_version_id, rv.version AS rubric_version,
    r.input, r.agent_model, r.grader_model, r.grader_tools, r.max_iterations, r.agent_kind,
    r.agent_system_prompt, r.grader_system_prompt, r.thread_id, r.batch_id, r.status,
    r.iterations, r.last_result, r.started_at, r.finished_at, r.duration_s, r.final_output,
    r.error, r.agent_input_tokens, r.agent_output_tokens, r.grader_input_tokens,
    r.grader_output_tokens, r.pid, r.host, r.keep, r.score, r.best_iteration,
    r.regression_count
"""
_RUN_FROM = """
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
"""
_VERSION_SELECT = (
    "SELECT v.id, v.rubric_id, rb.name, v.version, v.text, v.criteria, v.note, v.created_at "
    "FROM rubric_versions v JOIN rubrics rb ON rb.id = v.rubric_id"
)


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _parse_iso(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _returned_id(cursor: sqlite3.Cursor) -> int:
    """The id an `INSERT ... RETURNING id` produced."""
    return int(cursor.fetchone()[0])


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
    return row


def _decode_version(row: dict[str, Any]) -> dict[str, Any]:
    row["criteria"] = json.loads(row["criteria"])
    return row


def _require_run(conn: sqlite3.Connection, run_id: int) -> None:
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        raise unknown_run(run_id)


def _replace_tags(conn: sqlite3.Connection, rubric_id: int, tags: list[str]) -> None:
    conn.execute("DELETE FROM rubric_tags WHERE rubric_id = ?", (rubric_id,))
    conn.executemany(
        "INSERT INTO rubric_tags (rubric_id, tag) VALUES (?, ?)",
        [(rubric_id, tag) for tag in tags],
    )


class SQLiteBackend:
    """Rubrics, runs, grading passes and transcripts in one SQLite file (via sqlite-utils).

    Opening applies pending migrations and marks runs of dead processes on this host
    `interrupted`.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float) -> None:
        self.path = path
        self.connections = SQLiteConnections(
            path, busy_timeout_s=busy_timeout_s, prepare=self._prepare
        )

    def _prepare(self, db: Database) -> None:
        apply_migrations(db)
        try:
            self._mark_interrupted(db)
        except sqlite3.OperationalError as exc:
            # Locked by another writer: leave them for the next open rather than fail.
            _log.warning("could not mark interrupted runs in %s: %s", self.path, exc)

    def _mark_interrupted(self, db: Database) -> int:
        host = socket.gethostname()
        rows = db.conn.execute(
            "SELECT id, pid, proc_start, started_at FROM runs WHERE status = 'running' AND host = ?",
            (host,),
        ).fetchall()
        dead = [row for row in rows if not pid_alive(row[1], row[2])]
        if not dead:
            return 0
        with db.atomic():
            for run_id, pid, _proc_start, started_at in dead:
                last = db.conn.execute(
                    "SELECT MAX(started_at + duration_s) FROM evaluations WHERE run_id = ?",
                    (run_id,),
                ).fetchone()[0]
                started = _parse_iso(started_at)
                finished = dt.datetime.fromtimestamp(last, dt.UTC) if last is not None else started
                db.conn.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = ?, duration_s = ?, "
                    "error = COALESCE(error, ?) WHERE id = ? AND status = 'running'",
                    (
                        finished.isoformat(timespec="microseconds"),
                        max(0.0, (finished - started).total_seconds()),
                        f"process {pid} on {host} exited while the run was in progress",
                        run_id,
                    ),
                )
        _log.info("marked %d run(s) interrupted in %s", len(dead), self.path)
        return len(dead)

    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""
        self.connections.close()

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only connection (rows as `sqlite3.Row`); the caller closes it."""
        return self.connections.connect_readonly()

    def _known_run(self, run_id: int) -> None:
        # Through `query`, so closed or vanished files are reported as every read reports them.
        if self.connections.query_one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is None:
            raise unknown_run(run_id)

    # --- rubrics ------------------------------------------------------------------------

    def save_rubric_version(
        self, name: str, text: str, criteria: list[str], *, note: str, tags: list[str] | None
    ) -> int:
        """Insert the next version unless the latest has this text; returns the version id."""

        def job(db: Database) -> int:
            conn = db.conn
            now = _now_iso()
            row = conn.execute("SELECT id FROM rubrics WHERE name = ?", (name,)).fetchone()
            if row is None:
                rubric_id = _returned_id(
                    conn.execute(
                        "INSERT INTO rubrics (name, created_at, updated_at) VALUES (?, ?, ?) "
                        "RETURNING id",
                        (name, now, now),
                    )
                )
            else:
                rubric_id = row[0]
            if tags is not None:
                _replace_tags(conn, rubric_id, tags)
            latest = conn.execute(
                "SELECT id, version, text FROM rubric_versions WHERE rubric_id = ? "
                "ORDER BY version DESC LIMIT 1",
                (rubric_id,),
            ).fetchone()
            if latest is not None and latest[2] == text:
                return int(latest[0])
            version_id = _returned_id(
                conn.execute(
                    "INSERT INTO rubric_versions (rubric_id, version, text, criteria, note, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        rubric_id,
                        (latest[1] if latest else 0) + 1,
                        text,
                        json.dumps(criteria, ensure_ascii=False),
                        note,
                        now,
                    ),
                )
            )
            conn.execute("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now, rubric_id))
            return version_id

        return self.connections.write(job)

    def set_rubric_tags(self, name: str, tags: list[str]) -> None:
        """Replace the tags of rubric `name`."""

        def job(db: Database) -> None:
            row = db.conn.execute("SELECT id FROM rubrics WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise unknown_rubric(name)
            _replace_tags(db.conn, row[0], tags)
            db.conn.execute("UPDATE rubrics SET updated_at = ? WHERE id = ?", (_now_iso(), row[0]))

        self.connections.write(job)

    def list_rubrics(self) -> list[dict[str, Any]]:
        """Every rubric with its sorted tags and latest version, by name."""
        rows = self.connections.query(
            """
            SELECT rb.id, rb.name,
                   (SELECT json_group_array(tag) FROM
                       (SELECT tag FROM rubric_tags t WHERE t.rubric_id = rb.id ORDER BY tag)
                   ) AS tags,
                   lv.version AS latest_version, lv.id AS latest_version_id,
                   (SELECT COUNT(*) FROM rubric_versions v WHERE v.rubric_id = rb.id) AS versions,
                   rb.updated_at
            FROM rubrics rb
            JOIN rubric_versions lv ON lv.id = (
                SELECT id FROM rubric_versions WHERE rubric_id = rb.id ORDER BY version DESC LIMIT 1
            )
            ORDER BY rb.name
            """
        )
        for row in rows:
            row["tags"] = json.loads(row["tags"])
        return rows

    def rubric_versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of rubric `name`, oldest first."""
        rows = self.connections.query(
            f"{_VERSION_SELECT} WHERE rb.name = ? ORDER BY v.version", (name,)
        )
        if not rows:
            raise unknown_rubric(name)
        return [_decode_version(row) for row in rows]

    def get_rubric_version(self, version_id: int) -> dict[str, Any]:
        """One version row by id."""
        row = self.connections.query_one(f"{_VERSION_SELECT} WHERE v.id = ?", (version_id,))
        if row is None:
            raise unknown_version(version_id)
        return _decode_version(row)

    # --- runs: writes -------------------------------------------------------------------

    def create_run(self, values: dict[str, Any], owner: Owner) -> int:
        """Insert a `running` run owned by `owner`; `values` are the `runs` columns given."""
        columns = {
            **values,
            "grader_tools": json.dumps(values["grader_tools"]),
            "started_at": _now_iso(),
            **owner._asdict(),
        }

        def job(db: Database) -> int:
            row = db.conn.execute(
                "SELECT rubric_id FROM rubric_versions WHERE id = ?",
                (columns["rubric_version_id"],),
            ).fetchone()
            if row is None:
                raise unknown_version(columns["rubric_version_id"])
            return _returned_id(
                db.conn.execute(
                    f"INSERT INTO runs ({', '.join(columns)}, rubric_id, status) "
                    f"VALUES ({', '.join('?' for _ in columns)}, ?, 'running') RETURNING id",
                    (*columns.values(), row[0]),
                )
            )

        return self.connections.write(job)

    def record_evaluation(
        self, run_id: int, values: dict[str, Any], criteria: list[CriterionRow]
    ) -> int:
        """Upsert one pass and its verdicts, then the run's pass count and grader tokens."""
        values = {**values, "run_id": run_id, "recorded_at": _now_iso()}
        columns = list(values)
        updates = ", ".join(
            f"{c} = excluded.{c}"
            for c in columns
            if c not in ("run_id", "grading_run_id", "iteration")
        )

        def job(db: Database) -> int:
            conn = db.conn
            _require_run(conn, run_id)
            evaluation_id = _returned_id(
                conn.execute(
                    f"INSERT INTO evaluations ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)}) "
                    f"ON CONFLICT (run_id, grading_run_id, iteration) DO UPDATE SET {updates} "
                    "RETURNING id",
                    list(values.values()),
                )
            )
            conn.execute("DELETE FROM criterion_results WHERE evaluation_id = ?", (evaluation_id,))
            conn.executemany(
                "INSERT INTO criterion_results (evaluation_id, position, run_id, criterion, "
                "passed, gap, weight, checked_by, insufficient) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(evaluation_id, row.position, run_id, *row[1:]) for row in criteria],
            )
            # The run's score is its latest pass's until finish_run says which draft it kept.
            conn.execute(
                """
                UPDATE runs SET
                    regression_count = (SELECT COALESCE(SUM(regression_count), 0)
                                        FROM evaluations WHERE run_id = ?1),
                    score = (SELECT score FROM evaluations WHERE run_id = ?1
                             ORDER BY started_at DESC, id DESC LIMIT 1)
                WHERE id = ?1
                """,
                (run_id,),
            )
            conn.execute(
                """
                UPDATE runs SET
                    iterations = agg.n, grader_input_tokens = agg.tin,
                    grader_output_tokens = agg.tout,
                    last_result = (SELECT result FROM evaluations WHERE run_id = ?1
                                   ORDER BY started_at DESC, id DESC LIMIT 1)
                FROM (SELECT COUNT(*) AS n, COALESCE(SUM(grader_input_tokens), 0) AS tin,
                             COALESCE(SUM(grader_output_tokens), 0) AS tout
                      FROM evaluations WHERE run_id = ?1) AS agg
                WHERE runs.id = ?1
                """,
                (run_id,),
            )
            return evaluation_id

        return self.connections.write(job)

    def save_transcript(self, run_id: int, messages: list[MessageRow]) -> None:
        """Replace the stored transcript of a run."""
        rows = [
            (
                *row[:6],
                json.dumps(row.tool_calls, ensure_ascii=False, default=str),
                row.tool_call_id,
            )
            for row in messages
        ]

        def job(db: Database) -> None:
            _require_run(db.conn, run_id)
            db.conn.execute("DELETE FROM transcript_messages WHERE run_id = ?", (run_id,))
            db.conn.executemany(
                "INSERT INTO transcript_messages (run_id, position, role, name, content, "
                "is_grader, tool_calls, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

        self.connections.write(job)

    def finish_run(self, run_id: int, values: dict[str, Any]) -> None:
        """Set a run's final columns (`values`), `finished_at` and `duration_s`."""

        def job(db: Database) -> None:
            row = db.conn.execute("SELECT started_at FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise unknown_run(run_id)
            finished = dt.datetime.now(dt.UTC)
            columns = {
                **values,
                "finished_at": finished.isoformat(timespec="microseconds"),
                "duration_s": max(0.0, (finished - _parse_iso(row[0])).total_seconds()),
            }
            db.conn.execute(
                f"UPDATE runs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                (*columns.values(), run_id),
            )

        self.connections.write(job)

    def resume_run(self, run_id: int, owner: Owner) -> None:
        """Mark a run `running` again, owned by `owner`."""

        def job(db: Database) -> None:
            _require_run(db.conn, run_id)
            db.conn.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL, duration_s = NULL, "
                "error = NULL, pid = ?, host = ?, proc_start = ? WHERE id = ?",
                (*owner, run_id),
            )

        self.connections.write(job)

    # --- runs: reads --------------------------------------------------------------------

    def run_filter_sql(self, filters: RunFilters) -> tuple[str, list[Any]]:
        """A `WHERE` clause over `runs r` for `filters`, and its parameters.

        Raises:
            StoreError: Unknown rubric or version.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if filters.rubric is not None:
            row = self.connections.query_one(
                "SELECT id FROM rubrics WHERE name = ?", (filters.rubric,)
            )
            if row is None:
                raise unknown_rubric(filters.rubric)
            clauses.append("r.rubric_id = ?")
            params.append(row["id"])
        if filters.version_id is not None:
            known = self.connections.query_one(
                "SELECT 1 FROM rubric_versions WHERE id = ?", (filters.version_id,)
            )
            if known is None:
                raise unknown_version(filters.version_id)
            clauses.append("r.rubric_version_id = ?")
            params.append(filters.version_id)
        if filters.model is not None:
            clauses.append("(r.agent_model = ? OR r.grader_model = ?)")
            params.extend([filters.model, filters.model])
        if statuses := filters.statuses():
            clauses.append(f"r.status IN ({', '.join('?' for _ in statuses)})")
            params.extend(statuses)
        since, until = filters.time_range()
        if since is not None:
            clauses.append("r.started_at >= ?")
            params.append(since)
        if until is not None:
            clauses.append("r.started_at < ?")
            params.append(until)
        if filters.batch_id is not None:
            clauses.append("r.batch_id = ?")
            params.append(filters.batch_id)
        return (" AND ".join(clauses) or "1"), params

    def get_run(self, run_id: int) -> dict[str, Any]:
        """One run, with its rubric's name and version."""
        row = self.connections.query_one(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE r.id = ?", (run_id,)
        )
        if row is None:
            raise unknown_run(run_id)
        return _decode_run(row)

    def list_runs(self, filters: RunFilters, *, limit: int, offset: int) -> list[dict[str, Any]]:
        """A page of matching runs, newest first (`started_at DESC, id DESC`)."""
        where, params = self.run_filter_sql(filters)
        rows = self.connections.query(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE {where} "
            "ORDER BY r.started_at DESC, r.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_decode_run(row) for row in rows]

    def count_runs(self, filters: RunFilters) -> int:
        """How many runs match."""
        where, params = self.run_filter_sql(filters)
        row = self.connections.query_one(f"SELECT COUNT(*) AS n FROM runs r WHERE {where}", params)
        return int(row["n"]) if row else 0

    def run_evaluations(self, run_id: int) -> list[dict[str, Any]]:
        """A run's passes, oldest first, each with its `criteria` verdicts."""
        self._known_run(run_id)
        evaluations = self.connections.query(
            "SELECT id, run_id, grading_run_id, iteration, result, status, explanation, draft, "
            "started_at, duration_s, grader_attempts, grader_input_tokens, grader_output_tokens, "
            "score, regressions, judges "
            "FROM evaluations WHERE run_id = ? ORDER BY started_at, id",
            (run_id,),
        )
        by_id: dict[int, dict[str, Any]] = {}
        for evaluation in evaluations:
            evaluation["criteria"] = []
            evaluation["regressions"] = json.loads(evaluation["regressions"] or "[]")
            judges = evaluation.pop("judges")
            if judges is not None:
                evaluation["judges"] = json.loads(judges)
            by_id[evaluation["id"]] = evaluation
        criteria = self.connections.query(
            "SELECT evaluation_id, criterion, passed, gap, weight, checked_by, insufficient "
            "FROM criterion_results "
            "WHERE evaluation_id IN (SELECT id FROM evaluations WHERE run_id = ?) "
            "ORDER BY evaluation_id, position",
            (run_id,),
        )
        for row in criteria:
            by_id[row["evaluation_id"]]["criteria"].append(stored_verdict(row))
        return evaluations

    def transcript(self, run_id: int) -> list[dict[str, Any]]:
        """A run's stored messages in order."""
        self._known_run(run_id)
        rows = self.connections.query(
            "SELECT position, role, name, content, is_grader, tool_calls, tool_call_id "
            "FROM transcript_messages WHERE run_id = ? ORDER BY position",
            (run_id,),
        )
        for row in rows:
            row["is_grader"] = bool(row["is_grader"])
            row["tool_calls"] = json.loads(row["tool_calls"])
        return rows

    def criterion_pass_rates(
        self, filters: RunFilters, *, final_only: bool
    ) -> list[dict[str, Any]]:
        """Per-criterion pass counts over the matching runs' passes, in rubric order."""
        where, params = self.run_filter_sql(filters)
        final = (
            " AND e.id = (SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id "
            "ORDER BY e2.started_at DESC, e2.id DESC LIMIT 1)"
            if final_only
            else ""
        )
        return self.connections.query(
            f"""
            SELECT cr.criterion AS criterion, SUM(cr.passed) AS passed, COUNT(*) AS total,
                   CAST(SUM(cr.passed) AS REAL) / COUNT(*) AS pass_rate,
                   MIN(cr.position) AS position
            FROM runs r
            JOIN evaluations e ON e.run_id = r.id
            JOIN criterion_results cr ON cr.evaluation_id = e.id
            WHERE {where}{final}
            GROUP BY cr.criterion
            ORDER BY position, criterion
            """,
            params,
        )
