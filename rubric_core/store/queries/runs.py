"""Runs: a run's row from start to end, its transcript, the run filters, batches and models."""

from __future__ import annotations

import datetime as dt
import json
import logging
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_core.limits import MAX_ERROR_CHARS, cut_text
from rubric_core.schema import GRADED_KIND, KEEP_CHOICES, RUN_AGENT_KINDS, RUN_STATUSES
from rubric_core.store.errors import StoreError, unknown_rubric, unknown_run, unknown_version
from rubric_core.store.filters import RunFilters
from rubric_core.store.owner import current_owner, pid_alive
from rubric_core.store.rows import MessageRow, message_row, stored_score
from rubric_core.store.sqlbase import now_iso, parse_iso, returned_id
from rubric_core.store.validation import MAX_PAGE, optional_text, require_int, require_text

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from rubric_core.store.queries.rubrics import Rubrics
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["NewRun", "RunEnd", "Runs", "mark_interrupted"]

_log = logging.getLogger(__name__)

_FINAL_STATUSES = tuple(s for s in RUN_STATUSES if s != "running")
_RUN_PAGE = 10_000
"""`batch_runs`' page."""
_ENDED = ("satisfied", "failed", "grader_error", "max_iterations_reached", "error")
_NEW_RUN_RUBRICS_KEPT = 1024
"""Rubric texts of new runs kept for their first pass (`Runs.take_new_rubric`)."""
_BATCH_KEY = "(batch_id, input_index) WHERE batch_id IS NOT NULL AND input_index IS NOT NULL"

_RUN_COLUMNS = """
    r.id, r.rubric_id, rb.name AS rubric, r.rubric_version_id, rv.version AS rubric_version,
    r.input, r.agent_model, r.grader_model, r.grader_tools, r.max_iterations, r.agent_kind,
    r.agent_system_prompt, r.grader_system_prompt, r.thread_id, r.batch_id, r.input_index,
    r.status, r.iterations, r.last_result, r.started_at, r.finished_at, r.duration_s,
    r.final_output, r.error, r.agent_input_tokens, r.agent_output_tokens,
    r.grader_input_tokens, r.grader_output_tokens, r.pid, r.host, r.keep, r.score,
    r.best_iteration, r.regression_count, r.final_evaluation_id
"""
_RUN_FROM = """
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
"""


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
    return row


def _transcript_rows(
    run_id: int, messages: Sequence[BaseMessage | Mapping[str, Any]]
) -> list[tuple[Any, ...]]:
    """The `transcript_messages` parameters of `messages` (grader-injected ones flagged)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        msg = f"messages must be a list of messages, got {type(messages).__name__}"
        raise StoreError(msg, kind="invalid")
    rows: list[MessageRow] = [message_row(run_id, i, m) for i, m in enumerate(messages)]
    return [
        (
            *row[:5],
            int(row.is_grader),
            json.dumps(row.tool_calls, ensure_ascii=False, default=str),
            row.tool_call_id,
        )
        for row in rows
    ]


def _replace_transcript(tx: Tx, run_id: int, rows: list[tuple[Any, ...]]) -> None:
    tx.run("DELETE FROM transcript_messages WHERE run_id = ?", (run_id,))
    tx.many(
        "INSERT INTO transcript_messages (run_id, position, role, name, content, "
        "is_grader, tool_calls, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def require_run(tx: Tx, run_id: int) -> None:
    """Raise `unknown_run` inside a write job when no run has that id."""
    if tx.one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is None:
        raise unknown_run(run_id)


def mark_interrupted(tx: Tx, where: str) -> int:
    """Mark `interrupted` the `running` runs of dead processes on this host; how many.

    Runs owned by other hosts are left alone: their pid cannot be checked from here. Each
    backend runs it once when it opens.
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
    _mark_experiments_interrupted(tx, host, where)
    return len(dead)


