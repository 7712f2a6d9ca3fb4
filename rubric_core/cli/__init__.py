"""`python -m rubric_core`: runs, batches, exports and rubrics from a terminal.

Modules: `common` (exit codes, the one-line errors, store and rubric lookups),
`options` (the option set `run` and `batch` share and the `RunSpec` it builds),
`running` (`run`, `resume`, `batch`), `data` (`export`, `rubrics`, `scenarios`),
`workbench` (`grade`, `regrade`, `label`, `agreement`: testing a rubric), `backup`,
`settings` (`config`: every environment variable read), `results` (`report`, `gate`).
"""

from __future__ import annotations

import click

from rubric_core.cli.backup import backup
from rubric_core.cli.common import CONTEXT, BadInput, StoreFailure
from rubric_core.cli.data import export, rubrics, scenarios
from rubric_core.cli.results import gate, report
from rubric_core.cli.running import batch, format_summary, resume, run
from rubric_core.cli.settings import config_command
from rubric_core.cli.workbench import agreement, grade, label, regrade
from rubric_core.extras import MissingExtra

__all__ = ["cli", "format_summary", "main"]


class _Commands(click.Group):
    """The command group; a store failure mid-command ends in one `Error:` line, exit 1, and
    a feature whose extra is not installed in one naming the extra, exit 2."""

    def invoke(self, ctx: click.Context) -> object:
        from rubric_core.store import StoreError

        try:
            return super().invoke(ctx)
        except StoreError as exc:
            raise StoreFailure(str(exc)) from exc
        except MissingExtra as exc:
            raise BadInput(str(exc)) from exc


@click.group(cls=_Commands, context_settings=CONTEXT)
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
        python -m rubric_core grade --input-file outputs.csv --rubric haiku --grader MODEL
        python -m rubric_core agreement --json
    """


for _command in (
    run,
    resume,
    batch,
    export,
    rubrics,
    scenarios,
    grade,
    regrade,
    label,
    agreement,
    backup,
    config_command,
    report,
    gate,
):
    cli.add_command(_command)


def main() -> None:
    """Entry point of `python -m rubric_core`."""
    cli(prog_name="python -m rubric_core")
