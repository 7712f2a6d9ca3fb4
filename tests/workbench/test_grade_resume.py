"""Workbench writes survive a kill (issue 22 item 5): a graded row's labels are stored in
the transaction of its pass, and an interrupted `grade` resumes, skipping finished rows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.store import RunEnd, Store
from tests.support.jobs import grade_path

REPO = Path(__file__).resolve().parents[2]
RUBRIC = "- Exactly two sentences\n- Fewer than 40 words\n- Says the bottle keeps drinks cold"
ROWS = 12
KILLED_AT = 6  # the grader model of row 7 is never made: the process dies first

_KILLING_GRADER = textwrap.dedent(
    """
    import os, signal, sys
    from rubric_core.providers import resolve_model
    from rubric_core.store import Store
    from rubric_core.batch import Grader, Job, RegradePasses
    from rubric_core.workbench.grade import grade_file
    from rubric_core.workbench.regrade import regrade

    made = [0]

    def make():
        if made[0] == KILLED_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        made[0] += 1
        return resolve_model("replay:satisfied_first_try", role="grader")

    store = Store(sys.argv[1])
    grader = Grader("replay:satisfied_first_try", factory=make)
    """
).replace("KILLED_AT", str(KILLED_AT))
"""A child's store and a grader whose factory SIGKILLs the process at its KILLED_AT-th model."""

_KILL = _KILLING_GRADER + textwrap.dedent(
    """
    grade_file(store, sys.argv[2], rubric="bottle", grader=grader, concurrency=1,
               batch_id="graded-killed")
    """
)


def _dataset(tmp_path: Path) -> Path:
    data = tmp_path / "outputs.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(
                {
                    "input": f"describe bottle {i}",
                    "output": "It keeps drinks cold. It is steel.",
                    "labels": {"Fewer than 40 words": True, "Exactly two sentences": i % 2 == 0},
                }
            )
            for i in range(ROWS)
        )
    )
    return data


@pytest.mark.both_backends
def test_a_killed_grade_keeps_each_pass_with_its_labels_and_resumes(tmp_path, db_target):
    db, data = db_target, _dataset(tmp_path)
    with Store(db) as store:
        store.rubrics.save_version("bottle", RUBRIC)
    killed = subprocess.run(
        [sys.executable, "-c", _KILL, str(db), str(data)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]

    with Store(db) as store:
        runs = store.runs.of_batch("graded-killed")
        assert 0 < len(runs) <= KILLED_AT + 1
        passes = [p for r in runs for p in store.passes.of_run(r["id"])]
        assert len(passes) >= KILLED_AT
        labelled = store.labels.of_passes([p["id"] for p in passes])
        assert all(len(labelled.get(p["id"], {})) == 2 for p in passes), labelled

        summary = grade_path(
            store, str(data), rubric="bottle", grader_model="replay:satisfied_first_try",
            batch_id="graded-killed", resume=True,
        )  # fmt: skip
        assert summary["skipped"] == KILLED_AT
        runs = store.runs.of_batch("graded-killed")
        assert sorted(r["input_index"] for r in runs) == list(range(ROWS))
        assert not {r["status"] for r in runs} & {"running", "interrupted", "error"}
        passes = [p for r in runs for p in store.passes.of_run(r["id"])]
        assert len(passes) == ROWS
        labelled = store.labels.of_passes([p["id"] for p in passes])
        assert sum(len(v) for v in labelled.values()) == 2 * ROWS


def test_resume_on_a_graded_run_points_to_grade_resume(tmp_path):
    db, data = tmp_path / "studio.db", _dataset(tmp_path)
    with Store(db) as store:
        store.rubrics.save_version("bottle", RUBRIC)
        summary = grade_path(store, str(data), rubric="bottle", grader_model="replay:satisfied_first_try")  # fmt: skip
        run_id = summary["run_ids"][0]
        store.runs.finish(run_id, RunEnd(status="interrupted"))
    result = CliRunner().invoke(cli, ["resume", str(run_id), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "grade-only run" in result.output and f"--resume {summary['batch_id']}" in result.output
    again = CliRunner().invoke(cli, ["grade", "--input-file", str(data), "--rubric", "bottle", "--grader", "replay:satisfied_first_try", "--resume", "graded-nope", "--db", str(db)])  # fmt: skip
    assert again.exit_code == 2 and "no batch 'graded-nope' to resume" in again.output


_KILL_REGRADE = _KILLING_GRADER + textwrap.dedent(
    """
    regrade(store, Job(RegradePasses(grader, batch_id=sys.argv[2]), concurrency=1))
    """
)


@pytest.mark.both_backends
def test_a_killed_regrade_is_interrupted_agreement_says_so_and_it_resumes(tmp_path, db_target):
    db, data = db_target, _dataset(tmp_path)
    with Store(db) as store:
        store.rubrics.save_version("bottle", RUBRIC)
        batch = grade_path(store, str(data), rubric="bottle", grader_model="replay:satisfied_first_try")["batch_id"]  # fmt: skip
    killed = subprocess.run(
        [sys.executable, "-c", _KILL_REGRADE, str(db), batch],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]

    with Store(db) as store:  # opening it sees the experiment's process is gone
        (experiment,) = store.experiments.find()
        assert experiment["status"] == "interrupted"
        assert experiment["items"] == KILLED_AT
        assert f"regrade --resume {experiment['id']}" in experiment["error"]
    result = CliRunner().invoke(cli, ["agreement", "--experiment", str(experiment["id"]), "--db", str(db)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"Note: experiment {experiment['id']} is interrupted, not done ({KILLED_AT} gradings stored)" in result.output  # fmt: skip
    as_json = CliRunner().invoke(cli, ["agreement", "--experiment", str(experiment["id"]), "--json", "--db", str(db)])  # fmt: skip
    assert json.loads(as_json.output)["unfinished"][0]["status"] == "interrupted"

    resumed = CliRunner().invoke(cli, ["regrade", "--resume", str(experiment["id"]), "--json", "--db", str(db)])  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.output)["items"] == ROWS - KILLED_AT
    with Store(db) as store:
        done = store.experiments.get(experiment["id"])
        assert (done["status"], done["items"]) == ("done", ROWS)
        items = store.experiments.items(experiment["id"])
        assert len({(i["evaluation_id"], i["sample"]) for i in items}) == ROWS
    again = CliRunner().invoke(cli, ["regrade", "--resume", str(experiment["id"]), "--db", str(db)])  # fmt: skip
    assert again.exit_code == 2 and "is done" in again.output


def test_an_open_store_reads_a_dead_processes_experiment_as_interrupted(tmp_path):
    db, data = tmp_path / "studio.db", _dataset(tmp_path)
    with Store(db) as store:  # opened before the regrade dies, as a dashboard's store is
        store.rubrics.save_version("bottle", RUBRIC)
        batch = grade_path(store, str(data), rubric="bottle", grader_model="replay:satisfied_first_try")["batch_id"]  # fmt: skip
        killed = subprocess.run(
            [sys.executable, "-c", _KILL_REGRADE, str(db), batch],
            cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr[-2000:]
        (experiment,) = store.experiments.find()
        assert experiment["status"] == "interrupted"
        assert store.experiments.get(experiment["id"])["status"] == "interrupted"
