"""`Store`: the one store API; it validates every argument, then hands the work to a backend."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_core.rubric import RubricError, parse_criteria, validate_rubric
from rubric_core.schema import GRADED_KIND, KEEP_CHOICES, RUN_AGENT_KINDS, RUN_STATUSES
from rubric_core.store.errors import StoreError
from rubric_core.store.experiments import ExperimentsMixin
from rubric_core.store.filters import RunFilters
from rubric_core.store.labels import LabelsMixin
from rubric_core.store.owner import current_owner
from rubric_core.store.paths import default_db_target, is_postgres_url, redact_url
from rubric_core.store.rows import MessageRow, evaluation_row, message_row
from rubric_core.store.sqlbase import SnapshotStream, SQLBackend
from rubric_core.store.sqlite import SQLiteBackend
from rubric_core.store.validation import (
    MAX_PAGE,
    clean_name,
    clean_tags,
    optional_text,
    require_int,
    require_text,
)

if TYPE_CHECKING:
    import sqlite3

    from langchain_core.messages import BaseMessage

    from rubric_core.schema import RubricEvaluation

__all__ = ["Store"]

_FINAL_STATUSES = tuple(s for s in RUN_STATUSES if s != "running")
_RUN_PAGE = 10_000
"""`list_runs`' largest page."""


