"""Retrying a store write that failed for a reason that may pass: bounded attempts, backoff.

A run's writes (a graded pass, its transcript, its end) go through `retry_write`: a lock
held by another process past the busy timeout, a full disk, a lost server connection
are tried again a few times, waiting longer each time (tenacity's exponential backoff
with jitter); then the last `StoreError` is raised. Faults that waiting cannot cure (a
bad value, a read-only or deleted file, a refused password, a newer schema) are raised
at once.

The whole retry time is bounded: a try is only started within `total_s` (4 s by default)
of the first one, so one write gives up within `total_s` plus one try's own wait (the
store's busy timeout for SQLite, its pool timeout for PostgreSQL: 5 s by default), about
9 s. And once a write has given up because the server does not answer (`unreachable`),
the writes that follow within `total_s` are tried once, not again for the whole budget
(the server is known to be down): a run whose server is lost ends within about twice
that (its pass, then its end).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from rubric_core.store.errors import StoreError, StoreErrorKind

__all__ = ["DEFAULT_WRITE_RETRY", "TRANSIENT_KINDS", "WriteRetry", "is_transient", "retry_write"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

TRANSIENT_KINDS: tuple[StoreErrorKind, ...] = ("locked", "io", "unreachable")
"""`StoreError` kinds worth another try: another writer's lock, a disk or I/O fault (a
full disk may be freed), a server connection lost or not yet back."""


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` is a `StoreError` that trying again may cure.

    Examples:
        >>> is_transient(StoreError("database x.db is locked", kind="locked"))
        True
        >>> is_transient(StoreError("database x.db was deleted", kind="missing"))
        False
    """
    return isinstance(exc, StoreError) and exc.kind in TRANSIENT_KINDS


@dataclass(frozen=True)
class WriteRetry:
    """How a run's writes are retried.

    Attributes:
        attempts: Tries in all, the first included (at least 1).
        first_wait_s: Sleep after the first failure; it doubles after each further one.
        max_wait_s: The longest single sleep (before jitter of up to `first_wait_s`).
        total_s: No try starts (and no sleep ends) later than this after the first try.
    """

    attempts: int = 4
    first_wait_s: float = 0.25
    max_wait_s: float = 2.0
    total_s: float = 4.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            msg = f"attempts must be an integer, got {self.attempts!r}"
            raise ValueError(msg)
        if self.attempts < 1:
            msg = f"attempts must be at least 1, got {self.attempts}"
            raise ValueError(msg)
        for name in ("first_wait_s", "max_wait_s", "total_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                msg = f"{name} must be a number of seconds of at least 0, got {value!r}"
                raise ValueError(msg)


DEFAULT_WRITE_RETRY = WriteRetry()
"""Up to four tries started within 4 s (plus each try's own busy or pool timeout)."""

_OUTAGE_LOCK = threading.Lock()
_outage_until = [0.0]
"""Until when (monotonic) writes are tried once: a write gave up on an unreachable server."""


def _store_known_down() -> bool:
    with _OUTAGE_LOCK:
        return time.monotonic() < _outage_until[0]


def _note_outage(policy: WriteRetry) -> None:
    with _OUTAGE_LOCK:
        _outage_until[0] = time.monotonic() + policy.total_s


def _note_success() -> None:
    with _OUTAGE_LOCK:
        _outage_until[0] = 0.0


def retry_write(write: Callable[[], _T], *, what: str, policy: WriteRetry | None = None) -> _T:
    """`write()`, tried again on a transient `StoreError` as `policy` says.

    Args:
        write: The write; it must be safe to repeat (every store write a run makes is:
            passes are upserted, transcripts and ends replaced).
        what: What is being written, for the log ("grading pass 2 of run 7").
        policy: Attempts and backoff; `DEFAULT_WRITE_RETRY` when None.

    Raises:
        StoreError: The last failure, once the attempts are spent, or at once when it is
            not transient. Its message says how many tries were made.

    Examples:
        >>> retry_write(lambda: 42, what="nothing")
        42
    """
    policy = policy if policy is not None else DEFAULT_WRITE_RETRY

    def log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        _log.warning(
            "writing %s failed (try %d of %d), retrying: %s",
            what,
            state.attempt_number,
            policy.attempts,
            error,
        )

    attempts = 1 if _store_known_down() else policy.attempts
    retrying = Retrying(
        stop=stop_after_attempt(attempts) | stop_before_delay(policy.total_s),
        wait=wait_exponential_jitter(
            initial=policy.first_wait_s, max=policy.max_wait_s, jitter=policy.first_wait_s
        ),
        retry=retry_if_exception(is_transient),
        before_sleep=log_retry,
        reraise=True,
    )
    try:
        result = retrying(write)
    except StoreError as exc:
        if exc.kind == "unreachable":
            _note_outage(policy)
        tries = retrying.statistics.get("attempt_number", 1)
        if tries > 1:
            error = StoreError(f"{exc} (tried {tries} times)", kind=exc.kind)
            raise error from exc
        raise
    if attempts < policy.attempts:
        _note_success()
    return result
