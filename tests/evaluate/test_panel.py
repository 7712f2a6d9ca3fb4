"""Tests for rubric_core.evaluate.panel: strict majority, split gaps, insufficient votes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_core.evaluate import EvaluationError, combine_panel

TITLE, SOURCE = "has a title", "cites a source"


def _v(name: str, passed: bool | None, gap: str | None = None) -> dict:
    """A verdict; `passed=None` is insufficient evidence."""
    verdict: dict = {"name": name, "passed": bool(passed)}
    if passed is None:
        verdict["insufficient"] = True
    if gap is not None:
        verdict["gap"] = gap
    return verdict


def test_panel_tie_is_not_a_pass_and_says_the_judges_split():
    panel = combine_panel([[_v(TITLE, True)], [_v(TITLE, False, "no title")]], judges=["a", "b"])
    (title,) = panel["criteria"]
    assert title["passed"] is False
    assert title["gap"] == "judges split 1-1: b: no title"
    assert "insufficient" not in title
    assert title["votes"] == {"passed": 1, "failed": 1, "insufficient": 0}
    assert title["judges"] == [
        {"judge": "a", "passed": True, "gap": None, "insufficient": False},
        {"judge": "b", "passed": False, "gap": "no title", "insufficient": False},
    ]
    assert panel["result"] == "needs_revision"


def test_panel_majority_passes_and_keeps_the_dissent():
    panel = combine_panel(
        [[_v(TITLE, True)], [_v(TITLE, False, "title is vague")], [_v(TITLE, True)]],
        judges=["a", "b", "c"],
    )
    (title,) = panel["criteria"]
    assert title["passed"] is True and "gap" not in title
    assert [vote["passed"] for vote in title["judges"]] == [True, False, True]
    assert title["judges"][1]["gap"] == "title is vague"
    assert panel["result"] == "satisfied"
    assert (
        panel["explanation"]
        == "1 of 1 criteria passed by strict majority of 3 judges; the judges split on 1."
    )


def test_panel_minority_pass_fails_with_every_dissenting_gap():
    panel = combine_panel(
        [[_v(TITLE, True)], [_v(TITLE, False, "none")], [_v(TITLE, False, "too long")]],
        judges=["a", "b", "c"],
    )
    assert panel["criteria"][0]["gap"] == "judges split 1-2: b: none; c: too long"


@pytest.mark.parametrize(("passes", "expected"), [(2, False), (3, True)])
def test_panel_of_four_needs_more_than_half(passes, expected):
    votes = [[_v(TITLE, i < passes, None if i < passes else "no")] for i in range(4)]
    assert combine_panel(votes)["criteria"][0]["passed"] is expected


def test_panel_unanimous_failure_keeps_distinct_gaps_once():
    same = combine_panel([[_v(TITLE, False, "no title")], [_v(TITLE, False, "no title")]])
    assert same["criteria"][0]["gap"] == "no title"
    different = combine_panel([[_v(TITLE, False, "no title")], [_v(TITLE, False, "untitled")]])
    assert different["criteria"][0]["gap"] == "judge 1: no title; judge 2: untitled"


def test_panel_of_one_is_that_judge():
    panel = combine_panel([[_v(TITLE, True), _v(SOURCE, False, "cite one")]])
    assert [(c["name"], c["passed"], c.get("gap")) for c in panel["criteria"]] == [
        (TITLE, True, None),
        (SOURCE, False, "cite one"),
    ]
    assert panel["judges"] == ["judge 1"]
    assert panel["explanation"] == "1 of 2 criteria passed by strict majority of 1 judge."


def test_panel_majority_insufficient_is_insufficient():
    panel = combine_panel(
        [[_v(SOURCE, None, "tool output not shown")], [_v(SOURCE, None)], [_v(SOURCE, True)]],
        judges=["a", "b", "c"],
    )
    (source,) = panel["criteria"]
    assert (source["passed"], source["insufficient"]) == (False, True)
    assert source["votes"] == {"passed": 1, "failed": 0, "insufficient": 2}
    assert source["gap"] == (
        "judges split 1-2: a (could not verify): tool output not shown; "
        "b (could not verify): could not verify it"
    )
    assert panel["result"] == "needs_revision"


def test_panel_pass_against_insufficient_is_insufficient_not_failure():
    panel = combine_panel([[_v(SOURCE, True)], [_v(SOURCE, None, "not shown")]])
    source = panel["criteria"][0]
    assert (source["passed"], source.get("insufficient")) == (False, True)


def test_panel_judged_failure_stands_beside_an_insufficient_vote():
    split = combine_panel(
        [[_v(SOURCE, True)], [_v(SOURCE, False, "wrong")], [_v(SOURCE, None, "not shown")]],
        judges=["a", "b", "c"],
    )["criteria"][0]
    assert split["passed"] is False and "insufficient" not in split
    assert split["gap"] == "judges split 1-2: b: wrong; c (could not verify): not shown"
    mixed = combine_panel(
        [[_v(SOURCE, False, "wrong")], [_v(SOURCE, None, "not shown")]], judges=["a", "b"]
    )["criteria"][0]
    assert "insufficient" not in mixed
    assert (
        mixed["gap"]
        == "1 of 2 judges failed it, 1 could not verify it: a: wrong; b (could not verify): not shown"
    )


def test_panel_satisfied_only_when_every_criterion_passes():
    judge = [_v(TITLE, True), _v(SOURCE, True)]
    assert combine_panel([judge, judge, [_v(TITLE, True), _v(SOURCE, False, "x")]])["result"] == (
        "satisfied"
    )
    assert combine_panel([judge, [_v(TITLE, True), _v(SOURCE, False, "x")]])["result"] == (
        "needs_revision"
    )


def test_panel_numbers_repeated_judge_names():
    panel = combine_panel([[_v(TITLE, True)]] * 3, judges=["openai:gpt-x"] * 3)
    assert panel["judges"] == ["openai:gpt-x #1", "openai:gpt-x #2", "openai:gpt-x #3"]


def test_panel_follows_the_rubric_order_and_serialises():
    panel = combine_panel(
        [[_v(SOURCE, True), _v(TITLE, True)], [_v(TITLE, True), _v(SOURCE, True)]],
        criteria=[TITLE, SOURCE],
    )
    assert [c["name"] for c in json.loads(json.dumps(panel))["criteria"]] == [TITLE, SOURCE]


def test_panel_rejects_missing_and_extra_criteria():
    with pytest.raises(
        EvaluationError, match=r"judge 'judge 2' gave no verdict on 'cites a source'"
    ):
        combine_panel([[_v(TITLE, True), _v(SOURCE, True)], [_v(TITLE, True)]])
    with pytest.raises(EvaluationError, match=r"judged criteria not in the rubric: 'rhymes'"):
        combine_panel([[_v(TITLE, True)], [_v(TITLE, True), _v("rhymes", True)]])


def test_panel_rejects_bad_input():
    with pytest.raises(EvaluationError, match="at least one judge"):
        combine_panel([])
    with pytest.raises(EvaluationError, match="one non-empty name per verdict list"):
        combine_panel([[_v(TITLE, True)]], judges=["a", "b"])
    with pytest.raises(EvaluationError, match="judged twice"):
        combine_panel([[_v(TITLE, True), _v(TITLE, False, "x")]])
    with pytest.raises(EvaluationError, match="at least one criterion"):
        combine_panel([[], []])


def test_evaluate_loads_without_scikit_learn():
    """The middleware will load panels; sklearn (seconds to import) waits for a kappa."""
    script = (
        "import sys\n"
        "import rubric_core.evaluate\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'scipy', 'streamlit'}))\n"
    )
    root = Path(__file__).resolve().parents[2]
    loaded = subprocess.check_output(
        [sys.executable, "-c", script], text=True, cwd=root, timeout=120
    )
    assert loaded.strip() == "[]"
