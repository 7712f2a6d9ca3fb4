"""`python -m rubric_core` through click's CliRunner, against a SQLite file in tmp_path."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.schema import STATUS_DESCRIPTIONS
from rubric_core.store import Store


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "cli.db"


@pytest.fixture
def invoke(db):
    def run(*args: str, input: str | bytes | None = None):
        argv = list(args) if args[0] == "scenarios" else [*args, "--db", str(db)]
        return CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)

    return run


def _assert_bad_input(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(error_lines) == 1, result.output
    for fragment in fragments:
        assert fragment in error_lines[0]


def _all_commands() -> list[list[str]]:
    paths: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(cli, [])
    return paths


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "root")
def test_every_command_has_help_with_an_example(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert "python -m rubric_core" in result.output


def test_options_are_kebab_case():
    for path in _all_commands():
        command = cli
        for name in path:
            command = command.commands[name]
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert "_" not in opt, f"{' '.join(path)} {opt}"


# --------------------------------------------------------------------------- rubrics


def test_rubrics_add_list_show(invoke, tmp_path):
    path = tmp_path / "rubric.txt"
    path.write_text("- has a title\n- cites a source\n", encoding="utf-8")
    added = invoke("rubrics", "add", "article", str(path), "--tag", "writing", "--tag", "blog")
    assert added.exit_code == 0, added.output
    assert "version 1" in added.output and "2 criteria" in added.output

    again = invoke("rubrics", "add", "article", "-", "--note", "stricter",
                   input="- has a title\n- cites a source\n- under 200 words\n")  # fmt: skip
    assert again.exit_code == 0 and "version 2" in again.output

    listed = invoke("rubrics", "list")
    assert listed.exit_code == 0
    assert "article" in listed.output and "v2" in listed.output and "blog, writing" in listed.output

    shown = invoke("rubrics", "show", "article", "--version", "1")
    assert shown.exit_code == 0
    assert "1. has a title" in shown.output and "under 200 words" not in shown.output
    latest = invoke("rubrics", "show", "article")
    assert "3. under 200 words" in latest.output and "Note: stricter" in latest.output


def test_rubrics_add_rejects_an_empty_rubric(invoke):
    _assert_bad_input(invoke("rubrics", "add", "empty", "-", input="\n\n# heading only\n"),
                      "rubric 'empty'", "empty")  # fmt: skip


def test_rubrics_add_rejects_a_binary_file(invoke, tmp_path):
    path = tmp_path / "rubric.bin"
    path.write_bytes(b"\x00\x01\x02binary")
    _assert_bad_input(invoke("rubrics", "add", "x", str(path)), "binary")


def test_rubrics_show_unknown_version(invoke):
    invoke("rubrics", "add", "a", "-", input="- one\n")
    _assert_bad_input(invoke("rubrics", "show", "a", "--version", "7"), "no version 7", "1")
    _assert_bad_input(invoke("rubrics", "show", "zzz"), "no rubric named 'zzz'")


def test_rubrics_list_when_empty(invoke):
    result = invoke("rubrics", "list")
    assert result.exit_code == 0 and "No rubrics yet" in result.output


# --------------------------------------------------------------------------- run


def test_run_scenario_prints_each_pass_and_exits_zero(invoke, db):
    result = invoke("run", "--scenario", "needs_revision_then_satisfied")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Pass 1: needs_revision" in out
    assert "✗ States the release date — Add the release date, 3 March, from the note." in out
    assert "✓ Names the product that was released" in out
    assert "Pass 2: satisfied" in out
    assert f"Status: satisfied — {STATUS_DESCRIPTIONS['satisfied']}" in out
    assert out.index("Pass 1") < out.index("Pass 2") < out.index("Status:")
    with Store(db) as store:
        (run,) = store.runs.find()
        assert run["status"] == "satisfied" and run["iterations"] == 2


@pytest.mark.parametrize(
    ("scenario", "status"),
    [("max_iterations", "max_iterations_reached"), ("rubric_failed", "failed"),
     ("grader_error", "grader_error")],
)  # fmt: skip
def test_run_other_terminal_statuses_exit_one(invoke, scenario, status):
    result = invoke("run", "--scenario", scenario)
    assert result.exit_code == 1, result.output
    assert f"Status: {status} — {STATUS_DESCRIPTIONS[status]}" in result.output


def test_run_with_a_stored_rubric_and_input_file(invoke, tmp_path):
    invoke("rubrics", "add", "release", "-", input=(
        "Names the product that was released\nStates the release date\nIs one paragraph\n"))  # fmt: skip
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Summarise the Widget 2.0 release note.", encoding="utf-8")
    result = invoke(
        "run", "--rubric", "release", "--input-file", str(prompt),
        "--agent-model", "replay:needs_revision_then_satisfied",
        "--grader-model", "replay:needs_revision_then_satisfied", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Pass 1" not in result.output
    assert result.output.startswith("Status: satisfied")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--rubric", "nope", "--input", "x"], ["no rubric named 'nope'"]),
        (["--scenario", "haiku", "--grader-tool", "no_such_tool"], ["grader_tools", "no_such_tool"]),
        (["--scenario", "haiku", "--agent-model", "nosuchprovider:m1"], ["agent_model", "nosuchprovider"]),
        (["--scenario", "haiku", "--max-iterations", "0"], ["max_iterations", "between 1 and 20"]),
        (["--scenario", "haiku", "--input", "  "], ["input", "empty"]),
        (["--scenario", "no_such_scenario"], ["no_such_scenario", "known scenarios"]),
        (["--scenario", "haiku", "--input", "a", "--input-file", "f.txt"], ["not both"]),
        (["--input", "x"], ["--rubric is required"]),
    ],
)  # fmt: skip
def test_run_bad_input_is_one_line_and_exit_two(invoke, args, fragments):
    _assert_bad_input(invoke("run", *args), *fragments)


def test_run_unknown_provider_without_network_or_key(invoke, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = invoke("run", "--scenario", "haiku", "--grader-model", "openai:gpt-4o-mini")
    _assert_bad_input(result, "grader_model", "OPENAI_API_KEY")


def test_run_rejects_a_bad_agent_kind_via_click(invoke):
    result = invoke("run", "--scenario", "haiku", "--agent-kind", "huge")
    assert result.exit_code == 2
    assert "'huge' is not one of 'basic', 'deep'" in result.output


# --------------------------------------------------------------------------- batch


def test_batch_prints_the_summary(invoke, tmp_path, db):
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(
        "\n".join(json.dumps({"input": f"Summarise release note {n}"}) for n in range(3)),
        encoding="utf-8",
    )
    result = invoke("batch", "--scenario", "needs_revision_then_satisfied",
                    "--input-file", str(dataset), "--concurrency", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert ": 3 runs" in out
    assert "Satisfied rate: 100.0%" in out
    assert "Mean iterations to satisfied: 2.00" in out
    assert "Per-criterion pass rate over each run's final pass:" in out
    assert "100.0%  (3/3)  States the release date" in out
    assert "Grader errors: 0" in out
    with Store(db) as store:
        assert store.runs.count(status="satisfied") == 3


def test_batch_json_summary(invoke, tmp_path):
    dataset = tmp_path / "prompts.csv"
    dataset.write_text("input\nfirst\nsecond\n", encoding="utf-8")
    result = invoke("batch", "--scenario", "max_iterations", "--input-file", str(dataset),
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["total"] == 2
    assert summary["by_status"] == {"max_iterations_reached": 2}
    assert summary["satisfied_rate"] == 0.0
    assert summary["mean_iterations_to_satisfied"] is None


@pytest.mark.parametrize(
    ("name", "content", "fragments"),
    [
        ("d.csv", "input\ncafé\n".encode("latin-1"), ["not UTF-8", "offset"]),
        ("d.csv", b"\x00\x01binary\x00", ["binary"]),
        ("d.csv", b"prompt,id\nx,1\n", ["no 'input' column"]),
        ("d.jsonl", b'{"input": "a"}\nnot json\n', ["line 2", "not valid JSON"]),
        ("d.csv", b'input\nok\n""\n', ["row 3", "empty input"]),
    ],
)
def test_batch_rejects_malformed_datasets(invoke, tmp_path, name, content, fragments):
    path = tmp_path / name
    path.write_bytes(content)
    result = invoke("batch", "--scenario", "haiku", "--input-file", str(path))
    _assert_bad_input(result, str(path), *fragments)


def test_batch_rejects_bad_concurrency(invoke, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("input\nx\n", encoding="utf-8")
    result = invoke("batch", "--scenario", "haiku", "--input-file", str(path), "--concurrency", "0")
    _assert_bad_input(result, "--concurrency", "between 1 and 16")


# --------------------------------------------------------------------------- export


def test_export_criteria_csv_and_runs_jsonl(invoke, tmp_path):
    assert invoke("run", "--scenario", "needs_revision_then_satisfied", "--quiet").exit_code == 0
    assert invoke("run", "--scenario", "rubric_failed", "--quiet").exit_code == 1

    out = tmp_path / "criteria.csv"
    result = invoke("export", "--format", "csv", "--output", str(out),
                    "--rubric", "needs_revision_then_satisfied")  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == 6  # 2 passes x 3 criteria
    assert {row["criterion"] for row in rows} == {
        "Names the product that was released", "States the release date", "Is one paragraph",
    }  # fmt: skip

    runs = invoke("export", "--dataset", "runs", "--format", "jsonl", "--status", "failed")
    assert runs.exit_code == 0, runs.output
    lines = [json.loads(line) for line in runs.stdout.splitlines() if line.strip()]
    assert [line["status"] for line in lines] == ["failed"]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--status", "great"], ["--status 'great'"]),
        (["--since", "yesterday"], ["--since", "not a date"]),
        (["--version", "1"], ["--version needs --rubric"]),
        (["--rubric", "ghost"], ["no rubric named 'ghost'"]),
    ],
)
def test_export_bad_filters(invoke, args, fragments):
    _assert_bad_input(invoke("export", *args), *fragments)


def test_export_rejects_unknown_format_via_click(invoke):
    result = invoke("export", "--format", "xlsx")
    assert result.exit_code == 2 and "'xlsx' is not one of 'csv', 'jsonl'" in result.output


# --------------------------------------------------------------------------- misc


def test_scenarios_lists_every_bundled_scenario(invoke):
    from rubric_core.providers import list_scenarios

    result = invoke("scenarios")
    assert result.exit_code == 0
    for scenario in list_scenarios():
        assert scenario["name"] in result.output
        assert scenario["expected_status"] in result.output


def test_python_dash_m_entry_point(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rubric_core", "run", "--scenario", "satisfied_first_try",
         "--db", str(tmp_path / "m.db")],
        capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Status: satisfied" in result.stdout


def test_resume_command(invoke, db):
    import threading

    from rubric_core.providers import load_scenario
    from rubric_core.runs import RunSpec, start_run

    scenario = load_scenario("needs_revision_then_satisfied")
    with Store(db) as store:
        version_id = store.rubrics.save_version("release", scenario["rubric"])["id"]
        stop = threading.Event()
        handle = start_run(
            store,
            RunSpec(
                version_id,
                scenario["input"],
                "replay:needs_revision_then_satisfied",
                "replay:needs_revision_then_satisfied",
            ),
            stop_event=stop,
            on_evaluation=lambda e: stop.set(),
        )
        assert handle.wait(60)
        assert store.runs.get(handle.run_id)["status"] == "interrupted"

    result = invoke("resume", str(handle.run_id))
    assert result.exit_code == 0, result.output
    assert "after 1 graded pass" in result.output
    assert "Pass 2: satisfied" in result.output
    assert "Status: satisfied" in result.output

    _assert_bad_input(invoke("resume", str(handle.run_id)), "only interrupted runs resume")
    _assert_bad_input(invoke("resume", "999"), "no run with id 999")