def _mark_experiments_interrupted(tx: Tx, host: str, where: str) -> None:
    """Mark `interrupted` the `running` experiments whose process on this host is gone
    (and those from before experiments had an owner, which no process can still grade)."""
    rows = tx.all(
        "SELECT id, pid, proc_start, host FROM experiments WHERE status = 'running' "
        "AND (host = ? OR host IS NULL)",
        (host,),
    )
    dead = [row for row in rows if not pid_alive(row[1], row[2])]
    for experiment_id, pid, _proc_start, _host in dead:
        count = tx.one(
            "SELECT COUNT(*) FROM experiment_items WHERE experiment_id = ?", (experiment_id,)
        )
        graded = int(count[0]) if count is not None else 0
        who = f"process {pid} on {host}" if pid else "its process"
        tx.run(
            "UPDATE experiments SET status = 'interrupted', finished_at = ?, error = ? "
            "WHERE id = ? AND status = 'running'",
            (
                now_iso(),
                f"{who} exited while it was grading ({graded} items stored); "
                f"continue it with `regrade --resume {experiment_id}`",
                experiment_id,
            ),
        )
    if dead:
        _log.info("marked %d experiment(s) interrupted in %s", len(dead), where)


@dataclass(frozen=True)
class NewRun:
    """A run's row as `store.runs.create` records it: what the loop was asked to do.

    `batch_id` with `input_index` (the input's 0-based position) keys a batch input's run;
    `keep` is the run's `RubricMiddleware(keep=...)`. `store.runs.create` checks every field.
    """

    rubric_version_id: int
    input: str
    agent_model: str
    grader_model: str
    max_iterations: int
    agent_kind: str
    grader_tools: Sequence[str] = ()
    agent_system_prompt: str | None = None
    grader_system_prompt: str | None = None
    thread_id: str | None = None
    batch_id: str | None = None
    input_index: int | None = None
    keep: str = "last"


@dataclass(frozen=True)
class RunEnd:
    """How a run ended, as `store.runs.finish` records it (which checks every field)."""

    status: str
    final_output: str = ""
    error: str | None = None
    agent_input_tokens: int = 0
    agent_output_tokens: int = 0
    best_iteration: int | None = None
    """Zero-based pass whose draft a `keep="best"` run handed back."""
    score: float | None = None
    """That draft's score; replaces the latest pass's score the run carried."""
    transcript: Sequence[BaseMessage | Mapping[str, Any]] | None = None
    """When given, replaces the stored transcript in the same transaction."""


