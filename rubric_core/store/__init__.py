"""The store: rubrics, runs, grading passes and transcripts behind one `Store` API."""

from __future__ import annotations

from rubric_core.schema import RUN_STATUSES
from rubric_core.store.errors import (
    STORE_ERROR_KINDS,
    STORE_FAULTS,
    StoreError,
    StoreErrorKind,
    StoreInputError,
)
from rubric_core.store.facade import Store
from rubric_core.store.filters import RunFilters
from rubric_core.store.paths import (
    DB_ENV_VAR,
    DEFAULT_DB_NAME,
    default_db_path,
    default_db_target,
    is_postgres_url,
)
from rubric_core.store.queries.runs import NewRun, RunEnd
from rubric_core.store.sqlite.migrations import MIGRATIONS

__all__ = [
    "DB_ENV_VAR",
    "DEFAULT_DB_NAME",
    "MIGRATIONS",
    "RUN_STATUSES",
    "STORE_ERROR_KINDS",
    "STORE_FAULTS",
    "NewRun",
    "RunEnd",
    "RunFilters",
    "Store",
    "StoreError",
    "StoreErrorKind",
    "StoreInputError",
    "default_db_path",
    "default_db_target",
    "is_postgres_url",
]
