"""Batches: dataset files, bounded concurrent runs, and summaries computed from the store."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from rubric_core.batch import BatchSummary, summary_for_batch
from rubric_core.providers import ReplayChatModel, verdict_turn
from rubric_core.runs import RunSpec, SpecError
from rubric_core.store import NewRun, RunEnd
from rubric_core.workbench import DatasetError, load_dataset
from tests.support.jobs import batch_of
from tests.support.store import replay_template

RUBRIC = "- has a title\n- cites a source"
TITLE_OK = ("has a title", True)
SOURCE_MISSING = ("cites a source", False, "add a source")
SOURCE_OK = ("cites a source", True)


def _scenario_template(store, name: str) -> RunSpec:
    return replay_template(store, name)


def _template(store, **overrides: Any) -> RunSpec:
    values: dict[str, Any] = {
        "rubric_version_id": store.rubrics.save_version("article", RUBRIC)["id"],
        "input": "template input",
        "agent_model": "replay:needs_revision_then_satisfied",
        "grader_model": "replay:needs_revision_then_satisfied",
    }
    values.update(overrides)
    return RunSpec(**values)


def _scripted_factory(spec: RunSpec) -> tuple[ReplayChatModel, ReplayChatModel]:
    """Fresh models whose script depends on the input: 'first' passes at once, 'second'
    after one revision, 'hopeless' makes the grader fail the rubric, 'crash' raises."""
    if spec.input.startswith("first"):
        agent = [AIMessage("T\n\nok (src)")]
        grader = [verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "ok")]
    elif spec.input.startswith("second"):
        agent = [AIMessage("T\n\nno source"), AIMessage("T\n\nnow (src)")]
        grader = [
            verdict_turn("needs_revision", [TITLE_OK, SOURCE_MISSING], "add one"),
            verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "ok"),
        ]
    elif spec.input.startswith("hopeless"):
        agent = [AIMessage("?")]
        grader = [verdict_turn("failed", [TITLE_OK, SOURCE_OK], "cannot judge sources")]
    elif spec.input.startswith("grader-down"):
        agent = [AIMessage("T\n\nok (src)")]

        def down(messages: list[Any]) -> AIMessage:
            raise ValueError("grader endpoint returned garbage")

        grader = [down]
    else:

        def crash(messages: list[Any]) -> AIMessage:
            raise RuntimeError("agent provider down")

        agent = [crash]
        grader = []
    return (
        ReplayChatModel(scenario=f"agent-{spec.input}", turns=agent),
        ReplayChatModel(scenario=f"grader-{spec.input}", turns=grader),
    )


# --------------------------------------------------------------------------- datasets


def test_load_csv_with_input_column(tmp_path):
    path = tmp_path / "prompts.csv"
    path.write_text(
        'id,input,notes\n1,Write a haiku,x\n2,"Line one\nline two, with comma",y\n\n',
        encoding="utf-8",
    )
    assert load_dataset(path) == ["Write a haiku", "Line one\nline two, with comma"]


def test_load_csv_single_column_with_bom_and_unicode(tmp_path):
    path = tmp_path / "prompts.csv"
    path.write_bytes("prompt\r\nÉcris un haïku 🌧\r\nnext\r\n".encode("utf-8-sig"))
    assert load_dataset(path) == ["Écris un haïku 🌧", "next"]


def test_load_jsonl_objects_and_bare_strings(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [json.dumps({"input": "one", "id": 1}), "", json.dumps("two ✓")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert load_dataset(path) == ["one", "two ✓"]


@pytest.mark.parametrize(
    ("name", "content", "fragments"),
    [
        ("a.csv", b"id,text\n1,hello\n", ["no 'input' column", "id, text"]),
        ("a.csv", b"", ["is empty"]),
        ("a.csv", b"input\n", ["header but no rows"]),
        ("a.csv", b"input,id\nfine,1\n,2\n", ["row 3", "empty input"]),
        ("a.csv", "input\ncafé\n".encode("latin-1"), ["not UTF-8", "offset 9", "line 2"]),
        ("a.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["binary"]),
        ("a.jsonl", b'{"input": "ok"}\n{"input": "broken"\n', ["line 2", "not valid JSON"]),
        ("a.jsonl", b'{"input": "ok"}\n{"prompt": "x"}\n', ["line 2", "no 'input' key", "prompt"]),
        ("a.jsonl", b'{"input": "ok"}\n42\n', ["line 2", "got int"]),
        ("a.jsonl", b'{"input": "  "}\n', ["line 1", "empty input"]),
        ("a.jsonl", b"\n\n", ["is empty"]),
        ("a.txt", b"input\nhello\n", ["unknown dataset type", ".txt"]),
    ],
)
def test_malformed_dataset_is_rejected_naming_file_and_place(tmp_path, name, content, fragments):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_missing_dataset_file(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.csv")


# --------------------------------------------------------------------------- batches


def test_batch_over_a_known_scenario_summarises_exactly(store):
    template = _scenario_template(store, "needs_revision_then_satisfied")
    inputs = [f"{template.input} ({n})" for n in range(3)]
    progress: list[tuple[int, int, str]] = []

    summary = batch_of(
        store,
        template,
        inputs,
        concurrency=2,
        progress=lambda done, total, run: progress.append((done, total, run["status"])),
    )

    assert isinstance(summary, BatchSummary)
    assert summary.total == 3
    assert summary.by_status == {"satisfied": 3}
    assert summary.satisfied_rate == 1.0
    assert summary.mean_iterations_to_satisfied == 2.0
    assert summary.iterations_to_satisfied == {2: 3}
    assert summary.grader_errors == 0
    assert summary.errors == []
    rates = {row["criterion"]: row for row in summary.criterion_pass_rates}
    # Each run's final pass counts once (PASS_RATE_RULE): all three ended with the date.
    assert rates["States the release date"]["passed"] == 3
    assert rates["States the release date"]["total"] == 3
    assert rates["States the release date"]["pass_rate"] == pytest.approx(1.0)
    assert rates["Is one paragraph"]["pass_rate"] == pytest.approx(1.0)
    assert sorted(p[0] for p in progress) == [1, 2, 3]
    assert {p[1] for p in progress} == {3}
    runs = store.runs.find(batch_id=summary.batch_id, limit=10)
    assert sorted(run["input"] for run in runs) == sorted(inputs)


def test_batch_with_mixed_outcomes(store):
    template = _template(store)
    inputs = ["first a", "second b", "hopeless c", "grader-down d", "crash e", "first f"]

    summary = batch_of(store, template, inputs, concurrency=3, model_factory=_scripted_factory)

    assert summary.total == 6
    assert summary.by_status == {
        "error": 1,
        "failed": 1,
        "grader_error": 1,
        "satisfied": 3,
    }
    assert summary.satisfied_rate == pytest.approx(3 / 6)
    assert summary.mean_iterations_to_satisfied == pytest.approx((1 + 2 + 1) / 3)
    assert summary.iterations_to_satisfied == {1: 2, 2: 1}
    assert summary.grader_errors == 1
    assert len(summary.errors) == 1
    assert summary.errors[0]["input"] == "crash e"
    assert "agent provider down" in summary.errors[0]["error"]
    rates = {row["criterion"]: row for row in summary.criterion_pass_rates}
    # Final passes with verdicts: a, b's second, hopeless c, f (d's is a grader error).
    assert rates["cites a source"]["total"] == 4
    assert rates["cites a source"]["passed"] == 4


def test_summary_for_batch_reads_the_same_figures_back(store):
    template = _template(store)
    summary = batch_of(
        store, template, ["first", "second"], concurrency=1, model_factory=_scripted_factory
    )
    again = summary_for_batch(store, summary.batch_id)
    assert again == summary
    assert again.as_dict()["iterations_to_satisfied"] == {"1": 1, "2": 1}
    assert json.loads(json.dumps(again.as_dict()))["satisfied_rate"] == 1.0


def test_batch_runs_at_most_concurrency_at_once(store):
    template = _template(store)
    active = 0
    peak = 0
    lock = threading.Lock()
    release = threading.Event()

    def factory(spec: RunSpec) -> tuple[ReplayChatModel, ReplayChatModel]:
        def slow(messages: list[Any]) -> AIMessage:
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
            release.wait(0.2)
            with lock:
                active -= 1
            return AIMessage("T\n\nok (src)")

        return (
            ReplayChatModel(scenario="slow", turns=[slow]),
            ReplayChatModel(
                scenario="g", turns=[verdict_turn("satisfied", [TITLE_OK, SOURCE_OK], "ok")]
            ),
        )

    summary = batch_of(store, template, [f"in {n}" for n in range(6)], concurrency=2,
                        model_factory=factory)  # fmt: skip
    assert summary.by_status == {"satisfied": 6}
    assert 1 <= peak <= 2


def test_stopped_batch_starts_no_more_runs(store):
    template = _template(store)
    stop = threading.Event()
    stop.set()
    summary = batch_of(store, template, ["first", "second"], stop_event=stop,
                        model_factory=_scripted_factory)  # fmt: skip
    assert summary.total == 0
    assert summary.satisfied_rate == 0.0
    assert summary.mean_iterations_to_satisfied is None


@pytest.mark.parametrize(
    ("kwargs", "inputs", "fragment"),
    [
        ({"concurrency": 0}, ["a"], "concurrency: must be between 1 and 16"),
        ({"concurrency": 17}, ["a"], "concurrency: must be between 1 and 16"),
        ({"concurrency": True}, ["a"], "concurrency: must be an integer"),
        ({}, [], "inputs: the dataset has no inputs"),
        ({}, ["fine", "  "], "inputs[1]: is empty"),
    ],
)
def test_batch_rejects_bad_arguments_before_any_run(store, kwargs, inputs, fragment):
    template = _template(store)
    with pytest.raises(SpecError) as info:
        batch_of(store, template, inputs, **kwargs)
    assert fragment in str(info.value)
    assert store.runs.count() == 0


def test_batch_rejects_an_unknown_tool_before_any_run(store):
    template = _template(store, grader_tools=("no_such_tool",))
    with pytest.raises(SpecError, match=r"grader_tools: .*no_such_tool"):
        batch_of(store, template, ["a", "b"])
    assert store.runs.count() == 0


def test_resumed_thread_batch_skips_finished_inputs_and_continues_interrupted_ones(store):
    template = _template(store)
    inputs = ["first 0", "second 1", "first 2", "second 3"]
    first = batch_of(store, template, inputs[:2], model_factory=_scripted_factory)
    # Input 2 was cut off after its run row was written: a dead batch leaves it interrupted.
    store.runs.create(NewRun(rubric_version_id=template.rubric_version_id, input=inputs[2],
                     agent_model=template.agent_model, grader_model=template.grader_model,
                     max_iterations=template.max_iterations, agent_kind="basic",
                     thread_id="run-cut-off", batch_id=first.batch_id, input_index=2))  # fmt: skip
    cut = store.runs.find(batch_id=first.batch_id, limit=10)[0]
    store.runs.finish(cut["id"], RunEnd(status="interrupted"))
    before = {run["input_index"]: run for run in store.runs.find(batch_id=first.batch_id)}

    summary = batch_of(store, template, inputs, batch_id=first.batch_id, resume=True,
                        model_factory=_scripted_factory)  # fmt: skip

    assert summary.by_status == {"satisfied": 4}
    after = {run["input_index"]: run for run in store.runs.find(batch_id=first.batch_id)}
    assert sorted(after) == [0, 1, 2, 3]
    for index in (0, 1):  # finished: not run again
        assert after[index]["finished_at"] == before[index]["finished_at"]
    assert after[2]["id"] == cut["id"]  # continued on its own row, not a second run
    assert after[2]["thread_id"] == "run-cut-off"
    assert store.runs.finished_inputs(first.batch_id) == {0, 1, 2, 3}


def test_resuming_needs_a_known_batch_id(store):
    template = _template(store)
    with pytest.raises(SpecError, match="batch_id: resuming a batch needs"):
        batch_of(store, template, ["first"], resume=True)
    with pytest.raises(SpecError, match="no batch 'batch-nope'"):
        batch_of(store, template, ["first"], batch_id="batch-nope", resume=True)
    assert store.runs.count() == 0


def _wait_for_running_run(db, proc, *, timeout_s: float = 120.0) -> None:
    """Block until the batch in `proc` has a run in flight (bounded); reads only, never migrates."""
    import sqlite3
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
                (running,) = conn.execute(
                    "SELECT COUNT(*) FROM runs WHERE status = 'running'"
                ).fetchone()
            conn.close()
            if running:
                return
        except sqlite3.Error:  # not created or not migrated yet
            pass
        time.sleep(0.2)
    pytest.fail("the batch never started a run")


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_ctrl_c_on_batch_stops_marks_in_flight_runs_and_prints_the_summary(tmp_path, executor):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from rubric_core.store import Store

    db = tmp_path / "batch.db"
    dataset = tmp_path / "in.jsonl"
    dataset.write_text("".join(json.dumps({"input": f"note {n}"}) + "\n" for n in range(12)))
    model = "replay:needs_revision_then_satisfied?latency_s=1"
    # Ctrl-C as in a terminal: SIGINT at Python's own handler in the CLI even where this test
    # runs with SIGINT ignored (a background job without job control), which a child inherits.
    interruptible = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('rubric_core', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", interruptible, "batch", "--db", str(db),
         "--scenario", "needs_revision_then_satisfied", "--agent-model", model,
         "--grader-model", model, "--input-file", str(dataset), "--concurrency", "3",
         "--executor", executor],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        _wait_for_running_run(db, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # the test failed before the batch ended: leave nothing behind
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "is closed" not in err
    assert "Stopping the batch" in err
    assert "Resume with: --resume batch-" in err
    with Store(db) as store:
        runs = store.runs.find(limit=100)
        batch_id = runs[0]["batch_id"]
        assert f"Batch {batch_id}: {len(runs)} run" in out
        assert store.runs.count(status="running") == 0
        statuses = {run["status"] for run in runs}
        assert "interrupted" in statuses
        assert statuses <= {"interrupted", "satisfied"}
        assert len(runs) < 12  # no new runs started after the stop


@pytest.mark.both_backends  # each worker opens the store from its target: a file or a URL
def test_process_batch_runs_every_input_in_worker_processes_with_the_same_outcome(store):
    import os

    template = _scenario_template(store, "needs_revision_then_satisfied")
    inputs = [f"note {n}" for n in range(6)]
    seen: list[tuple[int, str]] = []
    summary = batch_of(store, template, inputs, concurrency=4, executor="process",
                        progress=lambda done, total, row: seen.append((done, row["status"])))  # fmt: skip
    threads = batch_of(store, template, inputs, concurrency=4)

    assert summary.by_status == threads.by_status == {"satisfied": 6}
    assert summary.criterion_pass_rates == threads.criterion_pass_rates
    assert summary.iterations_to_satisfied == threads.iterations_to_satisfied
    assert sorted(seen) == [(n, "satisfied") for n in range(1, 7)]
    runs = store.runs.find(batch_id=summary.batch_id, limit=10)
    assert sorted(run["input_index"] for run in runs) == list(range(6))
    owners = {run["pid"] for run in runs}
    assert os.getpid() not in owners  # recorded by the worker processes themselves
    assert 1 <= len(owners) <= 2  # one process per core, at most the concurrency


def test_stopped_process_batch_marks_its_runs_and_resumes_to_the_end(store):
    import dataclasses
    import time

    slow = "replay:needs_revision_then_satisfied?latency_s=0.3"
    template = dataclasses.replace(_scenario_template(store, "needs_revision_then_satisfied"),
                                   agent_model=slow, grader_model=slow)  # fmt: skip
    inputs = [f"note {n}" for n in range(8)]
    stop = threading.Event()
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(summary=batch_of(
        store, template, inputs, concurrency=2, executor="process", stop_event=stop)))  # fmt: skip
    worker.start()
    deadline = time.monotonic() + 120
    while not store.runs.count(status="running") and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    worker.join(120)
    assert not worker.is_alive()
    stopped = outcome["summary"]
    assert store.runs.count(status="running") == 0
    assert stopped.by_status.get("interrupted", 0) >= 1
    assert stopped.total < len(inputs)

    resumed = batch_of(store, template, inputs, concurrency=2, executor="process",
                        batch_id=stopped.batch_id, resume=True)  # fmt: skip
    assert resumed.by_status == {"satisfied": len(inputs)}
    assert store.runs.finished_inputs(stopped.batch_id) == set(range(len(inputs)))


def test_a_process_batch_needs_a_picklable_model_factory(store):
    template = _template(store)
    with pytest.raises(SpecError, match="model_factory"):
        batch_of(store, template, ["first"], executor="process",
                  model_factory=lambda spec: _scripted_factory(spec))  # fmt: skip
    assert store.runs.count() == 0
