"""`run`, `resume` and `batch`: start the loop from a terminal and print what it does."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rubric_core.cli.common import (
    CONTEXT,
    EXIT_NOT_SATISFIED,
    EXIT_OK,
    BadInput,
    load_scenario,
    open_store,
    read_text,
)
from rubric_core.cli.options import (
    ExecutorOptions,
    SpecOptions,
    build_spec,
    check_spec,
    db_option,
    executor_options,
    rate_limit_options,
    spec_options,
)
from rubric_core.extras import require
from rubric_core.schema import MAX_CONCURRENCY
from rubric_core.scoring import shown_score
from rubric_core.wording import criterion_mark, is_penalty, status_sentence

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from rubric_core.batch import BatchSummary
    from rubric_core.providers.ratelimit import RateLimit
    from rubric_core.runs import RunHandle
    from rubric_core.schema import RubricEvaluation
    from rubric_core.store import Store

__all__ = ["batch", "format_pass", "format_summary", "resume", "run"]

Show = Callable[["RubricEvaluation"], None]
"""Called with each graded pass (from the run's thread)."""


EXIT_INTERRUPTED = 130
"""Exit code of a batch stopped with Ctrl-C (128 + SIGINT, as shells report it)."""

_STOP_GRACE_S = 15.0
"""How long a stopped batch waits for its workers to end before it exits regardless."""


def format_pass(evaluation: Mapping[str, Any], penalties: Collection[str] = ()) -> str:
    """One graded pass as terminal lines: verdict, a mark per criterion with its gap, explanation.

    A penalty (named in `penalties`, or a verdict with a negative `weight`) reads
    `absent ✓` / `present ✗` (`wording.criterion_mark`), never a bare ✓ for "it invents a price".

    Examples:
        >>> print(format_pass({"iteration": 0, "result": "needs_revision", "status": "needs_revision",
        ...                    "criteria": [{"name": "a", "passed": False, "gap": "do a"},
        ...                                 {"name": "Invents a price", "passed": True}]},
        ...                   penalties={"Invents a price"}))
        Pass 1: needs_revision
          ✗ a — do a
          absent ✓ Invents a price (penalty)
    """
    status = evaluation.get("status")
    lines = [
        f"Pass {int(evaluation['iteration']) + 1}: {evaluation['result']}"
        + (f" -> {status}" if status and status != evaluation["result"] else "")
        + (
            f" (score {score:.2f})"
            if (score := shown_score(evaluation.get("score"))) is not None
            else ""
        )
    ]
    regressed = {r["name"]: r["passed_in"] for r in evaluation.get("regressions") or []}
    for criterion in evaluation.get("criteria") or []:
        penalty = criterion["name"] in penalties or is_penalty(criterion)
        line = f"  {criterion_mark(bool(criterion.get('passed')), penalty=penalty)} "
        line += criterion["name"] + (" (penalty)" if penalty else "")
        if criterion["name"] in regressed:
            was = "absent" if penalty else "passed"
            line += f" [regressed: {was} in pass {regressed[criterion['name']]}]"
        if not criterion.get("passed") and criterion.get("gap"):
            line += f" — {criterion['gap']}"
        lines.append(line)
    explanation = (evaluation.get("explanation") or "").strip()
    if explanation:
        lines.append(f"  {explanation}")
    return "\n".join(lines)


def _penalties(store: Store, run_id: int) -> frozenset[str]:
    """The penalty criteria of a run's rubric version (empty when it cannot be read)."""
    from rubric_core.rubric import penalty_names
    from rubric_core.store import STORE_FAULTS

    faults: tuple[type[BaseException], ...] = (KeyError, *STORE_FAULTS)
    try:
        version = store.rubrics.version(store.runs.get(run_id)["rubric_version_id"])
    except faults:
        return frozenset()
    return penalty_names(str(version.get("text") or ""))


def _watch(
    store: Store,
    launch: Callable[[Show], RunHandle],
    *,
    quiet: bool,
    header: Callable[[int], str],
) -> str:
    """Start a run with `launch(show)`, print each pass as it is graded, return the status.

    Ctrl-C asks the run to stop (it ends `interrupted`, its graded passes kept).
    """
    header_shown = threading.Event()
    penalties: set[str] = set()

    def show(evaluation: RubricEvaluation) -> None:
        if quiet:
            return
        header_shown.wait(5)  # the run thread may grade before the header is printed
        click.echo(format_pass(evaluation, penalties))

    handle = launch(show)
    penalties.update(_penalties(store, handle.run_id))
    if not quiet:
        click.echo(header(handle.run_id))
    header_shown.set()
    try:
        while not handle.wait(0.2):
            pass
    except KeyboardInterrupt:
        click.echo("Stopping after the current step...", err=True)
        handle.stop()
        handle.wait()
    row = _final_row(store, handle)
    status = str(row["status"])
    if not quiet and row.get("final_output"):
        click.echo("\nFinal answer:\n" + row["final_output"].rstrip() + "\n")
    click.echo(f"Status: {status} — {status_sentence(status, row.get('agent_kind'))}")
    if row.get("score") is not None:
        kept = row.get("best_iteration")
        click.echo(
            f"Score: {shown_score(row['score']):.2f}"
            + (f" (kept the best draft, pass {kept + 1})" if kept is not None else "")
        )
    if row.get("error"):
        click.echo(f"Error: {row['error']}", err=True)
    return status


def _final_row(store: Store, handle: RunHandle) -> dict[str, Any]:
    """The run's row as stored, or as the run ended when the store could not say it.

    A run whose end could not be stored (a full disk, a deleted file) still reads
    `running` in the store, or cannot be read at all; its status line says `error`
    and why, never `running`.
    """
    from rubric_core.store import StoreError

    try:
        row = store.runs.get(handle.run_id)
    except StoreError as exc:
        reason = handle.error or "the run's end could not be stored"
        return {"status": "error", "error": f"{reason}; reading the run back failed: {exc}"}
    if row["status"] == "running" and handle.final_status == "error":
        return {**row, "status": "error", "error": handle.error or row.get("error")}
    return row


def _exit_for(status: str) -> None:
    sys.exit(EXIT_OK if status == "satisfied" else EXIT_NOT_SATISFIED)


@click.command(context_settings=CONTEXT)
@spec_options
@click.option("--input", "input_text", default=None, help="The request to the agent.")
@click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default=None,
    help="Read the request from a file ('-' for stdin).",
)
@click.option("--quiet", is_flag=True, help="Print only the final status line.")
def run(
    spec: SpecOptions,
    db: str | None,
    input_text: str | None,
    input_file: Path | None,
    quiet: bool,
) -> None:
    """Run an agent on one input until the rubric is met, printing each grading pass.

    Exit code 0 when the rubric is satisfied, 1 for any other final status, 2 for bad input.

    \b
    Example:
        python -m rubric_core run --scenario haiku
        python -m rubric_core run --rubric haiku --input "Write a haiku about rain" \\
            --agent-model openai:gpt-4o-mini --grader-model openai:gpt-4o-mini \\
            --grader-tool count_syllables --max-iterations 4
    """
    from rubric_core.runs import SpecError, start_run

    if input_text is not None and input_file is not None:
        raise BadInput("give --input or --input-file, not both")
    if input_file is not None:
        input_text = read_text(input_file, "input file")
    if input_text is None and spec.scenario:
        input_text = load_scenario(spec.scenario).get("input")
    if input_text is None:
        raise BadInput("--input or --input-file is required")
    store = open_store(db)
    try:
        run_spec = build_spec(store, spec, input_text)
        check_spec(store, run_spec)
        version = store.rubrics.version(run_spec.rubric_version_id)

        def launch(show: Show) -> RunHandle:
            try:
                return start_run(store, run_spec, on_evaluation=show)
            except SpecError as exc:
                raise BadInput(str(exc)) from exc

        status = _watch(
            store,
            launch,
            quiet=quiet,
            header=lambda run_id: (
                f"Run {run_id}: rubric {version['name']!r} v{version['version']}, "
                f"agent {run_spec.agent_model}, grader {run_spec.grader_model}"
            ),
        )
    finally:
        store.close()
    _exit_for(status)


