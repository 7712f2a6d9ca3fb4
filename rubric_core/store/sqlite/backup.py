"""A consistent copy of a SQLite file while it is in use, through SQLite's online backup API."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from urllib.parse import quote

from rubric_core.outputs import is_stream, output_path, target_of
from rubric_core.store.errors import StoreError

__all__ = ["backup_file"]


def _copy(source: Path, copy_path: Path, busy_timeout_s: float) -> None:
    reader = sqlite3.connect(f"file:{quote(str(source))}?mode=ro", uri=True)
    try:
        reader.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        with contextlib.closing(sqlite3.connect(copy_path)) as copy:
            reader.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")
            ok = copy.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                msg = f"the backup of {source} failed its integrity check: {ok}"
                raise StoreError(msg, kind="io")
    finally:
        reader.close()


def backup_file(
    source: Path, dest: Path, *, busy_timeout_s: float, overwrite: bool = False
) -> Path:
    """Copy the SQLite database `source` to `dest`, one self-contained file.

    `sqlite3.Connection.backup` reads a snapshot of `source` (committed rows, those still in
    its write-ahead log included) while others go on writing to it. The copy is written
    beside `dest`, switched from WAL to a rollback journal (so the one file holds
    everything) and renamed into place, so `dest` is never half written. A symlink is
    followed (its target is written); `-`, a device or a FIFO is written in place
    (`rubric_core.outputs`), and `overwrite` does not apply to it.

    Args:
        source: The database file to copy.
        dest: Where the copy goes; its folder must exist.
        busy_timeout_s: How long to wait for a lock on `source`.
        overwrite: Replace `dest` if it exists (else that is an error).

    Returns:
        `dest`, resolved (`-` for standard output).

    Raises:
        StoreError: `dest` exists (and `overwrite` is false), is `source` itself, or is
            in a folder that does not exist; or `source` cannot be read (`io`).
    """
    stream = is_stream(dest)
    dest = target_of(dest)
    source = source.resolve()
    if dest == source:
        msg = f"the backup {dest} would replace the database itself; give another file name"
        raise StoreError(msg, kind="invalid")
    if dest.is_dir():
        msg = f"backup destination {dest} is a directory; give a file name such as studio-backup.db"
        raise StoreError(msg, kind="invalid")
    if not stream and dest.exists() and not overwrite:
        msg = f"backup destination {dest} already exists; remove it or choose another name"
        raise StoreError(msg, kind="invalid")
    if not stream and not dest.parent.is_dir():
        msg = f"the folder of backup destination {dest} does not exist"
        raise StoreError(msg, kind="invalid")
    try:
        with output_path(dest) as partial:
            try:
                _copy(source, partial, busy_timeout_s)
            finally:
                with contextlib.suppress(OSError):
                    partial.with_name(partial.name + "-journal").unlink()
    except sqlite3.Error as exc:
        msg = f"could not back up {source} to {dest}: {exc}"
        raise StoreError(msg, kind="io") from exc
    except OSError as exc:
        msg = f"could not write the backup {dest}: {exc}"
        raise StoreError(msg, kind="io") from exc
    return dest
