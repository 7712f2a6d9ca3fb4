"""Verdicts, statuses and the records every grading pass produces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NotRequired

from pydantic import BaseModel, Field, StrictBool, model_validator
from typing_extensions import TypedDict

GraderVerdict = Literal["satisfied", "needs_revision", "failed"]
"""What the grader itself may answer.

- `satisfied`: every criterion passes.
- `needs_revision`: at least one criterion fails; the agent runs again.
- `failed`: the rubric is malformed or cannot be judged from what the grader has.
"""

EvaluationResult = Literal["satisfied", "needs_revision", "failed", "grader_error"]
"""The `result` of one grading pass: the judge's verdict, or `grader_error` when
the grader sub-agent itself raised and so gave no verdict."""

RubricStatus = Literal[
    "satisfied", "needs_revision", "failed", "grader_error", "max_iterations_reached"
]
"""The loop's status after a pass. Only `needs_revision` keeps the loop going."""

TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"satisfied", "failed", "grader_error", "max_iterations_reached"}
)
"""Statuses that end a grading run; the same rubric passed again starts a new run."""

STATUS_DESCRIPTIONS: dict[str, str] = {
    "satisfied": "Every criterion of the rubric passed.",
    "needs_revision": (
        "The grader found failing criteria; their feedback went back to the agent "
        "and it is revising."
    ),
    "max_iterations_reached": (
        "The grader still wanted changes when the cap on grading passes was hit; "
        "the agent's last answer is left as it was."
    ),
    "failed": (
        "The grader said the rubric is malformed or cannot be evaluated; its explanation "
        "says why. Check that reason before changing the rubric: a weak grader may be "
        "wrong (a tool or a stronger grader may be what it needs)."
    ),
    "grader_error": (
        "The grader itself broke (timeout, missing credentials, unusable output); "
        "the explanation holds the exception. The agent's answer was not judged."
    ),
}
"""One sentence per status, for READMEs, CLIs and dashboards."""

RUBRIC_STATUSES: tuple[str, ...] = (
    "satisfied",
    "needs_revision",
    "failed",
    "grader_error",
    "max_iterations_reached",
)
"""Every `RubricStatus`, in the order lists and filters show them."""

EVALUATION_RESULTS: tuple[str, ...] = ("satisfied", "needs_revision", "failed", "grader_error")
"""Every `EvaluationResult`: what one pass may conclude."""

RUN_ONLY_STATUS_DESCRIPTIONS: dict[str, str] = {
    "running": "The agent is working or the grader is judging; passes appear as they are graded.",
    "interrupted": (
        "The process running it stopped (the dashboard or CLI was closed, or Stop was pressed) "
        "before a verdict; every pass graded until then is kept."
    ),
    "error": (
        "The agent or its model raised, or the store or the run's checkpoint store failed, "
        "before the loop could finish; the error says which, and every pass graded until "
        "then is kept."
    ),
}
"""Statuses a stored run may have that the loop itself never reports."""

RUN_STATUSES: tuple[str, ...] = ("running", *RUBRIC_STATUSES, "interrupted", "error")
"""Every status a stored run may have, in filter order."""

RUN_STATUS_DESCRIPTIONS: dict[str, str] = {
    status: STATUS_DESCRIPTIONS.get(status) or RUN_ONLY_STATUS_DESCRIPTIONS[status]
    for status in RUN_STATUSES
}
"""One sentence per run status: the loop's statuses plus the run-only ones."""

GRADED_STATUS_DESCRIPTIONS: dict[str, str] = {
    "satisfied": "Every criterion of the rubric passed.",
    "needs_revision": (
        "The output fails at least one criterion; the gaps say what to change. It was "
        "graded once, as it was given: nothing revises it."
    ),
    "max_iterations_reached": (
        "The grader still wanted changes when the cap on grading passes was hit; the "
        "output is left as it was given."
    ),
    "failed": STATUS_DESCRIPTIONS["failed"],
    "grader_error": (
        "The grader itself broke (timeout, missing credentials, unusable output); "
        "the explanation holds the exception. The output was not judged."
    ),
    "running": "The grader is judging the output; its verdict appears when it is graded.",
    "interrupted": (
        "The process grading it stopped (the dashboard or CLI was closed, or Stop was "
        "pressed) before a verdict."
    ),
    "error": "Grading raised before a verdict could be stored; the error is shown.",
}
"""One sentence per run status for a grade-only run (an output graded as it was given,
by `grade`, a graded dataset or the Run page's grade form): no agent is mentioned."""


