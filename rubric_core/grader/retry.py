"""When a failed grader call is retried, how long to wait, and how a failure is described."""

from __future__ import annotations

import random
from dataclasses import dataclass

from langgraph.errors import GraphBubbleUp, GraphRecursionError

from rubric_core.providers.headers import rate_headers

GRADER_RECURSION_LIMIT = 40
"""Graph steps one grader call may take (tool rounds and structured-output corrections)."""

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "ReadError",
        "WriteTimeout",
        "PoolTimeout",
        "RemoteProtocolError",
        "TimeoutException",
        "ServiceUnavailableError",
        "RateLimitError",
        "InternalServerError",
        "OverloadedError",
    }
)
"""Exception class names of provider SDKs and HTTP clients that mean "try again"."""


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (`status_code` or `response.status_code`).

    Examples:
        >>> class Throttled(Exception):
        ...     status_code = 429
        >>> http_status(Throttled()), http_status(ValueError())
        (429, None)
    """
    for candidate in (exc, getattr(exc, "response", None)):
        code = getattr(candidate, "status_code", None)
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """The wait the response behind `exc` asks for (`retry-after-ms`, `Retry-After` as
    seconds or an HTTP date, read by `providers.headers.rate_headers`), if any.

    Examples:
        >>> class Throttled(Exception):
        ...     status_code = 429
        ...     headers = {"retry-after-ms": "1500"}
        >>> retry_after_s(Throttled()), retry_after_s(ValueError())
        (1.5, None)
    """
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "headers", None)
    return rate_headers(headers).retry_after_s


def is_transient(exc: BaseException) -> bool:
    """Whether a grader failure is worth retrying (network, timeout, 429, 5xx).

    Examples:
        >>> is_transient(ConnectionResetError("peer reset")), is_transient(KeyError("x"))
        (True, False)
    """
    if isinstance(exc, GraphBubbleUp):
        return False
    status = http_status(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        if type(current).__name__ in _TRANSIENT_NAMES:
            return True
        current = current.__cause__ or current.__context__
    return False


def describe_exception(exc: BaseException) -> str:
    """`Type (HTTP n): message`, the explanation of a `grader_error` pass.

    Examples:
        >>> describe_exception(TimeoutError("timed out"))
        'TimeoutError: timed out'
    """
    status = http_status(exc)
    suffix = f" (HTTP {status})" if status is not None else ""
    if isinstance(exc, GraphRecursionError):
        detail = (
            "the grader did not produce a valid GraderResponse within "
            f"{GRADER_RECURSION_LIMIT} steps"
        )
    else:
        detail = str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}{suffix}: {detail}"


@dataclass
class RetryPolicy:
    """How transient grader failures are retried before they become `grader_error`.

    Attributes:
        attempts: Total grader calls allowed for one pass (1 disables retrying).
        initial_delay_s: Delay before the first retry; doubles each time.
        max_delay_s: Upper bound on any single delay, `Retry-After` included.
        jitter: Fraction of each delay added at random, so parallel runs spread out.

    Examples:
        >>> RetryPolicy(initial_delay_s=1.0, jitter=0.0).delay(2, TimeoutError())
        4.0
    """

    attempts: int = 3
    initial_delay_s: float = 1.0
    max_delay_s: float = 30.0
    jitter: float = 0.1

    def delay(self, retry_index: int, exc: BaseException) -> float:
        """Seconds to wait before retry number `retry_index` (0-based)."""
        hinted = retry_after_s(exc)
        if hinted is not None:
            return min(hinted, self.max_delay_s)
        base = min(self.initial_delay_s * 2.0**retry_index, self.max_delay_s)
        return base * (1 + random.uniform(0, self.jitter))

    def backoff(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before retrying after failed call `attempt` (0-based), or `None`.

        `None` means give up: the failure is not transient, or the attempts are spent.

        Examples:
            >>> RetryPolicy(attempts=2, jitter=0.0).backoff(TimeoutError(), 0)
            1.0
            >>> RetryPolicy(attempts=2).backoff(TimeoutError(), 1) is None
            True
        """
        if attempt + 1 >= self.attempts or not is_transient(exc):
            return None
        return self.delay(attempt, exc)
