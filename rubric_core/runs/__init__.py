"""Runs: one run of an agent with the rubric middleware, from its spec to its stored end.

The modules, in the order a run flows through them (each imports only those before it):

- `spec`: `RunSpec`, the checks that need nothing else (`SpecError` names the bad field),
  and `spec_from_run` for a stored run.
- `agents`: the agent a spec describes, with `RubricMiddleware` and a stop switch.
- `shared`: one agent per spec (its input aside), shared by the runs of a batch.
- `validate`: `validate_spec`, the spec checked against the store and the registries.
- `checkpoints`: the LangGraph checkpointer beside the store, one saver per process.
- `recording`: the recorder that commits each grading pass to the store before the loop
  goes on (retrying, else stopping the run), and the passes a checkpoint kept.
- `handle`: the `RunHandle` a run's starter and watchers hold.
- `prepare`: a run's row, agent and recorder made ready, or a batch input's stored run
  taken over (continued from its checkpoint).
- `execute`: executing a prepared run: `start_run` (on a thread of its own), `run_once`.
- `resume`: `resume_run`, a stopped run continued from its last checkpoint.

Many runs at once are `rubric_core.batch`; grading without an agent, re-grading, labels
and agreement are `rubric_core.workbench`. `MAX_ITERATIONS_LIMIT`, `MAX_CONCURRENCY` and
`AGENT_KINDS` are defined in `rubric_core.schema` and re-exported here.
"""

from __future__ import annotations

from rubric_core.runs.agents import StopRun, build_agent
from rubric_core.runs.checkpoints import checkpoint_path
from rubric_core.runs.execute import run_once, start_run
from rubric_core.runs.handle import RunHandle
from rubric_core.runs.resume import resume_run
from rubric_core.runs.spec import (
    MAX_INPUT_CHARS,
    RunSpec,
    SpecError,
    check_input,
    spec_from_run,
    validate_concurrency,
)
from rubric_core.runs.validate import grader_problem, validate_spec
from rubric_core.schema import AGENT_KINDS, MAX_CONCURRENCY, MAX_ITERATIONS_LIMIT

__all__ = [
    "AGENT_KINDS",
    "MAX_CONCURRENCY",
    "MAX_INPUT_CHARS",
    "MAX_ITERATIONS_LIMIT",
    "RunHandle",
    "RunSpec",
    "SpecError",
    "StopRun",
    "build_agent",
    "check_input",
    "checkpoint_path",
    "grader_problem",
    "resume_run",
    "run_once",
    "spec_from_run",
    "start_run",
    "validate_concurrency",
    "validate_spec",
]
