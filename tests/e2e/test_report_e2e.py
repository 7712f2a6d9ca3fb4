"""The HTML report in a real headless Chromium with the network cut: it draws its charts
from the file alone and asks for nothing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli

pytestmark = pytest.mark.e2e

SCENARIO = "needs_revision_then_satisfied"


def _cli(db, *args):
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _report(tmp_path) -> tuple[object, str]:
    db = tmp_path / "studio.db"
    inputs = tmp_path / "inputs.jsonl"
    from rubric_core.providers import load_scenario

    request = load_scenario(SCENARIO)["input"]
    inputs.write_text("\n".join(json.dumps({"input": request}) for _ in range(3)) + "\n")
    _cli(db, "batch", "--scenario", SCENARIO, "--input-file", str(inputs), "--json")
    from rubric_core.store import Store

    with Store(db) as store:
        [batch] = store.runs.batches()
    output = tmp_path / "report.html"
    _cli(db, "report", "--batch", batch["batch_id"], "--output", str(output))
    with Store(db) as store:
        run_id = store.runs.of_batch(batch["batch_id"])[0]["id"]
    one = tmp_path / "run.html"
    _cli(db, "report", "--run", str(run_id), "--output", str(one))
    return output, batch["batch_id"], one


def _wait_drawn(page, plots: str, count: int) -> None:
    """Until `count` of the plots matching `plots` are drawn. A drawn plot holds several
    `.main-svg` layers, so counting layers took 3 drawn plots for 6 on a loaded machine."""
    page.wait_for_function(
        """([selector, count]) => [...document.querySelectorAll(selector)]
            .filter(plot => plot.querySelector('.main-svg')).length >= count""",
        arg=[plots, count],
    )


def test_report_draws_its_charts_offline_and_requests_nothing(tmp_path, browser_page):
    page = browser_page
    output, batch_id, run_report = _report(tmp_path)
    attempted: list[str] = []
    problems: list[str] = []

    def block(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            attempted.append(route.request.url)
            route.abort()

    page.context.route("**/*", block)
    page.on("request", lambda r: None if r.url.startswith("file://") else attempted.append(r.url))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto(output.as_uri())
    page.wait_for_load_state("load")
    # The summary's charts (pass rates, iterations to satisfied) drew as SVG at load.
    page.wait_for_selector(".js-plotly-plot .main-svg")
    drawn = page.locator("body > .chart.js-plotly-plot")
    assert drawn.count() == 2
    assert page.locator("body > .chart .main-svg").count() >= 2
    # An input's drafts, verdicts, timeline and heatmap open behind a click.
    first = page.locator("table.inputs details").first
    first.locator("summary").click()
    _wait_drawn(page, "table.inputs details[open] .js-plotly-plot", 2)
    assert first.locator(".js-plotly-plot").count() == 2
    assert first.locator("h3").count() >= 2  # the scenario revises once: two passes
    assert "Batch " + batch_id in page.title() or batch_id in page.locator("h1").inner_text()
    # A run's report draws its timeline, heatmap and pass rates at load.
    page.goto(run_report.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg")
    _wait_drawn(page, "body > .chart.js-plotly-plot", 3)
    assert page.locator("body > .chart.js-plotly-plot").count() == 3
    assert page.locator(".js-plotly-plot .heatmaplayer").count() == 1
    assert attempted == []
    assert problems == []


def test_a_hostile_report_runs_no_script_and_fetches_nothing(tmp_path, browser_page):
    """Stored strings that would run script or fetch an image, opened in a real browser."""
    from rubric_core.report.html import write_report
    from tests.report.test_html import _hostile_batch

    store, batch_id = _hostile_batch(tmp_path)
    with store:
        output = write_report(store, tmp_path / "hostile.html", batch_id=batch_id)
    page = browser_page
    attempted: list[str] = []
    dialogs: list[str] = []
    page.context.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file://")
            else (attempted.append(route.request.url), route.abort())
        ),
    )
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(output.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg")
    for summary in page.locator("table.inputs details summary").all():
        summary.click()
    _wait_drawn(page, "details .js-plotly-plot", 6)
    assert page.locator("details .js-plotly-plot").count() == 6  # three inputs, two charts each
    assert page.locator("img").count() == 0
    assert "<script>alert(1)</script>" in page.locator("h1 + p + h2 + p").inner_text()
    assert dialogs == [] and attempted == []
