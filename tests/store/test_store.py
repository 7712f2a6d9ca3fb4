"""Tests for rubric_core.store against a real SQLite file."""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from rubric_core.rubric import RubricError
from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE
from rubric_core.store import (
    MIGRATIONS,
    RUN_STATUSES,
    NewRun,
    RunEnd,
    Store,
    StoreError,
    default_db_path,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.both_backends


def _table_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


# --- opening and migrations -----------------------------------------------------------------


def test_store_migrates_empty_file_and_reopen_is_noop(tmp_path):
    path = tmp_path / "fresh.db"
    Store(path).close()
    assert {
        "rubrics",
        "rubric_versions",
        "rubric_tags",
        "runs",
        "evaluations",
        "criterion_results",
        "transcript_messages",
        "_sqlite_migrations",
    } <= _table_names(path)
    with sqlite3.connect(path) as conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert applied == [m.name for m in MIGRATIONS._migrations]

    Store(path).close()
    with sqlite3.connect(path) as conn:
        again = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")]
    assert again == applied


def test_file_migrated_by_main_before_the_postgres_backend_migrates(tmp_path):
    # A file an older build created: 0006_scores_checks_keep applied, no input_index yet.
    path = tmp_path / "main.db"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX idx_runs_batch_input")
        conn.execute("ALTER TABLE runs DROP COLUMN input_index")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0008_runs_input_index'")
        # nor the pass counts (0009), which come after it
        conn.execute("DROP TABLE criterion_pass_counts")
        for kind in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER criterion_pass_counts_{kind}")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0009_criterion_pass_counts'")
    with Store(path) as store:
        version = store.rubrics.save_version("r", "- a")
        run_id = store.runs.create(
            NewRun(rubric_version_id=version["id"], input="x", agent_model="replay:x",
            grader_model="replay:x", max_iterations=1, agent_kind="basic", keep="best",
            batch_id="b", input_index=0),
        )  # fmt: skip
        assert store.runs.get(run_id)["keep"] == "best"
        assert store.runs.get(run_id)["input_index"] == 0
    with sqlite3.connect(path) as conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")]
    assert applied[-5:] == [
        "0008_runs_input_index",
        "0009_criterion_pass_counts",
        "0010_run_final_pass",  # the review queues, applied with the file
        "0011_experiment_owner",
        "0012_checks_grader_name",
    ]
    assert sorted(applied) == sorted(m.name for m in MIGRATIONS._migrations)


def test_default_db_path_honours_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(tmp_path / "env.db"))
    assert default_db_path() == tmp_path / "env.db"
    monkeypatch.delenv("RUBRIC_STUDIO_DB")
    monkeypatch.chdir(tmp_path)
    assert default_db_path() == tmp_path / "rubric_studio.db"


def test_store_opens_default_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(tmp_path / "nested" / "env.db"))
    with Store() as store:
        assert store.path == (tmp_path / "nested" / "env.db").resolve()
    assert (tmp_path / "nested" / "env.db").exists()


# --- rubrics ---------------------------------------------------------------------------------


def test_rubric_edit_creates_new_version_and_old_runs_keep_theirs(store, new_run):
    first = store.rubrics.save_version("essay", "- has a title\n- cites a source", note="start")
    run_v1 = new_run(store, first["id"])
    assert store.rubrics.save_version("essay", "- has a title\n- cites a source\n") == first

    second = store.rubrics.save_version("essay", "- has a title\n- cites two sources")
    assert (first["version"], second["version"]) == (1, 2)
    assert second["criteria"] == ["has a title", "cites two sources"]
    assert store.runs.get(run_v1)["rubric_version_id"] == first["id"]
    assert store.runs.get(run_v1)["rubric_version"] == 1
    assert store.rubrics.version(first["id"])["text"] == "- has a title\n- cites a source"
    assert [v["version"] for v in store.rubrics.versions("essay")] == [1, 2]

    [listed] = store.rubrics.find()
    assert listed["name"] == "essay"
    assert (listed["latest_version"], listed["latest_version_id"], listed["versions"]) == (
        2,
        second["id"],
        2,
    )


