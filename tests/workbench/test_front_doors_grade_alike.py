"""Issue 21, findings 1-3: every front door grades a pass the same way.

A checks-only rubric needs no grader (and is recorded as graded by `checks`), a judged
criterion without a grader is refused with its name, a replay grader scripted for another
rubric is refused with the reason, and a person grading an output is the judge of the
judged criteria only: the code checks decide theirs, on the record and in the export.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_core import export
from rubric_core.batch import Grader
from rubric_core.cli import cli
from rubric_core.runs import RunSpec, SpecError, grader_problem, validate_spec
from rubric_core.schema import CHECKS_GRADER
from rubric_core.store import Store
from rubric_core.workbench import GradingError, grade_by_person, grade_one, start_run
from rubric_core.workbench.grade import code_verdicts
from rubric_core.workbench.regrade import RegradeError
from tests.support.jobs import grade_of, regrade_of

CHECKS_ONLY = "- Short {words 1..60}\n- Calm {no-regex: !}\n- Names the version {regex: v\\d+}"
MIXED = CHECKS_ONLY + "\n- [-2] Invents a price\n- Friendly tone"


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "front.db"


def _invoke(db: Path, *args: str):
    return CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("Error: ")]
    return line


# --------------------------------------------------------------------- the one check


def test_grader_problem_is_one_check_for_no_grader_and_replay(store):
    checks = store.rubrics.save_version("notes", CHECKS_ONLY)
    mixed = store.rubrics.save_version("mixed", MIXED)
    assert grader_problem("none", checks) is None
    assert grader_problem("checks", checks) is None
    problem = grader_problem("none", mixed)
    assert problem is not None
    assert "'Invents a price'" in problem and "'Friendly tone'" in problem
    assert "'Short'" not in problem
    replay = grader_problem("replay:haiku", mixed)
    assert replay is not None
    assert "'haiku'" in replay and "Use instead" in replay
    assert grader_problem("openai:gpt-4.1", mixed) is None


# --------------------------------------------------------------------- library: runs


def test_a_checks_only_run_has_no_grader_and_records_checks(store):
    version = store.rubrics.save_version("notes", CHECKS_ONLY)
    spec = RunSpec(version["id"], "Write a note", "replay:haiku", "none", max_iterations=1)
    assert spec.grader_model == CHECKS_GRADER
    validate_spec(spec, store)
    handle = start_run(store, spec)
    handle.wait(timeout=120)
    run = store.runs.get(handle.run_id)
    assert run["grader_model"] == "checks"
    (evaluation,) = store.passes.of_run(handle.run_id)
    assert evaluation["criteria"]
    assert all(c.get("checked_by") == "code" for c in evaluation["criteria"])


def test_no_grader_for_a_judged_criterion_is_refused_naming_it(store):
    version = store.rubrics.save_version("mixed", MIXED)
    spec = RunSpec(version["id"], "Write a note", "replay:haiku", "none")
    with pytest.raises(SpecError, match="'Friendly tone'"):
        validate_spec(spec, store)


def test_cli_run_refuses_a_replay_grader_for_another_rubric(db):
    store = Store(str(db))
    store.rubrics.save_version("mixed", MIXED)
    store.close()
    line = _one_error_line(
        _invoke(db, "run", "--rubric", "mixed", "--input", "x", "--agent-model", "replay:haiku",
                "--grader", "replay:haiku")
    )  # fmt: skip
    assert "replay grader 'haiku'" in line and "Use instead" in line


# --------------------------------------------------------------------- library: grade-only


def test_grade_only_checks_only_and_refusals_store_nothing(store):
    version = store.rubrics.save_version("notes", CHECKS_ONLY)
    graded = grade_one(store, version["id"], "q", "Release v2 is out.", Grader("none"))
    assert store.runs.get(graded["run_id"])["grader_model"] == "checks"
    assert graded["evaluation"]["result"] == "satisfied"
    mixed = store.rubrics.save_version("mixed", MIXED)
    before = store.runs.count()
    rows = [{"row": 1, "input": "q", "output": "a", "labels": {}}]
    with pytest.raises(GradingError, match="'Friendly tone'"):
        grade_of(store, rows, rubric_version_id=mixed["id"], grader_model="none")
    with pytest.raises(GradingError, match="replay grader 'haiku'"):
        grade_of(store, rows, rubric_version_id=mixed["id"], grader_model="replay:haiku")
    assert store.runs.count() == before


def test_regrade_checks_only_and_mismatched_replay(store):
    version = store.rubrics.save_version("notes", CHECKS_ONLY)
    graded = grade_one(store, version["id"], "q", "Release v2 is out.", Grader("none"))
    result = regrade_of(store, run_ids=[graded["run_id"]], grader_model="none")
    assert result["errors"] == 0
    assert store.experiments.get(result["experiment_id"])["grader_model"] == "checks"
    with pytest.raises(RegradeError, match="replay grader 'haiku'"):
        regrade_of(store, run_ids=[graded["run_id"]], grader_model="replay:haiku")


# --------------------------------------------------------------------- the person grader


def test_the_person_grader_is_the_judge_of_judged_criteria_only(store, tmp_path):
    version = store.rubrics.save_version("notes", MIXED)
    decided = code_verdicts(version["text"], "Great release!")
    assert [v["name"] for v in decided] == ["Short", "Calm", "Names the version"]
    assert [v["passed"] for v in decided] == [True, False, False]
    assert all(v["evidence"] for v in decided)
    with pytest.raises(GradingError, match="'Calm' is decided by a code check"):
        grade_by_person(
            store, version["id"], "q", "Great release!",
            {"Calm": True, "Invents a price": True, "Friendly tone": True}, reviewer="ana",
        )  # fmt: skip
    run_id = grade_by_person(
        store, version["id"], "q", "Great release!",
        {"Invents a price": True, "Friendly tone": True}, reviewer="ana",
    )  # fmt: skip
    run = store.runs.get(run_id)
    assert run["status"] == "needs_revision"  # two checks fail, whatever the person said
    (evaluation,) = store.passes.of_run(run_id)
    by_name = {c["name"]: c for c in evaluation["criteria"]}
    assert [c["name"] for c in evaluation["criteria"]] == [
        "Short", "Calm", "Names the version", "Invents a price", "Friendly tone",
    ]  # fmt: skip
    assert by_name["Calm"]["checked_by"] == "code" and not by_name["Calm"]["passed"]
    assert "checked_by" not in by_name["Friendly tone"]
    assert evaluation["score"] < 1.0
    labels = store.labels.of_passes([evaluation["id"]])[evaluation["id"]]
    assert set(labels) == {"Invents a price", "Friendly tone"}  # the person's, not the code's
    out = tmp_path / "criteria.csv"
    export.export_file(store, out, dataset="criteria", fmt="csv")
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    checked = {r["criterion"]: r["checked_by"] for r in rows if r["run_id"] == str(run_id)}
    assert checked["Calm"] == "code" and checked["Short"] == "code"
    assert checked["Friendly tone"] == ""


# --------------------------------------------------------------------- the CLI


def _outputs(tmp_path: Path) -> Path:
    path = tmp_path / "outputs.jsonl"
    lines = [{"input": "q", "output": "Release v2 is out."}, {"input": "q", "output": "Wow!"}]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return path


def test_cli_grade_checks_only_with_no_grader_or_none(db, tmp_path):
    store = Store(str(db))
    store.rubrics.save_version("notes", CHECKS_ONLY)
    store.rubrics.save_version("mixed", MIXED)
    store.close()
    data = _outputs(tmp_path)
    for extra in ([], ["--grader", "none"]):
        result = _invoke(
            db, "grade", "--input-file", str(data), "--rubric", "notes", *extra, "--json"
        )
        assert result.exit_code == 0, result.output
        summary = json.loads(result.output)
        assert summary["by_result"] == {"satisfied": 1, "needs_revision": 1}
    store = Store(str(db))
    assert {r["grader_model"] for r in store.runs.find(limit=10)} == {"checks"}
    store.close()
    line = _one_error_line(_invoke(db, "grade", "--input-file", str(data), "--rubric", "mixed"))
    assert "'Friendly tone'" in line and "needs a grader model" in line
    line = _one_error_line(
        _invoke(
            db, "grade", "--input-file", str(data), "--rubric", "mixed", "--grader", "replay:haiku"
        )
    )
    assert "replay grader 'haiku'" in line and "Use instead" in line


def test_cli_run_batch_and_regrade_checks_only(db, tmp_path):
    store = Store(str(db))
    store.rubrics.save_version("notes", CHECKS_ONLY)
    store.rubrics.save_version("mixed", MIXED)
    store.close()
    result = _invoke(
        db, "run", "--rubric", "notes", "--input", "Write a note", "--agent-model",
        "replay:haiku", "--max-iterations", "1",
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    store = Store(str(db))
    (run,) = store.runs.find(limit=5)
    assert run["grader_model"] == "checks"
    store.close()
    inputs = tmp_path / "inputs.csv"
    inputs.write_text("input\nWrite a note\nWrite another\n", encoding="utf-8")
    result = _invoke(
        db, "batch", "--rubric", "notes", "--input-file", str(inputs), "--agent-model",
        "replay:haiku", "--grader", "none", "--max-iterations", "1",
    )  # fmt: skip
    assert "Traceback" not in result.output
    store = Store(str(db))
    assert {r["grader_model"] for r in store.runs.find(limit=10)} == {"checks"}
    run_id = store.runs.find(limit=1)[0]["id"]
    store.close()
    result = _invoke(db, "regrade", "--run-id", str(run_id), "--json")
    assert result.exit_code == 0, result.output
    line = _one_error_line(
        _invoke(db, "run", "--rubric", "mixed", "--input", "x", "--agent-model", "replay:haiku",
                "--grader", "none")
    )  # fmt: skip
    assert "'Friendly tone'" in line
