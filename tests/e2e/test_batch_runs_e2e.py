"""Batch, Runs and Export in headless Chromium: a batch read input by input, runs opened by
clicking their row, a running run's detail redrawn live, and the export's run status."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rubric_core.export import EXPORT_COLUMNS
from rubric_core.providers import load_scenario
from rubric_core.rubric import parse_rubric
from rubric_core.runs import RunSpec, start_run
from rubric_core.store import Store
from tests.e2e.conftest import REPO
from tests.support.browser import assert_no_exception, choose, go_to, wait_idle

pytestmark = pytest.mark.e2e

SCENARIO = "needs_revision_then_satisfied"
INPUTS = ("First release note: v1.0", "Second release note: v1.1", "Third release note: v2.0")
RUN_DONE_S = 90
# Streamlit's dataframe is drawn on a canvas: a header row of 36 px, then 35 px per row, the
# row's selection checkbox in its first 30 px.
HEADER_PX, ROW_PX, CHECKBOX_X = 36, 35, 14
NO_SAVE_PICKER = "window.showSaveFilePicker = undefined;"
"""The dataframe's CSV download then goes through a link, which Playwright sees as a download."""


def main(page: Any) -> Any:
    return page.locator('[data-testid="stMain"]')


def click_row(page: Any, frame: Any, row: int) -> None:
    """Tick the selection checkbox of the table's `row` (0 = first data row)."""
    box = frame.bounding_box()
    page.mouse.click(box["x"] + CHECKBOX_X, box["y"] + HEADER_PX + ROW_PX * row + ROW_PX / 2)


def table_csv(page: Any, frame: Any) -> list[dict[str, str]]:
    """The rows of a dataframe as the person sees them, through its own "Download as CSV"."""
    frame.hover()
    with page.expect_download() as download_info:
        # The toolbar floats over the element above the table: click it without the pointer.
        frame.get_by_role("button", name="Download as CSV").dispatch_event("click")
    text = Path(download_info.value.path()).read_text(encoding="utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def heading(page: Any, pattern: str) -> Any:
    return page.get_by_role("heading", name=re.compile(pattern))


def test_batch_inputs_open_their_runs_and_batch_filters_runs_and_export(
    dashboard: Any, browser_page: Any, screenshot: Any
) -> None:
    page = browser_page
    page.add_init_script(NO_SAVE_PICKER)
    criteria = parse_rubric(load_scenario(SCENARIO)["rubric"])

    # The Batch page's offline demo loads the scenario: rubric, tools and replay models.
    page.goto(f"{dashboard.url}/batch")
    page.get_by_role("heading", name="Batch", exact=True).wait_for()
    wait_idle(page)
    choose(page, "Scenario", f"{SCENARIO} — One revision, then satisfied")
    page.get_by_role("button", name="Use scenario").click()
    page.get_by_text(f"Loaded scenario '{SCENARIO}'").wait_for()
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        files=[
            {
                "name": "notes.csv",
                "mimeType": "text/csv",
                "buffer": ("input\n" + "\n".join(f'"{text}"' for text in INPUTS)).encode(),
            }
        ]
    )
    page.get_by_text("3 input(s) read from notes.csv").wait_for()
    wait_idle(page)
    page.get_by_role("button", name="Launch batch").click()

    # Once it is done: the summary, then one row per input with each criterion's final verdict.
    page.get_by_text("Per-criterion pass rate over each run's final pass").first.wait_for(
        timeout=RUN_DONE_S * 1000
    )
    wait_idle(page)
    assert_no_exception(page)
    screenshot("batch-per-input")
    inputs_view = main(page).locator('[data-testid="stDataFrame"]').first
    rows = table_csv(page, inputs_view)
    assert [row["input #"] for row in rows] == ["1", "2", "3"]
    assert [row["input"] for row in rows] == list(INPUTS)
    assert {row["passes"] for row in rows} == {"2"}
    assert all("satisfied" in row["status"] for row in rows)
    verdict_columns = [name for name in rows[0] if re.match(r"\d+\. ", name)]
    assert len(verdict_columns) == len(criteria)
    assert {row[name] for row in rows for name in verdict_columns} == {"✓"}
    run_of_input = {int(row["input #"]): int(row["run"]) for row in rows}

    # A row opens its run on the Runs page (and the address names it).
    click_row(page, inputs_view, 1)
    heading(page, rf"^Run #{run_of_input[2]} ").wait_for()
    assert page.url.endswith(f"/runs?run={run_of_input[2]}")
    wait_idle(page)

    # On Runs, a click on another row opens that one instead.
    runs_table = main(page).locator('[data-testid="stDataFrame"]').first
    listed = table_csv(page, runs_table)
    click_row(page, runs_table, 2)
    heading(page, rf"^Run #{listed[2]['run']} ").wait_for()
    wait_idle(page)
    assert_no_exception(page)

    # Batch is a filter on Runs: another run outside the batch is left out.
    other = subprocess.run(
        [sys.executable, "-m", "rubric_core", "run", "--scenario", "haiku", "--quiet",
         "--db", str(dashboard.db_path)],
        cwd=REPO, check=False, timeout=120, capture_output=True,
    )  # fmt: skip
    assert other.returncode == 0, other.stderr
    page.goto(f"{dashboard.url}/runs")
    page.get_by_text("Runs 1–4 of 4").wait_for()
    wait_idle(page)
    with Store(dashboard.db_path) as store:
        (batch_id,) = {store.runs.get(run_id)["batch_id"] for run_id in run_of_input.values()}
    choose(page, "Batch", f"{batch_id} · 3 runs")
    page.get_by_text("Runs 1–3 of 3").wait_for()
    shown = table_csv(page, main(page).locator('[data-testid="stDataFrame"]').first)
    assert {int(row["run"]) for row in shown} == set(run_of_input.values())
    screenshot("runs-batch-filter")

    # A run that is not in the database is said to be missing, not replaced by the newest.
    page.goto(f"{dashboard.url}/runs?run=99999")
    page.get_by_text("Run #99999 does not exist").wait_for()
    assert heading(page, r"^Run #\d+ ").count() == 0
    assert_no_exception(page)

    # Batch is a filter on Export too.
    go_to(page, "Export")
    choose(page, "Batch", f"{batch_id} · 3 runs")
    page.get_by_text("3 run(s) match these filters").wait_for()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download CSV").click()
    exported = list(csv.DictReader(io.StringIO(Path(download_info.value.path()).read_text())))
    assert {int(row["run_id"]) for row in exported} == set(run_of_input.values())
    assert_no_exception(page)


