"""`report` and `gate`: results that leave the studio (an HTML file, a CI verdict)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rubric_core.cli.common import CONTEXT, BadInput, open_store
from rubric_core.cli.options import SpecOptions, db_option, spec_options
from rubric_core.errors import InputError
from rubric_core.schema import CHECKS_GRADER

if TYPE_CHECKING:
    from rubric_core.report.figures import Figures
    from rubric_core.store import Store

__all__ = ["gate", "report"]

EXIT_SHORT = 1
"""The gate's figures fell short of a threshold."""


def _guard(job: Any) -> Any:
    from rubric_core.store import StoreError

    try:
        return job()
    except (InputError, StoreError) as exc:
        raise BadInput(str(exc)) from exc


@click.command(context_settings=CONTEXT)
@click.option("--batch", "batch_id", default=None, help="The batch to report.")
@click.option("--experiment", "experiment_id", type=int, default=None, help="The experiment.")
@click.option(
    "--against", type=int, default=None, help="With --experiment: compare with this experiment."
)
@click.option("--run", "run_id", type=int, default=None, help="One run.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The HTML file to write.",
)
@click.option(
    "--no-input-charts",
    is_flag=True,
    help="Leave out each input's timeline and heatmap (a smaller file).",
)
@db_option
def report(
    batch_id: str | None,
    experiment_id: int | None,
    against: int | None,
    run_id: int | None,
    output: Path,
    no_input_charts: bool,
    db: str | None,
) -> None:
    """Write one self-contained HTML report of a batch, an experiment or a run.

    The rubric, the summary figures, agreement with human labels (where there are labels),
    the charts (plotly.js inlined: the file opens offline) and every input with its
    drafts, verdicts and gaps. Every stored string is escaped.

    \b
    Example:
        python -m rubric_core report --batch batch-1a2b --output report.html
        python -m rubric_core report --experiment 4 --against 3 --output compare.html
    """
    from rubric_core.report.html import write_report

    store = open_store(db)
    try:
        path = _guard(
            lambda: write_report(
                store,
                output,
                batch_id=batch_id,
                experiment_id=experiment_id,
                run_id=run_id,
                against=against,
                item_charts=not no_input_charts,
            )
        )
    finally:
        store.close()
    if path.is_file():  # not `-` (standard output), a FIFO or a device
        click.echo(f"Wrote {path} ({path.stat().st_size / 1e6:.1f} MB).", err=str(output) == "-")


