"""No graded pass lost, whatever the text, the disk or the file does.

NUL characters in stored text, a pass that cannot be written (a lock held past the busy
timeout, a full disk), the write-ahead log merged into the file and `backup`, a store
from a newer version, the database file deleted during a run.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from rubric_core.cli import cli
from rubric_core.providers import ReplayChatModel, verdict_turn
from rubric_core.runs import RunSpec, resume_run, run_once, start_run
from rubric_core.store import MIGRATIONS, RunEnd, Store, StoreError
from rubric_core.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from rubric_core.store.sqlite import connection
from rubric_core.store.sqlite.connection import translate
from rubric_core.ui.errors import store_error_message
from tests.support.store import make_evaluation, new_run

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60
RUBRIC = "- has a title\n- cites a source"
TITLE = ("has a title", True)
NO_SOURCE = ("cites a source", False, "add a source")
SOURCE = ("cites a source", True)
NUL_TEXTS = ("a\x00b", "\x00", "keeps \ufdd0 and \ufdd00 and \ufdd0\ufdd0\x00 apart", "plain")


def _spec(store: Store, **overrides: Any) -> RunSpec:
    values: dict[str, Any] = {
        "rubric_version_id": store.rubrics.save_version("article", RUBRIC)["id"],
        "input": "Write a short article about tides.",
        "agent_model": "replay:needs_revision_then_satisfied",
        "grader_model": "replay:needs_revision_then_satisfied",
        "max_iterations": 4,
    }
    values.update(overrides)
    return RunSpec(**values)


def _models(*verdicts: AIMessage) -> tuple[ReplayChatModel, ReplayChatModel]:
    agent = ReplayChatModel(scenario="agent", turns=[AIMessage(f"draft {i}") for i in range(5)])
    return agent, ReplayChatModel(scenario="grader", turns=list(verdicts))


def _three_passes() -> tuple[ReplayChatModel, ReplayChatModel]:
    return _models(
        verdict_turn("needs_revision", [TITLE, NO_SOURCE], "verdict 0"),
        verdict_turn("needs_revision", [TITLE, NO_SOURCE], "verdict 1"),
        verdict_turn("satisfied", [TITLE, SOURCE], "verdict 2"),
    )


# --- 1. NUL characters ---------------------------------------------------------------------


@pytest.mark.both_backends
def test_text_with_nul_characters_is_stored_and_read_back_as_given(store):
    version = store.rubrics.save_version("nul", RUBRIC)
    run_id = new_run(store, version["id"], input="ask\x00me", batch_id="b\x00", input_index=0)
    for iteration, text in enumerate(NUL_TEXTS):
        evaluation = make_evaluation(
            grading_run_id="g", iteration=iteration, explanation=text, draft=text,
            verdicts=[TITLE, ("cites a source", False, text)],
        )  # fmt: skip
        store.passes.record(run_id, evaluation)
    messages = [HumanMessage("q\x00"), AIMessage("a\x00", name="n\x00"), ToolMessage("t\x00", tool_call_id="c\x00")]  # fmt: skip
    store.runs.save_transcript(run_id, messages)
    store.runs.finish(run_id, RunEnd(status="error", final_output="out\x00put", error="err\x00"))

    passes = store.passes.of_run(run_id)
    assert [p["explanation"] for p in passes] == list(NUL_TEXTS)
    assert [p["draft"] for p in passes] == list(NUL_TEXTS)
    assert [p["criteria"][1]["gap"] for p in passes] == list(NUL_TEXTS)
    run = store.runs.get(run_id)
    assert (run["input"], run["final_output"], run["error"]) == (
        "ask\x00me",
        "out\x00put",
        "err\x00",
    )
    assert store.runs.find(batch_id="b\x00")[0]["id"] == run_id  # a filter matches it too
    stored = store.runs.transcript(run_id)
    assert [m["content"] for m in stored] == ["q\x00", "a\x00", "t\x00"]
    assert (stored[1]["name"], stored[2]["tool_call_id"]) == ("n\x00", "c\x00")
    [streamed] = list(store.stream_rows("SELECT draft FROM evaluations WHERE iteration = 2"))
    assert streamed == [(NUL_TEXTS[2],)]


@pytest.mark.both_backends
def test_a_run_whose_answer_and_verdict_hold_nul_ends_properly(store):
    agent = ReplayChatModel(scenario="agent", turns=[AIMessage("Tides\x00 (NOAA)")])
    grader = ReplayChatModel(
        scenario="grader", turns=[verdict_turn("satisfied", [TITLE, SOURCE], "fine\x00")]
    )
    run = run_once(store, _spec(store), agent_llm=agent, grader_llm=grader)
    assert run["status"] == "satisfied", run["error"]
    assert run["final_output"] == "Tides\x00 (NOAA)"
    [graded] = store.passes.of_run(run["id"])
    assert (graded["draft"], graded["explanation"]) == ("Tides\x00 (NOAA)", "fine\x00")
    assert "Tides\x00 (NOAA)" in [m["content"] for m in store.runs.transcript(run["id"])]


def test_rubric_names_and_tags_with_nul_are_refused_by_name(store):
    with pytest.raises(StoreError, match="rubric name contains a NUL character"):
        store.rubrics.save_version("bad\x00name", RUBRIC)
    with pytest.raises(StoreError, match="tag contains a NUL character"):
        store.rubrics.save_version("good", RUBRIC, tags=["t\x00"])
    assert store.rubrics.find() == []


# --- 2. a pass that cannot be written ------------------------------------------------------


class _Lock:
    """Another process's write lock on the file (`BEGIN IMMEDIATE` on a second connection),
    taken after the first pass is stored and let go once the run has given up on a pass."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.given_up: list[str] = []

    def take_after_first_pass(self, evaluation: dict[str, Any]) -> None:
        if evaluation["iteration"] == 0:
            self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class _ReleaseWhenGivenUp(logging.Handler):
    def __init__(self, lock: _Lock) -> None:
        super().__init__()
        self.held = lock

    def emit(self, record: logging.LogRecord) -> None:
        if "could not be stored" in record.getMessage():
            self.held.given_up.append(record.getMessage())
            self.held.release()


