"""`backup`: a consistent single-file copy of a SQLite store (and its checkpoints) while in use."""

from __future__ import annotations

from pathlib import Path

import click

from rubric_core.cli.common import CONTEXT, BadInput, open_store
from rubric_core.cli.options import db_option

__all__ = ["backup"]


@click.command(context_settings=CONTEXT)
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--overwrite", is_flag=True, help="Replace DEST if it exists.")
@db_option
def backup(dest: Path, overwrite: bool, db: str | None) -> None:
    """Copy the SQLite store to DEST, one self-contained file, while runs go on.

    Uses SQLite's online backup API: the copy holds every committed pass, including
    those still in the write-ahead log, which copying the .db file alone would miss.
    The run checkpoints (`<db>.checkpoints.sqlite`, what `resume` continues from) are
    copied beside DEST as `DEST.checkpoints.sqlite`. Open the copy with `--db DEST`.
    A PostgreSQL store is backed up with `pg_dump` instead. DEST may be a symlink (its
    target is written), `-` (standard output), a device or a FIFO (written in place, and
    then the checkpoints are not copied).

    \b
    Example:
        python -m rubric_core backup backups/studio-2025-06-01.db
        python -m rubric_core backup /mnt/backup/studio.db --db data/studio.db --overwrite
    """
    from rubric_core.outputs import is_stream
    from rubric_core.runs.checkpoints import checkpoint_path
    from rubric_core.store import StoreError
    from rubric_core.store.sqlite.backup import backup_file

    stream = is_stream(dest)
    store = open_store(db)
    try:
        written = store.backup(dest, overwrite=overwrite)
        click.echo(f"Backed up {store.url} to {written}", err=stream)
        checkpoints = Path(checkpoint_path(store))
        if checkpoints.exists() and stream:
            click.echo(
                f"Its run checkpoints ({checkpoints}) were not copied: DEST is not a file; "
                "back them up with `backup FILE` to a file",
                err=True,
            )
        elif checkpoints.exists():
            copied = backup_file(
                checkpoints,
                Path(f"{written}.checkpoints.sqlite"),
                busy_timeout_s=store.busy_timeout_s,
                overwrite=overwrite,
            )
            click.echo(f"Backed up its run checkpoints to {copied}")
    except StoreError as exc:
        raise BadInput(str(exc)) from exc
    finally:
        store.close()
