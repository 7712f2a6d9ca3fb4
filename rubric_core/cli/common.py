"""What every command shares: exit codes, the one-line input error, the store, rubric lookups."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rubric_core.limits import cut_text, quoted

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "CONTEXT",
    "EXIT_BAD_INPUT",
    "EXIT_NOT_SATISFIED",
    "EXIT_OK",
    "BadInput",
    "StoreFailure",
    "iso_date",
    "load_scenario",
    "open_store",
    "read_text",
    "version_row",
]

EXIT_OK = 0
"""The rubric was satisfied (or the command did what it was asked)."""

EXIT_NOT_SATISFIED = 1
"""The run ended in any other status, or a batch run failed or was stopped."""

EXIT_BAD_INPUT = 2
"""The input was unusable; nothing ran."""

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
"""click context settings of every command."""


_MAX_ERROR_LINE = 2_000
"""Most characters of one `Error:` line (a message quoting a huge input is cut, marked)."""


class BadInput(click.ClickException):
    """A one-line error about the user's input; exit code 2, no traceback."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        """Print `Error: <message>` to stderr."""
        click.echo(f"Error: {cut_text(self.format_message(), _MAX_ERROR_LINE)}", err=True)


class StoreFailure(click.ClickException):
    """The store failed mid-command (a lock, a full disk, a deleted file, a newer schema):
    one `Error:` line naming the fault, exit code 1, no traceback."""

    exit_code = EXIT_NOT_SATISFIED

    def show(self, file: Any = None) -> None:
        """Print `Error: <message>` to stderr."""
        click.echo(f"Error: {cut_text(self.format_message(), _MAX_ERROR_LINE)}", err=True)


def open_store(db: str | Path | None) -> Store:
    """The store at `db` (a file or a `postgresql://` URL; the default when None).

    Raises:
        BadInput: The database cannot be opened as a store.
    """
    from rubric_core.store import Store, StoreError
    from rubric_core.store.paths import default_db_target, redact_url

    try:
        return Store(db)
    except StoreError as exc:
        shown = redact_url(str(db if db is not None else default_db_target()))
        raise BadInput(f"cannot open the store {shown}: {exc}") from exc


def version_row(store: Store, name: str, version: int | None) -> dict[str, Any]:
    """Rubric `name` at `version` (the latest when `None`).

    Raises:
        BadInput: No such rubric, or no such version of it; the message lists what exists.
    """
    from rubric_core.store import StoreError

    try:
        versions = store.rubrics.versions(name)
    except StoreError:
        versions = []
    if not versions:
        known = ", ".join(r["name"] for r in store.rubrics.find()) or "none yet"
        raise BadInput(
            f"no rubric named {name!r} (stored rubrics: {known}); add one with `rubrics add`"
        )
    if version is None:
        return versions[-1]
    for row in versions:
        if row["version"] == version:
            return row
    numbers = ", ".join(str(row["version"]) for row in versions)
    raise BadInput(f"rubric {quoted(name)} has no version {version} (versions: {numbers})")


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of `path` (`-` for stdin).

    Raises:
        BadInput: The file cannot be read, is binary, or is not UTF-8.
    """
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


def load_scenario(name: str) -> dict[str, Any]:
    """A bundled replay scenario.

    Raises:
        BadInput: No scenario has that name (the message lists the known ones).
    """
    from rubric_core.providers import ModelSpecError
    from rubric_core.providers import load_scenario as load

    try:
        return load(name)
    except ModelSpecError as exc:
        raise BadInput(str(exc)) from exc


def iso_date(value: str | None, option: str) -> str | None:
    """`value` unchanged if it is an ISO date or date-time, `None` for none.

    Raises:
        BadInput: Naming `option` and the accepted forms.

    Examples:
        >>> iso_date("2025-01-02", "--since")
        '2025-01-02'
    """
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadInput(
            f"{option} {value!r} is not a date; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"
        ) from exc
    return value
