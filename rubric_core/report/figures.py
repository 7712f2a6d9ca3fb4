"""What a batch, an experiment or a run came to, read once for the report and the CI gate.

Every figure comes from `rubric_core.summary`, the one home the pages, the CLI and the
exports read too (satisfied rate, mean score and the scores it averages, pass rates over
each run's final pass, completeness, grader kinds), and agreement from
`workbench.agreement` (percent agreement, Cohen's kappa, confusion). Nothing here draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.errors import InputError
from rubric_core.extras import MissingExtra
from rubric_core.scoring import mean_score, score_pass
from rubric_core.summary import (
    EXPERIMENT_PASS_RATE_RULE,
    PASS_RATE_RULE,
    Summary,
    final_pass,
    grader_kind,
    rubric_criteria,
    summary_for_batch,
    summary_for_experiment,
)

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "BATCH_FINAL_PASS_RULE",
    "EXPERIMENT_FINAL_PASS_RULE",
    "Figures",
    "Item",
    "batch_figures",
    "experiment_figures",
    "figures_for",
    "rubric_criteria",
    "run_figures",
]

BATCH_FINAL_PASS_RULE = PASS_RATE_RULE
EXPERIMENT_FINAL_PASS_RULE = EXPERIMENT_PASS_RATE_RULE


@dataclass
class Item:
    """One input: its run, request, outcome and every pass (or grading) with its verdicts."""

    run_id: int
    input: str
    status: str
    score: float | None
    passes: list[dict[str, Any]]
    """Oldest first; each has `draft`, `result`, `explanation`, `criteria` (with gaps)."""
    error: str | None = None
    """Why the run ended in error (or its grader broke), when it did."""
    final: dict[str, Any] | None = None
    """The final pass (`runs.final_evaluation_id`'s; an experiment's last grading)."""

    @property
    def final_criteria(self) -> list[dict[str, Any]]:
        """The final pass's verdicts (none without a final pass)."""
        return list(self.final["criteria"]) if self.final else []

    @property
    def gaps(self) -> list[tuple[str, str]]:
        """The failing criteria of the final pass and their gaps."""
        return [
            (c["name"], str(c.get("gap") or "")) for c in self.final_criteria if not c.get("passed")
        ]


@dataclass
class Figures:
    """The figures of one batch, experiment or run, as the report and the gate read them."""

    kind: str
    """`batch`, `experiment` or `run`."""
    ident: str
    rubric: dict[str, Any]
    """The rubric version row (`name`, `version`, `text`, `criteria`)."""
    total: int
    by_status: dict[str, int]
    satisfied_rate: float | None
    mean_score: float | None
    mean_iterations_to_satisfied: float | None
    iterations_to_satisfied: dict[int, int]
    criterion_rates: list[dict[str, Any]]
    """`{criterion, passed, total, pass_rate}` in rubric order, under `final_pass_rule`."""
    final_pass_rule: str
    agreement: dict[str, Any] | None = None
    """`evaluate.AgreementReport` against the human labels, `None` without labels."""
    agreement_note: str = ""
    """Why there is no agreement (no labels, scikit-learn missing)."""
    against: int | None = None
    """`--against`: the experiment this one is compared with."""
    comparison: dict[str, Any] | None = None
    """`--against`: `workbench.agreement.compare_stored_experiments` of the two."""
    against_agreement: dict[str, Any] | None = None
    """`--against`: this experiment as predictor of the other (`agreement_between`)."""
    items: list[Item] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    """The scores `mean_score` averages (`summary.Summary.scores`)."""
    mean_basis: str = ""
    """The mean score's numbers in words (`summary.Summary.mean_basis`)."""
    finished: int = 0
    """Runs (gradings) that ended; `total - finished` are still going or interrupted."""
    grader_kinds: dict[str, int] = field(default_factory=dict)
    """Runs per grader kind (`summary.GRADER_KINDS`)."""

    @property
    def title(self) -> str:
        """`Batch graded-1a2b` / `Experiment 3` / `Run 12`."""
        return f"{self.kind.capitalize()} {self.ident}"

    def rate_of(self, criterion: str) -> float | None:
        """The pass rate of one criterion (exact name, else case-insensitive), or `None`."""
        for exact in (True, False):
            for row in self.criterion_rates:
                name = str(row["criterion"])
                if name == criterion if exact else name.casefold() == criterion.casefold():
                    return float(row["pass_rate"])
        return None


def _labels_agreement(store: Store, **where: Any) -> tuple[dict[str, Any] | None, str]:
    from rubric_core.workbench.agreement import NoLabelsError, agreement_with_labels

    try:
        return dict(agreement_with_labels(store, **where)), ""
    except NoLabelsError:
        return None, "no human labels on these passes"
    except MissingExtra as exc:
        return None, str(exc)


def _run_item(store: Store, run: dict[str, Any]) -> Item:
    score = run.get("score")
    passes = store.passes.of_run(int(run["id"]))
    last = final_pass(run, passes)
    return Item(
        run_id=int(run["id"]),
        input=str(run.get("input") or ""),
        status=str(run["status"]),
        score=None if score is None else float(score),
        passes=passes,
        error=run.get("error") or None,
        final=None if last is None else dict(last),
    )


def _from_summary(summary: Summary) -> dict[str, Any]:
    """The `Figures` fields a `Summary` gives, as keyword arguments."""
    return {
        "total": summary.total,
        "by_status": dict(summary.by_status),
        "mean_score": summary.mean_score,
        "mean_iterations_to_satisfied": summary.mean_iterations_to_satisfied,
        "iterations_to_satisfied": dict(summary.iterations_to_satisfied),
        "criterion_rates": list(summary.criterion_pass_rates),
        "final_pass_rule": summary.pass_rate_rule,
        "scores": list(summary.scores),
        "mean_basis": summary.mean_basis(),
        "finished": summary.finished,
        "grader_kinds": dict(summary.grader_kinds),
    }


