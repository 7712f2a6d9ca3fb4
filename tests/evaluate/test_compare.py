"""Tests for rubric_core.evaluate.compare: the matrix, pass-rate deltas and flips of two experiments."""

from __future__ import annotations

import json

import pytest

from rubric_core.evaluate import EvaluationError, compare_experiments

TITLE, SOURCE = "has a title", "cites a source"


@pytest.fixture
def experiments() -> tuple[dict, dict]:
    a = {
        1: {TITLE: True, SOURCE: False},
        2: {TITLE: True, SOURCE: True},
        3: {TITLE: False, SOURCE: None, "rhymes": True},
        4: {TITLE: True, SOURCE: False},
        5: {TITLE: True},
    }
    b = {
        1: [{"name": TITLE, "passed": True}, {"name": SOURCE, "passed": True}],
        2: [{"name": TITLE, "passed": False, "gap": "vague"}, {"name": SOURCE, "passed": True}],
        3: [{"name": TITLE, "passed": True}, {"name": SOURCE, "passed": True}],
        4: [
            {"name": TITLE, "passed": True},
            {"name": SOURCE, "passed": False, "insufficient": True},
        ],
        6: [{"name": TITLE, "passed": True}, {"name": "under 200 words", "passed": True}],
    }
    return a, b


def test_compare_builds_the_matrix_of_shared_items(experiments):
    report = compare_experiments(*experiments)
    assert [
        (r["item_id"], r["criterion"], r["a"], r["b"], r["change"]) for r in report["rows"]
    ] == [
        (1, TITLE, True, True, "same"),
        (1, SOURCE, False, True, "improved"),
        (2, TITLE, True, False, "regressed"),
        (2, SOURCE, True, True, "same"),
        (3, TITLE, False, True, "improved"),
        (3, SOURCE, None, True, "undecided"),
        (4, TITLE, True, True, "same"),
        (4, SOURCE, False, None, "undecided"),
    ]
    assert [r["change"] for r in report["flips"]] == [
        "improved",
        "regressed",
        "improved",
        "undecided",
        "undecided",
    ]


def test_compare_pass_rates_and_deltas_by_hand(experiments):
    report = compare_experiments(*experiments)
    title, source = report["criteria"]
    # title over items 1-4: A passes 1, 2, 4 (3/4); B passes 1, 3, 4 (3/4)
    assert title["name"] == TITLE
    assert (title["n"], title["pass_rate_a"], title["pass_rate_b"], title["delta"]) == (
        4,
        0.75,
        0.75,
        0.0,
    )
    assert (title["improved"], title["regressed"], title["undecided"]) == (1, 1, 0)
    # source: A passes item 2 only (1/4, item 3 insufficient); B passes 1, 2, 3 (3/4, item 4 insufficient)
    assert (source["pass_rate_a"], source["pass_rate_b"]) == (0.25, 0.75)
    assert source["delta"] == pytest.approx(0.5)
    assert (source["improved"], source["regressed"], source["undecided"]) == (1, 0, 2)
    assert (source["insufficient_a"], source["insufficient_b"]) == (1, 1)
    overall = report["overall"]
    assert (overall["n"], overall["pass_rate_a"], overall["pass_rate_b"]) == (8, 0.5, 0.75)
    assert (overall["improved"], overall["regressed"], overall["undecided"]) == (2, 1, 2)


def test_compare_reports_what_only_one_side_holds(experiments):
    report = compare_experiments(*experiments)
    assert (report["only_in_a"], report["only_in_b"]) == ([5], [6])
    assert (report["criteria_only_in_a"], report["criteria_only_in_b"]) == (["rhymes"], [])
    assert json.loads(json.dumps(report))["overall"]["improved"] == 2


def test_compare_without_shared_items_says_so():
    with pytest.raises(EvaluationError, match=r"share no items to compare \(A has 1, B has 1\)"):
        compare_experiments({1: {TITLE: True}}, {2: {TITLE: True}})
    with pytest.raises(EvaluationError, match=r"experiment B item 1 'has a title'"):
        compare_experiments({1: {TITLE: True}}, {1: {TITLE: "yes"}})
