"""The request side of a rate limit: an HTTP transport that asks the batch's `RateBook`.

The OpenAI SDK (`openai`, under `ChatOpenAI`) sends every request through an `httpx2`
client; the agents of `openai:` and `openai-compatible:` specs get `limited_http_client()`,
whose transport is the SDK's own (`HTTPTransport` with the SDK's connection limits)
wrapped in `LimitedTransport`, and their graders' deadline client (`providers.http`) gets
its transport wrapped the same way (`with_rate_limit`). Outside a rate-limited batch (`current_book()` is `None`)
the wrapper passes each request straight through. Inside one, per request:

1. book it (`reserve`, about as many tokens as the body's bytes / 4 plus its
   `max_tokens`) and sleep what the book says; ask again if a hold began meanwhile;
2. send it; tell the book the response's status and `x-ratelimit-*` / `Retry-After`
   headers (`observe`), and the tokens its `usage` reports (`settle`);
3. a 429 (the provider refused it: nothing was done) is booked and sent again, at most
   `RESENDS` times, after the hold the 429 set for every request of the batch; the last
   429 goes back to the caller as today (the grader's retry, the agent's error).

Only the sync client is wrapped: batches call their models synchronously. An async call
(`ainvoke`) keeps the SDK's default client and is not paced.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from rubric_core.providers.ratelimit import current_book, endpoint_of

if TYPE_CHECKING:
    import httpx2

    from rubric_core.providers.ratelimit import BookLike

__all__ = [
    "RESENDS",
    "LimitedTransport",
    "estimate_tokens",
    "limited_http_client",
    "with_rate_limit",
]

RESENDS = 2
"""Times a 429'd request is sent again inside a rate-limited batch, after the hold."""

_COMPLETION_GUESS = 256
"""Completion tokens booked for a request that sets no `max_tokens` (settled afterwards)."""

_HEADERS = ("x-ratelimit-", "retry-after")


def estimate_tokens(body: bytes) -> int:
    """Tokens booked for a chat request before it is sent: bytes / 4 plus its completion cap.

    Examples:
        >>> estimate_tokens(b'{"messages": [], "max_tokens": 100}')
        108
        >>> estimate_tokens(b"not json")
        258
    """
    prompt = len(body) // 4
    try:
        payload = json.loads(body) if body else {}
    except ValueError:
        payload = {}
    cap = None
    if isinstance(payload, dict):
        cap = payload.get("max_completion_tokens") or payload.get("max_tokens")
    return prompt + (cap if isinstance(cap, int) and cap > 0 else _COMPLETION_GUESS)


def _used_tokens(response: httpx2.Response) -> int | None:
    """`usage.total_tokens` of a JSON response (read here; the SDK reads it from cache)."""
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        response.read()
        usage = json.loads(response.content).get("usage") or {}
        total = usage.get("total_tokens")
    except (ValueError, AttributeError):
        return None
    return total if isinstance(total, int) else None


def _wait_turn(book: BookLike, endpoint: str, tokens: int) -> None:
    """Sleep until the book lets this request go (booked again if a hold began meanwhile)."""
    while True:
        wait = book.reserve(endpoint, tokens)
        if wait < 0:  # nothing booked yet (a learning budget awaits its first answer)
            time.sleep(-wait)
            continue
        if wait == 0:
            return
        time.sleep(wait)
        if book.hold(endpoint) <= 0:
            return


class LimitedTransport:
    """An `httpx2` transport that paces its requests by the context's `RateBook`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        book = current_book()
        if book is None:
            response: httpx2.Response = self._inner.handle_request(request)
            return response
        endpoint = endpoint_of(request.url)
        body = request.read()
        tokens = estimate_tokens(body)
        streamed = b'"stream": true' in body or b'"stream":true' in body
        attempt = 0
        while True:
            _wait_turn(book, endpoint, tokens)
            response = self._inner.handle_request(request)
            headers = {
                key.lower(): value
                for key, value in response.headers.items()
                if key.lower().startswith(_HEADERS)
            }
            book.observe(endpoint, response.status_code, headers)
            if response.status_code == 429 and attempt < RESENDS:
                response.close()
                attempt += 1
                continue
            if response.status_code == 200 and not streamed:
                used = _used_tokens(response)
                if used is not None:
                    book.settle(endpoint, tokens, used)
            return response

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> LimitedTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_rate_limit(client: Any) -> Any:
    """`client` (an `httpx` or `httpx2` client, e.g. the grader's deadline client) with its
    transport wrapped in `LimitedTransport`: the wait for the budget comes before the
    request, outside whatever the inner transport bounds."""
    # httpx keeps the transport it sends through as `_transport`, with no public setter.
    client._transport = LimitedTransport(client._transport)
    return client


_CLIENT: list[Any] = []
_CLIENT_LOCK = threading.Lock()


def limited_http_client() -> Any:
    """This process's sync `httpx2` client for OpenAI models, with the SDK's defaults and
    `LimitedTransport` (one per process, shared by every model, as the SDK's own is)."""
    with _CLIENT_LOCK:
        if not _CLIENT:
            import httpx2
            from openai import DefaultHttpxClient

            # The SDK's own connection limits (openai._constants.DEFAULT_CONNECTION_LIMITS):
            # a transport given to the client brings its own pool.
            limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
            inner = httpx2.HTTPTransport(limits=limits)
            transport: Any = LimitedTransport(inner)  # an httpx2 transport by its methods
            _CLIENT.append(DefaultHttpxClient(transport=transport))
        return _CLIENT[0]