def test_a_pass_locked_out_stops_the_run_and_resume_grades_it(tmp_path):
    path = tmp_path / "locked.db"
    store = Store(path, busy_timeout_s=0.05)
    lock = _Lock(path)
    watcher = _ReleaseWhenGivenUp(lock)
    logger = logging.getLogger("rubric_core.runs.recording")
    logger.addHandler(watcher)
    try:
        agent, grader = _three_passes()
        handle = start_run(
            store, _spec(store), on_evaluation=lock.take_after_first_pass,
            agent_llm=agent, grader_llm=grader,
        )  # fmt: skip
        assert handle.wait(WAIT_S)
        run = store.runs.get(handle.run_id)
        # The loop stopped at the pass it could not store: no later pass was graded.
        assert [p["iteration"] for p in store.passes.of_run(handle.run_id)] == [0]
        assert run["status"] == "error"
        assert "grading pass 2 could not be stored" in run["error"]
        assert "is locked by another writer" in run["error"] and "tried 4 times" in run["error"]
        answers = [m for m in store.runs.transcript(handle.run_id) if m["role"] == "ai"]
        assert [m["content"] for m in answers] == ["draft 0", "draft 1"]
        assert lock.given_up

        agent, grader = _three_passes()  # a fresh process's models
        resumed = resume_run(store, handle.run_id, agent_llm=agent, grader_llm=grader)
        assert resumed.wait(WAIT_S)
        run = store.runs.get(handle.run_id)
        assert run["status"] == "satisfied", run["error"]
        passes = store.passes.of_run(handle.run_id)
        assert [p["iteration"] for p in passes] == [0, 1, 2]
        assert [p["explanation"] for p in passes] == ["verdict 0", "verdict 1", "verdict 2"]
        assert len({p["grading_run_id"] for p in passes}) == 1
    finally:
        logger.removeHandler(watcher)
        lock.release()
        lock.conn.close()
        store.close()