def _has_outputs(path: Path) -> bool:
    """Whether a dataset holds outputs to grade (an `output` column or key)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            if path.suffix.casefold() in (".jsonl", ".ndjson"):
                first = next((line for line in file if line.strip()), "{}")
                record = json.loads(first)
                return isinstance(record, dict) and "output" in record
            header = next(csv.reader(file), [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # the dataset loader says what is wrong with it
    return "output" in [name.strip() for name in header]


def _no_grader() -> Any:
    """No judge: `RubricMiddleware(model=None)` runs a rubric of code checks only."""
    return None


def _run_dataset(store: Store, spec: SpecOptions, input_file: Path, concurrency: int) -> str:
    """Grade a dataset's outputs (no agent; code checks only without --grader-model), or run
    the agent over its inputs as a batch; the batch id."""
    from rubric_core.cli.common import version_row
    from rubric_core.cli.options import build_spec, check_spec
    from rubric_core.workbench.datasets import (
        DatasetError,
        load_dataset,
        load_graded_dataset,
    )

    try:
        graded = _has_outputs(input_file)
        rows = load_graded_dataset(input_file) if graded else None
        inputs = None if graded else load_dataset(input_file)
    except DatasetError as exc:
        raise BadInput(str(exc)) from exc
    if rows is not None:
        from rubric_core.workbench.grade import grade_outputs

        if not spec.rubric_name:
            raise BadInput("--rubric is required to grade a dataset's outputs")
        version = version_row(store, spec.rubric_name, spec.rubric_version)
        grader = spec.grader_model
        if not grader:
            from rubric_core.summary import rubric_criteria

            judged = [c.name for c in rubric_criteria(version["text"], []) if c.check is None]
            if judged:
                raise BadInput(
                    f"rubric {spec.rubric_name!r} has criteria without a code check, which "
                    f"need --grader-model: {'; '.join(judged)}"
                )
        from rubric_core.batch import Grader, GradeRows, Job

        def grade() -> Any:
            judge = Grader(
                grader or CHECKS_GRADER,
                tuple(spec.grader_tools),
                base_url=spec.base_url,
                factory=None if grader else _no_grader,
            )
            work = GradeRows(tuple(rows), int(version["id"]), judge, source=input_file.name)
            return grade_outputs(store, Job(work, concurrency=concurrency))

        summary = _guard(grade)
        return str(summary["batch_id"])
    from rubric_core.batch import Job, RunInputs, run_batch

    assert inputs is not None
    run_spec = build_spec(store, spec, inputs[0])
    check_spec(store, run_spec)
    return _guard(
        lambda: run_batch(store, Job(RunInputs(run_spec, tuple(inputs)), concurrency=concurrency))
    ).batch_id


def _figures(store: Store, reference: str, what: str) -> Figures:
    """A batch id, or an experiment id (all digits), as figures."""
    from rubric_core.report.figures import figures_for

    if reference.isdigit():
        return _guard(lambda: figures_for(store, experiment_id=int(reference)))
    if not reference.strip():
        raise BadInput(f"{what}: give a batch id or an experiment id")
    return _guard(lambda: figures_for(store, batch_id=reference))


@click.command(context_settings=CONTEXT)
@spec_options
@click.option("--batch", "batch_id", default=None, help="Gate a finished batch.")
@click.option("--experiment", "experiment_id", type=int, default=None, help="Gate an experiment.")
@click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run a dataset first: with an 'output' column its outputs are graded (code checks "
    "only without --grader-model), else the agent runs over its inputs.",
)
@click.option("--concurrency", type=int, default=4, show_default=True, help="Runs at once.")
@click.option(
    "--min-satisfied", type=click.FloatRange(0, 1), default=None, help="Lowest satisfied rate."
)
@click.option("--min-score", type=click.FloatRange(0, 1), default=None, help="Lowest mean score.")
@click.option(
    "--min-kappa", type=click.FloatRange(-1, 1), default=None, help="Lowest Cohen's kappa."
)
@click.option(
    "--min-criterion",
    "min_criteria",
    multiple=True,
    metavar="NAME=RATE",
    help='Lowest pass rate of one criterion, as "Cites the date=0.95" (repeatable).',
)
@click.option(
    "--against",
    "baseline",
    default=None,
    metavar="BASELINE",
    help="A stored batch id, or experiment id, to compare with.",
)
@click.option(
    "--max-drop",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="With --against: how far a rate or the mean score may fall below the baseline.",
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the figures and the thresholds' results as one JSON object.",
)
def gate(
    spec: SpecOptions,
    db: str | None,
    batch_id: str | None,
    experiment_id: int | None,
    input_file: Path | None,
    concurrency: int,
    min_satisfied: float | None,
    min_score: float | None,
    min_kappa: float | None,
    min_criteria: tuple[str, ...],
    baseline: str | None,
    max_drop: float,
    junit: Path | None,
    summary: Path | None,
    as_json: bool,
) -> None:
    """Fail (exit 1) when a batch or experiment falls short of its thresholds: for CI.

    Gate a finished --batch or --experiment, or run an --input-file first. --junit writes
    JUnit XML (one test case per input, one per threshold), --summary a Markdown summary
    for a pull-request comment. Exit 0: every threshold met; 1: one fell short; 2: bad input.

    \b
    Example:
        python -m rubric_core gate --input-file outputs.csv --rubric release-notes \\
            --min-satisfied 0.9 --min-criterion "Cites the date=0.95" --junit results.xml
        python -m rubric_core gate --batch batch-1a2b --against batch-0f9e --max-drop 0.02
    """
    from rubric_core.report.gate import (
        gate_checks,
        gate_json,
        junit_xml,
        markdown_summary,
        parse_criterion_minimum,
    )

    sources = [s for s in (batch_id, experiment_id, input_file) if s is not None]
    if len(sources) != 1:
        raise BadInput("give exactly one of --batch, --experiment or --input-file")
    minimums = dict(_guard(lambda: [parse_criterion_minimum(m) for m in min_criteria]))
    if max_drop and baseline is None:
        raise BadInput("--max-drop needs --against BASELINE")
    store = open_store(db)
    try:
        if input_file is not None:
            batch_id = _run_dataset(store, spec, input_file, concurrency)
        from rubric_core.report.figures import figures_for

        figures = _guard(lambda: figures_for(store, batch_id=batch_id, experiment_id=experiment_id))
        before = _figures(store, baseline, "--against") if baseline is not None else None
        checks = _guard(
            lambda: gate_checks(
                figures,
                min_satisfied=min_satisfied,
                min_score=min_score,
                min_kappa=min_kappa,
                min_criterion=minimums,
                baseline=before,
                max_drop=max_drop,
            )
        )
    finally:
        store.close()
    from rubric_core.outputs import open_output

    text = markdown_summary(figures, checks)
    for path, data in ((junit, junit_xml(figures, checks)), (summary, text.encode("utf-8"))):
        if path is not None:
            try:
                with open_output(path, binary=True) as fp:  # a FIFO or `-` too, as `export`
                    fp.write(data)
            except OSError as exc:
                raise BadInput(f"cannot write {path}: {exc.strerror}") from exc
    failed = [c for c in checks if not c.passed]
    if as_json:
        click.echo(json.dumps(gate_json(figures, checks), indent=2, ensure_ascii=False))
        if failed:
            raise click.exceptions.Exit(EXIT_SHORT)
        return
    for check in checks:
        click.echo(f"{'PASS' if check.passed else 'FAIL'} {check.name}: {check.message}")
    click.echo(
        f"{figures.title}: "
        + (f"{len(failed)} of {len(checks)} threshold(s) not met." if failed else "gate passed.")
    )
    if failed:
        raise click.exceptions.Exit(EXIT_SHORT)
