"""Tests for rubric_core.evaluate.agreement: kappa and confusion against hand-computed figures."""

from __future__ import annotations

import json
import warnings
from fractions import Fraction

import pytest

from rubric_core.evaluate import EvaluationError, Pair, agreement_report, pair_up

TITLE, SOURCE = "has a title", "cites a source"


def _hand_kappa(tp: int, fp: int, ff: int, tf: int) -> float:
    """Cohen's kappa of a 2x2 table, from its definition: (p_o - p_e) / (1 - p_e)."""
    n = Fraction(tp + fp + ff + tf)
    p_o = (tp + tf) / n
    judge_pass, human_pass = (tp + fp) / n, (tp + ff) / n
    p_e = judge_pass * human_pass + (1 - judge_pass) * (1 - human_pass)
    return float((p_o - p_e) / (1 - p_e))


def _cells(criterion: str, start: int, counts: dict[tuple[bool, bool], int]) -> list[Pair]:
    pairs, item = [], start
    for (judge, human), count in counts.items():
        for _ in range(count):
            pairs.append(Pair(item, criterion, judge, human))
            item += 1
    return pairs


@pytest.fixture
def example() -> list[Pair]:
    """Title: TP 5, FP 1, FF 1, TF 3. Source: TP 1, FF 2, TF 1, one insufficient, one unlabelled."""
    title = _cells(
        TITLE, 1, {(True, True): 5, (True, False): 1, (False, True): 1, (False, False): 3}
    )
    source = _cells(SOURCE, 1, {(True, True): 1, (False, True): 2, (False, False): 1})
    source += [Pair(5, SOURCE, None, True), Pair(6, SOURCE, True, None)]
    return title + source


def test_agreement_per_criterion_matches_hand_computation(example):
    report = agreement_report(example)
    title, source = report["criteria"]
    assert title["name"] == TITLE
    assert (title["true_pass"], title["false_pass"], title["false_fail"], title["true_fail"]) == (
        5,
        1,
        1,
        3,
    )
    assert title["n"] == 10
    assert title["agreement"] == pytest.approx(0.8)
    # p_o = 0.8; judge and human both pass 6 of 10, so p_e = 0.36 + 0.16 = 0.52
    assert title["kappa"] == pytest.approx((0.8 - 0.52) / (1 - 0.52))
    assert title["kappa"] == pytest.approx(7 / 12)
    assert (title["insufficient"], title["reference_undecided"], title["total"]) == (0, 0, 10)

    assert source["name"] == SOURCE
    assert (source["true_pass"], source["false_pass"], source["false_fail"]) == (1, 0, 2)
    assert source["true_fail"] == 1
    assert source["n"] == 4
    assert source["agreement"] == pytest.approx(0.5)
    # judge passes 1 of 4, human 3 of 4: p_e = 0.25*0.75 + 0.75*0.25 = 0.375
    assert source["kappa"] == pytest.approx((0.5 - 0.375) / (1 - 0.375))
    assert (source["insufficient"], source["reference_undecided"], source["total"]) == (1, 1, 6)


def test_agreement_overall_pools_every_criterion(example):
    overall = agreement_report(example)["overall"]
    assert overall["n"] == 14
    assert overall["agreement"] == pytest.approx(10 / 14)
    assert overall["kappa"] == pytest.approx(_hand_kappa(6, 1, 3, 4))
    assert overall["kappa"] == pytest.approx(3 / 7)
    assert (overall["true_pass"], overall["false_pass"]) == (6, 1)
    assert (overall["false_fail"], overall["true_fail"]) == (3, 4)
    assert (overall["insufficient"], overall["reference_undecided"], overall["total"]) == (1, 1, 16)


def test_agreement_lists_disagreements_and_insufficient_apart(example):
    report = agreement_report(example)
    assert report["disagreements"] == [
        {
            "item_id": 6,
            "criterion": TITLE,
            "predicted": True,
            "reference": False,
            "kind": "false_pass",
        },
        {
            "item_id": 7,
            "criterion": TITLE,
            "predicted": False,
            "reference": True,
            "kind": "false_fail",
        },
        {
            "item_id": 2,
            "criterion": SOURCE,
            "predicted": False,
            "reference": True,
            "kind": "false_fail",
        },
        {
            "item_id": 3,
            "criterion": SOURCE,
            "predicted": False,
            "reference": True,
            "kind": "false_fail",
        },
    ]
    assert report["insufficient"] == [{"item_id": 5, "criterion": SOURCE, "reference": True}]


def test_agreement_serialises_to_the_cli_shape(example):
    report = json.loads(json.dumps(agreement_report(example)))
    assert {"n", "agreement", "kappa"} <= set(report["overall"])
    required = {
        "name",
        "n",
        "agreement",
        "kappa",
        "true_pass",
        "false_pass",
        "false_fail",
        "true_fail",
    }
    assert all(required <= set(row) for row in report["criteria"])
    assert [row["name"] for row in report["criteria"]] == [TITLE, SOURCE]


