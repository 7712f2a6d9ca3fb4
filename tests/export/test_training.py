"""Training exports (sft, preference, trajectories): TRL's chat shapes, loaded with `datasets`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli as main
from rubric_core.export import ExportError, TrainingOptions, export_file, training_rows
from rubric_core.store import RunEnd, RunFilters, Store

datasets = pytest.importorskip("datasets")

ROLES = {"system", "user", "assistant"}


def _is_chat(messages, roles=None):
    """A list of `{role, content}` messages, as TRL's conversational datasets hold."""
    assert isinstance(messages, list) and messages
    for message in messages:
        assert set(message) == {"role", "content"}
        assert message["role"] in ROLES
        assert isinstance(message["content"], str)
    if roles is not None:
        assert [m["role"] for m in messages] == roles


def _load(path):
    kind = "parquet" if str(path).endswith(".parquet") else "json"
    return datasets.load_dataset(kind, data_files=str(path), split="train")


@pytest.fixture
def looped(tmp_path):
    """A real revision loop: the haiku scenario (needs_revision, then satisfied) in a SQLite file."""
    db = tmp_path / "studio.db"
    result = CliRunner().invoke(main, ["run", "--scenario", "haiku", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def _export(db, fmt, output, *extra):
    result = CliRunner().invoke(
        main, ["export", "--format", fmt, "--db", str(db), "--output", str(output), *extra]
    )
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_loop_exports_load_with_datasets_in_trl_shapes(looped, tmp_path, suffix):
    store = Store(str(looped))
    try:
        (run,) = store.runs.find()
        passes = store.passes.of_run(run["id"])
        transcript = store.runs.transcript(run["id"])
    finally:
        store.close()
    assert [p["result"] for p in passes] == ["needs_revision", "satisfied"]

    _export(looped, "sft", tmp_path / f"sft{suffix}")
    sft = _load(tmp_path / f"sft{suffix}")
    assert len(sft) == 1
    _is_chat(sft[0]["messages"], ["user", "assistant"])
    assert sft[0]["messages"][0]["content"] == run["input"]
    assert sft[0]["messages"][1]["content"] == passes[1]["draft"]  # the satisfied draft
    assert sft[0]["metadata"]["satisfied"] is True

    _export(looped, "preference", tmp_path / f"pref{suffix}", "--min-margin", "0.2")
    pref = _load(tmp_path / f"pref{suffix}")
    assert len(pref) == 1
    row = pref[0]
    _is_chat(row["prompt"], ["user"])
    _is_chat(row["chosen"], ["assistant"])
    _is_chat(row["rejected"], ["assistant"])
    assert row["chosen"][0]["content"] == passes[1]["draft"]
    assert row["rejected"][0]["content"] == passes[0]["draft"]
    assert row["score_chosen"] == pytest.approx(passes[1]["score"])
    assert row["score_rejected"] == pytest.approx(passes[0]["score"])
    assert row["score_chosen"] - row["score_rejected"] >= 0.2

    _export(looped, "trajectories", tmp_path / f"traj{suffix}")
    traj = _load(tmp_path / f"traj{suffix}")
    assert len(traj) == 1
    row = traj[0]
    assert [p["draft"] for p in row["passes"]] == [p["draft"] for p in passes]
    assert [p["score"] for p in row["passes"]] == pytest.approx([p["score"] for p in passes])
    failing = [v for v in row["passes"][0]["verdicts"] if not v["passed"]]
    assert failing and all(v["gap"] for v in failing)
    # The feedback is the message the agent was really sent (as the stored transcript holds it).
    sent = [m["content"] for m in transcript if m["is_grader"]]
    assert [p["feedback"] for p in row["passes"]] == [sent[0], None]
    _is_chat(row["messages"], ["user", "assistant", "user", "assistant"])
    assert [m["content"] for m in row["messages"]] == [m["content"] for m in transcript]
    assert row["status"] == "satisfied"


@pytest.fixture
def graded(store, new_run, make_evaluation):
    """Runs with three scored passes, a never-satisfied run, and a run with a grader_error pass."""
    version = store.rubrics.save_version("essay", "- has a title\n- cites a source\n- is short")
    three = [("has a title", True), ("cites a source", True), ("is short", True)]
    first = new_run(store, version["id"], input="Write an essay.", agent_system_prompt="Be brief.")
    ids = []
    for iteration, (verdicts, draft) in enumerate(
        [
            (
                [("has a title", False, "add a title"), *three[1:2], ("is short", False, "cut")],
                "d0",
            ),
            ([*three[:2], ("is short", False, "cut it")], "d1"),
            (three, "d2"),
        ]
    ):
        ids.append(
            store.passes.record(
                first,
                {
                    **make_evaluation(
                        grading_run_id="g1", iteration=iteration, verdicts=verdicts, draft=draft
                    ),
                    "score": sum(v[1] for v in verdicts) / 3,
                },
            )
        )
    store.runs.finish(first, RunEnd(status="satisfied", final_output="d2"))
    never = new_run(store, version["id"], input="Another essay.")
    for iteration in (0, 1):  # scores 0 then 1/3; the cap ends it
        store.passes.record(
            never,
            {
                **make_evaluation(
                    grading_run_id="g2",
                    iteration=iteration,
                    verdicts=[
                        ("has a title", False, "x"),
                        ("cites a source", iteration == 1, "y"),
                        ("is short", False, "z"),
                    ],
                    draft=f"n{iteration}",
                    status="needs_revision" if iteration == 0 else "max_iterations_reached",
                ),
                "score": iteration / 3,
            },
        )
    store.runs.finish(never, RunEnd(status="max_iterations_reached"))
    broken = new_run(store, version["id"], input="Third essay.")
    store.passes.record(
        broken,
        make_evaluation(
            grading_run_id="g3", verdicts=[], result="grader_error", explanation="TimeoutError"
        ),
    )
    store.runs.finish(broken, RunEnd(status="grader_error"))
    return {"first": first, "never": never, "broken": broken, "pass_ids": ids}


def _rows(store, kind, **options):
    return list(training_rows(store, kind, RunFilters(), TrainingOptions(**options)))


def test_sft_takes_satisfied_drafts_and_best_only_when_asked(store, graded):
    rows = _rows(store, "sft")
    assert [r["messages"][-1]["content"] for r in rows] == ["d2"]
    assert rows[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    with_best = _rows(store, "sft", include_unsatisfied=True)
    assert [r["messages"][-1]["content"] for r in with_best] == ["d2", "n1"]
    assert [r["metadata"]["satisfied"] for r in with_best] == [True, False]


def test_preference_pairs_respect_the_margin_and_the_pairing(store, graded):
    # Scores: g1 1/3, 2/3, 1; g2 0, 1/3. Every pair in g1 and g2 differs by >= 1/3.
    rows = _rows(store, "preference", min_margin=0.3)
    pairs = {(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in rows}
    assert pairs == {("d1", "d0"), ("d2", "d0"), ("d2", "d1"), ("n1", "n0")}
    assert all(r["score_chosen"] - r["score_rejected"] >= 0.3 for r in rows)
    wide = _rows(store, "preference", min_margin=0.5)
    assert {(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in wide} == {
        ("d2", "d0")
    }
    best_worst = _rows(store, "preference", min_margin=0.1, pairs="best-worst")
    assert {(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in best_worst} == {
        ("d2", "d0"),
        ("n1", "n0"),
    }


def test_labels_only_keeps_passes_a_human_agreed_with(store, graded):
    first, second, third = graded["pass_ids"]
    store.labels.save(third, {"has a title": True, "is short": True}, reviewer="ann")
    store.labels.save(first, {"has a title": False}, reviewer="ann")  # agrees
    store.labels.save(second, {"is short": True}, reviewer="ann")  # disagrees: judge said fail
    assert [r["messages"][-1]["content"] for r in _rows(store, "sft", labels_only=True)] == ["d2"]
    pref = _rows(store, "preference", labels_only=True, min_margin=0.1)
    assert [(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in pref] == [
        ("d2", "d0")
    ]
    assert _rows(store, "trajectories", labels_only=True) == []  # one pass disagreed
    store.labels.save(second, {"is short": False}, reviewer="ann")
    (trajectory,) = _rows(store, "trajectories", labels_only=True)
    labels = [v["human_passed"] for v in trajectory["passes"][1]["verdicts"]]
    assert labels == [None, None, False]


def test_trajectories_keep_grader_errors_and_skip_them_for_training_pairs(store, graded):
    rows = {r["metadata"]["run_id"]: r for r in _rows(store, "trajectories")}
    broken = rows[graded["broken"]]
    assert [p["result"] for p in broken["passes"]] == ["grader_error"]
    assert broken["passes"][0]["feedback"] is None
    assert all(r["metadata"]["run_id"] != graded["broken"] for r in _rows(store, "sft"))
    never = rows[graded["never"]]
    assert [p["feedback"] is not None for p in never["passes"]] == [True, False]
    assert "- has a title: x" in never["passes"][0]["feedback"]


def test_bad_training_requests_name_the_problem(store, graded, tmp_path):
    for margin in (0, -1, float("nan"), "big"):
        with pytest.raises(ExportError, match="min_margin"):
            TrainingOptions(min_margin=margin)
    with pytest.raises(ExportError, match="pairing"):
        TrainingOptions(pairs="some")
    with pytest.raises(ExportError, match="training format"):
        list(training_rows(store, "rlhf", RunFilters()))
    with pytest.raises(ExportError, match="Parquet is for"):
        export_file(store, tmp_path / "x.parquet", fmt="csv")
    assert not (tmp_path / "x.parquet").exists()


def test_cli_training_export_filters_and_refusals(tmp_path, looped):
    runner = CliRunner()
    out = runner.invoke(main, ["export", "--format", "sft", "--db", str(looped)])
    assert out.exit_code == 0, out.output
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert row["metadata"]["rubric"]
    none = runner.invoke(
        main, ["export", "--format", "sft", "--db", str(looped), "--batch", "no-such-batch"]
    )
    assert none.exit_code == 0 and none.stdout == ""
    bad = runner.invoke(
        main, ["export", "--format", "preference", "--min-margin", "0", "--db", str(looped)]
    )
    assert bad.exit_code != 0 and "min_margin" in bad.output and "Traceback" not in bad.output
    wrong = runner.invoke(main, ["export", "--format", "csv", "--labels-only", "--db", str(looped)])
    assert wrong.exit_code != 0 and "training formats" in wrong.output


@pytest.mark.parametrize("kind", ["sft", "preference", "trajectories"])
def test_dashboard_bytes_equal_the_cli_export(looped, kind):
    from rubric_core.ui import training_bytes

    cli_out = CliRunner().invoke(main, ["export", "--format", kind, "--db", str(looped)])
    assert cli_out.exit_code == 0, cli_out.output
    store = Store(str(looped))
    try:
        page = training_bytes(store, kind, RunFilters(), TrainingOptions())
    finally:
        store.close()
    assert page and page == cli_out.stdout_bytes
