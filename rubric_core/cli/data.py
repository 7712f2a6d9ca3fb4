"""`export`, `rubrics` and `scenarios`: the store's datasets and rubrics, and the bundled demos."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from rubric_core.cli.common import CONTEXT, BadInput, iso_date, open_store, read_text, version_row
from rubric_core.cli.options import db_option
from rubric_core.limits import quoted
from rubric_core.schema import RUN_STATUSES

__all__ = ["export", "rubrics", "scenarios"]


@click.command(context_settings=CONTEXT)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl", "sft", "preference", "trajectories"]),
    default="csv",
    show_default=True,
    help="csv for spreadsheets (formulas neutralised), jsonl for programs (values as "
    "stored; not for spreadsheets); or training data in TRL's chat shapes: sft (request and "
    "satisfied draft), preference (prompt, chosen, rejected), trajectories (every pass with "
    "its verdicts and the feedback the agent saw). Training data is JSON Lines, or Parquet "
    "when --output ends in .parquet.",
)
@click.option(
    "--dataset",
    type=click.Choice(["criteria", "runs"]),
    default="criteria",
    show_default=True,
    help="criteria: one row per criterion per pass (a pass without verdicts, such as a "
    "grader_error, as one row), with the run's final status in run_status; runs: one row per run.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default="-",
    help="File to write [default: stdout].",
)
@click.option("--rubric", "rubric_name", default=None, help="Only runs of this rubric.")
@click.option(
    "--version", "rubric_version", type=int, default=None, help="Only this version (with --rubric)."
)
@click.option("--model", default=None, help="Only runs whose agent or grader is this model.")
@click.option(
    "--status", default=None, help="Only runs with this final status (the run_status column)."
)
@click.option("--since", default=None, help="Only runs started at or after (YYYY-MM-DD[THH:MM]).")
@click.option("--until", default=None, help="Only runs started before (YYYY-MM-DD[THH:MM]).")
@click.option("--batch", "batch_id", default=None, help="Only runs of this batch.")
@click.option(
    "--labels-only",
    is_flag=True,
    help="Training formats: only passes a human agreed with (labelled, every label equal "
    "to the judge's verdict).",
)
@click.option(
    "--min-margin",
    type=float,
    default=0.1,
    show_default=True,
    help="preference: the least score difference between a chosen and a rejected draft.",
)
@click.option(
    "--pairs",
    type=click.Choice(["all", "best-worst"]),
    default="all",
    show_default=True,
    help="preference: every pair of a grading run's passes past the margin, or only its "
    "best draft against its worst.",
)
@click.option(
    "--include-unsatisfied",
    is_flag=True,
    help="sft: for a grading run never satisfied, its best-scoring draft "
    "(metadata.satisfied is false) [default: satisfied drafts only].",
)
@db_option
def export(
    fmt: str,
    dataset: str,
    output: Path,
    rubric_name: str | None,
    rubric_version: int | None,
    model: str | None,
    status: str | None,
    since: str | None,
    until: str | None,
    batch_id: str | None,
    labels_only: bool,
    min_margin: float,
    pairs: str,
    include_unsatisfied: bool,
    db: str | None,
) -> None:
    """Export stored evaluations as CSV or JSONL, or as training data, streamed.

    CSV is for spreadsheets: cells a spreadsheet would run as a formula start with an
    apostrophe. JSONL is for programs: values are written as stored, never neutralised,
    so do not open it in a spreadsheet. sft, preference and trajectories are the revision
    loop as training rows for Hugging Face TRL (SFTTrainer, DPOTrainer).

    \b
    Example:
        python -m rubric_core export --format csv --output evals.csv
        python -m rubric_core export --dataset runs --format jsonl --rubric haiku \\
            --status satisfied --since 2025-01-01 --output runs.jsonl
        python -m rubric_core export --format preference --min-margin 0.2 --output dpo.jsonl
        python -m rubric_core export --format sft --labels-only --output sft.parquet
    """
    from rubric_core import export as exporter
    from rubric_core.store import RunFilters, StoreError

    training = None
    if fmt in exporter.TRAINING_FORMATS:
        try:
            training = exporter.TrainingOptions(
                min_margin=min_margin,
                labels_only=labels_only,
                include_unsatisfied=include_unsatisfied,
                pairs=pairs,
            )
        except exporter.ExportError as exc:
            raise BadInput(f"--min-margin: {exc}") from exc
    elif labels_only or include_unsatisfied:
        raise BadInput(
            "--labels-only and --include-unsatisfied are for the training formats "
            "(sft, preference, trajectories)"
        )
    if status is not None and status not in RUN_STATUSES:
        raise BadInput(f"--status {status!r} is not a status; use one of {', '.join(RUN_STATUSES)}")
    if rubric_version is not None and rubric_name is None:
        raise BadInput("--version needs --rubric")
    since, until = iso_date(since, "--since"), iso_date(until, "--until")
    store = open_store(db)
    try:
        rubric, version_id = rubric_name, None
        if rubric_name is not None:
            row = version_row(store, rubric_name, rubric_version)  # it must exist
            if rubric_version is not None:  # a version id names its rubric too
                rubric, version_id = None, row["id"]
        filters = RunFilters(
            rubric=rubric,
            version_id=version_id,
            model=model,
            status=status,
            since=since,
            until=until,
            batch_id=batch_id,
        )
        try:
            if str(output) == "-" and training is not None:
                sys.stdout.flush()
                exporter.write_training(store, sys.stdout.buffer, fmt, filters, training)
                sys.stdout.buffer.flush()
            elif str(output) == "-":
                writer = exporter.write_csv if fmt == "csv" else exporter.write_jsonl
                writer(store, sys.stdout, dataset=dataset, filters=filters)
                sys.stdout.flush()
            else:
                count = exporter.export_file(
                    store, output, fmt=fmt, dataset=dataset, filters=filters, training=training
                )
                click.echo(f"Wrote {count} rows to {output}", err=True)
        except StoreError as exc:
            raise BadInput(str(exc)) from exc
        except OSError as exc:
            raise BadInput(f"cannot write {output}: {exc.strerror or exc}") from exc
    finally:
        store.close()


@click.group(context_settings=CONTEXT)
def rubrics() -> None:
    """List, add, import and show rubrics (named, immutable versions).

    \b
    Example:
        python -m rubric_core rubrics list
        python -m rubric_core rubrics add haiku rubric.txt --tag poetry
        python -m rubric_core rubrics show haiku --version 1
        python -m rubric_core rubrics import triage healthbench_rubric.json
    """


@rubrics.command("list", context_settings=CONTEXT)
@db_option
def rubrics_list(db: str | None) -> None:
    """List stored rubrics with their latest version and tags.

    \b
    Example:
        python -m rubric_core rubrics list --db studio.db
    """
    store = open_store(db)
    try:
        rows = store.rubrics.find()
    finally:
        store.close()
    if not rows:
        click.echo("No rubrics yet; add one with `python -m rubric_core rubrics add NAME FILE`.")
        return
    width = max(len(row["name"]) for row in rows)
    click.echo(f"{'NAME':<{width}}  LATEST  VERSIONS  UPDATED               TAGS")
    for row in rows:
        click.echo(
            f"{row['name']:<{width}}  v{row['latest_version']:<5}  {row['versions']:<8}  "
            f"{str(row.get('updated_at') or '')[:19]:<20}  {', '.join(row.get('tags') or [])}"
        )


def _save_rubric(
    db: str | None, name: str, text: str, tags: tuple[str, ...], note: str
) -> dict[str, Any]:
    """Save a rubric version; a bad rubric or store fault is a one-line `BadInput`."""
    from rubric_core.rubric import RubricError
    from rubric_core.store import StoreError

    store = open_store(db)
    try:
        return store.rubrics.save_version(name, text, tags=list(tags) or None, note=note)
    except (RubricError, StoreError, ValueError) as exc:
        raise BadInput(f"rubric {quoted(name)}: {exc}") from exc
    finally:
        store.close()


@rubrics.command("add", context_settings=CONTEXT)
@click.argument("name")
@click.argument(
    "file",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default="-",
)
@click.option("--tag", "tags", multiple=True, help="A tag for the rubric; repeat for several.")
@click.option("--note", default="", help="What changed in this version.")
@db_option
def rubrics_add(name: str, file: Path, tags: tuple[str, ...], note: str, db: str | None) -> None:
    """Add a version of rubric NAME from FILE (or stdin): one criterion per line.

    Saving text identical to the latest version keeps that version.

    \b
    Example:
        python -m rubric_core rubrics add haiku rubric.txt --tag poetry --note "5/7/5"
        printf -- "- three lines\\n- mentions rain\\n" | python -m rubric_core rubrics add rain
    """
    row = _save_rubric(db, name, read_text(file, "rubric file"), tags, note)
    click.echo(
        f"Rubric {row['name']!r} version {row['version']} (id {row['id']}), "
        f"{len(row['criteria'])} criteria."
    )


@rubrics.command("import", context_settings=CONTEXT)
@click.argument("name")
@click.argument(
    "file",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default="-",
)
@click.option("--tag", "tags", multiple=True, help="A tag for the rubric; repeat for several.")
@click.option("--note", default="imported from HealthBench JSON", help="What this version is.")
@db_option
def rubrics_import(name: str, file: Path, tags: tuple[str, ...], note: str, db: str | None) -> None:
    """Import a HealthBench-style rubric from FILE (or stdin) as a version of rubric NAME.

    FILE is a JSON list of {"criterion": ..., "points": ...} (or an example holding it
    under "rubrics"); points become weights, negative points penalties.

    \b
    Example:
        python -m rubric_core rubrics import triage healthbench_rubric.json --tag medical
    """
    from rubric_core.rubric import RubricError, criteria_from_healthbench

    raw = read_text(file, "rubric file")
    try:
        text = criteria_from_healthbench(raw)
    except RubricError as exc:
        raise BadInput(f"{file}: {exc}") from exc
    row = _save_rubric(db, name, text, tags, note)
    click.echo(
        f"Rubric {row['name']!r} version {row['version']} (id {row['id']}), "
        f"{len(row['criteria'])} criteria imported."
    )


@rubrics.command("show", context_settings=CONTEXT)
@click.argument("name")
@click.option("--version", "rubric_version", type=int, default=None, help="[default: latest]")
@db_option
def rubrics_show(name: str, rubric_version: int | None, db: str | None) -> None:
    """Show a rubric version's text and parsed criteria.

    \b
    Example:
        python -m rubric_core rubrics show haiku --version 2
    """
    store = open_store(db)
    try:
        row = version_row(store, name, rubric_version)
    finally:
        store.close()
    click.echo(f"{row['name']} v{row['version']} (id {row['id']}, {row['created_at']})")
    if row.get("note"):
        click.echo(f"Note: {row['note']}")
    click.echo("Criteria:")
    for index, criterion in enumerate(row["criteria"], start=1):
        click.echo(f"  {index}. {criterion}")


@click.command(context_settings=CONTEXT)
def scenarios() -> None:
    """List the bundled replay scenarios (offline demo models, `replay:<name>`).

    \b
    Example:
        python -m rubric_core scenarios
        python -m rubric_core run --scenario find_duplicates
    """
    from rubric_core.providers import list_scenarios

    rows = list_scenarios()
    width = max((len(row["name"]) for row in rows), default=4)
    for row in rows:
        tools = ", ".join(row.get("grader_tools") or []) or "-"
        click.echo(
            f"{row['name']:<{width}}  ends {row.get('expected_status', '?'):<22}  "
            f"tools: {tools}\n{'':<{width}}  {row.get('title') or row.get('description', '')}"
        )
