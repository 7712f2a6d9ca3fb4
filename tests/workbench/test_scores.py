"""The workbench and scores together: panels, one-off passes and insufficient evidence meet code
checks, scores and the store's columns of both.

Real SQLite stores in tmp_path and replay models (scripted turns, not language models).
"""

from __future__ import annotations

import sqlite3

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core import Judges, PassPipeline
from rubric_core.export import iter_rows
from rubric_core.providers.replay import ReplayChatModel, tool_call_turn, verdict_turn
from rubric_core.store import NewRun, Store

RUBRIC = "- [3] has a title\n- Three lines {lines == 3}"
THREE_LINES = "Title\nline two\nline three"


def _judge(*turns):
    """A replay grader (scripted turns, not a model)."""
    return ReplayChatModel(scenario="test-grader", turns=list(turns), cycle=True)


def _messages(answer=THREE_LINES):
    return [HumanMessage("Write it."), AIMessage(answer)]


def test_a_fresh_store_gets_both_migrations_in_order(tmp_path):
    with Store(tmp_path / "s.db"):
        pass
    conn = sqlite3.connect(tmp_path / "s.db")
    names = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations ORDER BY rowid")]
    columns = {row[1] for row in conn.execute("PRAGMA table_info(criterion_results)")}
    conn.close()
    assert names[-7:] == [
        "0006_scores_checks_keep",
        "0007_insufficient_judges_labels_experiments",
        "0008_runs_input_index",  # after both
        "0009_criterion_pass_counts",
        "0010_run_final_pass",  # the review queues
        "0011_experiment_owner",  # an experiment's process, as a run's
        "0012_checks_grader_name",  # `checks-only` graders renamed `checks`
    ]
    assert {"weight", "checked_by", "insufficient"} <= columns


def test_a_store_with_the_workbench_under_its_old_name_still_opens(tmp_path):
    with Store(tmp_path / "s.db"):
        pass
    conn = sqlite3.connect(tmp_path / "s.db")
    with conn:
        conn.execute(
            "UPDATE _sqlite_migrations SET name = '0006_insufficient_judges_labels_experiments' "
            "WHERE name = '0007_insufficient_judges_labels_experiments'"
        )
    conn.close()
    with Store(tmp_path / "s.db") as store:
        assert store.rubrics.save_version("essay", RUBRIC)["version"] == 1


def test_a_panel_votes_only_on_the_judged_criteria_and_the_pass_is_scored():
    yes = verdict_turn("satisfied", [("has a title", True)], "Titled.")
    no = verdict_turn("needs_revision", [("has a title", False, "no title")], "Untitled.")
    pipeline = PassPipeline.build(Judges([_judge(yes), _judge(yes), _judge(no)]))
    evaluation = pipeline.grade_transcript(_messages(), RUBRIC)
    assert [c["name"] for c in evaluation["criteria"]] == ["has a title", "Three lines"]
    assert evaluation["criteria"][0]["passed"] is True
    assert evaluation["criteria"][1]["checked_by"] == "code"
    assert [[c["name"] for c in j["criteria"]] for j in evaluation["judges"]] == [
        ["has a title"]
    ] * 3
    assert evaluation["result"] == evaluation["status"] == "satisfied"
    assert evaluation["score"] == 1.0
    assert evaluation["regressions"] == []


def test_a_failed_check_keeps_a_panel_pass_from_satisfied():
    yes = verdict_turn("satisfied", [("has a title", True)])
    evaluation = PassPipeline.build(Judges([_judge(yes)], samples=2)).grade_transcript(
        _messages("Title only"), RUBRIC
    )
    assert evaluation["result"] == "needs_revision" and len(evaluation["judges"]) == 2
    assert evaluation["criteria"][1]["passed"] is False  # the code check, not the judges
    assert evaluation["score"] == 0.75  # 3 of 4 positive weight


def test_a_one_off_pass_with_checks_only_needs_no_model():
    evaluation = PassPipeline.build(None).grade_transcript(
        _messages(), "- Three lines {lines == 3}"
    )
    assert evaluation["status"] == "satisfied" and evaluation["score"] == 1.0


def test_insufficient_evidence_counts_as_not_passed_in_the_score(tmp_path):
    turn = tool_call_turn(
        "GraderResponse",
        {
            "criteria": [
                {"name": "has a title", "passed": False, "insufficient": True, "gap": "cut off"}
            ],
            "explanation": "Could not see the top.",
            "result": "needs_revision",
        },
    )
    evaluation = PassPipeline.build(_judge(turn)).grade_transcript(_messages(), RUBRIC)
    title, lines = evaluation["criteria"]
    assert title["insufficient"] is True and lines["passed"] is True
    assert evaluation["score"] == 0.25  # 1 of 4 positive weight

    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("essay", RUBRIC)
        run_id = store.runs.create(
            NewRun(rubric_version_id=version["id"], input="q", agent_model="",
            grader_model="replay:x", max_iterations=1, agent_kind="graded"),
        )  # fmt: skip
        store.passes.record(run_id, evaluation)
        [stored] = store.passes.of_run(run_id)
        rows = list(iter_rows(store, "criteria"))
    assert stored["score"] == 0.25
    assert stored["criteria"][0] == {
        "name": "has a title",
        "passed": False,
        "gap": "cut off",
        "insufficient": True,
        "weight": 3,
    }
    assert stored["criteria"][1]["checked_by"] == "code"
    assert [(r["weight"], r["checked_by"], r["insufficient"]) for r in rows] == [
        (3, None, True),
        (1, "code", False),
    ]