def test_resume_stores_a_pass_the_checkpoint_kept_but_the_store_lost(store):
    # What an older version left behind: the loop went on without a pass it could not
    # store, and the run ended `error`. Resuming must not finish with the gap.
    agent, grader = _models(
        verdict_turn("needs_revision", [TITLE, NO_SOURCE], "verdict 0"),
        verdict_turn("satisfied", [TITLE, SOURCE], "verdict 1"),
    )
    run = run_once(store, _spec(store), agent_llm=agent, grader_llm=grader)
    assert run["status"] == "satisfied"
    with sqlite3.connect(store.path) as conn:
        conn.execute("DELETE FROM criterion_results WHERE run_id = ?", (run["id"],))
        conn.execute("DELETE FROM evaluations WHERE run_id = ? AND iteration = 0", (run["id"],))
        conn.execute("UPDATE runs SET iterations = 1 WHERE id = ?", (run["id"],))
    store.runs.finish(run["id"], RunEnd(status="error", error="storing grading pass 0 failed"))

    agent, grader = _models()
    assert resume_run(store, run["id"], agent_llm=agent, grader_llm=grader).wait(WAIT_S)
    run = store.runs.get(run["id"])
    assert run["status"] == "satisfied", run["error"]
    passes = store.passes.of_run(run["id"])
    assert [(p["iteration"], p["explanation"]) for p in passes] == [(0, "verdict 0"), (1, "verdict 1")]  # fmt: skip
    assert run["iterations"] == 2


def test_retry_write_retries_transient_faults_and_no_others():
    from rubric_core.store.retry import WriteRetry, retry_write

    calls: list[int] = []
    quick = WriteRetry(attempts=3, first_wait_s=0, max_wait_s=0)

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise StoreError("database x.db is locked", kind="locked")
        return "stored"

    assert retry_write(flaky, what="a pass", policy=quick) == "stored"
    assert len(calls) == 3

    calls.clear()
    with pytest.raises(StoreError, match=r"database x.db is locked \(tried 3 times\)"):
        retry_write(lambda: _always_locked(calls), what="a pass", policy=quick)
    assert len(calls) == 3

    calls.clear()

    def deleted() -> None:
        calls.append(1)
        raise StoreError("database x.db was deleted", kind="missing")

    with pytest.raises(StoreError, match=r"^database x.db was deleted$"):
        retry_write(deleted, what="a pass", policy=quick)
    assert len(calls) == 1
    with pytest.raises(ValueError, match="attempts must be at least 1, got 0"):
        WriteRetry(attempts=0)


def _always_locked(calls: list[int]) -> None:
    calls.append(1)
    raise StoreError("database x.db is locked", kind="locked")


