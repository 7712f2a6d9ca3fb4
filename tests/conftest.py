"""Shared fixtures: a fresh store in tmp_path and fake grading passes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rubric_core.store import Store
from tests.support.env import clear_provider_env
from tests.support.store import RUBRIC_TEXT, make_evaluation, new_run

# pg_url / ray_address: the PostgreSQL server and Ray cluster .ci/run starts (skip when unset).
pytest_plugins = ["tests.support.servers"]

BACKENDS = ("sqlite", "postgres")
"""The store backends a `both_backends` test runs on."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a `both_backends` test once per backend (PostgreSQL ones marked `pg`)."""
    wanted = {"store", "db_target"} & set(metafunc.fixturenames)
    if wanted and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize(
            "backend",
            [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.pg)],
            indirect=True,
        )


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """`sqlite` (the default) or `postgres` for a `both_backends` test."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def db_target(backend: str, tmp_path, request: pytest.FixtureRequest) -> str:
    """A fresh database: a SQLite file in tmp_path, or a fresh PostgreSQL database (`pg_url`)."""
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "studio.db")


@pytest.fixture
def store(db_target: str) -> Iterator[Store]:
    """A fresh Store on a real database (SQLite in tmp_path unless `both_backends`), closed after."""
    opened = Store(db_target)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def rubric_version(store: Store) -> dict[str, Any]:
    """Version 1 of the rubric "article" (RUBRIC_TEXT)."""
    return store.rubrics.save_version("article", RUBRIC_TEXT, tags=["writing"])


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An environment with no provider key, base URL or model override (`PROVIDER_ENV`)."""
    clear_provider_env(monkeypatch)
    return monkeypatch


@pytest.fixture(name="make_evaluation")
def make_evaluation_fixture() -> Callable[..., dict[str, Any]]:
    """The `make_evaluation` helper, for tests that prefer fixtures to imports."""
    return make_evaluation


@pytest.fixture(name="new_run")
def new_run_fixture() -> Callable[..., int]:
    """The `new_run` helper."""
    return new_run
