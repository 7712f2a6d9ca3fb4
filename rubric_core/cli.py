"""`python -m rubric_core`: runs, batches, exports and rubrics from a terminal."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rubric_core.schema import STATUS_DESCRIPTIONS

if TYPE_CHECKING:
    from rubric_core.store import Store

_EXIT_OK = 0
_EXIT_NOT_SATISFIED = 1
_EXIT_BAD_INPUT = 2

_EXTRA_STATUS_DESCRIPTIONS = {
    "interrupted": "The run was stopped before it finished; the passes graded so far are kept.",
    "error": "The agent or its model raised an error; the passes graded before it are kept.",
    "running": "The run has not finished yet.",
}

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class BadInput(click.ClickException):
    """A one-line error about the user's input; exit code 2, no traceback."""

    exit_code = _EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def describe_status(status: str) -> str:
    """The one-sentence meaning of a run status."""
    return STATUS_DESCRIPTIONS.get(status) or _EXTRA_STATUS_DESCRIPTIONS.get(status, "")


# --------------------------------------------------------------------------- shared options


def _db_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        envvar="RUBRIC_STUDIO_DB",
        show_envvar=True,
        help="SQLite store file [default: ./rubric_studio.db].",
    )(function)


def _spec_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--rubric", "rubric_name", help="Name of a stored rubric."),
        click.option(
            "--version",
            "rubric_version",
            type=int,
            default=None,
            help="Rubric version number [default: the latest].",
        ),
        click.option(
            "--agent-model",
            default=None,
            help="Agent model: 'provider:model-id', 'replay:<scenario>' or a model at --base-url.",
        ),
        click.option("--grader-model", default=None, help="Grader model (same forms)."),
        click.option(
            "--base-url",
            default=None,
            help="OpenAI-compatible endpoint (vLLM, llama.cpp, LM Studio, Ollama) for both models.",
        ),
        click.option(
            "--grader-tool",
            "grader_tools",
            multiple=True,
            help="A grader tool by name; repeat for several (see `scenarios` for examples).",
        ),
        click.option(
            "--max-iterations",
            type=int,
            default=None,
            help="Grading passes allowed, 1-20 [default: 3].",
        ),
        click.option(
            "--agent-kind",
            type=click.Choice(["basic", "deep"]),
            default=None,
            help="basic: create_agent; deep: create_deep_agent [default: basic].",
        ),
        click.option("--agent-system-prompt", default=None, help="System prompt of the agent."),
        click.option(
            "--grader-system-prompt", default=None, help="Grading instructions for the grader."
        ),
        click.option(
            "--scenario",
            default=None,
            help=(
                "Fill rubric, input, models, tools and agent kind from a bundled replay "
                "scenario (offline demo); other options override it."
            ),
        ),
        _db_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


# --------------------------------------------------------------------------- helpers


def _open_store(db: Path | None) -> Store:
    from rubric_core.store import Store, StoreError

    try:
        return Store(db)
    except StoreError as exc:
        raise BadInput(f"cannot open the store {db}: {exc}") from exc


def _version_row(store: Store, name: str, version: int | None) -> dict[str, Any]:
    from rubric_core.store import StoreError

    try:
        versions = store.rubric_versions(name)
    except StoreError:
        versions = []
    if not versions:
        known = ", ".join(r["name"] for r in store.list_rubrics()) or "none yet"
        raise BadInput(
            f"no rubric named {name!r} (stored rubrics: {known}); add one with `rubrics add`"
        )
    if version is None:
        return versions[-1]
    for row in versions:
        if row["version"] == version:
            return row
    numbers = ", ".join(str(row["version"]) for row in versions)
    raise BadInput(f"rubric {name!r} has no version {version} (versions: {numbers})")