AgentKind = Literal["basic", "deep"]
"""`basic` is `langchain.agents.create_agent`, `deep` is deepagents' `create_deep_agent`."""

AGENT_KINDS: tuple[str, ...] = ("basic", "deep")
"""Every `AgentKind`."""

GRADED_KIND = "graded"
"""The `agent_kind` of a grade-only run: an existing output graded once, no agent
(its `agent_model` is empty and it has no revision)."""

RUN_AGENT_KINDS: tuple[str, ...] = (*AGENT_KINDS, GRADED_KIND)
"""Every `agent_kind` a stored run may have: the agents a spec builds, and `graded`."""

HUMAN_GRADER_PREFIX = "human:"
"""`grader_model` of a pass a person graded (`human:<reviewer>`): no model was called."""

CHECKS_GRADER = "checks"
"""`grader_model` of a pass graded by the rubric's code checks alone (no judge was called)."""

NO_GRADER_SPECS: frozenset[str] = frozenset({"none", CHECKS_GRADER, "checks-only"})
"""What a user may write for "no grader, code checks only" (`--grader none`); `checks-only`
is the name earlier builds recorded (migration `0012_checks_grader_name` renames it)."""


def is_checks_only_grader(spec: object) -> bool:
    """Whether a grader spec asks for no judge: code checks only (`none`, `checks`).

    Examples:
        >>> is_checks_only_grader(" None "), is_checks_only_grader("replay:haiku")
        (True, False)
    """
    return isinstance(spec, str) and spec.strip().casefold() in NO_GRADER_SPECS


MAX_ITERATIONS_LIMIT = 20
"""The most grading passes one rubric attempt may have (`max_iterations` is 1..20)."""

DEFAULT_MAX_ITERATIONS = 3
"""Grading passes per attempt when none is given."""

MAX_CONCURRENCY = 16
"""The most runs a batch executes at once in one process."""


REPLAY_PREFIX = "replay:"
"""Model strings starting with this name an offline replay scenario (`replay:<name>`):
scripted turns, not a language model."""

BASE_URL_ENV = "RUBRIC_STUDIO_LLM_BASE_URL"
"""An OpenAI-compatible endpoint (e.g. a local llama.cpp server) offered to runs."""

MODEL_ENV = "RUBRIC_STUDIO_LLM_MODEL"
"""The model name to ask that endpoint for (optional)."""

RUBRIC_GRADER_MESSAGE_SOURCE = "rubric_grader"
"""`name` and `additional_kwargs["lc_source"]` of the feedback messages the loop
injects, so UIs and evals can tell the grader's turns from the user's."""

KEEP_CHOICES: tuple[str, ...] = ("last", "best")
"""Which draft a run hands back when it ends unmet: the last one (the default), or the
highest-scoring pass's (`RubricMiddleware(keep="best")`)."""

KeepChoice = Literal["last", "best"]

BEST_DRAFT_KEY = "rubric_best_draft"
"""`additional_kwargs` key on the AI message `keep="best"` appends: `{"iteration", "score"}`
of the pass whose draft it repeats, so UIs can tell it from the agent's own last turn."""


def verdict_problem(
    name: object,
    passed: object,
    *,
    insufficient: object = False,
    gap: object = None,
    require_gap: bool = True,
) -> str | None:
    """What breaks the verdict rules in one criterion's verdict, or `None`: the one
    validator the judge's verdict (`Criterion`), the store's rows and the evaluate
    functions (stored verdicts, labels) all apply.

    The rules: a non-empty name; insufficient evidence is never a pass; a failure (or an
    insufficient verdict) needs a gap saying what must change (`require_gap`; stored and
    labelled verdicts of old may lack one).

    Examples:
        >>> verdict_problem("has a title", True) is None
        True
        >>> verdict_problem("cites a source", True, insufficient=True)
        "criterion 'cites a source' is both passed and insufficient; insufficient evidence is not a pass"
        >>> verdict_problem("cites a source", False)
        "criterion 'cites a source' failed but has no gap: say what must change"
    """
    if not isinstance(name, str) or not name.strip():
        return "criterion name must not be empty"
    if insufficient and passed:
        return (
            f"criterion {name!r} is both passed and insufficient; insufficient evidence "
            "is not a pass"
        )
    if require_gap and not passed and not str(gap or "").strip():
        return f"criterion {name!r} failed but has no gap: say what must change"
    return None


