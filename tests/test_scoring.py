"""Pass scores on hand-computed cases, the best pass, and regressions between passes."""

from __future__ import annotations

import pytest

from rubric_core.rubric import parse_criteria
from rubric_core.scoring import best_pass, regression_gap, regressions, score_pass
from rubric_core.ui.charts import pass_label

_RUBRIC = (
    "- [3] Cites the date\n- Names the product\n- [2] Is one paragraph\n- [-5] Invents a price"
)
# Positive weights: 3 + 1 + 2 = 6; one penalty of 5.


def _verdicts(**passed: bool) -> list[dict]:
    names = {
        "date": "Cites the date",
        "product": "Names the product",
        "paragraph": "Is one paragraph",
        "price": "Invents a price",
    }
    return [{"name": names[key], "passed": value} for key, value in passed.items()]


@pytest.mark.parametrize(
    ("passed", "expected"),
    [
        ({"date": True, "product": True, "paragraph": True, "price": True}, 1.0),  # 6/6
        ({"date": True, "product": False, "paragraph": True, "price": True}, 5 / 6),  # (3+2)/6
        ({"date": False, "product": True, "paragraph": False, "price": True}, 1 / 6),  # 1/6
        ({"date": True, "product": True, "paragraph": True, "price": False}, 1 / 6),  # (6-5)/6
        ({"date": True, "product": False, "paragraph": True, "price": False}, 0.0),  # (5-5)/6
        (
            {"date": True, "product": False, "paragraph": False, "price": False},
            -1 / 3,
        ),  # (3-5)/6, unclipped as HealthBench
        ({"date": False, "product": False, "paragraph": False, "price": True}, 0.0),  # 0/6
    ],
)
def test_score_pass_hand_computed(passed, expected):
    assert score_pass(parse_criteria(_RUBRIC), _verdicts(**passed)) == pytest.approx(expected)


def test_score_pass_penalties_only_scores_one_minus_the_failed_share():
    rubric = "- [-2] Shouts\n- [-3] Invents a price\n- [-5] Insults the reader"
    verdicts = [
        {"name": "Shouts", "passed": True},
        {"name": "Invents a price", "passed": False, "gap": "drop the $5"},
        {"name": "Insults the reader", "passed": True},
    ]
    assert score_pass(rubric, verdicts) == pytest.approx(1 - 3 / 10)
    every = [{**v, "passed": False} for v in verdicts]
    assert score_pass(rubric, every) == 0.0
    assert score_pass(rubric, [{**v, "passed": True} for v in verdicts]) == 1.0


def test_score_pass_counts_missing_verdicts_against_the_work():
    # Missing "Names the product" (1) counts as failed, missing penalty (5) as present:
    # (3 + 2 - 5) / 6 = 0.
    assert score_pass(_RUBRIC, _verdicts(date=True, paragraph=True)) == 0.0
    # Missing only "Is one paragraph" (2): (3 + 1) / 6.
    assert score_pass(_RUBRIC, _verdicts(date=True, product=True, price=True)) == pytest.approx(
        4 / 6
    )
    # A verdict whose passed is not exactly True counts as failed: (3 + 2) / 6.
    verdicts = _verdicts(date=True, product=True, paragraph=True, price=True)
    verdicts[1]["passed"] = "yes"
    assert score_pass(_RUBRIC, verdicts) == pytest.approx(5 / 6)


def test_score_pass_matches_names_ignoring_case_and_space():
    verdicts = [
        {"name": "  cites THE date ", "passed": True},
        {"name": "Invents a price", "passed": True},
    ]
    assert score_pass(_RUBRIC, verdicts) == pytest.approx(3 / 6)


def test_score_pass_is_none_without_criteria_or_verdicts():
    assert score_pass("", [{"name": "x", "passed": True}]) is None
    assert score_pass(_RUBRIC, []) is None
    assert score_pass(_RUBRIC, None) is None
    grader_error = {"result": "grader_error", "criteria": []}
    assert score_pass(_RUBRIC, grader_error) is None


def test_score_pass_reads_an_evaluation_and_unweighted_rubrics():
    evaluation = {
        "criteria": [{"name": "a", "passed": True}, {"name": "b", "passed": False, "gap": "do b"}]
    }
    assert score_pass("- a\n- b\n- c", evaluation) == pytest.approx(1 / 3)


def test_best_pass_prefers_the_later_of_equal_scores():
    assert best_pass([0.4, 0.9, 0.2]) == 1
    assert best_pass([0.9, 0.4, 0.9]) == 2
    assert best_pass([None, 0.0, None]) == 1
    assert best_pass([]) is None


def test_regressions_name_the_last_pass_a_criterion_passed_in():
    first = [
        {"name": "a", "passed": True},
        {"name": "b", "passed": True},
        {"name": "c", "passed": False},
    ]
    second = [
        {"name": "a", "passed": False},
        {"name": "b", "passed": True},
        {"name": "c", "passed": False},
    ]
    third = [
        {"name": "a", "passed": False},
        {"name": "b", "passed": False},
        {"name": "c", "passed": False},
    ]
    assert regressions([], first) == []
    assert regressions([first], second) == [{"name": "a", "passed_in": 1}]
    assert regressions([first, second], third) == [
        {"name": "a", "passed_in": 1},
        {"name": "b", "passed_in": 2},
    ]
    fixed = [
        {"name": "a", "passed": True},
        {"name": "b", "passed": True},
        {"name": "c", "passed": True},
    ]
    assert regressions([first, second, third], fixed) == []


def test_regressions_read_evaluations_and_penalties():
    # A penalty regresses too: absent (passed) in pass 1, present (failed) in pass 2.
    passes = [
        {"iteration": 0, "criteria": [{"name": "Invents a price", "passed": True}]},
        {
            "iteration": 1,
            "criteria": [{"name": "invents a price", "passed": False, "gap": "drop $5"}],
        },
    ]
    assert regressions(passes[:1], passes[1]) == [{"name": "invents a price", "passed_in": 1}]
    grader_error = {"iteration": 1, "criteria": []}
    assert regressions(passes[:1], grader_error) == []


def test_regression_gap_uses_the_dashboards_pass_numbers():
    evaluations = [
        {"criteria": [{"name": "date", "passed": False, "gap": "give it"}]},
        {"criteria": [{"name": "date", "passed": True}]},
        {"criteria": [{"name": "date", "passed": False, "gap": "Give the release date again."}]},
    ]
    [regressed] = regressions(evaluations[:2], evaluations[2])
    assert pass_label(1) == f"Pass {regressed['passed_in']}"
    assert regression_gap("Give the release date again.", regressed["passed_in"]) == (
        "this passed in pass 2 and fails now: Give the release date again."
    )
