"""CLI input that cannot do what it says is refused up front."""

from __future__ import annotations

from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.store import Store


def _invoke(db, *args: str):
    return CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)


def _error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    return line


def test_base_url_with_only_replay_models_is_refused(tmp_path):
    db = tmp_path / "cli.db"
    url = "http://127.0.0.1:9/v1"
    line = _error_line(_invoke(db, "run", "--scenario", "haiku", "--base-url", url))
    assert f"--base-url {url} would not be used: both models are replay models" in line
    assert "replay:haiku" in line
    dataset = tmp_path / "inputs.csv"
    dataset.write_text("input\nWrite a haiku\n", encoding="utf-8")
    batch = _invoke(
        db, "batch", "--scenario", "haiku", "--input-file", str(dataset), "--base-url", url
    )
    assert "would not be used" in _error_line(batch)
    with Store(db) as store:
        assert store.runs.count() == 0


def test_export_help_says_jsonl_is_for_programs(tmp_path):
    result = CliRunner().invoke(cli, ["export", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "jsonl for programs" in text
    assert "not for spreadsheets" in text
    assert "run_status" in text
