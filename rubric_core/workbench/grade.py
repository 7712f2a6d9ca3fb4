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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from langchain_core.messages import AIMessage, HumanMessage

from rubric_core.batch.common import ProgressCallback
from rubric_core.batch.job import Grader, GraderFactory, GradeRows, Job
from rubric_core.batch.run import PreparedJob, check_reachable
from rubric_core.errors import InputError
from rubric_core.evaluate import check_label_criteria
from rubric_core.grader.logs import run_context
from rubric_core.limits import quoted
from rubric_core.rubric import parse_criteria
from rubric_core.runs.spec import SpecError, lone_surrogate
from rubric_core.runs.validate import grader_problem
from rubric_core.schema import (
    CHECKS_GRADER,
    GRADED_KIND,
    HUMAN_GRADER_PREFIX,
    is_checks_only_grader,
)
from rubric_core.store import NewRun, RunEnd
from rubric_core.store.retry import retry_write
from rubric_core.workbench.datasets import MAX_OUTPUT_CHARS, load_graded_dataset

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rubric_core.pipeline import PassPipeline
    from rubric_core.schema import CriterionVerdict, RubricEvaluation
    from rubric_core.store import Store
    from rubric_core.workbench.datasets import GradedRow

__all__ = [
    "GradeSummary",
    "GradingError",
    "check_grader",
    "code_verdicts",
    "grade_by_person",
    "grade_file",
    "grade_one",
    "grade_outputs",
    "grader_factory",
    "grader_label",
    "prepare_grade",
    "resolve_rubric",
]


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
    versions = store.rubrics.versions(name.strip())
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


@dataclass(frozen=True)
class _ResolvedGrader:
    """The default grader factory: `resolve_model` on each call (picklable, for workers)."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __call__(self) -> BaseChatModel | None:
        from rubric_core.providers import resolve_model

        if is_checks_only_grader(self.model):
            return None  # code checks decide every criterion (check_grader made sure)
        return resolve_model(
            self.model, role="grader", base_url=self.base_url, api_key=self.api_key
        )


def grader_factory(grader: Grader) -> GraderFactory:
    """What makes each pass's model for `grader`: its own `factory`, else `resolve_model`
    of its spec; a bad spec or a missing key is reported here, before anything is stored."""
    if grader.factory is not None:
        return grader.factory
    make = _ResolvedGrader(grader.model, grader.base_url, grader.api_key)
    make()
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
    runs = store.runs.of_batch(batch_id)
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


@dataclass(frozen=True)
class _Output:
    """One output to grade and where it sits: its labels, its batch position."""

    input: str
    output: str
    labels: Mapping[str, bool] | None = None
    input_index: int | None = None
    resuming: bool = False
    """Its input has a run already (an interrupted `grade`): continue that run."""


@dataclass(frozen=True)
class _Recording:
    """How a graded run is recorded: its grader, its batch, its labels' reviewer."""

    grader_label: str
    batch_id: str | None
    grader_tools: tuple[str, ...] = ()
    grader_system_prompt: str | None = None
    reviewer: str = ""


def _store_pass(
    store: Store,
    version: dict[str, Any],
    item: _Output,
    recording: _Recording,
    grade: Callable[[list[Any]], RubricEvaluation],
) -> tuple[int, int | None, RubricEvaluation | None, int]:
    """Create a graded run, grade its transcript, record the pass with its labels (one
    transaction), close the run; returns (run, pass, its record, labels stored).

    With `input_index` (and `batch_id`), `resuming` an input that already has a run (an
    interrupted `grade`) continues that run: taken over, and a pass it already stored is
    kept rather than graded again.
    """
    input, output, labels = item.input, item.output, item.labels
    run_id = store.runs.create(
        NewRun(
            rubric_version_id=version["id"],
            input=input,
            agent_model="",
            grader_model=recording.grader_label,
            grader_tools=list(recording.grader_tools),
            max_iterations=1,
            agent_kind=GRADED_KIND,
            grader_system_prompt=recording.grader_system_prompt,
            batch_id=recording.batch_id,
            input_index=item.input_index,
        ),
    )
    if item.resuming:
        store.runs.resume(run_id)  # an interrupted input's run: this process owns it now
        kept = store.passes.of_run(run_id)
        if kept:  # its pass was stored (with its labels) before the interruption
            last = kept[-1]
            retry_write(
                lambda: store.runs.finish(
                    run_id, RunEnd(status=last["status"], final_output=output)
                ),
                what=f"the end of run {run_id}",
            )
            return run_id, int(last["id"]), cast("RubricEvaluation", last), 0
    messages: list[Any] = [HumanMessage(input), AIMessage(output)]
    labelled = 0
    try:
        retry_write(
            lambda: store.runs.save_transcript(run_id, messages), what=f"run {run_id}'s input"
        )
        with run_context(run_id):
            evaluation = grade(messages)
        # Stored before the batch goes on, or the run says the pass could not be (below);
        # a row's labels in the same transaction as its pass.
        if labels and evaluation["criteria"]:
            given = dict(labels)
            reviewer = recording.reviewer
            evaluation_id, labelled = retry_write(
                lambda: store.labels.record_labelled_pass(
                    run_id, evaluation, given, reviewer=reviewer
                ),
                what=f"the graded pass of run {run_id} and its labels",
            )
        else:
            evaluation_id = retry_write(
                lambda: store.passes.record(run_id, evaluation),
                what=f"the graded pass of run {run_id}",
            )
    except Exception as exc:
        error = f"{exc}"
        retry_write(
            lambda: store.runs.finish(
                run_id, RunEnd(status="error", final_output=output, error=error)
            ),
            what=f"the end of run {run_id}",
        )
        return run_id, None, None, 0
    retry_write(
        lambda: store.runs.finish(run_id, RunEnd(status=evaluation["status"], final_output=output)),
        what=f"the end of run {run_id}",
    )
    return run_id, evaluation_id, evaluation, labelled


