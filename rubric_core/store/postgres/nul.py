"""NUL characters in PostgreSQL text: escaped reversibly on the way in, restored on the way out.

PostgreSQL `text` cannot hold U+0000 (SQLite can, and keeps it as it is), yet an agent's
answer, a tool's output or a grader's explanation may contain one. Every string bound to a
statement is escaped and every string read back is restored, so callers of either backend
get the text they stored. The escape character is U+FDD0, one of the code points Unicode
reserves for a program's internal use (never assigned, so real text does not carry it); it
is itself escaped, so the mapping is reversible for any text:

- U+0000 becomes U+FDD0 + `0`
- U+FDD0 becomes U+FDD0 + U+FDD0

Text without either character is bound and read unchanged (one `in` test per string).
Another program reading the database directly sees the escaped form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "ESCAPE",
    "escape",
    "escape_params",
    "escape_rows",
    "restore",
    "restore_dict",
    "restore_row",
]

ESCAPE = "\ufdd0"
"""The escape character (a Unicode noncharacter)."""

_ESCAPED = re.compile(f"{ESCAPE}(.)", re.DOTALL)


def _restored(match: re.Match[str]) -> str:
    follower = match.group(1)
    return "\x00" if follower == "0" else follower


def escape(value: str) -> str:
    """`value` as PostgreSQL can store it.

    Examples:
        >>> escape("a\\x00b")
        'a\\ufdd00b'
        >>> restore(escape("a\\x00b\\ufdd0c\\ufdd00")) == "a\\x00b\\ufdd0c\\ufdd00"
        True
    """
    if "\x00" not in value and ESCAPE not in value:
        return value
    return value.replace(ESCAPE, ESCAPE + ESCAPE).replace("\x00", ESCAPE + "0")


def restore(value: str) -> str:
    """The text `escape` was given."""
    if ESCAPE not in value:
        return value
    return _ESCAPED.sub(_restored, value)


# The checks below are plain loops rather than `any(...)` over a generator: they run on
# every parameter and every row read, and a loop is about twice as fast
# (bench/bench_durability.py).


def escape_params(params: Sequence[Any]) -> Sequence[Any]:
    """Statement parameters with every string escaped (the same sequence when none needs it)."""
    for param in params:
        if isinstance(param, str) and ("\x00" in param or ESCAPE in param):
            return [escape(p) if isinstance(p, str) else p for p in params]
    return params


def escape_rows(rows: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """`escape_params` over the parameter rows of an `executemany`."""
    return [escape_params(row) for row in rows]


def restore_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A tuple row with every escaped string restored."""
    for value in row:
        if isinstance(value, str) and ESCAPE in value:
            return tuple(restore(v) if isinstance(v, str) else v for v in row)
    return row


def restore_dict(row: dict[str, Any]) -> dict[str, Any]:
    """A dict row with every escaped string restored, in place."""
    for key, value in row.items():
        if isinstance(value, str) and ESCAPE in value:
            row[key] = restore(value)
    return row
