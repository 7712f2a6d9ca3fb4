"""Where the database lives: `$RUBRIC_STUDIO_DB`, or `rubric_studio.db` in the working directory."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DB_ENV_VAR", "DEFAULT_DB_NAME", "default_db_path"]

DB_ENV_VAR = "RUBRIC_STUDIO_DB"
"""Environment variable naming the database file."""

DEFAULT_DB_NAME = "rubric_studio.db"
"""File used (in the working directory) when `$RUBRIC_STUDIO_DB` is unset."""


def default_db_path() -> Path:
    """The database file: `$RUBRIC_STUDIO_DB`, or `./rubric_studio.db`.

    Examples:
        >>> import os
        >>> os.environ["RUBRIC_STUDIO_DB"] = "/tmp/x.db"
        >>> str(default_db_path())
        '/tmp/x.db'
        >>> del os.environ["RUBRIC_STUDIO_DB"]
    """
    value = os.environ.get(DB_ENV_VAR, "").strip()
    return Path(value).expanduser() if value else Path.cwd() / DEFAULT_DB_NAME
