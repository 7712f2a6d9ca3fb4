"""`python -m rubric_core gate`: thresholds on a replay batch, JUnit XML, Markdown summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.providers import load_scenario
from rubric_core.store import Store
from tests.support.env import clear_provider_env

SCENARIO = "needs_revision_then_satisfied"  # pass 1 misses the date, pass 2 is satisfied
DATE = "States the release date"


def _run(db, *args):
    return CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)


def _inputs(tmp_path, count=3):
    path = tmp_path / "inputs.jsonl"
    request = load_scenario(SCENARIO)["input"]
    path.write_text("".join(json.dumps({"input": request}) + "\n" for _ in range(count)))
    return path


def _batches(db) -> list[str]:
    with Store(db) as store:
        return [b["batch_id"] for b in store.runs.batches()]


def _cases(path):
    root = ET.parse(path).getroot()
    return {
        suite.get("name"): {
            case.get("name"): case.find("failure") for case in suite.iter("testcase")
        }
        for suite in root.iter("testsuite")
    }


def _outputs(path):
    """Each input case's `system-out` (its outcome and gaps), by suite then case name."""
    root = ET.parse(path).getroot()
    return {
        suite.get("name"): {
            case.get("name"): case.findtext("system-out") for case in suite.iter("testcase")
        }
        for suite in root.iter("testsuite")
    }


def test_gate_passes_a_replay_batch_that_meets_every_threshold(tmp_path):
    db, junit, summary = tmp_path / "g.db", tmp_path / "results.xml", tmp_path / "summary.md"
    inputs = _inputs(tmp_path)
    result = _run(
        db, "gate", "--scenario", SCENARIO, "--input-file", str(inputs),
        "--min-satisfied", "1", "--min-score", "0.9", "--min-criterion", f"{DATE}=0.95",
        "--junit", str(junit), "--summary", str(summary),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "gate passed" in result.output
    [batch_id] = _batches(db)
    suites = _cases(junit)
    inputs_suite = suites[f"Batch {batch_id} inputs"]
    thresholds = suites[f"Batch {batch_id} thresholds"]
    assert len(inputs_suite) == 3 and all(f is None for f in inputs_suite.values())
    assert list(thresholds) == ["min-satisfied", "min-score", f"min-criterion: {DATE}"]
    assert all(f is None for f in thresholds.values())
    assert summary.read_text().startswith("## ✅ Rubric gate passed")
    # A finished batch gates the same way, without running anything again.
    again = _run(db, "gate", "--batch", batch_id, "--min-satisfied", "1")
    assert again.exit_code == 0, again.output
    assert _batches(db) == [batch_id]


def test_gate_fails_a_criterion_minimum_and_a_drop_below_the_baseline(tmp_path):
    db, junit, summary = tmp_path / "g.db", tmp_path / "results.xml", tmp_path / "summary.md"
    inputs = _inputs(tmp_path)
    assert _run(db, "gate", "--scenario", SCENARIO, "--input-file", str(inputs)).exit_code == 0
    [baseline] = _batches(db)
    # One pass allowed: every run stops at pass 1, which misses the release date.
    result = _run(
        db, "gate", "--scenario", SCENARIO, "--input-file", str(inputs), "--max-iterations", "1",
        "--min-criterion", f"{DATE}=0.95", "--min-criterion", "Is one paragraph=0.95",
        "--against", baseline, "--max-drop", "0.02",
        "--junit", str(junit), "--summary", str(summary),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    [current] = [b for b in _batches(db) if b != baseline]
    assert f"FAIL min-criterion: {DATE}: {DATE} 0.0% < 95.0%" in result.output
    assert "PASS min-criterion: Is one paragraph" in result.output
    assert f"FAIL max-drop: criteria: regressed criteria against Batch {baseline}: {DATE}" in (
        result.output
    )
    suites = _cases(junit)
    thresholds = suites[f"Batch {current} thresholds"]
    failed = {name for name, failure in thresholds.items() if failure is not None}
    assert failed == {
        f"min-criterion: {DATE}",
        "max-drop: satisfied rate",
        "max-drop: mean score",
        "max-drop: criteria",
    }
    assert DATE in thresholds["max-drop: criteria"].get("message")
    assert "Is one paragraph" not in thresholds["max-drop: criteria"].get("message")
    # Every input tells its outcome and gap in its output; the thresholds carry the failures.
    assert all(f is None for f in suites[f"Batch {current} inputs"].values())
    cases = _outputs(junit)[f"Batch {current} inputs"]
    assert len(cases) == 3
    for text in cases.values():
        assert text.startswith("max_iterations_reached")
        assert f"{DATE}: Add the release date" in text
    text = summary.read_text()
    assert text.startswith("## ❌ Rubric gate failed")
    assert f"regressed criteria against Batch {baseline}: {DATE}: 100.0% -&gt; 0.0%" in text


def test_gate_grades_a_checks_only_dataset_offline(tmp_path):
    """The README's CI job: outputs graded by code checks alone, no grader model."""
    db = tmp_path / "g.db"
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("- Three lines {lines == 3}\n- Mentions rain {regex: rain}\n")
    assert _run(db, "rubrics", "add", "haiku-checks", str(rubric)).exit_code == 0
    outputs = tmp_path / "outputs.csv"
    outputs.write_text('input,output\nrain,"a\nb\nrain"\nsun,"a\nb\nsun"\n')
    result = _run(
        db, "gate", "--input-file", str(outputs), "--rubric", "haiku-checks",
        "--min-criterion", "Three lines=1", "--min-criterion", "Mentions rain=0.9",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "PASS min-criterion: Three lines" in result.output
    assert "FAIL min-criterion: Mentions rain: Mentions rain 50.0% < 90.0%" in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "give exactly one of --batch, --experiment or --input-file"),
        (("--batch", "nope"), "no batch 'nope'"),
        (("--batch", "x", "--min-criterion", "no rate"), "write NAME=RATE"),
        (("--batch", "x", "--max-drop", "0.1"), "--max-drop needs --against"),
    ],
)
def test_gate_bad_input_is_one_line(tmp_path, args, fragment):
    result = CliRunner().invoke(cli, ["gate", *args, "--db", str(tmp_path / "g.db")])
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output