def pass_result(verdicts: Iterable[Mapping[str, object]]) -> Literal["satisfied", "needs_revision"]:
    """A pass's result from its verdicts: `satisfied` if and only if there is at least one
    verdict and every one passed (an insufficient one never passes). The one place this
    rule is written: code checks, a judge, a panel and a person's verdicts all use it.

    Examples:
        >>> pass_result([{"name": "a", "passed": True}, {"name": "b", "passed": True}])
        'satisfied'
        >>> pass_result([{"name": "a", "passed": False, "insufficient": True}]), pass_result([])
        ('needs_revision', 'needs_revision')
    """
    values = [verdict.get("passed") is True for verdict in verdicts]
    return "satisfied" if values and all(values) else "needs_revision"


class Regression(TypedDict):
    """A criterion that passed in an earlier pass of the grading run and fails now."""

    name: str
    """The criterion's name."""

    passed_in: int
    """The last pass (1-based) in which it passed."""


class CriterionVerdict(TypedDict):
    """One criterion as judged in one pass."""

    name: str
    """What the criterion checks, as the rubric states it."""

    passed: bool
    """Whether the work meets it."""

    gap: NotRequired[str]
    """Only on failing criteria: what is missing or wrong, specific enough to act on."""

    checked_by: NotRequired[Literal["code"]]
    """Present when a code check (`rubric_core.tools.checks`) decided it, not the judge."""

    evidence: NotRequired[str]
    """On checked criteria: the check's own output (on failures it is the gap too)."""

    check_error: NotRequired[bool]
    """On checked criteria: `True` when the check could not decide (a missing file, a
    sandbox that would not start); `passed` is then False, through no fault of the work."""

    insufficient: NotRequired[bool]
    """Present (and `True`) only when the grader could not verify the criterion from
    what it was shown; `passed` is then `False` and `gap` says what it could not see.
    Not a pass for the loop, but counted apart from a judged failure."""


class JudgeRecord(TypedDict):
    """One judge's own verdict on a pass graded by a panel (`RubricEvaluation.judges`)."""

    judge: str
    """The judge's name: its model (numbered `#1`, `#2`... when a model sits twice)."""

    result: EvaluationResult
    """This judge's verdict on the pass."""

    explanation: str
    """This judge's summary."""

    criteria: list[CriterionVerdict]
    """This judge's per-criterion verdicts, in rubric order."""


class Criterion(BaseModel):
    """A criterion verdict as the grader must state it (reasoning before verdict)."""

    name: str = Field(
        description=(
            "The criterion being judged, copied from the numbered checklist in the request."
        ),
    )
    evidence: str = Field(
        default="",
        description="What in the transcript or in tool results supports the verdict.",
    )
    # Strict: `"passed": "yes"` (or 1) is rejected and corrected, never read as a pass.
    passed: StrictBool = Field(description="True only if the evidence positively confirms it.")
    gap: str | None = Field(
        default=None,
        description=(
            "Required when passed is false: a short, actionable instruction saying what "
            "is missing or wrong. Leave empty when passed is true."
        ),
    )

    insufficient: StrictBool = Field(
        default=False,
        description=(
            "True only if the transcript and tool results do not show enough to judge this "
            "criterion either way (say, behaviour visible only in output you were not shown). "
            "Then passed must be false and gap must say what evidence is missing."
        ),
    )

    @model_validator(mode="after")
    def _gap_on_failure(self) -> Criterion:
        problem = verdict_problem(
            self.name, self.passed, insufficient=self.insufficient, gap=self.gap
        )
        if problem is not None:
            raise ValueError(problem)
        return self

    def as_verdict(self) -> CriterionVerdict:
        """The stored form: `{name, passed}` plus `gap` on failures only, and
        `insufficient: True` when the grader could not verify it."""
        verdict: CriterionVerdict = {"name": self.name.strip(), "passed": self.passed}
        if not self.passed:
            verdict["gap"] = (self.gap or "").strip()
        if self.insufficient:
            verdict["insufficient"] = True
        return verdict


