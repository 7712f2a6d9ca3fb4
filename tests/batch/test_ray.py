"""Batches on Ray: the two-node cluster and the PostgreSQL server `.ci/run` starts.

The runs use replay models (`replay:<scenario>`: scripted turns, not language models) with a
small latency per call, so a batch takes seconds and a worker can be caught mid-run. Every
wait has a timeout. The tests that need the servers skip without them (tests/support/servers.py);
the bad-address tests need neither.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest

from rubric_core.batch.ray_cluster import RayUnavailable, check_ray_address
from rubric_core.providers import load_scenario
from rubric_core.runs import RunSpec, SpecError
from rubric_core.store import Store
from tests.support.jobs import batch_of
from tests.support.pages import APP as _APP
from tests.support.store import replay_template

_SCENARIO = "needs_revision_then_satisfied"
"""Two agent turns, two verdicts: each run stores exactly two grading passes."""

_PASSES = 2
_INPUTS = 40
_BATCH_TIMEOUT_S = 300


def _template(store: Store, latency_s: float) -> RunSpec:
    return replay_template(store, _SCENARIO, latency_s=latency_s, rubric="ray-batch")


def _inputs(n: int = _INPUTS) -> list[str]:
    return [f"Summarise release note number {i} in one paragraph." for i in range(n)]


def _runs(store: Store, batch_id: str) -> list[dict[str, Any]]:
    return store.runs.find(batch_id=batch_id, limit=1000)


def _assert_complete(store: Store, batch_id: str, n: int = _INPUTS) -> list[dict[str, Any]]:
    """Exactly one run per input, all satisfied, each with its passes stored once."""
    runs = _runs(store, batch_id)
    assert len(runs) == n
    assert sorted(run["input_index"] for run in runs) == list(range(n))
    assert Counter(run["status"] for run in runs) == {"satisfied": n}
    for run in runs:
        passes = store.passes.of_run(run["id"])
        keys = [(e["grading_run_id"], e["iteration"]) for e in passes]
        assert len(keys) == len(set(keys)), f"run {run['id']} stored a pass twice: {keys}"
        assert [e["iteration"] for e in passes] == list(range(_PASSES)), run
        assert len({e["grading_run_id"] for e in passes}) == 1, run
    return runs


def _on_ray(store: Store, template: RunSpec, address: str, **kwargs: Any) -> Any:
    """run_batch on the cluster, 4 tasks in flight, two per node."""
    return batch_of(
        store,
        template,
        _inputs(),
        executor="ray",
        ray_address=address,
        concurrency=4,
        ray_task_cpus=0.5,
        **kwargs,
    )


def _in_thread(batch: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """`batch()` on a thread; its summary or exception lands in the dict."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["summary"] = batch()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, out


def _wait(
    predicate: Any, timeout_s: float, what: str, state: Any = None, poll_s: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    seen = f" (state: {state()})" if state is not None else ""
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}{seen}")


@pytest.fixture(scope="module", autouse=True)
def _disconnect_ray_afterwards():
    """run_batch keeps this process connected to the cluster; later modules start afresh."""
    yield
    if "ray" in sys.modules:
        import ray

        from rubric_core.batch.ray_pool import pools

        pools.end_all()
        ray.shutdown()


@pytest.fixture
def pg_store(pg_url: str):
    store = Store(pg_url)
    try:
        yield store
    finally:
        store.close()


# --------------------------------------------------------------------------- bad conditions


