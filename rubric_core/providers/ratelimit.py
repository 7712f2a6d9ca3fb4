"""A provider endpoint's rate limit: requests and tokens per minute, configured and learned.

`RateLimit` is what a batch is asked for (`--rpm`, `--tpm`, `--learn-rate-limits`).
`RateBook` holds one `Budget` per endpoint (`scheme://host:port` of the request) and is
the one object every request of a batch asks before it goes out (`reserve`), and tells
what came back (`observe`, `settle`). The batch decides where the book lives: in this
process (threads), in a `multiprocessing` manager's process (the process executor's
workers share it through a proxy), or in a Ray actor (tasks on any node); its methods
take and return plain values so any of those hosts can serve them, and every time is
measured by the host's clock, so the callers' clocks never need to agree.

A `Budget` is a generic cell rate algorithm (GCRA) for requests and one for tokens: a
reservation books the earliest time both allow and moves each "theoretical arrival time"
on by its cost, so requests leave paced at the limit, never in a burst the provider would
refuse. Tokens are booked from an estimate and corrected by the response's `usage`.
Learned: `x-ratelimit-limit-requests` / `-tokens` (per minute, OpenAI's convention) lower
the configured limits (or set them, with `learn` and none configured); a `remaining` of 0
holds the endpoint until its `x-ratelimit-reset-*`; a 429 holds it for its `Retry-After`
(`retry-after-ms`, seconds or an HTTP date), every caller included. The headers are read
by `providers.headers.rate_headers`, the one reader the grader's retry uses too.

Why not a library: `limits` and `pyrate-limiter` keep fixed rates given at construction,
count a cost when the request is made (ours is known only from the response) and share
state across processes through Redis or a database; LangChain's `InMemoryRateLimiter`
counts requests only, in one process. A budget here is three floats that change with the
provider's headers; the book is small enough for a manager process or a Ray actor to hold.

The request side (an HTTP transport that asks the book) is `providers.ratelimit_http`;
which book a request asks is this module's context variable (`use_book`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from rubric_core import config
from rubric_core.errors import InputError
from rubric_core.providers.headers import KINDS, rate_headers

__all__ = [
    "Budget",
    "RateBook",
    "RateLimit",
    "current_book",
    "endpoint_of",
    "rate_limit_from_env",
    "use_book",
]

MAX_PER_MINUTE = 100_000_000
"""The largest limit accepted (a guard against a typo's extra zeros, not a provider's)."""

_DEFAULT_HOLD_S = 1.0
"""How long a 429 without `Retry-After` or a reset header holds the endpoint."""

_MAX_HOLD_S = 120.0
"""The longest hold a header may impose (a bad header should not stop a batch for hours)."""

_REQUEST_BURST_S = 0.5
"""Requests a budget left idle may send together afterwards, in seconds of its rate (at
least one: at 600/min, 5 at once; at 60/min, strictly one a second). A request late for
its slot (a busy machine) so costs no throughput, while a burst stays well inside the one
second's worth that providers' buckets hold."""

HEADROOM = 0.98
"""The share of a limit a budget paces at. A provider's bucket fed at exactly its refill
rate does a random walk down to empty (every bunched arrival takes from it, nothing gives
back): 2 % below the limit it refills, and the batch still runs at 0.98 of the limit."""

_TOKEN_BURST_S = 1.0
"""Tokens a reservation may run ahead of the token rate, in seconds of that rate."""

_PROBE_S = 5.0
"""Learning with no limit known, how long the first request may go unanswered before the
others go without one (they wait for its headers rather than all leave at once)."""

_PROBE_POLL_S = 0.05
"""How often a request waiting for that first answer asks again."""


def _check_limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be a positive whole number per minute, got {value!r}"
        raise InputError(msg)
    if not 1 <= value <= MAX_PER_MINUTE:
        msg = f"{name} must be between 1 and {MAX_PER_MINUTE} per minute, got {value}"
        raise InputError(msg)
    return value


@dataclass(frozen=True)
class RateLimit:
    """What a batch is limited to per endpoint: `rpm` requests and `tpm` tokens per minute
    (`None`: no such limit), and whether the provider's headers may set or lower them.

    Examples:
        >>> RateLimit(rpm=600).active, RateLimit().active, RateLimit(learn=True).active
        (True, False, True)
        >>> RateLimit(rpm=0)
        Traceback (most recent call last):
        rubric_core.errors.InputError: rpm must be between 1 and 100000000 per minute, got 0
    """

    rpm: int | None = None
    tpm: int | None = None
    learn: bool = False

    def __post_init__(self) -> None:
        _check_limit("rpm", self.rpm)
        _check_limit("tpm", self.tpm)

    @property
    def active(self) -> bool:
        """Whether a batch with this limit paces its requests at all."""
        return self.rpm is not None or self.tpm is not None or self.learn

    def describe(self) -> str:
        """One line for logs and summaries.

        Examples:
            >>> RateLimit(rpm=600, learn=True).describe()
            '600 requests/min, tokens unlimited, learned from headers'
        """
        parts = [
            f"{self.rpm} requests/min" if self.rpm else "requests unlimited",
            f"{self.tpm} tokens/min" if self.tpm else "tokens unlimited",
        ]
        if self.learn:
            parts.append("learned from headers")
        return ", ".join(parts)


def rate_limit_from_env(
    rpm: int | None = None, tpm: int | None = None, learn: bool | None = None
) -> RateLimit:
    """`RateLimit` from the arguments, each unset one from its `RUBRIC_STUDIO_RATE_LIMIT_*`.

    Raises:
        InputError: A limit out of range, or a variable that is not a whole number.
    """
    return RateLimit(
        rpm=rpm if rpm is not None else config.integer("RUBRIC_STUDIO_RATE_LIMIT_RPM"),
        tpm=tpm if tpm is not None else config.integer("RUBRIC_STUDIO_RATE_LIMIT_TPM"),
        learn=learn if learn is not None else config.flag("RUBRIC_STUDIO_RATE_LIMIT_LEARN"),
    )


class Budget:
    """One endpoint's budget: GCRA over requests and tokens, holds, and what it learned.

    Not thread-safe by itself: `RateBook` serialises the calls. Times are the book's clock.

    Examples:
        >>> budget = Budget(RateLimit(rpm=60))
        >>> [round(budget.reserve(0, now=100.0), 3) for _ in range(3)]  # one a second / 0.98
        [0.0, 1.02, 2.041]
    """

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.rpm: float | None = limit.rpm
        self.tpm: float | None = limit.tpm
        self.request_tat = 0.0
        self.token_tat = 0.0
        self.held_until = 0.0
        self.probe_until = 0.0
        self.observed = False
        self.requests = 0
        self.throttled = 0
        self.waited_s = 0.0

    def reserve(self, tokens: int, *, now: float) -> float:
        """Book the next request of about `tokens` tokens; the seconds to wait before it.

        Negative: nothing was booked; wait that long (minus) and ask again. So it goes while
        a learning budget waits for its first answer's headers, one request out.
        """
        if self.limit.learn and not self.observed and self.rpm is None and self.tpm is None:
            if not self.probe_until:
                self.probe_until = now + _PROBE_S  # this request is the probe
            elif now < self.probe_until:
                return -min(_PROBE_POLL_S, self.probe_until - now)
        at = max(now, self.held_until)
        if self.rpm:
            at = max(at, self.request_tat - self._request_tolerance())
        if self.tpm:
            at = max(at, self.token_tat - _TOKEN_BURST_S)
        if self.rpm:
            self.request_tat = max(self.request_tat, at) + 60 / (self.rpm * HEADROOM)
        if self.tpm:
            self.token_tat = max(self.token_tat, at) + max(0, tokens) * 60 / (self.tpm * HEADROOM)
        self.requests += 1
        self.waited_s += at - now
        return at - now

    def _request_tolerance(self) -> float:
        """GCRA's tolerance: how far ahead of the pace a request may go, in seconds."""
        if not self.rpm:
            return 0.0
        burst = max(1, int(self.rpm / 60 * _REQUEST_BURST_S))
        return (burst - 1) * 60 / (self.rpm * HEADROOM)

    def hold(self, *, now: float) -> float:
        """Seconds the endpoint is still held (a 429 or an exhausted budget), else 0."""
        return max(0.0, self.held_until - now)

    def settle(self, reserved: int, used: int) -> None:
        """Correct the token debit of a request booked at `reserved` that used `used`."""
        if self.tpm and used >= 0:
            self.token_tat += (used - reserved) * 60 / (self.tpm * HEADROOM)

    def observe(self, status: int, headers: Mapping[str, str], *, now: float) -> None:
        """Learn from a response: its limits, an exhausted budget, a 429's `Retry-After`."""
        self.observed = True
        said = rate_headers(headers, now=time.time())
        self._learn_limits(said.limits)
        for kind in KINDS:
            if said.remaining.get(kind) == 0:
                reset = said.resets_s.get(kind)
                limit = said.limits.get(kind)
                if reset and kind == "requests" and limit:
                    # The reset is until the budget is full again; one request frees sooner.
                    reset = min(reset, 60 / limit)
                if reset:
                    # Only new bookings wait: the provider refuses nothing yet.
                    self._push(now + min(reset, _MAX_HOLD_S))
        if status == 429:
            self.throttled += 1
            wait = said.retry_after_s
            if wait is None:
                wait = said.resets_s.get("requests") or None
            self._hold(now + min(_DEFAULT_HOLD_S if wait is None else wait, _MAX_HOLD_S))

    def _learn_limits(self, limits: Mapping[str, int]) -> None:
        """A limit the headers state lowers a configured one; with `learn` it sets one."""
        for kind, configured in (("requests", self.limit.rpm), ("tokens", self.limit.tpm)):
            told = limits.get(kind)
            if told is None:
                continue
            if configured is None and not self.limit.learn:
                continue
            value = float(min(told, configured) if configured else told)
            if kind == "requests":
                self.rpm = value
            else:
                self.tpm = value

    def _push(self, until: float) -> None:
        """New bookings start after `until`; those already made stand."""
        self.request_tat = max(self.request_tat, until + self._request_tolerance())
        if self.tpm:
            self.token_tat = max(self.token_tat, until + _TOKEN_BURST_S)

    def _hold(self, until: float) -> None:
        if until > self.held_until:
            self.held_until = until
            # Requests booked before the hold restart after it, paced from there.
            self.request_tat = max(self.request_tat, until + self._request_tolerance())

    def stats(self) -> dict[str, float]:
        return {
            "rpm": self.rpm or 0.0,
            "tpm": self.tpm or 0.0,
            "requests": float(self.requests),
            "throttled": float(self.throttled),
            "waited_s": round(self.waited_s, 3),
        }


