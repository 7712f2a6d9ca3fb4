"""Agreement, comparison and consistency read from the store, and the labels CSV import.

Gathers verdict pairs (the judge's stored passes, an experiment's verdicts, the human
labels) keyed by the source pass's evaluation id, so a disagreement links to its pass,
and hands them to `rubric_core.evaluate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_core.errors import InputError
from rubric_core.evaluate import (
    AgreementReport,
    Comparison,
    ConsistencyReport,
    LabelError,
    agreement_report,
    check_label_criteria,
    compare_experiments,
    consistency_report,
    decode_labels,
    pair_up,
    parse_labels_csv,
)
from rubric_core.summary import graded_by_machine

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = [
    "NoLabelsError",
    "agreement_between",
    "agreement_by_rubric",
    "agreement_with_labels",
    "compare_stored_experiments",
    "experiment_consistency",
    "experiment_verdicts",
    "import_labels_csv",
    "labels_elsewhere",
    "next_unlabelled",
    "opening_version",
    "unfinished_experiments",
    "version_counts",
]


class NoLabelsError(InputError):
    """An agreement with human labels was asked for where there are none."""


def experiment_verdicts(store: Store, experiment_id: int) -> dict[int, list[dict[str, Any]]]:
    """An experiment's verdicts by source evaluation id (samples combined by strict majority)."""
    return store.experiments.verdicts(experiment_id)


def _criteria_order(store: Store, experiment_id: int) -> list[str]:
    version = store.rubrics.version(store.experiments.get(experiment_id)["rubric_version_id"])
    return list(version["criteria"])


def agreement_with_labels(
    store: Store,
    *,
    batch_id: str | None = None,
    run_ids: Sequence[int] | None = None,
    filters: RunFilters | None = None,
    experiment_id: int | None = None,
) -> AgreementReport:
    """The judge (or an experiment) against the human labels, per criterion and overall.

    Without `experiment_id`: each selected run's final stored pass. With it: the
    experiment's verdicts on its source passes (narrowed by the other arguments when given).
    `item_id` in the disagreements is the source pass's evaluation id. Only passes no person
    graded count (`summary.graded_by_machine`): a person's own pass is also their labels,
    so it would only agree with itself.

    Raises:
        NoLabelsError: None of the passes has a human label.
    """
    if experiment_id is None:
        # Only the labelled passes can pair up; they are read starting from the labels.
        items = store.labels.labelled_items(batch_id=batch_id, run_ids=run_ids, filters=filters)
    else:
        items = store.labels.review_items(
            batch_id=batch_id, run_ids=run_ids, filters=filters, experiment_id=experiment_id
        )
    items = [item for item in items if graded_by_machine(item.get("grader_model"))]
    judged = {int(item["evaluation_id"]): item["criteria"] for item in items}
    labels = {
        int(item["evaluation_id"]): {
            name: record["human_passed"] for name, record in item["labels"].items()
        }
        for item in items
        if item["labels"]
    }
    pairs = pair_up(judged, labels)
    if not pairs:
        what = f"experiment {experiment_id}" if experiment_id is not None else "the selected runs"
        msg = (
            f"no human labels on the passes of {what}; label some in the Review page, or import "
            "them with `python -m rubric_core label --input-file F`"
        )
        raise NoLabelsError(msg)
    if experiment_id is None:
        # Every criterion the queue's passes judged, labelled or not, in first-seen order.
        criteria = store.labels.review_criteria(batch_id=batch_id, run_ids=run_ids, filters=filters)
    else:
        criteria = _criteria_order(store, experiment_id)
    return agreement_report(pairs, criteria=criteria)


def agreement_by_rubric(store: Store, *, batch_id: str | None = None) -> list[dict[str, Any]]:
    """The judge against the human labels for each rubric that has labels, apart: one
    `{"rubric": name, **AgreementReport}` per rubric, in the store's rubric order. Rubrics
    judge different criteria, so one kappa over all of them would mean nothing; pooling
    is `agreement_with_labels` without a rubric, asked for by name.

    Raises:
        NoLabelsError: No rubric has a labelled pass (among `batch_id`'s runs, if given).
    """
    from rubric_core.store import RunFilters

    reports = []
    for rubric in store.rubrics.find():
        try:
            report = agreement_with_labels(
                store, batch_id=batch_id, filters=RunFilters(rubric=rubric["name"])
            )
        except NoLabelsError:
            continue
        reports.append({"rubric": rubric["name"], **report})
    if not reports:
        msg = (
            "no human labels on any rubric's passes; label some in the Review page, or import "
            "them with `python -m rubric_core label --input-file F`"
        )
        raise NoLabelsError(msg)
    return reports


