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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.batch.limits import local_book
from rubric_core.errors import InputError
from rubric_core.evaluate import ConsistencyReport, consistency_report
from rubric_core.grader.judges import check_samples
from rubric_core.grader.logs import run_context
from rubric_core.providers.ratelimit import use_book
from rubric_core.runs.spec import validate_concurrency
from rubric_core.schema import MAX_CONCURRENCY
from rubric_core.store import RunFilters
from rubric_core.workbench.grade import (
    GraderFactory,
    _grader_factory,
    build_grader,
    check_grader,
    grader_label,
)

if TYPE_CHECKING:
    from rubric_core.providers.ratelimit import RateBook, RateLimit
    from rubric_core.store import Store

__all__ = [
    "RegradeError",
    "RegradeResult",
    "regrade",
    "resume_regrade",
    "select_passes",
]

DEFAULT_REGRADE_CONCURRENCY = 8
"""Passes graded at once by default (bounded by `MAX_CONCURRENCY`)."""


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
    items = store.review_items(
        batch_id=batch_id,
        run_ids=list(run_ids) if run_ids is not None else None,
        filters=filters,
        final_only=not all_passes,
    )
    if run_ids is not None:
        for run_id in run_ids:
            store.get_run(run_id)  # an unknown run id is an error, not an empty selection
    items = [item for item in items if item["draft"].strip()]
    if not items:
        msg = "the selection holds no graded pass with a draft to re-grade"
        raise RegradeError(msg)
    runs = {int(item["run_id"]) for item in items}
    rubrics: dict[str, list[int]] = {}
    for run_id in sorted(runs):
        rubrics.setdefault(store.get_run(run_id)["rubric"], []).append(run_id)
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
    rubric = store.get_run(int(items[0]["run_id"]))
    if rubric_version_id is None:
        return store.get_rubric_version(rubric["rubric_version_id"])
    version = store.get_rubric_version(rubric_version_id)
    if version["name"] != rubric["rubric"]:
        msg = (
            f"rubric version {rubric_version_id} belongs to {version['name']!r}, but the runs "
            f"were graded against {rubric['rubric']!r}; pick a version of {rubric['rubric']!r}"
        )
        raise RegradeError(msg)
    return version


@dataclass
class _Plan:
    store: Store
    experiment_id: int
    version: dict[str, Any]
    items: list[dict[str, Any]]
    samples: int
    make: GraderFactory
    grader_tools: Sequence[str]
    grader_system_prompt: str | None
    concurrency: int
    stop_event: threading.Event = field(default_factory=threading.Event)
    done: set[tuple[int, int]] = field(default_factory=set)
    """(source pass, sample) already graded: a resumed experiment skips them."""
    book: RateBook | None = None
    """The re-grade's rate limit, one budget for all its threads (`None`: unpaced)."""

    def run(self) -> tuple[int, int]:
        def one(task: tuple[dict[str, Any], int]) -> str | None:
            if self.stop_event.is_set():
                return None
            item, sample = task
            with use_book(self.book):
                return self._grade(item, sample)

        tasks = [
            (item, sample)
            for item in self.items
            for sample in range(self.samples)
            if (int(item["evaluation_id"]), sample) not in self.done
        ]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            results = list(pool.map(one, tasks))
        done = [r for r in results if r is not None]
        return len(done), done.count("grader_error")

    def _grade(self, item: dict[str, Any], sample: int) -> str:
        """Grade one stored draft once and store the verdict; its result."""
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
        self.store.record_experiment_item(
            self.experiment_id, int(item["evaluation_id"]), sample, evaluation
        )
        return evaluation["result"]


def _prepare(
    store: Store,
    *,
    run_ids: Sequence[int] | None,
    batch_id: str | None,
    filters: RunFilters | None,
    rubric_version_id: int | None,
    grader_model: str,
    grader_system_prompt: str | None,
    grader_tools: Sequence[str],
    samples: int,
    all_passes: bool,
    name: str | None,
    max_concurrency: int,
    base_url: str | None,
    api_key: str | None,
    grader_llm_factory: GraderFactory | None,
    rate_limit: RateLimit | None = None,
) -> _Plan:
    try:
        check_samples(samples)  # the pipeline's own rule: 1 to 20
    except (TypeError, ValueError) as exc:
        raise RegradeError(str(exc)) from exc
    concurrency = min(validate_concurrency(max_concurrency), MAX_CONCURRENCY)
    items, source = select_passes(
        store, run_ids=run_ids, batch_id=batch_id, filters=filters, all_passes=all_passes
    )
    version = _versions(store, items, rubric_version_id)
    try:
        check_grader(grader_model, version)
    except InputError as exc:
        raise RegradeError(str(exc)) from exc
    grader_model = grader_label(grader_model)
    make: GraderFactory = grader_llm_factory or _grader_factory(grader_model, base_url, api_key)
    build_grader(None, grader_tools=grader_tools)  # unknown tools raise here
    label = name or (
        f"{version['name']}@{version['version']} by {grader_model}"
        + (f" x{samples}" if samples > 1 else "")
    )
    experiment_id = store.create_experiment(
        name=label,
        rubric_version_id=version["id"],
        grader_model=grader_model,
        grader_system_prompt=grader_system_prompt,
        grader_tools=grader_tools,
        samples=samples,
        all_passes=all_passes,
        source=source,
    )
    return _Plan(
        store=store,
        experiment_id=experiment_id,
        version=version,
        items=items,
        samples=samples,
        make=make,
        grader_tools=grader_tools,
        grader_system_prompt=grader_system_prompt,
        concurrency=concurrency,
        book=local_book(rate_limit),
    )