class BookLike(Protocol):
    """What the transport asks: a `RateBook`, or a proxy of one in another process."""

    def reserve(self, endpoint: str, tokens: int) -> float: ...
    def hold(self, endpoint: str) -> float: ...
    def settle(self, endpoint: str, reserved: int, used: int) -> None: ...
    def observe(self, endpoint: str, status: int, headers: dict[str, str]) -> None: ...


class RateBook:
    """The budgets of a batch, one per endpoint, behind one lock (every method is quick).

    Examples:
        >>> book = RateBook(RateLimit(rpm=120))
        >>> book.reserve("http://a:1", 0), book.reserve("http://a:1", 0) > 0.4
        (0.0, True)
        >>> book.reserve("http://b:2", 0)  # another endpoint has its own budget
        0.0
    """

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._budgets: dict[str, Budget] = {}
        self._lock = threading.Lock()

    def _budget(self, endpoint: str) -> Budget:
        budget = self._budgets.get(endpoint)
        if budget is None:
            budget = self._budgets[endpoint] = Budget(self.limit)
        return budget

    def reserve(self, endpoint: str, tokens: int) -> float:
        """Book a request to `endpoint`; the seconds the caller waits before sending it."""
        with self._lock:
            return self._budget(endpoint).reserve(tokens, now=time.monotonic())

    def hold(self, endpoint: str) -> float:
        """Seconds `endpoint` is still held; a caller that waited asks again before sending."""
        with self._lock:
            return self._budget(endpoint).hold(now=time.monotonic())

    def settle(self, endpoint: str, reserved: int, used: int) -> None:
        with self._lock:
            self._budget(endpoint).settle(reserved, used)

    def observe(self, endpoint: str, status: int, headers: dict[str, str]) -> None:
        with self._lock:
            self._budget(endpoint).observe(status, headers, now=time.monotonic())

    def stats(self) -> dict[str, dict[str, float]]:
        """Per endpoint: its current limits, requests booked, 429s seen, seconds waited."""
        with self._lock:
            return {endpoint: b.stats() for endpoint, b in self._budgets.items()}


_BOOK: ContextVar[BookLike | None] = ContextVar("rubric_rate_book", default=None)


def current_book() -> BookLike | None:
    """The book the requests of this context ask (`None`: they go out unpaced)."""
    return _BOOK.get()


@contextlib.contextmanager
def use_book(book: BookLike | None) -> Iterator[None]:
    """Requests made inside the block (this thread and what copies its context) ask `book`."""
    token = _BOOK.set(book)
    try:
        yield
    finally:
        _BOOK.reset(token)


def endpoint_of(url: Any) -> str:
    """The budget key of a request URL: `scheme://host:port`.

    Examples:
        >>> endpoint_of("https://api.openai.com/v1/chat/completions")
        'https://api.openai.com:443'
    """
    from urllib.parse import urlsplit

    parts = urlsplit(str(url))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"
