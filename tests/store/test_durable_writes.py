"""What a run costs the store and the graph, kept as decided (issue 23, goal 1).

A run's row is committed without an fsync of its own, and its first graded pass (or its
end) flushes it; each pass and the end are fsynced before the run goes on. A run's agent
wraps each model call in one middleware, not one for the stop switch and one for the
rubric. A rubric is parsed once per text, and parsed again when the checks change.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rubric_core.check_registry import CheckResult, register_check, unregister_check
from rubric_core.providers import load_scenario
from rubric_core.rubric import RubricError, parse_criteria, validate_criteria
from rubric_core.runs import RunSpec, build_agent, run_once, start_run
from rubric_core.store import Store
from tests.support.store import make_evaluation, new_run

WAIT_S = 60


def _sync_setting(store: Store, *, durable: bool) -> str:
    """The flush setting a write of this durability commits with, read inside it."""
    sql = "SHOW synchronous_commit" if store.is_postgres else "PRAGMA synchronous"
    row = store._backend.write(lambda tx: tx.one(sql), durable=durable)
    assert row is not None
    return str(row[0])


@pytest.mark.both_backends
def test_a_write_not_durable_commits_without_a_flush_and_the_next_durable_one_flushes(store):
    # SQLite: 2 is FULL (the log fsynced at commit), 1 is NORMAL (fsynced by a later
    # FULL commit or a checkpoint). PostgreSQL: synchronous_commit for that transaction.
    full, normal = ("on", "off") if store.is_postgres else ("2", "1")
    assert _sync_setting(store, durable=True) == full
    assert _sync_setting(store, durable=False) == normal
    assert _sync_setting(store, durable=True) == full


@pytest.mark.both_backends
def test_a_run_row_created_not_durable_is_committed_and_read_by_another_store(
    store, db_target, rubric_version
):
    run_id = new_run(store, rubric_version["id"], durable=False)
    other = Store(db_target)
    try:
        assert other.runs.get(run_id)["status"] == "running"
    finally:
        other.close()
    store.passes.record(run_id, make_evaluation())
    assert store.runs.get(run_id)["iterations"] == 1


def test_concurrent_writes_share_an_fsync_when_one_of_them_is_durable(tmp_path):
    """A group commit holding one durable job is fsynced as a whole."""
    store = Store(tmp_path / "s.db")
    connections = store._backend.connections  # type: ignore[attr-defined]
    started, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def blocker(db: Any) -> None:  # holds the writer so that the next two queue together
        started.set()
        release.wait(WAIT_S)

    def read(name: str, durable: bool) -> None:
        def job(db: Any) -> None:
            seen[name] = db.conn.execute("PRAGMA synchronous").fetchone()[0]

        connections.write(job, durable=durable)

    try:
        first = threading.Thread(
            target=connections.write, args=(blocker,), kwargs={"durable": False}
        )
        first.start()
        assert started.wait(WAIT_S)
        others = [
            threading.Thread(target=read, args=("lazy", False)),
            threading.Thread(target=read, args=("durable", True)),
        ]
        for thread in others:
            thread.start()
        while connections._queue.qsize() < 2:  # both queued behind the blocker
            threading.Event().wait(0.01)
        release.set()
        for thread in [first, *others]:
            thread.join(WAIT_S)
        assert seen == {"lazy": 2, "durable": 2}
    finally:
        release.set()
        store.close()


def test_a_run_fsyncs_each_pass_and_its_end_but_not_its_creation(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    try:
        scenario = load_scenario("needs_revision_then_satisfied")
        version = store.rubrics.save_version("s", scenario["rubric"])["id"]
        spec = RunSpec(
            rubric_version_id=version,
            input=scenario["input"],
            agent_model="replay:needs_revision_then_satisfied",
            grader_model="replay:needs_revision_then_satisfied",
        )
        writes: list[bool] = []
        original = store._backend.write

        def recording(job: Any, *, durable: bool = True) -> Any:
            writes.append(durable)
            return original(job, durable=durable)

        monkeypatch.setattr(store._backend, "write", recording)
        run = run_once(store, spec)
        assert run["status"] == "satisfied" and run["iterations"] == 2
        # The row; pass 1 (flushing the row with it); pass 2; the transcript and the end.
        assert writes == [False, True, True, True]
    finally:
        store.close()


def test_a_run_that_ends_before_any_pass_is_still_stored_durably(tmp_path):
    """A stopped run with nothing graded: its end is fsynced, which flushes its row."""
    store = Store(tmp_path / "s.db")
    try:
        version = store.rubrics.save_version("r", "- has a title")["id"]
        stop = threading.Event()
        stop.set()
        handle = start_run(
            store,
            RunSpec(
                version,
                "x",
                "replay:needs_revision_then_satisfied",
                "replay:needs_revision_then_satisfied",
            ),
            stop_event=stop,
        )
        assert handle.wait(WAIT_S)
        assert store.runs.get(handle.run_id)["status"] == "interrupted"
    finally:
        store.close()
    reopened = Store(tmp_path / "s.db")
    try:
        assert reopened.runs.get(handle.run_id)["status"] == "interrupted"
    finally:
        reopened.close()


def test_a_run_agent_wraps_each_model_call_in_one_middleware(tmp_path, monkeypatch):
    """The stop switch and the rubric check share one `wrap_model_call` (each is a traced
    span on every model call), and the grader keeps its node's name for old checkpoints."""
    from langchain.agents import factory

    wrapped: list[str] = []
    original = factory.traceable

    def counting(*args: Any, **kwargs: Any) -> Any:
        wrapped.append(str(kwargs.get("name")))
        return original(*args, **kwargs)

    monkeypatch.setattr(factory, "traceable", counting)
    store = Store(tmp_path / "s.db")
    try:
        version = store.rubrics.save_version("r", "- has a title")["id"]
        spec = RunSpec(version, "x", "replay:haiku", "replay:haiku")
        agent = build_agent(spec, stop_event=threading.Event())
    finally:
        store.close()
    assert [name for name in wrapped if name.endswith(".wrap_model_call")] == [
        "RubricMiddleware.wrap_model_call"
    ]
    assert "RubricMiddleware.after_agent" in agent.get_graph().nodes


def test_a_rubric_parsed_again_sees_checks_registered_and_unregistered_meanwhile():
    rubric = "- Is upbeat {perf-upbeat}\n- Has a title"
    with pytest.raises(RubricError, match="perf-upbeat"):
        validate_criteria(rubric)
    register_check("perf-upbeat", lambda draft, arg: CheckResult("!" in draft, draft))
    try:
        first = parse_criteria(rubric)
        assert [c.check.name if c.check else None for c in first] == ["perf-upbeat", None]
        first.clear()  # the caller's own list: the next parse is whole
        assert len(parse_criteria(rubric)) == 2
    finally:
        unregister_check("perf-upbeat")
    with pytest.raises(RubricError, match="perf-upbeat"):
        parse_criteria(rubric)