class Store(LabelsMixin, ExperimentsMixin):
    """Rubrics, runs, grading passes and transcripts, kept in one database.

    Two backends, one API and one set of queries (`rubric_core.store.sqlbase`):

    - SQLite (a file path; `rubric_core.store.sqlite`): every write goes to one writer
      thread that owns the only write connection and commits before the call returns;
      reads use one read-only connection per thread.
    - PostgreSQL (a `postgresql://` URL; `rubric_core.store.postgres`): a psycopg 3
      connection pool; every write is one transaction committed before the call
      returns. Many processes and hosts may share the database.

    Human labels (`set_labels`, `labels_for`, `review_items`...) and re-grading
    experiments (`create_experiment`, `experiment_verdicts`...) come from
    `store.labels` and `store.experiments`, on the same backends.

    Safe to share across threads.

    Run queries (`list_runs`, `count_runs`, `criterion_pass_rates`, and the exports) take
    a `RunFilters` as `filters`, or its fields as keyword arguments (which refine
    `filters` when both are given).

    Examples:
        >>> import tempfile, pathlib
        >>> store = Store(pathlib.Path(tempfile.mkdtemp()) / "s.db")
        >>> version = store.save_rubric_version("haiku", "- 5/7/5 syllables")
        >>> version["version"], version["criteria"]
        (1, ['5/7/5 syllables'])
        >>> store.count_runs(RunFilters(rubric="haiku"))
        0
        >>> store.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_s: float = 5.0,
        pool_size: int = 8,
    ):
        """Open (or create) the database, apply pending migrations, mark dead runs interrupted.

        Args:
            path: A database file (SQLite), or a `postgresql://` URL (PostgreSQL);
                `default_db_target()` (`$RUBRIC_STUDIO_DB`) when None. Missing parent
                directories of a file are created.
            busy_timeout_s: How long a write waits for another process's lock (SQLite),
                or for a server connection (PostgreSQL), before it fails with StoreError.
            pool_size: Most connections a PostgreSQL store holds open (ignored by SQLite).

        Raises:
            StoreError: The file is read-only, locked, not a database, or cannot be created;
                the server does not answer (`unreachable`), refuses the user or password
                (`auth`), or has no such database (`missing`).
        """
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, int | float):
            msg = f"busy_timeout_s must be a number of seconds, got {busy_timeout_s!r}"
            raise StoreError(msg, kind="invalid")
        if busy_timeout_s < 0:
            msg = f"busy_timeout_s must be at least 0, got {busy_timeout_s}"
            raise StoreError(msg, kind="invalid")
        require_int(pool_size, "pool_size", minimum=1)
        self.busy_timeout_s = float(busy_timeout_s)
        target = path if path is not None else default_db_target()
        self._backend: SQLBackend
        if is_postgres_url(target):
            from rubric_core.store.postgres import PostgresBackend

            self.target = str(target).strip()
            self._path: Path | None = None
            self._backend = PostgresBackend(
                self.target, timeout_s=max(1.0, self.busy_timeout_s), max_size=pool_size
            )
        else:
            self._path = Path(target).expanduser().resolve()
            self.target = str(self._path)
            self._backend = SQLiteBackend(self._path, busy_timeout_s=self.busy_timeout_s)
        self._weight_cache: dict[int, dict[str, int]] = {}

    @property
    def backend_name(self) -> str:
        """`sqlite` or `postgres`."""
        return self._backend.dialect.name

    @property
    def is_postgres(self) -> bool:
        """Whether the store is a PostgreSQL database (else a SQLite file)."""
        return self._path is None

    @property
    def url(self) -> str:
        """The database as given: the file path, or the URL with its password as `***`."""
        return redact_url(self.target)

    @property
    def path(self) -> Path:
        """The SQLite file.

        Raises:
            StoreError: A PostgreSQL store has no file.
        """
        if self._path is None:
            msg = f"store {self.url} is a PostgreSQL database and has no file path"
            raise StoreError(msg, kind="invalid")
        return self._path

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish pending writes and close every connection. Idempotent."""
        self._backend.close()

    @property
    def read_only_reason(self) -> str | None:
        """Why this store refuses every write, or None when it writes.

        A database that a newer Rubric Studio migrated (a schema step this version does
        not know) is opened read-only: reads work, writes raise a `StoreError` of kind
        `version` with this message, which names both schemas.
        """
        return self._backend.refusal

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Copy the store, as committed now, to the single SQLite file `dest`; returns its path.

        Uses SQLite's online backup API, so runs may go on writing meanwhile; the copy
        holds every committed row (the write-ahead log's too) in one file, ready to be
        opened as a store.

        Raises:
            StoreError: The store is PostgreSQL (back it up with `pg_dump`); `dest` exists
                (without `overwrite`), is the store's own file, or cannot be written.
        """
        if not isinstance(self._backend, SQLiteBackend):
            msg = (
                f"store {self.url} is a PostgreSQL database; back it up with the server's "
                "own tools, e.g. `pg_dump --format=custom --file=studio.dump DBNAME`"
            )
            raise StoreError(msg, kind="invalid")
        return self._backend.backup(Path(dest), overwrite=overwrite)

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only SQLite connection (rows as `sqlite3.Row`); the caller closes it.

        SQLite only; code meant for both backends uses `query_rows` or `stream_rows`.

        Raises:
            StoreError: The store is a PostgreSQL database.
        """
        if not isinstance(self._backend, SQLiteBackend):
            msg = f"store {self.url} is PostgreSQL: use query_rows or stream_rows"
            raise StoreError(msg, kind="invalid")
        return self._backend.connect_readonly()

    def query_rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one read-only query, as dicts, on either backend.

        `sql` is portable SQL with `?` placeholders (as `run_filter_sql` returns).
        """
        return self._backend.query(sql, params)

    def stream_rows(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 1000
    ) -> Generator[list[tuple[Any, ...]], None, None]:
        """A long read-only query on a connection of its own, `size` rows (tuples) per batch.

        Memory stays flat however many rows match; closing the generator releases the
        connection. `sql` is portable SQL with `?` placeholders.
        """
        return self._backend.stream(sql, params, max(1, int(size)))

    def read_snapshot(self) -> AbstractContextManager[SnapshotStream]:
        """One read-only transaction for several long reads that must agree with each other.

        The context gives `stream(sql, params, size)`, a generator of `size`-row batches
        (tuples) like `stream_rows`; every stream opened inside it reads the same snapshot,
        several at once if need be (SQLite: one connection in `BEGIN`; PostgreSQL: named
        cursors in one `REPEATABLE READ` transaction). Leaving the context releases it.
        """
        return self._backend.snapshot()

    # --- rubrics ------------------------------------------------------------------------

    def save_rubric_version(
        self, name: str, text: str, *, tags: list[str] | None = None, note: str = ""
    ) -> dict[str, Any]:
        """Save `text` as the next version of rubric `name` (created if new).

        Saving the same text as the latest version returns that version unchanged.

        Returns:
            The version row: {id, rubric_id, name, version, text, criteria, note, created_at}.

        Raises:
            RubricError: The text is not a usable rubric.
            StoreError: The name, tags or note are invalid.
        """
        name = clean_name(name)
        criteria = validate_rubric(text)
        note = require_text(note if note is not None else "", "note", allow_empty=True)
        clean = None if tags is None else clean_tags(tags)
        version_id = self._backend.save_rubric_version(
            name, text.strip(), criteria, note=note, tags=clean
        )
        return self.get_rubric_version(version_id)

    def set_rubric_tags(self, name: str, tags: list[str]) -> None:
        """Replace the tags of rubric `name`.

        Raises:
            StoreError: No rubric has that name, or a tag is invalid.
        """
        self._backend.set_rubric_tags(clean_name(name), clean_tags(tags))

    def list_rubrics(self) -> list[dict[str, Any]]:
        """Every rubric, by name: {id, name, tags, latest_version, latest_version_id, versions, updated_at}."""
        return self._backend.list_rubrics()

    def rubric_versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of rubric `name`, oldest first.

        Raises:
            StoreError: No rubric has that name.
        """
        return self._backend.rubric_versions(clean_name(name))

    def get_rubric_version(self, version_id: int) -> dict[str, Any]:
        """One version row by id.

        Raises:
            StoreError: No version has that id.
        """
        return self._backend.get_rubric_version(require_int(version_id, "version_id"))

    # --- runs: writes -------------------------------------------------------------------

    def create_run(
        self,
        *,
        rubric_version_id: int,
        input: str,
        agent_model: str,
        grader_model: str,
        grader_tools: Sequence[str] = (),
        max_iterations: int,
        agent_kind: str,
        agent_system_prompt: str | None = None,
        grader_system_prompt: str | None = None,
        thread_id: str | None = None,
        batch_id: str | None = None,
        input_index: int | None = None,
        keep: str = "last",
    ) -> int:
        """Record a new run with status `running`, owned by this process; returns its id.

        With both `batch_id` and `input_index` (the input's 0-based position in the
        batch), an input that already has a run gets that run's id back and nothing is
        written: a retried batch task finds its run (then `resume_run` takes it over).
        `keep` is the run's `RubricMiddleware(keep=...)`: `"last"` or `"best"`.

        Raises:
            StoreError: A field is invalid or the rubric version does not exist.
        """
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
        values = {
            "rubric_version_id": rubric_version_id,
            "input": input,
            "agent_model": agent_model.strip(),
            "grader_model": grader_model.strip(),
            "grader_tools": tools,
            "max_iterations": max_iterations,
            "agent_kind": agent_kind,
            "agent_system_prompt": agent_system_prompt,
            "grader_system_prompt": grader_system_prompt,
            "thread_id": thread_id,
            "batch_id": batch_id,
            "input_index": input_index,
            "keep": keep,
        }
        return self._backend.create_run(values, current_owner())

    def record_evaluation(self, run_id: int, evaluation: RubricEvaluation) -> int:
        """Commit one grading pass and its criterion verdicts; returns the evaluation id.

        Idempotent on (run_id, grading_run_id, iteration): recording the same pass
        again (a resumed run) updates it in place and returns the same id.

        Raises:
            StoreError: Unknown run, or the evaluation dict is malformed.
        """
        run_id = require_int(run_id, "run_id")
        values, criteria = evaluation_row(evaluation, self._weights(run_id))
        return self._backend.record_evaluation(run_id, values, criteria)

    def _weights(self, run_id: int) -> dict[str, int]:
        """Criterion name -> weight in the run's rubric (a run's rubric never changes).

        Read once per run. If the read fails, weights default to 1 and the write that
        follows reports what is wrong with the store (and recovers what it can).
        """
        if run_id not in self._weight_cache:
            try:
                version_id = int(self._backend.get_run(run_id)["rubric_version_id"])
                text = self._backend.get_rubric_version(version_id)["text"]
            except StoreError:
                return {}
            try:
                weights = {c.name: c.weight for c in parse_criteria(text)}
            except RubricError:  # a custom check this process has not registered
                weights = {}
            self._weight_cache[run_id] = weights
        return self._weight_cache[run_id]

    def save_transcript(
        self, run_id: int, messages: Sequence[BaseMessage | Mapping[str, Any]]
    ) -> None:
        """Replace the stored transcript of a run; grader-injected messages are flagged.

        Raises:
            StoreError: Unknown run, or `messages` is not a list.
        """
        run_id = require_int(run_id, "run_id")
        self._backend.save_transcript(run_id, _transcript_rows(run_id, messages))

    def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        final_output: str = "",
        error: str | None = None,
        agent_input_tokens: int = 0,
        agent_output_tokens: int = 0,
        best_iteration: int | None = None,
        score: float | None = None,
        transcript: Sequence[BaseMessage | Mapping[str, Any]] | None = None,
    ) -> None:
        """Close a run with its final status, output and agent token usage.

        `best_iteration` (zero-based) is the pass whose draft a `keep="best"` run handed
        back, and `score` that draft's score; when given, they replace the latest
        pass's score the run carried while it ran. `transcript`, when given, replaces
        the run's stored transcript in the same transaction (as `save_transcript`).

        Raises:
            StoreError: Unknown run, a status that is not a final one, or a transcript
                that is not a list of messages.
        """
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
            "error": error,
            "agent_input_tokens": agent_input_tokens,
            "agent_output_tokens": agent_output_tokens,
        }
        if best_iteration is not None:
            values["best_iteration"] = require_int(best_iteration, "best_iteration", minimum=0)
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
                msg = f"score must be a number from 0 to 1, got {score!r}"
                raise StoreError(msg, kind="invalid")
            values["score"] = float(score)
        self._backend.finish_run(run_id, values, rows)

    def resume_run(self, run_id: int) -> None:
        """Mark a run `running` again, owned by this process (resuming from its checkpoint).

        Raises:
            StoreError: Unknown run.
        """
        self._backend.resume_run(require_int(run_id, "run_id"), current_owner())

    # --- runs: reads --------------------------------------------------------------------

    def run_filter_sql(
        self, filters: RunFilters | None = None, **filter_args: Any
    ) -> tuple[str, list[Any]]:
        """A portable `WHERE` clause (`?` placeholders) over `runs r` for the filters, and its parameters.

        `model` matches the agent or the grader model; `status` may be one status
        or a list; `since` is inclusive and `until` exclusive (a bare date in
        `until` includes that whole day). See `RunFilters`.

        Raises:
            StoreError: Unknown rubric, version or status, or an unreadable date.
        """
        return self._backend.run_filter_sql(RunFilters.from_args(filters, **filter_args))

    def get_run(self, run_id: int) -> dict[str, Any]:
        """One run, with rubric name and version, iterations, grader token sums, duration.

        Raises:
            StoreError: No run has that id.
        """
        return self._backend.get_run(require_int(run_id, "run_id"))

    def batch_runs(self, batch_id: str) -> list[dict[str, Any]]:
        """Every run of batch `batch_id`, as `list_runs` gives them (read page by page)."""
        total = self.count_runs(batch_id=batch_id)
        runs: list[dict[str, Any]] = []
        while len(runs) < total:
            chunk = self.list_runs(batch_id=batch_id, limit=_RUN_PAGE, offset=len(runs))
            if not chunk:
                break
            runs.extend(chunk)
        return runs

    def list_runs(
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
        chosen = RunFilters.from_args(filters, **filter_args)
        return self._backend.list_runs(chosen, limit=limit, offset=offset)

    def count_runs(self, filters: RunFilters | None = None, **filter_args: Any) -> int:
        """How many runs match the filters of `list_runs`."""
        return self._backend.count_runs(RunFilters.from_args(filters, **filter_args))

    def finished_inputs(self, batch_id: str) -> set[int]:
        """The `input_index` of every run of the batch that ended (a final status, not `interrupted`).

        A resumed batch runs the other inputs: never started, still `running`, or interrupted.
        """
        return self._backend.finished_inputs(require_text(batch_id, "batch_id"))

    def run_evaluations(self, run_id: int) -> list[dict[str, Any]]:
        """A run's grading passes, oldest first, each shaped like `RubricEvaluation` plus `id`.

        Raises:
            StoreError: No run has that id.
        """
        return self._backend.run_evaluations(require_int(run_id, "run_id"))

    def transcript(self, run_id: int) -> list[dict[str, Any]]:
        """A run's stored messages: {position, role, name, content, is_grader, tool_calls, tool_call_id}.

        Raises:
            StoreError: No run has that id.
        """
        return self._backend.transcript(require_int(run_id, "run_id"))

    def criterion_pass_rates(
        self, filters: RunFilters | None = None, *, final_only: bool = False, **filter_args: Any
    ) -> list[dict[str, Any]]:
        """Per-criterion pass counts over the matching runs' passes, computed in SQL.

        Args:
            filters: Which runs; refined by `filter_args` (the `RunFilters` field names).
            final_only: Count only each run's last pass (its final verdict)
                instead of every pass.

        Returns:
            {criterion, passed, total, pass_rate, position} in rubric order.
        """
        chosen = RunFilters.from_args(filters, **filter_args)
        return self._backend.criterion_pass_rates(chosen, final_only=final_only)


def _transcript_rows(
    run_id: int, messages: Sequence[BaseMessage | Mapping[str, Any]]
) -> list[MessageRow]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        msg = f"messages must be a list of messages, got {type(messages).__name__}"
        raise StoreError(msg, kind="invalid")
    return [message_row(run_id, position, m) for position, m in enumerate(messages)]