class Runs:
    """`Store.runs`: a run's row and transcript, the run filters, batches."""

    def __init__(self, backend: SQLBackend, rubrics: Rubrics) -> None:
        self._backend = backend
        self._rubrics = rubrics
        self._new_run_rubrics: dict[int, str] = {}
        """The rubric text of each run this store created, until its first pass takes it
        (`take_new_rubric`)."""

    # --- writes -------------------------------------------------------------------------

    def create(self, run: NewRun, *, durable: bool = True) -> int:
        """Record a new run with status `running`, owned by this process; returns its id.

        With both `batch_id` and `input_index` (the input's 0-based position in the
        batch), an input that already has a run gets that run's id back and nothing is
        written: a retried batch task finds its run (then `resume_run` takes it over).
        `keep` is the run's `RubricMiddleware(keep=...)`: `"last"` or `"best"`.
        `durable=False` commits the row without flushing it to disk on its own: the
        run's first pass (or its end) flushes it (`SQLBackend.write`). The runner does
        so; a power cut before then loses a row that had nothing graded yet.

        Raises:
            StoreError: A field is invalid or the rubric version does not exist.
        """
        if not isinstance(run, NewRun):
            msg = f"runs.create takes a NewRun, got {type(run).__name__}"
            raise StoreError(msg, kind="invalid")
        rubric_version_id, input, agent_model = run.rubric_version_id, run.input, run.agent_model
        grader_model, grader_tools, agent_kind = run.grader_model, run.grader_tools, run.agent_kind
        batch_id, input_index, keep = run.batch_id, run.input_index, run.keep
        max_iterations = run.max_iterations
        agent_system_prompt, grader_system_prompt = (
            run.agent_system_prompt,
            run.grader_system_prompt,
        )
        thread_id = run.thread_id
        require_int(rubric_version_id, "rubric_version_id")
        require_text(input, "input")
        require_text(agent_model, "agent_model", allow_empty=agent_kind == GRADED_KIND)
        require_text(grader_model, "grader_model")
        if isinstance(grader_tools, str) or not isinstance(grader_tools, Iterable):
            msg = f"grader_tools must be a list of tool names, got {grader_tools!r}"
            raise StoreError(msg, kind="invalid")
        tools = [require_text(tool, "grader tool name").strip() for tool in grader_tools]
        require_int(max_iterations, "max_iterations", minimum=1)
        if agent_kind not in RUN_AGENT_KINDS:
            msg = f"agent_kind must be one of {', '.join(RUN_AGENT_KINDS)}, got {agent_kind!r}"
            raise StoreError(msg, kind="invalid")
        optional_text(agent_system_prompt, "agent_system_prompt")
        optional_text(grader_system_prompt, "grader_system_prompt")
        optional_text(thread_id, "thread_id")
        optional_text(batch_id, "batch_id")
        if input_index is not None:
            require_int(input_index, "input_index", minimum=0)
        if keep not in KEEP_CHOICES:
            msg = f"keep must be one of {', '.join(KEEP_CHOICES)}, got {keep!r}"
            raise StoreError(msg, kind="invalid")
        columns: dict[str, Any] = {
            "rubric_version_id": rubric_version_id,
            "input": input,
            "agent_model": agent_model.strip(),
            "grader_model": grader_model.strip(),
            "grader_tools": json.dumps(tools),
            "max_iterations": max_iterations,
            "agent_kind": agent_kind,
            "agent_system_prompt": agent_system_prompt,
            "grader_system_prompt": grader_system_prompt,
            "thread_id": thread_id,
            "batch_id": batch_id,
            "input_index": input_index,
            "keep": keep,
            "started_at": now_iso(),
            **current_owner()._asdict(),
        }
        keyed = batch_id is not None and input_index is not None

        def job(tx: Tx) -> tuple[int, str | None]:
            row = tx.one(
                "SELECT rubric_id, text FROM rubric_versions WHERE id = ?", (rubric_version_id,)
            )
            if row is None:
                raise unknown_version(rubric_version_id)
            conflict = f" ON CONFLICT {_BATCH_KEY} DO NOTHING" if keyed else ""
            inserted = tx.one(
                f"INSERT INTO runs ({', '.join(columns)}, rubric_id, status) "
                f"VALUES ({', '.join('?' for _ in columns)}, ?, 'running'){conflict} RETURNING id",
                (*columns.values(), row[0]),
            )
            if inserted is not None:
                return int(inserted[0]), str(row[1])
            existing = tx.one(
                "SELECT id FROM runs WHERE batch_id = ? AND input_index = ?",
                (batch_id, input_index),
            )
            return returned_id(existing), None

        run_id, rubric = self._backend.write(job, durable=durable)
        if rubric is not None:  # its first pass needs the weights: no read for them then
            if len(self._new_run_rubrics) >= _NEW_RUN_RUBRICS_KEPT:
                self._new_run_rubrics.clear()  # runs that never got a pass; a hint only
            self._new_run_rubrics[run_id] = rubric
        return run_id

    def save_transcript(
        self, run_id: int, messages: Sequence[BaseMessage | Mapping[str, Any]]
    ) -> None:
        """Replace the stored transcript of a run; grader-injected messages are flagged.

        Raises:
            StoreError: Unknown run, or `messages` is not a list.
        """
        run_id = require_int(run_id, "run_id")
        rows = _transcript_rows(run_id, messages)

        def job(tx: Tx) -> None:
            require_run(tx, run_id)
            _replace_transcript(tx, run_id, rows)

        self._backend.write(job)

    def finish(self, run_id: int, end: RunEnd) -> None:
        """Close a run with its final status, output and agent token usage.

        `best_iteration` (zero-based) is the pass whose draft a `keep="best"` run handed
        back, and `score` that draft's score; when given, they replace the latest
        pass's score the run carried while it ran. `transcript`, when given, replaces
        the run's stored transcript in the same transaction (as `save_transcript`: one
        commit instead of two at the end of every run).

        Raises:
            StoreError: Unknown run, a status that is not a final one, or a transcript
                that is not a list of messages.
        """
        if not isinstance(end, RunEnd):
            msg = f"runs.finish takes a RunEnd, got {type(end).__name__}"
            raise StoreError(msg, kind="invalid")
        status, final_output, error, transcript = (
            end.status,
            end.final_output,
            end.error,
            end.transcript,
        )
        agent_input_tokens, agent_output_tokens = end.agent_input_tokens, end.agent_output_tokens
        best_iteration, score = end.best_iteration, end.score
        run_id = require_int(run_id, "run_id")
        rows = None if transcript is None else _transcript_rows(run_id, transcript)
        if status not in _FINAL_STATUSES:
            msg = f"finish_run status must be one of {', '.join(_FINAL_STATUSES)}, got {status!r}"
            raise StoreError(msg, kind="invalid")
        require_text(
            final_output if final_output is not None else "", "final_output", allow_empty=True
        )
        optional_text(error, "error")
        require_int(agent_input_tokens, "agent_input_tokens", minimum=0)
        require_int(agent_output_tokens, "agent_output_tokens", minimum=0)
        values: dict[str, Any] = {
            "status": status,
            "final_output": final_output or "",
            "error": cut_text(error, MAX_ERROR_CHARS) if error else error,
            "agent_input_tokens": agent_input_tokens,
            "agent_output_tokens": agent_output_tokens,
        }
        if best_iteration is not None:
            values["best_iteration"] = require_int(best_iteration, "best_iteration", minimum=0)
        if score is not None:
            values["score"] = stored_score(score, "score")

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

        self._backend.write(job)

    def resume(self, run_id: int) -> None:
        """Mark a run `running` again, owned by this process (resuming from its checkpoint).

        Raises:
            StoreError: Unknown run.
        """
        run_id = require_int(run_id, "run_id")
        owner = current_owner()

        def job(tx: Tx) -> None:
            require_run(tx, run_id)
            tx.run(
                "UPDATE runs SET status = 'running', finished_at = NULL, duration_s = NULL, "
                "error = NULL, pid = ?, host = ?, proc_start = ? WHERE id = ?",
                (*owner, run_id),
            )

        self._backend.write(job)

    # --- reads --------------------------------------------------------------------------

    def known(self, run_id: int) -> int:
        """`run_id`, checked to be an integer and a stored run."""
        run_id = require_int(run_id, "run_id")
        if self._backend.query_one("SELECT 1 AS one FROM runs WHERE id = ?", (run_id,)) is None:
            raise unknown_run(run_id)
        return run_id

    def take_new_rubric(self, run_id: int) -> str | None:
        """The rubric text of a run this store created, once, for its first pass's weights
        (no read for them then); `None` for any other run."""
        return self._new_run_rubrics.pop(run_id, None)

    def filter_sql(
        self, filters: RunFilters | None = None, **filter_args: Any
    ) -> tuple[str, list[Any]]:
        """A portable `WHERE` clause (`?` placeholders) over `runs r` for the filters, and its parameters.

        `model` matches the agent or the grader model; `status` may be one status
        or a list; `since` is inclusive and `until` exclusive (a bare date in
        `until` includes that whole day). See `RunFilters`.

        Raises:
            StoreError: Unknown rubric, version or status, or an unreadable date.
        """
        filters = RunFilters.from_args(filters, **filter_args)
        clauses: list[str] = []
        params: list[Any] = []
        if filters.rubric is not None:
            rubric_id = self._rubrics.id_of(filters.rubric)
            if rubric_id is None:
                raise unknown_rubric(filters.rubric)
            clauses.append("r.rubric_id = ?")
            params.append(rubric_id)
        if filters.version_id is not None:
            known = self._backend.query_one(
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

    def get(self, run_id: int) -> dict[str, Any]:
        """One run, with rubric name and version, iterations, grader token sums, duration.

        Raises:
            StoreError: No run has that id.
        """
        run_id = require_int(run_id, "run_id")
        row = self._backend.query_one(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE r.id = ?", (run_id,)
        )
        if row is None:
            raise unknown_run(run_id)
        return _decode_run(row)

    def of_batch(self, batch_id: str) -> list[dict[str, Any]]:
        """Every run of batch `batch_id`, as `list_runs` gives them (read page by page)."""
        total = self.count(batch_id=batch_id)
        runs: list[dict[str, Any]] = []
        while len(runs) < total:
            chunk = self.find(batch_id=batch_id, limit=_RUN_PAGE, offset=len(runs))
            if not chunk:
                break
            runs.extend(chunk)
        return runs

    def find(
        self,
        filters: RunFilters | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
        **filter_args: Any,
    ) -> list[dict[str, Any]]:
        """A page of runs, newest first (`started_at DESC, id DESC`).

        Args:
            filters: Which runs; refined by `filter_args` (the `RunFilters` field names).
            limit: Runs per page, 1 to 10,000.
            offset: Runs to skip.

        Raises:
            StoreError: A filter is invalid (see `RunFilters`), or limit/offset are.
        """
        limit = require_int(limit, "limit", minimum=1)
        if limit > MAX_PAGE:
            msg = f"limit must be at most {MAX_PAGE}, got {limit}"
            raise StoreError(msg, kind="invalid")
        offset = require_int(offset, "offset", minimum=0)
        where, params = self.filter_sql(filters, **filter_args)
        rows = self._backend.query(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE {where} "
            "ORDER BY r.started_at DESC, r.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_decode_run(row) for row in rows]

    def count(self, filters: RunFilters | None = None, **filter_args: Any) -> int:
        """How many runs match the filters of `list_runs`."""
        where, params = self.filter_sql(filters, **filter_args)
        row = self._backend.query_one(f"SELECT COUNT(*) AS n FROM runs r WHERE {where}", params)
        return int(row["n"]) if row else 0

    def finished_inputs(self, batch_id: str) -> set[int]:
        """The `input_index` of every run of the batch that ended (a final status, not `interrupted`).

        A resumed batch runs the other inputs: never started, still `running`, or interrupted.
        """
        batch_id = require_text(batch_id, "batch_id")
        rows = self._backend.query(
            "SELECT DISTINCT input_index FROM runs WHERE batch_id = ? AND input_index IS NOT NULL "
            f"AND status IN ({', '.join('?' for _ in _ENDED)})",
            (batch_id, *_ENDED),
        )
        return {int(row["input_index"]) for row in rows}

    def transcript(self, run_id: int) -> list[dict[str, Any]]:
        """A run's stored messages: {position, role, name, content, is_grader, tool_calls, tool_call_id}.

        Raises:
            StoreError: No run has that id.
        """
        run_id = self.known(run_id)
        rows = self._backend.query(
            "SELECT position, role, name, content, is_grader, tool_calls, tool_call_id "
            "FROM transcript_messages WHERE run_id = ? ORDER BY position",
            (run_id,),
        )
        for row in rows:
            row["is_grader"] = bool(row["is_grader"])
            row["tool_calls"] = json.loads(row["tool_calls"])
        return rows

    def batches(self, limit: int = 200) -> list[dict[str, Any]]:
        """The stored batches, newest first: `{batch_id, runs, started_at}` (`started_at`: when
        the batch's first run started)."""
        return self._backend.query(
            "SELECT batch_id, COUNT(*) AS runs, MIN(started_at) AS started_at FROM runs "
            "WHERE batch_id IS NOT NULL GROUP BY batch_id ORDER BY MIN(started_at) DESC, batch_id "
            "LIMIT ?",
            (int(limit),),
        )

    def last_id(self) -> int:
        """The highest run id (0 when there is no run): runs are never deleted, so it only grows."""
        row = self._backend.query_one("SELECT COALESCE(MAX(id), 0) AS last FROM runs")
        return int(row["last"]) if row else 0

    def models_after(self, run_id: int) -> set[str]:
        """The model strings (agent or grader) of the runs with an id above `run_id`."""
        rows = self._backend.query(
            "SELECT agent_model AS m FROM runs WHERE id > ? "
            "UNION SELECT grader_model FROM runs WHERE id > ?",
            (int(run_id), int(run_id)),
        )
        return {str(row["m"]) for row in rows if row["m"]}
