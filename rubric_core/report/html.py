"""One self-contained HTML report of a batch, an experiment or a run.

The figures come from `report.figures` (the library's summary and agreement functions),
the charts from `rubric_core.ui.charts` (the pages' own builders), plotly.js is inlined
once, and every stored string goes through Jinja2's autoescape. The file makes no
network request when opened (its Content-Security-Policy allows none).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_core.extras import require
from rubric_core.report.figures import Figures, Item, figures_for, rubric_criteria
from rubric_core.report.template import TEMPLATE
from rubric_core.summary import format_rate, score_text

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from markupsafe import Markup

    from rubric_core.store import Store

__all__ = ["figure_json", "render_report", "report_html", "theme_json", "write_report"]

SNIPPET_CHARS = 120
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def figure_json(figure: go.Figure) -> Markup:
    """A figure's JSON for a `<script type="application/json">` block: without its template
    (the pages' theme, ~8 KB a figure, is in the file once: `theme_json`), and with no
    `<`, `>` or `&` that could end the block.

    Examples:
        >>> import plotly.graph_objects as go
        >>> str(figure_json(go.Figure(go.Bar(y=[1], text=["</script>"]))))
        '{"data":[{"text":["\\\\u003c\\\\u002fscript\\\\u003e"],"y":[1],"type":"bar"}],"layout":{}}'
    """
    import plotly.io as pio
    from markupsafe import Markup

    data = figure.to_plotly_json()
    data.get("layout", {}).pop("template", None)
    return Markup(pio.json.to_json_plotly(data).translate(_SCRIPT_SAFE))


def theme_json() -> Markup:
    """The default Plotly template the pages' figures are drawn with, once per file."""
    import plotly.io as pio
    from markupsafe import Markup

    theme = pio.templates[pio.templates.default].to_plotly_json()
    return Markup(json.dumps(theme, separators=(",", ":")).translate(_SCRIPT_SAFE))


def _rate(value: float | None) -> str:
    return format_rate(value)


def _number(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _metrics(figures: Figures) -> list[tuple[str, str]]:
    metrics = [
        ("Runs" if figures.kind != "experiment" else "Gradings", str(figures.total)),
        ("Satisfied", _rate(figures.satisfied_rate)),
        ("Mean score", _number(figures.mean_score)),
    ]
    if figures.kind != "experiment":
        metrics.append(
            ("Passes to satisfied (mean)", _number(figures.mean_iterations_to_satisfied))
        )
    metrics.append(("Grader errors", str(figures.by_status.get("grader_error", 0))))
    if figures.agreement:
        overall = figures.agreement["overall"]
        metrics.append(("Labelled verdicts", str(overall["n"])))
        metrics.append(("Agreement", _rate(overall["agreement"])))
        metrics.append(("Cohen's kappa", _number(overall["kappa"], 3)))
    return metrics


def _verdict(verdict: dict[str, Any]) -> dict[str, str]:
    if verdict.get("insufficient"):
        word, css = "insufficient evidence", ""
    elif verdict.get("passed"):
        word, css = "pass", "pass"
    else:
        word, css = "fail", "fail"
    if verdict.get("checked_by") == "code":
        word += " (code check)"
    return {"name": verdict["name"], "word": word, "css": css, "gap": verdict.get("gap") or ""}


def _item_view(item: Item, number: int, charts: list[str]) -> dict[str, Any]:
    from rubric_core.ui.format import one_line
    from rubric_core.ui.passes import pass_label, pass_score

    last = item.final_criteria
    marks = {True: "✓", False: "✗"}
    return {
        "run_id": item.run_id,
        "input": item.input,
        "snippet": one_line(item.input, SNIPPET_CHARS) or f"(input {number})",
        "status": item.status,
        "score": score_text(item.score),
        "marks": " ".join(
            "?" if c.get("insufficient") else marks[bool(c.get("passed"))] for c in last
        ),
        "charts": charts,
        "passes": [
            {
                "label": pass_label(j) if "sample" not in p else f"Sample {int(p['sample']) + 1}",
                "result": p.get("result") or "",
                "score": score_text(pass_score(p)) if p.get("criteria") else None,
                "explanation": p.get("explanation") or "",
                "draft": p.get("draft") or "",
                "criteria": [_verdict(v) for v in p.get("criteria") or []],
            }
            for j, p in enumerate(item.passes)
        ],
    }


def render_report(figures: Figures, *, item_charts: bool = True) -> str:
    """The report's HTML text.

    Args:
        figures: From `report.figures.figures_for`.
        item_charts: Each input's timeline and heatmap, drawn when its row is opened.
    """
    jinja2 = require("jinja2", "dashboard", feature="HTML reports")
    plotly_offline = require("plotly.offline", "dashboard", feature="HTML reports")
    from rubric_core.ui.agreement import (
        comparison_delta_rows,
        confusion_rows,
        criterion_agreement_rows,
    )
    from rubric_core.ui.charts import (
        heatmap_figure,
        iterations_histogram,
        pass_rate_figure,
        timeline_figure,
    )
    from rubric_core.ui.format import expand_counts

    blocks: list[tuple[str, Markup]] = []

    def chart(figure: go.Figure) -> str:
        name = f"fig-{len(blocks)}"
        blocks.append((name, figure_json(figure)))
        return name

    names = list(figures.rubric["criteria"])
    top: list[str] = []
    if figures.kind == "run" and figures.items:
        passes = figures.items[0].passes
        top += [chart(timeline_figure(passes)), chart(heatmap_figure(passes, names, finished=True))]
    top.append(chart(pass_rate_figure(figures.criterion_rates, title="Pass rate (worst first)")))
    if figures.kind == "batch":
        top.append(chart(iterations_histogram(expand_counts(figures.iterations_to_satisfied))))
    items = []
    for number, item in enumerate(figures.items, start=1):
        charts: list[str] = []
        if item_charts and figures.kind != "run" and item.passes:
            charts = [
                chart(timeline_figure(item.passes)),
                chart(heatmap_figure(item.passes, names, finished=True)),
            ]
        items.append(_item_view(item, number, charts))
    comparison = figures.comparison["comparison"] if figures.comparison else None
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return environment.from_string(TEMPLATE).render(
        title=figures.title,
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        rubric=figures.rubric,
        criteria=rubric_criteria(figures.rubric["text"], names),
        metrics=_metrics(figures),
        by_status=figures.by_status,
        final_pass_rule=figures.final_pass_rule,
        mean_basis=figures.mean_basis or "no scored run",
        rates=[
            {
                "criterion": r["criterion"],
                "passed": r["passed"],
                "total": r["total"],
                "pass rate": _rate(r["pass_rate"]),
            }
            for r in figures.criterion_rates
        ],
        charts=top,
        comparison=comparison_delta_rows(comparison) if comparison else None,
        ident=figures.ident,
        against=figures.against,
        agreement=criterion_agreement_rows(figures.agreement) if figures.agreement else None,
        confusion=confusion_rows(figures.agreement["overall"]) if figures.agreement else None,
        agreement_note=figures.agreement_note,
        against_agreement=criterion_agreement_rows(
            figures.against_agreement, predictor="A", reference="B"
        )
        if figures.against_agreement
        else None,
        items=items,
        item_charts=item_charts and figures.kind != "run",
        figures=[("plotly-theme", theme_json()), *blocks],
        plotly_js=jinja2.utils.markupsafe.Markup(plotly_offline.get_plotlyjs()),
    )


def report_html(
    store: Store,
    *,
    batch_id: str | None = None,
    experiment_id: int | None = None,
    run_id: int | None = None,
    against: int | None = None,
    item_charts: bool = True,
) -> str:
    """The report of exactly one batch, experiment (optionally `against` another) or run.

    Raises:
        InputError: Not exactly one subject, or no such batch.
        StoreError: No such experiment or run.
    """
    figures = figures_for(
        store, batch_id=batch_id, experiment_id=experiment_id, run_id=run_id, against=against
    )
    return render_report(figures, item_charts=item_charts)


def write_report(store: Store, output: str | os.PathLike[str], **subject: Any) -> Path:
    """`report_html` written to `output` by `rubric_core.outputs` rules: a regular file
    through a temporary file renamed into place (with the mode a new file gets), a FIFO or
    device in place, `-` to standard output."""
    from rubric_core.outputs import open_output

    path = Path(output)
    text = report_html(store, **subject)
    if str(output) != "-":
        path.parent.mkdir(parents=True, exist_ok=True)
    with open_output(path, encoding="utf-8", newline=None) as file:
        file.write(text)
    return path