_FULL_DISK_CHILD = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, {root!r})
    from tests.support.store import make_evaluation, new_run
    from rubric_core.store import Store, StoreError
    from rubric_core.store.retry import WriteRetry, retry_write

    store = Store(sys.argv[1])
    version = store.rubrics.save_version("full", "- has a title\\n- cites a source")
    run_id = new_run(store, version["id"])
    store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=0))
    print(run_id, flush=True)
    # The disk is full: no file of this process may grow past 64 KiB from here on.
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    big = make_evaluation(grading_run_id="g", iteration=1, draft="x" * 1_000_000)
    try:
        retry_write(lambda: store.passes.record(run_id, big), what="pass 2",
                    policy=WriteRetry(attempts=2, first_wait_s=0, max_wait_s=0))
    except StoreError as exc:
        print(exc.kind, exc, flush=True)
    store.close()
    """
)


def test_a_full_disk_is_an_io_error_retried_then_reported_and_nothing_stored_is_lost(tmp_path):
    path = tmp_path / "full.db"
    script = tmp_path / "child.py"
    script.write_text(_FULL_DISK_CHILD.format(root=str(REPO_ROOT)))
    done = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    run_line, error_line = done.stdout.strip().splitlines()
    assert error_line.startswith("io database ")
    assert "could not be written" in error_line and "(tried 2 times)" in error_line
    with Store(path) as store:
        assert [p["iteration"] for p in store.passes.of_run(int(run_line))] == [0]


def _disk_full(*args: Any, **kwargs: Any) -> None:
    raise translate(sqlite3.OperationalError("database or disk is full"), Path("cli.db"), 5)


def test_cli_run_on_a_full_disk_prints_an_error_status_never_running(tmp_path, monkeypatch):
    from rubric_core.store.queries.passes import Passes
    from rubric_core.store.queries.runs import Runs
    from rubric_core.store.retry import WriteRetry

    monkeypatch.setattr(Passes, "record", _disk_full)
    monkeypatch.setattr(Runs, "finish", _disk_full)
    monkeypatch.setattr("rubric_core.store.retry.DEFAULT_WRITE_RETRY", WriteRetry(2, 0, 0))
    result = CliRunner().invoke(
        cli, ["run", "--scenario", "satisfied_first_try", "--db", str(tmp_path / "cli.db")]
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "Status: running" not in result.output
    assert "Status: error" in result.output
    assert "grading pass 1 could not be stored" in result.output
    assert "could not be written (database or disk is full)" in result.output
    with Store(tmp_path / "cli.db") as store:
        assert store.passes.of_run(store.runs.find()[0]["id"]) == []


# --- 3. the write-ahead log and backups ----------------------------------------------------


def _copy_alone(path: Path, tmp_path: Path) -> Path:
    """A copy of the .db file without its -wal and -shm, as a naive backup makes."""
    copy = tmp_path / "copy" / path.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(path.read_bytes())
    return copy


def _rubric_names(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "rubrics" not in tables:
            return []
        return [row[0] for row in conn.execute("SELECT name FROM rubrics ORDER BY name")]


def test_closing_the_store_merges_the_log_though_a_reader_closes_last(tmp_path):
    path = tmp_path / "studio.db"
    store = Store(path)
    store.rubrics.save_version("kept", RUBRIC)
    reader = threading.Thread(target=store.rubrics.find)  # a reader of another thread
    reader.start()
    reader.join()
    store.rubrics.find()
    store.close()
    assert _rubric_names(_copy_alone(path, tmp_path)) == ["kept"]


def test_the_log_is_merged_while_the_store_is_open(tmp_path, monkeypatch):
    monkeypatch.setattr(connection, "CHECKPOINT_INTERVAL_S", 0.0)  # after every commit
    path = tmp_path / "studio.db"
    with Store(path) as store:
        store.rubrics.save_version("kept", RUBRIC)
        # The writer merges after a commit and before its next job: once this second
        # write is done, the first one is in the file.
        store.rubrics.set_tags("kept", ["merged"])
        assert "kept" in _rubric_names(_copy_alone(path, tmp_path))


def test_an_idle_store_merges_its_log_without_another_write(tmp_path, monkeypatch):
    monkeypatch.setattr(connection, "CHECKPOINT_INTERVAL_S", 0.05)
    path = tmp_path / "studio.db"
    with Store(path) as store:
        store.rubrics.save_version("kept", RUBRIC)
        merged = threading.Event()
        for _ in range(200):  # up to 10 s; the writer merges 0.05 s after going idle
            if "kept" in _rubric_names(_copy_alone(path, tmp_path)):
                merged.set()
                break
            merged.wait(0.05)
        assert merged.is_set()


def test_backup_command_copies_a_store_in_use_into_one_file(tmp_path):
    path = tmp_path / "studio.db"
    dest = tmp_path / "backups" / "copy.db"
    dest.parent.mkdir()
    with Store(path) as store:
        run = run_once(store, _spec(store), agent_llm=_three_passes()[0], grader_llm=_three_passes()[1])  # fmt: skip
        store.rubrics.save_version("later", RUBRIC)  # still in the log while the store is open
        result = CliRunner().invoke(cli, ["backup", str(dest), "--db", str(path)])
        assert result.exit_code == 0, result.output
        assert f"Backed up {path} to {dest}" in result.output
        assert f"{dest}.checkpoints.sqlite" in result.output
    assert not Path(f"{dest}-wal").exists()
    with sqlite3.connect(dest) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert _rubric_names(_copy_alone(dest, tmp_path)) == ["article", "later"]
    with Store(dest) as copy:
        assert [p["iteration"] for p in copy.passes.of_run(run["id"])] == [0, 1, 2]

    again = CliRunner().invoke(cli, ["backup", str(dest), "--db", str(path)])
    assert again.exit_code == 2
    assert f"Error: backup destination {dest} already exists" in again.output
    onto_itself = CliRunner().invoke(cli, ["backup", str(path), "--db", str(path)])
    assert onto_itself.exit_code == 2 and "would replace the database itself" in onto_itself.output


def test_backup_of_a_postgres_store_points_to_pg_dump(pg_url, tmp_path):
    with Store(pg_url) as store, pytest.raises(StoreError, match="pg_dump"):
        store.backup(tmp_path / "copy.db")


# --- 4. a store from a newer version -------------------------------------------------------

_FUTURE_STEP = "9999_from_a_newer_version"


def _add_future_step(store: Store) -> None:
    if store.is_postgres:
        import psycopg

        with psycopg.connect(store.target) as conn:
            conn.execute(
                "INSERT INTO rubric_studio_migrations (name, applied_at) VALUES (%s, 'later')",
                (_FUTURE_STEP,),
            )
    else:
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                "VALUES ('rubric_studio', ?, 'later')",
                (_FUTURE_STEP,),
            )


@pytest.mark.both_backends
def test_a_store_a_newer_version_migrated_is_read_but_never_written(db_target):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with Store(db_target) as store:
        version = store.rubrics.save_version("kept", RUBRIC)
        run_id = new_run(store, version["id"])
        # Owned by a process that has exited: opening would mark the run interrupted.
        store._backend.write(lambda tx: tx.run("UPDATE runs SET pid = ?", (gone.pid,)))
        _add_future_step(store)
    newest_known = max(
        [m.name for m in MIGRATIONS._migrations] if "://" not in db_target else [n for n, _ in PG_MIGRATIONS]
    )  # fmt: skip
    with Store(db_target) as store:
        assert [r["name"] for r in store.rubrics.find()] == ["kept"]  # reading works
        with pytest.raises(StoreError) as refused:
            store.rubrics.save_version("new", RUBRIC)
        assert refused.value.kind == "version"
        assert _FUTURE_STEP in str(refused.value) and newest_known in str(refused.value)
        shown = store_error_message(refused.value, store.url)  # what the dashboard says
        assert "can be browsed, but nothing can be saved until" in shown
        with pytest.raises(StoreError, match=_FUTURE_STEP):
            store.runs.finish(run_id, RunEnd(status="error", error="x"))
        assert store.runs.get(run_id)["status"] == "running"
        assert [r["name"] for r in store.rubrics.find()] == ["kept"]


def test_cli_run_on_a_newer_store_is_one_error_line_naming_both_versions(tmp_path):
    path = tmp_path / "newer.db"
    with Store(path) as store:
        _add_future_step(store)
    result = CliRunner().invoke(cli, ["run", "--scenario", "haiku", "--db", str(path)])
    assert result.exit_code == 2, result.output  # nothing ran
    assert "Traceback" not in result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert _FUTURE_STEP in error and max(m.name for m in MIGRATIONS._migrations) in error
    listed = CliRunner().invoke(cli, ["rubrics", "list", "--db", str(path)])
    assert listed.exit_code == 0, listed.output


# --- 5. the database file deleted during a run ---------------------------------------------


def test_deleting_the_file_mid_run_stops_it_with_a_status_line(tmp_path, monkeypatch):
    path = tmp_path / "doomed.db"
    real_format = __import__("rubric_core.cli.running", fromlist=["format_pass"]).format_pass

    def delete_after_first_pass(evaluation: Any, *args: Any) -> str:
        if evaluation["iteration"] == 0:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return real_format(evaluation, *args)

    monkeypatch.setattr("rubric_core.cli.running.format_pass", delete_after_first_pass)
    result = CliRunner().invoke(
        cli, ["run", "--scenario", "needs_revision_then_satisfied", "--db", str(path)]
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "Status: error" in result.output
    assert "grading pass 2 could not be stored" in result.output
    assert "was deleted while the store was open" in result.output
    [recovered] = tmp_path.glob("doomed.recovered-*.db")
    assert str(recovered) in result.output
    with Store(recovered) as rescued:
        [run] = rescued.runs.find()
        assert [p["iteration"] for p in rescued.passes.of_run(run["id"])] == [0]
