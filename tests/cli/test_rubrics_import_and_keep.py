"""`rubrics import` (HealthBench JSON) and `--keep` through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.store import Store

HEALTHBENCH = json.dumps(
    [
        {"criterion": "Advises seeing a doctor within a day", "points": 5, "tags": ["x"]},
        {"criterion": "Recommends a prescription dose", "points": -8},
    ]
)


def _run(db, *args, input=None):
    return CliRunner().invoke(cli, [*args, "--db", str(db)], input=input, catch_exceptions=False)


def test_rubrics_import_turns_points_into_weights(tmp_path):
    db = tmp_path / "cli.db"
    result = _run(db, "rubrics", "import", "triage", "-", input=HEALTHBENCH)
    assert result.exit_code == 0, result.output
    assert "2 criteria imported" in result.output
    with Store(db) as store:
        text = store.rubrics.versions("triage")[-1]["text"]
    assert text.splitlines() == [
        "- [5] Advises seeing a doctor within a day",
        "- [-8] Recommends a prescription dose",
    ]


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("not json", "not valid JSON"),
        ('[{"criterion": "x", "points": 0}]', "index 0"),
    ],
)
def test_rubrics_import_names_what_is_wrong(tmp_path, payload, fragment):
    result = _run(tmp_path / "cli.db", "rubrics", "import", "bad", "-", input=payload)
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output


def test_run_with_keep_best_hands_back_the_best_draft(tmp_path):
    db = tmp_path / "cli.db"
    result = _run(db, "run", "--scenario", "release_note_regression", "--keep", "best")
    assert result.exit_code != 2, result.output
    assert "Pass 2: needs_revision (score 0.50)" in result.output
    assert "[regressed: passed in pass 1]" in result.output
    assert "Score: 0.67 (kept the best draft, pass 1)" in result.output
    assert "Version 2.0 ships on 3 June 2025." in result.output.split("Final answer:")[1]
    with Store(db) as store:
        [run] = store.runs.find()
    assert run["keep"] == "best" and run["best_iteration"] == 0


def test_keep_is_a_choice(tmp_path):
    result = _run(tmp_path / "cli.db", "run", "--scenario", "haiku", "--keep", "first")
    assert result.exit_code == 2
    assert "'first' is not one of 'last', 'best'" in result.output