def _read_text(path: Path, what: str) -> str:
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror}") from exc
    if b"\x00" in data[:8192]:
        raise BadInput(f"{what} {path} looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from exc


def _scenario(name: str) -> dict[str, Any]:
    from rubric_core.models import ModelError, load_scenario

    try:
        return load_scenario(name)
    except ModelError as exc:
        raise BadInput(str(exc)) from exc


def _build_spec(
    store: Store,
    *,
    rubric_name: str | None,
    rubric_version: int | None,
    input_text: str,
    agent_model: str | None,
    grader_model: str | None,
    base_url: str | None,
    grader_tools: tuple[str, ...],
    max_iterations: int | None,
    agent_kind: str | None,
    agent_system_prompt: str | None,
    grader_system_prompt: str | None,
    scenario: str | None,
) -> Any:
    from rubric_core.runner import RunSpec

    if scenario:
        data = _scenario(scenario)
        if rubric_name is None:
            rubric_name = f"scenario-{scenario}"
            try:
                store.save_rubric_version(
                    rubric_name, data["rubric"], tags=["scenario"], note="bundled scenario"
                )
            except Exception as exc:
                raise BadInput(f"scenario {scenario!r}: {exc}") from exc
        agent_model = agent_model or f"replay:{scenario}"
        grader_model = grader_model or f"replay:{scenario}"
        grader_tools = grader_tools or tuple(data.get("grader_tools") or ())
        agent_kind = agent_kind or data.get("agent_kind") or "basic"
        if max_iterations is None:
            max_iterations = data.get("max_iterations")
    if not rubric_name:
        raise BadInput("--rubric is required (or --scenario for an offline demo)")
    version = _version_row(store, rubric_name, rubric_version)
    if agent_model is None or grader_model is None:
        from rubric_core.models import default_models

        default_agent, default_grader = default_models()
        agent_model = agent_model or default_agent
        grader_model = grader_model or default_grader
    return RunSpec(
        rubric_version_id=version["id"],
        input=input_text,
        agent_model=agent_model,
        grader_model=grader_model,
        grader_tools=tuple(grader_tools),
        max_iterations=3 if max_iterations is None else max_iterations,
        agent_kind=agent_kind or "basic",
        agent_system_prompt=agent_system_prompt,
        grader_system_prompt=grader_system_prompt,
        base_url=base_url,
    )


def _validate(store: Store, spec: Any) -> None:
    from rubric_core.runner import SpecError, validate_spec

    try:
        validate_spec(spec, store)
    except SpecError as exc:
        raise BadInput(str(exc)) from exc


def _format_pass(evaluation: dict[str, Any]) -> str:
    lines = [
        f"Pass {int(evaluation['iteration']) + 1}: {evaluation['result']}"
        + (
            f" -> {evaluation['status']}"
            if evaluation.get("status") and evaluation["status"] != evaluation["result"]
            else ""
        )
    ]
    for criterion in evaluation.get("criteria") or []:
        mark = "✓" if criterion.get("passed") else "✗"
        line = f"  {mark} {criterion['name']}"
        if not criterion.get("passed") and criterion.get("gap"):
            line += f" — {criterion['gap']}"
        lines.append(line)
    explanation = (evaluation.get("explanation") or "").strip()
    if explanation:
        lines.append(f"  {explanation}")
    return "\n".join(lines)


def _iso(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadInput(
            f"{option} {value!r} is not a date; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"
        ) from exc
    return value


# --------------------------------------------------------------------------- commands


@click.group(context_settings=_CONTEXT)
def cli() -> None:
    """Rubric Studio: make an agent iterate until a rubric is met.

    A grader model checks the agent's answer against every criterion of a rubric; failing
    criteria go back to the agent until the rubric is satisfied or a limit is hit.
    Everything is recorded in a SQLite store that the dashboard reads.

    \b
    Example:
        python -m rubric_core scenarios
        python -m rubric_core run --scenario haiku
        python -m rubric_core rubrics add haiku rubric.txt --tag poetry
        python -m rubric_core run --rubric haiku --input "Write a haiku about rain"
    """


@cli.command(context_settings=_CONTEXT)
@_spec_options
@click.option("--input", "input_text", default=None, help="The request to the agent.")
@click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default=None,
    help="Read the request from a file ('-' for stdin).",
)
@click.option("--quiet", is_flag=True, help="Print only the final status line.")
def run(
    rubric_name: str | None,
    rubric_version: int | None,
    agent_model: str | None,
    grader_model: str | None,
    base_url: str | None,
    grader_tools: tuple[str, ...],
    max_iterations: int | None,
    agent_kind: str | None,
    agent_system_prompt: str | None,
    grader_system_prompt: str | None,
    scenario: str | None,
    db: Path | None,
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
    from rubric_core.runner import SpecError, start_run

    status = "error"
    if input_text is not None and input_file is not None:
        raise BadInput("give --input or --input-file, not both")
    if input_file is not None:
        input_text = _read_text(input_file, "input file")
    if input_text is None and scenario:
        input_text = _scenario(scenario).get("input")
    if input_text is None:
        raise BadInput("--input or --input-file is required")
    store = _open_store(db)
    try:
        spec = _build_spec(
            store,
            rubric_name=rubric_name,
            rubric_version=rubric_version,
            input_text=input_text,
            agent_model=agent_model,
            grader_model=grader_model,
            base_url=base_url,
            grader_tools=grader_tools,
            max_iterations=max_iterations,
            agent_kind=agent_kind,
            agent_system_prompt=agent_system_prompt,
            grader_system_prompt=grader_system_prompt,
            scenario=scenario,
        )
        _validate(store, spec)
        version = store.get_rubric_version(spec.rubric_version_id)

        def launch(show: Callable[[dict[str, Any]], None]) -> Any:
            try:
                return start_run(store, spec, on_evaluation=show)
            except SpecError as exc:
                raise BadInput(str(exc)) from exc

        status = _watch(
            store,
            launch,
            quiet=quiet,
            header=lambda run_id: (
                f"Run {run_id}: rubric {version['name']!r} v{version['version']}, "
                f"agent {spec.agent_model}, grader {spec.grader_model}"
            ),
        )
    finally:
        store.close()
    sys.exit(_EXIT_OK if status == "satisfied" else _EXIT_NOT_SATISFIED)


def _watch(
    store: Store,
    launch: Callable[[Callable[[dict[str, Any]], None]], Any],
    *,
    quiet: bool,
    header: Callable[[int], str],
) -> str:
    """Start a run with `launch(show)`, print each pass as it is graded, return the status.

    Ctrl-C asks the run to stop (it ends `interrupted`, its graded passes kept).
    """
    header_shown = threading.Event()

    def show(evaluation: dict[str, Any]) -> None:
        if quiet:
            return
        header_shown.wait(5)  # the run thread may grade before the header is printed
        click.echo(_format_pass(evaluation))

    handle = launch(show)
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
    row = store.get_run(handle.run_id)
    status = row["status"]
    if not quiet and row.get("final_output"):
        click.echo("\nFinal answer:\n" + row["final_output"].rstrip() + "\n")
    click.echo(f"Status: {status} — {describe_status(status)}")
    if row.get("error"):
        click.echo(f"Error: {row['error']}", err=True)
    return status


@cli.command(context_settings=_CONTEXT)
@click.argument("run_id", type=int)
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint (not stored with runs).")
@click.option("--quiet", is_flag=True, help="Print only the final status line.")
@_db_option
def resume(run_id: int, base_url: str | None, quiet: bool, db: Path | None) -> None:
    """Resume an interrupted run from its last checkpoint; the same grading run goes on.

    Exit codes as for `run`.

    \b
    Example:
        python -m rubric_core resume 42
    """
    from rubric_core.runner import SpecError, resume_run
    from rubric_core.store import StoreError

    store = _open_store(db)
    try:

        def launch(show: Callable[[dict[str, Any]], None]) -> Any:
            try:
                return resume_run(store, run_id, base_url=base_url, on_evaluation=show)
            except SpecError as exc:
                raise BadInput(str(exc)) from exc

        try:
            done = len(store.run_evaluations(run_id))
        except StoreError as exc:
            raise BadInput(f"no run with id {run_id}") from exc
        status = _watch(
            store,
            launch,
            quiet=quiet,
            header=lambda rid: f"Resuming run {rid} after {done} graded pass(es)",
        )
    finally:
        store.close()
    sys.exit(_EXIT_OK if status == "satisfied" else _EXIT_NOT_SATISFIED)


def format_summary(summary: Any) -> str:
    """A batch summary as terminal text."""
    from rubric_core.runner import format_rate

    lines = [f"Batch {summary.batch_id}: {summary.total} run{'' if summary.total == 1 else 's'}"]
    if summary.by_status:
        lines.append("  by status: " + ", ".join(f"{k} {v}" for k, v in summary.by_status.items()))
    lines.append(f"Satisfied rate: {format_rate(summary.satisfied_rate)}")
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
    lines.append("Per-criterion pass rates:")
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


@cli.command(context_settings=_CONTEXT)
@_spec_options
@click.option(
    "--input-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Dataset: CSV with an 'input' column (or one column), or JSONL of {\"input\": ...}.",
)
@click.option("--concurrency", type=int, default=4, show_default=True, help="Runs at once (1-16).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def batch(
    rubric_name: str | None,
    rubric_version: int | None,
    agent_model: str | None,
    grader_model: str | None,
    base_url: str | None,
    grader_tools: tuple[str, ...],
    max_iterations: int | None,
    agent_kind: str | None,
    agent_system_prompt: str | None,
    grader_system_prompt: str | None,
    scenario: str | None,
    db: Path | None,
    input_file: Path,
    concurrency: int,
    as_json: bool,
) -> None:
    """Run one rubric version over every input of a dataset and summarise.

    A progress bar goes to stderr; the summary (satisfied rate, mean iterations to
    satisfied, per-criterion pass rates, grader errors) to stdout. Exit code 0 when
    every run finished, 1 if any ended in error or the batch was stopped, 2 for bad input.

    \b
    Example:
        python -m rubric_core batch --rubric haiku --input-file prompts.csv \\
            --agent-model openai:gpt-4o-mini --grader-model openai:gpt-4o-mini \\
            --grader-tool count_syllables --concurrency 8
        python -m rubric_core batch --scenario haiku --input-file prompts.jsonl
    """
    from tqdm import tqdm

    from rubric_core.runner import DatasetError, SpecError, load_dataset, run_batch

    try:
        inputs = load_dataset(input_file)
    except DatasetError as exc:
        raise BadInput(str(exc)) from exc
    if not 1 <= concurrency <= 16:
        raise BadInput(f"--concurrency must be between 1 and 16, got {concurrency}")
    store = _open_store(db)
    stop = threading.Event()
    try:
        spec = _build_spec(
            store,
            rubric_name=rubric_name,
            rubric_version=rubric_version,
            input_text=inputs[0],
            agent_model=agent_model,
            grader_model=grader_model,
            base_url=base_url,
            grader_tools=grader_tools,
            max_iterations=max_iterations,
            agent_kind=agent_kind,
            agent_system_prompt=agent_system_prompt,
            grader_system_prompt=grader_system_prompt,
            scenario=scenario,
        )
        _validate(store, spec)
        bar = tqdm(total=len(inputs), unit="run", file=sys.stderr, desc="batch")

        def progress(done: int, total: int, row: dict[str, Any]) -> None:
            bar.update(1)
            bar.set_postfix_str(row.get("status", ""), refresh=False)

        result: dict[str, Any] = {}

        def work() -> None:
            try:
                result["summary"] = run_batch(
                    store,
                    spec,
                    inputs,
                    concurrency=concurrency,
                    progress=progress,
                    stop_event=stop,
                )
            except BaseException as exc:
                result["error"] = exc

        worker = threading.Thread(target=work, name="rubric-batch", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except KeyboardInterrupt:
            click.echo("\nStopping the batch...", err=True)
            stop.set()
            worker.join()
        bar.close()
        if "error" in result:
            exc = result["error"]
            if isinstance(exc, SpecError):
                raise BadInput(str(exc)) from exc
            raise exc
        summary = result["summary"]
        if as_json:
            click.echo(json.dumps(summary.as_dict(), indent=2, ensure_ascii=False))
        else:
            click.echo(format_summary(summary))
    finally:
        store.close()
    failed = stop.is_set() or summary.by_status.get("error", 0) > 0
    sys.exit(_EXIT_NOT_SATISFIED if failed else _EXIT_OK)


@cli.command(context_settings=_CONTEXT)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default="csv",
    show_default=True,
    help="File format.",
)
@click.option(
    "--dataset",
    type=click.Choice(["criteria", "runs"]),
    default="criteria",
    show_default=True,
    help="criteria: one row per criterion per pass; runs: one row per run.",
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
@click.option("--status", default=None, help="Only runs with this final status.")
@click.option("--since", default=None, help="Only runs started at or after (YYYY-MM-DD[THH:MM]).")
@click.option("--until", default=None, help="Only runs started before (YYYY-MM-DD[THH:MM]).")
@_db_option
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
    db: Path | None,
) -> None:
    """Export stored evaluations as CSV or JSONL, streamed row by row.

    Cells a spreadsheet would run as a formula are neutralised.

    \b
    Example:
        python -m rubric_core export --format csv --output evals.csv
        python -m rubric_core export --dataset runs --format jsonl --rubric haiku \\
            --status satisfied --since 2025-01-01 --output runs.jsonl
    """
    from rubric_core import export as exporter
    from rubric_core.store import StoreError

    known_statuses = set(STATUS_DESCRIPTIONS) | set(_EXTRA_STATUS_DESCRIPTIONS)
    if status is not None and status not in known_statuses:
        raise BadInput(
            f"--status {status!r} is not a status; use one of {', '.join(sorted(known_statuses))}"
        )
    if rubric_version is not None and rubric_name is None:
        raise BadInput("--version needs --rubric")
    filters: dict[str, Any] = {
        "model": model,
        "status": status,
        "since": _iso(since, "--since"),
        "until": _iso(until, "--until"),
    }
    store = _open_store(db)
    try:
        if rubric_name is not None:
            if rubric_version is not None:
                filters["version_id"] = _version_row(store, rubric_name, rubric_version)["id"]
            else:
                _version_row(store, rubric_name, None)
                filters["rubric"] = rubric_name
        filters = {k: v for k, v in filters.items() if v is not None}
        try:
            if str(output) == "-":
                stream = sys.stdout
                writer = exporter.write_csv if fmt == "csv" else exporter.write_jsonl
                writer(store, stream, dataset=dataset, **filters)
                stream.flush()
            else:
                count = exporter.export_file(store, output, fmt=fmt, dataset=dataset, **filters)
                click.echo(f"Wrote {count} rows to {output}", err=True)
        except StoreError as exc:
            raise BadInput(str(exc)) from exc
        except OSError as exc:
            raise BadInput(f"cannot write {output}: {exc.strerror or exc}") from exc
    finally:
        store.close()


@cli.group(context_settings=_CONTEXT)
def rubrics() -> None:
    """List, add and show rubrics (named, immutable versions).

    \b
    Example:
        python -m rubric_core rubrics list
        python -m rubric_core rubrics add haiku rubric.txt --tag poetry
        python -m rubric_core rubrics show haiku --version 1
    """


@rubrics.command("list", context_settings=_CONTEXT)
@_db_option
def rubrics_list(db: Path | None) -> None:
    """List stored rubrics with their latest version and tags.

    \b
    Example:
        python -m rubric_core rubrics list --db studio.db
    """
    store = _open_store(db)
    try:
        rows = store.list_rubrics()
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


@rubrics.command("add", context_settings=_CONTEXT)
@click.argument("name")
@click.argument(
    "file",
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    default="-",
)
@click.option("--tag", "tags", multiple=True, help="A tag for the rubric; repeat for several.")
@click.option("--note", default="", help="What changed in this version.")
@_db_option
def rubrics_add(name: str, file: Path, tags: tuple[str, ...], note: str, db: Path | None) -> None:
    """Add a version of rubric NAME from FILE (or stdin): one criterion per line.

    Saving text identical to the latest version keeps that version.

    \b
    Example:
        python -m rubric_core rubrics add haiku rubric.txt --tag poetry --note "5/7/5"
        printf -- "- three lines\\n- mentions rain\\n" | python -m rubric_core rubrics add rain
    """
    from rubric_core.rubric import RubricError
    from rubric_core.store import StoreError

    text = _read_text(file, "rubric file")
    store = _open_store(db)
    try:
        try:
            row = store.save_rubric_version(name, text, tags=list(tags) or None, note=note)
        except (RubricError, StoreError, ValueError) as exc:
            raise BadInput(f"rubric {name!r}: {exc}") from exc
    finally:
        store.close()
    click.echo(
        f"Rubric {row['name']!r} version {row['version']} (id {row['id']}), "
        f"{len(row['criteria'])} criteria."
    )


@rubrics.command("show", context_settings=_CONTEXT)
@click.argument("name")
@click.option("--version", "rubric_version", type=int, default=None, help="[default: latest]")
@_db_option
def rubrics_show(name: str, rubric_version: int | None, db: Path | None) -> None:
    """Show a rubric version's text and parsed criteria.

    \b
    Example:
        python -m rubric_core rubrics show haiku --version 2
    """
    store = _open_store(db)
    try:
        row = _version_row(store, name, rubric_version)
    finally:
        store.close()
    click.echo(f"{row['name']} v{row['version']} (id {row['id']}, {row['created_at']})")
    if row.get("note"):
        click.echo(f"Note: {row['note']}")
    click.echo("Criteria:")
    for index, criterion in enumerate(row["criteria"], start=1):
        click.echo(f"  {index}. {criterion}")


@cli.command(context_settings=_CONTEXT)
def scenarios() -> None:
    """List the bundled replay scenarios (offline demo models, `replay:<name>`).

    \b
    Example:
        python -m rubric_core scenarios
        python -m rubric_core run --scenario find_duplicates
    """
    from rubric_core.models import list_scenarios

    rows = list_scenarios()
    width = max((len(row["name"]) for row in rows), default=4)
    for row in rows:
        tools = ", ".join(row.get("grader_tools") or []) or "-"
        click.echo(
            f"{row['name']:<{width}}  ends {row.get('expected_status', '?'):<22}  "
            f"tools: {tools}\n{'':<{width}}  {row.get('title') or row.get('description', '')}"
        )


def main() -> None:
    """Entry point of `python -m rubric_core`."""
    cli(prog_name="python -m rubric_core")
