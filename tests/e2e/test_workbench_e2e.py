"""The rubric workbench in a real headless Chromium: grade outputs, label, agreement, experiments."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest

from tests.support.browser import (
    assert_no_exception,
    choose,
    go_to,
    metric_value,
    type_into,
    wait_idle,
    widget,
)

pytestmark = pytest.mark.e2e

SCENARIO = "satisfied_first_try"  # its replay grader counts sentences and words with text_stats
TWO, FEW, COLD = "Exactly two sentences", "Fewer than 40 words", "Says the bottle keeps drinks cold"
RUBRIC = f"- {TWO}\n- {FEW}\n- {COLD}"
LONG = " ".join(["very"] * 40)


def _fenced(text: str) -> str:
    return f"```text\n{text}\n```"


# request -> (output, the human's labels on TWO, FEW, COLD). The replay grader really
# counts: two sentences passes TWO, fewer than 40 words passes FEW, COLD always passes.
ROWS: dict[str, tuple[str, tuple[bool, bool, bool]]] = {
    "request 1": (_fenced("It keeps drinks cold. It is light."), (True, True, True)),
    "request 2": (_fenced("It keeps drinks cold. It is light. It is cheap."), (False, True, False)),
    "request 3": (_fenced("It keeps drinks cold all day long."), (True, True, True)),
    "request 4": (_fenced(f"It keeps drinks cold. It is {LONG} light."), (True, False, True)),
    "request 5": (_fenced("It keeps drinks cold. It is blue."), (True, True, False)),
    "request 6": (_fenced(f"It keeps drinks cold. It is {LONG} light. Buy it."), (False, False, True)),
}  # fmt: skip
# What the judge says, worked out from the same counts.
JUDGE: dict[str, tuple[bool, bool, bool]] = {
    "request 1": (True, True, True),
    "request 2": (False, True, True),
    "request 3": (False, True, True),
    "request 4": (True, False, True),
    "request 5": (True, True, True),
    "request 6": (False, False, True),
}


def expected_kappa() -> tuple[int, float, float]:
    """n, percent agreement and Cohen's kappa over every (row, criterion), by hand.

    Pooled 2x2 table, judge as predictor: true pass 11, false pass 2 (COLD on rows 2 and
    5), false fail 1 (TWO on row 3), true fail 4. p_o = 15/18; judge passes 13/18, human
    12/18, so p_e = (13*12 + 5*6) / 18**2 = 186/324 and kappa = (270-186)/(324-186) = 84/138.
    """
    pairs = [(j, h) for r in ROWS for j, h in zip(JUDGE[r], ROWS[r][1], strict=True)]
    n = len(pairs)
    table = {
        (a, b): sum(1 for p in pairs if p == (a, b)) for a in (True, False) for b in (True, False)
    }
    assert table == {(True, True): 11, (True, False): 2, (False, True): 1, (False, False): 4}
    observed = (table[True, True] + table[False, False]) / n
    judge_pass = (table[True, True] + table[True, False]) / n
    human_pass = (table[True, True] + table[False, True]) / n
    chance = judge_pass * human_pass + (1 - judge_pass) * (1 - human_pass)
    kappa = (observed - chance) / (1 - chance)
    assert abs(kappa - 84 / 138) < 1e-12
    return n, observed, kappa


def _dataset() -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["input", "output"])
    for request, (output, _) in ROWS.items():
        writer.writerow([request, output])
    return buffer.getvalue().encode()


def _pick_replay_grader(page: Any) -> None:
    choose(page, "Replay scenario", SCENARIO)
    tools = widget(page, "stMultiSelect", "Grader tools")
    if "text_stats" not in tools.inner_text():
        page.get_by_role("combobox", name="Grader tools").click()
        page.get_by_role("option", name="text_stats").click()
        page.keyboard.press("Escape")
        wait_idle(page)


def test_grade_label_agreement_regrade_compare(
    dashboard: Any, browser_page: Any, screenshot: Any
) -> None:
    page = browser_page
    n, observed, kappa = expected_kappa()

    # A rubric of our own, v1.
    page.goto(dashboard.url)
    page.get_by_role("heading", name="Rubrics", exact=True).wait_for()
    wait_idle(page)
    page.get_by_text("Test a rubric with no API key").wait_for()
    type_into(page.get_by_label("Name"), "bottle")
    type_into(page.get_by_label("Checklist (one criterion per line)"), RUBRIC)
    wait_idle(page)
    page.get_by_role("button", name="Save as new version").click()
    page.get_by_text("Saved bottle v1").wait_for()
    screenshot("9-01-rubric")

    # Batch: upload six input/output rows and grade them with the replay grader, no agent.
    go_to(page, "Batch")
    widget(page, "stCheckbox", "Grade existing outputs").locator("label").click()
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        files=[{"name": "outputs.csv", "mimeType": "text/csv", "buffer": _dataset()}]
    )
    page.get_by_text("6 row(s) read from outputs.csv").wait_for()
    wait_idle(page)
    _pick_replay_grader(page)
    page.get_by_role("button", name="Grade outputs").click()
    page.get_by_role("link", name="Label these passes on Review").wait_for(timeout=60_000)
    wait_idle(page)
    assert metric_value(page, "Graded rows") == "6"
    assert_no_exception(page)
    screenshot("9-02-graded")

    # Review: label each pass; S saves and moves on, A agrees with the judge.
    page.get_by_role("link", name="Label these passes on Review").click()
    page.get_by_role("heading", name="Review", exact=True).wait_for()
    wait_idle(page)
    type_into(page.get_by_role("textbox", name="Your name (reviewer)"), "ana")
    wait_idle(page)
    for done in range(6):
        page.get_by_text(f"{done} of 6 labelled").wait_for()
        wait_idle(page)  # the key shortcuts listen only once the page has finished drawing
        request = (
            page.locator('[data-testid="stMain"] [data-testid="stCode"]').first.inner_text().strip()
        )
        human = ROWS[request][1]
        if human == JUDGE[request]:
            page.evaluate("document.activeElement && document.activeElement.blur()")
            page.keyboard.press("a")
        else:
            radios = page.locator('[data-testid="stRadio"]').filter(has_text="Your verdict")
            for index, passed in enumerate(human):
                radios.nth(index).get_by_text("pass" if passed else "fail", exact=True).click()
                wait_idle(page)
            if done == 0:
                screenshot("9-03-review")
            page.evaluate("document.activeElement && document.activeElement.blur()")
            page.keyboard.press("s")
        page.get_by_text("label(s) on pass").wait_for()
        wait_idle(page)
    page.get_by_text("6 of 6 labelled").wait_for()
    assert_no_exception(page)

    # Agreement: the kappa worked out above.
    go_to(page, "Agreement")
    assert metric_value(page, "Labelled items (n)") == str(n)
    assert metric_value(page, "Agreement") == f"{observed:.1%}"
    assert metric_value(page, "Cohen's kappa") == f"{kappa:.3f}"
    page.get_by_text("Disagreements (3)").wait_for()
    # The links stream in after their heading: wait for the last one, then count.
    false_passes = page.get_by_role("link").filter(has_text="false pass")
    false_passes.nth(1).wait_for()
    wait_idle(page)
    assert false_passes.count() == 2
    screenshot("9-04-agreement")

    # One disagreement is one click from its pass.
    page.get_by_role("link").filter(has_text="false fail").first.click()
    page.get_by_role("heading", name="Review", exact=True).wait_for()
    wait_idle(page)
    assert (
        page.locator('[data-testid="stMain"] [data-testid="stCode"]').first.inner_text().strip()
        == "request 3"
    )

    # A second rubric version: one more criterion. The replay grader is scripted for v1's
    # criteria, so the Experiments page refuses it for v2, saying why and what to use.
    go_to(page, "Rubrics")
    choose(page, "Rubric", "bottle")
    type_into(
        page.get_by_label("Checklist (one criterion per line)"), RUBRIC + "\n- Mentions the price"
    )
    wait_idle(page)
    page.get_by_role("button", name="Save as new version").click()
    page.get_by_text("Saved bottle v2").wait_for()
    go_to(page, "Experiments")
    choose(page, "Version", "v2", nth=0)
    _pick_replay_grader(page)
    page.get_by_role("button", name="Launch re-grade").click()
    wait_idle(page)
    page.get_by_text(
        re.compile(r"scripted for its own scenario's rubric, not for bottle v2")
    ).wait_for()

    # Experiments: re-grade the batch with v1 twice; no agent runs.
    for _ in range(2):
        choose(page, "Version", "v1", nth=0)
        _pick_replay_grader(page)
        page.get_by_role("button", name="Launch re-grade").click()
        wait_idle(page)
        page.get_by_text("6 of 6 inputs finished").first.wait_for(timeout=60_000)
        wait_idle(page)
    assert_no_exception(page)

    # Compare them: the same grader on the same drafts agrees with itself.
    assert metric_value(page, "Verdicts compared") == "18"
    assert metric_value(page, "Improved (fail → pass)") == "0"
    assert metric_value(page, "Regressed (pass → fail)") == "0"
    page.get_by_text(f"A vs human labels: n {n}").wait_for()
    assert page.get_by_text(f"kappa {kappa:.3f}").count() == 2
    screenshot("9-05-experiments")