@click.command(context_settings=CONTEXT)
@click.argument("run_id", type=int)
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint (not stored with runs).")
@click.option("--quiet", is_flag=True, help="Print only the final status line.")
@db_option
def resume(run_id: int, base_url: str | None, quiet: bool, db: str | None) -> None:
    """Resume an interrupted run from its last checkpoint; the same grading run goes on.

    Exit codes as for `run`.

    \b
    Example:
        python -m rubric_core resume 42
    """
    from rubric_core.runs import SpecError, resume_run
    from rubric_core.store import StoreError

    store = open_store(db)
    try:

        def launch(show: Show) -> RunHandle:
            try:
                return resume_run(store, run_id, base_url=base_url, on_evaluation=show)
            except SpecError as exc:
                raise BadInput(str(exc)) from exc

        try:
            done = len(store.passes.of_run(run_id))
            stopped = store.runs.get(run_id).get("error")
        except StoreError as exc:
            raise BadInput(f"no run with id {run_id}") from exc
        status = _watch(
            store,
            launch,
            quiet=quiet,
            header=lambda rid: (
                f"Resuming run {rid} after {done} graded pass(es)"
                + (f"; it had stopped with: {stopped}" if stopped else "")
            ),
        )
    finally:
        store.close()
    _exit_for(status)


