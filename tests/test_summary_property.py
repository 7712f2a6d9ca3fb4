"""Every front door gives the same figures for any store: a property test (Hypothesis).

Random batches (runs with 0-4 passes, penalties, grader errors, unfinished runs, judge,
replay, person and checks graders, labels) are read by the Batch page's model, the CLI's
`gate --json`, the report's figures, the gate's Markdown summary, and recomputed from the
CSV export; satisfied rate, mean score, per-criterion pass rates and counts must agree.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections import Counter

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_core.cli import cli
from rubric_core.report.figures import figures_for
from rubric_core.report.gate import markdown_summary
from rubric_core.scoring import mean_score
from rubric_core.store import RunEnd, Store
from rubric_core.summary import format_rate, score_text, summary_for_batch
from rubric_core.ui.batches import batch_input_rows, final_pass_verdicts
from tests.support.store import make_evaluation, new_run

RUBRIC = "- [2] Names the product\n- Cites the date\n- [-3] Invents a price"
CRITERIA = ("Names the product", "Cites the date", "Invents a price")
GRADERS = ("openai:gpt-4o-mini", "replay:article-grader", "human:ana", "checks")

verdicts = st.tuples(*(st.booleans() for _ in CRITERIA))
a_pass = st.one_of(st.none(), verdicts)  # None: a grader_error pass, no verdicts
a_run = st.fixed_dictionaries(
    {
        "grader": st.sampled_from(GRADERS),
        "passes": st.lists(a_pass, max_size=4),
        "finished": st.booleans(),
        "labelled": st.booleans(),
    }
)


def _seed(store: Store, runs: list[dict]) -> None:
    version = store.rubrics.save_version("article", RUBRIC)
    clock = 1_700_000_000.0
    for index, spec in enumerate(runs):
        run_id = new_run(
            store, version["id"], grader_model=spec["grader"], batch_id="b", input_index=index
        )
        stored = None
        for iteration, passed in enumerate(spec["passes"]):
            clock += 1
            if passed is None:
                evaluation = make_evaluation(
                    iteration=iteration, verdicts=(), result="grader_error", started_at=clock
                )
            else:
                evaluation = make_evaluation(
                    iteration=iteration,
                    verdicts=list(zip(CRITERIA, passed, strict=True)),
                    started_at=clock,
                )
            stored = store.passes.record(run_id, evaluation)
        if spec["labelled"] and stored is not None and spec["passes"][-1] is not None:
            store.labels.save(stored, {CRITERIA[0]: True}, reviewer="bo")
        if spec["finished"]:
            passes = store.passes.of_run(run_id)
            last = passes[-1] if passes else None
            status = "error" if last is None else str(last["result"])
            if status == "needs_revision":
                status = "max_iterations_reached"
            store.runs.finish(
                run_id, RunEnd(status=status, score=None if last is None else last.get("score"))
            )


def _from_csv(db: str) -> dict:
    """The figures recomputed from the CSV export alone (runs and criteria datasets)."""
    runner = CliRunner()
    runs_csv = runner.invoke(
        cli, ["export", "--dataset", "runs", "--batch", "b", "--db", db], catch_exceptions=False
    ).output
    criteria_csv = runner.invoke(
        cli, ["export", "--dataset", "criteria", "--batch", "b", "--db", db], catch_exceptions=False
    ).output
    runs = list(csv.DictReader(io.StringIO(runs_csv)))
    statuses = Counter(row["status"] for row in runs)
    ended = sum(n for status, n in statuses.items() if status != "running")
    scores = [float(row["score"]) for row in runs if row["score"] != ""]
    final: dict[str, tuple[str, int]] = {}
    rows = list(csv.DictReader(io.StringIO(criteria_csv)))
    for row in rows:  # the final pass: latest started_at, then highest id
        key = (row["started_at"], int(row["evaluation_id"]))
        final[row["run_id"]] = max(final.get(row["run_id"], key), key)
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for row in rows:
        if (
            row["criterion"]
            and (row["started_at"], int(row["evaluation_id"])) == final[row["run_id"]]
        ):
            total[row["criterion"]] += 1
            passed[row["criterion"]] += row["passed"] in ("true", "True", "1")
    return {
        "total": len(runs),
        "satisfied_rate": statuses["satisfied"] / ended if ended else 0.0,
        "mean_score": mean_score(scores),
        "scores": sorted(scores),
        "rates": {name: (passed[name], total[name]) for name in total},
    }


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs=st.lists(a_run, min_size=1, max_size=5))
def test_every_front_door_gives_the_same_figures(tmp_path_factory, runs):
    """Guards issue 30's one summary layer: on today's main the experiment's mean, the
    scores a page shows and the gate's JSON disagreed (or did not exist)."""
    db = str(tmp_path_factory.mktemp("prop") / f"{uuid.uuid4().hex}.db")
    with Store(db) as store:
        _seed(store, runs)
        summary = summary_for_batch(store, "b")
        figures = figures_for(store, batch_id="b")
        page_rows = batch_input_rows(store.runs.of_batch("b"), final_pass_verdicts(store, "b"), [])
        page_verdicts = final_pass_verdicts(store, "b")
    gate = json.loads(
        CliRunner().invoke(cli, ["gate", "--batch", "b", "--json", "--db", db]).output
    )
    markdown = markdown_summary(figures, [])
    recomputed = _from_csv(db)

    rates = {r["criterion"]: (r["passed"], r["total"]) for r in summary.criterion_pass_rates}
    assert recomputed["rates"] == rates
    assert {r["criterion"]: (r["passed"], r["total"]) for r in figures.criterion_rates} == rates
    assert {r["criterion"]: (r["passed"], r["total"]) for r in gate["criterion_pass_rates"]} == (
        rates
    )
    page_counts: Counter[str] = Counter()
    page_passed: Counter[str] = Counter()
    for marks in page_verdicts.values():
        for name, mark in marks.items():
            page_counts[name] += 1
            page_passed[name] += mark == "pass"
    assert {n: (page_passed[n], page_counts[n]) for n in page_counts} == rates

    for figure in (figures.satisfied_rate, gate["satisfied_rate"]):
        assert figure == summary.satisfied_rate == recomputed["satisfied_rate"]
    for figure in (figures.mean_score, gate["mean_score"], recomputed["mean_score"]):
        assert figure == summary.mean_score
    assert sorted(summary.scores) == sorted(gate["scores"]) == recomputed["scores"]
    assert summary.total == figures.total == gate["total"] == recomputed["total"] == len(runs)
    assert summary.finished == gate["finished"] == sum(r["finished"] for r in runs)

    shown = sorted(row["score"] for row in page_rows if "score" in row and row["score"] != "—")
    assert shown == sorted(score_text(s) for s in summary.scores)
    assert f"satisfied {format_rate(summary.satisfied_rate)}" in markdown
    mean = "n/a" if summary.mean_score is None else f"{summary.mean_score:.3f}"
    assert f"mean score {mean}" in markdown
    for name, (passed, total) in rates.items():
        assert f"| {passed}/{total} |" in markdown and name in markdown