class GraderResponse(BaseModel):
    """The grader's structured verdict, once per pass. Unless the judge answered `failed`
    (the rubric cannot be evaluated), `result` is `pass_result` of the criteria: one that
    disagrees is replaced, never re-asked (a request lost), and the explanation says so.

    Examples:
        >>> GraderResponse.model_validate({"explanation": "Good.", "result": "satisfied",
        ...     "criteria": [{"name": "cites", "passed": False, "gap": "add one"}]}).explanation
        "Good. (The grader said 'satisfied' although 'cites' failed; the criteria decide.)"
    """

    criteria: list[Criterion] = Field(
        description=(
            "Exactly one entry per criterion of the checklist, in checklist order. "
            "Never skip or merge criteria."
        ),
    )
    explanation: str = Field(
        description="One or two sentences summarising the verdict, addressed to the agent."
    )
    result: GraderVerdict = Field(
        description=(
            "'satisfied' only if every criterion passed; 'needs_revision' if at least one "
            "failed; 'failed' if the rubric itself cannot be evaluated."
        ),
    )

    @model_validator(mode="after")
    def _derived(self) -> GraderResponse:
        verdicts = [c.as_verdict() for c in self.criteria]
        if self.result == "failed" or pass_result(verdicts) == self.result:
            return self
        failing = ", ".join(repr(v["name"]) for v in verdicts if not v["passed"])
        reason = f"although {failing} failed" if failing else "although every criterion passed"
        reason = reason if verdicts else "but judged no criterion"
        note = f"The grader said {self.result!r} {reason}; the criteria decide."
        explanation = self.explanation.strip()
        self.explanation = f"{explanation} ({note})" if explanation else note
        self.result = pass_result(verdicts)
        return self


class RubricEvaluation(TypedDict):
    """One grading pass, as kept in `_rubric_evaluations`, sent to `on_evaluation`
    and stored by the runner. Every field is always present except `judges`, which only
    a panel's passes have."""

    grading_run_id: str
    """Shared by every pass of one rubric attempt."""

    iteration: int
    """Zero-based index of the pass within its attempt."""

    result: EvaluationResult
    """The judge's verdict for this pass, or `grader_error`. At the iteration cap it
    stays `needs_revision`; the loop's verdict is in `status`."""

    status: RubricStatus
    """The loop's status after this pass (`max_iterations_reached` at the cap)."""

    explanation: str
    """The grader's summary; on `grader_error`, the exception type, HTTP status when
    it has one, and message."""

    criteria: list[CriterionVerdict]
    """Per-criterion verdicts in rubric order; empty on `grader_error`."""

    draft: str
    """The agent's answer this pass judged (the text of its final message)."""

    started_at: float
    """Unix time at which the pass began."""

    duration_s: float
    """Wall-clock seconds the pass took, grader retries included."""

    grader_attempts: int
    """Grader calls made in this pass (transient-failure and coverage retries count)."""

    grader_input_tokens: int
    """Input tokens the grader's model reported for this pass (0 if it reports none)."""

    grader_output_tokens: int
    """Output tokens the grader's model reported for this pass (0 if it reports none)."""

    score: float | None
    """Weighted score of the pass in [0, 1] (`rubric_core.scoring.score_pass`); `None`
    on `grader_error`."""

    regressions: list[Regression]
    """Criteria that passed in an earlier pass of this grading run and fail now."""

    judges: NotRequired[list[JudgeRecord]]
    """Only on a pass graded by a panel (`RubricMiddleware(panel=..., samples=...)`):
    every judge's own verdict, in panel order. `criteria` then holds the verdicts
    combined by strict majority."""


class RubricEvent(TypedDict):
    """Payload written to LangGraph's custom stream around each grading pass."""

    type: Literal["rubric_evaluation_start", "rubric_evaluation_end"]
    grading_run_id: str
    iteration: int
    result: NotRequired[EvaluationResult]
    status: NotRequired[RubricStatus]
    explanation: NotRequired[str]
    criteria: NotRequired[list[CriterionVerdict]]
    score: NotRequired[float | None]
    regressions: NotRequired[list[Regression]]
