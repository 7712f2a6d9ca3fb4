"""Issue 21's wording findings on the pages (AppTest): one rule each, read as it is meant.

Grade-only runs say no agent revises them; penalties read absent/present; Review and
Agreement open where the labels are; one demo rubric name; batch pass rates over each
run's final pass; experiments as a user expects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from rubric_core.store import NewRun, RunEnd, Store
from tests.support.jobs import grade_of
from tests.support.pages import RUN_TIMEOUT_S
from tests.support.pages import no_exception as _no_exception
from tests.support.pages import open_page as _page


def _alerts(at: AppTest) -> list[str]:
    return [a.value for kind in ("info", "success", "warning", "error") for a in getattr(at, kind)]


def _graded_run(
    store: Store,
    version_id: int,
    evaluation: dict[str, Any],
    *,
    status: str,
    batch_id: str | None = None,
    agent_kind: str = "graded",
) -> int:
    run_id = store.runs.create(
        NewRun(rubric_version_id=version_id, input="request", agent_model="",
        grader_model="replay:x", max_iterations=1, agent_kind=agent_kind, batch_id=batch_id),
    )  # fmt: skip
    store.passes.record(run_id, evaluation)
    store.runs.finish(run_id, RunEnd(status=status, final_output=evaluation["draft"]))
    return run_id


# ---------------------------------------------------------------- finding 4


def test_runs_page_says_no_agent_revises_a_graded_run(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    with Store(db_path) as store:
        version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        run_id = _graded_run(store, version["id"], make_evaluation(), status="needs_revision")
    _page(app, "runs", run=str(run_id))
    _no_exception(app)
    status = next(a for a in _alerts(app) if a.startswith("**needs revision**"))
    assert "agent" not in status
    assert "graded once" in status


# ---------------------------------------------------------------- finding 7


def test_try_it_and_run_scenario_store_the_demo_under_one_rubric(
    app: AppTest, db_path: Path
) -> None:
    from click.testing import CliRunner

    from app_widgets.session import run_registry
    from rubric_core.cli import cli

    app.button(key="rubrics_try").click().run()
    _no_exception(app)
    handle = run_registry().run(app.session_state["run_watch"])
    assert handle is not None
    handle.stop()
    assert handle.wait(RUN_TIMEOUT_S)
    out = CliRunner().invoke(cli, ["run", "--scenario", "haiku", "--quiet", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    with Store(db_path) as store:
        assert [r["name"] for r in store.rubrics.find()] == ["haiku"]
        assert len(store.rubrics.versions("haiku")) == 1
        runs = store.runs.find(rubric="haiku")
        assert len(runs) == 2


# ---------------------------------------------------------------- finding 8


def test_batch_page_pass_rates_are_the_cli_ones_and_name_the_rule(
    app: AppTest, db_path: Path, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner

    from rubric_core.batch import PASS_RATE_RULE
    from rubric_core.cli import cli

    inputs = tmp_path / "inputs.csv"
    inputs.write_text("input\nfirst\nsecond\n")
    out = CliRunner().invoke(
        cli,
        ["batch", "--scenario", "needs_revision_then_satisfied", "--input-file", str(inputs),
         "--json", "--db", str(db_path)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    _page(app, "batch", batch=summary["batch_id"])
    _no_exception(app)
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    rates = next(c for c in charts if c["layout"]["title"]["text"].startswith(PASS_RATE_RULE))
    cli_rates = [
        f"{r['pass_rate']:.0%} ({r['passed']}/{r['total']})"
        for r in summary["criterion_pass_rates"]
    ]
    assert sorted(rates["data"][0]["text"]) == sorted(cli_rates)


# ---------------------------------------------------------------- finding 10


def _picker(at: AppTest, label: str):
    return next(s for s in at.selectbox if s.label == label)


def test_experiment_pickers_follow_a_finished_experiment_and_rows_are_inputs(
    app: AppTest, db_path: Path
) -> None:
    from app_widgets.session import run_registry

    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value("satisfied_first_try")
    app.button(key="run_use_scenario").click().run()
    with Store(db_path) as store:
        version = store.rubrics.versions("satisfied_first_try")[-1]
        rows = [
            {
                "row": n,
                "input": f"describe bottle {n}",
                "output": f"```text\n{text}\n```",
                "labels": {},
            }
            for n, text in enumerate(["It is cold. It is light.", "It is cold."], start=2)
        ]
        grade_of(
            store, rows, rubric_version_id=version["id"],
            grader_model="replay:satisfied_first_try", grader_tools=["text_stats"],
        )  # fmt: skip
    _page(app, "experiments")
    for latency in (0.0, 1.0):  # the second grades slowly enough to be picked while it runs
        app.selectbox(key="exp_grader_scenario").set_value("satisfied_first_try")
        app.number_input(key="exp_grader_latency").set_value(latency)
        app.multiselect(key="exp_tools").set_value(["text_stats"])
        app.button(key="exp_launch").click().run()
        assert not app.error, [e.value for e in app.error]
    job = run_registry().job(f"experiment-{app.session_state['exp_watch']}")
    # Pick the other way round from the defaults while #2 reads "0 items · running".
    _picker(app, "Experiment A").set_value(2)
    _picker(app, "Experiment B").set_value(1)
    app.run()
    running = _picker(app, "Experiment A")
    assert "running" in running.options[running.index]
    job.thread.join(RUN_TIMEOUT_S)
    app.run()
    _no_exception(app)
    a, b = _picker(app, "Experiment A"), _picker(app, "Experiment B")
    # A browser keeps a picker's choice as the label it showed, and would go on showing
    # "0 items · running" under an unchanged widget: the picker is a new widget once the
    # label changes, with the choice kept.
    assert a.key != running.key
    assert (a.value, b.value) == (2, 1)
    assert all("running" not in option and "2 items" in option for option in a.options)
    matrix = next(d.value for d in app.dataframe if "pass" in d.value.columns)
    assert sorted(matrix["input"]) == ["describe bottle 2", "describe bottle 3"]


def test_runs_grid_shows_a_dash_for_a_running_run_score(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    with Store(db_path) as store:
        version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        store.runs.create(
            NewRun(rubric_version_id=version["id"], input="still going", agent_model="replay:x",
            grader_model="replay:x", max_iterations=3, agent_kind="basic"),
        )  # fmt: skip
    _page(app, "runs")
    _no_exception(app)
    table = app.dataframe[0].value
    assert list(table["score"]) == ["—"]
    assert "None" not in table.astype(str).to_numpy().ravel().tolist()


# ---------------------------------------------------------------- finding 5


def test_run_detail_and_review_read_a_penalty_as_absent_or_present(
    app: AppTest, db_path: Path
) -> None:
    import json

    from click.testing import CliRunner

    from rubric_core.cli import cli
    from rubric_core.ui import PENALTY_HINT

    out = CliRunner().invoke(
        cli, ["run", "--scenario", "release_note_regression", "--quiet", "--db", str(db_path)]
    )
    assert "Status:" in out.output, out.output
    _page(app, "runs", run="1")
    _no_exception(app)
    texts = [t.value for t in app.text]
    assert any(t.startswith("present ✗ Invents a price") for t in texts), texts
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    heatmap = next(c for c in charts if c["data"] and c["data"][0]["type"] == "heatmap")
    assert any(label.endswith("Invents a price (penalty)") for label in heatmap["data"][0]["y"])
    assert any("present ✗ (penalty)" in h for row in heatmap["data"][0]["hovertext"] for h in row)
    _page(app, "review", run="1")
    _no_exception(app)
    captions = [c.value for c in app.caption]
    assert any(c.startswith("Judge: present ✗ (fail) — Remove the price") for c in captions), [
        c for c in captions if "Judge" in c
    ]
    assert PENALTY_HINT in captions


# ---------------------------------------------------------------- finding 6


def test_review_and_agreement_open_where_the_labels_are(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    with Store(db_path) as store:
        v1 = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        for passed in (True, False):
            verdicts = [("has a title", True), ("cites a source", passed, "add one")]
            run_id = _graded_run(store, v1["id"], make_evaluation(verdicts=verdicts),
                                 status="satisfied")  # fmt: skip
            (item,) = store.labels.review_items(run_ids=[run_id])
            store.labels.save(
                int(item["evaluation_id"]), {"has a title": True, "cites a source": True},
                reviewer="ana",
            )  # fmt: skip
        v2 = store.rubrics.save_version("essay", "- has a title\n- cites a source\n- is short")
        verdicts = [("has a title", True), ("cites a source", True), ("is short", True)]
        _graded_run(store, v2["id"], make_evaluation(verdicts=verdicts), status="satisfied")
    _page(app, "agreement")
    _no_exception(app)
    version = app.selectbox(key="agree_version_essay")
    assert version.value == v1["id"]
    assert {m.label: m.value for m in app.metric}["Labelled items (n)"] == "4"
    # Review opens on v2, which has a pass to label, and says v1 holds the labels.
    _page(app, "review")
    _no_exception(app)
    assert app.selectbox(key="review_version_essay").value == v2["id"]
    notes = [i.value for i in app.info]
    assert any(
        n.startswith("v2 has no human label yet; v1 holds labels on 2 passes") for n in notes
    )


def test_review_and_agreement_open_on_a_rubric_with_something_to_see(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    with Store(db_path) as store:
        store.rubrics.save_version("aaa-empty", "- has a title")  # first stored, nothing graded
        graded = store.rubrics.save_version("zzz-graded", "- has a title")
        run_id = _graded_run(
            store, graded["id"], make_evaluation(verdicts=[("has a title", True)]),
            status="satisfied",
        )  # fmt: skip
        (item,) = store.labels.review_items(run_ids=[run_id])
        store.labels.save(int(item["evaluation_id"]), {"has a title": True}, reviewer="ana")
    for page, key in (("review", "review_rubric"), ("agreement", "agree_rubric")):
        _page(app, page)
        _no_exception(app)
        assert app.selectbox(key=key).value == "zzz-graded"