def test_rubric_tags_are_replaced_and_listed_sorted(store):
    store.rubrics.save_version("code", "- tests pass", tags=["python", "ci", "python"])
    assert store.rubrics.find()[0]["tags"] == ["ci", "python"]
    store.rubrics.set_tags("code", ["review"])
    assert store.rubrics.find()[0]["tags"] == ["review"]
    with pytest.raises(StoreError, match="unknown rubric 'nope'"):
        store.rubrics.set_tags("nope", ["x"])


def test_rubric_bad_input_is_rejected_with_named_problem(store):
    with pytest.raises(StoreError, match="rubric name must not be empty"):
        store.rubrics.save_version("  ", "- a")
    with pytest.raises(RubricError, match="rubric is empty"):
        store.rubrics.save_version("empty", "\n  \n# heading only\n")
    with pytest.raises(StoreError, match="unknown rubric version id 999"):
        store.rubrics.version(999)
    with pytest.raises(StoreError, match="unknown rubric 'ghost'"):
        store.rubrics.versions("ghost")
    with pytest.raises(StoreError, match="tags must be a list"):
        store.rubrics.save_version("x", "- a", tags="solo")
    assert store.rubrics.find() == []


# --- runs and evaluations ------------------------------------------------------------------


def test_run_lifecycle_records_passes_tokens_and_final_state(
    store, rubric_version, new_run, make_evaluation
):
    run_id = new_run(store, rubric_version["id"], thread_id="t-1", batch_id="b-1")
    run = store.runs.get(run_id)
    assert run["status"] == "running"
    assert run["pid"] == os.getpid()
    assert run["rubric"] == "article"
    assert run["grader_tools"] == ["text_stats"]

    gid = "grading-1"
    store.passes.record(run_id, make_evaluation(grading_run_id=gid, iteration=0, started_at=1000.0))
    store.passes.record(
        run_id,
        make_evaluation(
            grading_run_id=gid,
            iteration=1,
            verdicts=[("has a title", True), ("cites a source", True)],
            started_at=1001.0,
            grader_input_tokens=50,
            grader_output_tokens=7,
        ),
    )
    store.runs.finish(
        run_id,
        RunEnd(
            status="satisfied",
            final_output="Final text",
            agent_input_tokens=300,
            agent_output_tokens=40,
        ),
    )
    run = store.runs.get(run_id)
    assert run["status"] == "satisfied"
    assert run["iterations"] == 2
    assert (run["grader_input_tokens"], run["grader_output_tokens"]) == (150, 27)
    assert (run["agent_input_tokens"], run["agent_output_tokens"]) == (300, 40)
    assert run["final_output"] == "Final text"
    assert run["finished_at"] >= run["started_at"]
    assert run["duration_s"] >= 0

    passes = store.passes.of_run(run_id)
    assert [(p["iteration"], p["result"]) for p in passes] == [
        (0, "needs_revision"),
        (1, "satisfied"),
    ]
    assert passes[0]["criteria"] == [
        {"name": "has a title", "passed": True},
        {"name": "cites a source", "passed": False, "gap": "add a source"},
    ]
    assert passes[0]["started_at"] == 1000.0
    assert passes[0]["draft"] == "A draft answer."


def test_record_evaluation_is_idempotent(store, rubric_version, new_run, make_evaluation):
    run_id = new_run(store, rubric_version["id"])
    evaluation = make_evaluation(grading_run_id="g", iteration=0)
    first = store.passes.record(run_id, evaluation)
    again = store.passes.record(run_id, evaluation)
    revised = store.passes.record(
        run_id, make_evaluation(grading_run_id="g", iteration=0, verdicts=[("has a title", True)])
    )
    assert first == again == revised
    [stored] = store.passes.of_run(run_id)
    assert stored["criteria"] == [{"name": "has a title", "passed": True}]
    run = store.runs.get(run_id)
    assert run["iterations"] == 1
    assert run["grader_input_tokens"] == 100