def test_ray_address_that_does_not_answer_is_named_within_the_probe_timeout(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    template = _template(store, 0)
    started = time.monotonic()
    with pytest.raises(RayUnavailable, match=r"127\.0\.0\.1:1 does not answer"):
        batch_of(store, template, _inputs(3), executor="ray", ray_address="127.0.0.1:1")
    assert time.monotonic() - started < 10
    assert store.runs.count() == 0  # nothing started, nothing half-stored


def test_ray_address_unroutable_times_out_with_its_name() -> None:
    # 192.0.2.0/24 is TEST-NET-1: never routed, so the connect times out (or is refused).
    with pytest.raises(RayUnavailable, match=r"192\.0\.2\.1:6379 does not answer"):
        check_ray_address("192.0.2.1:6379", timeout_s=0.5)


def test_ray_address_malformed_or_missing_is_a_clear_error(monkeypatch) -> None:
    with pytest.raises(RayUnavailable, match="is not HOST:PORT"):
        check_ray_address("head-node")
    monkeypatch.delenv("RUBRIC_STUDIO_RAY_ADDRESS", raising=False)
    with pytest.raises(RayUnavailable, match="no Ray cluster configured"):
        check_ray_address(None)


def test_unknown_executor_is_refused_before_anything_runs(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    with pytest.raises(SpecError, match="executor: must be 'thread', 'process' or 'ray'"):
        batch_of(store, _template(store, 0), _inputs(2), executor="dask")
    assert store.runs.count() == 0


def test_sqlite_store_is_refused_on_a_two_node_cluster(tmp_path, ray_address: str) -> None:
    store = Store(tmp_path / "s.db")
    with pytest.raises(RayUnavailable, match="has 2 nodes, and a SQLite store"):
        batch_of(store, _template(store, 0), _inputs(2), executor="ray", ray_address=ray_address)
    assert store.runs.count() == 0


# --------------------------------------------------------------------------- on the cluster


def test_ray_batch_of_40_inputs_on_two_nodes_stores_40_runs_each_pass_once(
    pg_store: Store, ray_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    caplog.set_level(logging.DEBUG, logger="rubric_core.batch.ray_cluster")
    seen: list[int] = []
    summary = _on_ray(
        pg_store,
        _template(pg_store, 0.01),
        ray_address,
        progress=lambda done, total, row: seen.append(done),
    )
    assert summary.total == _INPUTS
    assert summary.by_status == {"satisfied": _INPUTS}
    assert seen == list(range(1, _INPUTS + 1))
    runs = _assert_complete(pg_store, summary.batch_id)
    # Recorded by Ray worker processes (not this one), on both nodes of the cluster.
    assert os.getpid() not in {int(run["pid"]) for run in runs}
    placed = [
        r.args
        for r in caplog.records
        if r.getMessage().startswith("batch ") and " ran as run " in r.getMessage()
    ]
    assert len(placed) == _INPUTS
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert {args[3] for args in placed} == alive and len(alive) == 2
    assert {args[2] for args in placed} == {run["id"] for run in runs}


def test_ray_batch_survives_a_worker_killed_mid_run(pg_store: Store, ray_address: str) -> None:
    template = _template(pg_store, 0.25)  # about 1 s per run: time to catch one between passes
    thread, out = _in_thread(
        lambda: _on_ray(pg_store, template, ray_address, batch_id="batch-kill-test")
    )

    def victim() -> dict[str, Any] | None:
        assert thread.is_alive(), f"the batch ended before a worker was killed: {out}"
        for run in pg_store.runs.find(batch_id="batch-kill-test", status="running", limit=100):
            if len(pg_store.passes.of_run(run["id"])) == 1:  # graded once, not yet twice
                return run
        return None

    run = _wait(
        victim,
        120,
        "a run with one stored pass",
        lambda: Counter(r["status"] for r in _runs(pg_store, "batch-kill-test")),
    )
    os.kill(int(run["pid"]), signal.SIGKILL)
    thread.join(_BATCH_TIMEOUT_S)
    assert not thread.is_alive(), "the batch did not end after a worker was killed"
    assert "error" not in out, out.get("error")
    runs = _assert_complete(pg_store, "batch-kill-test")
    retried = next(r for r in runs if r["id"] == run["id"])
    assert int(retried["pid"]) != int(run["pid"])  # a new worker took the run over
    assert retried["thread_id"] == run["thread_id"]  # and continued the same checkpoint thread


def test_ray_batch_stopped_half_way_resumes_without_rerunning_finished_inputs(
    pg_store: Store, ray_address: str
) -> None:
    stop = threading.Event()
    template = _template(pg_store, 0.05)

    def stop_after_ten(done: int, total: int, row: dict[str, Any]) -> None:
        if done >= 10:
            stop.set()

    first = _on_ray(pg_store, template, ray_address, progress=stop_after_ten, stop_event=stop)
    batch_id = first.batch_id
    assert first.by_status.get("running", 0) == 0  # stopped runs are marked, not left running
    finished = pg_store.runs.finished_inputs(batch_id)
    assert 10 <= len(finished) < _INPUTS
    before = {r["input_index"]: r for r in _runs(pg_store, batch_id)}

    resumed = _on_ray(pg_store, template, ray_address, batch_id=batch_id, resume=True)
    assert resumed.by_status == {"satisfied": _INPUTS}
    after = {r["input_index"]: r for r in _assert_complete(pg_store, batch_id)}
    for index in finished:  # untouched: same run, same end, same worker
        assert after[index]["id"] == before[index]["id"]
        assert after[index]["finished_at"] == before[index]["finished_at"]
        assert after[index]["pid"] == before[index]["pid"]
    for index, run in before.items():  # interrupted ones continued their own run
        assert after[index]["id"] == run["id"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ray_workers_serve_the_next_batch_and_end_when_left_idle(
    pg_store: Store, ray_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's second Ray batch runs on the workers of its first (no worker starts and
    imports again); a pool left idle past RUBRIC_STUDIO_RAY_POOL_IDLE_S is ended."""
    template = _template(pg_store, 0.01)
    monkeypatch.setenv("RUBRIC_STUDIO_RAY_POOL_IDLE_S", "600")
    first = _on_ray(pg_store, template, ray_address)
    second = _on_ray(pg_store, template, ray_address)
    pids = [
        {int(r["pid"]) for r in _assert_complete(pg_store, s.batch_id)} for s in (first, second)
    ]
    assert len(pids[0]) == 4, "four workers for four inputs at a time"
    assert pids[1] == pids[0], "the second batch ran on the first batch's workers"

    monkeypatch.setenv("RUBRIC_STUDIO_RAY_POOL_IDLE_S", "1")
    third = _on_ray(pg_store, template, ray_address)
    third_pids = {int(r["pid"]) for r in _assert_complete(pg_store, third.batch_id)}
    assert third_pids == pids[0]
    _wait(
        lambda: not any(_alive(pid) for pid in third_pids),
        60,
        "the idle workers to end",
        lambda: sorted(pid for pid in third_pids if _alive(pid)),
        poll_s=0.2,
    )


def test_a_bad_pool_idle_setting_is_named_before_anything_runs(
    pg_store: Store, ray_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUBRIC_STUDIO_RAY_POOL_IDLE_S", "a minute")
    with pytest.raises(Exception, match="RUBRIC_STUDIO_RAY_POOL_IDLE_S must be a number"):
        _on_ray(pg_store, _template(pg_store, 0.01), ray_address, batch_id="batch-bad-idle")
    assert _runs(pg_store, "batch-bad-idle") == []


# --------------------------------------------------------------------------- the CLI


def test_cli_batch_on_a_ray_address_that_does_not_answer_is_one_line_exit_2(tmp_path) -> None:
    from click.testing import CliRunner

    from rubric_core.cli import cli

    dataset = tmp_path / "inputs.csv"
    dataset.write_text("input\nfirst\nsecond\n", encoding="utf-8")
    db = tmp_path / "s.db"
    result = CliRunner().invoke(
        cli,
        ["batch", "--scenario", _SCENARIO, "--input-file", str(dataset), "--db", str(db),
         "--executor", "ray", "--ray-address", "127.0.0.1:1"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Error: the Ray cluster at 127.0.0.1:1 does not answer" in result.output
    assert "Traceback" not in result.output
    assert Store(db).runs.count() == 0


def test_cli_batch_on_ray_runs_and_resumes(pg_url: str, ray_address: str, tmp_path) -> None:
    from click.testing import CliRunner

    from rubric_core.cli import cli

    dataset = tmp_path / "inputs.csv"
    dataset.write_text("input\n" + "\n".join(_inputs(6)) + "\n", encoding="utf-8")
    common = ["--scenario", _SCENARIO, "--input-file", str(dataset), "--db", pg_url,
              "--executor", "ray", "--ray-address", ray_address, "--ray-task-cpus", "0.5",
              "--json"]  # fmt: skip
    first = CliRunner().invoke(cli, ["batch", *common])
    assert first.exit_code == 0, first.output
    batch_id = json.loads(first.stdout)["batch_id"]
    again = CliRunner().invoke(cli, ["batch", *common, "--resume", batch_id])
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert summary["batch_id"] == batch_id
    assert summary["by_status"] == {"satisfied": 6}


# --------------------------------------------------------------------------- the Batch page


def _batch_page(monkeypatch: pytest.MonkeyPatch, db: str, ray_address: str | None):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RUBRIC_STUDIO_DB", db)
    if ray_address is None:
        monkeypatch.delenv("RUBRIC_STUDIO_RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RUBRIC_STUDIO_RAY_ADDRESS", ray_address)
    with Store(db) as store:
        scenario = load_scenario(_SCENARIO)
        store.rubrics.save_version(f"scenario-{_SCENARIO}", scenario["rubric"])
    app = AppTest.from_file(str(_APP), default_timeout=60).run()
    app.switch_page("app_pages/batch.py").run()
    csv_text = "input\n" + "\n".join(_inputs(3)) + "\n"
    app.file_uploader(key="batch_upload").upload("inputs.csv", csv_text.encode(), "text/csv")
    app.run()
    app.radio(key="batch_agent_source").set_value("replay").run()
    app.selectbox(key="batch_agent_scenario").set_value(_SCENARIO)
    app.selectbox(key="batch_grader_scenario").set_value(_SCENARIO)
    return app.run()


def test_batch_page_offers_ray_only_for_a_postgres_store(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _batch_page(monkeypatch, str(tmp_path / "s.db"), "127.0.0.1:1")
    assert not app.exception
    assert not [r for r in app.radio if r.key == "batch_executor"]


def test_batch_page_ray_address_that_does_not_answer_is_an_error_in_place(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _batch_page(monkeypatch, pg_url, "127.0.0.1:1")
    app.radio(key="batch_executor").set_value("ray").run()
    app.button(key="batch_launch").click().run()
    assert not app.exception, [e.value for e in app.exception]
    errors = [e.value for e in app.error]
    assert any("the Ray cluster at 127.0.0.1:1 does not answer" in e for e in errors), errors
    with Store(pg_url) as store:
        assert store.runs.count() == 0


def test_ray_is_imported_only_when_a_ray_batch_starts() -> None:
    import subprocess
    import sys

    code = (
        "import sys, rubric_core.runs, rubric_core.cli, rubric_core.batch.ray_cluster; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
