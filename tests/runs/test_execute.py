"""Runner: spec validation, single runs over the bundled scenarios, stop, errors and resume."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from rubric_core.providers import ReplayChatModel, list_scenarios, load_scenario, verdict_turn
from rubric_core.rubric import parse_rubric
from rubric_core.runs import (
    RunSpec,
    SpecError,
    build_agent,
    checkpoint_path,
    resume_run,
    run_once,
    start_run,
    validate_spec,
)
from rubric_core.schema import TERMINAL_STATUSES
from rubric_core.store import Store

RUBRIC = "- has a title\n- cites a source"
TITLE_OK = ("has a title", True)
SOURCE_MISSING = ("cites a source", False, "add a source for the claim")
SOURCE_OK = ("cites a source", True)
WAIT_S = 60


def _version(store: Store, text: str = RUBRIC, name: str = "article") -> int:
    return store.rubrics.save_version(name, text)["id"]


def _spec(version_id: int, **overrides: Any) -> RunSpec:
    values: dict[str, Any] = {
        "rubric_version_id": version_id,
        "input": "Write a short article about tides.",
        "agent_model": "replay:needs_revision_then_satisfied",
        "grader_model": "replay:needs_revision_then_satisfied",
    }
    values.update(overrides)
    return RunSpec(**values)


def _scenario_spec(store: Store, name: str, **overrides: Any) -> RunSpec:
    scenario = load_scenario(name)
    version_id = store.rubrics.save_version(f"scenario-{name}", scenario["rubric"])["id"]
    values: dict[str, Any] = {
        "rubric_version_id": version_id,
        "input": scenario["input"],
        "agent_model": f"replay:{name}",
        "grader_model": f"replay:{name}",
        "grader_tools": tuple(scenario["grader_tools"]),
        "max_iterations": scenario["max_iterations"],
        "agent_kind": scenario["agent_kind"],
    }
    values.update(overrides)
    return RunSpec(**values)


def _agent(*texts: str) -> ReplayChatModel:
    return ReplayChatModel(scenario="test-agent", turns=[AIMessage(text) for text in texts])


def _grader(*turns: AIMessage) -> ReplayChatModel:
    return ReplayChatModel(scenario="test-grader", turns=list(turns))


# --------------------------------------------------------------------------- validation


def test_run_spec_normalises_grader_tools_and_hides_api_key():
    spec = RunSpec(1, "x", "replay:haiku", "replay:haiku", grader_tools=["count_syllables"],
                   api_key="sk-secret")  # fmt: skip
    assert spec.grader_tools == ("count_syllables",)
    assert "sk-secret" not in repr(spec)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"input": ""}, "input", "empty"),
        ({"input": "   \n"}, "input", "empty"),
        ({"input": "x" * 200_001}, "input", "200,000"),
        ({"max_iterations": 0}, "max_iterations", "between 1 and 20"),
        ({"max_iterations": 21}, "max_iterations", "between 1 and 20"),
        ({"max_iterations": True}, "max_iterations", "integer"),
        ({"max_iterations": "3"}, "max_iterations", "integer"),
        ({"agent_kind": "fancy"}, "agent_kind", "'fancy'"),
        ({"grader_tools": ("count_syllables", "no_such_tool")}, "grader_tools", "no_such_tool"),
        ({"agent_model": "nosuchprovider:model-x"}, "agent_model", "nosuchprovider"),
        ({"grader_model": "replay:no_such_scenario"}, "grader_model", "no_such_scenario"),
        ({"agent_model": ""}, "agent_model", "empty"),
        ({"base_url": "localhost:8080"}, "base_url", "http"),
    ],
)
def test_validate_spec_names_the_bad_field(store, overrides, field, fragment):
    spec = _spec(_version(store), **overrides)
    with pytest.raises(SpecError) as info:
        validate_spec(spec, store)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    assert fragment in str(info.value)


def test_validate_spec_rejects_unknown_rubric_version(store):
    with pytest.raises(SpecError, match=r"rubric_version_id: .*999"):
        validate_spec(_spec(999), store)


def test_validate_spec_reports_missing_api_key(store, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = _spec(_version(store), agent_model="openai:gpt-4o-mini")
    with pytest.raises(SpecError, match=r"agent_model: .*OPENAI_API_KEY"):
        validate_spec(spec, store)


def test_invalid_spec_creates_no_run(store):
    with pytest.raises(SpecError):
        start_run(store, _spec(_version(store), input=""))
    assert store.runs.count() == 0


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("scenario", [s["name"] for s in list_scenarios()])
def test_scenario_ends_in_its_expected_status_and_is_stored(store, scenario):
    expected = load_scenario(scenario)["expected_status"]
    run = run_once(store, _scenario_spec(store, scenario))

    assert run["status"] == expected, run.get("error")
    evaluations = store.passes.of_run(run["id"])
    assert evaluations, "every scenario is graded at least once"
    assert run["iterations"] == len(evaluations)
    assert [e["iteration"] for e in evaluations] == list(range(len(evaluations)))
    assert len({e["grading_run_id"] for e in evaluations}) == 1
    assert evaluations[-1]["status"] == expected
    # the rubric's criteria as the parser reads them (weights and checks removed)
    criteria = parse_rubric(load_scenario(scenario)["rubric"])
    for evaluation in evaluations:
        if evaluation["result"] != "grader_error":
            assert [c["name"] for c in evaluation["criteria"]] == criteria
    transcript = store.runs.transcript(run["id"])
    assert transcript[0]["role"] in ("human", "user")
    assert transcript[0]["content"] == load_scenario(scenario)["input"]
    assert run["agent_input_tokens"] > 0 and run["agent_output_tokens"] > 0
    if len(evaluations) > 1:
        assert any(m["is_grader"] for m in transcript), "revision feedback is marked"
    assert run["final_output"]


def test_basic_agent_run_revises_until_satisfied(store):
    version_id = _version(store)
    run = run_once(
        store,
        _spec(version_id),
        agent_llm=_agent("Tides\n\nThe moon pulls the sea.", "Tides\n\nThe moon pulls (NOAA)."),
        grader_llm=_grader(
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
            verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good."),
        ),
    )
    assert run["status"] == "satisfied"
    assert run["iterations"] == 2
    assert run["final_output"] == "Tides\n\nThe moon pulls (NOAA)."
    first, second = store.passes.of_run(run["id"])
    assert first["criteria"][1] == {
        "name": "cites a source",
        "passed": False,
        "gap": "add a source for the claim",
    }
    assert second["result"] == "satisfied"
    assert first["draft"] == "Tides\n\nThe moon pulls the sea."
    grader_messages = [m for m in store.runs.transcript(run["id"]) if m["is_grader"]]
    assert len(grader_messages) == 1
    assert "add a source for the claim" in grader_messages[0]["content"]


def test_deep_agent_run_is_graded_and_stored(store):
    version_id = _version(store)
    run = run_once(
        store,
        _spec(version_id, agent_kind="deep", agent_system_prompt="Write carefully."),
        agent_llm=_agent("Tides\n\nThe moon pulls the sea (NOAA)."),
        grader_llm=_grader(verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good.")),
    )
    assert run["status"] == "satisfied"
    assert run["agent_kind"] == "deep"
    assert run["final_output"] == "Tides\n\nThe moon pulls the sea (NOAA)."
    assert len(store.passes.of_run(run["id"])) == 1


def test_agent_tokens_exclude_the_grader(store):
    agent = _agent("Tides\n\nThe moon (NOAA).")
    grader = _grader(verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good."))
    run = run_once(store, _spec(_version(store)), agent_llm=agent, grader_llm=grader)
    assert run["agent_output_tokens"] == len("Tides\n\nThe moon (NOAA).") // 4
    evaluation = store.passes.of_run(run["id"])[0]
    assert run["grader_output_tokens"] == evaluation["grader_output_tokens"] > 0


def test_start_run_runs_off_the_calling_thread_and_reports_progress(store):
    callers: list[str] = []
    handle = start_run(
        store,
        _spec(_version(store)),
        on_evaluation=lambda e: callers.append(threading.current_thread().name),
        agent_llm=_agent("draft one", "draft two"),
        grader_llm=_grader(
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
            verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good."),
        ),
    )
    assert handle.wait(WAIT_S)
    assert handle.done()
    assert handle.status == "satisfied"
    assert handle.iteration == 2
    assert handle.latest_evaluation()["result"] == "satisfied"
    assert handle.error is None
    assert callers and threading.current_thread().name not in callers


@pytest.mark.both_backends  # the checkpointer of each backend
def test_each_pass_is_committed_before_the_loop_goes_on(store):
    seen: list[int] = []

    def on_evaluation(evaluation: dict[str, Any]) -> None:
        # Read back through the store while the run is still going (the only run).
        run_id = store.runs.find(limit=1)[0]["id"]
        seen.append(len(store.passes.of_run(run_id)))

    handle = start_run(
        store,
        _spec(_version(store)),
        on_evaluation=on_evaluation,
        agent_llm=_agent("draft one", "draft two"),
        grader_llm=_grader(
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
            verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good."),
        ),
    )
    assert handle.wait(WAIT_S)
    assert seen == [1, 2]


# --------------------------------------------------------------------------- stop, errors


@pytest.mark.both_backends  # the checkpointer of each backend
def test_stop_marks_the_run_interrupted_and_keeps_graded_passes(store):
    stop = threading.Event()
    handle = start_run(
        store,
        _spec(_version(store), max_iterations=5),
        stop_event=stop,
        on_evaluation=lambda e: stop.set(),
        agent_llm=_agent("draft one", "draft two", "draft three"),
        grader_llm=_grader(
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Still no source."),
        ),
    )
    assert handle.wait(WAIT_S)
    run = store.runs.get(handle.run_id)
    assert run["status"] == "interrupted"
    evaluations = store.passes.of_run(handle.run_id)
    assert len(evaluations) == 1
    assert evaluations[0]["result"] == "needs_revision"
    assert [m["content"] for m in store.runs.transcript(handle.run_id)][:2] == [
        "Write a short article about tides.",
        "draft one",
    ]


def test_agent_model_raising_mid_run_ends_in_error_with_passes_kept(store):
    def explode(messages: list[Any]) -> AIMessage:
        msg = "provider exploded: 503 upstream unavailable"
        raise RuntimeError(msg)

    agent = ReplayChatModel(scenario="flaky", turns=[AIMessage("draft one"), explode])
    run = run_once(
        store,
        _spec(_version(store)),
        agent_llm=agent,
        grader_llm=_grader(
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
        ),
    )
    assert run["status"] == "error"
    assert "RuntimeError" in run["error"]
    assert "provider exploded: 503 upstream unavailable" in run["error"]
    evaluations = store.passes.of_run(run["id"])
    assert len(evaluations) == 1 and evaluations[0]["result"] == "needs_revision"
    assert store.runs.transcript(run["id"])


def test_a_transcript_that_cannot_be_stored_ends_the_run_in_error_with_its_passes(
    store, monkeypatch
):
    """The transcript and the run's end share one commit; when the transcript cannot be
    written, the end is still stored, as `error`, and says the transcript failed."""
    import rubric_core.store.queries.runs as facade
    from rubric_core.store import StoreError

    def refuse(run_id, messages):
        raise StoreError("transcript row refused", kind="invalid")

    monkeypatch.setattr(facade, "_transcript_rows", refuse)
    run = run_once(store, _scenario_spec(store, "needs_revision_then_satisfied"))
    assert run["status"] == "error"
    assert "saving the transcript failed" in run["error"]
    assert "transcript row refused" in run["error"]
    assert [e["result"] for e in store.passes.of_run(run["id"])] == [
        "needs_revision",
        "satisfied",
    ]
    assert store.runs.transcript(run["id"]) == []


def test_handle_exposes_the_error(store):
    def explode(messages: list[Any]) -> AIMessage:
        raise ValueError("bad gateway")

    handle = start_run(
        store,
        _spec(_version(store)),
        agent_llm=ReplayChatModel(scenario="boom", turns=[explode]),
        grader_llm=_grader(),
    )
    assert handle.wait(WAIT_S)
    assert handle.status == "error"
    assert handle.error == "ValueError: bad gateway"
    assert store.passes.of_run(handle.run_id) == []


# --------------------------------------------------------------------------- resume


@pytest.mark.both_backends  # the checkpointer of each backend
def test_resume_after_interruption_continues_the_same_grading_run(store):
    version_id = _version(store)

    def models() -> tuple[ReplayChatModel, ReplayChatModel]:
        return (
            _agent("draft one", "draft two (NOAA)"),
            _grader(
                verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "Add a source."),
                verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "Good."),
            ),
        )

    agent, grader = models()
    stop = threading.Event()
    handle = start_run(
        store,
        _spec(version_id),
        stop_event=stop,
        on_evaluation=lambda e: stop.set(),
        agent_llm=agent,
        grader_llm=grader,
    )
    assert handle.wait(WAIT_S)
    assert store.runs.get(handle.run_id)["status"] == "interrupted"

    # A fresh process would build fresh models whose scripts start at turn 0.
    agent, grader = models()
    resumed = resume_run(store, handle.run_id, agent_llm=agent, grader_llm=grader)
    assert resumed.run_id == handle.run_id
    assert resumed.wait(WAIT_S)
    run = store.runs.get(handle.run_id)
    assert run["status"] == "satisfied", run["error"]
    assert run["final_output"] == "draft two (NOAA)"
    evaluations = store.passes.of_run(handle.run_id)
    assert [e["iteration"] for e in evaluations] == [0, 1]
    assert len({e["grading_run_id"] for e in evaluations}) == 1
    contents = [m["content"] for m in store.runs.transcript(handle.run_id)]
    assert contents.count("draft one") == 1
    assert contents[-1] == "draft two (NOAA)"


def test_resume_with_scenario_models_from_the_stored_spec(store):
    spec = _scenario_spec(store, "needs_revision_then_satisfied")
    stop = threading.Event()
    handle = start_run(store, spec, stop_event=stop, on_evaluation=lambda e: stop.set())
    assert handle.wait(WAIT_S)
    assert store.runs.get(handle.run_id)["status"] == "interrupted"

    resumed = resume_run(store, handle.run_id)
    assert resumed.wait(WAIT_S)
    run = store.runs.get(handle.run_id)
    assert run["status"] == "satisfied", run["error"]
    assert run["iterations"] == 2


def test_resume_refuses_finished_and_unknown_runs(store):
    run = run_once(store, _scenario_spec(store, "satisfied_first_try"))
    with pytest.raises(SpecError, match="only interrupted runs resume"):
        resume_run(store, run["id"])
    with pytest.raises(SpecError, match="no run with id 4242"):
        resume_run(store, 4242)


# --------------------------------------------------------------------------- plumbing


@pytest.mark.both_backends
def test_checkpoints_live_with_the_store(store):
    if store.is_postgres:  # PostgresSaver's tables in the store's own database
        assert checkpoint_path(store) == store.target
    else:
        assert checkpoint_path(store) == f"{store.path}.checkpoints.sqlite"


def test_build_agent_accepts_both_kinds(store):
    version_id = _version(store)
    for kind in ("basic", "deep"):
        agent = build_agent(
            _spec(version_id, agent_kind=kind),
            agent_llm=_agent("x"),
            grader_llm=_grader(verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "ok")),
        )
        assert hasattr(agent, "invoke")


def test_every_stored_status_is_a_known_one(store):
    run = run_once(store, _scenario_spec(store, "max_iterations"))
    assert run["status"] in TERMINAL_STATUSES


# --------------------------------------------------------------------------- a killed process


def test_killed_process_keeps_its_passes_and_the_run_resumes(tmp_path):
    """SIGKILL a CLI run after its first graded pass; the store keeps that pass, marks the
    run interrupted on the next open, and `resume_run` finishes the same grading run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    db = tmp_path / "killed.db"
    scenario = load_scenario("needs_revision_then_satisfied")
    with Store(db) as setup:
        setup.rubrics.save_version("release", scenario["rubric"])
    slow = "replay:needs_revision_then_satisfied?latency_s=0.5"
    process = subprocess.Popen(
        [sys.executable, "-m", "rubric_core", "run", "--rubric", "release",
         "--input", scenario["input"], "--agent-model", slow, "--grader-model", slow,
         "--db", str(db)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with Store(db) as watcher:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                runs = watcher.runs.find(limit=1)
                if runs and watcher.passes.of_run(runs[0]["id"]):
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the subprocess never stored a grading pass")
            os.kill(process.pid, signal.SIGKILL)
            process.wait(WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    with Store(db) as store:
        run = store.runs.find(limit=1)[0]
        if run["status"] == "satisfied":
            pytest.skip("the run finished before the kill landed (machine too slow to race)")
        assert run["status"] == "interrupted"
        kept = store.passes.of_run(run["id"])
        assert kept and kept[0]["result"] == "needs_revision"

        handle = resume_run(store, run["id"])
        assert handle.wait(WAIT_S)
        finished = store.runs.get(run["id"])
        assert finished["status"] == "satisfied", finished["error"]
        evaluations = store.passes.of_run(run["id"])
        assert [e["iteration"] for e in evaluations] == [0, 1]
        assert len({e["grading_run_id"] for e in evaluations}) == 1


def test_a_replay_run_does_not_import_provider_sdks(tmp_path):
    """Worker processes start by importing what a run needs; checking whether a grader
    is Anthropic's or OpenAI's must not import those SDKs (seconds each) for other models."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "from rubric_core.providers import load_scenario\n"
        "from rubric_core.runs import RunSpec, run_once\n"
        "from rubric_core.store import Store\n"
        "s = load_scenario('needs_revision_then_satisfied')\n"
        f"store = Store(Path({str(tmp_path)!r}) / 'r.db')\n"
        "v = store.rubrics.save_version('r', s['rubric'])['id']\n"
        "m = 'replay:needs_revision_then_satisfied'\n"
        "run = run_once(store, RunSpec(v, s['input'], m, m))\n"
        "assert run['status'] == 'satisfied', run\n"
        "print(sorted(n for n in ('anthropic', 'langchain_anthropic') if n in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
