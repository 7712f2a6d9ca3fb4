"""Plotly figures of stored passes and runs: iteration timeline, criteria heatmap, pass rates."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from rubric_core.ui.format import one_line
from rubric_core.ui.passes import (
    Evaluation,
    criterion_matrix,
    find_regressions,
    pass_label,
    pass_score,
)

__all__ = [
    "heatmap_figure",
    "iterations_histogram",
    "pass_rate_figure",
    "plain",
    "progress_figure",
    "score_bins",
    "score_histogram",
    "short_label",
    "timeline_figure",
]

_RESULT_COLORS: dict[str, str] = {
    "satisfied": "#2e7d32",
    "needs_revision": "#f9a825",
    "failed": "#c62828",
    "grader_error": "#6a1b9a",
}
_UNKNOWN_COLOR = "#757575"

# Heatmap cell codes: a discrete colour scale over [0, 1].
_FAIL, _MISSING, _PASS = 0.0, 0.5, 1.0
_HEATMAP_SCALE: list[list[Any]] = [
    [0.0, "#e57373"],
    [0.33, "#e57373"],
    [0.33, "#e0e0e0"],
    [0.66, "#e0e0e0"],
    [0.66, "#81c784"],
    [1.0, "#81c784"],
]
_LABEL_CHARS = 48


def plain(text: object) -> str:
    """Escape text for a Plotly label, which renders a subset of HTML.

    Criteria, gaps and explanations come from people and models; escaping keeps a
    `<a href=...>` or `<b>` in them literal instead of rendered.

    Examples:
        >>> plain("<b>x</b> & y")
        '&lt;b&gt;x&lt;/b&gt; &amp; y'
    """
    return html.escape("" if text is None else str(text), quote=False)


def short_label(text: str, limit: int = _LABEL_CHARS) -> str:
    """Cut a label to `limit` characters with an ellipsis, on one line (an axis label).

    Examples:
        >>> short_label("a very long criterion indeed", 10)
        'a very lo…'
    """
    return one_line(text, limit)


def _empty_figure(message: str) -> go.Figure:
    figure = go.Figure()
    figure.add_annotation(
        text=plain(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
    )
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    figure.update_layout(height=160, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return figure


def timeline_figure(evaluations: Sequence[Evaluation]) -> go.Figure:
    """The iteration timeline: one bar per pass, its height the pass's duration.

    Each bar is coloured and labelled by the pass's verdict; hovering shows the
    loop status, grader attempts and grader tokens.
    """
    if not evaluations:
        return _empty_figure("No grading pass yet")
    figure = go.Figure()
    for result in dict.fromkeys(str(e.get("result", "")) for e in evaluations):
        xs, ys, texts, hovers = [], [], [], []
        for j, evaluation in enumerate(evaluations):
            if str(evaluation.get("result", "")) != result:
                continue
            tokens_in = int(evaluation.get("grader_input_tokens") or 0)
            tokens_out = int(evaluation.get("grader_output_tokens") or 0)
            duration = float(evaluation.get("duration_s") or 0.0)
            xs.append(pass_label(j))
            ys.append(duration)
            texts.append(plain(result))
            hovers.append(
                f"{pass_label(j)}<br>verdict: {plain(result)}"
                f"<br>status: {plain(evaluation.get('status', ''))}"
                f"<br>duration: {duration:.2f} s"
                f"<br>grader attempts: {int(evaluation.get('grader_attempts') or 0)}"
                f"<br>grader tokens: {tokens_in} in / {tokens_out} out"
            )
        figure.add_bar(
            x=xs,
            y=ys,
            name=plain(result),
            text=texts,
            textposition="outside",
            hovertext=hovers,
            hoverinfo="text",
            marker_color=_RESULT_COLORS.get(result, _UNKNOWN_COLOR),
        )
    figure.update_layout(
        height=280,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={
            "title": "grading pass",
            "categoryorder": "array",
            "categoryarray": [pass_label(j) for j in range(len(evaluations))],
        },
        yaxis={"title": "seconds"},
        legend_title_text="verdict",
        title="Iteration timeline",
    )
    return figure


def _regressed_by_pass(evaluations: Sequence[Evaluation]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for name, _from_pass, to_pass in find_regressions(evaluations):
        found.setdefault(to_pass, []).append(name)
    return found


def progress_figure(evaluations: Sequence[Evaluation]) -> go.Figure:
    """The run's progress: one bar per pass, its height the pass's score.

    Bars are coloured by verdict (one trace per verdict) and labelled with the criteria
    passed (`2/3`); grader seconds, attempts and tokens are in the hover. A pass where
    a criterion regressed (passed before, fails now) is marked `↩ regressed` above its
    bar, naming the criteria. A pass with no score (a grader error) has no bar height.

    Examples:
        >>> passes = [{"result": "needs_revision", "score": 0.5,
        ...            "criteria": [{"name": "a", "passed": True}, {"name": "b", "passed": False}]},
        ...           {"result": "needs_revision", "score": 0.0,
        ...            "criteria": [{"name": "a", "passed": False}, {"name": "b", "passed": False}]}]
        >>> figure = progress_figure(passes)
        >>> [trace.name for trace in figure.data], list(figure.data[0].text)
        (['needs_revision'], ['1/2 passed', '0/2 passed'])
        >>> figure.layout.annotations[0].text
        '↩ regressed'
    """
    if not evaluations:
        return _empty_figure("No grading pass yet")
    labels = [pass_label(j) for j in range(len(evaluations))]
    regressed = _regressed_by_pass(evaluations)
    figure = go.Figure()
    scores: list[float] = []
    for result in dict.fromkeys(str(e.get("result", "")) for e in evaluations):
        xs, ys, texts, hovers = [], [], [], []
        for j, evaluation in enumerate(evaluations):
            if str(evaluation.get("result", "")) != result:
                continue
            criteria = evaluation.get("criteria") or []
            ok = sum(1 for c in criteria if c.get("passed"))
            score = pass_score(evaluation)
            lines = [
                labels[j],
                f"verdict: {plain(result)}",
                f"score: {'n/a' if score is None else f'{score:.2f}'}",
                f"criteria passed: {ok} / {len(criteria)}",
                f"grader seconds: {float(evaluation.get('duration_s') or 0.0):.2f}",
                f"grader attempts: {int(evaluation.get('grader_attempts') or 0)}",
                f"grader tokens: {int(evaluation.get('grader_input_tokens') or 0)} in / "
                f"{int(evaluation.get('grader_output_tokens') or 0)} out",
            ]
            if j in regressed:
                names = "; ".join(plain(short_label(n)) for n in regressed[j])
                lines.append(f"regressed: {names}")
            xs.append(labels[j])
            ys.append(0.0 if score is None else score)
            texts.append(f"{ok}/{len(criteria)} passed" if criteria else plain(result))
            hovers.append("<br>".join(lines))
            scores.append(0.0 if score is None else score)
        figure.add_bar(
            x=xs,
            y=ys,
            name=plain(result),
            text=texts,
            textposition="inside",
            insidetextanchor="end",
            hovertext=hovers,
            hoverinfo="text",
            marker_color=_RESULT_COLORS.get(result, _UNKNOWN_COLOR),
        )
    for j, regressed_names in sorted(regressed.items()):
        figure.add_annotation(
            x=labels[j],
            y=pass_score(evaluations[j]) or 0.0,
            text="↩ regressed",
            hovertext="regressed: " + "; ".join(plain(short_label(n)) for n in regressed_names),
            showarrow=True,
            arrowhead=2,
            ay=-28,
            font={"color": "#c62828"},
        )
    figure.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": "grading pass", "categoryorder": "array", "categoryarray": labels},
        yaxis={"title": "score", "range": [0, 1.18], "tickformat": ".0%"},
        legend_title_text="verdict",
        title="Score per pass (hover for grader seconds)",
    )
    return figure


def heatmap_figure(evaluations: Sequence[Evaluation], criteria: Sequence[str] = ()) -> go.Figure:
    """Criterion × pass heatmap: pass, fail or not judged; regressions marked.

    A regression (passed in an earlier pass, failed in a later one) gets a ✗
    marker on the failing cell and a "regression" line in its hover text. Rows
    follow `criteria` (the rubric's order) when given, whatever order the grader used.
    """
    names, rows = criterion_matrix(evaluations, criteria)
    if not names:
        return _empty_figure("No criterion judged yet")
    gaps: dict[tuple[str, int], str] = {}
    for j, evaluation in enumerate(evaluations):
        for criterion in evaluation.get("criteria") or []:
            if criterion.get("gap"):
                gaps[(criterion["name"], j)] = str(criterion["gap"])
    regressions = find_regressions(evaluations)
    regressed_cells = {(name, to_pass): from_pass for name, from_pass, to_pass in regressions}
    x_labels = [pass_label(j) for j in range(len(evaluations))]
    y_labels = [f"{i + 1}. {plain(short_label(name))}" for i, name in enumerate(names)]
    z: list[list[float]] = []
    cell_text: list[list[str]] = []
    hover: list[list[str]] = []
    for name, row in zip(names, rows, strict=True):
        z_row, text_row, hover_row = [], [], []
        for j, state in enumerate(row):
            word = "not judged" if state is None else ("pass" if state else "fail")
            z_row.append(_MISSING if state is None else (_PASS if state else _FAIL))
            text_row.append({"pass": "✓", "fail": "✗", "not judged": "–"}[word])
            lines = [plain(short_label(name, 80)), f"{x_labels[j]}: {word}"]
            if (name, j) in regressed_cells:
                lines.append(f"regression: passed in {x_labels[regressed_cells[(name, j)]]}")
            if (name, j) in gaps:
                lines.append("gap: " + plain(short_label(gaps[(name, j)], 160)))
            hover_row.append("<br>".join(lines))
        z.append(z_row)
        cell_text.append(text_row)
        hover.append(hover_row)
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=x_labels,
            y=y_labels,
            zmin=0,
            zmax=1,
            colorscale=_HEATMAP_SCALE,
            showscale=False,
            text=cell_text,
            texttemplate="%{text}",
            hovertext=hover,
            hoverinfo="text",
            xgap=2,
            ygap=2,
        )
    )
    if regressions:
        figure.add_scatter(
            x=[x_labels[to_pass] for _, _, to_pass in regressions],
            y=[y_labels[names.index(name)] for name, _, _ in regressions],
            mode="markers",
            marker={"symbol": "x-thin-open", "size": 26, "line": {"width": 3}, "color": "#b71c1c"},
            name="regression",
            hoverinfo="skip",
        )
    figure.update_layout(
        height=max(200, 60 + 34 * len(names)),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis={"autorange": "reversed"},
        xaxis={"side": "top"},
        title="Criteria by pass" + (f" — {len(regressions)} regression(s)" if regressions else ""),
        showlegend=bool(regressions),
    )
    return figure


def pass_rate_figure(rates: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Per-criterion pass rates as horizontal bars (rows from `Store.criterion_pass_rates`)."""
    if not rates:
        return _empty_figure("No judged criteria match these filters")
    labels = [plain(short_label(r["criterion"])) for r in rates]
    values = [float(r["pass_rate"] or 0.0) for r in rates]
    figure = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            text=[
                f"{v:.0%} ({int(r['passed'])}/{int(r['total'])})"
                for v, r in zip(values, rates, strict=True)
            ],
            textposition="auto",
            hovertext=[plain(r["criterion"]) for r in rates],
            marker_color="#1976d2",
        )
    )
    figure.update_layout(
        height=max(200, 60 + 30 * len(rates)),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"range": [0, 1], "tickformat": ".0%", "title": "pass rate"},
        yaxis={"autorange": "reversed"},
        title="Per-criterion pass rate",
    )
    return figure