def grade_one(
    store: Store,
    version_id: int,
    input: str,
    output: str,
    grader: Grader,
    *,
    batch_id: str | None = None,
    grader_llm: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Grade one existing output now; returns `{"run_id", "evaluation_id", "evaluation"}`.

    Raises:
        GradingError: An output longer than `MAX_OUTPUT_CHARS`; nothing is stored.
        ModelSpecError, UnknownToolError, StoreError: Before anything is stored.
    """
    _check_output(output)
    version = store.rubrics.version(version_id)
    check_grader(grader.model, version)
    llm = grader_llm or grader_factory(grader)()
    grader_tools, grader_system_prompt, samples = grader.tools, grader.system_prompt, grader.samples
    pipeline = build_grader(
        llm, grader_tools=grader_tools, grader_system_prompt=grader_system_prompt, samples=samples
    )
    run_id, evaluation_id, evaluation, _ = _store_pass(
        store,
        version,
        _Output(input, output),
        _recording(grader, batch_id),
        lambda messages: pipeline.grade_transcript(messages, version["text"]),
    )
    return {"run_id": run_id, "evaluation_id": evaluation_id, "evaluation": evaluation}


def _recording(grader: Grader, batch_id: str | None, reviewer: str = "") -> _Recording:
    return _Recording(
        grader_label(grader.model), batch_id, grader.tools, grader.system_prompt, reviewer
    )


@dataclass(frozen=True)
class GradedRows:
    """The units of a grade job: row `index` graded once and stored as a graded run.

    Picklable (the rows, the rubric version, the grader and its factory), so a grade runs
    on any executor; a row's run is keyed by `(batch_id, index)`, so grading a row again
    (a resumed job, a retried Ray worker) continues its run instead of storing another.
    """

    version: dict[str, Any]
    rows: tuple[Mapping[str, Any], ...]
    labels: tuple[dict[str, bool], ...]
    grader: Grader
    make: GraderFactory
    batch_id: str
    source: str = "dataset"
    resuming: bool = False
    factory_field: str = "grader.factory"

    @property
    def total(self) -> int:
        return len(self.rows)

    def run_unit(
        self, store: Store, index: int, stop_event: threading.Event
    ) -> dict[str, Any] | None:
        """Grade row `index` and store it; its run row with `evaluation_id`, `result`, `labelled`."""
        if stop_event.is_set():
            return None
        row, version = self.rows[index], self.version
        grader_tools, grader_system_prompt = self.grader.tools, self.grader.system_prompt
        pipeline = build_grader(
            self.make(),
            grader_tools=grader_tools,
            grader_system_prompt=grader_system_prompt,
            samples=self.grader.samples,
        )
        item = _Output(row["input"], row["output"], self.labels[index], index, self.resuming)
        run_id, evaluation_id, evaluation, labelled = _store_pass(
            store,
            version,
            item,
            _recording(self.grader, self.batch_id, self.source),
            lambda messages: pipeline.grade_transcript(messages, version["text"]),
        )
        return {
            **store.runs.get(run_id),
            "evaluation_id": evaluation_id,
            "result": evaluation["result"] if evaluation else "error",
            "labelled": labelled,
        }


def prepare_grade(store: Store, job: Job) -> PreparedJob[GradeSummary]:
    """Check a grade job completely, store nothing; ready to `run`.

    The rubric version, every row's input, output and labels against its criteria, the
    grader model and tools, the batch to resume, the executor's reach: a bad request
    stores nothing.

    Raises:
        GradingError: A label naming a criterion not in the rubric; a batch to resume
            that is not this grade.
        ModelSpecError, UnknownToolError, SpecError, StoreError, RayUnavailable.
    """
    work = job.work
    if not isinstance(work, GradeRows):
        raise SpecError("work", f"a grade grades GradeRows, got {type(work).__name__}")
    rows = cast("Sequence[GradedRow]", work.rows)
    _check_rows(rows)
    version = store.rubrics.version(work.rubric_version_id)
    labels = _check_labels(version, rows)
    grader = work.grader
    check_grader(grader.model, version)
    make = grader_factory(grader)
    build_grader(None, grader_tools=grader.tools, samples=grader.samples)  # tools, samples
    batch = job.batch_id or f"graded-{uuid.uuid4().hex[:16]}"
    finished = _resumable(store, batch, rows, version["id"]) if job.resume else set()
    units = GradedRows(
        version, work.rows, tuple(labels), grader, make, batch, work.source, job.resume
    )
    check_reachable(job, units)
    outcomes: dict[int, dict[str, Any]] = {}

    def collect(row: dict[str, Any]) -> None:
        outcomes[int(row["input_index"])] = row

    def finish(_stopped: bool) -> GradeSummary:
        done = [outcomes[index] for index in sorted(outcomes)]
        return {
            "batch_id": batch,
            "run_ids": [int(row["id"]) for row in done],
            "evaluation_ids": [row["evaluation_id"] for row in done],
            "labelled": sum(int(row["labelled"]) for row in done),
            "by_result": dict(Counter(str(row["result"]) for row in done)),
            "skipped": len(finished),
        }

    pending = [index for index in range(len(rows)) if index not in finished]
    return PreparedJob(store, job, units, pending, finish=finish, collect=collect)


def grade_outputs(
    store: Store,
    job: Job,
    *,
    progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
) -> GradeSummary:
    """Grade every row's output once (`job.work`, a `GradeRows`); store the labels given.

    Each row's run is the batch's input at the row's position, its labels stored in the
    transaction of its pass. With `job.resume` (and the `batch_id` of an earlier,
    interrupted `grade` of the same rows), rows whose run ended are skipped, and an
    interrupted row's run is continued (its stored pass kept, else graded now). The rows
    run on `job.executor` like a batch's inputs (a process or Ray executor needs a
    picklable `grader.factory`, or none).

    Everything is checked first (`prepare_grade`), so a bad request stores nothing.

    Args:
        store: Where the runs go.
        job: `Job(GradeRows(rows, rubric_version_id, Grader(...), source=...), ...)`.
        progress: `progress(finished, total, run_row)` after each row.
        stop_event: When set, rows not yet started are skipped.

    Raises:
        GradingError, ModelSpecError, UnknownToolError, SpecError, StoreError: Before
            anything is stored.

    Examples:
        >>> rows = load_graded_dataset("outputs.csv")  # doctest: +SKIP
        >>> job = Job(GradeRows(rows, version["id"], Grader("openai:gpt-4.1")))  # doctest: +SKIP
        >>> grade_outputs(store, job)["by_result"]  # doctest: +SKIP
        {'satisfied': 7, 'needs_revision': 3}
    """
    return prepare_grade(store, job).run(progress=progress, stop_event=stop_event)


def grade_file(
    store: Store, path: str, *, rubric: str, grader: Grader, **job_options: Any
) -> GradeSummary:
    """`grade_outputs` over a CSV/JSONL file, against `NAME[@VERSION]`; labels by the file's
    name. `job_options` are the `Job`'s (`concurrency`, `batch_id`, `resume`, ...)."""
    from pathlib import Path

    rows = load_graded_dataset(path)
    version = resolve_rubric(store, rubric)
    work = GradeRows(tuple(rows), int(version["id"]), grader, source=Path(path).name)
    return grade_outputs(store, Job(work, **job_options))


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
    version = store.rubrics.version(version_id)
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
        _Output(input, output, labels=decided),  # stored with the pass, in its transaction
        _Recording(f"{HUMAN_GRADER_PREFIX}{reviewer}", None, reviewer=reviewer),
        lambda messages: pipeline.grade_transcript(messages, version["text"], outcome=outcome),
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
