"""Where the database lives: `$RUBRIC_STUDIO_DB` (a file path or a `postgresql://` URL), or
`rubric_studio.db` in the working directory."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from rubric_core import config

__all__ = [
    "DB_ENV_VAR",
    "DEFAULT_DB_NAME",
    "POSTGRES_SCHEMES",
    "default_db_path",
    "default_db_target",
    "is_postgres_url",
    "redact_url",
]

DB_ENV_VAR = "RUBRIC_STUDIO_DB"
"""Environment variable naming the database: a file path, or a `postgresql://` URL."""

DEFAULT_DB_NAME = "rubric_studio.db"
"""File used (in the working directory) when `$RUBRIC_STUDIO_DB` is unset."""

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that select the PostgreSQL backend; anything else is a SQLite file path."""


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether `target` names a PostgreSQL database rather than a SQLite file.

    Examples:
        >>> is_postgres_url("postgresql://u@db:5432/studio"), is_postgres_url("studio.db")
        (True, False)
    """
    return isinstance(target, str) and target.strip().lower().startswith(POSTGRES_SCHEMES)


def redact_url(url: str) -> str:
    """`url` with its password replaced by `***`, for messages and logs.

    Examples:
        >>> redact_url("postgresql://rubric:s3cret@127.0.0.1:5432/studio")
        'postgresql://rubric:***@127.0.0.1:5432/studio'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def default_db_target() -> str | Path:
    """`$RUBRIC_STUDIO_DB` as a URL (PostgreSQL) or a path (SQLite), else `./rubric_studio.db`."""
    value = config.text(DB_ENV_VAR)
    if is_postgres_url(value):
        return value
    return Path(value).expanduser() if value else Path.cwd() / DEFAULT_DB_NAME


def default_db_path() -> Path:
    """The database file: `$RUBRIC_STUDIO_DB`, or `./rubric_studio.db` (SQLite only).

    Examples:
        >>> import os
        >>> os.environ["RUBRIC_STUDIO_DB"] = "/tmp/x.db"
        >>> str(default_db_path())
        '/tmp/x.db'
        >>> del os.environ["RUBRIC_STUDIO_DB"]
    """
    value = config.text(DB_ENV_VAR)
    return Path(value).expanduser() if value else Path.cwd() / DEFAULT_DB_NAME
