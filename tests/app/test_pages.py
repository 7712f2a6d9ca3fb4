"""Every dashboard page through streamlit.testing.v1.AppTest, against a store in tmp_path."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from rubric_core.store import NewRun, RunEnd, Store
from tests.support.jobs import grade_of
from tests.support.pages import APP, RUN_TIMEOUT_S, SCENARIO
from tests.support.pages import no_exception as _no_exception
from tests.support.pages import open_page as _page
from tests.support.pages import texts as _texts


def _charts(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _launch_replay_run(at: AppTest, scenario: str = SCENARIO) -> int:
    """Load a replay scenario on the Run page, launch it, wait for it, redraw; returns its id."""
    from app_widgets.session import run_registry

    _page(at, "run")
    at.selectbox(key="run_scenario_helper").set_value(scenario)
    at.button(key="run_use_scenario").click().run()
    at.button(key="run_launch").click().run()
    _no_exception(at)
    assert not at.error, [e.value for e in at.error]
    run_id = at.session_state["run_watch"]
    handle = run_registry().run(run_id)
    assert handle is not None
    assert handle.wait(RUN_TIMEOUT_S), "the replay run did not finish"
    at.run()
    return run_id


# ---------------------------------------------------------------- frame


def test_sidebar_names_the_database_and_says_models_replay(app: AppTest, db_path: Path) -> None:
    _no_exception(app)
    assert str(db_path) in [c.value for c in app.sidebar.code]
    sidebar_info = " ".join(i.value for i in app.sidebar.info)
    assert "replay scripted responses" in sidebar_info


def test_sidebar_says_real_models_when_a_key_is_set(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    at = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()
    assert "Real models" in " ".join(s.value for s in at.sidebar.success)


# ---------------------------------------------------------------- Rubrics


def test_rubrics_parses_as_you_type_warns_about_tools_and_saves_versions(app: AppTest) -> None:
    app.text_input(key="rubric_name").input("haiku")
    app.text_area(key="rubric_text").input("- three lines\n- 5/7/5 syllables\n\n# notes\n")
    app.run()
    assert "1. three lines" in _texts(app)
    assert "2. 5/7/5 syllables" in _texts(app)
    assert any("count_syllables" in w.value for w in app.warning)

    app.text_input(key="rubric_tags").input("Poetry, demo")
    app.button(key="rubric_save").click().run()
    _no_exception(app)
    assert any("Saved haiku v1" in s.value for s in app.success)

    app.text_area(key="rubric_text").input("- three lines\n- 5/7/5 syllables\n- about rain")
    app.button(key="rubric_save").click().run()
    assert any("Saved haiku v2" in s.value for s in app.success)
    diff = next(c.value for c in app.code if c.language == "diff")
    assert "+- about rain" in diff
    assert "+ added: about rain" in _texts(app)
    table = app.dataframe[0].value
    assert list(table["rubric"]) == ["haiku"]
    assert set(table["tags"].iloc[0].split(", ")) == {"poetry", "demo"}
    assert list(table["latest"]) == ["v2"]


def test_rubrics_template_fills_the_editor(app: AppTest) -> None:
    app.selectbox(key="rubric_template").set_value("Haiku")
    app.button(key="rubric_use_template").click()  # the Try-it button now comes first
    app.run()
    assert "syllables" in app.text_area(key="rubric_text").value
    assert any(text.startswith("1. ") for text in _texts(app))


def test_rubrics_empty_rubric_is_refused_in_place(app: AppTest) -> None:
    app.text_input(key="rubric_name").input("empty")
    app.text_area(key="rubric_text").input("\n# just a heading\n")
    app.button(key="rubric_save").click().run()
    _no_exception(app)
    assert any("rubric is empty" in e.value for e in app.error)


def test_rubrics_one_megabyte_rubric_is_refused_in_place(app: AppTest) -> None:
    app.text_input(key="rubric_name").input("huge")
    app.text_area(key="rubric_text").input("- " + "x" * 1_000_000)
    app.button(key="rubric_save").click().run()
    _no_exception(app)
    assert any("the limit is 20,000" in e.value for e in app.error)
    assert not app.dataframe  # nothing was stored


# ---------------------------------------------------------------- Run


def test_run_page_launches_a_replay_run_and_shows_its_passes(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    _no_exception(app)
    assert any("satisfied" in s.value for s in app.success)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Grading passes"] == "2 / 3"
    timeline, heatmap = _charts(app)[:2]
    # Bars of criteria passed per pass, one trace per verdict, and the score line.
    bars = [trace for trace in timeline["data"] if trace["type"] == "bar"]
    assert [bar["name"] for bar in bars] == ["needs_revision", "satisfied"]
    assert [trace["name"] for trace in timeline["data"] if trace["type"] == "scatter"] == ["score"]
    assert heatmap["data"][0]["x"] == ["Pass 1", "Pass 2"]
    assert any(f"Run #{run_id}" in h.value for h in app.subheader)
    # The final output is shown as a code block (text), never as Markdown or HTML.
    assert any("Widget 2.0" in c.value for c in app.code)


def test_run_keeps_going_across_pages_and_can_be_stopped(app: AppTest) -> None:
    from app_widgets.session import run_registry

    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value("max_iterations")
    app.button(key="run_use_scenario").click().run()
    slow = "replay:max_iterations?latency_s=0.5"  # slow enough to still be running below
    for role in ("agent", "grader"):
        app.radio(key=f"run_{role}_source").set_value("provider").run()
        app.text_input(key=f"run_{role}_provider").input(slow)
    app.number_input(key="run_max_iterations").set_value(20)
    app.button(key="run_launch").click().run()
    _no_exception(app)
    run_id = app.session_state["run_watch"]
    handle = run_registry().run(run_id)

    _page(app, "runs")  # the person looks elsewhere; the run goes on
    assert not handle.done()
    assert "running" in app.dataframe[0].value["status"].iloc[0]
    _page(app, "run")  # and comes back to it
    assert any(f"Run #{run_id}" in h.value for h in app.subheader)
    assert app.sidebar.caption and any(f"#{run_id}" in c.value for c in app.sidebar.caption)
    app.button(key=f"run_stop_{run_id}").click().run()
    assert handle.wait(RUN_TIMEOUT_S)
    app.run()
    _no_exception(app)
    assert any("interrupted" in w.value for w in app.warning)


def test_run_and_batch_inputs_carry_their_defaults_as_the_widgets_own(
    app: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A widget's own default is what the browser falls back to (and sends back) whenever it
    mounts the widget without a value of its own; a default kept only in session state left
    Max iterations' own default at min_value, so a run could silently get a single pass."""
    from rubric_core.schema import DEFAULT_MAX_ITERATIONS

    monkeypatch.setenv("RUBRIC_STUDIO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RUBRIC_STUDIO_LLM_MODEL", "tiny")
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    for page in ("run", "batch"):
        _page(app, page)
        _no_exception(app)
        max_iterations = app.number_input(key=f"{page}_max_iterations")
        assert max_iterations.proto.default == DEFAULT_MAX_ITERATIONS
        assert max_iterations.value == DEFAULT_MAX_ITERATIONS
        if page == "batch":
            assert app.number_input(key="batch_concurrency").proto.default == 4
        app.radio(key=f"{page}_grader_source").set_value("base_url").run()
        base_url = app.text_input(key=f"{page}_grader_base_url")
        assert base_url.proto.default == base_url.value == "http://127.0.0.1:9/v1"
        model = app.text_input(key=f"{page}_grader_base_url_model")
        assert model.proto.default == model.value == "tiny"

    # A value the person sets still wins over the default, rerun after rerun.
    _page(app, "run")
    app.number_input(key="run_max_iterations").set_value(5).run()
    app.run()
    assert app.number_input(key="run_max_iterations").value == 5
    _no_exception(app)


