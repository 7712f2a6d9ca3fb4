"""What a batch, an experiment or a run came to, read once for the report and the CI gate.

Every figure comes from the library's own functions, so the report, the gate, the CLI and
the pages agree: `batch.summary_for_batch` (satisfied rate, mean score, iterations to
satisfied), `Store.criterion_pass_rates(final_only=True)` (each run's final pass), and
`workbench.agreement` (percent agreement, Cohen's kappa, confusion). Nothing here draws.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.errors import InputError
from rubric_core.extras import MissingExtra
from rubric_core.rubric import CriterionSpec, RubricError, parse_criteria
from rubric_core.scoring import score_pass

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

BATCH_FINAL_PASS_RULE = (
    "each run's final pass: the verdicts of the last grading pass stored for the run "
    "(the draft the run handed back was graded by it)"
)
EXPERIMENT_FINAL_PASS_RULE = (
    "each re-graded source pass once: several samples of a pass combined by strict "
    "majority; samples that judged nothing left out"
)


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

    @property
    def gaps(self) -> list[tuple[str, str]]:
        """The failing criteria of the last pass and their gaps."""
        last = self.passes[-1]["criteria"] if self.passes else []
        return [(c["name"], str(c.get("gap") or "")) for c in last if not c.get("passed")]


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


def rubric_criteria(text: str, names: list[str]) -> list[CriterionSpec]:
    """The version's criteria with weights and checks; weight-1 judged ones by name when
    the text uses a check this process has not registered."""
    try:
        return parse_criteria(text)
    except RubricError:
        return [CriterionSpec(name) for name in names]


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
    return Item(
        run_id=int(run["id"]),
        input=str(run.get("input") or ""),
        status=str(run["status"]),
        score=None if score is None else float(score),
        passes=store.run_evaluations(int(run["id"])),
        error=run.get("error") or None,
    )


def batch_figures(store: Store, batch_id: str, *, with_items: bool = True) -> Figures:
    """A batch's figures: `summary_for_batch`, final-pass rates, agreement with labels.

    Raises:
        InputError: No run has that batch id.
    """
    from rubric_core.batch.summary import summary_for_batch

    runs = store.batch_runs(batch_id)
    if not runs:
        msg = f"no batch {batch_id!r} in this store"
        raise InputError(msg)
    summary = summary_for_batch(store, batch_id)
    agreement, note = _labels_agreement(store, batch_id=batch_id)
    runs.sort(key=lambda r: (r.get("input_index") is None, r.get("input_index") or 0, r["id"]))
    return Figures(
        kind="batch",
        ident=batch_id,
        rubric=store.get_rubric_version(int(runs[0]["rubric_version_id"])),
        total=summary.total,
        by_status=dict(summary.by_status),
        satisfied_rate=summary.satisfied_rate,
        mean_score=summary.mean_score,
        mean_iterations_to_satisfied=summary.mean_iterations_to_satisfied,
        iterations_to_satisfied=dict(summary.iterations_to_satisfied),
        criterion_rates=list(summary.criterion_pass_rates),  # PASS_RATE_RULE
        final_pass_rule=BATCH_FINAL_PASS_RULE,
        agreement=agreement,
        agreement_note=note,
        items=[_run_item(store, run) for run in runs] if with_items else [],
    )


def _experiment_rates(verdicts: dict[int, list[dict[str, Any]]], order: list[str]) -> list[dict]:
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


def experiment_figures(
    store: Store, experiment_id: int, *, against: int | None = None, with_items: bool = True
) -> Figures:
    """An experiment's figures over its gradings; with `against`, the comparison too.

    Satisfied rate and mean score are over the experiment's gradings (each scored with
    `scoring.score_pass` and the version's weights); pass rates over its source passes
    (`EXPERIMENT_FINAL_PASS_RULE`). An experiment runs no loop: no iterations to satisfied.
    """
    from rubric_core.workbench.agreement import (
        agreement_between,
        compare_stored_experiments,
        experiment_verdicts,
    )

    experiment = store.get_experiment(experiment_id)
    version = store.get_rubric_version(int(experiment["rubric_version_id"]))
    specs = rubric_criteria(version["text"], list(version["criteria"]))
    raw = store.experiment_items(experiment_id)
    results = Counter(str(item["result"]) for item in raw)
    scores = [score_pass(specs, item["criteria"]) for item in raw if item["criteria"]]
    scores_known = [score for score in scores if score is not None]
    agreement, note = _labels_agreement(store, experiment_id=experiment_id)
    figures = Figures(
        kind="experiment",
        ident=str(experiment_id),
        rubric=version,
        total=len(raw),
        by_status=dict(sorted(results.items())),
        satisfied_rate=results.get("satisfied", 0) / len(raw) if raw else None,
        mean_score=statistics.fmean(scores_known) if scores_known else None,
        mean_iterations_to_satisfied=None,
        iterations_to_satisfied={},
        criterion_rates=_experiment_rates(
            experiment_verdicts(store, experiment_id), list(version["criteria"])
        ),
        final_pass_rule=EXPERIMENT_FINAL_PASS_RULE,
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
        by_pass: dict[int, list[dict[str, Any]]] = {}
        for item in raw:
            by_pass.setdefault(int(item["evaluation_id"]), []).append(item)
        for gradings in by_pass.values():
            first = gradings[0]
            graded = [
                s
                for g in gradings
                if g["criteria"] and (s := score_pass(specs, g["criteria"])) is not None
            ]
            figures.items.append(
                Item(
                    run_id=int(first["run_id"]),
                    input=str(first.get("input") or ""),
                    status=str(gradings[-1]["result"]),
                    score=statistics.fmean(graded) if graded else None,
                    passes=gradings,
                )
            )
    return figures


def run_figures(store: Store, run_id: int) -> Figures:
    """One run's figures: its status, score and passes (the timeline and heatmap's data)."""
    run = store.get_run(run_id)
    item = _run_item(store, run)
    satisfied = run["status"] == "satisfied"
    version = store.get_rubric_version(int(run["rubric_version_id"]))
    last = item.passes[-1]["criteria"] if item.passes else []
    agreement, note = _labels_agreement(store, run_ids=[int(run["id"])])
    return Figures(
        kind="run",
        ident=str(run["id"]),
        rubric=version,
        total=1,
        by_status={str(run["status"]): 1},
        satisfied_rate=1.0 if satisfied else 0.0,
        mean_score=item.score,
        mean_iterations_to_satisfied=float(run["iterations"]) if satisfied else None,
        iterations_to_satisfied={int(run["iterations"]): 1} if satisfied else {},
        criterion_rates=[
            {
                "criterion": c["name"],
                "passed": int(bool(c.get("passed"))),
                "total": 1,
                "pass_rate": float(bool(c.get("passed"))),
            }
            for c in last
            if not c.get("insufficient")
        ],
        final_pass_rule=BATCH_FINAL_PASS_RULE,
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
