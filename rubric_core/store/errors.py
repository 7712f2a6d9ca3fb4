"""The store's one exception, with a `kind` that says what sort of fault it is."""

from __future__ import annotations

import sqlite3
from typing import Literal, get_args

from rubric_core.errors import InputError, RubricStudioError
from rubric_core.schema import quoted

__all__ = [
    "STORE_ERROR_KINDS",
    "STORE_FAULTS",
    "StoreError",
    "StoreErrorKind",
    "StoreInputError",
    "unknown_rubric",
    "unknown_run",
    "unknown_version",
]

StoreErrorKind = Literal[
    "invalid", "locked", "read_only", "missing", "io", "unreachable", "auth", "version"
]
"""What went wrong, so callers choose what to say without reading the message.

- `invalid`: a bad argument: a value that fails validation, an unknown id or name, a
  closed store. Nothing was written; these are also `InputError`s (`ValueError`s).
- `locked`: another writer held the database for longer than the busy timeout.
- `read_only`: the file or its folder cannot be written (read-only, permission denied).
- `missing`: the file was deleted, moved or replaced, or cannot be opened.
- `io`: any other database or disk failure (a file that is not a database, a full disk).
- `unreachable`: the database server does not answer (wrong host or port, server down,
  connection lost mid-run). Nothing after the failed call was written.
- `auth`: the server refused the user name or password.
- `version`: a newer Rubric Studio migrated the database; this version only reads it
  (`store.schema_version`). The message names both schemas.
"""

STORE_ERROR_KINDS: tuple[StoreErrorKind, ...] = get_args(StoreErrorKind)
"""Every `StoreErrorKind`."""


class StoreError(RubricStudioError):
    """The store cannot do what was asked; the message says what and why, `kind` what sort.

    A `StoreError` of kind `invalid` is created as a `StoreInputError`, so it is also a
    `ValueError` and an `InputError`, like every other bad argument in the library.

    Examples:
        >>> error = StoreError("database x.db is locked", kind="locked")
        >>> error.kind, str(error)
        ('locked', 'database x.db is locked')
        >>> isinstance(StoreError("limit must be at least 1", kind="invalid"), ValueError)
        True
    """

    kind: StoreErrorKind

    def __new__(cls, message: str = "", *, kind: StoreErrorKind = "io") -> StoreError:
        if kind == "invalid" and not issubclass(cls, InputError):
            cls = StoreInputError
        return super().__new__(cls, message)

    def __init__(self, message: str = "", *, kind: StoreErrorKind = "io") -> None:
        if kind not in STORE_ERROR_KINDS:
            msg = f"kind must be one of {', '.join(STORE_ERROR_KINDS)}, got {kind!r}"
            raise ValueError(msg)
        super().__init__(message)
        self.kind = kind


class StoreInputError(StoreError, InputError):
    """A `StoreError` of kind `invalid`: the caller's argument, not the database, is wrong."""

    def __init__(self, message: str = "", *, kind: StoreErrorKind = "invalid") -> None:
        if kind != "invalid":
            msg = f"a StoreInputError is of kind 'invalid', got {kind!r}"
            raise ValueError(msg)
        super().__init__(message, kind="invalid")


def unknown_rubric(name: str) -> StoreError:
    """The error for a rubric name no rubric has (the same words from every backend)."""
    return StoreError(f"unknown rubric {quoted(name)}", kind="invalid")


def unknown_version(version_id: int) -> StoreError:
    """The error for a rubric version id that does not exist."""
    return StoreError(f"unknown rubric version id {version_id}", kind="invalid")


def unknown_run(run_id: int) -> StoreError:
    """The error for a run id that does not exist."""
    return StoreError(f"unknown run id {run_id}", kind="invalid")


STORE_FAULTS: tuple[type[BaseException], ...] = (StoreError, sqlite3.Error)
"""What a caller catches around store calls: a `StoreError`, or a raw `sqlite3.Error`
(from a connection of `Store.connect_readonly`), so the UI layer need not import sqlite3."""
