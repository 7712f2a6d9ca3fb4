"""Issue 21, finding 9: scores as HealthBench computes them.

HealthBench's reference scorer (openai/simple-evals, `healthbench_eval.calculate_score`)
scores an example as the points of the criteria met over the positive points, unclipped,
and has no score for a rubric without positive points; the overall figure is the mean of
the examples' scores, clipped to [0, 1]. `reference_score` and `reference_overall` below
restate that, on HealthBench's own rubric format (`{criterion, points}` items and
`{criteria_met}` grades), and our pipeline is held to it.
"""

from __future__ import annotations

import random

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from rubric_core import PassPipeline
from rubric_core.batch import BatchSummary
from rubric_core.rubric import criteria_from_healthbench
from rubric_core.scoring import mean_score, score_pass, shown_score
from rubric_core.store.rows import evaluation_row


def reference_score(rubric_items: list[dict], grades: list[dict]) -> float | None:
    """HealthBench's `calculate_score`: met points over positive points, unclipped."""
    total_possible_points = sum(item["points"] for item in rubric_items if item["points"] > 0)
    if total_possible_points == 0:
        return None  # "should not happen for overall score, but may happen for tags"
    achieved_points = sum(
        item["points"]
        for item, grade in zip(rubric_items, grades, strict=True)
        if grade["criteria_met"]
    )
    return achieved_points / total_possible_points


def reference_overall(scores: list[float]) -> float:
    """HealthBench's aggregate: the mean of the examples' scores, clipped to [0, 1]."""
    return min(1.0, max(0.0, sum(scores) / len(scores)))


def _messy(text: str, rng: random.Random) -> str:
    """HealthBench's own spelling of a criterion: odd case, doubled and broken whitespace."""
    words = text.split()
    spaced = "".join(w + rng.choice([" ", "  ", "\n", " \t"]) for w in words).rstrip()
    return rng.choice([spaced, spaced.upper(), spaced.lower(), " " + spaced + " "])


def _cases() -> list[tuple[list[dict], list[dict]]]:
    rng = random.Random(21)
    cases = []
    for number in range(30):
        size = rng.randint(1, 6)
        if number % 5 == 0:  # every fifth rubric: penalties only
            points = [-rng.randint(1, 10) for _ in range(size)]
        else:
            points = [rng.choice([-1, 1]) * rng.randint(1, 10) for _ in range(size)]
            if all(p < 0 for p in points):
                points[0] = -points[0]
        items = [
            {"criterion": f"Criterion {i} of case {number}: says thing {i}", "points": p}
            for i, p in enumerate(points)
        ]
        grades = [{"criteria_met": rng.random() < 0.5} for _ in items]
        cases.append((items, grades))
    # Each example of the issue: 0.7, -0.3 and -3.0.
    cases.append(([{"criterion": "a", "points": 7}, {"criterion": "b", "points": 3}],
                  [{"criteria_met": True}, {"criteria_met": False}]))  # fmt: skip
    cases.append(([{"criterion": "a", "points": 10}, {"criterion": "b", "points": -3}],
                  [{"criteria_met": False}, {"criteria_met": True}]))  # fmt: skip
    cases.append(([{"criterion": "a", "points": 1}, {"criterion": "b", "points": -3}],
                  [{"criteria_met": False}, {"criteria_met": True}]))  # fmt: skip
    return cases


def _our_score(items: list[dict], grades: list[dict], rng: random.Random) -> float | None:
    """The same example through our parser and scorer, verdicts named in HealthBench's text."""
    rubric = criteria_from_healthbench(items)
    verdicts = [
        # A penalty's criterion is met when the bad thing is present: our verdict fails it.
        {
            "name": _messy(item["criterion"], rng),
            "passed": grade["criteria_met"] == (item["points"] > 0),
        }
        for item, grade in zip(items, grades, strict=True)
    ]
    return score_pass(rubric, verdicts)


CASES = _cases()


def test_there_are_enough_cases_including_all_negative_rubrics() -> None:
    assert len(CASES) >= 20
    assert sum(all(i["points"] < 0 for i in items) for items, _ in CASES) >= 5
    assert any((reference_score(*case) or 0) < 0 for case in CASES)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_each_pass_scores_as_healthbench_unclipped(index: int) -> None:
    items, grades = CASES[index]
    ours = _our_score(items, grades, random.Random(index))
    expected = reference_score(items, grades)
    if expected is None:
        # HealthBench has no score without positive points; ours is the documented
        # 1 - failed penalty weight / all penalty weight.
        penalty = sum(-i["points"] for i in items)
        present = sum(-i["points"] for i, g in zip(items, grades, strict=True) if g["criteria_met"])
        assert ours == pytest.approx(1 - present / penalty)
    else:
        assert ours == pytest.approx(expected)


def test_the_mean_is_healthbenchs_mean_of_unclipped_then_clipped() -> None:
    rng = random.Random(0)
    ours, theirs = [], []
    for items, grades in CASES:
        expected = reference_score(items, grades)
        if expected is not None:
            theirs.append(expected)
            ours.append(_our_score(items, grades, rng))
    assert mean_score(ours) == pytest.approx(reference_overall(theirs))
    issue = [0.7, -0.3, -3.0]
    assert mean_score(issue) == pytest.approx(reference_overall(issue)) == 0.0
    summary = BatchSummary("b", 3, {}, 0.0, None, {}, [], 0, scores=issue)
    assert summary.mean_score == 0.0  # was 0.233: the mean of scores clipped one by one
    # One pass shown on its own is as stored, the number the report and the export show too
    # (issue 30, finding 3: a run of -0.8 read 0.00 on the Batch page, -0.80 in the report).
    assert [shown_score(s) for s in issue] == [0.7, -0.3, -3.0]


def test_a_pass_is_stored_unclipped() -> None:
    pipeline = PassPipeline.build(None)
    rubric = "- [1] Short {words <= 3}\n- [-3] Shouts {regex: !}"
    evaluation = pipeline.grade_transcript(
        [HumanMessage("Say hi"), AIMessage("Hello there, how are you today!")], rubric
    )
    assert evaluation["score"] == pytest.approx(-3.0)
    values, _ = evaluation_row(evaluation)
    assert values["score"] == pytest.approx(-3.0)


def test_verdicts_keyed_by_healthbench_text_match_the_parsed_criteria() -> None:
    items = [{"criterion": "Advises  seeing a\ndoctor", "points": 5}]
    rubric = criteria_from_healthbench(items)
    assert score_pass(rubric, [{"name": "Advises  seeing a\ndoctor", "passed": True}]) == 1.0
