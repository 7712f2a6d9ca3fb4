"""Issue 21's journey in a real headless Chromium: a rubric with two code checks and one
judged criterion, graded as the person grader (the checks already decided), then a dataset
graded checks-only after the judged line is deleted, then exported: the page, the CLI and
the CSV agree on verdicts, `checked_by` and scores."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from typing import Any

import pytest

from rubric_core.store import Store
from tests.e2e.conftest import REPO
from tests.support.browser import assert_no_exception, go_to, type_into, wait_idle, widget

pytestmark = pytest.mark.e2e

CHECKED = "- Short {words <= 8}\n- Calm {no-regex: !}"
RUBRIC_V1 = CHECKED + "\n- Friendly tone"
OUTPUTS = {"q1": "Release 2 is out.", "q2": "Release 2 is out, try it now!"}


def _save_rubric(page: Any, text: str, version: int) -> None:
    go_to(page, "Rubrics")
    if version == 1:
        type_into(page.get_by_label("Name"), "notes")
    type_into(page.get_by_label("Checklist (one criterion per line)"), text)
    wait_idle(page)
    page.get_by_role("button", name="Save as new version").click()
    page.get_by_text(f"Saved notes v{version}").wait_for()
    wait_idle(page)


def _cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rubric_core", *args, "--db", db],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_person_grader_then_checks_only_batch_then_export(
    dashboard: Any, browser_page: Any, screenshot: Any, tmp_path: Any
) -> None:
    page = browser_page
    page.goto(dashboard.url)
    page.get_by_role("heading", name="Rubrics", exact=True).wait_for()
    wait_idle(page)
    _save_rubric(page, RUBRIC_V1, 1)

    # The person grader: the checks decide theirs, the person the judged one only.
    go_to(page, "Run")
    widget(page, "stCheckbox", "Grade an output you already have").locator("label").click()
    wait_idle(page)
    type_into(page.get_by_label("Input (the request)"), "Write a release note")
    type_into(page.get_by_label("Output (the answer to grade)"), "Great release!")
    wait_idle(page)
    page.get_by_text("⚙ decided by code: fail ✗").wait_for()
    page.get_by_text("⚙ decided by code: pass ✓").wait_for()
    radios = page.locator('[data-testid="stRadio"]').filter(has_text="Your verdict")
    assert radios.count() == 1  # only "Friendly tone" is asked
    radios.first.get_by_text("pass", exact=True).click()
    wait_idle(page)
    type_into(page.get_by_role("textbox", name="Your name (reviewer)"), "ana")
    wait_idle(page)
    page.get_by_role("button", name="Record my verdict").click()
    page.get_by_text("Graded run #").first.wait_for()
    wait_idle(page)
    assert_no_exception(page)
    screenshot("21-01-person-grader")

    # Delete the judged line: a checks-only v2, graded with no grader.
    _save_rubric(page, CHECKED, 2)
    go_to(page, "Batch")
    widget(page, "stCheckbox", "Grade existing outputs").locator("label").click()
    wait_idle(page)
    data = "input,output\n" + "".join(f'{q},"{o}"\n' for q, o in OUTPUTS.items())
    files = [{"name": "outputs.csv", "mimeType": "text/csv", "buffer": data.encode()}]
    read = page.get_by_text("2 row(s) read from outputs.csv")
    for _ in range(3):  # the ungraded form's uploader may still be on the page as it redraws
        wait_idle(page)
        uploaders = page.locator('[data-testid="stFileUploader"] input[type="file"]')
        if uploaders.count() != 1:
            continue
        uploaders.set_input_files(files=files)
        try:
            read.wait_for(timeout=10_000)
            break
        except Exception:  # the upload landed on the old uploader: again
            continue
    page.get_by_text("2 row(s) read from outputs.csv").wait_for()
    wait_idle(page)
    page.get_by_text("No grader: checks only").first.wait_for()
    page.get_by_role("button", name="Grade outputs").click()
    page.get_by_role("link", name="Label these passes on Review").wait_for(timeout=60_000)
    wait_idle(page)
    assert_no_exception(page)
    screenshot("21-02-checks-only-batch")

    # The store, the CLI's export and the page agree.
    with Store(dashboard.db_path) as store:
        runs = sorted(store.runs.find(limit=10), key=lambda r: r["id"])
        passes = {r["id"]: store.passes.of_run(r["id"])[0] for r in runs}
    person, *graded = runs
    assert person["grader_model"] == "human:ana" and person["status"] == "needs_revision"
    assert [r["grader_model"] for r in graded] == ["checks", "checks"]
    assert {r["input"]: r["status"] for r in graded} == {"q1": "satisfied", "q2": "needs_revision"}
    out = tmp_path / "criteria.csv"
    exported = _cli("export", "--output", str(out), db=str(dashboard.db_path))
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    for run in runs:
        mine = [r for r in rows if r["run_id"] == str(run["id"])]
        stored = passes[run["id"]]["criteria"]
        assert [r["criterion"] for r in mine] == [c["name"] for c in stored]
        assert [r["passed"] in ("True", "true", "1") for r in mine] == [c["passed"] for c in stored]
        assert [r["checked_by"] for r in mine] == [c.get("checked_by") or "" for c in stored]
        assert {float(r["score"]) for r in mine} == {passes[run["id"]]["score"]}
    person_rows = {
        r["criterion"]: r["checked_by"] for r in rows if r["run_id"] == str(person["id"])
    }
    assert person_rows == {"Short": "code", "Calm": "code", "Friendly tone": ""}
    # The CLI grades the same outputs checks-only (no --grader) to the same verdicts and scores.
    dataset = tmp_path / "outputs.csv"
    dataset.write_text(
        "input,output\n" + "".join(f'{q},"{o}"\n' for q, o in OUTPUTS.items()), encoding="utf-8"
    )
    graded_by_cli = _cli(
        "grade", "--input-file", str(dataset), "--rubric", "notes", "--json",
        db=str(dashboard.db_path),
    )  # fmt: skip
    assert graded_by_cli.returncode == 0, graded_by_cli.stderr
    cli_runs = json.loads(graded_by_cli.stdout)["run_ids"]
    with Store(dashboard.db_path) as store:
        by_cli = {store.runs.get(i)["input"]: store.passes.of_run(i)[0] for i in cli_runs}
        assert {store.runs.get(i)["grader_model"] for i in cli_runs} == {"checks"}
    for run in graded:
        page_pass, cli_pass = passes[run["id"]], by_cli[run["input"]]
        assert page_pass["score"] == cli_pass["score"]
        assert [(c["name"], c["passed"], c.get("checked_by")) for c in page_pass["criteria"]] == [
            (c["name"], c["passed"], c.get("checked_by")) for c in cli_pass["criteria"]
        ]