def batch_figures(store: Store, batch_id: str, *, with_items: bool = True) -> Figures:
    """A batch's figures: `summary_for_batch`, final-pass rates, agreement with labels.

    Raises:
        InputError: No run has that batch id.
    """
    runs = store.runs.of_batch(batch_id)
    if not runs:
        msg = f"no batch {batch_id!r} in this store"
        raise InputError(msg)
    summary = summary_for_batch(store, batch_id)
    agreement, note = _labels_agreement(store, batch_id=batch_id)
    runs.sort(key=lambda r: (r.get("input_index") is None, r.get("input_index") or 0, r["id"]))
    return Figures(
        kind="batch",
        ident=batch_id,
        rubric=store.rubrics.version(int(runs[0]["rubric_version_id"])),
        satisfied_rate=summary.satisfied_rate,
        **_from_summary(summary),
        agreement=agreement,
        agreement_note=note,
        items=[_run_item(store, run) for run in runs] if with_items else [],
    )


def experiment_figures(
    store: Store, experiment_id: int, *, against: int | None = None, with_items: bool = True
) -> Figures:
    """An experiment's figures over its gradings; with `against`, the comparison too.

    `summary.summary_for_experiment`: satisfied rate and mean score over the experiment's
    gradings (the mean taken as a batch's is), pass rates over its source passes. An
    experiment runs no loop: no iterations to satisfied.
    """
    from rubric_core.workbench.agreement import agreement_between, compare_stored_experiments

    experiment = store.experiments.get(experiment_id)
    version = store.rubrics.version(int(experiment["rubric_version_id"]))
    specs = rubric_criteria(version["text"], list(version["criteria"]))
    summary = summary_for_experiment(store, experiment_id)
    agreement, note = _labels_agreement(store, experiment_id=experiment_id)
    figures = Figures(
        kind="experiment",
        ident=str(experiment_id),
        rubric=version,
        satisfied_rate=summary.satisfied_rate if summary.total else None,
        **_from_summary(summary),
        agreement=agreement,
        agreement_note=note,
    )
    if against is not None:
        figures.against = against
        figures.comparison = compare_stored_experiments(store, experiment_id, against)
        try:
            figures.against_agreement = dict(agreement_between(store, experiment_id, against))
        except (InputError, MissingExtra):
            figures.against_agreement = None
    if with_items:
        raw = store.experiments.items(experiment_id)
        by_pass: dict[int, list[dict[str, Any]]] = {}
        for item in raw:
            by_pass.setdefault(int(item["evaluation_id"]), []).append(item)
        for gradings in by_pass.values():
            first = gradings[0]
            graded = [score_pass(specs, g["criteria"]) for g in gradings if g["criteria"]]
            figures.items.append(
                Item(
                    run_id=int(first["run_id"]),
                    input=str(first.get("input") or ""),
                    status=str(gradings[-1]["result"]),
                    score=mean_score(graded),
                    passes=gradings,
                    final=gradings[-1],
                )
            )
    return figures


def run_figures(store: Store, run_id: int) -> Figures:
    """One run's figures: its status, score and passes (the timeline and heatmap's data)."""
    run = store.runs.get(run_id)
    item = _run_item(store, run)
    satisfied = run["status"] == "satisfied"
    version = store.rubrics.version(int(run["rubric_version_id"]))
    agreement, note = _labels_agreement(store, run_ids=[int(run["id"])])
    summary = Summary(
        batch_id=str(run["id"]),
        total=1,
        by_status={str(run["status"]): 1},
        satisfied_rate=1.0 if satisfied else 0.0,
        mean_iterations_to_satisfied=float(run["iterations"]) if satisfied else None,
        iterations_to_satisfied={int(run["iterations"]): 1} if satisfied else {},
        criterion_pass_rates=[
            {
                "criterion": c["name"],
                "passed": int(bool(c.get("passed"))),
                "total": 1,
                "pass_rate": float(bool(c.get("passed"))),
            }
            for c in item.final_criteria
            if not c.get("insufficient")
        ],
        grader_errors=int(run["status"] == "grader_error"),
        scores=[] if item.score is None else [item.score],
        grader_kinds={grader_kind(run.get("grader_model")): 1},
    )
    return Figures(
        kind="run",
        ident=str(run["id"]),
        rubric=version,
        satisfied_rate=summary.satisfied_rate,
        **_from_summary(summary),
        agreement=agreement,
        agreement_note=note,
        items=[item],
    )


def figures_for(
    store: Store,
    *,
    batch_id: str | None = None,
    experiment_id: int | None = None,
    run_id: int | None = None,
    against: int | None = None,
    with_items: bool = True,
) -> Figures:
    """The figures of exactly one of a batch, an experiment or a run.

    Raises:
        InputError: None or several given, `against` without an experiment, or no such batch.
    """
    given = [name for name, value in (("batch", batch_id), ("experiment", experiment_id),
                                      ("run", run_id)) if value is not None]  # fmt: skip
    if len(given) != 1:
        msg = "give exactly one of a batch, an experiment or a run"
        raise InputError(msg)
    if against is not None and experiment_id is None:
        msg = "--against compares two experiments: it needs --experiment"
        raise InputError(msg)
    if batch_id is not None:
        return batch_figures(store, batch_id, with_items=with_items)
    if experiment_id is not None:
        return experiment_figures(store, experiment_id, against=against, with_items=with_items)
    assert run_id is not None
    return run_figures(store, run_id)
