"""The first ten minutes through AppTest: Try it, forms that keep what was typed, launches
that are refused with the reason (on the Rubrics and Run pages)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rubric_core.providers import load_scenario
from rubric_core.rubric import parse_rubric
from rubric_core.store import NewRun, RunEnd, Store
from rubric_core.ui.forms import (
    DEMO_LATENCY_S,
    DEMO_SCENARIO,
    max_iterations_problem,
    replay_mismatch_problem,
)
from tests.support.pages import RUN_TIMEOUT_S, SCENARIO
from tests.support.pages import no_exception as _no_exception
from tests.support.pages import open_page as _page
from tests.support.pages import texts as _texts

OWN_RUBRIC = "- Names the product\n- Gives the release date\n- Under 60 words"


def _errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


def _seed_rubric(db_path: Path, name: str, text: str, tags: list[str] | None = None) -> dict:
    store = Store(db_path)
    try:
        return store.rubrics.save_version(name, text, tags=tags)
    finally:
        store.close()


def _stored(db_path: Path) -> tuple[list[dict], int]:
    """Every rubric (with its tags) and how many runs the store holds."""
    store = Store(db_path)
    try:
        return store.rubrics.find(), store.runs.count()
    finally:
        store.close()


def _save(
    at: AppTest, *, name: str | None = None, text: str, tags: str = "", note: str = ""
) -> None:
    if name is not None:
        at.text_input(key="rubric_name").input(name)
    at.text_area(key="rubric_text").input(text)
    at.text_input(key="rubric_tags").input(tags)
    at.text_input(key="rubric_note").input(note)
    at.button(key="rubric_save").click().run()
    _no_exception(at)


# ---------------------------------------------------------------- 1: Try it


def test_try_it_runs_the_demo_slowly_and_opens_the_run_page_to_watch_it(app: AppTest) -> None:
    from app_widgets.session import run_registry

    landing = " ".join(m.value for m in app.markdown)
    assert "replay scripted responses" in landing and "not language models" in landing
    app.button(key="rubrics_try").click().run()
    _no_exception(app)
    assert app.title[0].value == "Run"
    run_id = app.session_state["run_watch"]
    handle = run_registry().run(run_id)
    assert handle is not None
    try:
        run = handle.run()
        model = f"replay:{DEMO_SCENARIO}?latency_s={DEMO_LATENCY_S:g}"
        assert (run["agent_model"], run["grader_model"]) == (model, model)
        assert any(f"Demo run #{run_id} started" in s.value for s in app.success)
        # The demo is drawn first, where the person lands, with the form below it.
        assert app.main.caption[0].value.startswith("The demo's settings are filled in")
        assert any(h.value == f"Run #{run_id} · haiku v1" for h in app.subheader)
        assert any("scripted response" in c.value for c in app.caption)
        # The form holds the demo, so the person can change it and launch their own.
        scenario = load_scenario(DEMO_SCENARIO)
        assert app.text_area(key="run_input").value == scenario["input"]
        assert app.number_input(key="run_agent_latency").value == DEMO_LATENCY_S
        assert app.multiselect(key="run_tools").value == scenario["grader_tools"]
    finally:
        handle.stop()
        assert handle.wait(RUN_TIMEOUT_S)


def test_the_demo_runs_at_the_pace_the_environment_sets(
    app: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app_widgets.session import run_registry

    monkeypatch.setenv("RUBRIC_STUDIO_DEMO_LATENCY_S", "2.5")
    app.run()
    assert "wait 2.5 s per call" in " ".join(m.value for m in app.markdown)
    app.button(key="rubrics_try").click().run()
    _no_exception(app)
    handle = run_registry().run(app.session_state["run_watch"])
    assert handle is not None
    try:
        model = f"replay:{DEMO_SCENARIO}?latency_s=2.5"
        assert handle.run()["agent_model"] == model
        assert app.number_input(key="run_agent_latency").value == 2.5
    finally:
        handle.stop()
        assert handle.wait(RUN_TIMEOUT_S)


@pytest.mark.parametrize("value", ["fast", "61", "-1", "nan"])
def test_a_bad_demo_pace_is_named_and_try_it_waits_for_it(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, db_path: Path, value: str
) -> None:
    monkeypatch.setenv("RUBRIC_STUDIO_DEMO_LATENCY_S", value)
    app.run()
    _no_exception(app)
    assert "RUBRIC_STUDIO_DEMO_LATENCY_S must be" in _errors(app)
    assert repr(value) in _errors(app)
    assert app.button(key="rubrics_try").disabled  # AppTest, like a browser, cannot press it
    assert _stored(db_path)[1] == 0


def test_the_offline_demo_loader_stays_open_after_its_first_use(app: AppTest) -> None:
    _page(app, "run")
    assert app.expander[0].label.startswith("Offline demo") and app.expander[0].proto.expanded
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    _no_exception(app)
    assert app.expander[0].proto.expanded  # a rubric exists now; the loader did not fold away


# ---------------------------------------------------------------- 2: replay models, another rubric


def test_replay_models_are_not_launched_on_a_rubric_of_another_scenario(
    app: AppTest, db_path: Path
) -> None:
    _seed_rubric(db_path, "release-note", OWN_RUBRIC)
    _page(app, "run")
    app.text_area(key="run_input").input("Write the release note for Widget 2.0").run()
    message = _errors(app)
    assert "plays verdicts scripted for its own" in message and "not for release-note v1" in message
    assert "Grade an output you already have" in message  # the offline path for one's own rubric
    app.button(key="run_launch").click().run()
    _no_exception(app)
    assert "Not launched" in _errors(app)
    assert _stored(db_path)[1] == 0


def test_a_scenario_rubric_under_another_name_offers_its_scenario_and_then_launches(
    app: AppTest, db_path: Path
) -> None:
    from app_widgets.session import run_registry

    _seed_rubric(db_path, "mine", load_scenario(SCENARIO)["rubric"])
    _page(app, "run")
    app.radio(key="run_agent_source").set_value("replay").run()
    app.selectbox(key="run_agent_scenario").set_value("haiku").run()
    assert "this rubric is the scenario" in _errors(app)
    app.button(key="run_use_own_scenario").click().run()
    assert not app.error, _errors(app)
    app.text_area(key="run_input").input(load_scenario(SCENARIO)["input"])
    app.button(key="run_launch").click().run()
    handle = run_registry().run(app.session_state["run_watch"])
    assert handle is not None and handle.wait(RUN_TIMEOUT_S)
    assert handle.run()["status"] == "satisfied"


# ---------------------------------------------------------------- 6: max iterations


@pytest.mark.parametrize("value", [21, 0, -3])
def test_out_of_range_max_iterations_blocks_launch_with_the_reason(
    app: AppTest, db_path: Path, value: int
) -> None:
    _page(app, "run")
    app.selectbox(key="run_scenario_helper").set_value(SCENARIO)
    app.button(key="run_use_scenario").click().run()
    app.number_input(key="run_max_iterations").set_value(value).run()
    assert f"Max iterations must be a whole number from 1 to 20, got {value}" in _errors(app)
    app.button(key="run_launch").click().run()
    _no_exception(app)
    assert "Not launched" in _errors(app)
    assert _stored(db_path)[1] == 0


def test_replay_latency_out_of_range_is_named() -> None:
    from rubric_core.ui import InputError, model_choice

    with pytest.raises(InputError, match="seconds per call must be from 0 to 60, got 61"):
        model_choice("replay", scenario="haiku", latency_s=61)


def test_max_iterations_problem_accepts_the_range_only() -> None:
    assert [max_iterations_problem(v) for v in (1, 20)] == [None, None]
    for bad in (21, 0, -3, True, 2.5):
        assert "from 1 to 20" in str(max_iterations_problem(bad))


def test_replay_mismatch_problem_ignores_real_models_and_matching_scenarios() -> None:
    scenarios = [{"name": "haiku", "rubric": "- three lines"}]
    own = {"name": "haiku", "version": 1, "criteria": parse_rubric("- three lines")}
    assert replay_mismatch_problem({"agent": "replay:haiku?latency_s=1"}, scenarios, own) is None
    other = {"name": "notes", "version": 3, "criteria": ["cites a date"]}
    assert replay_mismatch_problem({"grader": "openai:gpt-4.1"}, scenarios, other) is None
    problem = replay_mismatch_problem({"grader": "replay:haiku"}, scenarios, other)
    assert problem is not None and problem.startswith("The replay grader 'haiku' plays")


# ---------------------------------------------------------------- 7: the form across pages


def test_the_run_form_is_kept_across_page_switches(app: AppTest, db_path: Path) -> None:
    _seed_rubric(db_path, "first", "- one")
    _seed_rubric(db_path, "second", "- two")
    _page(app, "run")
    app.selectbox(key="run_rubric").set_value("second").run()
    app.text_area(key="run_input").input("my request").run()
    app.radio(key="run_agent_source").set_value("provider").run()
    app.text_input(key="run_agent_provider").input("openai:gpt-4.1-mini").run()
    app.number_input(key="run_max_iterations").set_value(7).run()
    app.multiselect(key="run_tools").set_value(["text_stats"]).run()
    app.radio(key="run_keep").set_value("best").run()
    for page in ("runs", "rubrics", "run"):
        _page(app, page)
    _no_exception(app)
    assert app.selectbox(key="run_rubric").value == "second"
    assert app.text_area(key="run_input").value == "my request"
    assert app.radio(key="run_agent_source").value == "provider"
    assert app.text_input(key="run_agent_provider").value == "openai:gpt-4.1-mini"
    assert app.number_input(key="run_max_iterations").value == 7
    assert app.multiselect(key="run_tools").value == ["text_stats"]
    assert app.radio(key="run_keep").value == "best"


# ---------------------------------------------------------------- 4, 8: the editor


def test_new_rubric_starts_empty_and_stores_nothing_of_the_previous_one(
    app: AppTest, db_path: Path
) -> None:
    _save(app, name="first", text="- one\n- two", tags="alpha, beta", note="the first draft")
    assert any("Saved first v1" in s.value for s in app.success)
    assert app.selectbox(key="rubrics_choice").value == "first"
    app.selectbox(key="rubrics_choice").set_value("+ New rubric").run()
    assert app.text_area(key="rubric_text").value == ""
    for key in ("rubric_name", "rubric_tags", "rubric_note"):
        assert app.text_input(key=key).value == ""
    app.text_input(key="rubric_name").input("second")
    app.text_area(key="rubric_text").input("- three")
    app.button(key="rubric_save").click().run()
    rubrics, _ = _stored(db_path)
    assert {r["name"]: r["tags"] for r in rubrics} == {"first": ["alpha", "beta"], "second": []}
    store = Store(db_path)
    try:
        assert store.rubrics.versions("second")[0]["note"] == ""
    finally:
        store.close()


def test_the_version_note_goes_with_one_save_only(app: AppTest, db_path: Path) -> None:
    _save(app, name="notes", text="- one", note="first cut")
    assert app.text_input(key="rubric_note").value == ""
    app.text_area(key="rubric_text").input("- one\n- two")
    app.button(key="rubric_save").click().run()
    store = Store(db_path)
    try:
        assert [v["note"] for v in store.rubrics.versions("notes")] == ["first cut", ""]
    finally:
        store.close()


def test_use_template_asks_before_replacing_typed_text(app: AppTest) -> None:
    typed = "- my own criterion\n- another one"
    app.text_area(key="rubric_text").input(typed).run()
    app.selectbox(key="rubric_template").set_value("Haiku")
    app.button(key="rubric_use_template").click().run()
    assert app.text_area(key="rubric_text").value == typed
    assert any(
        "Replace the text in the editor with the template 'Haiku'" in w.value for w in app.warning
    )
    app.button(key="rubric_keep").click().run()
    assert app.text_area(key="rubric_text").value == typed
    assert not app.warning or not any("Replace the text" in w.value for w in app.warning)
    app.button(key="rubric_use_template").click().run()
    app.button(key="rubric_replace").click().run()
    assert "syllables" in app.text_area(key="rubric_text").value


# ---------------------------------------------------------------- 5, 17: stored rubrics


def test_tags_field_follows_the_stored_tags_and_never_writes_a_stale_value(
    app: AppTest, db_path: Path
) -> None:
    _save(app, name="tagged", text="- one", tags="old")
    assert app.text_input(key="rubrics_tags_tagged").value == "old"
    # Tags change above (a new version saved with other tags): the field below follows.
    _save(app, text="- one\n- two", tags="new, shiny")
    assert app.text_input(key="rubrics_tags_tagged").value == "new, shiny"
    # Another tab changes them while this one shows "new, shiny"; Update must not clobber.
    store = Store(db_path)
    try:
        store.rubrics.set_tags("tagged", ["theirs"])
    finally:
        store.close()
    app.text_input(key="rubrics_tags_tagged").input("")
    app.button(key="rubrics_update_tags").click().run()
    _no_exception(app)
    assert any("changed meanwhile" in w.value for w in app.warning)
    assert {r["name"]: r["tags"] for r in _stored(db_path)[0]} == {"tagged": ["theirs"]}
    assert app.text_input(key="rubrics_tags_tagged").value == "theirs"
    # From a fresh field, an update is stored.
    app.text_input(key="rubrics_tags_tagged").input("mine, theirs")
    app.button(key="rubrics_update_tags").click().run()
    assert {r["name"]: r["tags"] for r in _stored(db_path)[0]} == {"tagged": ["mine", "theirs"]}


def test_versions_of_follows_the_rubric_just_saved(app: AppTest) -> None:
    _save(app, name="alpha", text="- one")
    _save(app, name=None, text="- one\n- two")  # v2 of alpha
    app.selectbox(key="rubrics_choice").set_value("+ New rubric").run()
    _save(app, name="beta", text="- three")
    assert app.selectbox(key="rubrics_browse").value == "beta"
    app.selectbox(key="rubrics_choice").set_value("alpha").run()
    _save(app, text="- one\n- two\n- four")
    assert app.selectbox(key="rubrics_browse").value == "alpha"


# ---------------------------------------------------------------- 9: a pasted 200 KB rubric


def test_a_pasted_200_kb_rubric_is_one_error_before_any_criterion_is_drawn(app: AppTest) -> None:
    huge = "\n".join(f"- criterion number {n} " + "x" * 160 for n in range(1100))
    assert len(huge) > 190_000
    app.text_area(key="rubric_text").input(huge).run()
    _no_exception(app)
    assert "the limit is 20,000" in _errors(app)
    assert not [t for t in _texts(app) if t.startswith("1. ")]
    assert any(h.value == "Criteria (0)" for h in app.subheader)


# ---------------------------------------------------------------- 17: a finished run's overview


def test_a_finished_run_without_passes_says_so_and_tokens_fit_their_metric(
    app: AppTest, db_path: Path
) -> None:
    version = _seed_rubric(db_path, "empty-run", "- one")
    store = Store(db_path)
    try:
        run_id = store.runs.create(
            NewRun(rubric_version_id=version["id"], input="x", agent_model="replay:x",
            grader_model="replay:x", max_iterations=3, agent_kind="basic"),
        )  # fmt: skip
        store.runs.finish(run_id, RunEnd(status="error", error="the agent broke"))
    finally:
        store.close()
    app.session_state["run_watch"] = run_id
    _page(app, "run")
    _no_exception(app)
    assert any("No pass was graded" in i.value for i in app.info)
    assert not any("yet" in c.value for c in app.caption if "pass" in c.value)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Grader tokens (in / out)"] == "0 / 0"
