"""Pytest plugin: fixtures for the real servers `.ci/run` starts (PostgreSQL, a Ray cluster).

Registered from tests/conftest.py with ``pytest_plugins``. Each fixture reads the address the
CI scripts export and skips its test with the reason below when it is unset, so a plain
``python -m pytest`` on a laptop passes without either server. With
``RUBRIC_STUDIO_REQUIRE_SERVERS=1`` (set by `.ci/run`) an unset address fails instead: CI
must never pass by skipping them.

- ``pg_url``: a ``postgresql://`` URL of a fresh, empty database on the server of
  ``RUBRIC_STUDIO_PG_URL``, created for the test (``CREATE DATABASE ... TEMPLATE template0``)
  and dropped after it, open connections included.
- ``ray_address``: ``RUBRIC_STUDIO_RAY_ADDRESS``, the head node of a running cluster.

A test that uses either fixture is marked ``pg`` or ``ray`` automatically, so
``-m "not pg and not ray"`` deselects them.

A test that uses ``ray_address`` also runs in a pytest process of its own (marker
``own_process``): it makes its process a Ray driver, and a driver whose node or GCS
connection fails is ended by Ray's core worker with ``_exit(1)``, without a word on its
stdout. In the session's own process that would end every test after it unreported; in a
child it is one failed test, reported with the tail of the child's core-worker log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_URL_ENV = "RUBRIC_STUDIO_PG_URL"
RAY_ADDRESS_ENV = "RUBRIC_STUDIO_RAY_ADDRESS"
REQUIRE_ENV = "RUBRIC_STUDIO_REQUIRE_SERVERS"

PG_SKIP_REASON = (
    f"{PG_URL_ENV} is unset: this test needs a PostgreSQL server, which CI starts with "
    ".ci/postgres.sh. Locally: `.ci/postgres.sh start artifacts/pg.env && set -a && "
    ". artifacts/pg.env && set +a`, then `.ci/postgres.sh stop artifacts/pg.env`."
)
RAY_SKIP_REASON = (
    f"{RAY_ADDRESS_ENV} is unset: this test needs a Ray cluster, which CI starts with "
    ".ci/ray_cluster.sh. Locally: `PYTHONPATH=$PWD .ci/ray_cluster.sh start artifacts/ray.env "
    "&& set -a && . artifacts/ray.env && set +a`, then `.ci/ray_cluster.sh stop artifacts/ray.env`."
)

_MARKED_FIXTURES = {"pg_url": "pg", "pg_server_url": "pg", "ray_address": "ray"}

CHILD_ENV = "RUBRIC_STUDIO_TEST_CHILD"
"""Set to 1 in the child pytest process an ``own_process`` test runs in."""

_OWN_PROCESS_FIXTURES = ("ray_address",)
_DEFAULT_TIMEOUT_S = 300.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, marker in _MARKED_FIXTURES.items():
            if fixture in fixtures:
                item.add_marker(marker)
        # Without a cluster the test skips at its fixture: no child process for that.
        if os.environ.get(RAY_ADDRESS_ENV, "").strip() and any(
            fixture in fixtures for fixture in _OWN_PROCESS_FIXTURES
        ):
            item.add_marker("own_process")


def _item_timeout(item: pytest.Item) -> float:
    """The pytest-timeout bound of `item` (its marker, else the ini value)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    try:
        return float(item.config.getini("timeout") or _DEFAULT_TIMEOUT_S)
    except (ValueError, KeyError):
        return _DEFAULT_TIMEOUT_S


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _driver_log(pid: int) -> str:
    """The tail of the core-worker log Ray wrote for driver `pid` on the CI cluster, if any."""
    root = os.environ.get("RUBRIC_STUDIO_RAY_DIR", "").strip()
    if not root:
        return ""
    logs = sorted(Path(root).glob(f"*/session_latest/logs/python-core-driver-*_{pid}.log"))
    parts = []
    for log in logs:
        with_errors = log.read_text(encoding="utf-8", errors="replace")
        parts.append(f"--- {log} (last 30 lines)\n{_tail(with_errors, 30)}")
    return "\n".join(parts)


