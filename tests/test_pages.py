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

from rubric_core.store import Store

APP = Path(__file__).resolve().parent.parent / "app.py"
SCENARIO = "needs_revision_then_satisfied"
RUN_TIMEOUT_S = 60


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path for the app (RUBRIC_STUDIO_DB), no API keys, no base URL."""
    path = tmp_path / "studio.db"
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(path))
    monkeypatch.delenv("RUBRIC_STUDIO_LLM_BASE_URL", raising=False)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return path


@pytest.fixture
def app(db_path: Path) -> AppTest:
    """The whole app (frame + Rubrics page), run once."""
    at = AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S)
    return at.run()


def _page(at: AppTest, page: str) -> AppTest:
    return at.switch_page(f"app_pages/{page}.py").run()


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def _charts(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _launch_replay_run(at: AppTest, scenario: str = SCENARIO) -> int:
    """Load a replay scenario on the Run page, launch it, wait for it, redraw; returns its id."""
    from studio_ui import run_registry

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
    app.button[0].click()  # "Use template"
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
    assert [bar["name"] for bar in timeline["data"]] == ["needs_revision", "satisfied"]
    assert heatmap["data"][0]["x"] == ["Pass 1", "Pass 2"]
    assert any(f"Run #{run_id}" in h.value for h in app.subheader)
    # The final output is shown as a code block (text), never as Markdown or HTML.
    assert any("Widget 2.0" in c.value for c in app.code)


def test_run_keeps_going_across_pages_and_can_be_stopped(app: AppTest) -> None:
    from studio_ui import run_registry

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


def test_runs_page_lists_the_run_and_shows_its_detail(app: AppTest) -> None:
    run_id = _launch_replay_run(app)
    _page(app, "runs")
    _no_exception(app)
    table = app.dataframe[0].value
    assert list(table["run"]) == [run_id]
    assert "satisfied" in table["status"].iloc[0]
    assert any(f"Run #{run_id}" in h.value for h in app.subheader)
    # Transcript: the grader's injected feedback is labelled as the grader's.
    grader_turns = [m for m in app.chat_message if m.name == "grader"]
    assert grader_turns
    assert any("Grader feedback" in c.value for c in grader_turns[0].caption)
    # Each pass's explanation and gaps.
    assert any("Pass 1" in e.label and "needs revision" in e.label for e in app.expander)
    assert any(t.startswith("✗ ") and "→" in t for t in _texts(app))


def test_runs_page_shows_pass_rates_on_request(app: AppTest) -> None:
    _launch_replay_run(app)
    _page(app, "runs")
    charts_before = len(_charts(app))
    app.toggle(key="runs_show_rates").set_value(True).run()
    _no_exception(app)
    rates = _charts(app)[0]
    assert len(_charts(app)) == charts_before + 1
    bar = rates["data"][0]
    assert bar["text"] == ["100% (2/2)", "50% (1/2)", "100% (2/2)"]


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
        version = store.save_rubric_version("hostile", "- is safe\n- is short")
        run_id = store.create_run(
            rubric_version_id=version["id"], input=hostile, agent_model="replay:x",
            grader_model="replay:x", grader_tools=[], max_iterations=3, agent_kind="basic",
        )  # fmt: skip
        store.record_evaluation(
            run_id,
            make_evaluation(
                iteration=0,
                verdicts=[("is safe", True), ("is short", False, hostile)],
                explanation=hostile,
                draft=hostile,
            ),
        )
        store.record_evaluation(
            run_id,
            make_evaluation(
                iteration=1, verdicts=[("is safe", False, hostile), ("is short", True)],
                explanation=hostile, draft=hostile,
            ),
        )  # fmt: skip
        store.finish_run(run_id, status="max_iterations_reached", final_output=hostile)
    finally:
        store.close()
    app.run()
    _page(app, "runs")
    _no_exception(app)
    assert any(hostile in c.value for c in app.code)  # final output, as code
    assert any(hostile in t for t in _texts(app))  # explanation and gaps, as text
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
    assert labels == ["Download CSV", "Download JSONL"]
    app.radio(key="export_dataset").set_value("runs").run()
    preview = app.dataframe[0].value
    assert list(preview["status"]) == ["satisfied"]
    app.selectbox(key="export_status").set_value("failed").run()
    assert any("Nothing to export" in i.value for i in app.info)


# ---------------------------------------------------------------- Batch


def test_batch_page_runs_a_dataset_and_summarises_it(app: AppTest) -> None:
    from rubric_core.models import load_scenario
    from studio_ui import run_registry

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
    app.multiselect(key="batch_tools").set_value(list(scenario["grader_tools"]))
    app.button(key="batch_launch").click().run()
    _no_exception(app)
    assert not app.error, [e.value for e in app.error]
    job = run_registry().batch(app.session_state["batch_watch"])
    job.thread.join(RUN_TIMEOUT_S)
    assert job.done()
    app.run()
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Runs"] == "3"
    assert metrics["Satisfied"] == "100.0%"
    assert metrics["Grader errors"] == "0"
    assert len(_charts(app)) == 2  # iterations-to-satisfied and per-criterion pass rates


def test_batch_page_bad_dataset_is_explained_in_place(app: AppTest) -> None:
    _page(app, "batch")
    app.file_uploader(key="batch_upload").upload("inputs.csv", b"prompt,notes\nx,y\n", "text/csv")
    app.run()
    _no_exception(app)
    message = " ".join(e.value for e in app.error)
    assert "inputs.csv" in message and "'input' column" in message


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
    from studio_ui import run_registry

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
    assert [bar["name"] for bar in progress["data"]] == ["needs_revision"]
    assert [round(y, 2) for y in progress["data"][0]["y"]] == [0.67, 0.5, 0.17]
    assert [a["text"] for a in progress["layout"]["annotations"]] == ["↩ regressed"] * 2
    assert any("the draft of Pass 1, its best-scoring pass" in i.value for i in app.info)
    warnings = [w.value for w in app.warning]
    assert any("Gives the release date" in w and "Pass 1" in w for w in warnings), warnings
