"""SQLite store for rubrics, runs, grading passes and transcripts: migrations, one writer, reads."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import os
import queue
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from rubric_core.rubric import validate_rubric
from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from rubric_core.schema import RubricEvaluation

__all__ = [
    "AGENT_KINDS",
    "EVALUATION_RESULTS",
    "RUBRIC_STATUSES",
    "RUN_STATUSES",
    "Store",
    "StoreError",
    "default_db_path",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

DB_ENV_VAR = "RUBRIC_STUDIO_DB"
"""Environment variable naming the database file."""

DEFAULT_DB_NAME = "rubric_studio.db"
"""File used (in the working directory) when `$RUBRIC_STUDIO_DB` is unset."""

RUBRIC_STATUSES: tuple[str, ...] = (
    "satisfied",
    "needs_revision",
    "failed",
    "grader_error",
    "max_iterations_reached",
)
"""The loop's status after a pass (`RubricEvaluation.status`)."""

EVALUATION_RESULTS: tuple[str, ...] = ("satisfied", "needs_revision", "failed", "grader_error")
"""What one pass may conclude (`RubricEvaluation.result`)."""

RUN_STATUSES: tuple[str, ...] = ("running", *RUBRIC_STATUSES, "interrupted", "error")
"""Every status a run may have."""

AGENT_KINDS: tuple[str, ...] = ("basic", "deep")
"""`basic` is `create_agent`, `deep` is `create_deep_agent`."""

_MAX_NAME_CHARS = 200
_MAX_TAG_CHARS = 50
_MAX_PAGE = 10_000
_GROUP_COMMIT_MAX = 64

_RUN_COLUMNS = """
    r.id, r.rubric_id, rb.name AS rubric, r.rubric_version_id, rv.version AS rubric_version,
    r.input, r.agent_model, r.grader_model, r.grader_tools, r.max_iterations, r.agent_kind,
    r.agent_system_prompt, r.grader_system_prompt, r.thread_id, r.batch_id, r.status,
    r.iterations, r.last_result, r.started_at, r.finished_at, r.duration_s, r.final_output,
    r.error, r.agent_input_tokens, r.agent_output_tokens, r.grader_input_tokens,
    r.grader_output_tokens, r.pid, r.host
"""
_RUN_FROM = """
    FROM runs r
    JOIN rubric_versions rv ON rv.id = r.rubric_version_id
    JOIN rubrics rb ON rb.id = r.rubric_id
"""


class StoreError(Exception):
    """The store cannot do what was asked; the message says what and why."""


def default_db_path() -> Path:
    """The database file: `$RUBRIC_STUDIO_DB`, or `./rubric_studio.db`.

    Examples:
        >>> import os
        >>> os.environ["RUBRIC_STUDIO_DB"] = "/tmp/x.db"
        >>> str(default_db_path())
        '/tmp/x.db'
    """
    value = os.environ.get(DB_ENV_VAR, "").strip()
    return Path(value).expanduser() if value else Path.cwd() / DEFAULT_DB_NAME


# --- schema ---------------------------------------------------------------------------------

MIGRATIONS = Migrations("rubric_studio")
"""Named, transactional schema migrations; append new steps, never edit applied ones."""


@MIGRATIONS(name="0001_rubrics")
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


@MIGRATIONS(name="0002_runs")
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


@MIGRATIONS(name="0003_evaluations")
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


@MIGRATIONS(name="0004_transcripts")
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


@MIGRATIONS(name="0005_runs_status_within_rubric_indexes")
def _m0005_runs_status_within_rubric(db: Database) -> None:
    # The Runs page filters a rubric (or version) by status; count it from the index alone.
    db.executescript(
        """
        CREATE INDEX idx_runs_rubric_status ON runs (rubric_id, status, started_at, id);
        CREATE INDEX idx_runs_version_status ON runs (rubric_version_id, status, started_at, id);
        """
    )


# --- small helpers ----------------------------------------------------------------------------


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _iso_from_unix(value: float) -> str:
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="microseconds")


