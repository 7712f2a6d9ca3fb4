"""`python -m rubric_core config`: every environment variable, its value, default and meaning."""

from __future__ import annotations

import json

import click

from rubric_core.cli.common import CONTEXT


@click.command("config", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per variable.")
def config_command(as_json: bool) -> None:
    """List every environment variable Rubric Studio reads: its current value (secrets
    masked), its default and what it means.

    \b
    Example:
        python -m rubric_core config
        python -m rubric_core config --json
    """
    from rubric_core import config

    rows = config.describe()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        value = row["value"] or "(unset)"
        default = f" (when unset: {row['default']})" if row["default"] else ""
        click.echo(f"{row['name']:<{width}}  {value}{default}\n{'':<{width}}  {row['meaning']}")