@pytest.mark.parametrize(
    ("evaluation", "message"),
    [
        ("not a dict", "evaluation must be a RubricEvaluation dict"),
        ({"only": "iteration"}, "evaluation is missing grading_run_id, result, status, criteria"),
        ({"grading_run_id": ""}, "grading_run_id must be a non-empty string"),
        ({"iteration": -1}, "iteration must be at least 0"),
        ({"iteration": "0"}, "iteration must be an integer"),
        ({"result": "great"}, "evaluation result 'great' is not one of"),
        ({"status": "done"}, "evaluation status 'done' is not one of"),
        ({"criteria": "all good"}, "criteria must be a list"),
        ({"criteria": [{"name": "a", "passed": "yes"}]}, r"criteria\[0\] \('a'\) passed must be"),
        ({"criteria": [{"passed": True}]}, r"criteria\[0\] has no name"),
        ({"duration_s": "slow"}, "duration_s must be a number"),
        ({"grader_input_tokens": -5}, "grader_input_tokens must be at least 0"),
    ],
)
def test_record_evaluation_rejects_bad_dict(
    store, rubric_version, new_run, make_evaluation, evaluation, message
):
    run_id = new_run(store, rubric_version["id"])
    if evaluation == {"only": "iteration"}:
        evaluation = {"iteration": 0}
    elif isinstance(evaluation, dict):
        evaluation = {**make_evaluation(), **evaluation}
    with pytest.raises(StoreError, match=message):
        store.passes.record(run_id, evaluation)
    assert store.passes.of_run(run_id) == []


def test_run_bad_input_is_rejected_with_named_problem(
    store, rubric_version, new_run, make_evaluation
):
    with pytest.raises(StoreError, match="unknown rubric version id 42"):
        new_run(store, 42)
    with pytest.raises(StoreError, match="input must not be empty"):
        new_run(store, rubric_version["id"], input="  ")
    with pytest.raises(StoreError, match="agent_kind must be one of basic, deep"):
        new_run(store, rubric_version["id"], agent_kind="fancy")
    with pytest.raises(StoreError, match="max_iterations must be at least 1"):
        new_run(store, rubric_version["id"], max_iterations=0)
    with pytest.raises(StoreError, match="grader_tools must be a list"):
        new_run(store, rubric_version["id"], grader_tools="run_test_suite")
    with pytest.raises(StoreError, match="unknown run id 77"):
        store.passes.record(77, make_evaluation())
    with pytest.raises(StoreError, match="unknown run id 77"):
        store.runs.get(77)
    run_id = new_run(store, rubric_version["id"])
    with pytest.raises(StoreError, match="finish_run status must be one of"):
        store.runs.finish(run_id, RunEnd(status="running"))
    with pytest.raises(StoreError, match="unknown status 'done'"):
        store.runs.find(status="done")
    with pytest.raises(StoreError, match="unknown status 'nope'"):
        store.runs.count(status=["satisfied", "nope"])
    with pytest.raises(StoreError, match="since must be an ISO-8601 date"):
        store.runs.find(since="yesterday")
    with pytest.raises(StoreError, match="limit must be at least 1"):
        store.runs.find(limit=0)
    with pytest.raises(StoreError, match="unknown rubric 'ghost'"):
        store.passes.criterion_pass_rates(rubric="ghost")


