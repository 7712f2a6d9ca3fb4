"""The review queue read a page at a time (`Store.labels.review_ids`, `review_counts`,
`labelled_pass_ids`, `labelled_items`, `review_criteria`, `ui.ReviewQueue`) against the
whole list `Store.labels.review_items` gives, and the final-pass columns the triggers keep."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from rubric_core.evaluate import agreement_report, pair_up
from rubric_core.store import RunFilters, Store
from rubric_core.store.final_pass import MIGRATION_NAME
from rubric_core.ui import ReviewQueue, labelled_ids, next_unlabelled, step
from rubric_core.workbench.agreement import agreement_with_labels
from tests.support.store import make_evaluation, new_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from generate_store import generate


def _record(store: Store, run_id: int, iteration: int, verdicts: list, started_at: float) -> int:
    return store.passes.record(
        run_id,
        make_evaluation(
            grading_run_id=f"g{run_id}",
            iteration=iteration,
            verdicts=verdicts,
            started_at=started_at,
            **({"result": "grader_error", "status": "grader_error"} if not verdicts else {}),
        ),
    )


def _fill(store: Store) -> dict[str, Any]:
    """Two versions, two batches; a final pass with no verdicts, a final pass that is not
    the highest id, a pass without the first criterion, labels full and partial."""
    essay = store.rubrics.save_version("essay", "- has a title\n- cites a source")
    other = store.rubrics.save_version("memo", "- is short")
    title, source = essay["criteria"]
    ids: dict[str, int] = {}
    for n in range(6):
        run_id = new_run(store, essay["id"], batch_id=f"b{n % 2}")
        ids[f"p{n}a"] = _record(store, run_id, 0, [(title, True), (source, False)], 1.0)
        ids[f"p{n}b"] = _record(store, run_id, 1, [(title, n % 3 == 0), (source, True)], 2.0)
    # Run 7: its earlier-started pass is recorded last (a higher id), so it is not final.
    late = new_run(store, essay["id"], batch_id="b0")
    ids["late_final"] = _record(store, late, 1, [(source, True)], 5.0)
    ids["late_early"] = _record(store, late, 0, [(title, True), (source, True)], 4.0)
    # Run 8: the grader broke on its final pass (no verdicts to label).
    broken = new_run(store, essay["id"], batch_id="b1")
    ids["broken_a"] = _record(store, broken, 0, [(title, True), (source, True)], 1.0)
    ids["broken_final"] = _record(store, broken, 1, [], 2.0)
    new_run(store, essay["id"])  # no pass at all
    memo = new_run(store, other["id"])
    ids["memo"] = _record(store, memo, 0, [("is short", True)], 1.0)
    store.labels.save(ids["p0b"], {title: True, source: True}, reviewer="ana")  # full
    store.labels.save(ids["p1b"], {title: False}, reviewer="ana")  # partial
    store.labels.save(ids["p2b"], {title: True, source: False}, reviewer="bo")  # full
    store.labels.save(ids["p3a"], {title: True, source: True}, reviewer="bo")  # not final
    store.labels.save(ids["late_final"], {source: False}, reviewer="ana")  # full, one criterion
    store.labels.save(ids["memo"], {"is short": False}, reviewer="ana")
    return {"essay": essay, "other": other, "ids": ids}


def _scopes(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"filters": RunFilters(version_id=data["essay"]["id"])},
        {"filters": RunFilters(version_id=data["essay"]["id"], batch_id="b0")},
        {"filters": RunFilters(rubric="memo")},
        {"filters": RunFilters()},
        {"batch_id": "b1"},
        {"run_ids": [1, 2, 7, 8]},
        {"run_ids": []},
    ]


@pytest.mark.both_backends
def test_review_ids_and_counts_match_the_whole_list(store):
    data = _fill(store)
    for scope in _scopes(data):
        items = store.labels.review_items(**scope, final_only=True)
        queue = [int(i["evaluation_id"]) for i in items]
        assert store.labels.review_ids(**scope) == queue, scope
        assert store.labels.review_counts(**scope) == {
            "passes": len(queue),
            "labelled": len(labelled_ids(items)),
        }, scope
        assert store.labels.labelled_pass_ids(**scope) == sorted(labelled_ids(items)), scope
        with_labels = [i for i in items if i["labels"]]
        assert store.labels.labelled_pass_ids(**scope, fully=False) == [
            int(i["evaluation_id"]) for i in with_labels
        ]
        assert store.labels.labelled_items(**scope) == with_labels, scope
        first_seen = list(dict.fromkeys(c["name"] for i in items for c in i["criteria"]))
        assert store.labels.review_criteria(**scope) == first_seen, scope


@pytest.mark.both_backends
def test_review_queue_keeps_final_judged_passes_only(store):
    data = _fill(store)
    ids, essay = data["ids"], RunFilters(version_id=data["essay"]["id"])
    queue = store.labels.review_ids(filters=essay)
    assert ids["late_final"] in queue and ids["late_early"] not in queue
    assert ids["broken_final"] not in queue and ids["broken_a"] not in queue
    assert ids["p3a"] not in queue and ids["p3b"] in queue
    # judged_only=False lists the broken final pass; the queue (judged only) never does
    unjudged = store.labels.review_items(filters=essay, judged_only=False)
    assert ids["broken_final"] in [i["evaluation_id"] for i in unjudged]
    assert store.labels.labelled_pass_ids(filters=essay) == sorted(
        [ids["p0b"], ids["p2b"], ids["late_final"]]
    )
    assert store.labels.labelled_pass_ids(filters=essay, fully=False) == sorted(
        [ids["p0b"], ids["p1b"], ids["p2b"], ids["late_final"]]
    )


@pytest.mark.both_backends
def test_review_ids_pages_forwards_and_backwards(store):
    data = _fill(store)
    essay = RunFilters(version_id=data["essay"]["id"])
    queue = store.labels.review_ids(filters=essay)
    assert len(queue) == 7
    assert store.labels.review_ids(filters=essay, limit=3) == queue[:3]
    assert store.labels.review_ids(filters=essay, after=queue[2], limit=2) == queue[3:5]
    assert store.labels.review_ids(filters=essay, before=queue[4], limit=2, descending=True) == [
        queue[3],
        queue[2],
    ]
    assert store.labels.review_counts(filters=essay, before=queue[4])["passes"] == 4
    assert store.labels.review_items(filters=essay, evaluation_ids=[queue[1], queue[0]]) == [
        i for i in store.labels.review_items(filters=essay) if i["evaluation_id"] in queue[:2]
    ]


@pytest.mark.both_backends
def test_the_final_pass_follows_new_passes_and_verdicts(store):
    data = _fill(store)
    ids, essay = data["ids"], RunFilters(version_id=data["essay"]["id"])
    broken_run = store.passes.run_of(ids["broken_final"])
    # The broken final pass recorded again with verdicts: now judged and in the queue.
    again = _record(store, broken_run, 1, [(data["essay"]["criteria"][0], True)], 2.0)
    assert again == ids["broken_final"]
    assert ids["broken_final"] in store.labels.review_ids(filters=essay)
    # ... and once more without: out again.
    _record(store, broken_run, 1, [], 2.0)
    assert ids["broken_final"] not in store.labels.review_ids(filters=essay)
    # A pass moved later in time becomes the run's final pass.
    late_run = store.passes.run_of(ids["late_early"])
    _record(store, late_run, 0, [(data["essay"]["criteria"][0], True)], 9.0)
    queue = store.labels.review_ids(filters=essay)
    assert ids["late_early"] in queue and ids["late_final"] not in queue
    assert store.labels.review_ids(filters=essay) == [
        i["evaluation_id"] for i in store.labels.review_items(filters=essay)
    ]


@pytest.mark.both_backends
def test_review_queue_answers_as_the_list_helpers(store):
    data = _fill(store)
    for scope in _scopes(data)[:2]:
        filters = scope["filters"]
        items = store.labels.review_items(filters=filters)
        ids = [int(i["evaluation_id"]) for i in items]
        done = labelled_ids(items)
        queue = ReviewQueue(store, filters)
        assert queue.done == done
        assert queue.next_unlabelled() == next_unlabelled(ids, done)
        assert queue.first() == ids[0]
        outside = data["ids"]["memo"]
        for current in [*ids, outside]:
            assert queue.contains(current) == (current in ids)
            assert queue.next_unlabelled(current) == next_unlabelled(ids, done, current)
            assert queue.next_unlabelled(current, done | {current}) == next_unlabelled(
                ids, done | {current}, current
            )
            assert queue.previous(current) == step(ids, current, -1)
            if current in ids:
                assert queue.position(current) == ids.index(current)
        every = set(ids)
        assert queue.next_unlabelled(ids[0], every) is None


def _old_agreement(store: Store, filters: RunFilters) -> Any:
    """`agreement_with_labels` as it was: every final pass with its criteria and labels."""
    items = store.labels.review_items(filters=filters)
    judged = {int(i["evaluation_id"]): i["criteria"] for i in items}
    labels = {
        eid: {name: record["human_passed"] for name, record in by_name.items()}
        for eid, by_name in store.labels.of_passes(list(judged)).items()
    }
    names = list(dict.fromkeys(c["name"] for i in items for c in i["criteria"]))
    return agreement_report(pair_up(judged, labels), criteria=names)


@pytest.mark.both_backends
def test_agreement_from_the_labels_equals_the_one_from_every_pass(store):
    data = _fill(store)
    for filters in (
        RunFilters(version_id=data["essay"]["id"]),
        RunFilters(version_id=data["essay"]["id"], batch_id="b0"),
        RunFilters(),
    ):
        assert agreement_with_labels(store, filters=filters) == _old_agreement(store, filters)


def test_counts_on_a_generated_store_equal_the_full_list(tmp_path):
    path = generate(tmp_path / "gen.db", runs=300, passes=3, criteria=4, rubrics=2, versions=2)
    with Store(path) as store:
        version = store.runs.find(limit=1)[0]["rubric_version_id"]
        filters = RunFilters(version_id=version)
        items = store.labels.review_items(filters=filters)
        names = [c["name"] for c in items[0]["criteria"]]
        for n, item in enumerate(items[:30]):
            chosen = names if n % 3 else names[:2]  # every third one partly labelled
            store.labels.save(
                item["evaluation_id"], {c: n % 2 == 0 for c in chosen}, reviewer="gen"
            )
        store.labels.save(
            store.passes.of_run(items[40]["run_id"])[0]["id"], {names[0]: True}, reviewer="gen"
        )  # a label on an earlier pass: not in the queue
        items = store.labels.review_items(filters=filters)
        labelled = len(labelled_ids(items))
        assert labelled == 20  # of the 30 labelled, every third is partly labelled
        assert store.labels.review_counts(filters=filters) == {
            "passes": len(items),
            "labelled": labelled,
        }
        assert store.labels.review_ids(filters=filters) == [i["evaluation_id"] for i in items]
        assert store.labels.review_criteria(filters=filters) == names
        assert agreement_with_labels(store, filters=filters) == _old_agreement(store, filters)


def test_the_migration_fills_the_final_pass_of_stored_runs(tmp_path):
    path = tmp_path / "s.db"
    with Store(path) as store:
        data = _fill(store)
        essay = RunFilters(version_id=data["essay"]["id"])
        before = store.labels.review_ids(filters=essay)
    with sqlite3.connect(path) as conn:  # as a file from before migration 0010
        for trigger in ("pass_insert", "pass_delete", "pass_update"):
            conn.execute(f"DROP TRIGGER run_final_{trigger}")
        for trigger in ("judged_insert", "judged_delete", "judged_update"):
            conn.execute(f"DROP TRIGGER run_final_{trigger}")
        conn.execute("DROP INDEX idx_runs_final")
        conn.execute("ALTER TABLE runs DROP COLUMN final_evaluation_id")
        conn.execute("ALTER TABLE runs DROP COLUMN final_judged")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (MIGRATION_NAME,))
    conn.close()
    with Store(path) as store:
        assert store.labels.review_ids(filters=essay) == before
        assert store.labels.review_ids(filters=essay) == [
            i["evaluation_id"] for i in store.labels.review_items(filters=essay)
        ]
