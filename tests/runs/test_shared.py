"""runs.shared: one agent per spec, shared by its runs, each run's passes and stop its own."""

from __future__ import annotations

import time

from rubric_core.providers import load_scenario
from rubric_core.runs import RunSpec, run_once, start_run
from rubric_core.runs.checkpoints import CHECKPOINTERS, checkpoint_path
from rubric_core.runs.shared import shared_agent
from rubric_core.store import Store

SCENARIO = "needs_revision_then_satisfied"
WAIT_S = 60


def _spec(store: Store, latency_s: float = 0.0) -> RunSpec:
    scenario = load_scenario(SCENARIO)
    version = store.rubrics.save_version("shared", scenario["rubric"])["id"]
    model = f"replay:{SCENARIO}" + (f"?latency_s={latency_s}" if latency_s else "")
    return RunSpec(
        rubric_version_id=version,
        input=scenario["input"],
        agent_model=model,
        grader_model=model,
        max_iterations=scenario["max_iterations"],
    )


def test_specs_that_differ_only_in_input_share_one_agent(tmp_path):
    with Store(tmp_path / "s.db") as store:
        spec = _spec(store)
        path = checkpoint_path(store)
        saver = CHECKPOINTERS.acquire(path, store)
        try:
            first = shared_agent(spec, saver)
            assert shared_agent(spec.with_input("another input"), saver) is first
            assert (
                shared_agent(RunSpec(**{**spec.__dict__, "max_iterations": 2}), saver) is not first
            )
        finally:
            CHECKPOINTERS.release(path)


def test_each_run_of_a_shared_agent_replays_its_script_and_keeps_its_passes(tmp_path):
    with Store(tmp_path / "s.db") as store:
        spec = _spec(store)
        runs = [run_once(store, spec.with_input(f"input {n}")) for n in range(3)]
        for run in runs:
            assert run["status"] == "satisfied"
            passes = store.passes.of_run(run["id"])
            assert [(p["iteration"], p["result"]) for p in passes] == [
                (0, "needs_revision"),
                (1, "satisfied"),
            ]
        grading_runs = {p["grading_run_id"] for r in runs for p in store.passes.of_run(r["id"])}
        assert len(grading_runs) == 3


def test_stopping_one_run_of_a_shared_agent_leaves_the_other_running(tmp_path):
    with Store(tmp_path / "s.db") as store:
        spec = _spec(store, latency_s=0.2)
        stopped = start_run(store, spec.with_input("stop me"))
        kept = start_run(store, spec.with_input("keep me"))
        time.sleep(0.05)  # both are in their first model call (0.2 s each)
        stopped.stop()
        assert stopped.wait(WAIT_S) and kept.wait(WAIT_S)
        assert stopped.status == "interrupted"
        assert kept.status == "satisfied"
        assert [p["iteration"] for p in store.passes.of_run(kept.run_id)] == [0, 1]
