"""The grader: what it is told, how it reads the transcript, when it is retried, how its
verdict is mapped onto the rubric, and the sub-agent that runs one grading pass.

- `prompt`: the system prompt, the nonce-tagged payload, rejection and coverage messages.
- `transcript`: rendering the agent's conversation within a budget; defusing fake tags.
- `retry`: `RetryPolicy`, which failures are transient, `Retry-After`, failure texts.
- `align`: matching the grader's criterion names to the rubric's.
- `usage`: `GraderUsage`, the attempts and tokens of one pass.
- `budget`: `GraderLimits` and `PassBudget`: timeout, time budget and call caps of a pass.
- `replies`: a model call that returned no reply at all, as a clear `EmptyReplyError`.
- `verdict_schema`: the verdict's JSON schema built per checklist, in its provider's dialect.
- `validate`: `RubricMiddleware`'s argument checks.
- `subagent`: `Grader`, which runs a pass, and its correction cap.
- `panel`: `Panel`, judges combined by strict majority; `outcome_from_verdicts` for a person's.
- `judges`: who grades a pass (one grader, a panel, or none: code checks only).
"""

from __future__ import annotations

from rubric_core.grader.align import align_criteria
from rubric_core.grader.budget import GraderLimitError, GraderLimits
from rubric_core.grader.checked import (
    NoGraderError,
    checks_only_problem,
    judged_names,
    require_checks_only,
)
from rubric_core.grader.panel import Panel, judge_name, outcome_from_verdicts
from rubric_core.grader.prompt import GRADER_SYSTEM_PROMPT, build_payload
from rubric_core.grader.retry import RetryPolicy, describe_exception, http_status, is_transient
from rubric_core.grader.subagent import Grader, GraderOutcome, GraderOutputError
from rubric_core.grader.transcript import render_transcript
from rubric_core.grader.usage import GraderUsage

__all__ = [
    "GRADER_SYSTEM_PROMPT",
    "Grader",
    "GraderLimitError",
    "GraderLimits",
    "GraderOutcome",
    "GraderOutputError",
    "GraderUsage",
    "NoGraderError",
    "Panel",
    "RetryPolicy",
    "align_criteria",
    "build_payload",
    "checks_only_problem",
    "describe_exception",
    "http_status",
    "is_transient",
    "judge_name",
    "judged_names",
    "outcome_from_verdicts",
    "render_transcript",
    "require_checks_only",
]