@pytest.mark.parametrize("verdict", [True, False])
def test_agreement_one_verdict_throughout_has_no_kappa(verdict):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = agreement_report([(i, TITLE, verdict, verdict) for i in range(3)])
    row = report["criteria"][0]
    assert (row["n"], row["agreement"], row["kappa"]) == (3, 1.0, None)
    assert report["overall"]["kappa"] is None


def test_agreement_one_constant_side_gives_kappa_zero():
    # judge always passes; human passes 2 of 3: p_o = 2/3 = p_e, so kappa is 0
    pairs = [(1, TITLE, True, True), (2, TITLE, True, True), (3, TITLE, True, False)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = agreement_report(pairs)["criteria"][0]
    assert row["agreement"] == pytest.approx(2 / 3)
    assert row["kappa"] == pytest.approx(_hand_kappa(2, 1, 0, 0)) == pytest.approx(0.0)


def test_agreement_opposite_constants_and_total_disagreement():
    opposite = agreement_report([(1, TITLE, True, False), (2, TITLE, True, False)])["overall"]
    assert (opposite["agreement"], opposite["kappa"]) == (0.0, 0.0)
    crossed = agreement_report([(1, TITLE, True, False), (2, TITLE, False, True)])["overall"]
    assert crossed["kappa"] == pytest.approx(-1.0)


def test_agreement_criterion_with_only_insufficient_has_no_figures():
    report = agreement_report(
        [(1, TITLE, None, True), (2, TITLE, None, False), (1, SOURCE, True, True)]
    )
    title = report["criteria"][0]
    assert (title["n"], title["agreement"], title["kappa"], title["insufficient"]) == (
        0,
        None,
        None,
        2,
    )
    assert report["overall"]["n"] == 1


def test_agreement_in_rubric_order_with_unpaired_criteria():
    report = agreement_report(
        [(1, SOURCE, True, False)], criteria=["under 200 words", TITLE, SOURCE]
    )
    assert [row["name"] for row in report["criteria"]] == ["under 200 words", TITLE, SOURCE]
    assert report["criteria"][0]["n"] == 0 and report["criteria"][0]["agreement"] is None


def test_agreement_rejects_a_criterion_outside_the_rubric():
    with pytest.raises(EvaluationError, match=r"not in the rubric: 'rhymes'"):
        agreement_report([(1, "rhymes", True, True)], criteria=[TITLE])


def test_agreement_without_pairs_or_labels_says_so():
    with pytest.raises(EvaluationError, match="no labelled items to compare: no pairs were given"):
        agreement_report([])
    with pytest.raises(EvaluationError, match="none of the 2 pairs has a reference verdict"):
        agreement_report([(1, TITLE, True, None), (2, TITLE, False, None)])


def test_agreement_rejects_malformed_pairs():
    with pytest.raises(EvaluationError, match=r"pair 2: expected \(item_id, criterion"):
        agreement_report([(1, TITLE, True, True), (2, TITLE, True)])
    with pytest.raises(EvaluationError, match=r"pair 1 .*predicted: a verdict must be true, false"):
        agreement_report([(1, TITLE, "yes", True)])
    with pytest.raises(EvaluationError, match="criterion must be a non-empty name"):
        agreement_report([(1, " ", True, True)])
    with pytest.raises(EvaluationError, match=r"item 1, criterion 'has a title' is paired twice"):
        agreement_report([(1, TITLE, True, True), (1, TITLE, False, True)])


def test_agreement_reads_sqlite_integers_as_booleans():
    report = agreement_report([(1, TITLE, 1, 1), (2, TITLE, 0, 1)])
    assert report["criteria"][0]["false_fail"] == 1
    assert report["disagreements"][0]["predicted"] is False


def test_pair_up_pairs_judged_verdicts_with_labels():
    judge = {
        10: [
            {"name": TITLE, "passed": True},
            {"name": SOURCE, "passed": False, "gap": "cite one", "insufficient": True},
        ],
        11: [{"name": TITLE, "passed": False, "gap": "no title"}],
        12: [{"name": TITLE, "passed": True}],
    }
    labels = {10: {TITLE: True, SOURCE: False}, 11: {TITLE: True}, 13: {TITLE: False}}
    assert pair_up(judge, labels) == [
        Pair(10, TITLE, True, True),
        Pair(10, SOURCE, None, False),
        Pair(11, TITLE, False, True),
    ]


def test_pair_up_compares_two_experiments():
    a = {1: {TITLE: True, SOURCE: False}}
    b = {1: [{"name": TITLE, "passed": True}, {"name": "rhymes", "passed": False, "gap": "x"}]}
    report = agreement_report(pair_up(a, b))
    assert report["overall"]["n"] == 1 and report["overall"]["agreement"] == 1.0


def test_pair_up_rejects_contradictory_verdicts():
    with pytest.raises(EvaluationError, match="both passed and insufficient"):
        pair_up({1: [{"name": TITLE, "passed": True, "insufficient": True}]}, {1: {TITLE: True}})
    with pytest.raises(EvaluationError, match="judged twice"):
        pair_up({1: [{"name": TITLE, "passed": True}] * 2}, {1: {TITLE: True}})