def version_counts(store: Store, rubric: str) -> list[dict[str, Any]]:
    """Each version of `rubric`, oldest first: `{id, version, passes, labelled}`, where
    `passes` is its review queue (each run's final judged pass) and `labelled` how many of
    those carry at least one human label."""
    from rubric_core.store import RunFilters

    counts = []
    for version in store.rubrics.versions(rubric):
        scope = RunFilters(version_id=int(version["id"]))
        counts.append(
            {
                "id": int(version["id"]),
                "version": int(version["version"]),
                "passes": int(store.labels.review_counts(filters=scope)["passes"]),
                "labelled": len(store.labels.labelled_pass_ids(filters=scope, fully=False)),
            }
        )
    return counts


def opening_version(store: Store, rubric: str, *, want: str = "review") -> int | None:
    """The version the Review (`want="review"`) or Agreement (`want="labels"`) page opens
    `rubric` on: the newest with something to review (a graded pass), or to compare (a
    labelled pass; else the newest with a graded pass); the newest when none has either.
    `None` for a rubric with no version.
    """
    counts = version_counts(store, rubric)
    if not counts:
        return None
    keys = ("labelled", "passes") if want == "labels" else ("passes",)
    for key in keys:
        found = [c for c in counts if c[key]]
        if found:
            return int(found[-1]["id"])
    return int(counts[-1]["id"])


def labels_elsewhere(store: Store, rubric: str, version_id: int) -> str | None:
    """A sentence when version `version_id` of `rubric` has no labelled pass but other
    versions do (`None` otherwise): which versions hold the labels, and how many passes.

    Examples:
        >>> labels_elsewhere(store, "essay", 2)  # doctest: +SKIP
        'v2 has no human label yet; v1 holds labels on 24 passes: pick it above to see them.'
    """
    counts = version_counts(store, rubric)
    shown = next((c for c in counts if c["id"] == int(version_id)), None)
    others = [c for c in counts if c["labelled"] and c["id"] != int(version_id)]
    if shown is None or shown["labelled"] or not others:
        return None
    held = ", ".join(
        f"v{c['version']} holds labels on {c['labelled']} pass{'es' if c['labelled'] != 1 else ''}"
        for c in reversed(others)
    )
    return f"v{shown['version']} has no human label yet; {held}: pick it above to see them."


def unfinished_experiments(store: Store, *experiment_ids: int | None) -> list[dict[str, Any]]:
    """The experiments among `experiment_ids` that did not finish (`running`, `interrupted`,
    `stopped`, `error`): `{experiment, status, items, note}`, the note a sentence saying an
    agreement over it covers only the gradings it stored."""
    found: list[dict[str, Any]] = []
    for experiment_id in experiment_ids:
        if experiment_id is None:
            continue
        experiment = store.experiments.get(experiment_id)
        if experiment["status"] == "done":
            continue
        status, items = experiment["status"], int(experiment["items"])
        then = (
            "it is still grading"
            if status == "running"
            else f"continue it with `regrade --resume {experiment_id}`"
        )
        note = (
            f"experiment {experiment_id} is {status}, not done ({items} gradings stored): "
            f"the agreement covers those only; {then}"
        )
        found.append({"experiment": experiment_id, "status": status, "items": items, "note": note})
    return found


def agreement_between(store: Store, experiment_a: int, experiment_b: int) -> AgreementReport:
    """Experiment A (as predictor) against experiment B, over the passes both graded.

    Raises:
        InputError: The experiments share no pass and criterion.
    """
    pairs = pair_up(
        experiment_verdicts(store, experiment_a), experiment_verdicts(store, experiment_b)
    )
    if not pairs:
        msg = f"experiments {experiment_a} and {experiment_b} share no graded pass and criterion"
        raise InputError(msg)
    return agreement_report(pairs)


def compare_stored_experiments(store: Store, a: int, b: int) -> dict[str, Any]:
    """`{"comparison": Comparison, "agreement_a", "agreement_b"}`: `evaluate.compare_experiments`
    over two experiments, and each one's agreement with the human labels (`None` if none)."""
    comparison: Comparison = compare_experiments(
        experiment_verdicts(store, a), experiment_verdicts(store, b)
    )
    found: dict[str, Any] = {"comparison": comparison}
    for key, experiment_id in (("agreement_a", a), ("agreement_b", b)):
        try:
            found[key] = agreement_with_labels(store, experiment_id=experiment_id)
        except NoLabelsError:
            found[key] = None
    return found