def format_summary(summary: BatchSummary) -> str:
    """A batch summary as terminal text."""
    from rubric_core.batch import format_rate

    lines = [f"Batch {summary.batch_id}: {summary.total} run{'' if summary.total == 1 else 's'}"]
    if summary.by_status:
        lines.append("  by status: " + ", ".join(f"{k} {v}" for k, v in summary.by_status.items()))
    lines.append(f"Satisfied rate: {format_rate(summary.satisfied_rate)}")
    if summary.mean_score is not None:
        lines.append(
            f"Mean score: {summary.mean_score:.2f} over {len(summary.scores)} scored runs, "
            f"HealthBench's way: {summary.mean_basis()}"
        )
    mean = summary.mean_iterations_to_satisfied
    lines.append(f"Mean iterations to satisfied: {'n/a' if mean is None else f'{mean:.2f}'}")
    if summary.iterations_to_satisfied:
        lines.append(
            "Iterations to satisfied: "
            + ", ".join(
                f"{n} pass{'es' if n != 1 else ''}: {count}"
                for n, count in summary.iterations_to_satisfied.items()
            )
        )
    lines.append(f"{summary.pass_rate_rule}:")
    if not summary.criterion_pass_rates:
        lines.append("  (no graded criteria)")
    for row in summary.criterion_pass_rates:
        lines.append(
            f"  {format_rate(row['pass_rate']):>6}  ({row['passed']}/{row['total']})  "
            f"{row['criterion']}"
        )
    lines.append(f"Grader errors: {summary.grader_errors}")
    for error in summary.errors:
        lines.append(f"  run {error['run_id']} error: {error['error']}")
    return "\n".join(lines)


def _check_concurrency(concurrency: int) -> None:
    from rubric_core.runs import SpecError, validate_concurrency

    try:
        validate_concurrency(concurrency)
    except SpecError as exc:
        reason = str(exc).removeprefix(f"{exc.field}: ")
        raise BadInput(f"--concurrency {reason}") from exc


