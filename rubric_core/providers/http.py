"""The HTTP client of the grader's OpenAI models: a response must arrive whole in time."""

from __future__ import annotations

from typing import Any

__all__ = ["deadline_http_client"]


def deadline_http_client() -> Any:
    """An `httpx.Client` whose responses must arrive whole within the request's timeout.

    httpx's timeouts bound each read, so a server that drips its reply a byte at a time
    never times out. The grader abandons such a call at its deadline (`grader.budget`);
    with this client the abandoned call also ends, its connection closed, as soon as the
    next byte arrives past the deadline, instead of reading on for ever.
    """
    import time

    import httpx

    class _Deadline(httpx.SyncByteStream):
        def __init__(self, stream: httpx.SyncByteStream, deadline: float, seconds: float):
            self._stream, self._deadline, self._seconds = stream, deadline, seconds

        def __iter__(self) -> Any:
            for chunk in self._stream:
                if time.monotonic() > self._deadline:
                    msg = f"the response did not arrive whole within {self._seconds:g} s"
                    raise httpx.ReadTimeout(msg)
                yield chunk

        def close(self) -> None:
            self._stream.close()

    class _DeadlineTransport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            timeouts = (request.extensions.get("timeout") or {}).values()
            seconds = max((t for t in timeouts if isinstance(t, int | float)), default=None)
            start = time.monotonic()
            response = super().handle_request(request)
            if seconds is not None and isinstance(response.stream, httpx.SyncByteStream):
                response.stream = _Deadline(response.stream, start + seconds, seconds)
            return response

    return httpx.Client(transport=_DeadlineTransport(), follow_redirects=True)