def _parse_iso(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _normalise_time(value: object, name: str, *, end_of_day: bool = False) -> str | None:
    """An ISO-8601 UTC string comparable with stored `started_at`, or None.

    A bare date means the start of that day, or (for `until`, which is exclusive)
    the start of the next day, so `until=2025-01-31` includes the 31st.
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = (
                dt.date.fromisoformat(text) if len(text) == 10 else dt.datetime.fromisoformat(text)
            )
        except ValueError:
            msg = f"{name} must be an ISO-8601 date or datetime such as 2025-01-31, got {text!r}"
            raise StoreError(msg) from None
    if isinstance(value, bool):
        msg = f"{name} must be a date, datetime or ISO-8601 string, got {value!r}"
        raise StoreError(msg)
    if isinstance(value, int | float):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    elif isinstance(value, dt.date):
        day = value + dt.timedelta(days=1) if end_of_day else value
        moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    else:
        msg = f"{name} must be a date, datetime or ISO-8601 string, got {type(value).__name__}"
        raise StoreError(msg)
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def _require_int(value: object, name: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an integer, got {value!r}"
        raise StoreError(msg)
    if minimum is not None and value < minimum:
        msg = f"{name} must be at least {minimum}, got {value}"
        raise StoreError(msg)
    return value


def _require_text(value: object, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise StoreError(msg)
    if not allow_empty and not value.strip():
        msg = f"{name} must not be empty"
        raise StoreError(msg)
    if "\x00" in value:
        msg = f"{name} contains a NUL byte"
        raise StoreError(msg)
    return value


def _optional_text(value: object, name: str) -> str | None:
    return None if value is None else _require_text(value, name, allow_empty=True)


def _clean_name(name: object) -> str:
    text = _require_text(name, "rubric name").strip()
    if len(text) > _MAX_NAME_CHARS:
        msg = f"rubric name is {len(text)} characters; the limit is {_MAX_NAME_CHARS}"
        raise StoreError(msg)
    if "\n" in text or "\r" in text:
        msg = "rubric name must be a single line"
        raise StoreError(msg)
    return text


def _clean_tags(tags: object) -> list[str]:
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        msg = f"tags must be a list of strings, got {type(tags).__name__}"
        raise StoreError(msg)
    cleaned: list[str] = []
    for tag in tags:
        text = _require_text(tag, "tag").strip()
        if len(text) > _MAX_TAG_CHARS:
            msg = f"tag {text[:20]!r}... is {len(text)} characters; the limit is {_MAX_TAG_CHARS}"
            raise StoreError(msg)
        if text not in cleaned:
            cleaned.append(text)
    return cleaned


def _process_start(pid: int) -> str | None:
    """The kernel's start time of a process (Linux), to tell a reused pid from the original."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is the state (field 3); starttime is field 22.
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int | None, proc_start: str | None) -> bool:
    if not pid or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: trust kill(0)
    if state in ("Z", "X"):
        return False
    return proc_start is None or _process_start(pid) == proc_start


