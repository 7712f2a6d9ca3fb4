"""Tests for rubric_core.evaluate.consistency: pairwise flip rates counted by hand."""

from __future__ import annotations

import pytest

from rubric_core.evaluate import EvaluationError, consistency_report, flip_rate

TITLE, SOURCE = "has a title", "cites a source"


def test_flip_rate_counts_disagreeing_pairs():
    assert flip_rate([True, True, False]) == pytest.approx(2 / 3)  # (T,F) twice of 3 pairs
    assert flip_rate([True, False, True, False]) == pytest.approx(4 / 6)
    assert flip_rate([True, None, False]) == 1.0  # insufficient is a verdict of its own
    assert flip_rate([False, False]) == 0.0
    assert flip_rate([True]) is None


def test_consistency_pools_pairs_per_criterion_and_overall():
    report = consistency_report(
        {
            "p1": [
                {TITLE: True, SOURCE: True},
                {TITLE: False, SOURCE: True},
                {TITLE: True, SOURCE: True},
            ],
            "p2": [
                {TITLE: True, SOURCE: False},
                {TITLE: True, SOURCE: False},
                {TITLE: True, SOURCE: None},
            ],
            "p3": [{TITLE: False}, {TITLE: None}],
        }
    )
    title, source = report["criteria"]
    # title: p1 2 of 3 pairs disagree, p2 0 of 3, p3 1 of 1 -> 3 of 7
    assert title["name"] == TITLE
    assert title["flip_rate"] == pytest.approx(3 / 7)
    assert (title["items"], title["repeats"], title["unstable"]) == (3, 8, 2)
    assert title["unstable_items"] == ["p1", "p3"]
    assert (title["passed"], title["failed"], title["insufficient"]) == (5, 2, 1)
    # source: p1 0 of 3, p2 2 of 3 -> 2 of 6
    assert source["flip_rate"] == pytest.approx(2 / 6)
    assert (source["items"], source["repeats"], source["unstable_items"]) == (2, 6, ["p2"])
    overall = report["overall"]
    assert overall["flip_rate"] == pytest.approx(5 / 13)
    assert (overall["items"], overall["unstable"], overall["cells"]) == (3, 3, 5)


def test_consistency_reads_verdict_lists_and_skips_repeats_without_a_criterion():
    report = consistency_report(
        {
            7: [
                [{"name": TITLE, "passed": True}],
                [],  # a grader_error repeat has no criteria
                [{"name": TITLE, "passed": False, "gap": "no title"}],
            ]
        }
    )
    (title,) = report["criteria"]
    assert (title["repeats"], title["flip_rate"]) == (2, 1.0)


def test_consistency_criterion_judged_once_has_no_rate():
    report = consistency_report({1: [{TITLE: True, SOURCE: True}, {TITLE: True}]})
    source = report["criteria"][1]
    assert (source["items"], source["repeats"], source["flip_rate"]) == (0, 0, None)
    assert report["overall"]["flip_rate"] == 0.0


def test_consistency_needs_two_gradings_of_each_item():
    with pytest.raises(EvaluationError, match="grade each pass at least twice"):
        consistency_report({})
    with pytest.raises(
        EvaluationError, match="item 'p9': consistency needs at least two gradings of it, got 1"
    ):
        consistency_report({"p9": [{TITLE: True}]})
    with pytest.raises(EvaluationError, match="a verdict must be true, false or None"):
        consistency_report({"p1": [{TITLE: "pass"}, {TITLE: True}]})
