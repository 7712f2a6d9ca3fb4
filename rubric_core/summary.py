"""Every figure of a batch or an experiment, computed once: what every front door shows.

The pages' models (`rubric_core.ui`), the CLI (text and `--json`), the report and the gate
(`report.figures`, its summary and JUnit XML) and the exports read their figures here, so
they cannot disagree:

- a run's **final pass** is the one `runs.final_evaluation_id` names (kept by the triggers
  of `store.final_pass`); `final_pass` finds it among a run's stored passes;
- **pass rates** per criterion count each run's final pass once (`PASS_RATE_RULE`);
- the **satisfied rate** is over the ended runs (or an experiment's gradings);
- the **mean score** is `scoring.mean_score` (HealthBench's: the mean of the unclipped
  scores, clipped to [0, 1]) over the scores listed beside it, so anyone can recompute it
  (`Summary.mean_basis`); a run's or a pass's own score is shown as stored (`score_text`);
- **completeness**: runs finished out of all, and those still unfinished;
- the **grader kind** of a run or pass, in one vocabulary (`GRADER_KINDS`, `grader_kind`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.rubric import CriterionSpec, RubricError, parse_criteria
from rubric_core.schema import (
    CHECKS_GRADER,
    HUMAN_GRADER_PREFIX,
    REPLAY_PREFIX,
    is_checks_only_grader,
)
from rubric_core.scoring import mean_score, score_pass

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "GRADER_KINDS",
    "MACHINE_GRADER_KINDS",
    "PASS_RATE_RULE",
    "UNFINISHED_STATUSES",
    "BatchSummary",
    "Summary",
    "final_pass",
    "format_rate",
    "graded_by_machine",
    "grader_kind",
    "grader_name",
    "rubric_criteria",
    "score_text",
    "summary_for_batch",
    "summary_for_experiment",
]

PASS_RATE_RULE = "Per-criterion pass rate over each run's final pass"
"""The one definition of a batch's pass rates, as the CLI and the Batch page name it: each
criterion's share of passes among the batch's runs' final passes (`runs.final_evaluation_id`,
the verdict the run ended on), one verdict per run, so a run that took three passes counts
once."""

UNFINISHED_STATUSES: tuple[str, ...] = ("running", "interrupted")
"""Run statuses that are not an end: the run goes on, or can be resumed."""

GRADER_KINDS: tuple[str, ...] = ("judge", "panel", "person", "checks", "replay")
"""Who graded a run or a pass: a judge model, a panel of judges, a person, the rubric's code
checks alone, or a replay model (scripted verdicts standing in for a judge)."""

MACHINE_GRADER_KINDS: frozenset[str] = frozenset({"judge", "panel", "replay", "checks"})
"""The kinds whose verdicts no person gave (a model, a panel, a replay model, the code
checks): the ones agreement with human labels counts. A person's own pass is also their
labels, so it would only agree with itself."""


def grader_name(spec: object) -> str:
    """A stored grader spec in the one vocabulary: every "code checks only" name is `checks`.

    Examples:
        >>> grader_name("checks-only"), grader_name("none"), grader_name("replay:haiku")
        ('checks', 'checks', 'replay:haiku')
    """
    text = "" if spec is None else str(spec).strip()
    if is_checks_only_grader(text) or not text:
        return CHECKS_GRADER
    return text


def grader_kind(spec: object, judges: Sequence[Any] | None = None) -> str:
    """The kind of grader (`GRADER_KINDS`) a grader spec names; `judges`, a pass's panel.

    Examples:
        >>> grader_kind("human:ana"), grader_kind("checks-only"), grader_kind("replay:haiku")
        ('person', 'checks', 'replay')
        >>> grader_kind("openai:gpt-4o-mini"), grader_kind("openai:gpt-4o", ["a", "b", "c"])
        ('judge', 'panel')
    """
    name = grader_name(spec)
    if name == CHECKS_GRADER:
        return "checks"
    if name.startswith(HUMAN_GRADER_PREFIX):
        return "person"
    if judges is not None and len(judges) > 1:
        return "panel"
    if name.startswith(REPLAY_PREFIX):
        return "replay"
    return "judge"


def graded_by_machine(spec: object, judges: Sequence[Any] | None = None) -> bool:
    """Whether no person gave the verdicts (a judge, a panel, a replay model or the code
    checks did): agreement with human labels counts only these passes.

    Examples:
        >>> graded_by_machine("human:ana"), graded_by_machine("checks"), graded_by_machine("m")
        (False, True, True)
    """
    return grader_kind(spec, judges) in MACHINE_GRADER_KINDS


def final_pass(
    run: Mapping[str, Any], passes: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """Among a run's stored passes, the final one: `runs.final_evaluation_id`'s.

    Examples:
        >>> final_pass({"final_evaluation_id": 7}, [{"id": 7}, {"id": 9}])
        {'id': 7}
        >>> final_pass({"final_evaluation_id": None}, []) is None
        True
    """
    wanted = run.get("final_evaluation_id")
    if wanted is None:
        return None
    return next((p for p in passes if int(p["id"]) == int(wanted)), None)


def format_rate(value: float | None) -> str:
    """A rate as a percentage for people; `None` or NaN is `'n/a'`.

    Examples:
        >>> format_rate(2 / 3)
        '66.7%'
        >>> format_rate(None)
        'n/a'
    """
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value * 100:.1f}%"


def score_text(score: float | None) -> str:
    """One run's or pass's score as every page, report and CLI line shows it: as stored
    (unclipped, so a pass whose penalties outweigh what it earned reads below 0).

    Examples:
        >>> score_text(-0.8), score_text(1), score_text(None)
        ('-0.80', '1.00', 'n/a')
    """
    return "n/a" if score is None else f"{float(score):.2f}"


def rubric_criteria(text: str, names: Sequence[str]) -> list[CriterionSpec]:
    """A version's criteria with weights and checks; weight-1 judged ones by name when the
    text uses a check this process has not registered."""
    try:
        return parse_criteria(text)
    except RubricError:
        return [CriterionSpec(name) for name in names]


@dataclass(frozen=True)
class Summary:
    """What a batch of runs (or an experiment's gradings) over one rubric version came to."""

    batch_id: str
    """The batch id (for an experiment: its id, as text)."""

    total: int
    """Runs in the batch (started so far, when it is still going); an experiment's gradings."""

    by_status: dict[str, int]
    """Number of runs per status (`running` included while the batch goes on)."""

    satisfied_rate: float
    """Share of the *ended* runs that ended `satisfied`.

    The denominator is every run whose status is no longer `running`: `error`,
    `interrupted`, `grader_error`, `failed` and `max_iterations_reached` runs count
    against the rate; runs still going count for nothing yet. 0.0 when no run has ended.
    """

    mean_iterations_to_satisfied: float | None
    """Mean grading passes the satisfied runs took; `None` if none was satisfied."""

    iterations_to_satisfied: dict[int, int]
    """Passes taken -> number of satisfied runs that took that many."""

    criterion_pass_rates: list[dict[str, Any]]
    """`{criterion, passed, total, pass_rate}` over each run's final pass (`PASS_RATE_RULE`)."""

    grader_errors: int
    """Runs that ended `grader_error` (their grader broke)."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    """`{run_id, input, error}` for runs that ended `error`."""

    scores: list[float] = field(default_factory=list)
    """The score of every scored run (the draft it handed back), unclipped, in run order:
    what `mean_score` averages and the Batch page plots."""

    pass_rate_rule: str = PASS_RATE_RULE
    """What `criterion_pass_rates` counts, in words (for the CLI and the pages)."""

    kind: str = "batch"
    """`batch` or `experiment`."""

    grader_kinds: dict[str, int] = field(default_factory=dict)
    """Runs per grader kind (`GRADER_KINDS`)."""

    @property
    def mean_score(self) -> float | None:
        """Mean of the unclipped `scores`, clipped to [0, 1] as HealthBench aggregates
        (`scoring.mean_score`); `None` when no run has a score yet.

        Examples:
            >>> BatchSummary("b", 2, {}, 0.0, None, {}, [], 0, scores=[0.5, 1.0]).mean_score
            0.75
        """
        return mean_score(self.scores)

    @property
    def finished(self) -> int:
        """Runs that ended (not `running`, not `interrupted`)."""
        return self.total - self.unfinished

    @property
    def unfinished(self) -> int:
        """Runs still going or interrupted (`UNFINISHED_STATUSES`)."""
        return sum(self.by_status.get(status, 0) for status in UNFINISHED_STATUSES)

    def mean_basis(self, shown: int = 20) -> str:
        """The numbers the mean score is computed from, in words, so a user can recompute it.

        Examples:
            >>> BatchSummary("b", 3, {}, 0.0, None, {}, [], 0, scores=[-5.0, 1.0, -5.0]).mean_basis()
            'mean of 3 scores (-5.00, 1.00, -5.00) = -3.00, clipped to [0, 1]: 0.00'
        """
        if not self.scores:
            return "no scored run yet"
        listed = ", ".join(score_text(s) for s in self.scores[:shown])
        if len(self.scores) > shown:
            listed += f", … {len(self.scores) - shown} more"
        raw = statistics.fmean(self.scores)
        return (
            f"mean of {len(self.scores)} score{'s' if len(self.scores) != 1 else ''} "
            f"({listed}) = {raw:.2f}, clipped to [0, 1]: {score_text(self.mean_score)}"
        )

    def iterations_basis(self) -> str:
        """What the mean passes to satisfied is computed from, in words.

        Examples:
            >>> BatchSummary("b", 3, {}, 1.0, 1.5, {1: 2, 3: 1}, [], 0).iterations_basis()
            'mean grading passes of the 3 satisfied runs (1 pass: 2 runs, 3 passes: 1 run) = 1.50'
        """
        if self.mean_iterations_to_satisfied is None:
            return "no satisfied run yet"
        runs = sum(self.iterations_to_satisfied.values())
        listed = ", ".join(
            f"{n} pass{'es' if n != 1 else ''}: {c} run{'s' if c != 1 else ''}"
            for n, c in self.iterations_to_satisfied.items()
        )
        return (
            f"mean grading passes of the {runs} satisfied run{'s' if runs != 1 else ''} "
            f"({listed}) = {self.mean_iterations_to_satisfied:.2f}"
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "batch_id": self.batch_id,
            "total": self.total,
            "finished": self.finished,
            "unfinished": self.unfinished,
            "by_status": dict(self.by_status),
            "grader_kinds": dict(self.grader_kinds),
            "satisfied_rate": self.satisfied_rate,
            "mean_iterations_to_satisfied": self.mean_iterations_to_satisfied,
            "iterations_to_satisfied": {str(k): v for k, v in self.iterations_to_satisfied.items()},
            "criterion_pass_rates": list(self.criterion_pass_rates),
            "pass_rate_rule": self.pass_rate_rule,
            "grader_errors": self.grader_errors,
            "errors": list(self.errors),
            "mean_score": self.mean_score,
            "mean_basis": self.mean_basis(),
            "scores": list(self.scores),
        }


BatchSummary = Summary
"""The name the batch executors, the CLI and the pages have always used."""


def _satisfied_rate(by_status: Counter[str]) -> float:
    """Satisfied runs over ended runs (see `Summary.satisfied_rate`).

    Examples:
        >>> _satisfied_rate(Counter(satisfied=2, grader_error=1, running=1))
        0.6666666666666666
        >>> _satisfied_rate(Counter(running=3))
        0.0
    """
    ended = sum(count for status, count in by_status.items() if status != "running")
    return by_status.get("satisfied", 0) / ended if ended else 0.0


def summary_for_batch(store: Store, batch_id: str) -> Summary:
    """Compute a batch's summary from the store (every front door shows this).

    Examples:
        >>> summary_for_batch(store, "batch-1a2b").satisfied_rate  # doctest: +SKIP
        0.75
    """
    runs = store.runs.of_batch(batch_id)
    by_status = Counter(str(run["status"]) for run in runs)
    satisfied_iterations = [int(run["iterations"]) for run in runs if run["status"] == "satisfied"]
    errors = [
        {"run_id": run["id"], "input": run.get("input", "")[:200], "error": run.get("error")}
        for run in runs
        if run["status"] == "error"
    ]
    mean = statistics.fmean(satisfied_iterations) if satisfied_iterations else None
    kinds = Counter(grader_kind(run.get("grader_model")) for run in runs)
    return Summary(
        batch_id=batch_id,
        total=len(runs),
        by_status=dict(sorted(by_status.items())),
        satisfied_rate=_satisfied_rate(by_status),
        mean_iterations_to_satisfied=mean,
        iterations_to_satisfied=dict(sorted(Counter(satisfied_iterations).items())),
        criterion_pass_rates=list(
            store.passes.criterion_pass_rates(batch_id=batch_id, final_only=True)
        ),
        grader_errors=by_status.get("grader_error", 0),
        errors=errors,
        scores=[float(run["score"]) for run in runs if run.get("score") is not None],
        grader_kinds=dict(sorted(kinds.items())),
    )


EXPERIMENT_PASS_RATE_RULE = (
    "Per-criterion pass rate over each re-graded source pass once: several samples of a "
    "pass combined by strict majority; samples that judged nothing left out"
)


def experiment_rates(
    verdicts: Mapping[int, Sequence[Mapping[str, Any]]], order: Sequence[str]
) -> list[dict[str, Any]]:
    """`{criterion, passed, total, pass_rate}` over an experiment's source passes, in
    rubric order (verdicts by source pass, samples already combined)."""
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for criteria in verdicts.values():
        for verdict in criteria:
            if verdict.get("insufficient"):
                continue
            total[verdict["name"]] += 1
            passed[verdict["name"]] += bool(verdict.get("passed"))
    names = [n for n in order if n in total] + [n for n in total if n not in order]
    return [
        {
            "criterion": name,
            "passed": passed[name],
            "total": total[name],
            "pass_rate": passed[name] / total[name],
        }
        for name in names
    ]


def summary_for_experiment(store: Store, experiment_id: int) -> Summary:
    """An experiment's summary over its gradings: satisfied rate and mean score (each
    grading scored by `scoring.score_pass` with the version's weights, averaged by
    `scoring.mean_score` as a batch's are); pass rates over its source passes. An
    experiment runs no loop: no iterations to satisfied."""
    experiment = store.experiments.get(experiment_id)
    version = store.rubrics.version(int(experiment["rubric_version_id"]))
    specs = rubric_criteria(version["text"], list(version["criteria"]))
    raw = store.experiments.items(experiment_id)
    results = Counter(str(item["result"]) for item in raw)
    scores = [score_pass(specs, item["criteria"]) for item in raw if item["criteria"]]
    kind = grader_kind(experiment.get("grader_model"))
    return Summary(
        batch_id=str(experiment_id),
        total=len(raw),
        by_status=dict(sorted(results.items())),
        satisfied_rate=_satisfied_rate(results),
        mean_iterations_to_satisfied=None,
        iterations_to_satisfied={},
        criterion_pass_rates=experiment_rates(
            store.experiments.verdicts(experiment_id), list(version["criteria"])
        ),
        grader_errors=results.get("grader_error", 0),
        scores=[s for s in scores if s is not None],
        pass_rate_rule=EXPERIMENT_PASS_RATE_RULE,
        kind="experiment",
        grader_kinds={kind: len(raw)} if raw else {},
    )
