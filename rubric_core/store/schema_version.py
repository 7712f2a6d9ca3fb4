"""A database migrated by a newer Rubric Studio: this one reads it and refuses to write to it.

Each backend records the schema steps applied to a database by name. A name this version
does not know means a newer version migrated the database: its tables may hold columns
or rules this version would break (a row written without a column the newer version
requires, a status it does not know), so the store opens it read-only. Every read works
as before; every write raises a `StoreError` of kind `version` that names both schemas.
Opening such a store applies no migration and marks no run interrupted.
"""

from __future__ import annotations

from collections.abc import Iterable

from rubric_core.store.errors import StoreError

__all__ = ["RETIRED_STEP_NAMES", "newer_schema_refusal", "write_refused"]

RETIRED_STEP_NAMES = frozenset({"0006_insufficient_judges_labels_experiments"})
"""Names earlier builds applied under which a known step now has another name (the
workbench's tables were `0006_...` in early builds, now `0007_...`)."""


def newer_schema_refusal(where: str, applied: Iterable[str], known: Iterable[str]) -> str | None:
    """Why the database at `where` must not be written, or None when this version knows its schema.

    Examples:
        >>> newer_schema_refusal("x.db", ["0001_a", "0002_b"], ["0001_a", "0002_b"]) is None
        True
        >>> print(newer_schema_refusal("x.db", ["0001_a", "0003_c"], ["0001_a", "0002_b"]))
        database x.db was migrated by a newer Rubric Studio: its schema is at 0003_c, and this version knows the schema up to 0002_b. It is open read-only: reading works, writing is refused so that the newer schema is not damaged. Upgrade rubric_core to write to it.
    """
    known_names = set(known)
    unknown = sorted(set(applied) - known_names - RETIRED_STEP_NAMES)
    if not unknown:
        return None
    return (
        f"database {where} was migrated by a newer Rubric Studio: its schema is at "
        f"{unknown[-1]}, and this version knows the schema up to {max(known_names)}. It is "
        "open read-only: reading works, writing is refused so that the newer schema is "
        "not damaged. Upgrade rubric_core to write to it."
    )


def write_refused(reason: str) -> StoreError:
    """The error every write to a newer database raises."""
    return StoreError(reason, kind="version")