def test_running_run_detail_on_runs_redraws_as_passes_arrive(
    dashboard: Any, browser_page: Any, screenshot: Any
) -> None:
    page = browser_page
    scenario = load_scenario(SCENARIO)
    store = Store(dashboard.db_path)
    try:
        version = store.rubrics.save_version("release-note", scenario["rubric"])
        page.goto(f"{dashboard.url}/runs")  # the dashboard warmed up before the run starts
        page.get_by_role("heading", name="Runs", exact=True).wait_for()
        wait_idle(page)
        # Replay models (scripted turns, no language model) that take 4 s per call: the
        # first pass lands after about 8 s, the second after about 16 s.
        slow = f"replay:{SCENARIO}?latency_s=4"
        handle = start_run(
            store,
            RunSpec(
                rubric_version_id=int(version["id"]),
                input=scenario["input"],
                agent_model=slow,
                grader_model=slow,
                max_iterations=3,
            ),
        )
        page.goto(f"{dashboard.url}/runs?run={handle.run_id}")
        heading(page, rf"^Run #{handle.run_id} ").wait_for()
        page.get_by_text("Live: redrawn from the store").wait_for(timeout=30_000)
        page.evaluate("window.__notReloaded = true")
        # Running, at most one pass in: checked in one snapshot, as the run goes on meanwhile.
        page.wait_for_function(
            """() => {
                const main = document.querySelector('[data-testid="stMain"]');
                const fresh = sel => [...main.querySelectorAll(sel)]
                    .filter(e => !e.closest('[data-stale="true"]'));
                return fresh('[data-testid="stMetricValue"]')
                        .some(e => ['0 / 3', '1 / 3'].includes(e.innerText.trim()))
                    && fresh('[data-testid="stAlert"]').some(e => e.innerText.includes('running'));
            }""",
            timeout=30_000,
        )
        screenshot("runs-live")
        # Without a reload or a click, the second pass and the final status appear.
        main(page).get_by_text("Every criterion of the rubric passed.").wait_for(
            timeout=RUN_DONE_S * 1000
        )
        wait_idle(page)
        metric = main(page).locator('[data-testid="stMetric"]').filter(has_text="Grading passes")
        assert metric.locator('[data-testid="stMetricValue"]').inner_text().strip() == "2 / 3"
        assert page.evaluate("window.__notReloaded === true")
        assert main(page).get_by_text("Live: redrawn from the store").count() == 0
        assert_no_exception(page)
        assert handle.wait(RUN_DONE_S)
    finally:
        store.close()


@pytest.mark.skipif(
    "run_status" not in EXPORT_COLUMNS["criteria"],
    reason="the export's run_status column is not in this tree yet",
)
def test_export_of_satisfied_runs_holds_their_final_status_and_grader_error_passes(
    dashboard: Any, browser_page: Any
) -> None:
    page = browser_page
    for scenario in (SCENARIO, "grader_error"):
        subprocess.run(
            [sys.executable, "-m", "rubric_core", "run", "--scenario", scenario, "--quiet",
             "--db", str(dashboard.db_path)],
            cwd=REPO, check=False, timeout=120,
        )  # fmt: skip
    page.goto(f"{dashboard.url}/export")
    page.get_by_role("heading", name="Export", exact=True).wait_for()
    wait_idle(page)
    assert "run_status" in page.get_by_text("Columns:").inner_text()

    def download() -> list[dict[str, str]]:
        with page.expect_download() as download_info:
            page.get_by_role("button", name="Download CSV").click()
        return list(csv.DictReader(io.StringIO(Path(download_info.value.path()).read_text())))

    choose(page, "Status", "satisfied")
    rows = download()
    # The filter is on the run: every row is of a satisfied run, whatever its pass said.
    assert {row["run_status"] for row in rows} == {"satisfied"}
    assert "needs_revision" in {row["status"] for row in rows}
    choose(page, "Status", "grader error")
    rows = download()
    assert rows, "the grader-error run's passes are exported as rows"
    assert {row["run_status"] for row in rows} == {"grader_error"}
    assert "grader_error" in {row["result"] for row in rows}
    assert_no_exception(page)
