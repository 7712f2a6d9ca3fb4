"""Argument checks the store makes before anything reaches a database."""

from __future__ import annotations

from collections.abc import Iterable

from rubric_core.schema import is_single_line, quoted
from rubric_core.store.errors import StoreError

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_PAGE",
    "MAX_TAG_CHARS",
    "clean_name",
    "clean_tags",
    "optional_text",
    "require_int",
    "require_text",
]

MAX_NAME_CHARS = 200
"""Longest rubric name accepted."""

MAX_TAG_CHARS = 50
"""Longest rubric tag accepted."""

MAX_PAGE = 10_000
"""Most runs one `list_runs` page may hold."""


def require_int(value: object, name: str, *, minimum: int | None = None) -> int:
    """`value` if it is an integer (not a bool) of at least `minimum`.

    Raises:
        StoreError: Of kind `invalid`, naming `name`.

    Examples:
        >>> require_int(3, "limit", minimum=1)
        3
        >>> require_int(0, "limit", minimum=1)
        Traceback (most recent call last):
        ...
        rubric_core.store.errors.StoreInputError: limit must be at least 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an integer, got {value!r}"
        raise StoreError(msg, kind="invalid")
    if minimum is not None and value < minimum:
        msg = f"{name} must be at least {minimum}, got {value}"
        raise StoreError(msg, kind="invalid")
    return value


def require_text(value: object, name: str, *, allow_empty: bool = False) -> str:
    """`value` if it is a string (and, unless allowed, not blank).

    Any text is stored as given, NUL characters included (an agent's answer or a tool's
    output may hold one): SQLite keeps them, the PostgreSQL backend escapes them
    reversibly (`store.postgres.nul`).
    """
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise StoreError(msg, kind="invalid")
    if not allow_empty and not value.strip():
        msg = f"{name} must not be empty"
        raise StoreError(msg, kind="invalid")
    return value


def _require_label(value: object, name: str) -> str:
    """A short label a person types (a rubric name, a tag): text without NUL characters."""
    text = require_text(value, name)
    if "\x00" in text:
        msg = f"{name} contains a NUL character; names and tags are plain text"
        raise StoreError(msg, kind="invalid")
    return text.strip()


def optional_text(value: object, name: str) -> str | None:
    """`None`, or `value` checked as by `require_text` (empty allowed)."""
    return None if value is None else require_text(value, name, allow_empty=True)


def clean_name(name: object) -> str:
    """A rubric name, stripped: one line of at most `MAX_NAME_CHARS` characters.

    Examples:
        >>> clean_name("  haiku ")
        'haiku'
        >>> clean_name("x" * 201)
        Traceback (most recent call last):
        ...
        rubric_core.store.errors.StoreInputError: rubric name is 201 characters; the limit is 200
    """
    text = _require_label(name, "rubric name")
    if len(text) > MAX_NAME_CHARS:
        msg = f"rubric name is {len(text)} characters; the limit is {MAX_NAME_CHARS}"
        raise StoreError(msg, kind="invalid")
    if not is_single_line(text):
        msg = "rubric name must be a single line (no line break or line/paragraph separator)"
        raise StoreError(msg, kind="invalid")
    return text


def clean_tags(tags: object) -> list[str]:
    """Rubric tags, stripped and without repeats, in the order given."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        msg = f"tags must be a list of strings, got {type(tags).__name__}"
        raise StoreError(msg, kind="invalid")
    cleaned: list[str] = []
    for tag in tags:
        text = _require_label(tag, "tag")
        if len(text) > MAX_TAG_CHARS:
            msg = f"tag {text[:20]!r}... is {len(text)} characters; the limit is {MAX_TAG_CHARS}"
            raise StoreError(msg, kind="invalid")
        if not is_single_line(text):
            msg = f"tag {quoted(text)} must be a single line"
            raise StoreError(msg, kind="invalid")
        if text not in cleaned:
            cleaned.append(text)
    return cleaned
