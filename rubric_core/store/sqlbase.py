"""The SQL of every store operation, written once for both backends (SQLite and PostgreSQL).

Queries use `?` placeholders and portable SQL (`INSERT ... ON CONFLICT ... RETURNING`,
`UPDATE ... FROM`, partial indexes); a backend turns `?` into its own style (`Tx`). Both
schemas keep the same column types where it matters to the queries: timestamps as
ISO-8601 UTC text (ordering and filters compare text), JSON lists as text, booleans as
integers (summed in pass rates). The few differences live in `Dialect`.

A backend subclasses `SQLBackend` and supplies three things: `_write` (run a job in one
committed transaction), `_query` (one read, rows as dicts) and `stream` (a long read, in
batches of tuples).
"""

from __future__ import annotations

import abc
import datetime as dt
import json
import logging
import socket
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rubric_core.store.errors import unknown_rubric, unknown_run, unknown_version
from rubric_core.store.filters import RunFilters
from rubric_core.store.owner import Owner, pid_alive
from rubric_core.store.pass_counts import served_by_counts, summary_pass_rates_sql
from rubric_core.store.rows import CriterionRow, MessageRow, stored_verdict

__all__ = ["Dialect", "SQLBackend", "Tx", "now_iso", "parse_iso", "returned_id"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

SnapshotStream = Callable[[str, Sequence[Any], int], Generator[list[tuple[Any, ...]], None, None]]
"""`stream(sql, params, size)` inside `SQLBackend.snapshot`: batches of `size` tuples."""

_RUN_COLUMNS = """
    r.id, r.rubric_id, rb.name AS rubric, r.rubric_version_id, rv.version AS rubric_version,
    r.input, r.agent_model, r.grader_model, r.grader_tools, r.max_iterations, r.agent_kind,
    r.agent_system_prompt, r.grader_system_prompt, r.thread_id, r.batch_id, r.input_index,
    r.status, r.iterations, r.last_result, r.started_at, r.finished_at, r.duration_s,
    r.final_output, r.error, r.agent_input_tokens, r.agent_output_tokens,
    r.grader_input_tokens, r.grader_output_tokens, r.pid, r.host, r.keep, r.score,
    r.best_iteration, r.regression_count
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
_BATCH_KEY = "(batch_id, input_index) WHERE batch_id IS NOT NULL AND input_index IS NOT NULL"
_ENDED = ("satisfied", "failed", "grader_error", "max_iterations_reached", "error")


@dataclass(frozen=True)
class Dialect:
    """What differs between the backends' SQL.

    Attributes:
        name: `sqlite` or `postgres`.
        lock_row: Appended to a `SELECT` that must lock the row it reads until commit
            (SQLite has one writer, so nothing; PostgreSQL `FOR UPDATE`).
    """

    name: str
    lock_row: str = ""


class Tx(Protocol):
    """One open transaction of a backend; SQL in `?` style."""

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run `sql`; its first row, or None."""

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run `sql`; all its rows."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run `sql`, a statement without rows."""

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `sql` once per parameter row."""


def now_iso() -> str:
    """Now, as the ISO-8601 UTC text every timestamp column holds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def parse_iso(value: str) -> dt.datetime:
    """A stored timestamp as an aware datetime (naive text is taken as UTC)."""
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def returned_id(row: tuple[Any, ...] | None) -> int:
    """The id an `INSERT ... RETURNING id` (or a `SELECT id`) produced."""
    if row is None:  # pragma: no cover - RETURNING always yields a row here
        msg = "INSERT ... RETURNING gave no row"
        raise RuntimeError(msg)
    return int(row[0])


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
    return row


def _decode_version(row: dict[str, Any]) -> dict[str, Any]:
    row["criteria"] = json.loads(row["criteria"])
    return row


def _transcript_params(messages: list[MessageRow]) -> list[tuple[Any, ...]]:
    return [
        (
            *row[:5],
            int(row.is_grader),
            json.dumps(row.tool_calls, ensure_ascii=False, default=str),
            row.tool_call_id,
        )
        for row in messages
    ]


def _replace_transcript(tx: Tx, run_id: int, rows: list[tuple[Any, ...]]) -> None:
    tx.run("DELETE FROM transcript_messages WHERE run_id = ?", (run_id,))
    tx.many(
        "INSERT INTO transcript_messages (run_id, position, role, name, content, "
        "is_grader, tool_calls, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def _require_run(tx: Tx, run_id: int) -> None:
    if tx.one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is None:
        raise unknown_run(run_id)


def _replace_tags(tx: Tx, rubric_id: int, tags: list[str]) -> None:
    tx.run("DELETE FROM rubric_tags WHERE rubric_id = ?", (rubric_id,))
    tx.many(
        "INSERT INTO rubric_tags (rubric_id, tag) VALUES (?, ?)",
        [(rubric_id, tag) for tag in tags],
    )


def mark_interrupted(tx: Tx, where: str) -> int:
    """Mark `interrupted` the `running` runs of dead processes on this host; how many.

    Runs owned by other hosts are left alone: their pid cannot be checked from here.
    """
    host = socket.gethostname()
    rows = tx.all(
        "SELECT id, pid, proc_start, started_at FROM runs WHERE status = 'running' AND host = ?",
        (host,),
    )
    dead = [row for row in rows if not pid_alive(row[1], row[2])]
    for run_id, pid, _proc_start, started_at in dead:
        last = tx.one(
            "SELECT MAX(started_at + duration_s) FROM evaluations WHERE run_id = ?", (run_id,)
        )
        started = parse_iso(started_at)
        end = last[0] if last is not None else None
        finished = dt.datetime.fromtimestamp(end, dt.UTC) if end is not None else started
        tx.run(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, duration_s = ?, "
            "error = COALESCE(error, ?) WHERE id = ? AND status = 'running'",
            (
                finished.isoformat(timespec="microseconds"),
                max(0.0, (finished - started).total_seconds()),
                f"process {pid} on {host} exited while the run was in progress",
                run_id,
            ),
        )
    if dead:
        _log.info("marked %d run(s) interrupted in %s", len(dead), where)
    return len(dead)


class SQLBackend(abc.ABC):
    """Every store operation in portable SQL, over a backend's transactions and reads."""

    dialect: Dialect

    refusal: str | None = None
    """Why every write is refused (a newer version migrated the database), or None."""

    @abc.abstractmethod
    def _write(self, job: Callable[[Tx], _T]) -> _T:
        """Run `job` in one transaction; return its result once committed."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read, as dicts."""

    @abc.abstractmethod
    def stream(
        self, sql: str, params: Sequence[Any], size: int
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A long read on a connection of its own, `size` rows (tuples) per batch."""

    @abc.abstractmethod
    def snapshot(self) -> AbstractContextManager[SnapshotStream]:
        """One read-only transaction on a connection of its own, for several long reads
        that must see the same data: the context gives a `stream(sql, params, size)`
        whose cursors (open at the same time if need be) all read one snapshot."""

    @abc.abstractmethod
    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""

    def write(self, job: Callable[[Tx], _T]) -> _T:
        """Run `job` (SQL in `?` style through its `Tx`) in one transaction; its result once
        committed. For the store modules beside the facade (`labels`, `experiments`)."""
        return self._write(job)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read (SQL in `?` style), as dicts."""
        return self._query(sql, params)

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of one read, or None."""
        rows = self._query(sql, params)
        return rows[0] if rows else None

    def _known_run(self, run_id: int) -> None:
        if self.query_one("SELECT 1 AS one FROM runs WHERE id = ?", (run_id,)) is None:
            raise unknown_run(run_id)

    # --- rubrics ------------------------------------------------------------------------

    def save_rubric_version(
        self, name: str, text: str, criteria: list[str], *, note: str, tags: list[str] | None
    ) -> int:
        """Insert the next version unless the latest has this text; returns the version id."""
        lock = self.dialect.lock_row

        def job(tx: Tx) -> int:
            now = now_iso()
            tx.one(
                "INSERT INTO rubrics (name, created_at, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING RETURNING id",
                (name, now, now),
            )
            rubric_id = returned_id(tx.one(f"SELECT id FROM rubrics WHERE name = ?{lock}", (name,)))
            if tags is not None:
                _replace_tags(tx, rubric_id, tags)
            latest = tx.one(
                "SELECT id, version, text FROM rubric_versions WHERE rubric_id = ? "
                "ORDER BY version DESC LIMIT 1",
                (rubric_id,),
            )
            if latest is not None and latest[2] == text:
                return int(latest[0])
            version_id = returned_id(
                tx.one(
                    "INSERT INTO rubric_versions (rubric_id, version, text, criteria, note, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
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
            tx.run("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now, rubric_id))
            return version_id

        return self._write(job)

    def set_rubric_tags(self, name: str, tags: list[str]) -> None:
        """Replace the tags of rubric `name`."""

        def job(tx: Tx) -> None:
            row = tx.one(f"SELECT id FROM rubrics WHERE name = ?{self.dialect.lock_row}", (name,))
            if row is None:
                raise unknown_rubric(name)
            _replace_tags(tx, row[0], tags)
            tx.run("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now_iso(), row[0]))

        self._write(job)

    def list_rubrics(self) -> list[dict[str, Any]]:
        """Every rubric with its sorted tags and latest version, by name."""
        rows = self._query(
            """
            SELECT rb.id, rb.name, lv.version AS latest_version, lv.id AS latest_version_id,
                   (SELECT COUNT(*) FROM rubric_versions v WHERE v.rubric_id = rb.id) AS versions,
                   rb.updated_at
            FROM rubrics rb
            JOIN rubric_versions lv ON lv.id = (
                SELECT id FROM rubric_versions WHERE rubric_id = rb.id ORDER BY version DESC LIMIT 1
            )
            ORDER BY rb.name
            """
        )
        tags: dict[int, list[str]] = {}
        for tag in self._query("SELECT rubric_id, tag FROM rubric_tags ORDER BY rubric_id, tag"):
            tags.setdefault(tag["rubric_id"], []).append(tag["tag"])
        return [
            {
                "id": row["id"],
                "name": row["name"],
                "tags": tags.get(row["id"], []),
                **{k: row[k] for k in ("latest_version", "latest_version_id", "versions")},
                "updated_at": row["updated_at"],
            }
            for row in rows
        ]

    def rubric_versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of rubric `name`, oldest first."""
        rows = self._query(f"{_VERSION_SELECT} WHERE rb.name = ? ORDER BY v.version", (name,))
        if not rows:
            raise unknown_rubric(name)
        return [_decode_version(row) for row in rows]

    def get_rubric_version(self, version_id: int) -> dict[str, Any]:
        """One version row by id."""
        row = self.query_one(f"{_VERSION_SELECT} WHERE v.id = ?", (version_id,))
        if row is None:
            raise unknown_version(version_id)
        return _decode_version(row)

    # --- runs: writes -------------------------------------------------------------------

    def create_run(self, values: dict[str, Any], owner: Owner) -> int:
        """Insert a `running` run owned by `owner`; `values` are the `runs` columns given.

        With a `batch_id` and an `input_index`, an input that already has a run gets
        that run's id back and nothing is written.
        """
        columns = {
            **values,
            "grader_tools": json.dumps(values["grader_tools"]),
            "started_at": now_iso(),
            **owner._asdict(),
        }
        keyed = values.get("batch_id") is not None and values.get("input_index") is not None

        def job(tx: Tx) -> int:
            row = tx.one(
                "SELECT rubric_id FROM rubric_versions WHERE id = ?",
                (columns["rubric_version_id"],),
            )
            if row is None:
                raise unknown_version(columns["rubric_version_id"])
            conflict = f" ON CONFLICT {_BATCH_KEY} DO NOTHING" if keyed else ""
            inserted = tx.one(
                f"INSERT INTO runs ({', '.join(columns)}, rubric_id, status) "
                f"VALUES ({', '.join('?' for _ in columns)}, ?, 'running'){conflict} RETURNING id",
                (*columns.values(), row[0]),
            )
            if inserted is not None:
                return int(inserted[0])
            return returned_id(
                tx.one(
                    "SELECT id FROM runs WHERE batch_id = ? AND input_index = ?",
                    (values["batch_id"], values["input_index"]),
                )
            )

        return self._write(job)

    def record_evaluation(
        self, run_id: int, values: dict[str, Any], criteria: list[CriterionRow]
    ) -> int:
        """Upsert one pass and its verdicts, then the run's pass count and grader tokens."""
        values = {**values, "run_id": run_id, "recorded_at": now_iso()}
        columns = list(values)
        updates = ", ".join(
            f"{c} = excluded.{c}"
            for c in columns
            if c not in ("run_id", "grading_run_id", "iteration")
        )

        def job(tx: Tx) -> int:
            _require_run(tx, run_id)
            evaluation_id = returned_id(
                tx.one(
                    f"INSERT INTO evaluations ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)}) "
                    f"ON CONFLICT (run_id, grading_run_id, iteration) DO UPDATE SET {updates} "
                    "RETURNING id",
                    list(values.values()),
                )
            )
            tx.run("DELETE FROM criterion_results WHERE evaluation_id = ?", (evaluation_id,))
            tx.many(
                "INSERT INTO criterion_results (evaluation_id, position, run_id, criterion, "
                "passed, gap, weight, checked_by, insufficient) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        evaluation_id,
                        row.position,
                        run_id,
                        row.criterion,
                        int(row.passed),
                        row.gap,
                        row.weight,
                        row.checked_by,
                        int(row.insufficient),
                    )
                    for row in criteria
                ],
            )
            # The run's score is its latest pass's until finish_run says which draft it kept.
            tx.run(
                """
                UPDATE runs SET
                    iterations = agg.n, grader_input_tokens = agg.tin,
                    grader_output_tokens = agg.tout, regression_count = agg.regressions,
                    last_result = latest.result, score = latest.score
                FROM (SELECT COUNT(*) AS n, COALESCE(SUM(grader_input_tokens), 0) AS tin,
                             COALESCE(SUM(grader_output_tokens), 0) AS tout,
                             COALESCE(SUM(regression_count), 0) AS regressions
                      FROM evaluations WHERE run_id = ?) AS agg,
                     (SELECT result, score FROM evaluations WHERE run_id = ?
                      ORDER BY started_at DESC, id DESC LIMIT 1) AS latest
                WHERE runs.id = ?
                """,
                (run_id, run_id, run_id),
            )
            return evaluation_id

        return self._write(job)

    def save_transcript(self, run_id: int, messages: list[MessageRow]) -> None:
        """Replace the stored transcript of a run."""
        rows = _transcript_params(messages)

        def job(tx: Tx) -> None:
            _require_run(tx, run_id)
            _replace_transcript(tx, run_id, rows)

        self._write(job)

    def finish_run(
        self, run_id: int, values: dict[str, Any], transcript: list[MessageRow] | None = None
    ) -> None:
        """Set a run's final columns (`values`), `finished_at` and `duration_s`.

        With `transcript`, the run's transcript is replaced in the same transaction
        (one commit instead of two at the end of every run).
        """
        rows = None if transcript is None else _transcript_params(transcript)

        def job(tx: Tx) -> None:
            row = tx.one("SELECT started_at FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise unknown_run(run_id)
            if rows is not None:
                _replace_transcript(tx, run_id, rows)
            finished = dt.datetime.now(dt.UTC)
            columns = {
                **values,
                "finished_at": finished.isoformat(timespec="microseconds"),
                "duration_s": max(0.0, (finished - parse_iso(row[0])).total_seconds()),
            }
            tx.run(
                f"UPDATE runs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                (*columns.values(), run_id),
            )

        self._write(job)

    def resume_run(self, run_id: int, owner: Owner) -> None:
        """Mark a run `running` again, owned by `owner`."""

        def job(tx: Tx) -> None:
            _require_run(tx, run_id)
            tx.run(
                "UPDATE runs SET status = 'running', finished_at = NULL, duration_s = NULL, "
                "error = NULL, pid = ?, host = ?, proc_start = ? WHERE id = ?",
                (*owner, run_id),
            )

        self._write(job)

    # --- runs: reads --------------------------------------------------------------------

    def run_filter_sql(self, filters: RunFilters) -> tuple[str, list[Any]]:
        """A `WHERE` clause over `runs r` for `filters` (`?` placeholders), and its parameters.

        Raises:
            StoreError: Unknown rubric or version.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if filters.rubric is not None:
            row = self.query_one("SELECT id FROM rubrics WHERE name = ?", (filters.rubric,))
            if row is None:
                raise unknown_rubric(filters.rubric)
            clauses.append("r.rubric_id = ?")
            params.append(row["id"])
        if filters.version_id is not None:
            known = self.query_one(
                "SELECT 1 AS one FROM rubric_versions WHERE id = ?", (filters.version_id,)
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
        return (" AND ".join(clauses) or "1 = 1"), params

    def get_run(self, run_id: int) -> dict[str, Any]:
        """One run, with its rubric's name and version."""
        row = self.query_one(f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE r.id = ?", (run_id,))
        if row is None:
            raise unknown_run(run_id)
        return _decode_run(row)

    def list_runs(self, filters: RunFilters, *, limit: int, offset: int) -> list[dict[str, Any]]:
        """A page of matching runs, newest first (`started_at DESC, id DESC`)."""
        where, params = self.run_filter_sql(filters)
        rows = self._query(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE {where} "
            "ORDER BY r.started_at DESC, r.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_decode_run(row) for row in rows]

    def count_runs(self, filters: RunFilters) -> int:
        """How many runs match."""
        where, params = self.run_filter_sql(filters)
        row = self.query_one(f"SELECT COUNT(*) AS n FROM runs r WHERE {where}", params)
        return int(row["n"]) if row else 0

    def finished_inputs(self, batch_id: str) -> set[int]:
        """The `input_index` of the batch's runs that ended (any final status but `interrupted`)."""
        rows = self._query(
            "SELECT DISTINCT input_index FROM runs WHERE batch_id = ? AND input_index IS NOT NULL "
            f"AND status IN ({', '.join('?' for _ in _ENDED)})",
            (batch_id, *_ENDED),
        )
        return {int(row["input_index"]) for row in rows}

    def run_evaluations(self, run_id: int) -> list[dict[str, Any]]:
        """A run's passes, oldest first, each with its `criteria` verdicts."""
        self._known_run(run_id)
        evaluations = self._query(
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
        criteria = self._query(
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
        rows = self._query(
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
        """Per-criterion pass counts over the matching runs' passes, in rubric order.

        Read from the trigger-kept counts when they serve the filters
        (`pass_counts.served_by_counts`), else counted over the matching verdicts.
        """
        where, params = self.run_filter_sql(filters)  # also checks the rubric and version
        if served_by_counts(filters, final_only=final_only):
            rows = self._summary_pass_rates(filters)
        else:
            rows = self._scanned_pass_rates(where, params, final_only=final_only)
        for row in rows:  # PostgreSQL sums to a numeric type
            row["passed"], row["total"] = int(row["passed"]), int(row["total"])
            row["pass_rate"] = float(row["pass_rate"])
        return rows

    def _summary_pass_rates(self, filters: RunFilters) -> list[dict[str, Any]]:
        rubric_id = None
        if filters.rubric is not None:
            found = self.query_one("SELECT id FROM rubrics WHERE name = ?", (filters.rubric,))
            rubric_id = int(found["id"]) if found else None
        sql, params = summary_pass_rates_sql(rubric_id, filters.version_id)
        return self._query(sql, params)

    def _scanned_pass_rates(
        self, where: str, params: list[Any], *, final_only: bool
    ) -> list[dict[str, Any]]:
        final = (
            " AND e.id = (SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id "
            "ORDER BY e2.started_at DESC, e2.id DESC LIMIT 1)"
            if final_only
            else ""
        )
        return self._query(
            f"""
            SELECT cr.criterion AS criterion, SUM(cr.passed) AS passed, COUNT(*) AS total,
                   CAST(SUM(cr.passed) AS DOUBLE PRECISION) / COUNT(*) AS pass_rate,
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
