"""The PostgreSQL backend (psycopg 3, psycopg_pool): its migrations and connections; the SQL is shared."""

from __future__ import annotations

from rubric_core.store.postgres.backend import PostgresBackend
from rubric_core.store.postgres.migrations import MIGRATIONS

__all__ = ["MIGRATIONS", "PostgresBackend"]
