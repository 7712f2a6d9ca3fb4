"""A batch's summary, computed from the store: what the CLI and the Batch page show."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.scoring import mean_score

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = ["PASS_RATE_RULE", "BatchSummary", "format_rate", "summary_for_batch"]

PASS_RATE_RULE = "Per-criterion pass rate over each run's final pass"
"""The one definition of a batch's pass rates, as the CLI and the Batch page name it: each
criterion's share of passes among the batch's runs' final passes (a run's last stored pass,
the verdict it ended on), one verdict per run, so a run that took three passes counts once."""


@dataclass(frozen=True)
class BatchSummary:
    """What a batch of runs over one rubric version came to, computed from the store."""

    batch_id: str
    """Shared by every run of the batch."""

    total: int
    """Runs in the batch (started so far, when it is still going)."""

    by_status: dict[str, int]
    """Number of runs per status (`running` included while the batch goes on)."""

    satisfied_rate: float
    """Share of the batch's *ended* runs that ended `satisfied`.

    The denominator is every run whose status is no longer `running`: `error`,
    `interrupted`, `grader_error`, `failed` and `max_iterations_reached` runs count
    against the rate; runs still going count for nothing yet. Once a batch is over
    this is satisfied / `total`; while it goes on it is the rate so far rather than
    one that rises as runs finish. 0.0 when no run has ended.
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
    """The score of every scored run (the draft it handed back), in run order: the
    distribution the Batch page plots."""

    pass_rate_rule: str = PASS_RATE_RULE
    """What `criterion_pass_rates` counts, in words (for the CLI and the pages)."""

    @property
    def mean_score(self) -> float | None:
        """Mean of the unclipped `scores`, clipped to [0, 1] as HealthBench aggregates
        (`scoring.mean_score`); `None` when no run has a score yet.

        Examples:
            >>> BatchSummary("b", 2, {}, 0.0, None, {}, [], 0, scores=[0.5, 1.0]).mean_score
            0.75
        """
        return mean_score(self.scores)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "batch_id": self.batch_id,
            "total": self.total,
            "by_status": dict(self.by_status),
            "satisfied_rate": self.satisfied_rate,
            "mean_iterations_to_satisfied": self.mean_iterations_to_satisfied,
            "iterations_to_satisfied": {str(k): v for k, v in self.iterations_to_satisfied.items()},
            "criterion_pass_rates": list(self.criterion_pass_rates),
            "pass_rate_rule": self.pass_rate_rule,
            "grader_errors": self.grader_errors,
            "errors": list(self.errors),
            "mean_score": self.mean_score,
            "scores": list(self.scores),
        }


def _satisfied_rate(by_status: Counter[str]) -> float:
    """Satisfied runs over ended runs (see `BatchSummary.satisfied_rate`).

    Examples:
        >>> _satisfied_rate(Counter(satisfied=2, grader_error=1, running=1))
        0.6666666666666666
        >>> _satisfied_rate(Counter(running=3))
        0.0
    """
    ended = sum(count for status, count in by_status.items() if status != "running")
    return by_status.get("satisfied", 0) / ended if ended else 0.0


def summary_for_batch(store: Store, batch_id: str) -> BatchSummary:
    """Compute a batch's summary from the store (the CLI and the Batch page show this).

    Examples:
        >>> summary_for_batch(store, "batch-1a2b").satisfied_rate  # doctest: +SKIP
        0.75
    """
    runs = store.batch_runs(batch_id)
    by_status = Counter(str(run["status"]) for run in runs)
    satisfied_iterations = [int(run["iterations"]) for run in runs if run["status"] == "satisfied"]
    errors = [
        {"run_id": run["id"], "input": run.get("input", "")[:200], "error": run.get("error")}
        for run in runs
        if run["status"] == "error"
    ]
    mean = statistics.fmean(satisfied_iterations) if satisfied_iterations else None
    return BatchSummary(
        batch_id=batch_id,
        total=len(runs),
        by_status=dict(sorted(by_status.items())),
        satisfied_rate=_satisfied_rate(by_status),
        mean_iterations_to_satisfied=mean,
        iterations_to_satisfied=dict(sorted(Counter(satisfied_iterations).items())),
        criterion_pass_rates=list(store.criterion_pass_rates(batch_id=batch_id, final_only=True)),
        grader_errors=by_status.get("grader_error", 0),
        errors=errors,
        scores=[float(run["score"]) for run in runs if run.get("score") is not None],
    )


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
