"""Scores, regressions, checked criteria and keep=best, from a run through the store."""

from __future__ import annotations

import sqlite3

import pytest

from rubric_core.providers import load_scenario
from rubric_core.runs import RunSpec, run_once, spec_from_run
from rubric_core.runs.spec import SpecError
from rubric_core.runs.validate import validate_spec
from rubric_core.store import Store

SCENARIO = "release_note_regression"


def _spec(store: Store, **overrides) -> RunSpec:
    scenario = load_scenario(SCENARIO)
    version_id = store.rubrics.save_version("release-note", scenario["rubric"])["id"]
    values = {
        "rubric_version_id": version_id,
        "input": scenario["input"],
        "agent_model": f"replay:{SCENARIO}",
        "grader_model": f"replay:{SCENARIO}",
        "max_iterations": scenario["max_iterations"],
        **overrides,
    }
    return RunSpec(**values)


@pytest.mark.both_backends
@pytest.mark.parametrize("keep", ["last", "best"])
def test_regression_scenario_stores_scores_regressions_and_the_kept_draft(store, keep):
    scenario = load_scenario(SCENARIO)
    run = run_once(store, _spec(store, keep=keep))
    assert run["status"] == "max_iterations_reached"
    assert run["keep"] == keep
    passes = store.passes.of_run(run["id"])
    assert [round(p["score"], 3) for p in passes] == [0.667, 0.5, 0.167]
    assert passes[0]["regressions"] == []
    assert passes[1]["regressions"] == [{"name": "Gives the release date", "passed_in": 1}]
    # still failing a criterion that passed once is still a regression
    assert passes[2]["regressions"] == [
        {"name": "Gives the release date", "passed_in": 1},
        {"name": "Invents a price", "passed_in": 2},
    ]
    # counted once each, when it happens: date in pass 2, price in pass 3
    assert run["regression_count"] == 2
    first = passes[0]["criteria"]
    assert first[0] == {"name": "Gives the release date", "passed": True, "weight": 3}
    assert first[2] == {"name": "Invents a price", "passed": True, "weight": -2}
    assert first[3]["checked_by"] == "code" and first[3]["passed"] is True
    drafts = [turn["content"] for turn in scenario["agent_turns"]]
    if keep == "best":
        assert run["best_iteration"] == 0
        assert run["final_output"] == drafts[0]
        assert round(run["score"], 3) == 0.667
    else:
        assert run["best_iteration"] is None
        assert run["final_output"] == drafts[2]
        assert round(run["score"], 3) == 0.167


@pytest.mark.both_backends
def test_keep_survives_spec_from_run_and_is_validated(store):
    run = run_once(store, _spec(store, keep="best"))
    assert spec_from_run(store.runs.get(run["id"])).keep == "best"
    with pytest.raises(SpecError, match="keep: must be 'last' or 'best', got 'worst'"):
        validate_spec(_spec(store, keep="worst"), store)


def test_the_scores_migration_adds_portable_columns(tmp_path):
    with Store(tmp_path / "s.db"):
        pass
    conn = sqlite3.connect(tmp_path / "s.db")
    columns = {
        table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for table in ("runs", "evaluations", "criterion_results")
    }
    migrations = {row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")}
    conn.close()
    assert {"keep", "score", "best_iteration", "regression_count"} <= columns["runs"]
    assert {"score", "regressions", "regression_count"} <= columns["evaluations"]
    assert {"weight", "checked_by"} <= columns["criterion_results"]
    assert "0006_scores_checks_keep" in migrations
