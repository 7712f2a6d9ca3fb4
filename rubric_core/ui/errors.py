"""What went wrong with the database (a file, or a PostgreSQL server), said so that a person can fix it."""

from __future__ import annotations

import os

from rubric_core.store import STORE_FAULTS, StoreError
from rubric_core.store.paths import redact_url

__all__ = ["STORE_ERRORS", "database_label", "store_error_message"]

STORE_ERRORS: tuple[type[BaseException], ...] = STORE_FAULTS
"""What a page catches around store calls: shown with `store_error_message`, never as a traceback."""


def database_label(target: str) -> str:
    """A database as the pages name it: a file path as it is, a URL with its password as ***.

    Examples:
        >>> database_label("studio.db")
        'studio.db'
    """
    return redact_url(target)


_WORDS_BY_KIND: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read_only", ("readonly", "read-only", "permission denied")),
    ("locked", ("locked", "busy")),
    ("missing", ("no such file", "deleted", "does not exist", "unable to open", "disk i/o")),
)


def _kind(exc: BaseException) -> str:
    """The fault's kind: `StoreError.kind`, or read from the text of a raw sqlite3/OS error."""
    if isinstance(exc, StoreError):
        return exc.kind
    lowered = f"{type(exc).__name__}: {exc}".lower()
    return next(
        (kind for kind, words in _WORDS_BY_KIND if any(word in lowered for word in words)), "io"
    )


def store_error_message(exc: BaseException, path: str | os.PathLike[str]) -> str:
    """Say what went wrong with the database file and what to do about it.

    Covers the faults a person can fix: a read-only file or folder, a file locked
    by another writer, a file deleted or moved while the dashboard is open, a
    PostgreSQL server that does not answer or refuses the login.

    Args:
        exc: A `StoreError` (its `kind` picks the message) or a raw sqlite3/OS error.
        path: The database file or redacted URL, named in the message.

    Examples:
        >>> store_error_message(OSError("attempt to write a readonly database"), "x.db")[:40]
        'The database x.db is read-only, so nothi'
    """
    text = f"{type(exc).__name__}: {exc}"
    kind = _kind(exc)
    if kind == "unreachable":
        return (
            f"The database server of {path} does not answer ({exc}). Start PostgreSQL or "
            "check the host and port in RUBRIC_STUDIO_DB, then press Reopen. Passes "
            "stored before the connection was lost are kept; a run whose pass could not "
            "be stored ends with an error saying so."
        )
    if kind == "auth":
        return (
            f"The database server of {path} refused the login ({exc}). Fix the user name "
            "or password in RUBRIC_STUDIO_DB, then restart the dashboard."
        )
    if kind == "read_only":
        return (
            f"The database {path} is read-only, so nothing can be saved ({text}). "
            "Make the file and its folder writable (e.g. chmod u+w), or set RUBRIC_STUDIO_DB "
            "to a writable path, then reload the page. Stored runs are unchanged."
        )
    if kind == "locked":
        return (
            f"The database {path} is locked by another process ({text}). Wait for that "
            "writer (another dashboard, CLI or batch) to finish, or stop it, then retry. "
            "Nothing stored was lost."
        )
    if kind == "version":
        return (
            f"The database {path} was migrated by a newer Rubric Studio ({exc}). Runs and "
            "rubrics can be browsed, but nothing can be saved until this installation is "
            "upgraded. Stored runs are unchanged."
        )
    if kind == "missing":
        return (
            f"The database {path} cannot be opened: it was deleted or moved while the "
            f"dashboard was open ({text}). Put the file back, or start a new empty "
            "database at that path, then reload the page."
        )
    return (
        f"The database {path} failed: {text}. Check the file (disk space, permissions), "
        "then reload the page; stored rows are kept."
    )
