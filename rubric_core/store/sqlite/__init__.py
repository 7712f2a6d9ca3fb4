"""The SQLite backend (sqlite-utils): migrations, the writer and reader connections, the SQL."""

from __future__ import annotations

from rubric_core.store.sqlite.backend import SQLiteBackend
from rubric_core.store.sqlite.migrations import MIGRATIONS

__all__ = ["MIGRATIONS", "SQLiteBackend"]