def test_transcript_replaced_and_grader_messages_flagged(store, rubric_version, new_run):
    run_id = new_run(store, rubric_version["id"])
    store.runs.save_transcript(run_id, [HumanMessage("old")])
    feedback = HumanMessage(
        "Fix: cite a source",
        name=RUBRIC_GRADER_MESSAGE_SOURCE,
        additional_kwargs={"lc_source": RUBRIC_GRADER_MESSAGE_SOURCE},
    )
    store.runs.save_transcript(
        run_id,
        [
            SystemMessage("be brief"),
            HumanMessage("Write an article ✍️"),
            AIMessage("", tool_calls=[{"name": "search", "args": {"q": "é"}, "id": "c1"}]),
            ToolMessage("result", tool_call_id="c1", name="search"),
            AIMessage([{"type": "text", "text": "Draft\nline 2"}]),
            feedback,
        ],
    )
    messages = store.runs.transcript(run_id)
    assert [m["role"] for m in messages] == ["system", "human", "ai", "tool", "ai", "human"]
    assert [m["is_grader"] for m in messages] == [False] * 5 + [True]
    assert messages[1]["content"] == "Write an article ✍️"
    assert messages[2]["tool_calls"] == [{"name": "search", "args": {"q": "é"}, "id": "c1"}]
    assert messages[3]["tool_call_id"] == "c1"
    assert messages[4]["content"] == "Draft\nline 2"
    assert messages[5]["name"] == RUBRIC_GRADER_MESSAGE_SOURCE


def test_finish_run_with_its_transcript_writes_both_or_neither(store, rubric_version, new_run):
    run_id = new_run(store, rubric_version["id"])
    store.runs.save_transcript(run_id, [HumanMessage("kept")])
    with pytest.raises(StoreError, match="messages must be a list of messages, got str"):
        store.runs.finish(run_id, RunEnd(status="satisfied", transcript="not a list"))
    assert store.runs.get(run_id)["status"] == "running"
    assert [m["content"] for m in store.runs.transcript(run_id)] == ["kept"]

    store.runs.finish(
        run_id,
        RunEnd(
            status="satisfied",
            final_output="Done",
            transcript=[HumanMessage("Write it"), AIMessage("Done")],
        ),
    )
    run = store.runs.get(run_id)
    assert (run["status"], run["final_output"]) == ("satisfied", "Done")
    assert [(m["role"], m["content"]) for m in store.runs.transcript(run_id)] == [
        ("human", "Write it"),
        ("ai", "Done"),
    ]
    with pytest.raises(StoreError, match="unknown run id"):
        store.runs.finish(run_id + 999, RunEnd(status="satisfied", transcript=[HumanMessage("x")]))


# --- queries ---------------------------------------------------------------------------------


def _seed_runs(store, new_run):
    v1 = store.rubrics.save_version("alpha", "- a\n- b")
    v2 = store.rubrics.save_version("alpha", "- a\n- b\n- c")
    other = store.rubrics.save_version("beta", "- z")
    statuses = ["satisfied", "failed", "max_iterations_reached", "grader_error", "interrupted"]
    ids = []
    for i in range(23):
        version = [v1, v2, other][i % 3]
        run_id = new_run(
            store,
            version["id"],
            agent_model=f"agent-{i % 2}",
            grader_model="judge-big" if i % 4 == 0 else "judge-small",
            batch_id="batch-a" if i < 5 else None,
        )
        store.runs.finish(run_id, RunEnd(status=statuses[i % len(statuses)]))
        ids.append(run_id)
    return v1, v2, other, ids


def test_list_runs_paginates_newest_first_without_gaps(store, new_run):
    *_, ids = _seed_runs(store, new_run)
    pages = [store.runs.find(limit=10, offset=offset) for offset in (0, 10, 20, 30)]
    assert [len(p) for p in pages] == [10, 10, 3, 0]
    seen = [run["id"] for page in pages for run in page]
    assert seen == sorted(ids, reverse=True)
    keys = [(run["started_at"], run["id"]) for page in pages for run in page]
    assert keys == sorted(keys, reverse=True)
    assert store.runs.count() == 23


