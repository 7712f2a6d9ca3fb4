"""Re-grade stored work: stored drafts graded again with other settings, as an experiment.

No agent runs and no checkpoint is read: each selected pass's stored `draft` and its run's
`input` make the transcript `[HumanMessage(input), AIMessage(draft)]`, graded by
`PassPipeline.grade_transcript` (the loop's pass pipeline and record). The result is stored
as an experiment (settings + one item per source pass and sample); the source runs are
not changed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.batch.common import ProgressCallback
from rubric_core.batch.job import Grader, GraderFactory, Job, RegradePasses
from rubric_core.batch.run import PreparedJob, check_reachable
from rubric_core.errors import InputError
from rubric_core.evaluate import ConsistencyReport, consistency_report
from rubric_core.grader.judges import check_samples
from rubric_core.grader.logs import run_context
from rubric_core.runs.spec import SpecError
from rubric_core.store import RunFilters
from rubric_core.workbench.grade import (
    build_grader,
    check_grader,
    grader_factory,
    grader_label,
)

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "RegradeError",
    "RegradeResult",
    "Regradings",
    "prepare_regrade",
    "regrade",
    "select_passes",
]


class RegradeError(InputError):
    """A re-grade that cannot be carried out (say, runs of different rubrics); nothing stored."""


class RegradeResult(TypedDict):
    """What `regrade` did."""

    experiment_id: int
    """The experiment holding the new verdicts."""

    items: int
    """Gradings stored (source passes times samples)."""

    errors: int
    """Gradings that ended `grader_error` (stored too)."""

    consistency: ConsistencyReport | None
    """Per-criterion flip rate over the samples, when `samples` is 2 or more."""


def select_passes(
    store: Store,
    *,
    run_ids: Sequence[int] | None = None,
    batch_id: str | None = None,
    filters: RunFilters | None = None,
    all_passes: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The stored passes to re-grade (final pass of each run unless `all_passes`), and a
    description of the selection for the experiment's record.

    Raises:
        RegradeError: Nothing selected, no selection given, or runs of different rubrics.
        StoreError: An unknown run or an invalid filter.
    """
    if run_ids is None and batch_id is None and filters is None:
        msg = "say which runs to re-grade: run ids, a batch, or run filters"
        raise RegradeError(msg)
    items = store.labels.review_items(
        batch_id=batch_id,
        run_ids=list(run_ids) if run_ids is not None else None,
        filters=filters,
        final_only=not all_passes,
    )
    if run_ids is not None:
        for run_id in run_ids:
            store.runs.get(run_id)  # an unknown run id is an error, not an empty selection
    items = [item for item in items if item["draft"].strip()]
    if not items:
        msg = "the selection holds no graded pass with a draft to re-grade"
        raise RegradeError(msg)
    runs = {int(item["run_id"]) for item in items}
    rubrics: dict[str, list[int]] = {}
    for run_id in sorted(runs):
        rubrics.setdefault(store.runs.get(run_id)["rubric"], []).append(run_id)
    if len(rubrics) > 1:
        listed = "; ".join(
            f"{name!r} (runs {', '.join(map(str, ids[:5]))})" for name, ids in rubrics.items()
        )
        msg = (
            f"the selected runs come from different rubrics: {listed}; an experiment re-grades "
            "one rubric's work, so select runs of one rubric"
        )
        raise RegradeError(msg)
    source = {
        "run_ids": list(run_ids) if run_ids is not None else None,
        "batch_id": batch_id,
        "filters": filters.as_kwargs() if filters is not None else None,
        "all_passes": all_passes,
        "rubric": next(iter(rubrics)),
    }
    return items, source


def _versions(
    store: Store, items: list[dict[str, Any]], rubric_version_id: int | None
) -> dict[str, Any]:
    rubric = store.runs.get(int(items[0]["run_id"]))
    if rubric_version_id is None:
        return store.rubrics.version(rubric["rubric_version_id"])
    version = store.rubrics.version(rubric_version_id)
    if version["name"] != rubric["rubric"]:
        msg = (
            f"rubric version {rubric_version_id} belongs to {version['name']!r}, but the runs "
            f"were graded against {rubric['rubric']!r}; pick a version of {rubric['rubric']!r}"
        )
        raise RegradeError(msg)
    return version


