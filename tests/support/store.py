"""Stored passes and runs for tests: a `RubricEvaluation`-shaped dict and a run with defaults.

Imported by test modules and by `bench/bench_durability.py`; `tests/conftest.py` also
offers both as fixtures (`make_evaluation`, `new_run`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from rubric_core.providers import load_scenario
from rubric_core.runs import RunSpec
from rubric_core.store import NewRun, Store

RUBRIC_TEXT = "- has a title\n- cites a source\n- under 200 words"
"""A three-criterion rubric most store tests use."""


def make_evaluation(
    *,
    grading_run_id: str | None = None,
    iteration: int = 0,
    verdicts: Sequence[tuple[str, bool] | tuple[str, bool, str]] = (
        ("has a title", True),
        ("cites a source", False, "add a source"),
    ),
    result: str | None = None,
    status: str | None = None,
    explanation: str = "One criterion still fails.",
    draft: str = "A draft answer.",
    started_at: float | None = None,
    duration_s: float = 0.5,
    grader_attempts: int = 1,
    grader_input_tokens: int = 100,
    grader_output_tokens: int = 20,
) -> dict[str, Any]:
    """A `RubricEvaluation`-shaped dict; result/status follow the verdicts unless given."""
    criteria = []
    for verdict in verdicts:
        name, passed, *rest = verdict
        item: dict[str, Any] = {"name": name, "passed": passed}
        if not passed:
            item["gap"] = rest[0] if rest else f"fix {name}"
        criteria.append(item)
    all_passed = all(item["passed"] for item in criteria)
    result = result or ("satisfied" if all_passed else "needs_revision")
    return {
        "grading_run_id": grading_run_id or uuid.uuid4().hex,
        "iteration": iteration,
        "result": result,
        "status": status or result,
        "explanation": explanation,
        "criteria": criteria,
        "draft": draft,
        "started_at": started_at if started_at is not None else time.time(),
        "duration_s": duration_s,
        "grader_attempts": grader_attempts,
        "grader_input_tokens": grader_input_tokens,
        "grader_output_tokens": grader_output_tokens,
    }


def new_run(store: Store, version_id: int, **overrides: Any) -> int:
    """Create a run with sensible defaults; keyword arguments override them."""
    fields: dict[str, Any] = {
        "rubric_version_id": version_id,
        "input": "Write a short article.",
        "agent_model": "replay:article",
        "grader_model": "replay:article-grader",
        "grader_tools": ["text_stats"],
        "max_iterations": 3,
        "agent_kind": "basic",
    }
    fields.update(overrides)
    durable = fields.pop("durable", True)
    return store.runs.create(NewRun(**fields), durable=durable)


def replay_template(
    store: Store, scenario: str, *, latency_s: float = 0.0, rubric: str | None = None
) -> RunSpec:
    """A batch template of a bundled replay scenario (scripted turns, not a language
    model), its rubric saved as `rubric` (default `scenario-<name>`), each model call
    taking `latency_s`; the scenario's own input, tools, agent kind and iteration cap."""
    spec = load_scenario(scenario)
    version_id = store.rubrics.save_version(rubric or f"scenario-{scenario}", spec["rubric"])["id"]
    model = f"replay:{scenario}" + (f"?latency_s={latency_s:g}" if latency_s else "")
    return RunSpec(
        rubric_version_id=version_id,
        input=spec["input"],
        agent_model=model,
        grader_model=model,
        grader_tools=tuple(spec["grader_tools"]),
        max_iterations=spec["max_iterations"],
        agent_kind=spec["agent_kind"],
    )
