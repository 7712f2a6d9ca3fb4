"""The one reader of a response's rate-limit headers, for the batch's book and the grader.

`rate_headers` turns a response's headers (any mapping, any key case) into `RateHeaders`:
the wait a throttled response asks for (`retry-after-ms`, then `Retry-After` as seconds or
an HTTP date) and OpenAI's `x-ratelimit-limit-*`, `-remaining-*` and `-reset-*` for
`requests` and `tokens`. `providers.ratelimit` learns its budgets from it and
`grader.retry` its backoff, so both honour the same headers the same way.

A header is text from a server: a value that is not a number, a duration or a date, a
negative one or NaN is ignored (read as absent), and an endless or absurdly long one
(`inf`, `1e400`, a date in the year 9999) is read as `MAX_WAIT_S`, so no caller meets an
`OverflowError` or waits forever; callers bound a wait further (the grader by its
`max_delay_s`, the book by its longest hold).
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["KINDS", "MAX_WAIT_S", "RateHeaders", "parse_duration", "rate_headers"]

MAX_WAIT_S = 3600.0
"""The longest wait a header is read as asking for (a longer or endless one is cut to it)."""

KINDS: tuple[str, ...] = ("requests", "tokens")
"""What `x-ratelimit-*` headers count: `x-ratelimit-limit-requests`, `...-tokens`."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateHeaders:
    """What a response's headers say about the endpoint's rate limit; empty: nothing."""

    retry_after_s: float | None = None
    """The wait a response asks for before the next request (0 to `MAX_WAIT_S`)."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """`x-ratelimit-limit-<kind>` by kind (`requests`, `tokens`): per minute, at least 1."""
    remaining: Mapping[str, int] = field(default_factory=dict)
    """`x-ratelimit-remaining-<kind>` by kind: what is left of the budget, at least 0."""
    resets_s: Mapping[str, float] = field(default_factory=dict)
    """`x-ratelimit-reset-<kind>` by kind: seconds until the budget is full again."""


def _seconds(value: float) -> float | None:
    """A wait in seconds: NaN and negatives are none, endless or huge ones `MAX_WAIT_S`."""
    if math.isnan(value) or value < 0:
        return None
    return min(value, MAX_WAIT_S)


def parse_duration(text: str) -> float | None:
    """Seconds in a reset header (`6m0s`, `1.5s`, `20ms`, `2`), `None` if it is none.

    Examples:
        >>> parse_duration("6m0s"), parse_duration("20ms"), parse_duration("2"), parse_duration("x")
        (360.0, 0.02, 2.0, None)
        >>> parse_duration("1e400"), parse_duration("nan"), parse_duration("-3")
        (3600.0, None, None)
    """
    text = text.strip()
    try:
        return _seconds(float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return _seconds(sum(float(number) * _UNIT_S[unit] for number, unit in parts))


def _retry_after(headers: Mapping[str, str], now: float | None) -> float | None:
    millis = headers.get("retry-after-ms", "").strip()
    if millis:
        try:
            wait = _seconds(float(millis) / 1000)
        except ValueError:
            wait = None
        if wait is not None:
            return wait
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return _seconds(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return _seconds(max(0.0, when - (time.time() if now is None else now)))


def _count(text: str | None) -> int | None:
    """A count header as a whole number; not a finite number, or negative: `None`."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(value)


def rate_headers(headers: object, *, now: float | None = None) -> RateHeaders:
    """What `headers` (a response's, any mapping, keys in any case) say about rate limits.

    `now` is the wall clock an HTTP-date `Retry-After` is measured from (this machine's
    when `None`). Anything but a mapping reads as no headers.

    Examples:
        >>> rate_headers({"Retry-After": "2"}).retry_after_s
        2.0
        >>> rate_headers({"retry-after-ms": "1500", "retry-after": "2"}).retry_after_s
        1.5
        >>> found = rate_headers({"x-ratelimit-limit-requests": "60",
        ...     "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"})
        >>> dict(found.limits), dict(found.remaining), dict(found.resets_s)
        ({'requests': 60}, {'tokens': 0}, {'tokens': 360.0})
        >>> rate_headers({"retry-after": "inf", "x-ratelimit-limit-requests": "1e400"})
        RateHeaders(retry_after_s=3600.0, limits={}, remaining={}, resets_s={})
        >>> rate_headers(None)
        RateHeaders(retry_after_s=None, limits={}, remaining={}, resets_s={})
    """
    if not isinstance(headers, Mapping):
        return RateHeaders()
    lower = {str(key).lower(): str(value) for key, value in headers.items()}
    limits: dict[str, int] = {}
    remaining: dict[str, int] = {}
    resets: dict[str, float] = {}
    for kind in KINDS:
        limit = _count(lower.get(f"x-ratelimit-limit-{kind}"))
        if limit:
            limits[kind] = limit
        left = _count(lower.get(f"x-ratelimit-remaining-{kind}"))
        if left is not None:
            remaining[kind] = left
        reset = parse_duration(lower.get(f"x-ratelimit-reset-{kind}", ""))
        if reset is not None:
            resets[kind] = reset
    return RateHeaders(_retry_after(lower, now), limits, remaining, resets)