@dataclass(frozen=True)
class Regradings:
    """The units of a re-grade job: grading `index` is one stored draft graded once (one
    sample) and stored as an experiment item. Picklable, so a re-grade runs on any
    executor; an item is keyed by `(experiment, source pass, sample)`."""

    experiment_id: int
    version: dict[str, Any]
    tasks: tuple[tuple[dict[str, Any], int], ...]
    """(source pass, sample) per grading."""
    grader_tools: tuple[str, ...]
    grader_system_prompt: str | None
    make: GraderFactory
    factory_field: str = "grader.factory"

    @property
    def batch_id(self) -> str:
        return f"experiment-{self.experiment_id}"

    @property
    def total(self) -> int:
        return len(self.tasks)

    def run_unit(
        self, store: Store, index: int, stop_event: threading.Event
    ) -> dict[str, Any] | None:
        """Grade one stored draft once and store the verdict; the item's row."""
        if stop_event.is_set():
            return None
        item, sample = self.tasks[index]
        pipeline = build_grader(
            self.make(),
            grader_tools=self.grader_tools,
            grader_system_prompt=self.grader_system_prompt,
        )
        messages: list[Any] = [HumanMessage(item["input"]), AIMessage(item["draft"])]
        with run_context(item.get("run_id", f"of pass {item['evaluation_id']}")):
            evaluation = pipeline.grade_transcript(
                messages,
                self.version["text"],
                grading_run_id=f"experiment-{self.experiment_id}-{item['evaluation_id']}-{sample}",
            )
        store.experiments.record_item(
            self.experiment_id, int(item["evaluation_id"]), sample, evaluation
        )
        result = evaluation["result"]
        return {"evaluation_id": item["evaluation_id"], "sample": sample, "status": result}


def _grader(work: RegradePasses) -> Grader:
    if work.grader is None:
        raise RegradeError("a re-grade needs a grader")
    return work.grader


def _new_experiment(store: Store, work: RegradePasses) -> tuple[Regradings, set[tuple[int, int]]]:
    """Check a new re-grade and create its experiment; its gradings (none done yet)."""
    grader = _grader(work)
    try:
        check_samples(grader.samples)  # the pipeline's own rule: 1 to 20
    except (TypeError, ValueError) as exc:
        raise RegradeError(str(exc)) from exc
    items, source = select_passes(
        store,
        run_ids=work.run_ids,
        batch_id=work.batch_id,
        filters=work.filters,
        all_passes=work.all_passes,
    )
    version = _versions(store, items, work.rubric_version_id)
    try:
        check_grader(grader.model, version)
    except InputError as exc:
        raise RegradeError(str(exc)) from exc
    grader_model = grader_label(grader.model)
    make = grader_factory(grader)
    build_grader(None, grader_tools=grader.tools)  # unknown tools raise here
    samples = grader.samples
    label = work.name or (
        f"{version['name']}@{version['version']} by {grader_model}"
        + (f" x{samples}" if samples > 1 else "")
    )
    experiment_id = store.experiments.create(
        name=label,
        rubric_version_id=version["id"],
        grader_model=grader_model,
        grader_system_prompt=grader.system_prompt,
        grader_tools=grader.tools,
        samples=samples,
        all_passes=work.all_passes,
        source=source,
    )
    tasks = tuple((item, sample) for item in items for sample in range(samples))
    units = Regradings(
        experiment_id, version, tasks, tuple(grader.tools), grader.system_prompt, make
    )
    return units, set()


def _continued_experiment(
    store: Store, work: RegradePasses, experiment_id: int
) -> tuple[Regradings, set[tuple[int, int]]]:
    """An unfinished experiment's gradings (its own selection and settings) and those done."""
    experiment = store.experiments.get(experiment_id)
    if experiment["status"] in ("done", "running"):
        state = "is done" if experiment["status"] == "done" else "is still running"
        msg = f"experiment {experiment_id} {state}; only an unfinished experiment resumes"
        raise RegradeError(msg)
    source = experiment["source"] or {}
    filters = source.get("filters")
    items, _ = select_passes(
        store,
        run_ids=source.get("run_ids"),
        batch_id=source.get("batch_id"),
        filters=RunFilters(**filters) if filters else None,
        all_passes=bool(source.get("all_passes")),
    )
    given = work.grader
    grader = Grader(
        experiment["grader_model"],
        base_url=given.base_url if given else None,
        api_key=given.api_key if given else None,
        factory=given.factory if given else None,
    )
    samples = int(experiment["samples"])
    units = Regradings(
        experiment_id,
        store.rubrics.version(experiment["rubric_version_id"]),
        tuple((item, sample) for item in items for sample in range(samples)),
        tuple(experiment["grader_tools"]),
        experiment["grader_system_prompt"],
        grader_factory(grader),
    )
    done = {
        (int(item["evaluation_id"]), int(item["sample"]))
        for item in store.experiments.items(experiment_id)
    }
    return units, done