def test_gate_names_an_unknown_criterion(tmp_path):
    db = tmp_path / "g.db"
    assert (
        _run(
            db, "gate", "--scenario", SCENARIO, "--input-file", str(_inputs(tmp_path, 1))
        ).exit_code
        == 0
    )
    [batch_id] = _batches(db)
    result = CliRunner().invoke(
        cli, ["gate", "--batch", batch_id, "--min-criterion", "Rhymes=0.5", "--db", str(db)]
    )
    assert result.exit_code == 2, result.output
    assert "--min-criterion 'Rhymes': no such criterion" in result.output
    assert DATE in result.output


def test_gate_without_a_grader_refuses_a_judged_criterion(tmp_path):
    db = tmp_path / "g.db"
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("- Is friendly\n- Three lines {lines == 3}\n")
    assert _run(db, "rubrics", "add", "mixed", str(rubric)).exit_code == 0
    outputs = tmp_path / "outputs.csv"
    outputs.write_text('input,output\nq,"a\nb\nc"\n')
    result = CliRunner().invoke(
        cli, ["gate", "--input-file", str(outputs), "--rubric", "mixed", "--db", str(db)]
    )
    assert result.exit_code == 2, result.output
    assert "need --grader-model: Is friendly" in result.output
    with Store(db) as store:
        assert store.runs.batches() == []


