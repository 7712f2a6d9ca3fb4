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
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, marker in _MARKED_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)


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