def prepare_regrade(store: Store, job: Job) -> PreparedJob[RegradeResult]:
    """Check a re-grade job and create its experiment (or take over the unfinished one it
    continues); ready to `run`. Nothing is stored if a check fails.

    Raises:
        RegradeError: No selection, nothing to re-grade, runs of different rubrics, a
            version of another rubric; an experiment to continue that is done or running.
        ModelSpecError, UnknownToolError, SpecError, StoreError, RayUnavailable.
    """
    work = job.work
    if not isinstance(work, RegradePasses):
        raise SpecError("work", f"a re-grade grades RegradePasses, got {type(work).__name__}")
    if work.experiment_id is not None:
        units, done = _continued_experiment(store, work, work.experiment_id)
    else:
        units, done = _new_experiment(store, work)
    try:
        check_reachable(job, units)
    except Exception as exc:
        store.experiments.finish(units.experiment_id, status="error", error=f"{exc}")
        raise
    if work.experiment_id is not None:
        store.experiments.resume(units.experiment_id)
    pending = [
        index
        for index, (item, sample) in enumerate(units.tasks)
        if (int(item["evaluation_id"]), sample) not in done
    ]
    results: list[str] = []

    def collect(row: dict[str, Any]) -> None:
        results.append(str(row["status"]))

    def failed(exc: BaseException) -> None:
        store.experiments.finish(
            units.experiment_id, status="error", error=f"{type(exc).__name__}: {exc}"
        )

    def finish(stopped: bool) -> RegradeResult:
        return _finish(store, units, results, stopped)

    return PreparedJob(
        store,
        job,
        units,
        pending,
        finish=finish,
        collect=collect,
        failed=failed,
        experiment_id=units.experiment_id,
    )


def _finish(store: Store, units: Regradings, results: list[str], stopped: bool) -> RegradeResult:
    experiment_id = units.experiment_id
    store.experiments.finish(experiment_id, status="stopped" if stopped else "done")
    consistency = None
    if max((sample for _, sample in units.tasks), default=0) > 0:
        repeats: dict[Any, Any] = {
            k: v for k, v in store.experiments.samples(experiment_id).items() if len(v) > 1
        }
        consistency = consistency_report(repeats) if repeats else None
    return {
        "experiment_id": experiment_id,
        "items": len(results),
        "errors": results.count("grader_error"),
        "consistency": consistency,
    }


def regrade(
    store: Store,
    job: Job,
    *,
    progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
) -> RegradeResult:
    """Grade stored drafts again (`job.work`, a `RegradePasses`) and store the verdicts as
    an experiment; or continue an unfinished one (`RegradePasses(experiment_id=...)`,
    `Job(resume=True)`: the same selection and settings, the gradings it stored kept).

    The gradings run on `job.executor` like a batch's inputs, `job.concurrency` at once.
    `RegradePasses` selects the passes (run ids, a batch, filters; each run's final pass
    unless `all_passes`), the version to grade against (default the runs' own; it must be
    a version of their rubric), the experiment's name; its `Grader` the model, prompt,
    tools and `samples` (2 or more reports each criterion's flip rate).

    Args:
        store: The store holding the runs; the experiment goes there too.
        job: What to re-grade and how.
        progress: `progress(finished, total, item)` after each grading.
        stop_event: Set it to start no more gradings; the experiment ends `stopped`.

    Returns:
        `items` counts the gradings made now.

    Raises:
        RegradeError: No selection, nothing to re-grade, runs of different rubrics, a
            version of another rubric. Nothing is stored then.
        ModelSpecError, UnknownToolError, SpecError, StoreError: Likewise, before storing.

    Examples:
        >>> work = RegradePasses(Grader("openai:gpt-4.1", samples=3), batch_id="batch-1")  # doctest: +SKIP
        >>> regrade(store, Job(work, concurrency=8))  # doctest: +SKIP
        {'experiment_id': 4, 'items': 30, 'errors': 0, 'consistency': {...}}
    """
    return prepare_regrade(store, job).run(progress=progress, stop_event=stop_event)