def experiment_consistency(store: Store, experiment_id: int) -> ConsistencyReport:
    """Each criterion's flip rate over an experiment's samples.

    Raises:
        InputError: The experiment graded each pass only once.
    """
    repeats: dict[Any, Any] = {
        k: v for k, v in store.experiments.samples(experiment_id).items() if len(v) > 1
    }
    if not repeats:
        msg = (
            f"experiment {experiment_id} graded each pass once; re-grade with samples of 2 or more"
        )
        raise InputError(msg)
    return consistency_report(repeats)


def next_unlabelled(
    items: Sequence[dict[str, Any]], after: int | None = None
) -> dict[str, Any] | None:
    """The first review item (after evaluation id `after`) with a judged, unlabelled criterion.

    Examples:
        >>> items = [{"evaluation_id": 1, "criteria": [{"name": "a", "passed": True}],
        ...           "labels": {"a": {"human_passed": True}}},
        ...          {"evaluation_id": 2, "criteria": [{"name": "a", "passed": True}], "labels": {}}]
        >>> next_unlabelled(items)["evaluation_id"]
        2
    """
    for item in items:
        if after is not None and int(item["evaluation_id"]) <= after:
            continue
        if any(c["name"] not in item["labels"] for c in item["criteria"]):
            return item
    return None


def import_labels_csv(
    store: Store,
    text_or_path: str | Path,
    *,
    source: str | None = None,
    reviewer: str | None = None,
) -> int:
    """Import a labels CSV (`evaluate.parse_labels_csv`): all its labels or, on any error, none.

    Rows name their pass by `evaluation_id`, or `run_id` (its final pass, or the one its
    `grading_run_id` + `iteration` name). Criteria are matched to the pass's rubric
    (`evaluate.check_label_criteria`); a criterion the rubric does not have is an error.
    `reviewer` fills empty reviewer cells (default: the file's name).

    Returns:
        How many labels were stored.

    Raises:
        LabelError, EvaluationError: A malformed file or a criterion not in the rubric.
        StoreError: An unknown run or pass. Nothing is stored on any error.
    """
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str) and "\n" not in text_or_path and Path(text_or_path).is_file()
    ):
        path = Path(text_or_path)
        source = source or str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            msg = f"{source}: cannot be read ({exc.strerror or exc})"
            raise LabelError(msg) from exc
        text = decode_labels(data, source=source)
        reviewer = reviewer or path.name
    else:
        text = str(text_or_path)
    source = source or "labels"
    rows = parse_labels_csv(text, source=source, reviewer=reviewer or source)
    labels: list[dict[str, Any]] = []
    rubrics: dict[int, tuple[list[str], str]] = {}
    for row in rows:
        evaluation_id = _pass_of(store, row, source)
        if evaluation_id not in rubrics:
            run = store.runs.get(store.passes.run_of(evaluation_id))
            version = store.rubrics.version(run["rubric_version_id"])
            rubrics[evaluation_id] = (
                list(version["criteria"]),
                f"{run['rubric']}@{run['rubric_version']}",
            )
        criteria, name = rubrics[evaluation_id]
        try:
            spelling = check_label_criteria([row["criterion"]], criteria, rubric=name)
        except InputError as exc:
            raise type(exc)(f"{source}: row {row['row']}: {exc}; no label was stored") from exc
        labels.append(
            {
                "evaluation_id": evaluation_id,
                "criterion": spelling[row["criterion"]],
                "human_passed": row["human_passed"],
                "reviewer": row["reviewer"],
                "note": row.get("label_note"),
            }
        )
    return store.labels.import_rows(labels)


def _pass_of(store: Store, row: Any, source: str) -> int:
    if row.get("evaluation_id") is not None:
        return int(row["evaluation_id"])
    run_id = row["run_id"]
    passes = store.passes.of_run(int(run_id))
    if row.get("grading_run_id") is not None or row.get("iteration") is not None:
        passes = [
            p
            for p in passes
            if row.get("grading_run_id") in (None, p["grading_run_id"])
            and row.get("iteration") in (None, p["iteration"])
        ]
    if not passes:
        msg = f"{source}: row {row['row']}: run {run_id} has no such grading pass; no label was stored"
        raise InputError(msg)
    return int(passes[-1]["id"])
