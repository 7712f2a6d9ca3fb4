"""Smoke tests of the real servers .ci/run starts: PostgreSQL (with the LangGraph checkpointer)
and the two-node Ray cluster. They skip when RUBRIC_STUDIO_PG_URL / RUBRIC_STUDIO_RAY_ADDRESS
are unset (see tests/support/servers.py)."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

_REPO = Path(__file__).resolve().parents[1]


# --- PostgreSQL ----------------------------------------------------------------------------


def _pool(url: str, **kwargs: Any):
    from psycopg_pool import ConnectionPool

    return ConnectionPool(url, min_size=1, max_size=4, open=True, timeout=10, **kwargs)


def test_pg_url_is_a_fresh_empty_database(pg_url: str, pg_server_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        name, tables = conn.execute(
            "SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')"
        ).fetchone()
    assert name.startswith("rubric_test_")
    assert tables == 0
    assert name != pg_server_url.rsplit("/", 1)[-1]


def test_pg_pool_round_trips_a_row(pg_url: str) -> None:
    with _pool(pg_url) as pool:
        with pool.connection() as conn:
            conn.execute("CREATE TABLE note (id serial PRIMARY KEY, body text NOT NULL)")
            conn.execute("INSERT INTO note (body) VALUES (%s)", ("graded pass 1",))
        # Committed on leaving the block: a second connection of the pool sees it.
        with pool.connection() as first, pool.connection() as second:
            assert first is not second
            assert second.execute("SELECT body FROM note").fetchall() == [("graded pass 1",)]
            pid_a = first.execute("SELECT pg_backend_pid()").fetchone()[0]
            pid_b = second.execute("SELECT pg_backend_pid()").fetchone()[0]
            assert pid_a != pid_b


class _Counter(TypedDict):
    steps: Annotated[list[str], operator.add]


def _one_node_graph(checkpointer: Any):
    from langgraph.graph import END, START, StateGraph

    def step(state: _Counter) -> dict[str, list[str]]:
        return {"steps": [f"step {len(state['steps']) + 1}"]}

    graph = StateGraph(_Counter)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=checkpointer)


@pytest.fixture
def pooled_saver(pg_url: str) -> Iterator[Any]:
    """A PostgresSaver on a psycopg pool, set up: what a Postgres store will hand its runs."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    # The settings PostgresSaver.from_conn_string uses, on every pooled connection.
    with _pool(
        pg_url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    ) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        saver.setup()  # idempotent: migrations already applied are skipped
        yield saver


def test_postgres_checkpointer_round_trips_a_graph_state(pg_url: str, pooled_saver: Any) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    config = {"configurable": {"thread_id": "batch-1:input-7"}}
    graph = _one_node_graph(pooled_saver)
    assert graph.invoke({"steps": []}, config) == {"steps": ["step 1"]}
    # The same thread resumes from its checkpoint: the state grows, it does not restart.
    assert graph.invoke({"steps": []}, config) == {"steps": ["step 1", "step 2"]}

    # Another process would see it too: a new connection, a new saver, the same state.
    with PostgresSaver.from_conn_string(pg_url) as other:
        state = _one_node_graph(other).get_state(config)
        assert state.values == {"steps": ["step 1", "step 2"]}
        assert other.get_tuple(config) is not None
        assert other.get_tuple({"configurable": {"thread_id": "never-run"}}) is None
        assert len(list(other.list(config))) >= 2


# --- Ray -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_session(ray_address: str) -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="ray is not installed")
    ray.init(address=ray_address, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_cluster_has_two_alive_nodes_and_runs_a_task_on_each(ray_session: Any) -> None:
    ray = ray_session
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [node for node in ray.nodes() if node["Alive"]]
    assert len(alive) == 2, alive
    assert len({node["NodeManagerAddress"] for node in alive}) == 2

    # Defined here, so cloudpickle ships it by value: workers need not import this test module.
    @ray.remote(num_cpus=1, max_retries=0)
    def where(n: int) -> tuple[str, str, int]:
        import ray as worker_ray

        context = worker_ray.get_runtime_context()
        return context.get_node_id(), worker_ray.util.get_node_ip_address(), n * n

    pinned = [
        where.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(i)
        for i, node in enumerate(alive)
    ]
    results = ray.get(pinned, timeout=120)
    assert [node_id for node_id, _, _ in results] == [node["NodeID"] for node in alive]
    assert [ip for _, ip, _ in results] == [node["NodeManagerAddress"] for node in alive]
    assert [square for _, _, square in results] == [i * i for i in range(len(alive))]


def test_ray_workers_import_rubric_core_from_this_checkout(ray_session: Any) -> None:
    """Batch tasks build the agent on the worker: rubric_core must import there (CI starts the
    nodes with PYTHONPATH at the checkout; on real machines it is installed)."""
    ray = ray_session

    @ray.remote(num_cpus=1, max_retries=0)
    def rubric_core_path() -> str:
        import rubric_core

        return str(Path(rubric_core.__file__).resolve().parent)

    try:
        where = ray.get(rubric_core_path.remote(), timeout=120)
    except ray.exceptions.RayTaskError as exc:
        pytest.fail(
            "a Ray worker could not import rubric_core; start the nodes with PYTHONPATH set to "
            f"the checkout (PYTHONPATH=$PWD .ci/ray_cluster.sh start ...): {exc}",
            pytrace=False,
        )
    assert Path(where) == _REPO / "rubric_core"


# --- Tests in a process of their own (tests/support/servers.py) ------------------------------------


def test_a_test_in_its_own_process_that_exits_abruptly_fails_alone(tmp_path: Path) -> None:
    """A test marked own_process (as every Ray driver test is) runs in a child pytest: an
    `_exit(1)` there, as Ray's core worker does when its node fails, is one failed test with
    the reason, and the session goes on; the module's fixtures are torn down in order."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_a.py").write_text(
        "import os, pytest\n"
        "@pytest.fixture(scope='module')\n"
        "def shared():\n"
        "    yield 'here'\n"
        "    print('torn down a')\n"
        "def test_first(shared):\n"
        "    assert shared == 'here' and 'RUBRIC_STUDIO_TEST_CHILD' not in os.environ\n"
        "@pytest.mark.own_process\n"
        "def test_exits():\n"
        "    os._exit(1)\n"
        "@pytest.mark.own_process\n"
        "def test_fails():\n"
        "    assert 1 + 1 == 3\n"
        "@pytest.mark.own_process\n"
        "def test_passes_in_a_child(shared):\n"
        "    assert os.environ['RUBRIC_STUDIO_TEST_CHILD'] == '1'\n"
        "@pytest.mark.own_process\n"
        "def test_skips():\n"
        "    pytest.skip('no server here')\n",
        encoding="utf-8",
    )
    (tmp_path / "test_b.py").write_text("def test_after():\n    assert True\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "RUBRIC_STUDIO_TEST_CHILD"}
    env["PYTHONPATH"] = str(_REPO)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.servers", "-p", "no:cacheprovider",
         "-q", "-rA", "-W", "ignore::pytest.PytestUnknownMarkWarning", "test_a.py", "test_b.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert out.rstrip().splitlines()[-1].startswith("2 failed, 3 passed, 1 skipped"), out
    assert "test_exits failed in its own process, exit 1 without pytest's summary" in out
    assert "test_fails failed in its own process, exit 1:" in out
    assert "assert (1 + 1) == 3" in out
    assert "skipped in its own process: no server here" in out
    assert "PASSED test_a.py::test_passes_in_a_child" in out
    assert "PASSED test_b.py::test_after" in out
    assert "torn down a" in out
    assert "INTERNALERROR" not in out + done.stderr
