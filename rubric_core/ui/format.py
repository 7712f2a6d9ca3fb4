"""Text and numbers for tables and captions: timestamps, one-line cuts, Markdown escaping, paging."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "NO_VALUE",
    "cell",
    "expand_counts",
    "format_timestamp",
    "md_escape",
    "one_line",
    "page_caption",
    "page_count",
    "page_window",
    "progress",
    "rounded",
    "score_cell",
    "short_count",
    "token_pair",
]

DEFAULT_PAGE_SIZE = 25
"""Rows per page of the Runs table."""

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def format_timestamp(value: Any) -> str:
    """An ISO-8601 (or Unix time) timestamp as `"YYYY-MM-DD HH:MM"` UTC; empty for none.

    Examples:
        >>> format_timestamp("2025-01-02T03:04:05+01:00")
        '2025-01-02 02:04'
        >>> format_timestamp("not a time")
        'not a time'
    """
    if value in (None, ""):
        return ""
    try:
        if isinstance(value, (int, float)):
            moment = dt.datetime.fromtimestamp(float(value), tz=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            if moment.tzinfo is not None:
                moment = moment.astimezone(dt.UTC)
    except (ValueError, OverflowError, OSError):
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M")


def md_escape(text: Any) -> str:
    """Backslash-escape Markdown so model or user text shows literally inside an alert or caption.

    Examples:
        >>> print(md_escape("**bold** [x](javascript:y)"))
        \\*\\*bold\\*\\* \\[x\\]\\(javascript\\:y\\)
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text or "").split()))


def one_line(text: Any, limit: int = 80) -> str:
    """Text on a single line, cut to `limit` characters with an ellipsis.

    Examples:
        >>> one_line("a very long\\ncriterion indeed", 10)
        'a very lo…'
        >>> one_line(None)
        ''
    """
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: max(1, limit - 1)] + "…"


def rounded(value: Any, digits: int = 2) -> float | None:
    """`value` as a float rounded to `digits`, or `None` when it is not a number.

    Examples:
        >>> rounded(1.23456), rounded(None)
        (1.23, None)
    """
    try:
        return round(float(value), digits)
    except (TypeError, ValueError):
        return None


NO_VALUE = "—"
"""What a table cell shows for a value not there yet (a running run's score): an em dash."""


def score_cell(value: Any) -> str:
    """A score as a table cell: two places, or `NO_VALUE` when there is none (yet).

    Examples:
        >>> score_cell(0.6667), score_cell(None)
        ('0.67', '—')
    """
    number = rounded(value)
    return NO_VALUE if number is None else f"{number:.2f}"


def cell(value: Any) -> str:
    """One value as a short table cell: floats to two places, lists joined, text on one line.

    Examples:
        >>> cell(1.5), cell(["a", "b"]), cell(None)
        ('1.50', 'a, b', '')
    """
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return one_line(value, 120) if value is not None else ""


def page_count(total: int, page_size: int = DEFAULT_PAGE_SIZE) -> int:
    """How many pages `total` rows fill (at least 1, so an empty table still has page 1).

    Examples:
        >>> page_count(0), page_count(25), page_count(26)
        (1, 1, 2)
    """
    if page_size < 1:
        msg = f"page_size must be at least 1, got {page_size}"
        raise ValueError(msg)
    return max(1, math.ceil(max(0, total) / page_size))


def page_window(page: int, total: int, page_size: int = DEFAULT_PAGE_SIZE) -> tuple[int, int, int]:
    """Clamp a 1-based page number and give `(page, offset, limit)` for the query.

    Examples:
        >>> page_window(9, total=30, page_size=25)
        (2, 25, 25)
    """
    pages = page_count(total, page_size)
    page = min(max(1, int(page)), pages)
    return page, (page - 1) * page_size, page_size


def page_caption(page: int, total: int, page_size: int = DEFAULT_PAGE_SIZE) -> str:
    """`"Runs 26–50 of 120 (page 2 of 5)"`, or `"No runs match these filters"`.

    Examples:
        >>> page_caption(2, 60, 25)
        'Runs 26–50 of 60 (page 2 of 3)'
    """
    if total <= 0:
        return "No runs match these filters"
    page, offset, _ = page_window(page, total, page_size)
    last = min(total, offset + page_size)
    return f"Runs {offset + 1}–{last} of {total:,} (page {page} of {page_count(total, page_size)})"


def progress(done: int, total: int) -> tuple[float, str]:
    """Progress-bar value and text.

    Examples:
        >>> progress(2, 5)
        (0.4, '2 of 5 inputs finished')
    """
    if total <= 0:
        return 0.0, "No inputs"
    done = min(max(0, done), total)
    return done / total, f"{done} of {total} inputs finished"


def expand_counts(counts: Mapping[int, int]) -> list[int]:
    """`{passes: runs}` back to one value per run, for a histogram.

    Examples:
        >>> expand_counts({1: 2, 3: 1})
        [1, 1, 3]
    """
    return [value for value, count in sorted(counts.items()) for _ in range(int(count))]


def short_count(value: int) -> str:
    """A count short enough for a metric: `1,506`, `123k`, `4.2M`.

    Examples:
        >>> short_count(1506), short_count(123_456), short_count(4_200_000)
        ('1,506', '123k', '4.2M')
    """
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 100_000:
        return f"{value // 1000}k"
    return f"{value:,}"


def token_pair(tokens_in: int, tokens_out: int) -> str:
    """Input and output tokens as one metric value, `"1,506 / 16"`.

    Examples:
        >>> token_pair(1506, 16), token_pair(250_000, 1_200)
        ('1,506 / 16', '250k / 1,200')
    """
    return f"{short_count(tokens_in)} / {short_count(tokens_out)}"
