"""Limits on stored free text, and cutting and quoting text within them (pure functions)."""

from __future__ import annotations

MAX_EXPLANATION_CHARS = 8_000
"""Longest pass explanation kept (a grader's or a person's); a longer one is cut
(`cut_text`), the cut marked."""

MAX_GAP_CHARS = 2_000
"""Longest criterion gap kept; a longer one is cut, the cut marked."""

MAX_NOTE_CHARS = 2_000
"""Longest label note or experiment name kept; a longer one is cut, the cut marked."""

MAX_ERROR_CHARS = 8_000
"""Longest stored run error kept; a longer one is cut, the cut marked."""

MAX_LISTED_NAMES = 10
"""Most invented criterion names an explanation lists (the rest counted)."""

MAX_QUOTED_CHARS = 60
"""Most characters of a bad value an error message quotes (`quoted`)."""


def cut_text(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its start with the cut marked.

    Examples:
        >>> cut_text("short", 10)
        'short'
        >>> cut_text("x" * 100, 40)
        'xxxxxxxxxxxx… [cut: 88 more characters]'
    """
    if len(text) <= limit:
        return text

    def marker(omitted: int) -> str:
        return f"… [cut: {omitted:,} more characters]"

    keep = max(limit - len(marker(len(text))), 0)  # the marker of fewer omitted is no longer
    return text[:keep] + marker(len(text) - keep)


def quoted(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """`repr(value)` for an error message, at most a short prefix of it.

    Examples:
        >>> quoted("haiku")
        "'haiku'"
        >>> quoted("x" * 100_000)
        "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… (100,000 characters)"
    """
    if isinstance(value, str) and len(value) > limit:
        return f"{value[: limit - 4]!r}… ({len(value):,} characters)"
    return repr(value)


def is_single_line(text: str) -> bool:
    """False if `text` holds any line break Python knows (`\\n`, `\\r`, U+2028, U+2029,
    U+0085, vertical tab, form feed, the file/group/record separators).

    Examples:
        >>> is_single_line("one line"), is_single_line("a\\u2028b"), is_single_line("a\\nb")
        (True, False, False)
    """
    return len(text.splitlines()) <= 1 and not text.endswith(("\n", "\r"))