def test_the_readme_ci_job_runs_offline_as_written(tmp_path, monkeypatch):
    """The README's GitHub Actions job: its `python -m rubric_core` steps, run in order."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    job = re.search(r"```yaml\nrubric-gate:\n(.*?)```", readme, re.S)
    assert job is not None, "the README's CI job is gone"
    assert len(job.group(0).splitlines()) - 2 <= 11  # about ten lines
    steps = [
        shlex.split(line.split("- run:", 1)[1])[3:]
        for line in job.group(1).splitlines()
        if "- run: python -m rubric_core" in line
    ]
    assert [s[0] for s in steps] == ["rubrics", "gate"]
    monkeypatch.chdir(tmp_path)
    clear_provider_env(monkeypatch)
    # The rubric and outputs the README describes under the job.
    Path("rubric.txt").write_text(
        "- Three lines {lines == 3}\n- Names the version {regex: \\b2\\.0\\b}\n"
        "- At most 40 words {words <= 40}\n"
    )
    Path("outputs.csv").write_text(
        'input,output\nnote,"Version 2.0 is out.\nIt adds offline mode.\nUpdate today."\n'
    )
    for step in steps:
        result = CliRunner().invoke(cli, step, catch_exceptions=False)
        assert result.exit_code == 0, (step, result.output)
    suites = _cases(tmp_path / "results.xml")
    assert sum(len(cases) for cases in suites.values()) == 3  # one input, two thresholds
    assert Path("summary.md").read_text().startswith("## ✅ Rubric gate passed")


def _labelled_batch(db, tmp_path) -> str:
    """Four outputs graded by a code check, with human labels: kappa 0.5 (judge as predictor)."""
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("- Three lines {lines == 3}\n")
    assert _run(db, "rubrics", "add", "lines", str(rubric)).exit_code == 0
    three, one = "a\nb\nc", "a"
    rows = [(three, True), (three, False), (one, False), (one, False)]
    path = tmp_path / "outputs.jsonl"
    path.write_text(
        "".join(
            json.dumps({"input": f"q{i}", "output": o, "labels": {"Three lines": h}}) + "\n"
            for i, (o, h) in enumerate(rows)
        )
    )
    result = _run(db, "gate", "--input-file", str(path), "--rubric", "lines")
    assert result.exit_code == 0, result.output
    [batch_id] = _batches(db)
    return batch_id


def test_gate_min_kappa_against_the_human_labels(tmp_path):
    db = tmp_path / "g.db"
    batch_id = _labelled_batch(db, tmp_path)
    low = _run(db, "gate", "--batch", batch_id, "--min-kappa", "0.4")
    assert low.exit_code == 0, low.output
    assert "PASS min-kappa: Cohen's kappa 0.500 >= 0.400" in low.output
    high = _run(db, "gate", "--batch", batch_id, "--min-kappa", "0.6")
    assert high.exit_code == 1, high.output
    assert "FAIL min-kappa: Cohen's kappa 0.500 < 0.600" in high.output


def test_gate_on_an_experiment_against_another(tmp_path):
    db = tmp_path / "g.db"
    assert (
        _run(
            db, "gate", "--scenario", SCENARIO, "--input-file", str(_inputs(tmp_path, 2))
        ).exit_code
        == 0
    )
    [batch_id] = _batches(db)
    for _ in range(2):
        regrade = _run(db, "regrade", "--batch", batch_id, "--grader", f"replay:{SCENARIO}")
        assert regrade.exit_code == 0, regrade.output
    with Store(db) as store:
        newer, older = (e["id"] for e in store.experiments.find())
    result = _run(
        db, "gate", "--experiment", str(newer), "--against", str(older), "--max-drop", "0",
        "--min-criterion", "Is one paragraph=1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"Experiment {newer}: gate passed." in result.output
    assert f"dropped more than 0 below Experiment {older}" in result.output


def test_junit_holds_stored_text_an_xml_parser_would_refuse(tmp_path):
    from tests.support.jobs import grade_of

    db, junit = tmp_path / "g.db", tmp_path / "results.xml"
    with Store(db) as store:
        store.rubrics.save_version("lines", "- Three lines {lines == 3}")
        [version] = store.rubrics.versions("lines")
        summary = grade_of(
            store,
            [{"input": "nul \x00 and escape \x1b[31m", "output": "one", "labels": {}}],
            rubric_version_id=version["id"],
            grader_model="checks-only",
            grader_llm_factory=lambda: None,
        )
    result = _run(db, "gate", "--batch", summary["batch_id"], "--junit", str(junit))
    assert result.exit_code == 0, result.output
    [(name, text)] = _outputs(junit)[f"Batch {summary['batch_id']} inputs"].items()
    assert name == "input 1: nul \ufffd and escape \ufffd[31m"
    assert "Three lines: 1 line; needs exactly 3" in text


def test_an_input_whose_grader_broke_fails_with_the_error(tmp_path):
    db, junit = tmp_path / "g.db", tmp_path / "results.xml"
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": load_scenario("grader_error")["input"]}) + "\n")
    result = _run(
        db, "gate", "--scenario", "grader_error", "--input-file", str(inputs),
        "--min-satisfied", "0.5", "--junit", str(junit),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    [batch_id] = _batches(db)
    [text] = _outputs(junit)[f"Batch {batch_id} inputs"].values()
    assert text.startswith("grader_error")
    assert "explanation: " in text and "scripted grader failure" in text
