"""Issue 21's wording findings, library and CLI side: one rule each, read as it is meant.

Real SQLite stores in tmp_path, replay models (scripted turns, not language models).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.schema import GRADED_KIND, RUN_STATUSES
from rubric_core.store import NewRun, RunEnd

BOTTLE = "- Exactly two sentences\n- Fewer than 40 words\n- Says the bottle keeps drinks cold"


@pytest.fixture
def invoke(tmp_path: Path):
    db = tmp_path / "cli.db"

    def run(*args: str):
        return CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)

    run.db = db  # type: ignore[attr-defined]
    return run


def _outputs(tmp_path: Path, texts: list[str], labels: list[dict] | None = None) -> Path:
    data = tmp_path / "outputs.jsonl"
    rows = []
    for i, text in enumerate(texts):
        row = {"input": f"describe bottle {i}", "output": f"```text\n{text}\n```"}
        if labels:
            row["labels"] = labels[i]
        rows.append(json.dumps(row))
    data.write_text("\n".join(rows))
    return data


# ---------------------------------------------------------------- finding 4


def test_grade_only_sentences_mention_no_agent() -> None:
    from rubric_core.wording import status_sentence

    for status in RUN_STATUSES:
        assert "agent" not in status_sentence(status, GRADED_KIND), status
        assert status_sentence(status, "basic") == status_sentence(status)
    assert "revising" in status_sentence("needs_revision", "deep")


def test_status_sentences_have_one_home() -> None:
    """Guards issue 30: the pages' `status_meaning` and the CLI's `describe_status` said
    `wording.status_sentence`'s sentences a second and third time; now every front door
    calls the one function."""
    from rubric_core import ui
    from rubric_core.cli import common
    from rubric_core.wording import status_sentence

    assert ui.status_sentence is status_sentence
    assert not hasattr(ui, "status_meaning")
    assert not hasattr(common, "describe_status")


def test_cli_grade_says_what_each_result_means_without_an_agent(invoke, tmp_path: Path) -> None:
    from rubric_core.wording import status_sentence

    rubric = tmp_path / "rubric.txt"
    rubric.write_text(BOTTLE)
    assert invoke("rubrics", "add", "bottle", str(rubric)).exit_code == 0
    data = _outputs(tmp_path, ["It keeps drinks cold. It is steel.", "It keeps drinks cold."])
    out = invoke(
        "grade", "--input-file", str(data), "--rubric", "bottle",
        "--grader", "replay:satisfied_first_try", "--tool", "text_stats",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert f"needs_revision: {status_sentence('needs_revision', GRADED_KIND)}" in out.output
    assert "agent" not in out.output


# ---------------------------------------------------------------- finding 7


def test_run_scenario_saves_the_rubric_under_the_scenario_name(invoke) -> None:
    from rubric_core.providers.replay import scenario_rubric_name
    from rubric_core.store import Store

    out = invoke("run", "--scenario", "haiku")
    assert out.exit_code == 0, out.output
    assert "rubric 'haiku' v1" in out.output
    assert scenario_rubric_name("replay:haiku?latency_s=1") == "haiku"
    with Store(invoke.db) as store:
        assert [(r["name"], r["tags"]) for r in store.rubrics.find()] == [("haiku", ["scenario"])]


# ---------------------------------------------------------------- finding 8


def test_cli_batch_pass_rates_count_each_run_final_pass_and_say_so(invoke, tmp_path) -> None:
    from rubric_core.batch import PASS_RATE_RULE

    inputs = tmp_path / "inputs.csv"
    inputs.write_text("input\nfirst\nsecond\n")
    out = invoke(
        "batch", "--scenario", "needs_revision_then_satisfied", "--input-file", str(inputs),
        "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["pass_rate_rule"] == PASS_RATE_RULE
    # Each run took two passes; each counts once, with the verdict it ended on.
    assert [(r["passed"], r["total"]) for r in summary["criterion_pass_rates"]] == [(2, 2)] * 3
    text = invoke(
        "batch", "--scenario", "needs_revision_then_satisfied", "--input-file", str(inputs)
    )
    assert f"{PASS_RATE_RULE}:" in text.output
    assert "(2/2)" in text.output and "(1/2)" not in text.output


# ---------------------------------------------------------------- finding 10


def test_experiment_matrix_rows_are_inputs_and_pickers_follow_labels() -> None:
    from rubric_core.ui import experiment_matrix_rows, experiment_picker_key, runs_table

    comparison = {
        "rows": [
            {"item_id": 11, "criterion": "rhymes", "a": True, "b": False, "change": "regressed"},
            {"item_id": 12, "criterion": "rhymes", "a": True, "b": True, "change": "same"},
        ]
    }
    items = [{"evaluation_id": 11, "input": "Write a poem"}, {"evaluation_id": 12, "input": "Hi"}]
    rows = experiment_matrix_rows(comparison, items)
    assert [(r["input"], r["rhymes"], r["pass"]) for r in rows] == [
        ("Write a poem", "✓ → ✗", "#11"),
        ("Hi", "✓", "#12"),
    ]
    running = {"id": 3, "rubric": "r", "version": 1, "items": 0, "status": "running"}
    done = {**running, "items": 6, "status": "done"}
    assert experiment_picker_key("k", [running]) != experiment_picker_key("k", [done])
    assert experiment_picker_key("k", [done]) == experiment_picker_key("k", [dict(done)])
    (row,) = runs_table([{"id": 1, "status": "running", "score": None, "started_at": None}])
    assert row["score"] == "—"


# ---------------------------------------------------------------- finding 5


def test_a_penalty_verdict_reads_absent_or_present() -> None:
    from rubric_core.ui import pass_details, review_rows
    from rubric_core.wording import criterion_mark

    assert (criterion_mark(True, penalty=True), criterion_mark(False, penalty=True)) == (
        "absent ✓",
        "present ✗",
    )
    verdicts = [
        {"name": "Gives the date", "passed": True},
        {"name": "Invents a price", "passed": False, "gap": "remove it", "weight": -5},
    ]
    (detail,) = pass_details([{"criteria": verdicts, "score": 0.0}])
    assert detail["marks"] == {"Gives the date": "✓", "Invents a price": "present ✗"}
    rows = review_rows(verdicts, {})
    assert [(r["judge"], r["penalty"]) for r in rows] == [
        ("pass", False),
        ("present ✗ (fail)", True),
    ]


def test_cli_run_prints_a_penalty_as_absent_or_present(invoke) -> None:
    out = invoke("run", "--scenario", "release_note_regression")
    lines = out.output.splitlines()
    assert "  absent ✓ Invents a price (penalty)" in lines
    assert any(line.startswith("  present ✗ Invents a price (penalty)") for line in lines)
    assert not any(line.startswith("  ✓ Invents a price") for line in lines)


# ---------------------------------------------------------------- finding 6


def _labelled_versions(db: Path) -> dict[str, int]:
    """essay v1: two graded passes, both labelled; essay v2: one graded pass, no label;
    memo v1: one labelled pass. Returns the version ids."""
    from rubric_core.store import Store
    from tests.support.store import make_evaluation

    with Store(db) as store:
        v1 = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        v2 = store.rubrics.save_version("essay", "- has a title\n- cites a source\n- is short")
        memo = store.rubrics.save_version("memo", "- is dated")
        plan = [
            (v1, [("has a title", True), ("cites a source", False, "add one")], {"has a title": True, "cites a source": True}),
            (v1, [("has a title", True), ("cites a source", True)], {"has a title": True, "cites a source": True}),
            (v2, [("has a title", True), ("cites a source", True), ("is short", True)], None),
            (memo, [("is dated", True)], {"is dated": False}),
        ]  # fmt: skip
        for version, verdicts, labels in plan:
            run_id = store.runs.create(
                NewRun(rubric_version_id=version["id"], input="q", agent_model="",
                grader_model="replay:x", max_iterations=1, agent_kind="graded"),
            )  # fmt: skip
            evaluation_id = store.passes.record(run_id, make_evaluation(verdicts=verdicts))
            store.runs.finish(run_id, RunEnd(status="satisfied", final_output="d"))
            if labels:
                store.labels.save(evaluation_id, labels, reviewer="ana")
    return {"essay v1": v1["id"], "essay v2": v2["id"], "memo v1": memo["id"]}


def test_review_and_agreement_open_where_there_is_something_to_see(tmp_path: Path) -> None:
    from rubric_core.store import Store
    from rubric_core.workbench.agreement import (
        agreement_by_rubric,
        labels_elsewhere,
        opening_version,
    )

    ids = _labelled_versions(tmp_path / "s.db")
    with Store(tmp_path / "s.db") as store:
        assert opening_version(store, "essay", want="review") == ids["essay v2"]
        assert opening_version(store, "essay", want="labels") == ids["essay v1"]
        assert labels_elsewhere(store, "essay", ids["essay v2"]) == (
            "v2 has no human label yet; v1 holds labels on 2 passes: pick it above to see them."
        )
        assert labels_elsewhere(store, "essay", ids["essay v1"]) is None
        reports = agreement_by_rubric(store)
    assert [(r["rubric"], r["overall"]["n"]) for r in reports] == [("essay", 4), ("memo", 1)]


def test_cli_agreement_reports_per_rubric_and_pools_only_when_asked(invoke, tmp_path) -> None:
    _labelled_versions(invoke.db)
    per_rubric = json.loads(invoke("agreement", "--json").output)
    assert per_rubric["scope"] == "per_rubric"
    assert [(r["rubric"], r["overall"]["n"]) for r in per_rubric["rubrics"]] == [
        ("essay", 4),
        ("memo", 1),
    ]
    text = invoke("agreement").output
    assert "rubric essay:\n  overall: n=4" in text and "rubric memo:\n  overall: n=1" in text
    pooled = json.loads(invoke("agreement", "--pooled", "--json").output)
    assert (pooled["scope"], pooled["pooled_rubrics"], pooled["overall"]["n"]) == (
        "pooled",
        ["essay", "memo"],
        5,
    )
    assert invoke("agreement", "--pooled").output.startswith("pooled over every rubric")
    bad = invoke("agreement", "--pooled", "--rubric", "essay")
    assert bad.exit_code != 0 and "--pooled" in bad.output