def test_run_page_missing_api_key_is_explained_in_place(app: AppTest) -> None:
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    app.radio(key="run_agent_source").set_value("provider").run()
    app.text_input(key="run_agent_provider").input("openai:gpt-4.1-mini")
    app.radio(key="run_grader_source").set_value("provider").run()
    app.text_input(key="run_grader_provider").input("openai:gpt-4.1-mini")
    app.button(key="run_launch").click().run()
    _no_exception(app)
    message = " ".join(e.value for e in app.error)
    assert "OPENAI_API_KEY" in message
    assert ".streamlit/secrets.toml" in message


def test_run_page_unknown_model_string_is_refused_in_place(app: AppTest) -> None:
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    app.radio(key="run_agent_source").set_value("provider").run()
    app.text_input(key="run_agent_provider").input("nosuchprovider:model-x")
    app.button(key="run_launch").click().run()
    _no_exception(app)
    message = " ".join(e.value for e in app.error)
    assert "nosuchprovider" in message and "agent_model" in message
    malformed = app.text_input(key="run_agent_provider").input("just-a-name")
    malformed.run()
    assert any("provider:model-id" in e.value for e in app.error)


def test_run_page_empty_input_is_refused_in_place(app: AppTest) -> None:
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    app.text_area(key="run_input").input("   ")
    app.button(key="run_launch").click().run()
    _no_exception(app)
    assert any("input: is empty" in e.value for e in app.error)


def test_run_page_without_rubrics_points_to_the_rubrics_page(app: AppTest) -> None:
    _page(app, "run")
    _no_exception(app)
    assert any("Rubrics page" in i.value for i in app.info)


# ---------------------------------------------------------------- Runs


def _runs_page_shows_one_satisfied_run(at: AppTest, run_id: int) -> None:
    _page(at, "runs")
    _no_exception(at)
    table = at.dataframe[0].value
    assert list(table["run"]) == [run_id]
    assert "satisfied" in table["status"].iloc[0]
    assert any(f"Run #{run_id}" in h.value for h in at.subheader)