def _run_in_child(item: pytest.Item) -> tuple[str, str]:
    """Run `item` in a child pytest: (`passed` / `skipped` / `failed`, what to report)."""
    bound = _item_timeout(item)
    # The child's own pytest-timeout fires first and prints where the test was stuck.
    command = [
        sys.executable, "-m", "pytest", item.nodeid, "-q", "-rfEs",
        "-p", "no:cacheprovider", f"--timeout={max(bound - 20, 10):g}",
    ]  # fmt: skip
    child = subprocess.Popen(
        command,
        cwd=item.config.rootpath,
        env={**os.environ, CHILD_ENV: "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = child.communicate(timeout=max(bound - 10, 15))
    except subprocess.TimeoutExpired:
        child.kill()
        output, _ = child.communicate()
        return "failed", (
            f"{item.nodeid} did not end within {bound - 10:g} s in its own process:\n"
            f"{_tail(output, 60)}\n{_driver_log(child.pid)}"
        )
    summary = output.rstrip().splitlines()[-1] if output.strip() else ""
    if child.returncode == 0 and " passed" in summary:
        return "passed", ""
    if child.returncode == 0 and " skipped" in summary:
        reasons = [
            line.split(": ", 1)[-1] for line in output.splitlines() if line.startswith("SKIPPED [")
        ]
        return "skipped", f"skipped in its own process: {reasons[-1] if reasons else summary}"
    ended = " in " in summary and any(w in summary for w in ("passed", "failed", "error"))
    how = "" if ended else " without pytest's summary, as a process ended by _exit() does"
    return "failed", (
        f"{item.nodeid} failed in its own process, exit {child.returncode}{how}:\n"
        f"{_tail(output, 80)}\n{_driver_log(child.pid)}"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """An ``own_process`` test runs, fixtures and all, in a child pytest; its outcome is
    reported here. Nothing of it (a Ray connection a fixture makes) runs in this process."""
    if os.environ.get(CHILD_ENV) == "1" or item.get_closest_marker("own_process") is None:
        return None
    from _pytest.reports import TestReport

    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    started = time.time()
    outcome, text = _run_in_child(item)
    duration = time.time() - started
    path, line, _ = item.location
    keywords = {name: 1 for name in item.keywords}

    def report(when: Any, result: Any, longrepr: Any = None, seconds: float = 0.0) -> None:
        rep = TestReport(
            item.nodeid, item.location, keywords, result, longrepr, when,
            duration=seconds, start=started, stop=started + seconds,
        )  # fmt: skip
        ihook.pytest_runtest_logreport(report=rep)

    if outcome == "skipped":
        report("setup", "skipped", (str(path), (line or 0) + 1, text), duration)
    else:
        report("setup", "passed")
        report("call", outcome, text if outcome == "failed" else None, duration)
    # What runtestprotocol does after a test: tear down the scopes (modules, classes) that
    # earlier tests set up here and the next test does not share.
    try:
        item.session._setupstate.teardown_exact(nextitem)
        report("teardown", "passed")
    except Exception as exc:
        report("teardown", "failed", f"tearing down before {nextitem}: {exc!r}")
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _address(env: str, reason: str) -> str:
    value = os.environ.get(env, "").strip()
    if value:
        return value
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def with_database(url: str, database: str) -> str:
    """The same server, user and options as `url`, on `database`."""
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """RUBRIC_STUDIO_PG_URL, checked to answer once per session (a clear error if not)."""
    url = _address(PG_URL_ENV, PG_SKIP_REASON)
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(f"{PG_URL_ENV}={_redacted(url)} does not answer: {exc}", pytrace=False)
    return url


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A fresh, empty database for this test; dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"rubric_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                sql.Identifier(name)
            )
        )
    try:
        yield with_database(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True, connect_timeout=10) as admin:
            # FORCE: a pool or checkpointer the test left open must not keep the database.
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="session")
def ray_address() -> str:
    """The head node address of the running Ray cluster (RUBRIC_STUDIO_RAY_ADDRESS)."""
    return _address(RAY_ADDRESS_ENV, RAY_SKIP_REASON)
