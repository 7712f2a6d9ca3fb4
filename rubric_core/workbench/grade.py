"""Grade existing outputs, no agent: one pass per row, stored as runs of kind `graded`.

Each row's transcript is `[HumanMessage(input), AIMessage(output)]`, graded by
`PassPipeline.grade_transcript`: the loop's own pass pipeline, payload and record, with
no revision. A dataset's `labels` become human labels (reviewer: the file's name). A person
can be the grader too (`grade_by_person`): their verdicts are checked and recorded as a
model's would be, and stored as labels.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypedDict, cast

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.batch.limits import local_book
from rubric_core.errors import InputError
from rubric_core.evaluate import check_label_criteria
from rubric_core.grader.logs import run_context
from rubric_core.limits import quoted
from rubric_core.providers.ratelimit import use_book
from rubric_core.rubric import parse_criteria
from rubric_core.runs.spec import SpecError, lone_surrogate, validate_concurrency
from rubric_core.runs.validate import grader_problem
from rubric_core.schema import (
    CHECKS_GRADER,
    GRADED_KIND,
    HUMAN_GRADER_PREFIX,
    MAX_CONCURRENCY,
    is_checks_only_grader,
)
from rubric_core.store.retry import retry_write
from rubric_core.workbench.background import BatchJob
from rubric_core.workbench.datasets import MAX_OUTPUT_CHARS, load_graded_dataset

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.pipeline import PassPipeline
    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.schema import CriterionVerdict, RubricEvaluation
    from rubric_core.store import Store
    from rubric_core.workbench.datasets import GradedRow

__all__ = [
    "GradeSummary",
    "GraderFactory",
    "GradingError",
    "check_grader",
    "code_verdicts",
    "grade_by_person",
    "grade_file",
    "grade_one",
    "grade_outputs",
    "grader_label",
    "resolve_rubric",
    "start_graded_batch",
]

GraderFactory = Callable[[], "BaseChatModel | None"]
"""Makes a fresh grader model per pass (a replay model's position belongs to its instance);
`None` for no grader (code checks only)."""


class GradingError(InputError):
    """A grade-only request that cannot be carried out; nothing was stored."""


class GradeSummary(TypedDict):
    """What `grade_outputs` did."""

    batch_id: str
    """The `batch_id` of every run it stored."""

    run_ids: list[int]
    """One graded run per row, in row order."""

    evaluation_ids: list[int | None]
    """Each run's pass (`None` where storing failed)."""

    labelled: int
    """Human labels stored from the dataset's `labels`."""

    by_result: dict[str, int]
    """How many passes ended `satisfied`, `needs_revision`, `failed`, `grader_error`."""

    skipped: int
    """Rows a resumed `grade` skipped: their run had ended before."""


def resolve_rubric(store: Store, reference: str) -> dict[str, Any]:
    """The rubric version `NAME` (its latest) or `NAME@VERSION` names.

    Raises:
        GradingError: A version that is not a number, or that the rubric does not have.
        StoreError: No rubric has that name.

    Examples:
        >>> resolve_rubric(store, "haiku@2")["version"]  # doctest: +SKIP
        2
    """
    name, _, version = reference.rpartition("@") if "@" in reference else (reference, "", "")
    versions = store.rubric_versions(name.strip())
    if not version:
        return versions[-1]
    if not version.strip().isdigit():
        msg = f"rubric {quoted(reference)}: the version after '@' must be a number, got {quoted(version)}"
        raise GradingError(msg)
    for row in versions:
        if row["version"] == int(version):
            return row
    known = ", ".join(str(v["version"]) for v in versions)
    msg = f"rubric {quoted(name)} has no version {version} (versions: {known})"
    raise GradingError(msg)


def grader_label(grader_model: str) -> str:
    """How a grader is recorded on a run: `checks` for no grader, else the spec as given.

    Examples:
        >>> grader_label("none"), grader_label("replay:haiku")
        ('checks', 'replay:haiku')
    """
    return CHECKS_GRADER if is_checks_only_grader(grader_model) else grader_model


def check_grader(grader_model: str, version: Mapping[str, Any]) -> None:
    """Refuse a grader that cannot grade `version` (`runs.grader_problem`, the same check
    as a run's): no grader for a rubric with a judged criterion, or a replay grader
    scripted for another rubric.

    Raises:
        GradingError: Naming the criteria, or the scenario and what to use instead.
    """
    problem = grader_problem(grader_model, version)
    if problem is not None:
        raise GradingError(problem)


def _grader_factory(grader_model: str, base_url: str | None, api_key: str | None) -> GraderFactory:
    from rubric_core.providers import resolve_model

    def make() -> BaseChatModel | None:
        if is_checks_only_grader(grader_model):
            return None  # code checks decide every criterion (check_grader made sure)
        return resolve_model(grader_model, role="grader", base_url=base_url, api_key=api_key)

    make()  # a bad spec or a missing key is reported before anything is stored
    return make


def build_grader(
    llm: BaseChatModel | str | None,
    *,
    grader_tools: Sequence[str] = (),
    grader_system_prompt: str | None = None,
    samples: int = 1,
) -> PassPipeline:
    """The pass pipeline that grades one pass outside a loop (`grade_transcript`); `None`
    builds no judge (to check the tools and samples alone)."""
    from rubric_core.grader.judges import Judges, check_samples
    from rubric_core.pipeline import PassPipeline
    from rubric_core.tools import get_tools

    check_samples(samples)
    return PassPipeline.build(
        llm if llm is None or samples == 1 else Judges([llm], samples=samples),
        tools=get_tools(list(grader_tools)),
        system_prompt=grader_system_prompt,
    )


def _check_labels(version: dict[str, Any], rows: Sequence[GradedRow]) -> list[dict[str, bool]]:
    """Each row's labels under the rubric's own spelling; a criterion not in it raises."""
    criteria = list(version["criteria"])
    where = f"{version['name']}@{version['version']}"
    checked: list[dict[str, bool]] = []
    for row in rows:
        if not row["labels"]:
            checked.append({})
            continue
        try:
            spelling = check_label_criteria(row["labels"], criteria, rubric=where)
        except InputError as exc:
            msg = f"row {row['row']}: {exc}; nothing was stored"
            raise GradingError(msg) from exc
        checked.append({spelling[name]: value for name, value in row["labels"].items()})
    return checked


def _check_output(output: str) -> None:
    """A grade-only output is text of at most `MAX_OUTPUT_CHARS` characters."""
    if not isinstance(output, str):
        msg = f"output must be text, got {type(output).__name__}"
        raise GradingError(msg)
    if len(output) > MAX_OUTPUT_CHARS:
        msg = f"output is {len(output):,} characters; the limit is {MAX_OUTPUT_CHARS:,}"
        raise GradingError(msg)


def _check_rows(rows: Sequence[GradedRow]) -> None:
    """Every row's input and output storable (a lone surrogate is not), before anything runs."""
    for index, row in enumerate(rows):
        number = row.get("row", index + 1)
        for key in ("input", "output"):
            value = row.get(key)
            problem = lone_surrogate(value) if isinstance(value, str) else "is not text"
            if problem is not None:
                raise SpecError(f"row {number}: {key}", problem)


def _resumable(store: Store, batch_id: str, rows: Sequence[GradedRow], version_id: int) -> set[int]:
    """The rows of graded batch `batch_id` whose run ended; the batch must be one of these
    rows against this rubric version."""
    runs = store.batch_runs(batch_id)
    if not runs:
        msg = f"no batch {quoted(batch_id)} to resume; give the batch id `grade` printed"
        raise GradingError(msg)
    other = [
        r for r in runs if r["agent_kind"] != GRADED_KIND or r["rubric_version_id"] != version_id
    ]
    if other:
        msg = (
            f"batch {quoted(batch_id)} is not a grade of this rubric version (run {other[0]['id']}); "
            "resume it with the same --rubric"
        )
        raise GradingError(msg)
    beyond = [r for r in runs if r["input_index"] is not None and r["input_index"] >= len(rows)]
    if beyond:
        msg = (
            f"batch {quoted(batch_id)} has row {beyond[0]['input_index'] + 1} but the file has "
            f"{len(rows)} rows; resume it with the same file"
        )
        raise GradingError(msg)
    return {
        int(r["input_index"])
        for r in runs
        if r["input_index"] is not None and r["status"] not in ("running", "interrupted")
    }


def _store_pass(
    store: Store,
    version: dict[str, Any],
    *,
    input: str,
    output: str,
    grader_label: str,
    grade: Callable[[list[Any]], RubricEvaluation],
    grader_tools: Sequence[str],
    grader_system_prompt: str | None,
    batch_id: str | None,
    labels: Mapping[str, bool] | None = None,
    reviewer: str = "",
    input_index: int | None = None,
    resuming: bool = False,
) -> tuple[int, int | None, RubricEvaluation | None, int]:
    """Create a graded run, grade its transcript, record the pass with its labels (one
    transaction), close the run; returns (run, pass, its record, labels stored).

    With `input_index` (and `batch_id`), `resuming` an input that already has a run (an
    interrupted `grade`) continues that run: taken over, and a pass it already stored is
    kept rather than graded again.
    """
    run_id = store.create_run(
        rubric_version_id=version["id"],
        input=input,
        agent_model="",
        grader_model=grader_label,
        grader_tools=list(grader_tools),
        max_iterations=1,
        agent_kind=GRADED_KIND,
        grader_system_prompt=grader_system_prompt,
        batch_id=batch_id,
        input_index=input_index,
    )
    if resuming:
        store.resume_run(run_id)  # an interrupted input's run: this process owns it now
        kept = store.run_evaluations(run_id)
        if kept:  # its pass was stored (with its labels) before the interruption
            last = kept[-1]
            retry_write(
                lambda: store.finish_run(run_id, status=last["status"], final_output=output),
                what=f"the end of run {run_id}",
            )
            return run_id, int(last["id"]), cast("RubricEvaluation", last), 0
    messages: list[Any] = [HumanMessage(input), AIMessage(output)]
    labelled = 0
    try:
        retry_write(lambda: store.save_transcript(run_id, messages), what=f"run {run_id}'s input")
        with run_context(run_id):
            evaluation = grade(messages)
        # Stored before the batch goes on, or the run says the pass could not be (below);
        # a row's labels in the same transaction as its pass.
        if labels and evaluation["criteria"]:
            given = dict(labels)
            evaluation_id, labelled = retry_write(
                lambda: store.record_labelled_pass(run_id, evaluation, given, reviewer=reviewer),
                what=f"the graded pass of run {run_id} and its labels",
            )
        else:
            evaluation_id = retry_write(
                lambda: store.record_evaluation(run_id, evaluation),
                what=f"the graded pass of run {run_id}",
            )
    except Exception as exc:
        error = f"{exc}"
        retry_write(
            lambda: store.finish_run(run_id, status="error", final_output=output, error=error),
            what=f"the end of run {run_id}",
        )
        return run_id, None, None, 0
    retry_write(
        lambda: store.finish_run(run_id, status=evaluation["status"], final_output=output),
        what=f"the end of run {run_id}",
    )
    return run_id, evaluation_id, evaluation, labelled


def grade_one(
    store: Store,
    version_id: int,
    input: str,
    output: str,
    grader_model: str,
    *,
    grader_tools: Sequence[str] = (),
    grader_system_prompt: str | None = None,
    samples: int = 1,
    base_url: str | None = None,
    api_key: str | None = None,
    batch_id: str | None = None,
    grader_llm: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Grade one existing output now; returns `{"run_id", "evaluation_id", "evaluation"}`.

    Raises:
        GradingError: An output longer than `MAX_OUTPUT_CHARS`; nothing is stored.
        ModelSpecError, UnknownToolError, StoreError: Before anything is stored.
    """
    _check_output(output)
    version = store.get_rubric_version(version_id)
    check_grader(grader_model, version)
    llm = grader_llm or _grader_factory(grader_model, base_url, api_key)()
    pipeline = build_grader(
        llm, grader_tools=grader_tools, grader_system_prompt=grader_system_prompt, samples=samples
    )
    run_id, evaluation_id, evaluation, _ = _store_pass(
        store,
        version,
        input=input,
        output=output,
        grader_label=grader_label(grader_model),
        grade=lambda messages: pipeline.grade_transcript(messages, version["text"]),
        grader_tools=grader_tools,
        grader_system_prompt=grader_system_prompt,
        batch_id=batch_id,
    )
    return {"run_id": run_id, "evaluation_id": evaluation_id, "evaluation": evaluation}


def grade_outputs(
    store: Store,
    rows: Sequence[GradedRow],
    *,
    rubric_version_id: int,
    grader_model: str,
    grader_tools: Sequence[str] = (),
    grader_system_prompt: str | None = None,
    samples: int = 1,
    source: str = "dataset",
    base_url: str | None = None,
    api_key: str | None = None,
    max_concurrency: int = 4,
    batch_id: str | None = None,
    grader_llm_factory: GraderFactory | None = None,
    stop_event: threading.Event | None = None,
    resume: bool = False,
    rate_limit: RateLimit | None = None,
) -> GradeSummary:
    """Grade every row's output once, `max_concurrency` at a time; store labels given.

    Each row's run is the batch's input at the row's position, its labels stored in the
    transaction of its pass. With `resume` (and the `batch_id` of an earlier, interrupted
    `grade` of the same rows), rows whose run ended are skipped, and an interrupted row's
    run is continued (its stored pass kept, else graded now).

    Everything is checked first (the rubric version, every row's labels against its
    criteria, the grader model and tools), so a bad request stores nothing.

    Args:
        store: Where the runs go.
        rows: From `load_graded_dataset` / `load_graded_upload`.
        rubric_version_id: The rubric version to grade against.
        grader_model: `"provider:model-id"` or `replay:<scenario>` (recorded on each run).
        source: The reviewer name of the dataset's labels (the file's name).
        grader_llm_factory: Makes each pass's grader model instead of `grader_model`.
        stop_event: When set, rows not yet started are skipped.
        resume: Continue the batch `batch_id` (see above).
        rate_limit: Requests and tokens per minute per endpoint, shared by every row's pass.

    Raises:
        GradingError: A label naming a criterion not in the rubric, no rows.
        ModelSpecError, UnknownToolError, SpecError, StoreError: Before anything is stored.
    """
    if not rows:
        msg = "no rows to grade"
        raise GradingError(msg)
    workers = validate_concurrency(max_concurrency)
    _check_rows(rows)
    version = store.get_rubric_version(rubric_version_id)
    labels = _check_labels(version, rows)
    check_grader(grader_model, version)
    make: GraderFactory = grader_llm_factory or _grader_factory(grader_model, base_url, api_key)
    build_grader(None, grader_tools=grader_tools, samples=samples)  # checks tools, samples
    batch = batch_id or f"graded-{uuid.uuid4().hex[:16]}"
    finished = _resumable(store, batch, rows, rubric_version_id) if resume else set()
    book = local_book(rate_limit)

    def one(index: int) -> tuple[int, int | None, RubricEvaluation | None, int] | None:
        with use_book(book):
            return graded(index)

    def graded(index: int) -> tuple[int, int | None, RubricEvaluation | None, int] | None:
        if index in finished or (stop_event is not None and stop_event.is_set()):
            return None
        row = rows[index]
        pipeline = build_grader(
            make(),
            grader_tools=grader_tools,
            grader_system_prompt=grader_system_prompt,
            samples=samples,
        )
        return _store_pass(
            store,
            version,
            input=row["input"],
            output=row["output"],
            grader_label=grader_label(grader_model),
            grade=lambda messages: pipeline.grade_transcript(messages, version["text"]),
            grader_tools=grader_tools,
            grader_system_prompt=grader_system_prompt,
            batch_id=batch,
            labels=labels[index],
            reviewer=source,
            input_index=index,
            resuming=resume,
        )

    with ThreadPoolExecutor(max_workers=min(workers, MAX_CONCURRENCY)) as pool:
        done = list(pool.map(one, range(len(rows))))
    summary: GradeSummary = {
        "batch_id": batch,
        "run_ids": [],
        "evaluation_ids": [],
        "labelled": 0,
        "by_result": {},
        "skipped": len(finished),
    }
    results: Counter[str] = Counter()
    for outcome in done:
        if outcome is None:
            continue
        run_id, evaluation_id, evaluation, labelled = outcome
        summary["run_ids"].append(run_id)
        summary["evaluation_ids"].append(evaluation_id)
        results[evaluation["result"] if evaluation else "error"] += 1
        summary["labelled"] += labelled
    summary["by_result"] = dict(results)
    return summary


def grade_file(
    store: Store, path: str, *, rubric: str, grader_model: str, **options: Any
) -> GradeSummary:
    """`grade_outputs` over a CSV/JSONL file, against `NAME[@VERSION]`; labels by the file's name."""
    from pathlib import Path

    rows = load_graded_dataset(path)
    version = resolve_rubric(store, rubric)
    options.setdefault("source", Path(path).name)
    return grade_outputs(
        store, rows, rubric_version_id=version["id"], grader_model=grader_model, **options
    )


def start_graded_batch(
    store: Store,
    version_id: int,
    rows: Sequence[GradedRow],
    *,
    grader_model: str,
    source_name: str,
    grader_tools: Sequence[str] = (),
    grader_system_prompt: str | None = None,
    samples: int = 1,
    base_url: str | None = None,
    api_key: str | None = None,
    concurrency: int = 4,
    rate_limit: RateLimit | None = None,
) -> BatchJob:
    """Check a graded batch, then grade it on a background thread; returns at once.

    Same `BatchJob` as `start_batch` (poll `batch_progress(store, job.batch_id, job.total)`).

    Raises:
        GradingError, ModelSpecError, UnknownToolError, SpecError, StoreError: As
            `grade_outputs`, from here rather than from the thread.
    """
    if not rows:
        msg = "no rows to grade"
        raise GradingError(msg)
    validate_concurrency(concurrency)
    version = store.get_rubric_version(version_id)
    _check_labels(version, rows)
    check_grader(grader_model, version)
    factory = _grader_factory(grader_model, base_url, api_key)
    build_grader(None, grader_tools=grader_tools, samples=samples)
    job = BatchJob(batch_id=f"graded-{uuid.uuid4().hex[:16]}", total=len(rows))

    def work() -> None:
        try:
            grade_outputs(
                store,
                rows,
                rubric_version_id=version_id,
                grader_model=grader_model,
                grader_tools=grader_tools,
                grader_system_prompt=grader_system_prompt,
                samples=samples,
                source=source_name,
                max_concurrency=concurrency,
                batch_id=job.batch_id,
                grader_llm_factory=factory,
                stop_event=job.stop_event,
                rate_limit=rate_limit,
            )
        except Exception as exc:  # shown on the page; runs stored so far are kept
            job.error = f"{type(exc).__name__}: {exc}"

    job.thread = threading.Thread(target=work, name=f"rubric-{job.batch_id}", daemon=True)
    job.thread.start()
    return job


def grade_by_person(
    store: Store,
    version_id: int,
    input: str,
    output: str,
    verdicts: Mapping[str, bool | None],
    gaps: Mapping[str, str] | None = None,
    *,
    reviewer: str,
    explanation: str = "",
    batch_id: str | None = None,
) -> int:
    """A person grades an output: recorded as a graded pass exactly as a model's, and as labels.

    The pass is the loop's own (`grade_transcript`): the rubric's code checks run on the
    output and decide their criteria (stored with `checked_by: "code"`); the person is
    the judge of the others only, their verdicts checked by the grader's own rules
    (`grader.outcome_from_verdicts`: every judged criterion, a gap on each fail). The
    result and score follow from all of them, so a failing check fails the pass. The
    run's `grader_model` is `human:<reviewer>`. The person's decided verdicts are also
    stored as their labels; `None` (could not verify) is recorded as insufficient evidence.

    Args:
        verdicts: Judged criterion to `True` (pass), `False` (fail) or `None`
            (insufficient). A criterion a code check decides takes no verdict here
            (`code_verdicts` shows what the checks decided).
        gaps: What is missing, per failed (or insufficient) criterion.

    Returns:
        The run id.

    Raises:
        GradingError: A judged criterion left out, one not in the rubric, a verdict on a
            checked criterion, or a fail without a gap; nothing is stored.
    """
    from rubric_core.grader import judged_names, outcome_from_verdicts

    reviewer = (reviewer or "").strip()
    if not reviewer:
        msg = "reviewer must name who graded"
        raise GradingError(msg)
    _check_output(output)
    version = store.get_rubric_version(version_id)
    specs = parse_criteria(version["text"])
    judged = judged_names(specs)
    gaps = gaps or {}
    try:
        spelling = check_label_criteria(verdicts, [c.name for c in specs], rubric=version["name"])
        by_code = [spelling[name] for name in verdicts if spelling[name] not in judged]
        if by_code:
            names = ", ".join(map(repr, by_code))
            msg = f"{names} {'is' if len(by_code) == 1 else 'are'} decided by a code check; give verdicts on the other criteria only"
            raise ValueError(msg)
        given = [
            {
                "name": spelling[name],
                "passed": value is True,
                "insufficient": value is None,
                "gap": (gaps.get(name) or "").strip() or None,
            }
            for name, value in verdicts.items()
        ]
        outcome = outcome_from_verdicts(judged, given, explanation=explanation)
    except ValueError as exc:
        msg = f"the verdicts cannot be recorded: {exc}"
        raise GradingError(msg) from exc
    pipeline = build_grader(None)  # a person's verdict: no model is called
    decided = {c["name"]: c["passed"] for c in outcome.criteria if not c.get("insufficient")}
    run_id, _, _, _ = _store_pass(
        store,
        version,
        input=input,
        output=output,
        grader_label=f"{HUMAN_GRADER_PREFIX}{reviewer}",
        grade=lambda messages: pipeline.grade_transcript(
            messages, version["text"], outcome=outcome
        ),
        grader_tools=(),
        grader_system_prompt=None,
        batch_id=batch_id,
        labels=decided,  # stored with the pass, in its transaction
        reviewer=reviewer,
    )
    return run_id


def code_verdicts(text: str, output: str) -> list[CriterionVerdict]:
    """What the rubric's code checks decide on `output`, in rubric order (the person
    grader's form shows them as decided, with their evidence, before it asks the rest).

    The same checks a pass runs (`tools.checks.run_checks`); nothing is stored.

    Examples:
        >>> [v["passed"] for v in code_verdicts("- Two lines {lines == 2}\\n- Is kind", "a\\nb")]
        [True]
    """
    from rubric_core.tools.checks import run_checks

    return list(run_checks(parse_criteria(text), output).values())