def test_list_runs_filters_match_count_runs(store, new_run):
    v1, v2, other, ids = _seed_runs(store, new_run)
    cases = {
        "rubric": ({"rubric": "alpha"}, lambda i: i % 3 != 2),
        "version": ({"version_id": v2["id"]}, lambda i: i % 3 == 1),
        "agent model": ({"model": "agent-1"}, lambda i: i % 2 == 1),
        "grader model": ({"model": "judge-big"}, lambda i: i % 4 == 0),
        "status": ({"status": "failed"}, lambda i: i % 5 == 1),
        "statuses": ({"status": ["failed", "satisfied"]}, lambda i: i % 5 in (0, 1)),
        "batch": ({"batch_id": "batch-a"}, lambda i: i < 5),
        "combined": (
            {"rubric": "alpha", "status": "satisfied"},
            lambda i: i % 3 != 2 and i % 5 == 0,
        ),
    }
    for label, (filters, keep) in cases.items():
        expected = sorted((ids[i] for i in range(23) if keep(i)), reverse=True)
        listed = [run["id"] for run in store.runs.find(limit=100, **filters)]
        assert listed == expected, label
        assert store.runs.count(**filters) == len(expected), label
    assert store.runs.count(version_id=other["id"]) == 7


def test_list_runs_date_range(store, new_run):
    *_, ids = _seed_runs(store, new_run)
    runs = store.runs.find(limit=100)
    middle = runs[10]["started_at"]
    newer = store.runs.find(since=middle, limit=100)
    older = store.runs.find(until=middle, limit=100)
    assert len(newer) + len(older) == 23
    assert all(r["started_at"] >= middle for r in newer)
    assert all(r["started_at"] < middle for r in older)
    today = dt.datetime.now(dt.UTC).date()
    assert store.runs.count(since=today, until=today) == 23
    assert store.runs.count(until=today - dt.timedelta(days=1)) == 0
    assert store.runs.count(since=today.isoformat()) == 23


def test_criterion_pass_rates_per_version(store, new_run, make_evaluation):
    version = store.rubrics.save_version("rates", "- a\n- b\n- c")
    unrelated = store.rubrics.save_version("other", "- a")
    for passes in ([True, True, False], [True, False, False], [True, True, True]):
        run_id = new_run(store, version["id"])
        store.passes.record(
            run_id,
            make_evaluation(
                grading_run_id=f"g{run_id}",
                iteration=0,
                verdicts=[("a", False), ("b", False), ("c", False)],
                started_at=1.0,
            ),
        )
        store.passes.record(
            run_id,
            make_evaluation(
                grading_run_id=f"g{run_id}",
                iteration=1,
                verdicts=list(zip("abc", passes, strict=True)),
                started_at=2.0,
            ),
        )
    noise = new_run(store, unrelated["id"])
    store.passes.record(noise, make_evaluation(verdicts=[("a", True)]))

    rates = store.passes.criterion_pass_rates(version_id=version["id"])
    assert [(r["criterion"], r["passed"], r["total"]) for r in rates] == [
        ("a", 3, 6),
        ("b", 2, 6),
        ("c", 1, 6),
    ]
    assert rates[0]["pass_rate"] == pytest.approx(0.5)
    final = store.passes.criterion_pass_rates(version_id=version["id"], final_only=True)
    assert [(r["criterion"], r["passed"], r["total"]) for r in final] == [
        ("a", 3, 3),
        ("b", 2, 3),
        ("c", 1, 3),
    ]
    assert store.passes.criterion_pass_rates(rubric="other")[0]["pass_rate"] == 1.0


# --- concurrency and crashes ---------------------------------------------------------------


