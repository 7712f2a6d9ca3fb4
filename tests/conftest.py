"""Shared fixtures: a fresh store in tmp_path and fake grading passes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from rubric_core.store import Store

# pg_url / ray_address: the PostgreSQL server and Ray cluster .ci/run starts (skip when unset).
pytest_plugins = ["tests.support.servers"]

RUBRIC_TEXT = "- has a title\n- cites a source\n- under 200 words"
"""A three-criterion rubric most store tests use."""


def make_evaluation(
    *,
    grading_run_id: str | None = None,
    iteration: int = 0,
    verdicts: Sequence[tuple[str, bool] | tuple[str, bool, str]] = (
        ("has a title", True),
        ("cites a source", False, "add a source"),
    ),
    result: str | None = None,
    status: str | None = None,
    explanation: str = "One criterion still fails.",
    draft: str = "A draft answer.",
    started_at: float | None = None,
    duration_s: float = 0.5,
    grader_attempts: int = 1,
    grader_input_tokens: int = 100,
    grader_output_tokens: int = 20,
) -> dict[str, Any]:
    """A `RubricEvaluation`-shaped dict; result/status follow the verdicts unless given."""
    criteria = []
    for verdict in verdicts:
        name, passed, *rest = verdict
        item: dict[str, Any] = {"name": name, "passed": passed}
        if not passed:
            item["gap"] = rest[0] if rest else f"fix {name}"
        criteria.append(item)
    all_passed = all(item["passed"] for item in criteria)
    result = result or ("satisfied" if all_passed else "needs_revision")
    return {
        "grading_run_id": grading_run_id or uuid.uuid4().hex,
        "iteration": iteration,
        "result": result,
        "status": status or result,
        "explanation": explanation,
        "criteria": criteria,
        "draft": draft,
        "started_at": started_at if started_at is not None else time.time(),
        "duration_s": duration_s,
        "grader_attempts": grader_attempts,
        "grader_input_tokens": grader_input_tokens,
        "grader_output_tokens": grader_output_tokens,
    }


def new_run(store: Store, version_id: int, **overrides: Any) -> int:
    """Create a run with sensible defaults; keyword arguments override them."""
    fields: dict[str, Any] = {
        "rubric_version_id": version_id,
        "input": "Write a short article.",
        "agent_model": "replay:article",
        "grader_model": "replay:article-grader",
        "grader_tools": ["text_stats"],
        "max_iterations": 3,
        "agent_kind": "basic",
    }
    fields.update(overrides)
    return store.create_run(**fields)


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
    return store.save_rubric_version("article", RUBRIC_TEXT, tags=["writing"])


@pytest.fixture(name="make_evaluation")
def make_evaluation_fixture() -> Callable[..., dict[str, Any]]:
    """The `make_evaluation` helper, for tests that prefer fixtures to imports."""
    return make_evaluation


@pytest.fixture(name="new_run")
def new_run_fixture() -> Callable[..., int]:
    """The `new_run` helper."""
    return new_run
