"""The workbench, library side: grade-only runs, re-grading, labels, agreement, panels, insufficient.

Real SQLite stores in tmp_path, real `create_agent` graphs and replay models (scripted
turns, not language models) as graders.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from rubric_core import Judges, PassPipeline
from rubric_core.cli import cli
from rubric_core.evaluate import EvaluationError
from rubric_core.export import csv_chunks
from rubric_core.middleware import RubricMiddleware
from rubric_core.providers.replay import ReplayChatModel, tool_call_turn, verdict_turn
from rubric_core.store import StoreError
from rubric_core.workbench.agreement import (
    NoLabelsError,
    agreement_between,
    agreement_with_labels,
    compare_stored_experiments,
    experiment_consistency,
    import_labels_csv,
    next_unlabelled,
)
from rubric_core.workbench.datasets import DatasetError, load_graded_upload
from rubric_core.workbench.grade import GradingError, grade_by_person
from rubric_core.workbench.regrade import RegradeError
from tests.support.jobs import grade_of, regrade_of

RUBRIC = "- has a title\n- cites a source"
CRITERIA = ["has a title", "cites a source"]


def _grader(*verdicts, cycle=True):
    """A replay grader answering these verdict turns in turn (scripted, not a model)."""
    return ReplayChatModel(scenario="test-grader", turns=list(verdicts), cycle=cycle)


PASS_BOTH = verdict_turn("satisfied", [("has a title", True), ("cites a source", True)])
FAIL_SOURCE = verdict_turn(
    "needs_revision", [("has a title", True), ("cites a source", False, "add a source")]
)


def _insufficient_turn():
    return tool_call_turn(
        "GraderResponse",
        {
            "criteria": [
                {"name": "has a title", "passed": True},
                {
                    "name": "cites a source",
                    "passed": False,
                    "insufficient": True,
                    "gap": "the linked page was not shown",
                },
            ],
            "explanation": "Could not check the source.",
            "result": "needs_revision",
        },
    )


def _rows(n=3, labels=None):
    return [
        {"row": i + 2, "input": f"request {i}", "output": f"output {i}", "labels": labels or {}}
        for i in range(n)
    ]


def _graded(store, n=4):
    version = store.rubrics.save_version("essay", RUBRIC)
    return version, grade_of(
        store,
        _rows(n),
        rubric_version_id=version["id"],
        grader_model="replay:x",
        grader_llm_factory=lambda: _grader(FAIL_SOURCE),
    )


def _snapshot(store):
    """Everything a bad request must leave unchanged."""
    return (
        store.runs.count(),
        [store.passes.of_run(r["id"]) for r in store.runs.find(limit=100)],
        store.labels.of_passes(range(1, 50)),
        store.experiments.find(),
    )


# --------------------------------------------------------------------------- panels


def test_panel_tie_is_not_a_pass_and_keeps_every_judge():
    pipeline = PassPipeline.build(Judges([_grader(PASS_BOTH), _grader(FAIL_SOURCE)]))
    evaluation = pipeline.grade_transcript([HumanMessage("write"), AIMessage("a draft")], RUBRIC)
    source = evaluation["criteria"][1]
    assert evaluation["result"] == "needs_revision"
    assert source["passed"] is False
    assert source["gap"].startswith("judges split 1-1")
    assert evaluation["criteria"][0] == {"name": "has a title", "passed": True}
    assert [j["result"] for j in evaluation["judges"]] == ["satisfied", "needs_revision"]
    assert evaluation["judges"][1]["criteria"][1]["gap"] == "add a source"


def test_samples_pass_by_strict_majority_in_the_loop():
    # one model sampled three times: two of three pass on the first draft
    grader = _grader(PASS_BOTH, FAIL_SOURCE, PASS_BOTH)
    agent = create_agent(
        ReplayChatModel(turns=[AIMessage("Title\nA draft.")]),
        middleware=[RubricMiddleware(model=Judges([grader], samples=3))],
    )
    result = agent.invoke({"messages": [HumanMessage("write")], "rubric": RUBRIC})
    assert result["_rubric_status"] == "satisfied"
    (evaluation,) = result["_rubric_evaluations"]
    assert len(evaluation["judges"]) == 3
    assert [j["judge"] for j in evaluation["judges"]] == [
        "replay:test-grader #1",
        "replay:test-grader #2",
        "replay:test-grader #3",
    ]


def test_panel_split_sends_the_agent_back_and_then_satisfies():
    judges = [
        _grader(PASS_BOTH, PASS_BOTH, cycle=False),
        _grader(FAIL_SOURCE, PASS_BOTH, cycle=False),
    ]
    agent = create_agent(
        ReplayChatModel(turns=[AIMessage("draft one"), AIMessage("draft two")]),
        middleware=[RubricMiddleware(model=Judges(judges))],
    )
    result = agent.invoke({"messages": [HumanMessage("write")], "rubric": RUBRIC})
    first, second = result["_rubric_evaluations"]
    assert first["status"] == "needs_revision"
    assert "judges split 1-1" in first["criteria"][1]["gap"]
    assert second["status"] == "satisfied"


def test_one_grader_records_have_no_judges():
    evaluation = PassPipeline.build(_grader(PASS_BOTH)).grade_transcript(
        [HumanMessage("q"), AIMessage("a")], RUBRIC
    )
    assert "judges" not in evaluation
    assert evaluation["status"] == "satisfied"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": []}, "non-empty"),
        ({"models": "m"}, "non-empty"),
        ({"models": ["m"], "samples": 0}, "samples must be between 1 and 20"),
    ],
)
def test_panel_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Judges(**kwargs)


def test_the_model_is_required():
    with pytest.raises(ValueError, match="model is required"):
        RubricMiddleware()


# --------------------------------------------------------------------------- grade-only runs


@pytest.mark.both_backends
def test_graded_runs_store_one_pass_each_with_dataset_labels(store):
    version = store.rubrics.save_version("essay", RUBRIC)
    summary = grade_of(
        store,
        _rows(2, labels={"Has a title": True}),
        rubric_version_id=version["id"],
        grader_model="replay:test-grader",
        grader_llm_factory=lambda: _grader(FAIL_SOURCE),
        source="outputs.csv",
    )
    assert summary["by_result"] == {"needs_revision": 2}
    assert summary["labelled"] == 2
    for run_id, evaluation_id in zip(summary["run_ids"], summary["evaluation_ids"], strict=True):
        run = store.runs.get(run_id)
        assert (run["agent_kind"], run["agent_model"], run["iterations"]) == ("graded", "", 1)
        assert run["status"] == "needs_revision"
        assert [m["role"] for m in store.runs.transcript(run_id)] == ["human", "ai"]
        label = store.labels.of_passes([evaluation_id])[evaluation_id]["has a title"]
        assert (label["human_passed"], label["reviewer"]) == (True, "outputs.csv")


def test_dataset_without_output_is_a_clear_error():
    with pytest.raises(DatasetError, match="has no 'output' column"):
        load_graded_upload("outputs.csv", b"input\nwrite a haiku\n")
    with pytest.raises(DatasetError, match="line 1 needs an object with 'input' and 'output'"):
        load_graded_upload("outputs.jsonl", b'{"input": "write"}\n')


def test_dataset_labels_column_is_read():
    rows = load_graded_upload(
        "o.csv", b'input,output,labels\nq,a,"{""has a title"": false}"\nq2,a2,\n'
    )
    assert [r["labels"] for r in rows] == [{"has a title": False}, {}]


@pytest.mark.both_backends
def test_dataset_labels_not_in_the_rubric_store_nothing(store):
    version = store.rubrics.save_version("essay", RUBRIC)
    before = _snapshot(store)
    with pytest.raises(GradingError, match="'rhymes'"):
        grade_of(
            store,
            [*_rows(2), {"row": 4, "input": "q", "output": "a", "labels": {"rhymes": True}}],
            rubric_version_id=version["id"],
            grader_model="replay:test-grader",
            grader_llm_factory=lambda: _grader(PASS_BOTH),
        )
    assert _snapshot(store) == before


@pytest.mark.both_backends
def test_a_person_grades_exactly_as_a_model_would(store):
    version = store.rubrics.save_version("essay", RUBRIC)
    run_id = grade_by_person(
        store,
        version["id"],
        "write",
        "an essay",
        {"has a title": True, "cites a source": None},
        {"cites a source": "cannot open the link"},
        reviewer="ana",
    )
    run = store.runs.get(run_id)
    assert (run["grader_model"], run["status"]) == ("human:ana", "needs_revision")
    (evaluation,) = store.passes.of_run(run_id)
    assert evaluation["criteria"][1] == {
        "name": "cites a source",
        "passed": False,
        "gap": "cannot open the link",
        "insufficient": True,
    }
    labels = store.labels.of_passes([evaluation["id"]])[evaluation["id"]]
    assert list(labels) == ["has a title"]  # an undecided verdict is not a label
    before = _snapshot(store)
    with pytest.raises(GradingError, match="no gap"):
        grade_by_person(
            store,
            version["id"],
            "q",
            "a",
            {"has a title": False, "cites a source": True},
            reviewer="ana",
        )
    with pytest.raises(GradingError, match="'rhymes'"):
        grade_by_person(store, version["id"], "q", "a", {"rhymes": True}, reviewer="ana")
    assert _snapshot(store) == before


# --------------------------------------------------------------------------- insufficient


@pytest.mark.both_backends
def test_insufficient_evidence_is_kept_apart_through_the_store(store):
    version = store.rubrics.save_version("essay", RUBRIC)
    summary = grade_of(
        store,
        _rows(1),
        rubric_version_id=version["id"],
        grader_model="replay:test-grader",
        grader_llm_factory=lambda: _grader(_insufficient_turn()),
    )  # an insufficient-evidence verdict on 'cites a source'
    (evaluation_id,) = summary["evaluation_ids"]
    (evaluation,) = store.passes.of_run(summary["run_ids"][0])
    assert evaluation["result"] == "needs_revision"  # not a pass for the loop
    assert evaluation["criteria"][1]["insufficient"] is True
    store.labels.save(evaluation_id, {"has a title": True, "cites a source": False}, reviewer="ana")
    report = agreement_with_labels(store, run_ids=summary["run_ids"])
    source = next(c for c in report["criteria"] if c["name"] == "cites a source")
    assert (source["n"], source["insufficient"], source["true_fail"]) == (0, 1, 0)
    assert report["overall"]["insufficient"] == 1
    rows = list(csv.DictReader(io.StringIO(b"".join(csv_chunks(store, "criteria")).decode())))
    assert [r["insufficient"] for r in rows] == ["false", "true"]


# --------------------------------------------------------------------------- labels


@pytest.mark.both_backends
def test_labels_set_change_and_unknown_criterion(store):
    _, summary = _graded(store, n=2)
    first, second = sorted(summary["evaluation_ids"])
    store.labels.save(first, {"cites a source": True}, reviewer="ana", note="it cites one")
    store.labels.save(first, {"cites a source": False}, reviewer="bo")
    label = store.labels.of_passes([first])[first]["cites a source"]
    assert (label["human_passed"], label["reviewer"], label["label_note"]) == (False, "bo", "")
    before = _snapshot(store)
    with pytest.raises(StoreError, match="no criterion 'rhymes'"):
        store.labels.save(second, {"has a title": True, "rhymes": True}, reviewer="ana")
    assert _snapshot(store) == before
    items = store.labels.review_items(batch_id=summary["batch_id"])
    assert next_unlabelled(items)["evaluation_id"] == first  # 'has a title' is unlabelled
    store.labels.save(first, {"has a title": True}, reviewer="ana")
    assert (
        next_unlabelled(store.labels.review_items(batch_id=summary["batch_id"]))["evaluation_id"]
        == second
    )


@pytest.mark.both_backends
def test_labels_round_trip_through_export_and_import(store, tmp_path):
    _graded(store, n=2)
    exported = b"".join(csv_chunks(store, "criteria")).decode()
    rows = list(csv.DictReader(io.StringIO(exported)))
    for row in rows:  # the reviewer agrees with the judge except on one cell
        row["human_passed"] = row["passed"]
        row["label_note"] = "checked"
    rows[1]["human_passed"] = "true"
    path = tmp_path / "reviewed.csv"
    with path.open("w", newline="") as fp:
        writer = csv.DictWriter(fp, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert import_labels_csv(store, path) == 4
    again = list(csv.DictReader(io.StringIO(b"".join(csv_chunks(store, "criteria")).decode())))
    assert [r["human_passed"] for r in again] == ["true", "true", "true", "false"]
    assert {r["reviewer"] for r in again} == {"reviewed.csv"}
    assert {r["label_note"] for r in again} == {"checked"}
    report = agreement_with_labels(store)
    assert report["overall"]["n"] == 4
    assert report["overall"]["false_fail"] == 1


@pytest.mark.both_backends
def test_label_import_naming_a_criterion_not_in_the_rubric_stores_nothing(store):
    _, summary = _graded(store, n=1)
    (evaluation_id,) = summary["evaluation_ids"]
    before = _snapshot(store)
    text = (
        "evaluation_id,criterion,human_passed\n"
        f"{evaluation_id},has a title,true\n{evaluation_id},rhymes,false\n"
    )
    with pytest.raises(EvaluationError, match=r"row 3.*'rhymes'"):
        import_labels_csv(store, text, source="labels.csv")
    assert _snapshot(store) == before


# --------------------------------------------------------------------------- agreement


@pytest.mark.both_backends
def test_agreement_with_no_labels_is_a_clear_error(store):
    _graded(store, n=1)
    before = _snapshot(store)
    with pytest.raises(NoLabelsError, match="no human labels"):
        agreement_with_labels(store)
    assert _snapshot(store) == before


# --------------------------------------------------------------------------- re-grading


@pytest.mark.both_backends
def test_regrade_stores_an_experiment_and_leaves_the_runs_alone(store):
    _, summary = _graded(store)
    v2 = store.rubrics.save_version("essay", RUBRIC + "\n- is short")
    before = [store.passes.of_run(r) for r in summary["run_ids"]]
    three = verdict_turn(
        "satisfied", [("has a title", True), ("cites a source", True), ("is short", True)]
    )
    result = regrade_of(
        store,
        batch_id=summary["batch_id"],
        rubric_version_id=v2["id"],
        grader_model="replay:y",
        grader_llm_factory=lambda: _grader(three),
        max_concurrency=3,
    )
    assert (result["items"], result["errors"], result["consistency"]) == (4, 0, None)
    assert [store.passes.of_run(r) for r in summary["run_ids"]] == before
    experiment = store.experiments.get(result["experiment_id"])
    assert (experiment["status"], experiment["version"], experiment["items"]) == ("done", 2, 4)
    assert experiment["source"]["batch_id"] == summary["batch_id"]
    verdicts = store.experiments.verdicts(result["experiment_id"])
    assert set(verdicts) == set(summary["evaluation_ids"])


@pytest.mark.both_backends
def test_regrade_with_samples_reports_flip_rates(store):
    _, summary = _graded(store, n=2)
    result = regrade_of(
        store,
        run_ids=summary["run_ids"],
        grader_model="replay:y",
        grader_llm_factory=lambda: _grader(PASS_BOTH, FAIL_SOURCE),  # fresh per grading
        samples=2,
    )
    assert result["items"] == 4
    report = experiment_consistency(store, result["experiment_id"])
    assert result["consistency"] == report
    by_name = {c["name"]: c["flip_rate"] for c in report["criteria"]}
    assert by_name == {"has a title": 0.0, "cites a source": 0.0}


@pytest.mark.both_backends
def test_regrade_of_runs_from_different_rubrics_stores_nothing(store):
    _, summary = _graded(store, n=1)
    other = store.rubrics.save_version("poem", "- rhymes")
    poem = grade_of(
        store,
        _rows(1),
        rubric_version_id=other["id"],
        grader_model="replay:x",
        grader_llm_factory=lambda: _grader(verdict_turn("satisfied", [("rhymes", True)])),
    )
    before = _snapshot(store)
    with pytest.raises(RegradeError, match=r"different rubrics: 'essay'.*'poem'"):
        regrade_of(
            store,
            run_ids=[*summary["run_ids"], *poem["run_ids"]],
            grader_model="replay:y",
            grader_llm_factory=lambda: _grader(PASS_BOTH),
        )
    assert _snapshot(store) == before


@pytest.mark.both_backends
def test_compare_two_experiments_with_their_agreement(store):
    _, summary = _graded(store, n=2)
    first, second = sorted(summary["evaluation_ids"])
    store.labels.save(first, {"has a title": True, "cites a source": True}, reviewer="ana")
    store.labels.save(second, {"has a title": True, "cites a source": False}, reviewer="ana")
    strict = regrade_of(
        store,
        run_ids=summary["run_ids"],
        grader_model="replay:a",
        grader_llm_factory=lambda: _grader(FAIL_SOURCE),
    )["experiment_id"]
    lenient = regrade_of(
        store,
        run_ids=summary["run_ids"],
        grader_model="replay:b",
        grader_llm_factory=lambda: _grader(PASS_BOTH),
    )["experiment_id"]
    found = compare_stored_experiments(store, strict, lenient)
    source = next(c for c in found["comparison"]["criteria"] if c["name"] == "cites a source")
    assert (source["improved"], source["regressed"]) == (2, 0)
    assert found["agreement_a"]["overall"]["n"] == 4
    assert found["agreement_b"]["overall"]["false_pass"] == 1
    between = agreement_between(store, strict, lenient)
    assert between["overall"]["false_fail"] == 2


# --------------------------------------------------------------------------- CLI


SCENARIO_RUBRIC = (
    "- Exactly two sentences\n- Fewer than 40 words\n- Says the bottle keeps drinks cold"
)


@pytest.fixture
def invoke(tmp_path):
    db = tmp_path / "cli.db"

    def run(*args):
        return CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)

    run.db = db
    return run


def _cli_setup(invoke, tmp_path):
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(SCENARIO_RUBRIC)
    assert invoke("rubrics", "add", "bottle", str(rubric)).exit_code == 0
    data = tmp_path / "outputs.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(
                {
                    "input": f"describe bottle {i}",
                    "output": "```text\nIt keeps drinks cold. It is steel.\n```",
                    "labels": {"Fewer than 40 words": True, "Exactly two sentences": i != 1},
                }
            )
            for i in range(3)
        )
    )
    return data


def test_cli_grade_then_agreement_json(invoke, tmp_path):
    data = _cli_setup(invoke, tmp_path)
    graded = invoke(
        "grade",
        "--input-file",
        str(data),
        "--rubric",
        "bottle@1",
        "--grader",
        "replay:satisfied_first_try",
        "--tool",
        "text_stats",
        "--json",
    )
    assert graded.exit_code == 0, graded.output
    summary = json.loads(graded.output)
    assert (len(summary["run_ids"]), summary["labelled"]) == (3, 6)
    assert summary["by_result"] == {"satisfied": 3}
    result = invoke("agreement", "--json")
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["rubrics"]  # one report per rubric
    assert report["rubric"] == "bottle"
    assert set(report["overall"]) >= {"n", "agreement", "kappa"}
    assert report["overall"]["n"] == 6
    keys = {"name", "n", "agreement", "kappa", "true_pass", "false_pass", "false_fail", "true_fail"}
    assert all(keys <= set(c) for c in report["criteria"])
    two = next(c for c in report["criteria"] if c["name"] == "Exactly two sentences")
    assert (two["true_pass"], two["false_pass"]) == (2, 1)


def test_cli_regrade_and_agreement_between_experiments(invoke, tmp_path):
    data = _cli_setup(invoke, tmp_path)
    assert (
        invoke(
            "grade",
            "--input-file",
            str(data),
            "--rubric",
            "bottle",
            "--grader",
            "replay:satisfied_first_try",
            "--tool",
            "text_stats",
        ).exit_code
        == 0
    )
    for _ in range(2):
        out = invoke(
            "regrade",
            "--rubric",
            "bottle",
            "--grader",
            "replay:satisfied_first_try",
            "--tool",
            "text_stats",
            "--json",
        )
        assert out.exit_code == 0, out.output
    result = invoke("agreement", "--experiment", "1", "--against", "2", "--json")
    assert json.loads(result.output)["overall"]["agreement"] == 1.0
    labels = invoke("agreement", "--experiment", "1", "--against-labels")
    assert labels.exit_code == 0 and "kappa" in labels.output


def test_cli_bad_inputs_are_one_line_errors(invoke, tmp_path):
    _cli_setup(invoke, tmp_path)
    no_output = tmp_path / "bad.csv"
    no_output.write_text("input\nq\n")
    result = invoke(
        "grade", "--input-file", str(no_output), "--rubric", "bottle", "--grader", "replay:haiku"
    )
    assert result.exit_code == 2 and "no 'output' column" in result.output
    result = invoke("agreement", "--json")
    assert result.exit_code == 2 and "no human labels" in result.output
    labels = tmp_path / "labels.csv"
    labels.write_text("evaluation_id,criterion,human_passed\n1,rhymes,true\n")
    result = invoke("label", "--input-file", str(labels))
    assert result.exit_code == 2 and "no grading pass has evaluation id 1" in result.output
    result = invoke("regrade", "--grader", "replay:haiku")
    assert result.exit_code == 2 and "say which runs" in result.output


def test_a_graded_pass_is_stored_despite_a_transient_write_failure(store, monkeypatch):
    """A grade-only pass whose write first meets a locked store is retried, not lost."""
    from rubric_core.store import StoreError

    real = store.passes.record
    tries = []

    def locked_once(run_id, evaluation):
        tries.append(run_id)
        if len(tries) == 1:
            raise StoreError("database is locked", kind="locked")
        return real(run_id, evaluation)

    monkeypatch.setattr(store.passes, "record", locked_once)
    _, summary = _graded(store, n=1)
    run = store.runs.find(limit=1)[0]
    assert len(tries) == 2
    assert run["status"] == "needs_revision"
    assert [e["result"] for e in store.passes.of_run(run["id"])] == ["needs_revision"]


def test_review_leaves_out_passes_without_verdicts(store):
    """A grader-error pass has nothing to label: Review and Agreement do not count it."""
    version = store.rubrics.save_version("essay", RUBRIC)
    from rubric_core.providers import resolve_model

    broken = resolve_model("replay:grader_error", role="grader")  # its grader raises
    summary = grade_of(
        store,
        _rows(1),
        rubric_version_id=version["id"],
        grader_model="replay:x",
        grader_llm_factory=lambda: broken,
    )
    run = store.runs.find(limit=1)[0]
    stored = store.passes.of_run(run["id"])
    assert [e["result"] for e in stored] == ["grader_error"]
    assert store.labels.review_items(batch_id=summary["batch_id"]) == []
    # a link to that pass still opens it (the Review page asks for the run's passes)
    items = store.labels.review_items(run_ids=[run["id"]], final_only=False, judged_only=False)
    assert [i["criteria"] for i in items if i["evaluation_id"] == stored[0]["id"]] == [[]]
