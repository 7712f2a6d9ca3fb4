"""The PostgreSQL store's own conditions: many processes at once, a server that refuses or goes away.

The store suite itself runs on both backends (tests/store/test_store.py, `both_backends`); these
tests are about what only a server has. They use `pg_url` (a fresh database per test) or
start a dedicated server of their own, which they stop mid-run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from rubric_core.store import Store, StoreError
from tests.support.net import free_port as _free_port
from tests.support.store import make_evaluation, new_run

REPO_ROOT = Path(__file__).resolve().parents[2]
PG_SCRIPT = REPO_ROOT / ".ci" / "postgres.sh"


def _with(url: str, **changes: object) -> str:
    parts = urlsplit(url)
    user = changes.get("user", parts.username)
    password = changes.get("password", parts.password)
    port = changes.get("port", parts.port)
    netloc = f"{user}:{password}@{parts.hostname}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_wrong_password_is_an_auth_error_naming_user_and_server(pg_url):
    bad = _with(pg_url, password="not-the-password")
    with pytest.raises(StoreError) as caught:
        Store(bad)
    parts = urlsplit(pg_url)
    assert caught.value.kind == "auth"
    assert f"{parts.hostname}:{parts.port}" in str(caught.value)
    assert repr(parts.username) in str(caught.value)
    assert "not-the-password" not in str(caught.value)
    assert parts.password not in str(caught.value)


def test_unreachable_port_is_an_unreachable_error_naming_host_and_port(pg_url):
    port = _free_port()
    with pytest.raises(StoreError) as caught:
        Store(_with(pg_url, port=port), busy_timeout_s=2)
    assert caught.value.kind == "unreachable"
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert urlsplit(pg_url).password not in str(caught.value)


def test_missing_database_is_a_missing_error(pg_url):
    url = urlunsplit(urlsplit(pg_url)._replace(path="/no_such_database_here"))
    with pytest.raises(StoreError, match="no database 'no_such_database_here'") as caught:
        Store(url)
    assert caught.value.kind == "missing"


def test_repr_and_url_never_show_the_password(pg_url):
    with Store(pg_url) as store:
        password = urlsplit(pg_url).password
        assert password not in repr(store) and password not in store.url
        assert store.is_postgres
        with pytest.raises(StoreError, match="has no file path"):
            _ = store.path


_OPENER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from rubric_core.store import Store
    with Store(sys.argv[1]) as store:
        version = store.rubrics.save_version("shared", "- a")
        print(version["id"], flush=True)
    """
)