def test_concurrent_runs_write_at_once_and_nothing_is_lost(
    store, rubric_version, new_run, make_evaluation
):
    threads_n, passes_n = 8, 15
    errors: list[BaseException] = []
    stop_reading = threading.Event()
    barrier = threading.Barrier(threads_n)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            run_id = new_run(store, rubric_version["id"], input=f"input {n}")
            for i in range(passes_n):
                store.passes.record(run_id, make_evaluation(grading_run_id=f"w{n}", iteration=i))
                store.runs.get(run_id)
            store.runs.finish(run_id, RunEnd(status="max_iterations_reached"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop_reading.is_set():
                store.runs.find(limit=5)
                store.passes.criterion_pass_rates(version_id=rubric_version["id"])
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
    for thread in readers + workers:
        thread.start()
    for thread in workers:
        thread.join()
    stop_reading.set()
    for thread in readers:
        thread.join()
    assert errors == []

    runs = store.runs.find(limit=100)
    assert len(runs) == threads_n
    assert all(
        r["iterations"] == passes_n and r["status"] == "max_iterations_reached" for r in runs
    )
    total = sum(
        r["total"] for r in store.passes.criterion_pass_rates(version_id=rubric_version["id"])
    )
    assert total == threads_n * passes_n * 2


def test_failing_write_among_concurrent_ones_fails_alone(
    store, rubric_version, new_run, make_evaluation
):
    run_id = new_run(store, rubric_version["id"])
    outcomes: dict[int, str] = {}
    barrier = threading.Barrier(12)

    def write(n: int) -> None:
        barrier.wait()
        target = run_id if n % 2 == 0 else 10_000 + n  # odd writers name a missing run
        try:
            store.passes.record(target, make_evaluation(grading_run_id="g", iteration=n))
            outcomes[n] = "ok"
        except StoreError as exc:
            outcomes[n] = str(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(outcomes[n] == "ok" for n in range(0, 12, 2))
    assert all(outcomes[n] == f"unknown run id {10_000 + n}" for n in range(1, 12, 2))
    assert sorted(p["iteration"] for p in store.passes.of_run(run_id)) == list(range(0, 12, 2))


_KILLED_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from rubric_core.store import NewRun, Store
    store = Store(sys.argv[1])
    version = store.rubrics.save_version("crash", "- a\\n- b")
    run_id = store.runs.create(NewRun(rubric_version_id=version["id"], input="go",
                              agent_model="replay:x", grader_model="replay:y", grader_tools=[],
                              max_iterations=5, agent_kind="basic"))
    for i in range(3):
        store.passes.record(run_id, {{
            "grading_run_id": "g", "iteration": i, "result": "needs_revision",
            "status": "needs_revision", "explanation": "more", "draft": f"draft {{i}}",
            "criteria": [{{"name": "a", "passed": True}}, {{"name": "b", "passed": False, "gap": "x"}}],
            "started_at": time.time(), "duration_s": 0.1, "grader_attempts": 1,
            "grader_input_tokens": 10, "grader_output_tokens": 2}})
    print(run_id, flush=True)
    time.sleep(120)
    """
)


def test_killed_process_keeps_passes_and_run_becomes_interrupted(tmp_path, db_target):
    path = db_target
    script = tmp_path / "child.py"
    script.write_text(_KILLED_CHILD.format(root=str(Path(__file__).resolve().parents[2])))
    child = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip(), "child did not report its run id"
        run_id = int(line)
        with Store(path) as watcher:  # child alive: still running
            assert watcher.runs.get(run_id)["status"] == "running"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()

    with Store(path) as store:
        run = store.runs.get(run_id)
        assert run["status"] == "interrupted"
        assert f"process {child.pid}" in run["error"]
        passes = store.passes.of_run(run_id)
        assert [p["draft"] for p in passes] == ["draft 0", "draft 1", "draft 2"]
        assert run["iterations"] == 3
        assert store.runs.count(status="interrupted") == 1


def test_resume_run_marks_it_running_again(store, rubric_version, new_run):
    run_id = new_run(store, rubric_version["id"])
    store.runs.finish(run_id, RunEnd(status="interrupted", error="killed"))
    store.runs.resume(run_id)
    run = store.runs.get(run_id)
    assert (run["status"], run["error"], run["finished_at"]) == ("running", None, None)


# --- failing files ---------------------------------------------------------------------------


def test_read_only_file_is_a_clear_error(tmp_path, make_evaluation):
    path = tmp_path / "ro.db"
    with Store(path) as store:
        store.rubrics.save_version("kept", "- a")
    path.chmod(0o444)
    try:
        with pytest.raises(StoreError, match="is read-only"):
            Store(path)
    finally:
        path.chmod(0o644)
    with Store(path) as store:
        assert store.rubrics.find()[0]["name"] == "kept"


def test_locked_database_is_a_clear_error_and_keeps_committed_rows(
    tmp_path, new_run, make_evaluation
):
    path = tmp_path / "locked.db"
    store = Store(path, busy_timeout_s=0.2)
    try:
        version = store.rubrics.save_version("lock", "- a")
        run_id = new_run(store, version["id"])
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=0))

        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match=r"is locked by another writer .* 0\.2s"):
                store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
            assert len(store.passes.of_run(run_id)) == 1  # reads still work
        finally:
            other.execute("ROLLBACK")
            other.close()
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        assert [p["iteration"] for p in store.passes.of_run(run_id)] == [0, 1]
    finally:
        store.close()


def test_deleted_file_is_a_clear_error_and_committed_rows_are_recovered(
    tmp_path, new_run, make_evaluation
):
    path = tmp_path / "gone.db"
    store = Store(path)
    try:
        version = store.rubrics.save_version("doomed", "- a")
        run_id = new_run(store, version["id"])
        store.passes.record(run_id, make_evaluation(grading_run_id="g"))
        path.unlink()
        with pytest.raises(StoreError, match="was deleted while the store was open") as info:
            store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        with pytest.raises(StoreError, match="was deleted"):
            store.runs.find()
    finally:
        store.close()
    [recovered] = list(tmp_path.glob("gone.recovered-*.db"))
    assert str(recovered) in str(info.value)
    with Store(recovered) as rescued:
        assert len(rescued.passes.of_run(run_id)) == 1
    assert not path.exists()


def test_not_a_database_file_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError, match="is not a usable SQLite database"):
        Store(path)
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path)


def test_closed_store_refuses_work(db_target):
    store = Store(db_target)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.rubrics.find()
    with pytest.raises(StoreError, match="is closed"):
        store.rubrics.save_version("x", "- a")


def test_run_statuses_cover_contract():
    assert set(RUN_STATUSES) == {
        "running",
        "satisfied",
        "needs_revision",
        "failed",
        "grader_error",
        "max_iterations_reached",
        "interrupted",
        "error",
    }


# --- batch inputs: one run per input, resumable ------------------------------------------------


def test_create_run_for_a_batch_input_returns_its_existing_run(store, rubric_version, new_run):
    first = new_run(store, rubric_version["id"], batch_id="b1", input_index=0)
    store.runs.finish(first, RunEnd(status="satisfied"))
    again = new_run(store, rubric_version["id"], batch_id="b1", input_index=0, input="other")
    assert again == first
    assert store.runs.get(first)["status"] == "satisfied"  # untouched
    assert store.runs.get(first)["input_index"] == 0
    other_batch = new_run(store, rubric_version["id"], batch_id="b2", input_index=0)
    unkeyed = [new_run(store, rubric_version["id"], batch_id="b1") for _ in range(2)]
    assert len({first, other_batch, *unkeyed}) == 4
    with pytest.raises(StoreError, match="input_index must be"):
        new_run(store, rubric_version["id"], batch_id="b1", input_index=-1)


def test_finished_inputs_are_the_batch_runs_that_ended(store, rubric_version, new_run):
    statuses = ["satisfied", "error", "interrupted", None, "max_iterations_reached"]
    for index, status in enumerate(statuses):
        run_id = new_run(store, rubric_version["id"], batch_id="b", input_index=index)
        if status is not None:
            store.runs.finish(run_id, RunEnd(status=status))
    new_run(store, rubric_version["id"], batch_id="elsewhere", input_index=2)
    assert store.runs.finished_inputs("b") == {0, 1, 4}
    assert store.runs.finished_inputs("nothing") == set()