def _message_content(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        if parts or not content:
            return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def _message_row(run_id: int, position: int, message: object) -> tuple:
    if isinstance(message, Mapping):
        role = message.get("role") or message.get("type") or "unknown"
        name = message.get("name")
        content = message.get("content", "")
        extra = message.get("additional_kwargs") or {}
        tool_calls = message.get("tool_calls") or []
        tool_call_id = message.get("tool_call_id")
        flagged = bool(message.get("is_grader"))
    else:
        role = getattr(message, "type", None) or type(message).__name__
        name = getattr(message, "name", None)
        content = getattr(message, "content", "")
        extra = getattr(message, "additional_kwargs", None) or {}
        tool_calls = getattr(message, "tool_calls", None) or []
        tool_call_id = getattr(message, "tool_call_id", None)
        flagged = False
    is_grader = (
        flagged
        or name == RUBRIC_GRADER_MESSAGE_SOURCE
        or (isinstance(extra, Mapping) and extra.get("lc_source") == RUBRIC_GRADER_MESSAGE_SOURCE)
    )
    calls = [
        {"name": call.get("name"), "args": call.get("args", {}), "id": call.get("id")}
        if isinstance(call, Mapping)
        else {"name": str(call), "args": {}, "id": None}
        for call in tool_calls
    ]
    return (
        run_id,
        position,
        str(role),
        None if name is None else str(name),
        _message_content(content),
        int(is_grader),
        json.dumps(calls, ensure_ascii=False, default=str),
        None if tool_call_id is None else str(tool_call_id),
    )


_REQUIRED_EVALUATION_KEYS = ("grading_run_id", "iteration", "result", "status", "criteria")


def _evaluation_row(
    evaluation: object,
) -> tuple[dict[str, Any], list[tuple[int, str, int, str | None]]]:
    """Validate a `RubricEvaluation` dict; returns its column values and criterion rows."""
    if not isinstance(evaluation, Mapping):
        msg = f"evaluation must be a RubricEvaluation dict, got {type(evaluation).__name__}"
        raise StoreError(msg)
    missing = [key for key in _REQUIRED_EVALUATION_KEYS if key not in evaluation]
    if missing:
        msg = f"evaluation is missing {', '.join(missing)}"
        raise StoreError(msg)
    grading_run_id = evaluation["grading_run_id"]
    if not isinstance(grading_run_id, str) or not grading_run_id.strip():
        msg = f"evaluation grading_run_id must be a non-empty string, got {grading_run_id!r}"
        raise StoreError(msg)
    iteration = _require_int(evaluation["iteration"], "evaluation iteration", minimum=0)
    result = evaluation["result"]
    if result not in EVALUATION_RESULTS:
        msg = f"evaluation result {result!r} is not one of {', '.join(EVALUATION_RESULTS)}"
        raise StoreError(msg)
    status = evaluation["status"]
    if status not in RUBRIC_STATUSES:
        msg = f"evaluation status {status!r} is not one of {', '.join(RUBRIC_STATUSES)}"
        raise StoreError(msg)

    def number(key: str, default: float) -> float:
        value = evaluation.get(key, default)
        if value is None:
            value = default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            msg = f"evaluation {key} must be a number, got {value!r}"
            raise StoreError(msg)
        return float(value)

    def count(key: str) -> int:
        value = evaluation.get(key, 0)
        return _require_int(0 if value is None else value, f"evaluation {key}", minimum=0)

    values = {
        "grading_run_id": grading_run_id,
        "iteration": iteration,
        "result": result,
        "status": status,
        "explanation": _require_text(
            evaluation.get("explanation") or "", "evaluation explanation", allow_empty=True
        ),
        "draft": _require_text(evaluation.get("draft") or "", "evaluation draft", allow_empty=True),
        "started_at": number("started_at", time.time()),
        "duration_s": number("duration_s", 0.0),
        "grader_attempts": count("grader_attempts"),
        "grader_input_tokens": count("grader_input_tokens"),
        "grader_output_tokens": count("grader_output_tokens"),
    }
    criteria = evaluation["criteria"]
    if isinstance(criteria, str | bytes) or not isinstance(criteria, Sequence):
        msg = f"evaluation criteria must be a list, got {type(criteria).__name__}"
        raise StoreError(msg)
    rows: list[tuple[int, str, int, str | None]] = []
    for position, verdict in enumerate(criteria):
        if not isinstance(verdict, Mapping):
            msg = f"evaluation criteria[{position}] must be a dict with name and passed"
            raise StoreError(msg)
        name = verdict.get("name")
        if not isinstance(name, str) or not name.strip():
            msg = f"evaluation criteria[{position}] has no name"
            raise StoreError(msg)
        passed = verdict.get("passed")
        if not isinstance(passed, bool):
            msg = f"evaluation criteria[{position}] ({name!r}) passed must be true or false, got {passed!r}"
            raise StoreError(msg)
        gap = verdict.get("gap")
        if gap is not None and not isinstance(gap, str):
            msg = f"evaluation criteria[{position}] ({name!r}) gap must be a string"
            raise StoreError(msg)
        rows.append((position, name.strip(), int(passed), gap if gap else None))
    return values, rows


def _translate(exc: BaseException, path: Path, busy_timeout_s: float) -> BaseException:
    """Turn a sqlite3 error into a StoreError a person can act on; others pass through."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    text = str(exc)
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        msg = (
            f"database {path} is locked by another writer and stayed locked for "
            f"{busy_timeout_s:g}s; close the other program using it (or wait) and try again"
        )
    elif "readonly" in lowered or "read-only" in lowered:
        msg = (
            f"database {path} is read-only ({text}); make the file and its directory "
            f"writable, or point ${DB_ENV_VAR} at a writable copy"
        )
    elif "not a database" in lowered or "malformed" in lowered:
        msg = f"{path} is not a usable SQLite database ({text})"
    elif "unable to open" in lowered:
        msg = f"cannot open database {path} ({text}); check the path and its permissions"
    elif "disk i/o" in lowered or "disk is full" in lowered or "full" in lowered:
        msg = f"database {path} could not be written ({text}); check free space and the file"
    else:
        msg = f"database {path}: {type(exc).__name__}: {text}"
    error = StoreError(msg)
    error.__cause__ = exc
    return error


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
    return row


def _decode_version(row: dict[str, Any]) -> dict[str, Any]:
    row["criteria"] = json.loads(row["criteria"])
    return row


# --- the store ------------------------------------------------------------------------------


class Store:
    """Rubrics, runs, grading passes and transcripts in one SQLite file.

    Every write goes to one writer thread that owns the only write connection and
    commits before the call returns; reads use one read-only connection per
    thread. Safe to share across threads.

    Examples:
        >>> import tempfile, pathlib
        >>> store = Store(pathlib.Path(tempfile.mkdtemp()) / "s.db")
        >>> version = store.save_rubric_version("haiku", "- 5/7/5 syllables")
        >>> version["version"], version["criteria"]
        (1, ['5/7/5 syllables'])
        >>> store.close()
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 5.0):
        """Open (or create) the database, apply pending migrations, mark dead runs interrupted.

        Args:
            path: Database file; `default_db_path()` when None. Missing parent
                directories are created.
            busy_timeout_s: How long a write waits for another process's lock
                before it fails with StoreError.

        Raises:
            StoreError: The file is read-only, locked, not a database, or cannot be created.
        """
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, int | float):
            msg = f"busy_timeout_s must be a number of seconds, got {busy_timeout_s!r}"
            raise StoreError(msg)
        if busy_timeout_s < 0:
            msg = f"busy_timeout_s must be at least 0, got {busy_timeout_s}"
            raise StoreError(msg)
        self.path = Path(path if path is not None else default_db_path()).expanduser().resolve()
        self.busy_timeout_s = float(busy_timeout_s)
        self._closed = False
        self._local = threading.local()
        self._readers: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Callable[[Database], Any], Future] | None] = (
            queue.SimpleQueue()
        )
        self._identity: tuple[int, int] | None = None
        self._recovered_to: Path | None = None
        self._check_openable()
        ready: Future[None] = Future()
        self._writer = threading.Thread(
            target=self._writer_main,
            args=(ready,),
            name=f"rubric-store-writer:{self.path.name}",
            daemon=True,
        )
        self._writer.start()
        try:
            ready.result()
        except BaseException:
            self._closed = True
            self._writer.join(timeout=5)
            raise

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- lifecycle ----------------------------------------------------------------------

    def _check_openable(self) -> None:
        if self.path.is_dir():
            msg = f"database path {self.path} is a directory; give a file name such as {DEFAULT_DB_NAME}"
            raise StoreError(msg)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = f"cannot create the directory for database {self.path}: {exc}"
            raise StoreError(msg) from exc
        if self.path.exists():
            mode = self.path.stat().st_mode
            # Root ignores permission bits; honour them anyway so a file marked
            # read-only is never written.
            if not os.access(self.path, os.W_OK) or not mode & 0o222:
                msg = (
                    f"database {self.path} is read-only (permissions {oct(mode & 0o777)}); "
                    f"make it writable, or point ${DB_ENV_VAR} at a writable copy"
                )
                raise StoreError(msg)
        if not os.access(self.path.parent, os.W_OK):
            msg = (
                f"directory {self.path.parent} is not writable, so database {self.path.name} "
                "cannot keep its write-ahead log there"
            )
            raise StoreError(msg)

    def _writer_main(self, ready: Future[None]) -> None:
        try:
            db = self._open_writer()
        except BaseException as exc:
            ready.set_exception(_translate(exc, self.path, self.busy_timeout_s))
            return
        ready.set_result(None)
        try:
            while True:
                batch = [self._queue.get()]
                # Group commit: whatever queued up meanwhile shares one transaction.
                while len(batch) < _GROUP_COMMIT_MAX:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                jobs = [item for item in batch if item is not None]
                if jobs:
                    self._run_batch(db, jobs)
                if len(jobs) < len(batch):
                    break
        finally:
            with contextlib.suppress(sqlite3.Error):
                db.close()
            closed = StoreError(f"store {self.path} is closed")
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None and item[1].set_running_or_notify_cancel():
                    item[1].set_exception(closed)

    def _open_writer(self) -> Database:
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        db = Database(conn, execute_plugins=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            db.enable_wal()
            if db.journal_mode != "wal":
                msg = f"database {self.path} could not be switched to WAL mode"
                raise StoreError(msg)
            conn.execute("PRAGMA synchronous = FULL")
            self._apply_migrations(db)
            stat = self.path.stat()
            self._identity = (stat.st_dev, stat.st_ino)
            try:
                self._mark_interrupted(db)
            except sqlite3.OperationalError as exc:
                # Locked by another writer: leave them for the next open rather than fail.
                _log.warning("could not mark interrupted runs in %s: %s", self.path, exc)
        except BaseException:
            conn.close()
            raise
        return db

    def _apply_migrations(self, db: Database) -> None:
        for attempt in range(2):
            try:
                MIGRATIONS.apply(db)
                return
            except sqlite3.OperationalError as exc:
                # Another process migrated the same file at the same moment: look again.
                if attempt or "already exists" not in str(exc):
                    raise

    def _mark_interrupted(self, db: Database) -> int:
        host = socket.gethostname()
        rows = db.conn.execute(
            "SELECT id, pid, proc_start, started_at FROM runs WHERE status = 'running' AND host = ?",
            (host,),
        ).fetchall()
        dead = [row for row in rows if not _pid_alive(row[1], row[2])]
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
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        if threading.current_thread() is not self._writer:
            self._writer.join()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for _thread, conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # --- plumbing -----------------------------------------------------------------------

    def _check_file(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            stat = None
        if stat is None or (stat.st_dev, stat.st_ino) != self._identity:
            what = "deleted" if stat is None else "replaced by another file"
            msg = f"database {self.path} was {what} while the store was open"
            if self._recovered_to is not None:
                msg += f"; the rows committed until then were saved to {self._recovered_to}"
            raise StoreError(msg)

    def _recover(self, db: Database) -> None:
        """Copy what this connection still sees of a deleted file next to where it was."""
        if self._recovered_to is not None:
            return
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.stem}.recovered-{stamp}{self.path.suffix}")
        try:
            db.conn.execute("VACUUM INTO ?", (str(target),))
        except sqlite3.Error as exc:
            _log.error("could not recover %s into %s: %s", self.path, target, exc)
            return
        self._recovered_to = target

    def _run_batch(
        self, db: Database, jobs: list[tuple[Callable[[Database], Any], Future]]
    ) -> None:
        """Run jobs in one transaction, each in its own savepoint; resolve them after COMMIT.

        A job that raises is rolled back alone; the others still commit. No
        caller hears "done" before its rows are committed.
        """
        live = [(job, future) for job, future in jobs if future.set_running_or_notify_cancel()]
        if not live:
            return

        def fail_all(exc: BaseException) -> None:
            error = _translate(exc, self.path, self.busy_timeout_s)
            for _job, future in live:
                future.set_exception(error)

        conn = db.conn
        try:
            try:
                self._check_file()
            except StoreError:
                self._recover(db)
                self._check_file()  # raises again, now naming the recovery file
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            fail_all(exc)
            return
        outcomes: list[tuple[Future, Any, BaseException | None]] = []
        try:
            for job, future in live:
                conn.execute("SAVEPOINT store_job")
                try:
                    result = job(db)
                except BaseException as exc:
                    if not conn.in_transaction:
                        raise  # the error ended the whole transaction: nothing committed
                    conn.execute("ROLLBACK TO store_job")
                    conn.execute("RELEASE store_job")
                    outcomes.append((future, None, exc))
                else:
                    conn.execute("RELEASE store_job")
                    outcomes.append((future, result, None))
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            fail_all(exc)
            return
        for future, result, error in outcomes:
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(_translate(error, self.path, self.busy_timeout_s))

    def _write(self, job: Callable[[Database], _T]) -> _T:
        if self._closed:
            msg = f"store {self.path} is closed"
            raise StoreError(msg)
        future: Future[_T] = Future()
        self._queue.put((job, future))
        return future.result()

    def connect_readonly(self) -> sqlite3.Connection:
        """A new read-only connection (rows as `sqlite3.Row`); the caller closes it.

        Used for long streaming reads such as exports, which should not share the
        per-thread connection.
        """
        if self._closed:
            msg = f"store {self.path} is closed"
            raise StoreError(msg)
        self._check_file()
        uri = f"file:{quote(str(self.path))}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, self.busy_timeout_s) from exc
        conn.row_factory = sqlite3.Row
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = self.connect_readonly()
        self._local.conn = conn
        with self._readers_lock:
            # Close connections of threads that have ended (Streamlit starts many).
            alive = []
            for thread_ref, other in self._readers:
                thread = thread_ref()
                if thread is None or not thread.is_alive():
                    with contextlib.suppress(sqlite3.Error):
                        other.close()
                else:
                    alive.append((thread_ref, other))
            alive.append((weakref.ref(threading.current_thread()), conn))
            self._readers = alive
        return conn

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        if self._closed:
            msg = f"store {self.path} is closed"
            raise StoreError(msg)
        self._check_file()
        try:
            cursor = self._reader().execute(sql, params)
            return [dict(row) for row in cursor.fetchall()]
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, self.busy_timeout_s) from exc

    def _query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self._query(sql, params)
        return rows[0] if rows else None

    def _require_run(self, conn: sqlite3.Connection, run_id: object) -> int:
        run_id = _require_int(run_id, "run_id")
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            msg = f"unknown run id {run_id}"
            raise StoreError(msg)
        return run_id

    def _known_run(self, run_id: object) -> int:
        """`_require_run` for readers: through `_query`, so closed or vanished files are
        reported the way every read reports them."""
        run_id = _require_int(run_id, "run_id")
        if self._query_one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is None:
            msg = f"unknown run id {run_id}"
            raise StoreError(msg)
        return run_id

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
        name = _clean_name(name)
        criteria = validate_rubric(text)
        text = text.strip()
        note = _require_text(note if note is not None else "", "note", allow_empty=True)
        clean_tags = None if tags is None else _clean_tags(tags)

        def job(db: Database) -> int:
            conn = db.conn
            now = _now_iso()
            row = conn.execute("SELECT id FROM rubrics WHERE name = ?", (name,)).fetchone()
            if row is None:
                rubric_id = conn.execute(
                    "INSERT INTO rubrics (name, created_at, updated_at) VALUES (?, ?, ?)",
                    (name, now, now),
                ).lastrowid
            else:
                rubric_id = row[0]
            if clean_tags is not None:
                self._replace_tags(conn, rubric_id, clean_tags)
            latest = conn.execute(
                "SELECT id, version, text FROM rubric_versions WHERE rubric_id = ? "
                "ORDER BY version DESC LIMIT 1",
                (rubric_id,),
            ).fetchone()
            if latest is not None and latest[2] == text:
                return latest[0]
            version_id = conn.execute(
                "INSERT INTO rubric_versions (rubric_id, version, text, criteria, note, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    rubric_id,
                    (latest[1] if latest else 0) + 1,
                    text,
                    json.dumps(criteria, ensure_ascii=False),
                    note,
                    now,
                ),
            ).lastrowid
            conn.execute("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now, rubric_id))
            return version_id

        return self.get_rubric_version(self._write(job))

    @staticmethod
    def _replace_tags(conn: sqlite3.Connection, rubric_id: int, tags: list[str]) -> None:
        conn.execute("DELETE FROM rubric_tags WHERE rubric_id = ?", (rubric_id,))
        conn.executemany(
            "INSERT INTO rubric_tags (rubric_id, tag) VALUES (?, ?)",
            [(rubric_id, tag) for tag in tags],
        )

    def set_rubric_tags(self, name: str, tags: list[str]) -> None:
        """Replace the tags of rubric `name`.

        Raises:
            StoreError: No rubric has that name, or a tag is invalid.
        """
        name = _clean_name(name)
        clean_tags = _clean_tags(tags)

        def job(db: Database) -> None:
            row = db.conn.execute("SELECT id FROM rubrics WHERE name = ?", (name,)).fetchone()
            if row is None:
                msg = f"unknown rubric {name!r}"
                raise StoreError(msg)
            self._replace_tags(db.conn, row[0], clean_tags)
            db.conn.execute("UPDATE rubrics SET updated_at = ? WHERE id = ?", (_now_iso(), row[0]))

        self._write(job)

    def list_rubrics(self) -> list[dict[str, Any]]:
        """Every rubric, by name: {id, name, tags, latest_version, latest_version_id, versions, updated_at}."""
        rows = self._query(
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
        """Every version of rubric `name`, oldest first.

        Raises:
            StoreError: No rubric has that name.
        """
        name = _clean_name(name)
        rows = self._query(
            "SELECT v.id, v.rubric_id, rb.name, v.version, v.text, v.criteria, v.note, v.created_at "
            "FROM rubric_versions v JOIN rubrics rb ON rb.id = v.rubric_id "
            "WHERE rb.name = ? ORDER BY v.version",
            (name,),
        )
        if not rows:
            msg = f"unknown rubric {name!r}"
            raise StoreError(msg)
        return [_decode_version(row) for row in rows]

    def get_rubric_version(self, version_id: int) -> dict[str, Any]:
        """One version row by id.

        Raises:
            StoreError: No version has that id.
        """
        version_id = _require_int(version_id, "version_id")
        row = self._query_one(
            "SELECT v.id, v.rubric_id, rb.name, v.version, v.text, v.criteria, v.note, v.created_at "
            "FROM rubric_versions v JOIN rubrics rb ON rb.id = v.rubric_id WHERE v.id = ?",
            (version_id,),
        )
        if row is None:
            msg = f"unknown rubric version id {version_id}"
            raise StoreError(msg)
        return _decode_version(row)

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
    ) -> int:
        """Record a new run with status `running`, owned by this process; returns its id.

        Raises:
            StoreError: A field is invalid or the rubric version does not exist.
        """
        rubric_version_id = _require_int(rubric_version_id, "rubric_version_id")
        _require_text(input, "input")
        _require_text(agent_model, "agent_model")
        _require_text(grader_model, "grader_model")
        if isinstance(grader_tools, str) or not isinstance(grader_tools, Iterable):
            msg = f"grader_tools must be a list of tool names, got {grader_tools!r}"
            raise StoreError(msg)
        tools = [_require_text(tool, "grader tool name").strip() for tool in grader_tools]
        _require_int(max_iterations, "max_iterations", minimum=1)
        if agent_kind not in AGENT_KINDS:
            msg = f"agent_kind must be one of {', '.join(AGENT_KINDS)}, got {agent_kind!r}"
            raise StoreError(msg)
        _optional_text(agent_system_prompt, "agent_system_prompt")
        _optional_text(grader_system_prompt, "grader_system_prompt")
        _optional_text(thread_id, "thread_id")
        _optional_text(batch_id, "batch_id")
        pid = os.getpid()
        values = (
            rubric_version_id,
            input,
            agent_model.strip(),
            grader_model.strip(),
            json.dumps(tools),
            max_iterations,
            agent_kind,
            agent_system_prompt,
            grader_system_prompt,
            thread_id,
            batch_id,
            _now_iso(),
            pid,
            socket.gethostname(),
            _process_start(pid),
        )

        def job(db: Database) -> int:
            row = db.conn.execute(
                "SELECT rubric_id FROM rubric_versions WHERE id = ?", (rubric_version_id,)
            ).fetchone()
            if row is None:
                msg = f"unknown rubric version id {rubric_version_id}"
                raise StoreError(msg)
            return db.conn.execute(
                """
                INSERT INTO runs (rubric_id, rubric_version_id, input, agent_model, grader_model,
                    grader_tools, max_iterations, agent_kind, agent_system_prompt,
                    grader_system_prompt, thread_id, batch_id, started_at, pid, host, proc_start,
                    status)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running')
                """,
                (row[0], *values),
            ).lastrowid

        return self._write(job)

    def record_evaluation(self, run_id: int, evaluation: RubricEvaluation) -> int:
        """Commit one grading pass and its criterion verdicts; returns the evaluation id.

        Idempotent on (run_id, grading_run_id, iteration): recording the same pass
        again (a resumed run) updates it in place and returns the same id.

        Raises:
            StoreError: Unknown run, or the evaluation dict is malformed.
        """
        run_id = _require_int(run_id, "run_id")
        values, criteria = _evaluation_row(evaluation)
        values["run_id"] = run_id
        values["recorded_at"] = _now_iso()

        def job(db: Database) -> int:
            conn = db.conn
            self._require_run(conn, run_id)
            columns = list(values)
            updates = ", ".join(
                f"{c} = excluded.{c}"
                for c in columns
                if c not in ("run_id", "grading_run_id", "iteration")
            )
            evaluation_id = conn.execute(
                f"INSERT INTO evaluations ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' for _ in columns)}) "
                f"ON CONFLICT (run_id, grading_run_id, iteration) DO UPDATE SET {updates} "
                "RETURNING id",
                list(values.values()),
            ).fetchone()[0]
            conn.execute("DELETE FROM criterion_results WHERE evaluation_id = ?", (evaluation_id,))
            conn.executemany(
                "INSERT INTO criterion_results "
                "(evaluation_id, position, run_id, criterion, passed, gap) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (evaluation_id, pos, run_id, name, passed, gap)
                    for pos, name, passed, gap in criteria
                ],
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

        return self._write(job)

    def save_transcript(
        self, run_id: int, messages: Sequence[BaseMessage | Mapping[str, Any]]
    ) -> None:
        """Replace the stored transcript of a run; grader-injected messages are flagged.

        Raises:
            StoreError: Unknown run, or `messages` is not a list.
        """
        run_id = _require_int(run_id, "run_id")
        if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
            msg = f"messages must be a list of messages, got {type(messages).__name__}"
            raise StoreError(msg)
        rows = [_message_row(run_id, position, m) for position, m in enumerate(messages)]

        def job(db: Database) -> None:
            self._require_run(db.conn, run_id)
            db.conn.execute("DELETE FROM transcript_messages WHERE run_id = ?", (run_id,))
            db.conn.executemany(
                "INSERT INTO transcript_messages (run_id, position, role, name, content, "
                "is_grader, tool_calls, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

        self._write(job)

    def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        final_output: str = "",
        error: str | None = None,
        agent_input_tokens: int = 0,
        agent_output_tokens: int = 0,
    ) -> None:
        """Close a run with its final status, output and agent token usage.

        Raises:
            StoreError: Unknown run, or a status that is not a final one.
        """
        run_id = _require_int(run_id, "run_id")
        if status not in RUN_STATUSES or status == "running":
            finals = ", ".join(s for s in RUN_STATUSES if s != "running")
            msg = f"finish_run status must be one of {finals}, got {status!r}"
            raise StoreError(msg)
        _require_text(
            final_output if final_output is not None else "", "final_output", allow_empty=True
        )
        _optional_text(error, "error")
        _require_int(agent_input_tokens, "agent_input_tokens", minimum=0)
        _require_int(agent_output_tokens, "agent_output_tokens", minimum=0)

        def job(db: Database) -> None:
            row = db.conn.execute("SELECT started_at FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                msg = f"unknown run id {run_id}"
                raise StoreError(msg)
            finished = dt.datetime.now(dt.UTC)
            db.conn.execute(
                "UPDATE runs SET status = ?, final_output = ?, error = ?, agent_input_tokens = ?, "
                "agent_output_tokens = ?, finished_at = ?, duration_s = ? WHERE id = ?",
                (
                    status,
                    final_output or "",
                    error,
                    agent_input_tokens,
                    agent_output_tokens,
                    finished.isoformat(timespec="microseconds"),
                    max(0.0, (finished - _parse_iso(row[0])).total_seconds()),
                    run_id,
                ),
            )

        self._write(job)

    def resume_run(self, run_id: int) -> None:
        """Mark a run `running` again, owned by this process (resuming from its checkpoint).

        Raises:
            StoreError: Unknown run.
        """
        run_id = _require_int(run_id, "run_id")
        pid = os.getpid()
        owner = (pid, socket.gethostname(), _process_start(pid))

        def job(db: Database) -> None:
            self._require_run(db.conn, run_id)
            db.conn.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL, duration_s = NULL, "
                "error = NULL, pid = ?, host = ?, proc_start = ? WHERE id = ?",
                (*owner, run_id),
            )

        self._write(job)

    # --- runs: reads --------------------------------------------------------------------

    def run_filter_sql(
        self,
        *,
        rubric: str | None = None,
        version_id: int | None = None,
        model: str | None = None,
        status: str | Sequence[str] | None = None,
        since: object = None,
        until: object = None,
        batch_id: str | None = None,
    ) -> tuple[str, list[Any]]:
        """A `WHERE` clause over `runs r` for the shared filters, and its parameters.

        `model` matches the agent or the grader model; `status` may be one status
        or a list; `since` is inclusive and `until` exclusive (a bare date in
        `until` includes that whole day).

        Raises:
            StoreError: Unknown rubric, version or status, or an unreadable date.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if rubric is not None:
            name = _clean_name(rubric)
            row = self._query_one("SELECT id FROM rubrics WHERE name = ?", (name,))
            if row is None:
                msg = f"unknown rubric {name!r}"
                raise StoreError(msg)
            clauses.append("r.rubric_id = ?")
            params.append(row["id"])
        if version_id is not None:
            version_id = _require_int(version_id, "version_id")
            if self._query_one("SELECT 1 FROM rubric_versions WHERE id = ?", (version_id,)) is None:
                msg = f"unknown rubric version id {version_id}"
                raise StoreError(msg)
            clauses.append("r.rubric_version_id = ?")
            params.append(version_id)
        if model is not None:
            model = _require_text(model, "model").strip()
            clauses.append("(r.agent_model = ? OR r.grader_model = ?)")
            params.extend([model, model])
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            unknown = [s for s in statuses if s not in RUN_STATUSES]
            if unknown or not statuses:
                msg = (
                    f"unknown status {', '.join(map(repr, unknown)) or '(empty list)'}; "
                    f"statuses are {', '.join(RUN_STATUSES)}"
                )
                raise StoreError(msg)
            clauses.append(f"r.status IN ({', '.join('?' for _ in statuses)})")
            params.extend(statuses)
        since_iso = _normalise_time(since, "since")
        until_iso = _normalise_time(until, "until", end_of_day=True)
        if since_iso is not None:
            clauses.append("r.started_at >= ?")
            params.append(since_iso)
        if until_iso is not None:
            clauses.append("r.started_at < ?")
            params.append(until_iso)
        if batch_id is not None:
            clauses.append("r.batch_id = ?")
            params.append(_require_text(batch_id, "batch_id"))
        return (" AND ".join(clauses) or "1"), params

    def get_run(self, run_id: int) -> dict[str, Any]:
        """One run, with rubric name and version, iterations, grader token sums, duration.

        Raises:
            StoreError: No run has that id.
        """
        run_id = _require_int(run_id, "run_id")
        row = self._query_one(f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE r.id = ?", (run_id,))
        if row is None:
            msg = f"unknown run id {run_id}"
            raise StoreError(msg)
        return _decode_run(row)

    def list_runs(
        self,
        *,
        rubric: str | None = None,
        version_id: int | None = None,
        model: str | None = None,
        status: str | Sequence[str] | None = None,
        since: object = None,
        until: object = None,
        batch_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A page of runs, newest first (`started_at DESC, id DESC`).

        Raises:
            StoreError: A filter is invalid (see `run_filter_sql`), or limit/offset are.
        """
        limit = _require_int(limit, "limit", minimum=1)
        if limit > _MAX_PAGE:
            msg = f"limit must be at most {_MAX_PAGE}, got {limit}"
            raise StoreError(msg)
        offset = _require_int(offset, "offset", minimum=0)
        where, params = self.run_filter_sql(
            rubric=rubric,
            version_id=version_id,
            model=model,
            status=status,
            since=since,
            until=until,
            batch_id=batch_id,
        )
        rows = self._query(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM} WHERE {where} "
            "ORDER BY r.started_at DESC, r.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_decode_run(row) for row in rows]

    def count_runs(
        self,
        *,
        rubric: str | None = None,
        version_id: int | None = None,
        model: str | None = None,
        status: str | Sequence[str] | None = None,
        since: object = None,
        until: object = None,
        batch_id: str | None = None,
    ) -> int:
        """How many runs match the filters of `list_runs`."""
        where, params = self.run_filter_sql(
            rubric=rubric,
            version_id=version_id,
            model=model,
            status=status,
            since=since,
            until=until,
            batch_id=batch_id,
        )
        row = self._query_one(f"SELECT COUNT(*) AS n FROM runs r WHERE {where}", params)
        return int(row["n"]) if row else 0

    def run_evaluations(self, run_id: int) -> list[dict[str, Any]]:
        """A run's grading passes, oldest first, each shaped like `RubricEvaluation` plus `id`.

        Raises:
            StoreError: No run has that id.
        """
        run_id = self._known_run(run_id)
        evaluations = self._query(
            "SELECT id, run_id, grading_run_id, iteration, result, status, explanation, draft, "
            "started_at, duration_s, grader_attempts, grader_input_tokens, grader_output_tokens "
            "FROM evaluations WHERE run_id = ? ORDER BY started_at, id",
            (run_id,),
        )
        by_id: dict[int, dict[str, Any]] = {}
        for evaluation in evaluations:
            evaluation["criteria"] = []
            by_id[evaluation["id"]] = evaluation
        criteria = self._query(
            "SELECT evaluation_id, criterion, passed, gap FROM criterion_results "
            "WHERE evaluation_id IN (SELECT id FROM evaluations WHERE run_id = ?) "
            "ORDER BY evaluation_id, position",
            (run_id,),
        )
        for row in criteria:
            verdict: dict[str, Any] = {"name": row["criterion"], "passed": bool(row["passed"])}
            if row["gap"] is not None:
                verdict["gap"] = row["gap"]
            by_id[row["evaluation_id"]]["criteria"].append(verdict)
        return evaluations

    def transcript(self, run_id: int) -> list[dict[str, Any]]:
        """A run's stored messages: {position, role, name, content, is_grader, tool_calls, tool_call_id}.

        Raises:
            StoreError: No run has that id.
        """
        run_id = self._known_run(run_id)
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
        self,
        *,
        version_id: int | None = None,
        rubric: str | None = None,
        model: str | None = None,
        status: str | Sequence[str] | None = None,
        since: object = None,
        until: object = None,
        batch_id: str | None = None,
        final_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Per-criterion pass counts over the matching runs' passes, computed in SQL.

        Args:
            final_only: Count only each run's last pass (its final verdict)
                instead of every pass.

        Returns:
            {criterion, passed, total, pass_rate, position} in rubric order.
        """
        where, params = self.run_filter_sql(
            rubric=rubric,
            version_id=version_id,
            model=model,
            status=status,
            since=since,
            until=until,
            batch_id=batch_id,
        )
        final = (
            " AND e.id = (SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id "
            "ORDER BY e2.started_at DESC, e2.id DESC LIMIT 1)"
            if final_only
            else ""
        )
        return self._query(
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
