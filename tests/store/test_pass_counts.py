"""Per-criterion pass rates from the trigger-kept counts, and the filters that scan instead."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any

import pytest

from rubric_core.store import RunEnd, Store
from rubric_core.store.filters import RunFilters
from rubric_core.store.pass_counts import MIGRATION_NAME, served_by_counts
from tests.support.store import make_evaluation, new_run

pytestmark = pytest.mark.both_backends


def _expected(store: Store, filters: RunFilters, *, final_only: bool = False) -> list[tuple]:
    """Pass rates computed in Python from every stored pass of the matching runs."""
    runs: list[dict[str, Any]] = []
    while chunk := store.runs.find(filters=filters, limit=500, offset=len(runs)):
        runs.extend(chunk)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 10**9])
    for run in runs:
        passes = store.passes.of_run(run["id"])
        for evaluation in passes[-1:] if final_only else passes:
            for position, verdict in enumerate(evaluation["criteria"]):
                row = counts[verdict["name"]]
                row[0] += int(verdict["passed"])
                row[1] += 1
                row[2] = min(row[2], position)
    ordered = sorted(counts.items(), key=lambda item: (item[1][2], item[0]))
    return [(name, passed, total) for name, (passed, total, _) in ordered]


def _rates(store: Store, filters: RunFilters, *, final_only: bool = False) -> list[tuple]:
    rows = store.passes.criterion_pass_rates(filters, final_only=final_only)
    for row in rows:
        assert row["pass_rate"] == pytest.approx(row["passed"] / row["total"])
    return [(row["criterion"], row["passed"], row["total"]) for row in rows]


def _counts_table(store: Store) -> list[tuple]:
    rows = store._query_rows(
        "SELECT rubric_version_id, criterion, position, passed, total FROM criterion_pass_counts "
        "ORDER BY rubric_version_id, position, criterion"
    )
    return [tuple(int(v) if isinstance(v, int) else v for v in row.values()) for row in rows]


def _counts_from_verdicts(store: Store) -> list[tuple]:
    rows = store._query_rows(
        "SELECT r.rubric_version_id AS v, cr.criterion AS c, cr.position AS p, "
        "SUM(cr.passed) AS passed, COUNT(*) AS total "
        "FROM criterion_results cr JOIN runs r ON r.id = cr.run_id "
        "GROUP BY r.rubric_version_id, cr.criterion, cr.position ORDER BY v, p, c"
    )
    return [(int(r["v"]), r["c"], int(r["p"]), int(r["passed"]), int(r["total"])) for r in rows]


def _fill(store: Store) -> dict[str, Any]:
    """Two rubrics, three versions, runs of two models in two batches, several passes each."""
    haiku1 = store.rubrics.save_version("haiku", "- three lines\n- 5-7-5\n- about rain")
    haiku2 = store.rubrics.save_version("haiku", "- three lines\n- 5-7-5\n- mentions water")
    essay = store.rubrics.save_version("essay", "- has a title\n- cites a source")
    script = [
        (haiku1, "model-a", "b1", [[True, False, False], [True, True, False], [True, True, True]]),
        (haiku1, "model-b", "b1", [[False, False, True]]),
        (haiku2, "model-a", "b2", [[True, False, True], [True, True, True]]),
        (essay, "model-b", "b2", [[True, False], [True, True]]),
        (essay, "model-a", None, [[False, False]]),
    ]
    for version, model, batch, passes in script:
        run_id = new_run(store, version["id"], agent_model=model, batch_id=batch)
        names = version["criteria"]
        for iteration, verdicts in enumerate(passes):
            store.passes.record(
                run_id,
                make_evaluation(
                    grading_run_id=f"g{run_id}",
                    iteration=iteration,
                    verdicts=list(zip(names, verdicts, strict=True)),
                    started_at=float(iteration + 1),
                ),
            )
        if passes[-1] == [True] * len(names):
            store.runs.finish(run_id, RunEnd(status="satisfied"))
    return {"haiku1": haiku1, "haiku2": haiku2, "essay": essay}


def test_pass_rates_from_the_counts_match_every_stored_pass(store):
    versions = _fill(store)
    served = [
        RunFilters(),
        RunFilters(rubric="haiku"),
        RunFilters(rubric="essay"),
        RunFilters(version_id=versions["haiku2"]["id"]),
        RunFilters(rubric="haiku", version_id=versions["haiku1"]["id"]),
        RunFilters(rubric="essay", version_id=versions["haiku1"]["id"]),  # matches nothing
    ]
    for filters in served:
        assert served_by_counts(filters)
        assert _rates(store, filters) == _expected(store, filters), filters
    assert _rates(store, RunFilters(rubric="haiku"))[0] == ("three lines", 5, 6)
    assert _counts_table(store) == _counts_from_verdicts(store)


def test_filters_the_counts_cannot_serve_scan_and_stay_correct(store):
    _fill(store)
    for filters, final_only in [
        (RunFilters(model="model-a"), False),
        (RunFilters(status="satisfied"), False),
        (RunFilters(batch_id="b1"), False),
        (RunFilters(rubric="haiku", batch_id="b2"), False),
        (RunFilters(since="2000-01-01"), False),
        (RunFilters(until="2000-01-01"), False),  # before every run: nothing
        (RunFilters(), True),
        (RunFilters(rubric="haiku"), True),
    ]:
        assert not served_by_counts(filters, final_only=final_only)
        assert _rates(store, filters, final_only=final_only) == _expected(
            store, filters, final_only=final_only
        ), (filters, final_only)
    assert _rates(store, RunFilters(model="model-b")) == [
        ("has a title", 2, 2),
        ("three lines", 0, 1),
        ("5-7-5", 0, 1),
        ("cites a source", 1, 2),
        ("about rain", 1, 1),
    ]


def test_a_pass_recorded_again_is_counted_once_with_its_new_verdicts(store):
    version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
    run_id = new_run(store, version["id"])
    first = make_evaluation(
        grading_run_id="g", verdicts=[("has a title", False), ("cites a source", False)]
    )
    store.passes.record(run_id, first)
    assert _rates(store, RunFilters()) == [("has a title", 0, 1), ("cites a source", 0, 1)]
    # The same (run, grading run, iteration) again: the store replaces its verdicts.
    again = {**first, "criteria": [{"name": "has a title", "passed": True}]}
    store.passes.record(run_id, again)
    assert _rates(store, RunFilters()) == [("has a title", 1, 1)]
    assert _counts_table(store) == [(version["id"], "has a title", 0, 1, 1)]
    assert _rates(store, RunFilters()) == _expected(store, RunFilters())


def test_an_unknown_rubric_or_version_is_still_an_error(store):
    _fill(store)
    with pytest.raises(Exception, match="ghost"):
        store.passes.criterion_pass_rates(rubric="ghost")
    with pytest.raises(Exception, match="999"):
        store.passes.criterion_pass_rates(version_id=999)


def _undo_migration(store: Store) -> None:
    """Make the store look like one from before migration 0009 (verdicts, no counts)."""
    if store.is_postgres:
        import psycopg

        with psycopg.connect(store.target, autocommit=True) as conn:
            conn.execute("DROP TRIGGER criterion_pass_counts_sync ON criterion_results")
            conn.execute("DROP FUNCTION criterion_pass_counts_sync()")
            conn.execute("DROP TABLE criterion_pass_counts")
            conn.execute("DELETE FROM rubric_studio_migrations WHERE name = %s", (MIGRATION_NAME,))
        return
    with sqlite3.connect(store.path) as conn:
        for kind in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER criterion_pass_counts_{kind}")
        conn.execute("DROP TABLE criterion_pass_counts")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (MIGRATION_NAME,))
    conn.close()


def test_the_migration_counts_the_verdicts_stored_before_it(store, db_target):
    _fill(store)
    before = _expected(store, RunFilters())
    store.close()
    with Store(db_target) as reopened:
        _undo_migration(reopened)
        # Verdicts stored while no trigger runs: only the migration's backfill counts them.
        version = reopened.rubrics.save_version("essay", "- has a title\n- cites a source")
        run_id = new_run(reopened, version["id"])
        reopened.passes.record(run_id, make_evaluation(verdicts=[("has a title", True)]))
    with Store(db_target) as migrated:
        assert _counts_table(migrated) == _counts_from_verdicts(migrated)
        rates = _rates(migrated, RunFilters())
        assert rates == _expected(migrated, RunFilters())
        assert rates != before  # the pass stored without triggers is counted too


def test_the_runs_page_reads_fresh_counts_and_caches_only_the_scan(store):
    from rubric_core.ui import data_version, page_pass_rates

    versions = _fill(store)
    calls: list[tuple] = []

    def cached(target: str, filters: RunFilters, version: tuple[int, int]) -> list[dict]:
        calls.append((target, filters, version))
        return store.passes.criterion_pass_rates(filters=filters)

    before = page_pass_rates(store, RunFilters(), cached)
    run_id = new_run(store, versions["essay"]["id"])
    store.passes.record(run_id, make_evaluation(verdicts=[("has a title", True)]))
    after = page_pass_rates(store, RunFilters(), cached)
    assert calls == []  # served by the counts: nothing cached, and the new pass shows at once
    assert after == store.passes.criterion_pass_rates() != before

    batch = RunFilters(batch_id="b1")
    assert page_pass_rates(store, batch, cached) == store.passes.criterion_pass_rates(filters=batch)
    assert calls == [(store.target, batch, data_version(store))]


def test_the_model_filter_lists_the_models_of_runs_added_after_it_was_first_read(store):
    from rubric_core.ui import known_models

    version = store.rubrics.save_version("essay", "- has a title")
    new_run(store, version["id"], agent_model="model-a", grader_model="judge-a")
    assert known_models(store) == ["judge-a", "model-a"]
    for n in range(3):
        new_run(store, version["id"], agent_model=f"model-{n}", grader_model="judge-a")
    assert known_models(store) == ["judge-a", "model-0", "model-1", "model-2", "model-a"]
    assert known_models(store, limit=2) == ["judge-a", "model-0"]