@click.command(context_settings=CONTEXT)
@spec_options
@executor_options
@rate_limit_options
@click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Dataset: CSV with an 'input' column (or one column), or JSONL of {\"input\": ...}.",
)
@click.option(
    "--concurrency",
    type=int,
    default=4,
    show_default=True,
    help=f"Runs at once (1-{MAX_CONCURRENCY}); with Ray, the workers the batch runs on.",
)
@click.option(
    "--resume",
    "resume_batch",
    default=None,
    metavar="BATCH_ID",
    help="Continue this batch over the same --input-file: finished inputs are skipped, "
    "interrupted ones continue their run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def batch(
    spec: SpecOptions,
    executor: ExecutorOptions,
    rate_limit: RateLimit | None,
    db: str | None,
    input_file: Path,
    concurrency: int,
    resume_batch: str | None,
    as_json: bool,
) -> None:
    """Run one rubric version over every input of a dataset and summarise.

    A progress bar goes to stderr; the summary (satisfied rate, mean iterations to
    satisfied, per-criterion pass rates, grader errors) to stdout. Exit code 0 when
    every run finished, 1 if any ended in error or the batch was stopped, 2 for bad input
    (or a Ray cluster that does not answer).

    With `--executor ray` each input is a task on the Ray cluster at `--ray-address`,
    recording into the shared store, which must then be PostgreSQL (`--db postgresql://...`).

    \b
    Example:
        python -m rubric_core batch --rubric haiku --input-file prompts.csv \\
            --agent-model openai:gpt-4o-mini --grader-model openai:gpt-4o-mini \\
            --grader-tool count_syllables --concurrency 8
        python -m rubric_core batch --scenario haiku --input-file prompts.jsonl
        python -m rubric_core batch --scenario haiku --input-file prompts.jsonl \\
            --db postgresql://rubric:PASSWORD@db:5432/rubric_studio \\
            --executor ray --ray-address 10.0.0.5:6379
        python -m rubric_core batch --scenario haiku --input-file prompts.jsonl \\
            --resume batch-1a2b3c4d5e6f7a8b
    """
    from tqdm import tqdm

    from rubric_core.batch import Job, RunInputs
    from rubric_core.batch.common import new_batch_id
    from rubric_core.batch.ray_cluster import RayUnavailable, check_ray_address
    from rubric_core.runs import SpecError
    from rubric_core.workbench import DatasetError, load_dataset, start_job

    try:
        inputs = load_dataset(input_file)
    except DatasetError as exc:
        raise BadInput(str(exc)) from exc
    _check_concurrency(concurrency)
    if executor.executor == "ray":
        require("ray", "ray")
        try:
            check_ray_address(executor.ray_address)
        except RayUnavailable as exc:
            raise BadInput(str(exc)) from exc
    store = open_store(db)
    batch_id = resume_batch or new_batch_id()
    stopping = False
    handle = None
    try:
        run_spec = build_spec(store, spec, inputs[0])
        check_spec(store, run_spec)
        try:
            job = Job(
                RunInputs(run_spec, tuple(inputs)),
                concurrency=concurrency,
                rate_limit=rate_limit,
                batch_id=batch_id,
                resume=resume_batch is not None,
                **executor.job_options(),
            )
        except SpecError as exc:
            raise BadInput(str(exc)) from exc
        done_before = len(store.runs.finished_inputs(resume_batch)) if resume_batch else 0
        bar = tqdm(
            total=len(inputs), initial=done_before, unit="run", file=sys.stderr, desc="batch"
        )

        def progress(done: int, total: int, row: dict[str, Any]) -> None:
            bar.n = done
            bar.set_postfix_str(row.get("status", ""), refresh=False)
            bar.refresh()

        try:
            handle = start_job(store, job, progress=progress)
        except (SpecError, RayUnavailable) as exc:
            bar.close()
            raise BadInput(str(exc)) from exc
        try:
            # An Event, not Thread.join(): on Python 3.11 a KeyboardInterrupt during join()
            # can leave the thread looking finished while its workers still run.
            while not handle.wait(0.2):
                pass
        except KeyboardInterrupt:
            stopping = True
            bar.close()
            stopped = _stop_batch(store, batch_id, handle.stop_event, handle.ended)
            if not stopped:
                # Workers still inside a model call: closing the store under them would
                # only add tracebacks; their runs are stored as interrupted already.
                _print_summary(_summary_so_far(store, batch_id), as_json)
                click.echo(f"Resume with: --resume {batch_id}", err=True)
                sys.exit(EXIT_INTERRUPTED)
        bar.close()
        if handle.exception is not None and not stopping:
            error = handle.exception
            if isinstance(error, SpecError | RayUnavailable):
                raise BadInput(str(error)) from error
            raise error
        summary = handle.result or _summary_so_far(store, batch_id)
        _print_summary(summary, as_json)
        if stopping or handle.stop_event.is_set():
            click.echo(f"Resume with: --resume {summary.batch_id}", err=True)
    finally:
        if not stopping or (handle is not None and handle.done()):
            store.close()
    if stopping:
        sys.exit(EXIT_INTERRUPTED)
    failed = handle.stop_event.is_set() or summary.by_status.get("error", 0) > 0
    sys.exit(EXIT_NOT_SATISFIED if failed else EXIT_OK)


def _stop_batch(store: Store, batch_id: str, stop: threading.Event, ended: threading.Event) -> bool:
    """Stop a batch after Ctrl-C; `True` once its workers ended within `_STOP_GRACE_S`.

    Sets the stop event (workers start no more runs; running ones stop before their next
    model call), stores the in-flight runs as `interrupted` at once, then waits, bounded;
    a second Ctrl-C gives up the wait.
    """
    from rubric_core.batch.common import mark_interrupted

    click.echo("\nStopping the batch (Ctrl-C again to stop waiting)...", err=True)
    stop.set()
    try:
        mark_interrupted(store, batch_id, "the batch was stopped (Ctrl-C)")
        return ended.wait(_STOP_GRACE_S)
    except KeyboardInterrupt:
        return ended.is_set()


def _summary_so_far(store: Store, batch_id: str) -> BatchSummary:
    from rubric_core.batch import summary_for_batch

    return summary_for_batch(store, batch_id)


def _print_summary(summary: BatchSummary, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_summary(summary))
