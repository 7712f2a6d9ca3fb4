"""Tests of the dashboard's library functions (filters, paging, models, summaries, faults)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest

from rubric_core.batch import summary_for_batch
from rubric_core.rubric import validate_rubric
from rubric_core.runs import RunSpec, SpecError
from rubric_core.schema import RUN_STATUS_DESCRIPTIONS, RUN_STATUSES
from rubric_core.store import RunEnd, RunFilters, Store
from rubric_core.ui import (
    RUBRIC_TEMPLATES,
    InputError,
    combine_models,
    compare_runs_rows,
    criteria_changes,
    data_version,
    expand_counts,
    export_bytes,
    export_file_name,
    final_criteria,
    final_verdict_rows,
    format_timestamp,
    known_models,
    model_choice,
    models_mode,
    page_caption,
    page_count,
    page_window,
    parse_run_filters,
    parse_tags,
    pass_details,
    preview_rows,
    progress,
    replay_scenario_mismatch,
    run_seconds,
    run_spec_rows,
    runs_table,
    scenario_templates,
    spec_error_hint,
    status_badge,
    status_level,
    status_sentence,
    store_error_message,
    transcript_items,
    version_diff,
)
from rubric_core.workbench import (
    Job,
    RunInputs,
    RunRegistry,
    batch_progress,
    load_upload,
    start_job,
)

# ---------------------------------------------------------------- statuses


def test_every_run_status_has_a_meaning_and_a_badge() -> None:
    for status in RUN_STATUSES:
        assert RUN_STATUS_DESCRIPTIONS[status]
        assert status.replace("_", " ") in status_badge(status)
        assert status_sentence(status) == RUN_STATUS_DESCRIPTIONS[status]
    assert status_level("satisfied") == "success"
    assert status_level("grader_error") == "error"
    assert status_level("max_iterations_reached") == "warning"
    assert "Unknown status" in status_sentence("bogus")


# ---------------------------------------------------------------- rubrics


def test_templates_are_valid_rubrics() -> None:
    assert {"Code with tests", "Haiku", "Report sections"} <= set(RUBRIC_TEMPLATES)
    for text in RUBRIC_TEMPLATES.values():
        assert len(validate_rubric(text)) >= 3


def test_scenario_templates_use_titles() -> None:
    templates = scenario_templates([{"name": "haiku", "title": "Haiku demo", "rubric": "- a"}])
    assert templates == {"Scenario: Haiku demo": "- a"}


def test_parse_tags_trims_lowercases_and_dedupes() -> None:
    assert parse_tags(" Poetry, demo,, poetry ,  Two  words ") == ["poetry", "demo", "two words"]
    assert parse_tags("") == []


def test_version_diff_and_criteria_changes() -> None:
    old = {"name": "r", "version": 1, "text": "- a\n- b"}
    new = {"name": "r", "version": 2, "text": "- a\n- c"}
    diff = version_diff(old, new)
    assert "--- r v1" in diff and "+++ r v2" in diff
    assert "-- b" in diff and "+- c" in diff
    assert criteria_changes(["a", "b"], ["a", "c"]) == {"added": ["c"], "removed": ["b"]}
    assert version_diff(old, old) == ""


# ---------------------------------------------------------------- models


def test_models_mode_says_plainly_when_models_replay() -> None:
    offline = models_mode([{"provider": "openai", "configured": False}], None)
    assert not offline.real
    assert "replay scripted responses" in offline.summary
    real = models_mode([{"provider": "openai", "configured": True}], None)
    assert real.real and real.providers == ("openai",)
    assert "API key for openai" in real.summary
    served = models_mode([], "http://127.0.0.1:8080/v1")
    assert served.real and "http://127.0.0.1:8080/v1" in served.summary


def test_model_choice_builds_specs() -> None:
    assert model_choice("replay", scenario="haiku") == ("replay:haiku", None)
    assert model_choice("provider", provider_string=" openai:gpt-4.1-mini ") == (
        "openai:gpt-4.1-mini",
        None,
    )
    assert model_choice(
        "base_url", base_url="http://127.0.0.1:8080/v1", base_url_model="smollm2-135m"
    ) == ("openai-compatible:smollm2-135m", "http://127.0.0.1:8080/v1")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"source": "replay"}, "pick a replay scenario"),
        ({"source": "provider", "provider_string": "gpt-4"}, "provider:model-id"),
        ({"source": "base_url", "base_url": "localhost:8080"}, "must start with http"),
        ({"source": "base_url", "base_url": "http://h/v1"}, "name the model"),
        ({"source": "carrier-pigeon"}, "unknown model source"),
    ],
)
def test_model_choice_names_what_is_wrong(kwargs: dict[str, Any], words: str) -> None:
    source = kwargs.pop("source")
    with pytest.raises(InputError, match=words):
        model_choice(source, **kwargs)


def test_combine_models_shares_one_base_url() -> None:
    url = "http://127.0.0.1:8080/v1"
    assert combine_models(("openai-compatible:m", url), ("openai-compatible:m", url)) == (
        "openai-compatible:m",
        "openai-compatible:m",
        url,
    )
    assert combine_models(("replay:haiku", None), ("openai-compatible:m", url))[2] == url
    with pytest.raises(InputError, match="same base URL"):
        combine_models(("openai-compatible:m", url), ("openai-compatible:m", "http://other/v1"))
    with pytest.raises(InputError, match=r"the grader uses 'openai:gpt-4\.1'"):
        combine_models(("openai-compatible:m", url), ("openai:gpt-4.1", None))


def test_spec_error_hint_says_where_keys_go() -> None:
    hinted = spec_error_hint("agent_model: model 'openai:x' needs an API key: set OPENAI_API_KEY")
    assert ".streamlit/secrets.toml" in hinted
    assert spec_error_hint("input: is empty") == "input: is empty"


# ---------------------------------------------------------------- filters and paging


def test_parse_run_filters_treats_any_as_no_filter() -> None:
    filters = parse_run_filters(rubric="(any)", model="", status="(any)", since=None, until=None)
    assert filters == RunFilters()
    assert filters.as_kwargs() == {}


def test_parse_run_filters_passes_whole_days() -> None:
    filters = parse_run_filters(
        rubric="haiku",
        version_id=3,
        status="satisfied",
        since=dt.date(2025, 1, 2),
        until="2025-01-31",
    )
    assert filters.as_kwargs() == {
        "rubric": "haiku",
        "version_id": 3,
        "status": "satisfied",
        "since": "2025-01-02",
        "until": "2025-01-31",
    }


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"status": "done"}, "unknown status 'done'"),
        ({"since": "yesterday"}, "since date 'yesterday' is not a date"),
        ({"since": dt.date(2025, 2, 1), "until": dt.date(2025, 1, 1)}, "swap them"),
    ],
)
def test_parse_run_filters_rejects_bad_input(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError, match=words):
        parse_run_filters(**kwargs)


def test_paging_math() -> None:
    assert [page_count(n, 25) for n in (0, 1, 25, 26, 100_000)] == [1, 1, 1, 2, 4000]
    assert page_window(1, 0, 25) == (1, 0, 25)
    assert page_window(3, 60, 25) == (3, 50, 25)
    assert page_window(99, 60, 25) == (3, 50, 25)
    assert page_window(-5, 60, 25) == (1, 0, 25)
    assert page_caption(2, 60, 25) == "Runs 26–50 of 60 (page 2 of 3)"
    assert page_caption(3, 60, 25) == "Runs 51–60 of 60 (page 3 of 3)"
    assert page_caption(1, 0, 25) == "No runs match these filters"
    with pytest.raises(ValueError, match="page_size"):
        page_count(10, 0)


def test_format_timestamp_handles_iso_unix_and_garbage() -> None:
    assert format_timestamp("2025-01-02T03:04:05.123+00:00") == "2025-01-02 03:04"
    assert format_timestamp(0) == "1970-01-01 00:00"
    assert format_timestamp(None) == ""
    assert format_timestamp("not a time") == "not a time"


def test_export_file_name_names_the_filters() -> None:
    assert export_file_name("criteria", "csv", RunFilters()) == "rubric-studio-criteria.csv"
    name = export_file_name("runs", "jsonl", RunFilters(rubric="My Rubric!", since="2025-01-02"))
    assert name == "rubric-studio-runs-my-rubric-2025-01-02.jsonl"


# ---------------------------------------------------------------- run detail


def _run_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": 7,
        "status": "satisfied",
        "rubric": "haiku",
        "rubric_version": 2,
        "iterations": 2,
        "agent_model": "replay:haiku",
        "grader_model": "replay:haiku",
        "grader_tools": ["count_syllables"],
        "max_iterations": 3,
        "agent_kind": "basic",
        "started_at": "2025-01-02T03:04:05+00:00",
        "duration_s": 1.23456,
        "input": "Write a haiku\nabout rain",
        "grader_input_tokens": 10,
        "grader_output_tokens": 5,
    }
    row.update(overrides)
    return row


def test_runs_table_has_readable_columns() -> None:
    (row,) = runs_table([_run_row()])
    assert row["run"] == 7
    assert row["status"] == "✅ satisfied"
    assert row["rubric"] == "haiku v2"
    assert row["seconds"] == 1.23
    assert row["input"] == "Write a haiku about rain"
    assert row["started"] == "2025-01-02 03:04"


def test_compare_runs_rows_flags_differences() -> None:
    rows = {r["field"]: r for r in compare_runs_rows(_run_row(), _run_row(grader_model="openai:x"))}
    assert rows["grader model"]["differs"] == "≠"
    assert rows["agent model"]["differs"] == ""
    assert rows["grader tools"]["run A"] == "count_syllables"


def test_run_seconds_counts_while_running() -> None:
    now = dt.datetime(2025, 1, 1, 0, 1, tzinfo=dt.UTC)
    assert (
        run_seconds({"status": "running", "started_at": "2025-01-01T00:00:30+00:00"}, now) == 30.0
    )
    assert run_seconds({"status": "satisfied", "duration_s": 4.0, "started_at": "x"}, now) == 4.0
    assert run_seconds({"status": "running", "started_at": None}, now) == 0.0


def test_run_spec_rows_lists_settings() -> None:
    rows = {r["setting"]: r["value"] for r in run_spec_rows(_run_row())}
    assert rows["rubric"] == "haiku v2"
    assert rows["grader system prompt"] == "(default)"


def test_pass_details_lists_gaps_of_failing_criteria(
    make_evaluation: Callable[..., dict[str, Any]],
) -> None:
    passes = [
        make_evaluation(verdicts=[("a", True), ("b", False, "do b")], duration_s=1.0),
        make_evaluation(verdicts=[("a", True), ("b", True)], explanation="All good."),
    ]
    first, second = pass_details(passes)
    assert first["label"] == "Pass 1" and first["gaps"] == [("b", "do b")]
    assert (first["passed"], first["total"]) == (1, 2)
    assert second["result"] == "satisfied" and second["gaps"] == []
    assert second["grader_tokens"] == 120
    assert final_criteria(passes) == {"a": True, "b": True}


def test_transcript_items_mark_the_graders_feedback() -> None:
    items = transcript_items(
        [
            {"role": "human", "name": None, "content": "Write a haiku", "is_grader": False},
            {"role": "ai", "content": "draft", "tool_calls": [{"name": "t", "args": {"x": 1}}]},
            {"role": "human", "name": "rubric_grader", "content": "fix b", "is_grader": True},
            {
                "role": "tool",
                "name": "count_syllables",
                "content": [{"type": "text", "text": "5/7/5"}],
            },
        ]
    )
    assert [i["chat"] for i in items] == ["user", "assistant", "grader", "tool"]
    assert items[2]["is_grader"] and "Grader feedback" in items[2]["speaker"]
    assert not items[0]["is_grader"]
    assert items[1]["tool_calls"] == ["t({'x': 1})"]
    assert items[3]["content"] == "5/7/5"
    assert items[3]["speaker"] == "Tool result · count_syllables"


# ---------------------------------------------------------------- batches


def test_batch_summary_rates_finished_runs_only(
    store: Store,
    rubric_version: dict,
    make_evaluation: Callable[..., dict[str, Any]],
    new_run: Callable[..., int],
) -> None:
    # The Batch page's summary is runs.summary_for_batch (dashboard.summarize_runs is gone).
    for status, passes in (("satisfied", 1), ("satisfied", 3), ("grader_error", 1), ("running", 0)):
        run_id = new_run(store, rubric_version["id"], batch_id="b1")
        for iteration in range(passes):
            store.passes.record(run_id, make_evaluation(iteration=iteration))
        if status != "running":
            store.runs.finish(
                run_id, RunEnd(status=status, error="timeout" if status != "satisfied" else None)
            )
    summary = summary_for_batch(store, "b1")
    assert summary.total - summary.by_status["running"] == 3 and summary.by_status["running"] == 1
    assert summary.satisfied_rate == pytest.approx(2 / 3)
    assert summary.iterations_to_satisfied == {1: 1, 3: 1}
    assert summary.grader_errors == 1
    assert summary_for_batch(store, "none").satisfied_rate == 0.0


def test_progress_text() -> None:
    assert progress(2, 5) == (0.4, "2 of 5 inputs finished")
    assert progress(9, 5) == (1.0, "5 of 5 inputs finished")
    assert progress(0, 0) == (0.0, "No inputs")


def test_load_uploaded_dataset_reads_csv_and_jsonl() -> None:
    assert load_upload("d.csv", b"input\nfirst\nsecond\n") == ["first", "second"]
    assert load_upload("d.jsonl", b'{"input": "a"}\n{"input": "b"}\n') == ["a", "b"]


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("d.xlsx", b"PK\x03\x04", "upload a .csv"),
        ("d.csv", b"\x00\x01\x02", "binary"),
        ("d.csv", "input\ncaf\u00e9\n".encode("latin-1"), "not UTF-8"),
        ("d.jsonl", b'{"input": "a"}\n{oops\n', "line 2"),
        ("d.csv", b"prompt,other\nx,y\n", "no 'input' column"),
    ],
)
def test_load_uploaded_dataset_names_the_file_and_the_problem(
    name: str, data: bytes, words: str
) -> None:
    with pytest.raises(InputError, match=words) as info:
        load_upload(name, data)
    assert name in str(info.value)
    assert "/tmp" not in str(info.value)


# ---------------------------------------------------------------- store-backed helpers


def test_known_models_lists_agent_and_grader_models(
    store: Store, rubric_version: dict, new_run: Callable[..., int]
) -> None:
    new_run(store, rubric_version["id"], agent_model="replay:a", grader_model="replay:g")
    new_run(store, rubric_version["id"], agent_model="replay:a", grader_model="openai:x")
    assert known_models(store) == ["openai:x", "replay:a", "replay:g"]


def test_data_version_moves_with_new_runs_and_passes(
    store: Store,
    rubric_version: dict,
    make_evaluation: Callable[..., dict[str, Any]],
    new_run: Callable[..., int],
) -> None:
    empty = data_version(store)
    run_id = new_run(store, rubric_version["id"])
    after_run = data_version(store)
    store.passes.record(run_id, make_evaluation())
    after_pass = data_version(store)
    assert empty == (0, 0)
    assert after_run[0] > empty[0]
    assert after_pass[1] > after_run[1]
    store.runs.finish(run_id, RunEnd(status="needs_revision"))
    assert data_version(store) == after_pass


def test_preview_rows_takes_the_first_rows_with_filters(
    store: Store,
    rubric_version: dict,
    make_evaluation: Callable[..., dict[str, Any]],
    new_run: Callable[..., int],
) -> None:
    for _ in range(3):
        run_id = new_run(store, rubric_version["id"])
        store.passes.record(run_id, make_evaluation())
        store.runs.finish(run_id, RunEnd(status="needs_revision"))
    rows = preview_rows(store, "criteria", RunFilters(rubric="article"), limit=4)
    assert len(rows) == 4
    assert {"run_id", "criterion", "passed", "gap"} <= set(rows[0])
    assert preview_rows(store, "runs", RunFilters(status="satisfied")) == []


def test_export_bytes_gives_the_whole_file(
    store: Store,
    rubric_version: dict,
    make_evaluation: Callable[..., dict[str, Any]],
    new_run: Callable[..., int],
) -> None:
    run_id = new_run(store, rubric_version["id"])
    store.passes.record(run_id, make_evaluation())
    store.runs.finish(run_id, RunEnd(status="needs_revision"))
    data = export_bytes(store, "csv", "criteria", RunFilters(rubric="article"))
    lines = data.decode("utf-8").splitlines()
    assert lines[0].startswith("run_id,rubric,rubric_version")
    assert len(lines) == 3  # header + two criteria of one pass
    jsonl = export_bytes(store, "jsonl", "runs", RunFilters())
    assert len(jsonl.decode("utf-8").splitlines()) == 1


def test_batch_progress_counts_finished_runs(
    store: Store, rubric_version: dict, new_run: Callable[..., int]
) -> None:
    done = new_run(store, rubric_version["id"], batch_id="b1")
    store.runs.finish(done, RunEnd(status="satisfied"))
    new_run(store, rubric_version["id"], batch_id="b1")
    assert batch_progress(store, "b1") == (1, 2)


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (OSError("attempt to write a readonly database"), "read-only"),
        (OSError("database is locked"), "locked by another process"),
        (OSError("database x was deleted while the store was open"), "deleted or moved"),
        (OSError("disk full"), "Check the file"),
    ],
)
def test_store_error_message_says_what_to_do(error: Exception, words: str) -> None:
    message = store_error_message(error, "/data/studio.db")
    assert words in message
    assert "/data/studio.db" in message


# ---------------------------------------------------------------- registry


class _Handle:
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.finished = threading.Event()

    def done(self) -> bool:
        return self.finished.is_set()


def test_run_registry_keeps_handles_and_lists_active_runs() -> None:
    registry = RunRegistry()
    first, second = _Handle(1), _Handle(2)
    registry.add_run(first)
    registry.add_run(second)
    assert registry.run(1) is first and registry.run(99) is None and registry.run(None) is None
    assert registry.active_runs() == [2, 1]
    first.finished.set()
    assert registry.active_runs() == [2]


def test_start_job_validates_a_batch_before_starting(store: Store, rubric_version: dict) -> None:
    spec = RunSpec(rubric_version["id"], "x", "replay:nope", "replay:nope")
    with pytest.raises(SpecError, match="agent_model"):
        start_job(store, Job(RunInputs(spec, ("x",)), concurrency=2))
    with pytest.raises(SpecError, match="concurrency"):
        start_job(store, Job(RunInputs(spec, ("x",)), concurrency=0))
    assert store.runs.count() == 0


def test_start_job_runs_a_batch_in_the_background(store: Store) -> None:
    from rubric_core.providers import load_scenario

    scenario = load_scenario("satisfied_first_try")
    version = store.rubrics.save_version("blurb", scenario["rubric"])
    spec = RunSpec(
        version["id"],
        scenario["input"],
        "replay:satisfied_first_try",
        "replay:satisfied_first_try",
        grader_tools=tuple(scenario["grader_tools"]),
    )
    job = start_job(store, Job(RunInputs(spec, (scenario["input"],) * 3), concurrency=2))
    assert job.wait(timeout=60)
    assert job.done() and job.error is None
    assert batch_progress(store, job.batch_id) == (3, 3)
    assert (job.finished, job.total, job.result.total) == (3, 3, 3)
    assert {r["status"] for r in store.runs.find(batch_id=job.batch_id)} == {"satisfied"}


def test_replay_scenario_mismatch_only_for_replay_models_on_another_rubric() -> None:
    scenarios = [{"name": "haiku", "rubric": "- three lines\n- about rain"}]
    assert replay_scenario_mismatch("replay:haiku", scenarios, ["other"]) == "haiku"
    assert replay_scenario_mismatch("replay:haiku?latency_s=1", scenarios, ["other"]) == "haiku"
    assert (
        replay_scenario_mismatch("replay:haiku", scenarios, ["three lines", "about rain"]) is None
    )
    assert replay_scenario_mismatch("openai:gpt-4.1", scenarios, ["other"]) is None
    assert replay_scenario_mismatch("replay:unknown", scenarios, ["other"]) is None


def test_final_verdict_rows_and_expand_counts() -> None:
    run_a = [
        {"criteria": [{"name": "a", "passed": False}]},
        {"criteria": [{"name": "a", "passed": True}, {"name": "b", "passed": False}]},
    ]
    run_b = [{"criteria": [{"name": "a", "passed": False}]}]
    assert final_verdict_rows(run_a, run_b) == [
        {"criterion": "a", "run A": "✓", "run B": "✗"},
        {"criterion": "b", "run A": "✗", "run B": "–"},
    ]
    assert expand_counts({3: 1, 1: 2}) == [1, 1, 3]
    assert expand_counts({}) == []