def test_runs_page_lists_the_run_and_shows_its_detail(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    _runs_page_shows_one_satisfied_run(app, run_id)
    # Each pass's explanation and gaps (the Passes tab, open at first).
    assert any("Pass 1" in e.label and "needs revision" in e.label for e in app.expander)
    assert any(t.startswith("✗ ") and "→" in t for t in _texts(app))
    assert not app.chat_message  # the Transcript tab is drawn only once opened
    charts = len(_charts(app))  # the timeline and the heatmap; grader seconds once opened
    app.session_state["runs_detail_seconds_open"] = True
    app.run()
    assert len(_charts(app)) == charts + 1
    # Transcript: the grader's injected feedback is labelled as the grader's.
    app.session_state["runs_detail_tab"] = "Transcript"
    app.run()
    grader_turns = [m for m in app.chat_message if m.name == "grader"]
    assert grader_turns
    assert any("Grader feedback" in c.value for c in grader_turns[0].caption)


def test_runs_page_shows_pass_rates_on_request(app: AppTest) -> None:
    _launch_replay_run(app)
    _page(app, "runs")
    charts_before = len(_charts(app))
    app.toggle(key="runs_show_rates").set_value(True).run()
    _no_exception(app)
    rates = _charts(app)[0]
    assert len(_charts(app)) == charts_before + 1
    bar = rates["data"][0]
    assert bar["text"] == ["50% (1/2)", "100% (2/2)", "100% (2/2)"]  # worst first


def test_runs_page_filters_and_says_when_nothing_matches(app: AppTest) -> None:
    _launch_replay_run(app)
    _page(app, "runs")
    app.selectbox(key="runs_status").set_value("failed").run()
    _no_exception(app)
    assert any("No stored run matches" in i.value for i in app.info)
    app.selectbox(key="runs_status").set_value("satisfied").run()
    assert len(app.dataframe[0].value) == 1


def test_runs_page_shows_model_text_as_text_never_markdown(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    hostile = "<img src=x onerror=alert(1)> **bold** [click](javascript:alert(1))"
    store = Store(db_path)
    try:
        version = store.rubrics.save_version("hostile", "- is safe\n- is short")
        run_id = store.runs.create(
            NewRun(rubric_version_id=version["id"], input=hostile, agent_model="replay:x",
            grader_model="replay:x", grader_tools=[], max_iterations=3, agent_kind="basic"),
        )  # fmt: skip
        store.passes.record(
            run_id,
            make_evaluation(
                iteration=0,
                verdicts=[("is safe", True), ("is short", False, hostile)],
                explanation=hostile,
                draft=hostile,
            ),
        )
        store.passes.record(
            run_id,
            make_evaluation(
                iteration=1, verdicts=[("is safe", False, hostile), ("is short", True)],
                explanation=hostile, draft=hostile,
            ),
        )  # fmt: skip
        store.runs.finish(run_id, RunEnd(status="max_iterations_reached", final_output=hostile))
    finally:
        store.close()
    app.run()
    _page(app, "runs")
    _no_exception(app)
    assert any(hostile in t for t in _texts(app))  # explanation and gaps, as text (Passes tab)
    assert not any(hostile in c.value for c in app.code)  # only the open tab is drawn
    app.session_state["runs_detail_tab"] = "Final output"
    app.run()
    assert any(hostile in c.value for c in app.code)  # final output, as code
    rendered = [m.value for m in app.markdown] + [c.value for c in app.caption]
    rendered += [
        a.value for kind in ("error", "warning", "info", "success") for a in getattr(app, kind)
    ]
    assert not any("<img" in value or "](javascript" in value for value in rendered)


# ---------------------------------------------------------------- Compare


def test_compare_page_diffs_two_passes_and_lists_flipped_criteria(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    _page(app, "compare")
    _no_exception(app)
    assert app.selectbox(key="compare_run").value == run_id
    diff = next(c.value for c in app.code if c.language == "diff")
    assert diff.startswith("--- Pass 1\n+++ Pass 2")
    assert any(t.startswith("✅ fixed: ") for t in _texts(app))
    assert any(t.strip().startswith("→ ") for t in _texts(app))


def test_compare_page_puts_two_runs_side_by_side(app: AppTest) -> None:
    first = _launch_replay_run(app)
    second = _launch_replay_run(app, "satisfied_first_try")
    _page(app, "compare")
    _no_exception(app)
    rows = app.dataframe[0].value
    assert {app.selectbox(key="compare_run_a").value, app.selectbox(key="compare_run_b").value} == {
        first,
        second,
    }
    differing = set(rows.loc[rows["differs"] == "≠", "field"])
    assert {"agent model", "input"} <= differing


def test_compare_page_without_runs_says_what_to_do(app: AppTest) -> None:
    _page(app, "compare")
    assert any("Run page" in i.value for i in app.info)


# ---------------------------------------------------------------- Export


def test_export_page_previews_rows_and_offers_downloads(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    _page(app, "export")
    _no_exception(app)
    preview = app.dataframe[0].value
    assert set(preview["run_id"]) == {run_id}
    assert {"criterion", "passed", "gap"} <= set(preview.columns)
    labels = [b.label for b in app.get("download_button")]
    assert labels == ["Download CSV", "Download JSONL", "Download JSONL", "Download Parquet"]
    app.radio(key="export_dataset").set_value("runs").run()
    preview = app.dataframe[0].value
    assert list(preview["status"]) == ["satisfied"]
    app.selectbox(key="export_status").set_value("failed").run()
    assert any("Nothing to export" in i.value for i in app.info)


def test_export_page_offers_training_data_with_the_filters(app: AppTest) -> None:
    _launch_replay_run(app)
    _page(app, "export")
    _no_exception(app)
    training = lambda: [b for b in app.get("download_button") if "training" in b.proto.id]  # noqa: E731
    assert [b.label for b in training()] == ["Download JSONL", "Download Parquet"]
    assert not any(b.proto.disabled for b in training())
    app.radio(key="export_training_kind").set_value("preference").run()
    app.number_input(key="export_training_margin").set_value(0.5).run()
    app.checkbox(key="export_training_labels").check().run()
    _no_exception(app)
    app.selectbox(key="export_status").set_value("failed").run()
    assert all(b.proto.disabled for b in training())


# ---------------------------------------------------------------- Batch


def test_batch_page_runs_a_dataset_and_summarises_it(app: AppTest) -> None:
    from app_widgets.session import run_registry
    from rubric_core.providers import load_scenario

    scenario = load_scenario("satisfied_first_try")
    _page(app, "run")  # load the scenario's rubric through the Run page's helper
    app.selectbox(key="run_scenario_helper").set_value("satisfied_first_try")
    app.button(key="run_use_scenario").click().run()
    _page(app, "batch")
    csv_text = "input\n" + "\n".join(f'"{scenario["input"]}"' for _ in range(3)) + "\n"
    app.file_uploader(key="batch_upload").upload("inputs.csv", csv_text.encode(), "text/csv")
    app.run()
    _no_exception(app)
    assert any("3 input(s) read from inputs.csv" in s.value for s in app.success)
    app.selectbox(key="batch_rubric").set_value("satisfied_first_try").run()
    app.radio(key="batch_agent_source").set_value("replay").run()
    app.selectbox(key="batch_agent_scenario").set_value("satisfied_first_try")
    app.selectbox(key="batch_grader_scenario").set_value("satisfied_first_try")
    # Each choice redraws the page, as in a browser: Launch is enabled once they fit.
    app.multiselect(key="batch_tools").set_value(list(scenario["grader_tools"])).run()
    app.button(key="batch_launch").click().run()
    _no_exception(app)
    assert not app.error, [e.value for e in app.error]
    job = run_registry().job(app.session_state["batch_watch"])
    job.thread.join(RUN_TIMEOUT_S)
    assert job.done()
    app.run()
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Runs"] == "3"
    assert metrics["Satisfied"] == "100.0%"
    assert metrics["Grader errors"] == "0"
    assert len(_charts(app)) == 2  # iterations-to-satisfied and per-criterion pass rates
    # The mean score shows the scores it is computed from (issue 30, finding 3).
    assert metrics["Mean score"] == "1.00"
    basis = "mean of 3 scores (1.00, 1.00, 1.00) = 1.00, clipped to [0, 1]: 1.00"
    assert any(c.value == basis for c in app.caption), [c.value for c in app.caption]


def test_batch_page_bad_dataset_is_explained_in_place(app: AppTest) -> None:
    _page(app, "batch")
    app.file_uploader(key="batch_upload").upload("inputs.csv", b"prompt,notes\nx,y\n", "text/csv")
    app.run()
    _no_exception(app)
    message = " ".join(e.value for e in app.error)
    assert "inputs.csv" in message and "'input' column" in message


def _batch_from_scenario(app: AppTest, scenario: str = "satisfied_first_try") -> str:
    """Load a scenario on the Batch page, launch its demo dataset, wait; returns the batch id."""
    from app_widgets.session import run_registry

    _page(app, "batch")
    app.selectbox(key="batch_scenario_helper").set_value(scenario)
    app.button(key="batch_use_scenario").click().run()
    _no_exception(app)
    app.button(key="batch_launch").click().run()
    assert not app.error, [e.value for e in app.error]
    batch_id = app.session_state["batch_watch"]
    job = run_registry().job(batch_id)
    job.thread.join(RUN_TIMEOUT_S)
    assert job.done()
    app.run()
    _no_exception(app)
    return batch_id


def _inputs_table(app: AppTest) -> Any:
    return next(d.value for d in app.dataframe if "input #" in d.value.columns)


def test_batch_page_scenario_loader_fills_tools_and_shows_each_input(app: AppTest) -> None:
    _page(app, "batch")
    app.selectbox(key="batch_scenario_helper").set_value("satisfied_first_try")
    app.button(key="batch_use_scenario").click().run()
    # The scenario's grader calls text_stats: loading it picks the tool.
    assert app.multiselect(key="batch_tools").value == ["text_stats"]
    assert app.selectbox(key="batch_rubric").value == "satisfied_first_try"
    assert app.selectbox(key="batch_grader_scenario").value == "satisfied_first_try"
    assert any("3 times" in i.value for i in app.info)
    assert not app.button(key="batch_launch").disabled
    _batch_from_scenario(app)
    table = _inputs_table(app)
    assert list(table["input #"]) == [1, 2, 3]
    assert all("satisfied" in status for status in table["status"])
    assert list(table["passes"]) == [1, 1, 1]
    verdicts = [c for c in table.columns if c[:2] in {"1.", "2.", "3."}]
    # Numbered in rubric order and cut to fit a column (the full text is the column's help).
    assert verdicts == ["1. Exactly two sentences", "2. Fewer than 40 words",
                        "3. Says the bottle keeps drinks co…"]  # fmt: skip
    assert set(table[verdicts].to_numpy().ravel()) == {"✓"}
    assert {m.label: m.value for m in app.metric}["Satisfied"] == "100.0%"


def test_batch_per_input_view_shows_final_verdicts_and_final_pass_rates(app: AppTest) -> None:
    _batch_from_scenario(app, "needs_revision_then_satisfied")
    table = _inputs_table(app)
    assert list(table["passes"]) == [2, 2, 2]
    verdict_columns = [c for c in table.columns if c[0].isdigit()]
    assert set(table[verdict_columns].to_numpy().ravel()) == {"✓"}  # the final pass, not pass 1
    rates = next(c for c in _charts(app) if "final pass" in c["layout"]["title"]["text"])
    assert rates["data"][0]["text"] == ["100% (3/3)"] * len(verdict_columns)


def test_a_stored_batch_opens_input_by_input_in_a_new_session(app: AppTest) -> None:
    """Batches launched elsewhere (the CLI, another tab, yesterday) are read on the page too."""
    batch_id = _batch_from_scenario(app, "needs_revision_then_satisfied")
    fresh = _page(AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run(), "batch")
    _no_exception(fresh)
    assert not any("input #" in d.value.columns for d in fresh.dataframe)  # nothing watched yet
    picker = fresh.selectbox(key="batch_open")
    assert picker.value is None and any(batch_id in option for option in picker.options)
    picker.set_value(batch_id).run()
    _no_exception(fresh)
    assert list(_inputs_table(fresh)["passes"]) == [2, 2, 2]
    assert fresh.selectbox(key="batch_open").value == batch_id


def test_batch_page_blocks_a_replay_grader_of_another_rubric_or_without_its_tools(
    app: AppTest,
) -> None:
    _page(app, "batch")
    app.selectbox(key="batch_scenario_helper").set_value("satisfied_first_try")
    app.button(key="batch_use_scenario").click().run()
    app.selectbox(key="batch_grader_scenario").set_value("haiku").run()
    _no_exception(app)
    assert app.button(key="batch_launch").disabled
    assert any("'haiku'" in e.value and "grader_error" in e.value for e in app.error)
    app.selectbox(key="batch_grader_scenario").set_value("satisfied_first_try").run()
    app.multiselect(key="batch_tools").set_value([]).run()
    assert app.button(key="batch_launch").disabled
    assert any("calls text_stats" in e.value for e in app.error)
    app.multiselect(key="batch_tools").set_value(["text_stats"]).run()
    assert not app.error
    assert not app.button(key="batch_launch").disabled


def test_runs_and_export_filter_by_batch(app: AppTest) -> None:
    lone_run = _launch_replay_run(app)
    batch_id = _batch_from_scenario(app)
    _page(app, "runs")
    assert len(app.dataframe[0].value) == 4
    app.selectbox(key="runs_batch").set_value(batch_id).run()
    _no_exception(app)
    table = app.dataframe[0].value
    assert len(table) == 3 and lone_run not in set(table["run"])
    _page(app, "export")
    app.radio(key="export_dataset").set_value("runs").run()
    app.selectbox(key="export_batch").set_value(batch_id).run()
    preview = app.dataframe[0].value
    assert len(preview) == 3 and lone_run not in set(preview["run_id"])
    assert any("3 run(s) match" in c.value for c in app.caption)


def test_runs_page_says_a_linked_run_does_not_exist(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    app.query_params["run"] = "99999"
    _page(app, "runs")
    _no_exception(app)
    assert any("Run #99999 does not exist" in e.value for e in app.error)
    assert not any(f"Run #{run_id}" in h.value for h in app.subheader)  # not the latest instead
    app.query_params["run"] = str(run_id)
    app.run()
    assert not app.error
    assert any(f"Run #{run_id}" in h.value for h in app.subheader)


# ---------------------------------------------------------------- store faults


def test_read_only_database_is_explained_not_a_traceback(db_path: Path) -> None:
    Store(db_path).close()
    db_path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        at = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()
        _no_exception(at)
        message = " ".join(e.value for e in at.error)
        assert "read-only" in message and str(db_path) in message
        assert "writable" in message
    finally:
        db_path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_deleted_database_is_explained_and_can_be_reopened(app: AppTest, db_path: Path) -> None:
    app.text_input(key="rubric_name").input("kept")
    app.text_area(key="rubric_text").input("- one")
    app.button(key="rubric_save").click().run()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    app.run()
    _no_exception(app)
    message = " ".join(e.value for e in app.error)
    assert "deleted" in message
    reopen = next(b for b in app.button if b.label == "Reopen the database")
    reopen.click().run()
    _no_exception(app)
    assert not app.error
    assert app.title[0].value == "Rubrics"


def test_locked_database_is_explained_when_saving(app: AppTest, db_path: Path) -> None:
    blocker = sqlite3.connect(db_path, timeout=0)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock, as another writer would
    try:
        app.text_input(key="rubric_name").input("blocked")
        app.text_area(key="rubric_text").input("- one")
        app.button(key="rubric_save").click().run()
        _no_exception(app)
        message = " ".join(e.value for e in app.error)
        assert "locked" in message
    finally:
        blocker.rollback()
        blocker.close()
    assert os.path.exists(db_path)


def test_rubrics_shows_weights_penalties_and_checks_as_you_type(app: AppTest) -> None:
    app.text_area(key="rubric_text").input(
        "- [3] Cites the release date\n- [-5] Invents a price\n- Three lines {lines == 3}"
    )
    app.run()
    _no_exception(app)
    texts = _texts(app)
    assert "1. Cites the release date  · weight 3" in texts
    assert "2. Invents a price  · penalty -5" in texts
    assert "3. Three lines  · ⚙ {lines == 3}" in texts
    assert any("decided by code checks" in c.value for c in app.caption)


def test_rubrics_bad_weight_is_an_error_naming_the_line(app: AppTest) -> None:
    app.text_area(key="rubric_text").input("- fine\n- [abc] Not a weight")
    app.run()
    _no_exception(app)
    assert any(e.value.startswith("line 2 ('- [abc] Not a weight')") for e in app.error)


def test_run_page_keep_best_shows_scores_and_regressions(app: AppTest) -> None:
    from app_widgets.session import run_registry

    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value("release_note_regression")
    app.button(key="run_use_scenario").click().run()
    app.radio(key="run_keep").set_value("best").run()
    app.button(key="run_launch").click().run()
    _no_exception(app)
    handle = run_registry().run(app.session_state["run_watch"])
    assert handle is not None and handle.wait(RUN_TIMEOUT_S)
    app.run()
    _no_exception(app)
    progress = _charts(app)[0]
    bars, line = progress["data"]  # criteria passed per pass, then the score
    assert bars["name"] == "needs_revision"
    assert line["name"] == "score"
    assert [round(y, 2) for y in line["y"]] == [0.67, 0.5, 0.17]
    assert [a["text"] for a in progress["layout"]["annotations"]] == ["↩ regressed"] * 2
    assert any("the draft of Pass 1, its best-scoring pass" in i.value for i in app.info)
    warnings = [w.value for w in app.warning]
    assert any("Gives the release date" in w and "Pass 1" in w for w in warnings), warnings


# ---------------------------------------------------------------- Review, Agreement, Experiments


def _seed_graded(
    db_path: Path,
    make_evaluation: Callable[..., dict[str, Any]],
    verdicts: list[list[tuple[str, bool] | tuple[str, bool, str]]],
    *,
    batch_id: str = "batch-seeded",
) -> list[int]:
    """Graded runs (no agent) with one pass each; returns the evaluation ids."""
    store = Store(db_path)
    try:
        version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
        ids = []
        for number, pass_verdicts in enumerate(verdicts, start=1):
            run_id = store.runs.create(
                NewRun(rubric_version_id=version["id"], input=f"request {number}", agent_model="",
                grader_model="replay:x", max_iterations=1, agent_kind="graded", batch_id=batch_id),
            )  # fmt: skip
            ids.append(
                store.passes.record(
                    run_id, make_evaluation(verdicts=pass_verdicts, draft=f"draft {number}")
                )
            )
            store.runs.finish(run_id, RunEnd(status="satisfied", final_output=f"draft {number}"))
        return ids
    finally:
        store.close()


def _review_open(app: AppTest, reviewer: str = "ana") -> None:
    _page(app, "review")
    app.selectbox(key="review_rubric").set_value("essay").run()
    app.text_input(key="review_reviewer").input(reviewer).run()


def test_review_labels_a_pass_and_moves_to_the_next_unlabelled(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    fail = ("cites a source", False, "no source")
    ids = _seed_graded(db_path, make_evaluation, [[("has a title", True), fail]] * 3)
    _review_open(app)
    _no_exception(app)
    assert any("Pass 1 of 3 · 0 of 3 labelled" in c.value for c in app.caption)
    assert "request 1" in [c.value for c in app.code]
    assert any("Judge: fail — no source" in c.value for c in app.caption)
    app.radio(key=f"review_{ids[0]}_0").set_value("pass")
    app.radio(key=f"review_{ids[0]}_1").set_value("pass")
    app.text_input(key=f"review_{ids[0]}_1_note").input("the link is in the footer")
    app.button(key="review_save").click().run()
    _no_exception(app)
    assert any(f"Saved 2 label(s) on pass #{ids[0]} as ana" in s.value for s in app.success)
    assert app.query_params["pass"] == [str(ids[1])] or app.query_params["pass"] == str(ids[1])
    assert any("Pass 2 of 3 · 1 of 3 labelled" in c.value for c in app.caption)

    app.button(key="review_agree").click().run()  # agree with the judge on pass 2
    with Store(db_path) as store:
        labels = store.labels.of_passes(ids)
    assert {k: v["human_passed"] for k, v in labels[ids[0]].items()} == {
        "has a title": True,
        "cites a source": True,
    }
    assert labels[ids[0]]["cites a source"]["label_note"] == "the link is in the footer"
    assert labels[ids[0]]["cites a source"]["reviewer"] == "ana"
    assert {k: v["human_passed"] for k, v in labels[ids[1]].items()} == {
        "has a title": True,
        "cites a source": False,
    }

    # Labels can be changed: back to pass 1, flip a verdict, save.
    app.button(key="review_back").click().run()
    app.button(key="review_back").click().run()
    assert app.radio(key=f"review_{ids[0]}_1").value == "pass"
    app.radio(key=f"review_{ids[0]}_1").set_value("fail")
    app.button(key="review_save").click().run()
    with Store(db_path) as store:
        assert store.labels.of_passes([ids[0]])[ids[0]]["cites a source"]["human_passed"] is False


def test_review_without_a_name_does_not_save(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    _seed_graded(db_path, make_evaluation, [[("has a title", True), ("cites a source", True)]])
    _page(app, "review")
    app.selectbox(key="review_rubric").set_value("essay").run()
    _no_exception(app)
    assert app.button(key="review_save").disabled
    assert any("Type your name" in c.value for c in app.caption)


def test_review_opens_the_pass_named_in_the_url(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    ids = _seed_graded(db_path, make_evaluation, [[("has a title", True)]] * 3)
    app.query_params["pass"] = str(ids[2])
    _review_open(app)
    assert any("Pass 3 of 3" in c.value for c in app.caption)
    assert "request 3" in [c.value for c in app.code]


def test_review_without_passes_says_what_to_do(app: AppTest, db_path: Path) -> None:
    with Store(db_path) as store:
        store.rubrics.save_version("essay", "- has a title")
    app.run()
    _page(app, "review")
    _no_exception(app)
    assert any("No graded pass" in i.value for i in app.info)


def test_agreement_page_reports_kappa_and_links_each_disagreement(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    title_ok, no_source = ("has a title", True), ("cites a source", False, "none")
    ids = _seed_graded(db_path, make_evaluation, [[title_ok, no_source]] * 4)
    human = [(True, False), (True, True), (False, False), (True, False)]
    with Store(db_path) as store:
        for eid, (title, source) in zip(ids, human, strict=True):
            store.labels.save(eid, {"has a title": title, "cites a source": source}, reviewer="ana")
    # Judge T,F on every pass. Pooled: TP 3, FP 1, FF 1, TF 3; p_o = 6/8,
    # p_e = (4*4 + 4*4) / 64 = 1/2, kappa = (0.75 - 0.5) / 0.5 = 0.5.
    app.run()
    _page(app, "agreement")
    app.selectbox(key="agree_rubric").set_value("essay").run()
    _no_exception(app)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Labelled items (n)"] == "8"
    assert metrics["Agreement"] == "75.0%"
    assert metrics["Cohen's kappa"] == "0.500"
    table = app.dataframe[0].value
    overall = table[table["criterion"] == "(overall)"].iloc[0]
    assert overall["judge pass / human fail"] == 1 and overall["judge fail / human pass"] == 1
    links = [link for link in app.page_link if "human" in link.value]
    assert len(links) == 2  # pass 2 (false fail on the source), pass 3 (false pass on the title)
    assert all("review" in link.proto.page for link in links)
    queries = sorted(link.proto.query_string for link in links)
    assert [q.split("&")[0] for q in queries] == sorted(f"pass={i}" for i in (ids[1], ids[2]))


def test_agreement_page_without_labels_says_so(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    _seed_graded(db_path, make_evaluation, [[("has a title", True)]])
    app.run()
    _page(app, "agreement")
    app.selectbox(key="agree_rubric").set_value("essay").run()
    _no_exception(app)
    assert any("no human labels" in i.value for i in app.info)


def _load_bottle_rubric(app: AppTest) -> None:
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value("satisfied_first_try")
    app.button(key="run_use_scenario").click().run()


def test_batch_page_grades_uploaded_outputs_and_keeps_their_labels(
    app: AppTest, db_path: Path
) -> None:
    from app_widgets.session import run_registry

    _load_bottle_rubric(app)
    _page(app, "batch")
    app.toggle(key="batch_graded").set_value(True).run()
    good = "```text\\nIt keeps drinks cold. It is light.\\n```"
    labels = '{""Exactly two sentences"": false}'
    data = f'input,output,labels\nq1,"{good}",\nq2,"{good}","{labels}"\n'.replace("\\n", "\n")
    app.file_uploader(key="batch_graded_upload").upload("outs.csv", data.encode(), "text/csv")
    app.run()
    _no_exception(app)
    assert any("2 row(s) read from outs.csv, 1 with labels" in s.value for s in app.success)
    app.selectbox(key="batch_graded_rubric").set_value("satisfied_first_try").run()
    app.selectbox(key="batch_graded_grader_scenario").set_value("satisfied_first_try")
    app.multiselect(key="batch_graded_tools").set_value(["text_stats"])
    app.button(key="batch_graded_launch").click().run()
    assert not app.error, [e.value for e in app.error]
    job = run_registry().job(app.session_state["batch_graded_watch"])
    job.thread.join(RUN_TIMEOUT_S)
    app.run()
    _no_exception(app)
    assert {m.label: m.value for m in app.metric}["Graded rows"] == "2"
    with Store(db_path) as store:
        runs = store.runs.find(batch_id=job.batch_id)
        assert {r["agent_kind"] for r in runs} == {"graded"}
        passes = [e["id"] for r in runs for e in store.passes.of_run(r["id"])]
        stored = store.labels.of_passes(passes)
    labels = [{c: label["human_passed"] for c, label in kept.items()} for kept in stored.values()]
    assert labels == [{"Exactly two sentences": False}]


def test_batch_page_graded_dataset_without_output_is_explained(app: AppTest) -> None:
    _load_bottle_rubric(app)
    _page(app, "batch")
    app.toggle(key="batch_graded").set_value(True).run()
    app.file_uploader(key="batch_graded_upload").upload("outs.csv", b"input\nq\n", "text/csv")
    app.run()
    _no_exception(app)
    assert any("'output' column" in e.value for e in app.error)


def test_run_page_human_grader_drives_the_pass_and_becomes_labels(
    app: AppTest, db_path: Path
) -> None:
    _load_bottle_rubric(app)
    app.toggle(key="run_graded").set_value(True).run()
    app.selectbox(key="grade_one_rubric").set_value("satisfied_first_try").run()
    app.text_area(key="grade_one_input").input("Describe the bottle.")
    app.text_area(key="grade_one_output").input("It keeps drinks cold. It is light. Buy it.")
    app.text_input(key="grade_one_reviewer").input("ana").run()
    app.radio(key="grade_one_0").set_value("fail")
    app.text_input(key="grade_one_0_gap").input("three sentences")
    app.radio(key="grade_one_1").set_value("pass")
    app.radio(key="grade_one_2").set_value("insufficient")
    app.text_input(key="grade_one_2_gap").input("cannot tell")
    app.button(key="grade_one_record").click().run()
    _no_exception(app)
    assert not app.error, [e.value for e in app.error]
    run_id = app.session_state["grade_one_last"]
    with Store(db_path) as store:
        run = store.runs.get(run_id)
        evaluation = store.passes.of_run(run_id)[0]
        labels = store.labels.of_passes([evaluation["id"]])[evaluation["id"]]
    assert run["agent_kind"] == "graded" and run["grader_model"] == "human:ana"
    assert evaluation["result"] == "needs_revision"
    assert {k: v["human_passed"] for k, v in labels.items()} == {
        "Exactly two sentences": False,
        "Fewer than 40 words": True,
    }  # insufficient evidence is not a label


def test_experiments_page_regrades_a_batch_twice_and_compares(app: AppTest, db_path: Path) -> None:
    from app_widgets.session import run_registry

    _load_bottle_rubric(app)
    with Store(db_path) as store:
        version = store.rubrics.versions("satisfied_first_try")[-1]
        rows = [
            {"row": n, "input": f"q{n}", "output": f"```text\n{text}\n```", "labels": {}}
            for n, text in enumerate(["It is cold. It is light.", "It is cold."], start=2)
        ]
        grade_of(
            store, rows, rubric_version_id=version["id"],
            grader_model="replay:satisfied_first_try", grader_tools=["text_stats"],
        )  # fmt: skip
    _page(app, "experiments")
    _no_exception(app)
    for _ in range(2):
        app.selectbox(key="exp_grader_scenario").set_value("satisfied_first_try")
        app.multiselect(key="exp_tools").set_value(["text_stats"])
        app.button(key="exp_launch").click().run()
        assert not app.error, [e.value for e in app.error]
        job = run_registry().job(f"experiment-{app.session_state['exp_watch']}")
        job.thread.join(RUN_TIMEOUT_S)
        app.run()
    _no_exception(app)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Verdicts compared"] == "6"
    assert metrics["Improved (fail → pass)"] == "0"
    assert len(app.dataframe[0].value) == 2


# ---------------------------------------------------------------- PostgreSQL store


def _seed_postgres_run(url: str, make_evaluation: Callable[..., dict[str, Any]]) -> int:
    with Store(url) as store:
        version = store.rubrics.save_version("pg-article", "- has a title\n- cites a source")
        run_id = store.runs.create(
            NewRun(rubric_version_id=version["id"], input="Write about tides.", agent_model="replay:x",
            grader_model="replay:x", grader_tools=[], max_iterations=3, agent_kind="basic"),
        )  # fmt: skip
        store.passes.record(
            run_id,
            make_evaluation(iteration=0, verdicts=[("has a title", True), ("cites a source", False, "add one")]),
        )  # fmt: skip
        store.passes.record(
            run_id,
            make_evaluation(iteration=1, verdicts=[("has a title", True), ("cites a source", True)]),
        )  # fmt: skip
        store.runs.finish(run_id, RunEnd(status="satisfied", final_output="Tides (NOAA)."))
    return run_id


def test_runs_page_renders_a_postgres_store(
    pg_url: str,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_evaluation: Callable[..., dict[str, Any]],
) -> None:
    run_id = _seed_postgres_run(pg_url, make_evaluation)
    monkeypatch.setenv("RUBRIC_STUDIO_DB", pg_url)
    at = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()
    _no_exception(at)
    password = pg_url.split(":")[2].split("@")[0]
    assert not any(password in c.value for c in at.code)  # the sidebar names it redacted
    _runs_page_shows_one_satisfied_run(at, run_id)
    assert any("Pass 1" in e.label and "needs revision" in e.label for e in at.expander)


def test_unreachable_postgres_is_explained_not_a_traceback(
    pg_url: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    head, tail = pg_url.rsplit("@", 1)
    monkeypatch.setenv("RUBRIC_STUDIO_DB", f"{head}@127.0.0.1:{port}/{tail.split('/', 1)[1]}")
    at = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()
    _no_exception(at)
    message = " ".join(e.value for e in at.error)
    assert "does not answer" in message and f"127.0.0.1:{port}" in message
    assert head.rsplit(":", 1)[1] not in message  # never the password
