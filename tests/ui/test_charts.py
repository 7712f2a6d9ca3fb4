"""Tests of the dashboard's figures and the pure helpers behind them."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from rubric_core.ui import (
    criterion_matrix,
    draft_diff,
    find_regressions,
    flipped_criteria,
    heatmap_figure,
    iterations_histogram,
    pass_rate_figure,
    plain,
    progress_figure,
    short_label,
    timeline_figure,
)


def _pass(verdicts: list[tuple], *, result: str | None = None, **extra: Any) -> dict[str, Any]:
    criteria = []
    for name, passed, *gap in verdicts:
        item: dict[str, Any] = {"name": name, "passed": passed}
        if not passed:
            item["gap"] = gap[0] if gap else f"fix {name}"
        criteria.append(item)
    if result is None:
        result = "satisfied" if all(c["passed"] for c in criteria) else "needs_revision"
    return {
        "result": result,
        "status": result,
        "explanation": extra.pop("explanation", "ok"),
        "criteria": criteria,
        "draft": extra.pop("draft", ""),
        "duration_s": extra.pop("duration_s", 1.0),
        "grader_attempts": 1,
        "grader_input_tokens": 100,
        "grader_output_tokens": 20,
        **extra,
    }


def _grader_error() -> dict[str, Any]:
    return _pass([], result="grader_error", explanation="TimeoutError: grader timed out")


def test_find_regressions_marks_pass_then_fail() -> None:
    passes = [
        _pass([("title", True), ("source", False)]),
        _pass([("title", False, "title vanished"), ("source", True)]),
        _pass([("title", True), ("source", True)]),
    ]
    assert find_regressions(passes) == [("title", 0, 1)]


def test_find_regressions_ignores_fail_then_pass_and_steady_failures() -> None:
    passes = [_pass([("a", False)]), _pass([("a", False)]), _pass([("a", True)])]
    assert find_regressions(passes) == []


def test_find_regressions_counts_each_relapse_once() -> None:
    passes = [_pass([("a", True)]), _pass([("a", False)]), _pass([("a", False)]),
              _pass([("a", True)]), _pass([("a", False)])]  # fmt: skip
    assert find_regressions(passes) == [("a", 0, 1), ("a", 3, 4)]


def test_find_regressions_looks_across_a_grader_error() -> None:
    passes = [_pass([("a", True)]), _grader_error(), _pass([("a", False)])]
    assert find_regressions(passes) == [("a", 0, 2)]


def test_criterion_matrix_marks_unjudged_cells_none() -> None:
    passes = [_pass([("a", True)]), _grader_error(), _pass([("a", False), ("b", True)])]
    names, rows = criterion_matrix(passes)
    assert names == ["a", "b"]
    assert rows == [[True, None, False], [None, None, True]]


def test_flipped_criteria_pairs_each_fix_with_the_gap_that_asked_for_it() -> None:
    before = _pass([("title", False, "add a title"), ("source", True), ("short", True)])
    after = _pass([("title", True), ("source", False, "the source went missing"), ("short", True)])
    flipped = {item["criterion"]: item for item in flipped_criteria(before, after)}
    assert set(flipped) == {"title", "source"}
    assert flipped["title"]["change"] == "fixed"
    assert flipped["title"]["gap"] == "add a title"
    assert flipped["source"]["change"] == "regressed"
    assert flipped["source"]["gap"] == "the source went missing"


def test_flipped_criteria_reports_criteria_judged_in_only_one_pass() -> None:
    flipped = flipped_criteria(_grader_error(), _pass([("a", True)]))
    assert [(f["criterion"], f["change"]) for f in flipped] == [("a", "now judged")]


def test_draft_diff_shows_changed_lines_and_is_empty_for_equal_drafts() -> None:
    diff = draft_diff(
        "cold rain\nold maple drops its red leaves", "cold rain\nold maple drops red leaves"
    )
    assert "-old maple drops its red leaves" in diff
    assert "+old maple drops red leaves" in diff
    assert draft_diff("same", "same") == ""


def test_heatmap_cells_encode_pass_fail_and_missing() -> None:
    passes = [
        _pass([("a", True), ("b", False)]),
        _grader_error(),
        _pass([("a", False), ("b", True)]),
    ]
    figure = heatmap_figure(passes)
    heatmap = next(trace for trace in figure.data if isinstance(trace, go.Heatmap))
    assert [list(row) for row in heatmap.z] == [[1.0, 0.5, 0.0], [0.0, 0.5, 1.0]]
    assert list(heatmap.x) == ["Pass 1", "Pass 2", "Pass 3"]


def test_heatmap_rows_follow_the_rubric_order() -> None:
    passes = [_pass([("second", True), ("first", False)])]
    heatmap = heatmap_figure(passes, ["first", "second", "never judged"]).data[0]
    assert list(heatmap.y) == ["1. first", "2. second"]
    assert [list(row) for row in heatmap.z] == [[0.0], [1.0]]


def test_heatmap_marks_regressions_on_the_failing_cell() -> None:
    passes = [_pass([("a", True), ("b", True)]), _pass([("a", False, "broke"), ("b", True)])]
    figure = heatmap_figure(passes)
    markers = [trace for trace in figure.data if isinstance(trace, go.Scatter)]
    assert len(markers) == 1
    assert list(markers[0].x) == ["Pass 2"]
    assert list(markers[0].y) == ["1. a"]
    heatmap = next(trace for trace in figure.data if isinstance(trace, go.Heatmap))
    assert "regression: passed in Pass 1" in heatmap.hovertext[0][1]
    assert "1 regression" in figure.layout.title.text


def test_heatmap_escapes_model_text_in_labels() -> None:
    passes = [_pass([("<b>bold</b> criterion", False, "<a href='javascript:x'>click</a>")])]
    figure = heatmap_figure(passes)
    heatmap = next(trace for trace in figure.data if isinstance(trace, go.Heatmap))
    assert "<b>" not in heatmap.y[0]
    assert "&lt;b&gt;" in heatmap.y[0]
    assert "<a " not in heatmap.hovertext[0][0]


def test_timeline_has_one_bar_per_pass_coloured_by_verdict() -> None:
    passes = [
        _pass([("a", False)], duration_s=2.0),
        _pass([("a", False)], duration_s=1.5),
        _pass([("a", True)], duration_s=0.5),
    ]
    figure = timeline_figure(passes)
    by_name = {trace.name: trace for trace in figure.data}
    assert set(by_name) == {"needs_revision", "satisfied"}
    assert list(by_name["needs_revision"].x) == ["Pass 1", "Pass 2"]
    assert list(by_name["needs_revision"].y) == [2.0, 1.5]
    assert "grader tokens: 100 in / 20 out" in by_name["satisfied"].hovertext[0]
    assert list(figure.layout.xaxis.categoryarray) == ["Pass 1", "Pass 2", "Pass 3"]


def test_empty_inputs_give_a_figure_that_says_so() -> None:
    for figure, words in (
        (timeline_figure([]), "No grading pass"),
        (heatmap_figure([]), "No criterion"),
        (pass_rate_figure([]), "No judged criteria"),
        (iterations_histogram([]), "No satisfied run"),
    ):
        assert not figure.data
        assert words in figure.layout.annotations[0].text


def test_pass_rate_figure_labels_rates_with_counts() -> None:
    rates = [
        {"criterion": "title", "passed": 3, "total": 4, "pass_rate": 0.75},
        {"criterion": "source", "passed": 0, "total": 4, "pass_rate": 0.0},
    ]
    bar = pass_rate_figure(rates).data[0]
    assert list(bar.x) == [0.0, 0.75]  # worst first (they were in rubric order once)
    assert list(bar.text) == ["0% (0/4)", "75% (3/4)"]


def test_pass_rate_figure_labels_a_zero_bar_beside_it_and_sorts_worst_first() -> None:
    rates = [
        {"criterion": "has a title", "passed": 4, "total": 4, "pass_rate": 1.0},
        {"criterion": "cites a source", "passed": 0, "total": 4, "pass_rate": 0.0},
        {"criterion": "is short", "passed": 1, "total": 4, "pass_rate": 0.25},
        {"criterion": "names the author", "passed": 0, "total": 2, "pass_rate": 0.0},
    ]
    figure = pass_rate_figure(rates)
    bar = figure.data[0]
    # Top to bottom (the y axis is reversed): the two 0 % criteria in rubric order, then up.
    assert list(bar.y) == ["cites a source", "names the author", "is short", "has a title"]
    assert list(bar.text) == ["0% (0/4)", "0% (0/2)", "25% (1/4)", "100% (4/4)"]
    # A zero-width bar cannot hold its label: short bars put it beside the bar, unclipped.
    assert list(bar.textposition) == ["outside", "outside", "outside", "inside"]
    assert bar.cliponaxis is False
    assert figure.layout.yaxis.autorange == "reversed"


def test_progress_plots_criteria_passed_per_pass_and_labels_every_bar() -> None:
    passes = [
        _pass([("a", False), ("b", False), ("c", True)], duration_s=3.0),
        _grader_error(),
        _pass([("a", True), ("b", True), ("c", True)], duration_s=0.01),
    ]
    figure = progress_figure(passes)
    bars = {trace.name: trace for trace in figure.data}
    assert set(bars) == {"needs_revision", "grader_error", "satisfied"}  # no score line yet
    # Heights are criteria passed, not grader seconds: the 0.01 s satisfied pass is the tallest.
    assert list(bars["needs_revision"].y) == [1]
    assert list(bars["satisfied"].y) == [3]
    assert list(bars["satisfied"].text) == ["3/3"]
    assert list(bars["grader_error"].text) == ["grader error"]
    assert "grader seconds: 0.01" in bars["satisfied"].hovertext[0]
    assert figure.layout.yaxis.title.text == "criteria passed"
    assert list(figure.layout.xaxis.categoryarray) == ["Pass 1", "Pass 2", "Pass 3"]


def test_progress_adds_the_score_line_once_passes_carry_scores() -> None:
    passes = [
        _pass([("a", False), ("b", True)], score=0.25),
        _grader_error(),
        _pass([("a", True), ("b", True)], score=1.0),
    ]
    figure = progress_figure(passes)
    (line,) = [trace for trace in figure.data if isinstance(trace, go.Scatter)]
    assert line.name == "score"
    assert line.yaxis == "y2"
    assert list(line.y) == [0.25, None, 1.0]  # the grader error has no score, no point
    assert figure.layout.yaxis2.tickformat == ".0%"


def test_empty_run_charts_say_whether_the_run_is_still_going() -> None:
    errors_only = [_grader_error(), _grader_error()]
    assert "yet" in heatmap_figure(errors_only).layout.annotations[0].text
    finished = heatmap_figure(errors_only, finished=True).layout.annotations[0].text
    assert "yet" not in finished and "2 pass(es)" in finished
    assert "ended<br>before any grading pass" in (
        progress_figure([], finished=True).layout.annotations[0].text
    )


def test_iterations_histogram_counts_runs_per_pass_count_without_gaps() -> None:
    bar = iterations_histogram([1, 3, 3, 1, 1]).data[0]
    assert list(bar.x) == [1, 2, 3]
    assert list(bar.y) == [3, 0, 2]


def test_plain_and_short_label() -> None:
    assert plain("a<b>&") == "a&lt;b&gt;&amp;"
    assert short_label("x" * 100, 10) == "x" * 9 + "…"
    assert short_label("two\nlines") == "two lines"
