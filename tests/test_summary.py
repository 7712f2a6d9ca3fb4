"""`rubric_core.summary`: one home for every figure, read alike by every front door.

Each test here is one finding of issue 30 that failed on the code before the summary layer.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.export import TrainingOptions, training_rows
from rubric_core.report.figures import figures_for
from rubric_core.report.html import render_report
from rubric_core.store import RunEnd, RunFilters, Store
from rubric_core.summary import grader_kind, summary_for_batch
from rubric_core.ui.batches import batch_input_rows
from rubric_core.workbench.agreement import agreement_with_labels
from tests.support.store import make_evaluation, new_run

PRICES = "- Mentions a price {regex: \\$\\d}\n- [-5] Shouts {regex: !}\n"
OUTPUTS = "input,output\na,Great!\nb,$5 deal\nc,Buy now!\n"


def _cli(db, *args):
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result


def _graded_prices(tmp_path):
    """The issue's three outputs graded checks-only by `gate --input-file`; the batch id."""
    db = tmp_path / "s.db"
    (tmp_path / "r.txt").write_text(PRICES)
    (tmp_path / "o.csv").write_text(OUTPUTS)
    _cli(db, "rubrics", "add", "prices", str(tmp_path / "r.txt"))
    _cli(db, "gate", "--input-file", str(tmp_path / "o.csv"), "--rubric", "prices")
    with Store(db) as store:
        [batch] = store.runs.batches()
    return db, batch["batch_id"]


def test_a_batch_and_its_regrade_have_one_mean_score(tmp_path):
    """Finding 1: `gate --batch B` said mean score 0.000 and `gate --experiment 1` -3.000
    for the same gradings (experiments averaged with `statistics.fmean`, unclipped); the
    experiment's report said "Mean score -0.00". One mean now, with its numbers beside it."""
    db, batch_id = _graded_prices(tmp_path)
    _cli(db, "regrade", "--batch", batch_id, "--rubric-version", "1")
    batch = json.loads(_cli(db, "gate", "--batch", batch_id, "--json").output)
    experiment = json.loads(_cli(db, "gate", "--experiment", "1", "--json").output)
    assert sorted(batch["scores"]) == sorted(experiment["scores"]) == [-5.0, -5.0, 1.0]
    assert batch["mean_score"] == experiment["mean_score"] == 0.0
    assert "= -3.00, clipped to [0, 1]: 0.00" in experiment["mean_basis"]
    with Store(db) as store:
        html = render_report(figures_for(store, experiment_id=1), item_charts=False)
    assert "Mean score<b>0.00</b>" in html
    assert "-0.00" not in html


def test_a_checks_only_gate_records_the_one_checks_grader_name(tmp_path):
    """Finding 4: `gate --input-file` recorded `checks-only` where every other front door
    records `checks`, so the Runs page's Model filter listed both."""
    db, batch_id = _graded_prices(tmp_path)
    with Store(db) as store:
        assert {run["grader_model"] for run in store.runs.of_batch(batch_id)} == {"checks"}
        assert summary_for_batch(store, batch_id).grader_kinds == {"checks": 3}


def test_a_stored_checks_only_grader_reads_as_checks_after_migration(tmp_path):
    """Finding 4: rows an earlier build stored as `checks-only` are renamed by migration
    0012, so the Model filter lists one name."""
    import sqlite3

    db = tmp_path / "old.db"
    with Store(db) as store:
        version = store.rubrics.save_version("prices", PRICES)
        run_id = new_run(store, version["id"], grader_model="checks")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET grader_model = 'checks-only' WHERE id = ?", (run_id,))
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0012_checks_grader_name'")
    with Store(db) as store:
        assert store.runs.get(run_id)["grader_model"] == "checks"
    assert grader_kind("checks-only") == grader_kind("none") == "checks"


def test_the_junit_file_fails_exactly_when_the_gate_fails(tmp_path):
    """Finding 5: `gate --junit` exited 0 while the XML said `failures="2"` (one per input
    not satisfied), so CI showed a passing gate red."""
    db, batch_id = _graded_prices(tmp_path)
    junit = tmp_path / "results.xml"
    passed = _cli(db, "gate", "--batch", batch_id, "--min-satisfied", "0.3", "--junit", str(junit))
    assert passed.exit_code == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0"
    outputs = [case.findtext("system-out") or "" for case in root.iter("testcase")]
    assert sum(text.startswith("needs_revision") for text in outputs) == 2  # still listed
    failed = _cli(db, "gate", "--batch", batch_id, "--min-satisfied", "0.5", "--junit", str(junit))
    assert failed.exit_code == 1
    assert ET.parse(junit).getroot().get("failures") == "1"


def test_a_run_has_one_score_on_the_batch_page_and_in_the_report(tmp_path):
    """Finding 3: a run scoring -0.8 showed 0.00 in the Batch page's matrix, -0.80 in the
    report's inputs table and "score 0.00" in the same report's pass heading; the mean
    beside it gave no way to recompute it."""
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("r", "- [5] a\n- [-9] b")
        run_id = new_run(store, version["id"], batch_id="b1", input_index=0)
        store.passes.record(run_id, make_evaluation(verdicts=[("a", True), ("b", False)]))
        store.runs.finish(run_id, RunEnd(status="needs_revision", score=-0.8))
        runs = store.runs.of_batch("b1")
        [row] = batch_input_rows(runs, {}, ["a", "b"])
        html = render_report(figures_for(store, batch_id="b1"), item_charts=False)
        summary = summary_for_batch(store, "b1")
    assert row["score"] == "-0.80"
    assert '<td class="num">-0.80</td>' in html  # the inputs table
    assert "· score -0.80</h3>" in html and "score 0.00" not in html  # the pass heading
    assert "mean of 1 score (-0.80) = -0.80, clipped to [0, 1]: 0.00" in html
    assert summary.mean_basis() == "mean of 1 score (-0.80) = -0.80, clipped to [0, 1]: 0.00"


def test_agreement_counts_only_passes_a_model_graded(tmp_path):
    """Finding 2: a person's own passes (grader `human:<name>`, whose verdicts are also
    stored as their labels) were counted as judge-vs-human: 100 %, kappa 1, and exported
    as "agreed" by `export --format sft --labels-only`."""
    db = tmp_path / "s.db"
    with Store(db) as store:
        version = store.rubrics.save_version("r", "- a\n- b")
        person = new_run(store, version["id"], grader_model="human:ana")
        graded = store.passes.record(person, make_evaluation(verdicts=[("a", True), ("b", True)]))
        store.labels.save(graded, {"a": True, "b": True}, reviewer="ana")
        store.runs.finish(person, RunEnd(status="satisfied", score=1.0))
        judge = new_run(store, version["id"], grader_model="openai:gpt-4o-mini")
        judged = store.passes.record(judge, make_evaluation(verdicts=[("a", True), ("b", True)]))
        store.labels.save(judged, {"a": True, "b": False}, reviewer="ana")
        store.runs.finish(judge, RunEnd(status="satisfied", score=1.0))
        report = agreement_with_labels(store)
        agreed = list(training_rows(store, "sft", RunFilters(), TrainingOptions(labels_only=True)))
    assert report["overall"]["n"] == 2  # the judge's two labelled verdicts only
    assert report["overall"]["agreement"] == 0.5
    assert agreed == []  # the judge's pass disagrees; the person's pass is no judge's
    (cli_report,) = json.loads(_cli(db, "agreement", "--json").output)["rubrics"]
    assert cli_report["overall"]["n"] == 2  # the `agreement` command reads the same