def test_many_processes_migrate_and_save_one_rubric_at_once(pg_url, tmp_path):
    script = tmp_path / "opener.py"
    script.write_text(_OPENER.format(root=str(REPO_ROOT)))
    children = [
        subprocess.Popen([sys.executable, str(script), pg_url], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [child.communicate(timeout=120)[0].strip() for child in children]
    assert [child.returncode for child in children] == [0, 0, 0, 0]
    assert len(set(outputs)) == 1  # one version, whichever process saved it first
    with Store(pg_url) as store:
        assert [v["version"] for v in store.rubrics.versions("shared")] == [1]


def test_concurrent_create_run_for_one_batch_input_makes_one_run(pg_url):
    with Store(pg_url) as store:
        version = store.rubrics.save_version("article", "- a")
        barrier = threading.Barrier(8)
        ids: list[int] = []

        def create() -> None:
            barrier.wait()
            ids.append(new_run(store, version["id"], batch_id="b", input_index=3))

        threads = [threading.Thread(target=create) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(set(ids)) == 1 and len(ids) == 8
        assert store.runs.count(batch_id="b") == 1


def test_lost_connections_are_replaced_and_nothing_stored_is_lost(pg_url):
    with Store(pg_url) as store:
        version = store.rubrics.save_version("article", "- has a title\n- cites a source")
        run_id = new_run(store, version["id"])
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=0))
        database = urlsplit(pg_url).path.lstrip("/")
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchall()
        assert killed  # the pool's connections are gone
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        assert [p["iteration"] for p in store.passes.of_run(run_id)] == [0, 1]


@pytest.fixture
def own_server(pg_server_url, tmp_path):
    """A PostgreSQL server of this test's own (it stops and restarts it); its URL and controls."""
    state = tmp_path / "pg.env"
    started = subprocess.run(
        [str(PG_SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        pytest.fail(f"could not start a dedicated server: {started.stderr}")
    env = dict(line.split("=", 1) for line in state.read_text().splitlines() if "=" in line)
    url, directory = env["RUBRIC_STUDIO_PG_URL"], env["RUBRIC_STUDIO_PG_DIR"]
    port = urlsplit(url).port
    runuser = ["runuser", "-u", os.environ.get("RUBRIC_STUDIO_PG_USER", "rubricpg"), "--"]
    prefix = runuser if os.geteuid() == 0 else []
    pg_ctl = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", f"{directory}/data", "-w", "-t", "30"]

    def stop() -> None:
        subprocess.run([*prefix, *pg_ctl, "-m", "fast", "stop"], check=True, cwd="/")

    def start() -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={directory}"
        )
        subprocess.run(
            [*prefix, *pg_ctl, "-l", f"{directory}/server.log", "-o", options, "start"],
            check=True,
            cwd="/",
            capture_output=True,
        )

    try:
        yield url, stop, start
    finally:
        subprocess.run([str(PG_SCRIPT), "stop", str(state)], capture_output=True, timeout=120)


def test_server_stopped_mid_run_fails_the_write_clearly_and_keeps_committed_passes(own_server):
    url, stop, start = own_server
    store = Store(url, busy_timeout_s=2)
    try:
        version = store.rubrics.save_version("article", "- has a title\n- cites a source")
        run_id = new_run(store, version["id"])
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=0))
        stop()
        with pytest.raises(StoreError) as caught:
            store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        assert caught.value.kind == "unreachable"
        assert f"127.0.0.1:{urlsplit(url).port}" in str(caught.value)
        start()
        # The same store reconnects once the server is back; the committed pass is there,
        # the failed one is not (and recording it again stores it once).
        assert [p["iteration"] for p in store.passes.of_run(run_id)] == [0]
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        store.passes.record(run_id, make_evaluation(grading_run_id="g", iteration=1))
        assert store.runs.get(run_id)["iterations"] == 2
    finally:
        store.close()


_CHECKPOINTER_OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from rubric_core.runs.checkpoints import CHECKPOINTERS
    go = Path(sys.argv[2])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    saver = CHECKPOINTERS.acquire(sys.argv[1])
    config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
    assert saver.get_tuple(config) is None
    CHECKPOINTERS.release(sys.argv[1])
    print("opened", flush=True)
    """
)


def test_many_processes_open_a_fresh_databases_checkpointer_at_once(pg_url, tmp_path):
    # PostgresSaver.setup() runs CREATE INDEX CONCURRENTLY, which waits for every older
    # transaction in the database; a process waiting for the setup lock must not be one.
    script = tmp_path / "checkpointer.py"
    script.write_text(_CHECKPOINTER_OPENER.format(root=str(REPO_ROOT)))
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, str(script), pg_url, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        go.touch()  # all at once, on a database without the checkpoint tables
        results = [child.communicate(timeout=60) for child in children]
    except subprocess.TimeoutExpired:
        pytest.fail("opening the checkpointer from 6 processes at once did not end in 60 s")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [child.returncode for child in children] == [0] * 6, [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["opened"] * 6


def test_a_checkpointer_setup_that_never_ends_is_a_locked_error(pg_url, monkeypatch):
    from rubric_core.runs import checkpoints

    monkeypatch.setattr(checkpoints, "_SETUP_LOCK_WAIT_S", 0.5)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (checkpoints._SETUP_LOCK,))
        with pytest.raises(StoreError, match="being set up by another process") as caught:
            checkpoints.CHECKPOINTERS.acquire(pg_url)
    assert caught.value.kind == "locked"
    assert urlsplit(pg_url).password not in str(caught.value)
    saver = checkpoints.CHECKPOINTERS.acquire(pg_url)  # the holder is gone: it opens
    checkpoints.CHECKPOINTERS.release(pg_url)
    assert saver is not None
