"""An experiment that finishes while its picker is on screen, in a real headless Chromium.

A browser sends a selectbox's choice back as the label it showed; under an unchanged
widget the finished experiment kept reading "0 items · running" (issue 21, finding 10).
"""

from __future__ import annotations

from typing import Any

import pytest

from rubric_core.store import NewRun, RunEnd, Store
from tests.support.browser import assert_no_exception, go_to, wait_idle
from tests.support.store import make_evaluation

pytestmark = pytest.mark.e2e


def _seed(db_path: Any) -> tuple[int, int]:
    """Two graded passes and two experiments: #1 done, #2 running with no item yet."""
    with Store(db_path) as store:
        version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        evaluations = []
        for number in (1, 2):
            run_id = store.runs.create(
                NewRun(rubric_version_id=version["id"], input=f"request {number}", agent_model="",
                grader_model="replay:x", max_iterations=1, agent_kind="graded"),
            )  # fmt: skip
            evaluations.append(store.passes.record(run_id, make_evaluation()))
            store.runs.finish(run_id, RunEnd(status="needs_revision", final_output="d"))
        ids = []
        for name in ("first", "second"):
            ids.append(
                store.experiments.create(
                    name=name, rubric_version_id=version["id"], grader_model="replay:x"
                )
            )
        for evaluation_id in evaluations:
            store.experiments.record_item(ids[0], evaluation_id, 0, make_evaluation())
        store.experiments.finish(ids[0])
        return ids[1], evaluations[0]


def _shown(container: Any, combobox: Any) -> str:
    """What a selectbox shows: its text and its input's value (Streamlit draws either)."""
    value = combobox.input_value() if combobox.evaluate("e => 'value' in e") else ""
    return f"{container.inner_text()} {value}"


def test_a_finished_experiment_reads_finished_in_its_picker(
    dashboard: Any, browser_page: Any
) -> None:
    page = browser_page
    running, evaluation_id = _seed(dashboard.db_path)
    page.goto(dashboard.url)
    wait_idle(page)
    go_to(page, "Experiments")
    picker_b = page.get_by_role("combobox", name="Experiment B")
    container = page.locator('[data-testid="stSelectbox"]').filter(has=picker_b)
    assert "0 items · running" in _shown(container, picker_b)
    with Store(dashboard.db_path) as store:  # the experiment finishes while the page is open
        store.experiments.record_item(running, evaluation_id, 0, make_evaluation())
        store.experiments.finish(running)
    page.get_by_text("One run", exact=True).click()  # any interaction reruns the page
    wait_idle(page)
    assert_no_exception(page)
    shown = _shown(container, picker_b)
    assert "running" not in shown and "1 items" in shown, shown