def iterations_histogram(iterations: Sequence[int]) -> go.Figure:
    """How many grading passes satisfied runs needed (one bar per pass count)."""
    if not iterations:
        return _empty_figure("No satisfied run yet")
    counts: dict[int, int] = {}
    for value in iterations:
        counts[int(value)] = counts.get(int(value), 0) + 1
    xs = list(range(1, max(counts) + 1))
    figure = go.Figure(go.Bar(x=xs, y=[counts.get(x, 0) for x in xs], marker_color="#2e7d32"))
    figure.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": "grading passes to satisfied", "dtick": 1},
        yaxis={"title": "runs"},
        title="Iterations to satisfied",
    )
    return figure


def score_histogram(scores: Sequence[float]) -> go.Figure:
    """The distribution of run scores in a batch: ten bins over [0, 1], mean marked.

    Examples:
        >>> score_histogram([0.5, 1.0]).layout.title.text
        'Score distribution (mean 0.75)'
    """
    if not scores:
        return _empty_figure("No scored run yet")
    mean = sum(scores) / len(scores)
    figure = go.Figure(
        go.Histogram(
            x=list(scores), xbins={"start": 0, "end": 1.0001, "size": 0.1}, marker_color="#1565c0"
        )
    )
    figure.add_vline(x=mean, line_dash="dash", line_color="#c62828")
    figure.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": "score", "range": [0, 1]},
        yaxis={"title": "runs"},
        title=f"Score distribution (mean {mean:.2f})",
        bargap=0.05,
    )
    return figure


def score_bins(scores: Sequence[float], bins: int = 10) -> list[dict[str, Any]]:
    """Runs per score band, for a bar chart of a batch's score distribution.

    Examples:
        >>> [row["runs"] for row in score_bins([0.05, 0.5, 1.0], bins=4)]
        [1, 0, 1, 1]
        >>> score_bins([0.05], bins=2)[0]["score"]
        '0.0–0.5'
    """
    counts = [0] * bins
    for score in scores:
        counts[min(bins - 1, max(0, int(float(score) * bins)))] += 1
    return [
        {"score": f"{i / bins:.1f}–{(i + 1) / bins:.1f}", "runs": count}
        for i, count in enumerate(counts)
    ]
