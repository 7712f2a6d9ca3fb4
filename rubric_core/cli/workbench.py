"""`grade`, `regrade`, `label`, `agreement`: test a rubric from a terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rubric_core.cli.common import CONTEXT, BadInput, open_store
from rubric_core.cli.options import db_option, executor_options, rate_limit_options
from rubric_core.errors import InputError
from rubric_core.schema import CHECKS_GRADER

if TYPE_CHECKING:
    from rubric_core.cli.options import ExecutorOptions
    from rubric_core.providers.ratelimit import RateLimit

__all__ = ["agreement", "grade", "label", "regrade"]

_input_file = click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="CSV or JSONL file.",
)
_json = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
_grader = click.option(
    "--grader",
    "grader_model",
    default=None,
    help=(
        "Grader model: provider:model-id, replay:<scenario> (scripted, offline, for its own "
        "rubric only), or 'none': code checks only, for a rubric whose every criterion has "
        "a {check} [default: none, which such a rubric needs; any other rubric needs a grader]."
    ),
)
_samples = click.option(
    "--samples", type=int, default=1, show_default=True, help="Gradings per pass (a panel of k)."
)
_tool = click.option("--tool", "tools", multiple=True, help="A grader tool (repeatable).")


def _echo(value: Any, as_json: bool, text: str) -> None:
    click.echo(json.dumps(value, indent=2, default=str) if as_json else text)


def _run(job: Any) -> Any:
    from rubric_core.store import StoreError

    try:
        return job()
    except (InputError, StoreError) as exc:
        raise BadInput(str(exc)) from exc


@click.command(context_settings=CONTEXT)
@_input_file
@click.option("--rubric", required=True, help="NAME or NAME@VERSION (default: latest version).")
@_grader
@_samples
@_tool
@click.option("--concurrency", type=int, default=4, show_default=True, help="Passes at once.")
@executor_options
@rate_limit_options
@click.option(
    "--resume",
    "resume_batch",
    default=None,
    metavar="BATCH",
    help="Continue an interrupted grade of the same file: rows whose run ended are skipped.",
)
@_json
@db_option
def grade(
    input_file: Path,
    rubric: str,
    grader_model: str | None,
    samples: int,
    tools: tuple[str, ...],
    concurrency: int,
    executor: ExecutorOptions,
    rate_limit: RateLimit | None,
    resume_batch: str | None,
    as_json: bool,
    db: str | None,
) -> None:
    """Grade existing outputs, no agent: one graded run per `input` + `output` row.

    A `labels` column (JSON: criterion to true/false) is stored as human labels, with the
    file's name as reviewer, in the transaction of the row's pass. An interrupted grade
    (killed, or its store lost) is continued with `--resume BATCH` (the batch id it printed
    or `runs --batch` shows): rows whose run ended are skipped, the others graded.

    \b
    Example:
        python -m rubric_core grade --input-file outputs.csv --rubric essay@2 \\
            --grader openai:gpt-4.1-mini
        python -m rubric_core grade --input-file outputs.csv --rubric essay@2 \\
            --grader openai:gpt-4.1-mini --resume graded-3f2a9c0d1e4b5a6f
    """
    from rubric_core.batch import Grader
    from rubric_core.workbench.grade import grade_file

    store = open_store(db)
    try:
        summary = _run(
            lambda: grade_file(
                store,
                str(input_file),
                rubric=rubric,
                grader=Grader(grader_model or CHECKS_GRADER, tuple(tools), samples=samples),
                concurrency=concurrency,
                rate_limit=rate_limit,
                batch_id=resume_batch,
                resume=resume_batch is not None,
                **executor.job_options(),
            )
        )
    finally:
        store.close()
    from rubric_core.schema import GRADED_KIND
    from rubric_core.wording import status_sentence

    results = ", ".join(f"{n} {r}" for r, n in sorted(summary["by_result"].items()))
    meanings = "".join(
        f"\n  {r}: {status_sentence(r, GRADED_KIND)}" for r in sorted(summary["by_result"])
    )
    _echo(
        summary,
        as_json,
        f"Graded {len(summary['run_ids'])} outputs ({results}) as batch {summary['batch_id']}; "
        f"{summary['labelled']} labels stored."
        + (f" {summary['skipped']} rows had been graded before." if summary["skipped"] else "")
        + meanings,
    )


@click.command(context_settings=CONTEXT)
@click.option(
    "--run-id", "run_ids", type=int, multiple=True, help="A run to re-grade (repeatable)."
)
@click.option("--batch", "batch_id", default=None, help="Every run of this batch.")
@click.option("--rubric", "rubric_name", default=None, help="Every run of this rubric.")
@click.option("--status", default=None, help="Only runs with this status.")
@click.option("--model", default=None, help="Only runs whose agent or grader is this model.")
@click.option("--rubric-version", type=int, default=None, help="Grade against this version number.")
@click.option(
    "--grader",
    "grader_model",
    default=None,
    help="Grader model: provider:model-id, or replay:<scenario> (scripted, offline).",
)
@click.option(
    "--resume",
    "resume_id",
    type=int,
    default=None,
    metavar="EXPERIMENT",
    help="Continue an interrupted or stopped experiment: its settings, its gradings kept.",
)
@click.option(
    "--grader-prompt",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File with grader instructions replacing the built-in prompt.",
)
@_samples
@_tool
@click.option(
    "--all-passes", is_flag=True, help="Every stored pass, not only each run's final one."
)
@click.option("--name", default=None, help="The experiment's name.")
@click.option("--concurrency", type=int, default=8, show_default=True, help="Gradings at once.")
@executor_options
@rate_limit_options
@_json
@db_option
def regrade(
    run_ids: tuple[int, ...],
    batch_id: str | None,
    rubric_name: str | None,
    status: str | None,
    model: str | None,
    rubric_version: int | None,
    grader_model: str | None,
    resume_id: int | None,
    grader_prompt: Path | None,
    samples: int,
    tools: tuple[str, ...],
    all_passes: bool,
    name: str | None,
    concurrency: int,
    executor: ExecutorOptions,
    rate_limit: RateLimit | None,
    as_json: bool,
    db: str | None,
) -> None:
    """Re-grade stored drafts with another rubric version, grader, prompt, tools or samples.

    No agent runs. The verdicts are stored as an experiment; the source runs are unchanged.
    With --samples 2 or more, each criterion's flip rate is reported. An experiment whose
    process went away is marked interrupted; `--resume EXPERIMENT` continues it with its
    own selection and settings, keeping the gradings it stored.

    \b
    Example:
        python -m rubric_core regrade --batch batch-1a2b --rubric-version 3 \\
            --grader openai:gpt-4.1 --samples 3
        python -m rubric_core regrade --resume 4
    """
    from rubric_core.batch import Grader, Job, RegradePasses
    from rubric_core.cli.common import read_text
    from rubric_core.store import RunFilters
    from rubric_core.workbench.regrade import regrade as run_regrade

    # No --grader (or --grader none): code checks only, refused with the judged criterion
    # named when the rubric has one (`runs.grader_problem`, as on every front door).
    store = open_store(db)
    how: dict[str, Any] = {
        "concurrency": concurrency,
        "rate_limit": rate_limit,
        **executor.job_options(),
    }
    try:

        def job() -> Any:
            if resume_id is not None:
                work = RegradePasses(experiment_id=resume_id)
                return run_regrade(store, Job(work, resume=True, **how))
            filters = None
            if rubric_name or status or model:
                filters = RunFilters(rubric=rubric_name, status=status, model=model)
            version_id = None
            if rubric_version is not None:
                runs = [store.runs.get(r) for r in run_ids[:1]]
                rubric = rubric_name or (runs[0]["rubric"] if runs else None)
                if rubric is None and batch_id is not None:
                    found = store.runs.find(batch_id=batch_id, limit=1)
                    rubric = found[0]["rubric"] if found else None
                if rubric is None:
                    raise BadInput(
                        "--rubric-version needs runs to re-grade (--run-id, --batch or --rubric)"
                    )
                from rubric_core.workbench.grade import resolve_rubric

                version_id = resolve_rubric(store, f"{rubric}@{rubric_version}")["id"]
            prompt = read_text(grader_prompt, "--grader-prompt") if grader_prompt else None
            grader = Grader(grader_model or CHECKS_GRADER, tuple(tools), prompt, samples)
            work = RegradePasses(
                grader,
                run_ids=tuple(run_ids) or None,
                batch_id=batch_id,
                filters=filters,
                rubric_version_id=version_id,
                all_passes=all_passes,
                name=name,
            )
            return run_regrade(store, Job(work, **how))

        result = _run(job)
    finally:
        store.close()
    text = f"Experiment {result['experiment_id']}: {result['items']} gradings ({result['errors']} grader errors)."
    if result["consistency"]:
        rates = ", ".join(
            f"{c['name']}: {c['flip_rate']:.2f}"
            for c in result["consistency"]["criteria"]
            if c["flip_rate"] is not None
        )
        text += f"\nFlip rate per criterion: {rates}"
    _echo(result, as_json, text)


@click.command(context_settings=CONTEXT)
@_input_file
@click.option(
    "--reviewer", default=None, help="Reviewer of rows with none [default: the file's name]."
)
@db_option
def label(input_file: Path, reviewer: str | None, db: str | None) -> None:
    """Import human labels from a CSV: all of them, or (on any error) none.

    Columns: `evaluation_id` (or `run_id`, with `grading_run_id` and `iteration` to pick a
    pass), `criterion`, `human_passed`, optionally `reviewer` and `label_note`. A criteria
    export with `human_passed` filled in imports as it is.

    \b
    Example:
        python -m rubric_core export --output criteria.csv   # fill in human_passed
        python -m rubric_core label --input-file criteria.csv --reviewer ana
    """
    from rubric_core.workbench.agreement import import_labels_csv

    if not input_file.is_file():
        raise BadInput(f"{input_file}: no such file")
    store = open_store(db)
    try:
        count = _run(lambda: import_labels_csv(store, input_file, reviewer=reviewer))
    finally:
        store.close()
    click.echo(f"Stored {count} labels from {input_file.name}.")


@click.command(context_settings=CONTEXT)
@click.option("--experiment", "experiment_id", type=int, default=None, help="Experiment A.")
@click.option("--against", "against", type=int, default=None, help="Experiment B (A predicts B).")
@click.option("--against-labels", is_flag=True, help="Against the human labels (the default).")
@click.option("--batch", "batch_id", default=None, help="Only runs of this batch.")
@click.option("--rubric", "rubric_name", default=None, help="Only runs of this rubric.")
@click.option(
    "--pooled",
    is_flag=True,
    help="One figure over every rubric's labels together (labelled as pooled), instead of "
    "one report per rubric.",
)
@_json
@db_option
def agreement(
    experiment_id: int | None,
    against: int | None,
    against_labels: bool,
    batch_id: str | None,
    rubric_name: str | None,
    pooled: bool,
    as_json: bool,
    db: str | None,
) -> None:
    """How far the judge (or an experiment) agrees with the human labels, or with another experiment.

    Per criterion and overall: labelled items, percent agreement, Cohen's kappa
    (scikit-learn), and the confusion counts with the judge as predictor. Without
    --rubric (or --experiment), one report per rubric that has labels: rubrics judge
    different criteria, so a figure across them comes only with --pooled.

    \b
    Example:
        python -m rubric_core agreement --json
        python -m rubric_core agreement --rubric essay
        python -m rubric_core agreement --experiment 3 --against-labels
        python -m rubric_core agreement --experiment 3 --against 4 --json
    """
    from rubric_core.store import RunFilters
    from rubric_core.workbench.agreement import (
        agreement_between,
        agreement_by_rubric,
        agreement_with_labels,
        unfinished_experiments,
    )

    if against is not None and against_labels:
        raise BadInput("give --against B or --against-labels, not both")
    if against is not None and experiment_id is None:
        raise BadInput("--against needs --experiment A")
    if pooled and (rubric_name or experiment_id is not None):
        raise BadInput("--pooled pools every rubric's labels; drop --rubric and --experiment")
    per_rubric = rubric_name is None and experiment_id is None and not pooled
    store = open_store(db)
    try:
        if against is not None:
            assert experiment_id is not None
            report: Any = _run(lambda: agreement_between(store, experiment_id, against))
        elif per_rubric:
            report = {
                "scope": "per_rubric",
                "rubrics": _run(lambda: agreement_by_rubric(store, batch_id=batch_id)),
            }
        else:
            filters = RunFilters(rubric=rubric_name) if rubric_name else None
            report = _run(
                lambda: agreement_with_labels(
                    store, batch_id=batch_id, filters=filters, experiment_id=experiment_id
                )
            )
            if pooled:
                names = [
                    r["name"]
                    for r in store.rubrics.find()
                    if store.labels.labelled_pass_ids(
                        batch_id=batch_id, filters=RunFilters(rubric=r["name"]), fully=False
                    )
                ]
                report = {"scope": "pooled", "pooled_rubrics": names, **report}
        unfinished = _run(lambda: unfinished_experiments(store, experiment_id, against))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({**report, "unfinished": unfinished}, default=str))
        return
    notes = [f"Note: {u['note']}." for u in unfinished]
    if per_rubric and against is None:
        blocks = [
            "\n".join([f"rubric {r['rubric']}:", *_report_lines(r, indent="  ")])
            for r in report["rubrics"]
        ]
        click.echo("\n\n".join([*notes, *blocks]))
        return
    lines = _report_lines(report)
    if pooled:
        lines[0] = "pooled over every rubric (" + ", ".join(report["pooled_rubrics"]) + "): "
        lines[0] += _figures("overall", report["overall"])
    lines = [*notes, *lines]
    click.echo("\n".join(lines))


def _report_lines(report: Any, *, indent: str = "") -> list[str]:
    lines = [_figures("overall", report["overall"])]
    lines += [_figures(c["name"], c) for c in report["criteria"]]
    return [indent + line for line in lines]


def _figures(name: str, row: Any) -> str:
    agreement = "-" if row["agreement"] is None else f"{row['agreement']:.0%}"
    kappa = "-" if row["kappa"] is None else f"{row['kappa']:.2f}"
    confusion = ""
    if "true_pass" in row:
        confusion = f"  TP {row['true_pass']} FP {row['false_pass']} FN {row['false_fail']} TN {row['true_fail']}"
    return f"{name}: n={row['n']} agreement={agreement} kappa={kappa}{confusion}"