def _finish(plan: _Plan) -> RegradeResult:
    try:
        stored, errors = plan.run()
    except Exception as exc:
        plan.store.finish_experiment(
            plan.experiment_id, status="error", error=f"{type(exc).__name__}: {exc}"
        )
        raise
    status = "stopped" if plan.stop_event.is_set() else "done"
    plan.store.finish_experiment(plan.experiment_id, status=status)
    consistency = None
    if plan.samples > 1:
        repeats: dict[Any, Any] = {
            k: v for k, v in plan.store.experiment_samples(plan.experiment_id).items() if len(v) > 1
        }
        consistency = consistency_report(repeats) if repeats else None
    return {
        "experiment_id": plan.experiment_id,
        "items": stored,
        "errors": errors,
        "consistency": consistency,
    }


def regrade(
    store: Store,
    *,
    run_ids: Sequence[int] | None = None,
    batch_id: str | None = None,
    filters: RunFilters | None = None,
    rubric_version_id: int | None = None,
    grader_model: str,
    grader_system_prompt: str | None = None,
    grader_tools: Sequence[str] = (),
    samples: int = 1,
    all_passes: bool = False,
    name: str | None = None,
    max_concurrency: int = DEFAULT_REGRADE_CONCURRENCY,
    base_url: str | None = None,
    api_key: str | None = None,
    grader_llm_factory: GraderFactory | None = None,
    rate_limit: RateLimit | None = None,
) -> RegradeResult:
    """Grade stored drafts again and store the verdicts as an experiment.

    Args:
        store: The store holding the runs; the experiment goes there too.
        run_ids, batch_id, filters: Which runs (any one, or several to narrow).
        rubric_version_id: The version to grade against; default the runs' own version.
            It must be a version of the runs' rubric.
        grader_model: The grader (`"provider:model-id"`, `replay:<scenario>`).
        grader_system_prompt, grader_tools: The grader's prompt and evidence tools.
        samples: Gradings per pass (2 or more reports each criterion's flip rate).
        all_passes: Every stored pass, not only each run's final one.
        name: The experiment's name (default: rubric@version by grader).
        max_concurrency: Gradings at once (a thread pool, at most `MAX_CONCURRENCY`).
        grader_llm_factory: Makes each grading's model instead of `grader_model`.
        rate_limit: Requests and tokens per minute per endpoint, shared by every grading.

    Raises:
        RegradeError: No selection, nothing to re-grade, runs of different rubrics, a
            version of another rubric. Nothing is stored then.
        ModelSpecError, UnknownToolError, SpecError, StoreError: Likewise, before storing.

    Examples:
        >>> regrade(store, batch_id="batch-1", grader_model="openai:gpt-4.1", samples=3)  # doctest: +SKIP
        {'experiment_id': 4, 'items': 30, 'errors': 0, 'consistency': {...}}
    """
    plan = _prepare(
        store,
        run_ids=run_ids,
        batch_id=batch_id,
        filters=filters,
        rubric_version_id=rubric_version_id,
        grader_model=grader_model,
        grader_system_prompt=grader_system_prompt,
        grader_tools=grader_tools,
        samples=samples,
        all_passes=all_passes,
        name=name,
        max_concurrency=max_concurrency,
        base_url=base_url,
        api_key=api_key,
        grader_llm_factory=grader_llm_factory,
        rate_limit=rate_limit,
    )
    return _finish(plan)


def resume_regrade(
    store: Store,
    experiment_id: int,
    *,
    max_concurrency: int = DEFAULT_REGRADE_CONCURRENCY,
    base_url: str | None = None,
    api_key: str | None = None,
    grader_llm_factory: GraderFactory | None = None,
    rate_limit: RateLimit | None = None,
) -> RegradeResult:
    """Continue an experiment that did not finish (`interrupted`, `stopped` or `error`):
    the same selection and settings, the gradings it stored kept, the others done now.

    Returns:
        As `regrade`; `items` counts the gradings made now.

    Raises:
        RegradeError: The experiment is done, or still running in a live process.
    """
    experiment = store.get_experiment(experiment_id)
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
    grader_model = experiment["grader_model"]
    plan = _Plan(
        store=store,
        experiment_id=experiment_id,
        version=store.get_rubric_version(experiment["rubric_version_id"]),
        items=items,
        samples=int(experiment["samples"]),
        make=grader_llm_factory or _grader_factory(grader_model, base_url, api_key),
        grader_tools=list(experiment["grader_tools"]),
        grader_system_prompt=experiment["grader_system_prompt"],
        concurrency=min(validate_concurrency(max_concurrency), MAX_CONCURRENCY),
        done={
            (int(item["evaluation_id"]), int(item["sample"]))
            for item in store.experiment_items(experiment_id)
        },
        book=local_book(rate_limit),
    )
    store.resume_experiment(experiment_id)
    return _finish(plan)


_PREPARE_DEFAULTS: dict[str, Any] = {
    "run_ids": None,
    "batch_id": None,
    "filters": None,
    "rubric_version_id": None,
    "grader_system_prompt": None,
    "grader_tools": (),
    "samples": 1,
    "all_passes": False,
    "name": None,
    "max_concurrency": DEFAULT_REGRADE_CONCURRENCY,
    "base_url": None,
    "api_key": None,
    "grader_llm_factory": None,
    "rate_limit": None,
}


def _defaults(options: dict[str, Any]) -> dict[str, Any]:
    unknown = set(options) - set(_PREPARE_DEFAULTS) - {"grader_model"}
    if unknown:
        msg = f"unknown re-grade options: {', '.join(sorted(unknown))}"
        raise TypeError(msg)
    if "grader_model" not in options:
        msg = "grader_model is required"
        raise RegradeError(msg)
    return {**_PREPARE_DEFAULTS, **options}
