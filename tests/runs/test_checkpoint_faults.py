"""A checkpoint store that fails mid-run (issue 22 items 16, 17): the stored error names the
checkpoint store and the pass, not "the agent or its model"; log lines of the loop name
the run and its grading run."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import AIMessage

from rubric_core.providers import ReplayChatModel, verdict_turn
from rubric_core.runs import RunSpec, start_run
from rubric_core.runs.checkpoints import CHECKPOINTERS, checkpoint_path
from rubric_core.store import Store

RUBRIC = "- has a title\n- cites a source"
TITLE = ("has a title", True)
NO_SOURCE = ("cites a source", False, "add a source")


def _models(passes: int) -> tuple[ReplayChatModel, ReplayChatModel]:
    agent = ReplayChatModel(scenario="a", turns=[AIMessage(f"draft {i}") for i in range(5)])
    verdict = verdict_turn("needs_revision", [TITLE, NO_SOURCE], "not yet")
    return agent, ReplayChatModel(scenario="g", turns=[verdict] * passes)


def _spec(store: Store, passes: int) -> RunSpec:
    return RunSpec(
        rubric_version_id=store.rubrics.save_version("article", RUBRIC)["id"],
        input="Write a short article about tides.",
        agent_model="replay:needs_revision_then_satisfied",
        grader_model="replay:needs_revision_then_satisfied",
        max_iterations=passes,
    )


class _FillCheckpointDisk:
    """After the first pass, the checkpoint file can grow no more: SQLite's own
    'database or disk is full', as on a full disk."""

    def __init__(self, store: Store) -> None:
        self.path = checkpoint_path(store)

    def __call__(self, evaluation: dict[str, Any]) -> None:
        if evaluation["iteration"] != 0:
            return
        saver: Any = CHECKPOINTERS.acquire(self.path)
        try:
            pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
            saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            saver.conn.execute(f"PRAGMA max_page_count = {pages}")
            saver.conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            CHECKPOINTERS.release(self.path)


def test_a_full_checkpoint_disk_names_the_checkpoint_store_and_the_pass(tmp_path):
    with Store(tmp_path / "studio.db") as store:
        agent, grader = _models(3)
        handle = start_run(
            store, _spec(store, 3), on_evaluation=_FillCheckpointDisk(store),
            agent_llm=agent, grader_llm=grader,
        )  # fmt: skip
        assert handle.wait(60)
        run = store.runs.get(handle.run_id)
    assert run["status"] == "error"
    error = run["error"]
    assert error.startswith(f"the run's checkpoint store {tmp_path / 'studio.db'}.checkpoints.sqlite failed after grading pass 1"), error  # fmt: skip
    assert "full" in error and f"resume {handle.run_id}" in error


def test_every_log_line_of_the_loop_names_the_run_and_grading_run(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="rubric_core")
    with Store(tmp_path / "studio.db") as store:
        agent, grader = _models(2)
        handle = start_run(store, _spec(store, 2), agent_llm=agent, grader_llm=grader)
        assert handle.wait(60)
        run = store.runs.get(handle.run_id)
        (grading_run,) = {p["grading_run_id"] for p in store.passes.of_run(handle.run_id)}
    assert run["status"] == "max_iterations_reached"
    loop_lines = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith(("rubric_core.middleware", "rubric_core.pipeline"))
    ]
    assert any("rubric not met after 2 grading passes" in line for line in loop_lines)
    for line in loop_lines:
        assert f"run {handle.run_id}" in line and f"grading run {grading_run}" in line, line
