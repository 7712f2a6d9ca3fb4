"""The "Download report" button on the Batch, Runs, Agreement and Experiments pages (AppTest)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from rubric_core.cli import cli
from rubric_core.providers import load_scenario
from rubric_core.store import Store
from tests.support.pages import APP, SCENARIO, app_env


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A replay batch of two inputs and two experiments re-grading it, in RUBRIC_STUDIO_DB."""
    db = app_env(tmp_path, monkeypatch)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": load_scenario(SCENARIO)["input"]}) + "\n")
    runner = CliRunner()
    ran = runner.invoke(cli, ["batch", "--scenario", SCENARIO, "--input-file", str(inputs)])
    assert ran.exit_code == 0, ran.output
    with Store(db) as store:
        [batch] = store.runs.batches()
        [run] = store.runs.of_batch(batch["batch_id"])
    for _ in range(2):
        regraded = runner.invoke(
            cli, ["regrade", "--batch", batch["batch_id"], "--grader", f"replay:{SCENARIO}"]
        )
        assert regraded.exit_code == 0, regraded.output
    return {"batch_id": batch["batch_id"], "run_id": run["id"]}


def _open(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _labels(at: AppTest) -> list[str]:
    return [b.label for b in at.get("download_button")]


def test_batch_runs_and_experiments_pages_offer_the_report(stored):
    assert "Download report" in _labels(_open("batch", batch=stored["batch_id"]))
    assert "Download report" in _labels(_open("runs", run=str(stored["run_id"])))
    assert "Download report" in _labels(_open("experiments"))


def test_agreement_page_offers_the_report_of_one_batch_or_experiment(stored):
    at = _open("agreement")
    at.radio(key="agree_mode").set_value("between").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Download report" in _labels(at)


def test_the_button_builds_the_library_report_on_click(stored, monkeypatch):
    import app_widgets.report as widget

    buttons: list[dict] = []
    monkeypatch.setattr(
        widget.st, "download_button", lambda label, data, **kw: buttons.append(
            {"label": label, "data": data, **kw})
    )  # fmt: skip
    with Store(Path(os.environ["RUBRIC_STUDIO_DB"])) as store:
        widget.report_download(store, key="k", batch_id=stored["batch_id"])
        widget.report_download(store, key="k2", experiment_id=2, against=1)
        widget.report_download(store, key="k3", batch_id="nope")
        texts = [button["data"]() for button in buttons]  # what a click downloads
    names = [button["file_name"] for button in buttons]
    assert names == [
        f"report-batch-{stored['batch_id']}.html",
        "report-experiment-2-vs-1.html",
        "report-batch-nope.html",
    ]
    assert f"<h1>Batch {stored['batch_id']}</h1>" in texts[0]
    assert "Compared with experiment 1" in texts[1]
    assert texts[2].endswith("<p>No report: no batch &#x27;nope&#x27; in this store</p>")
