"""Plotly figures of stored passes and runs: iteration timeline, criteria heatmap, pass rates."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from rubric_core.extras import MissingExtra
from rubric_core.scoring import mean_score

try:
    import plotly.graph_objects as go
except ModuleNotFoundError as exc:  # rubric_core.ui is the dashboard's, plotly its extra
    raise MissingExtra("plotly", "dashboard") from exc

from rubric_core.ui.format import one_line
from rubric_core.ui.passes import (
    Evaluation,
    criterion_matrix,
    find_regressions,
    pass_label,
    pass_score,
)
from rubric_core.wording import criterion_mark, is_penalty

__all__ = [
    "heatmap_figure",
    "iterations_histogram",
    "pass_rate_figure",
    "plain",
    "progress_figure",
    "score_bins",
    "score_histogram",
    "short_label",
    "sort_worst_first",
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
    # Plotly does not wrap an annotation: each line of `message` is a line of its own.
    text = "<br>".join(plain(line) for line in message.splitlines())
    figure.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
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


def _has_stored_scores(evaluations: Sequence[Evaluation]) -> bool:
    return any(evaluation.get("score") is not None for evaluation in evaluations)


def _nothing_judged(evaluations: Sequence[Evaluation], *, waiting: str, finished: bool) -> str:
    """What an empty run chart says: `waiting` while the run goes on, else why it is empty.

    Examples:
        >>> _nothing_judged([{"criteria": []}], waiting="No criterion judged yet", finished=True)
        'No criterion was judged:\\nthe grader gave no verdict\\nin its 1 pass(es)'
    """
    if not finished:
        return waiting
    if not evaluations:
        return "This run ended\nbefore any grading pass"
    return (
        f"No criterion was judged:\nthe grader gave no verdict\nin its {len(evaluations)} pass(es)"
    )


def progress_figure(evaluations: Sequence[Evaluation], *, finished: bool = False) -> go.Figure:
    """The run's progress: one bar per pass, its height the criteria that pass passed.

    Bars are coloured by verdict (one trace per verdict) and labelled `2/3`, a grader
    error (no verdicts) `grader error`; grader seconds, attempts and tokens are in the
    hover. Once the passes carry stored scores, the score of each pass is drawn as a
    line on a second axis (0-100 %). A pass where a criterion regressed (passed before,
    fails now) is marked `↩ regressed` above its bar, naming the criteria. With no pass,
    the figure says so: waiting for one while the run goes on, none once it has `finished`.

    Examples:
        >>> passes = [{"result": "needs_revision",
        ...            "criteria": [{"name": "a", "passed": True}, {"name": "b", "passed": False}]},
        ...           {"result": "needs_revision",
        ...            "criteria": [{"name": "a", "passed": False}, {"name": "b", "passed": False}]}]
        >>> figure = progress_figure(passes)
        >>> [trace.name for trace in figure.data], list(figure.data[0].y), list(figure.data[0].text)
        (['needs_revision'], [1, 0], ['1/2', '0/2'])
        >>> figure.layout.annotations[0].text
        '↩ regressed'
    """
    if not evaluations:
        return _empty_figure(
            _nothing_judged(evaluations, waiting="No grading pass yet", finished=finished)
        )
    labels = [pass_label(j) for j in range(len(evaluations))]
    regressed = _regressed_by_pass(evaluations)
    passed_counts = [
        sum(1 for c in evaluation.get("criteria") or [] if c.get("passed"))
        for evaluation in evaluations
    ]
    most = max((len(e.get("criteria") or []) for e in evaluations), default=0) or 1
    figure = go.Figure()
    for result in dict.fromkeys(str(e.get("result", "")) for e in evaluations):
        xs, ys, texts, hovers = [], [], [], []
        for j, evaluation in enumerate(evaluations):
            if str(evaluation.get("result", "")) != result:
                continue
            criteria = evaluation.get("criteria") or []
            ok = passed_counts[j]
            score = pass_score(evaluation)
            lines = [
                labels[j],
                f"verdict: {plain(result)}",
                f"criteria passed: {ok} / {len(criteria)}",
                f"score: {'n/a' if score is None else f'{score:.2f}'}",
                f"grader seconds: {float(evaluation.get('duration_s') or 0.0):.2f}",
                f"grader attempts: {int(evaluation.get('grader_attempts') or 0)}",
                f"grader tokens: {int(evaluation.get('grader_input_tokens') or 0)} in / "
                f"{int(evaluation.get('grader_output_tokens') or 0)} out",
            ]
            if j in regressed:
                names = "; ".join(plain(short_label(n)) for n in regressed[j])
                lines.append(f"regressed: {names}")
            xs.append(labels[j])
            ys.append(ok)
            texts.append(f"{ok}/{len(criteria)}" if criteria else plain(result.replace("_", " ")))
            hovers.append("<br>".join(lines))
        figure.add_bar(
            x=xs,
            y=ys,
            name=plain(result),
            text=texts,
            textposition="outside",
            cliponaxis=False,
            hovertext=hovers,
            hoverinfo="text",
            marker_color=_RESULT_COLORS.get(result, _UNKNOWN_COLOR),
        )
    scored = _has_stored_scores(evaluations)
    if scored:
        scores = [pass_score(e) for e in evaluations]
        figure.add_scatter(
            x=labels,
            y=scores,
            name="score",
            yaxis="y2",
            mode="lines+markers",
            line={"color": "#37474f", "width": 2},
            marker={"size": 8},
            connectgaps=False,
            hovertemplate="%{x}<br>score: %{y:.0%}<extra></extra>",
        )
    for j, regressed_names in sorted(regressed.items()):
        figure.add_annotation(
            x=labels[j],
            y=passed_counts[j],
            text="↩ regressed",
            hovertext="regressed: " + "; ".join(plain(short_label(n)) for n in regressed_names),
            showarrow=True,
            arrowhead=2,
            ay=-34,
            font={"color": "#c62828"},
        )
    layout: dict[str, Any] = {
        "height": 320,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "xaxis": {"categoryorder": "array", "categoryarray": labels},
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0},
        "yaxis": {
            "title": "criteria passed",
            "range": [0, most * 1.3],
            "dtick": 1 if most <= 10 else None,
        },
        "title": "Criteria passed per pass",
    }
    if scored:
        layout["yaxis2"] = {
            "title": "score",
            "overlaying": "y",
            "side": "right",
            "range": [0, 1.3],
            "tickvals": [0, 0.25, 0.5, 0.75, 1],
            "tickformat": ".0%",
            "showgrid": False,
        }
    figure.update_layout(**layout)
    return figure


def heatmap_figure(
    evaluations: Sequence[Evaluation], criteria: Sequence[str] = (), *, finished: bool = False
) -> go.Figure:
    """Criterion × pass heatmap: pass, fail or not judged; regressions marked.

    A regression (passed in an earlier pass, failed in a later one) gets a ✗
    marker on the failing cell and a "regression" line in its hover text. Rows
    follow `criteria` (the rubric's order) when given, whatever order the grader used.
    With nothing judged it says so: "yet" while the run goes on, not once it has `finished`.
    """
    names, rows = criterion_matrix(evaluations, criteria)
    if not names:
        return _empty_figure(
            _nothing_judged(evaluations, waiting="No criterion judged yet", finished=finished)
        )
    gaps: dict[tuple[str, int], str] = {}
    for j, evaluation in enumerate(evaluations):
        for criterion in evaluation.get("criteria") or []:
            if criterion.get("gap"):
                gaps[(criterion["name"], j)] = str(criterion["gap"])
    regressions = find_regressions(evaluations)
    regressed_cells = {(name, to_pass): from_pass for name, from_pass, to_pass in regressions}
    penalties = {c["name"] for e in evaluations for c in e.get("criteria") or [] if is_penalty(c)}
    x_labels = [pass_label(j) for j in range(len(evaluations))]
    y_labels = [
        f"{i + 1}. {plain(short_label(name))}" + (" (penalty)" if name in penalties else "")
        for i, name in enumerate(names)
    ]
    z: list[list[float]] = []
    cell_text: list[list[str]] = []
    hover: list[list[str]] = []
    for name, row in zip(names, rows, strict=True):
        z_row, text_row, hover_row = [], [], []
        for j, state in enumerate(row):
            word = "not judged" if state is None else ("pass" if state else "fail")
            z_row.append(_MISSING if state is None else (_PASS if state else _FAIL))
            text_row.append({"pass": "✓", "fail": "✗", "not judged": "–"}[word])
            if state is not None and name in penalties:
                word = f"{criterion_mark(state, penalty=True)} (penalty)"
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


def sort_worst_first(rates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pass-rate rows, lowest pass rate first; ties keep their order (the rubric's).

    Examples:
        >>> rows = [{"criterion": "a", "pass_rate": 1.0}, {"criterion": "b", "pass_rate": 0.0},
        ...         {"criterion": "c", "pass_rate": 0.5}]
        >>> [r["criterion"] for r in sort_worst_first(rows)]
        ['b', 'c', 'a']
    """
    return sorted(rates, key=lambda r: float(r.get("pass_rate") or 0.0))


def pass_rate_figure(
    rates: Sequence[Mapping[str, Any]], *, title: str = "Per-criterion pass rate (worst first)"
) -> go.Figure:
    """Per-criterion pass rates as horizontal bars, worst first, every bar labelled.

    `rates` are `Store.passes.criterion_pass_rates` rows. A 0 % criterion still gets its row
    and its label (`0% (0/4)`): a label sits inside a long bar and beside a short one.
    """
    if not rates:
        return _empty_figure("No judged criteria match these filters")
    ordered = sort_worst_first(rates)
    labels = [plain(short_label(r["criterion"])) for r in ordered]
    values = [float(r["pass_rate"] or 0.0) for r in ordered]
    figure = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            text=[
                f"{v:.0%} ({int(r['passed'])}/{int(r['total'])})"
                for v, r in zip(values, ordered, strict=True)
            ],
            textposition=["inside" if v >= 0.6 else "outside" for v in values],
            insidetextanchor="end",
            cliponaxis=False,
            hovertext=[plain(r["criterion"]) for r in ordered],
            hoverinfo="text+x",
            marker_color=["#c62828" if v < 0.5 else "#1976d2" for v in values],
        )
    )
    figure.update_layout(
        height=max(200, 70 + 30 * len(ordered)),
        margin={"l": 10, "r": 30, "t": 30, "b": 10},
        xaxis={"range": [0, 1], "tickformat": ".0%", "title": "pass rate"},
        yaxis={"autorange": "reversed"},
        title=title,
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
    mean = mean_score(scores) or 0.0  # HealthBench's: the mean of unclipped, then clipped
    figure = go.Figure(
        go.Histogram(
            x=[min(1.0, max(0.0, float(s))) for s in scores],  # below 0 in the first bar
            xbins={"start": 0, "end": 1.0001, "size": 0.1},
            marker_color="#1565c0",
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
