"""A loopback OpenAI-compatible endpoint that enforces a rate limit, as a hosted provider does.

`RateLimitedProvider` answers `POST /v1/chat/completions` on 127.0.0.1 (a port the OS
picks) after `latency_s`: the agent gets a short final answer; a request offering the
`GraderResponse` tool gets a satisfied verdict naming every criterion of the verdict
schema it was sent. In front of that sits a token bucket of `rpm` requests per minute
(`burst` deep, a second's worth by default) and optionally one of `tpm` tokens: a request
beyond either gets 429 with `Retry-After` (whole seconds, rounded up) and `retry-after-ms`,
as OpenAI sends them. With `headers=True` every response carries OpenAI's
`x-ratelimit-limit/remaining/reset-requests` (and `-tokens`) headers.

`GET /stats` returns what it saw: `{"ok": n, "throttled": n, "first": t, "last": t}`
(times of the first request and of the last answered one, `time.monotonic()` of the
server's process). Used by `tests/providers/test_ratelimit.py` in-process and by
`bench/bench_ratelimit.py` as a subprocess (`python tests/support/fake_provider.py --rpm 600`,
which prints its base URL on the first line and serves until stdin closes).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Bucket:
    def __init__(self, per_minute: float, burst: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = burst
        self.level = burst
        self.stamp = time.monotonic()

    def take(self, cost: float, now: float) -> float:
        """0 when `cost` was taken; else the seconds until it could be."""
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= cost:
            self.level -= cost
            return 0.0
        return (cost - self.level) / self.rate

    def reset_s(self) -> float:
        return (self.capacity - self.level) / self.rate


def _verdict_names(payload: dict[str, Any]) -> list[str] | None:
    """The criteria of the `GraderResponse` tool's schema, or `None` if it offers none."""
    for tool in payload.get("tools") or []:
        function = tool.get("function") or {}
        if function.get("name") != "GraderResponse":
            continue
        criteria = function.get("parameters", {}).get("properties", {}).get("criteria", {})
        names = []
        for entry in criteria.get("prefixItems") or []:
            shape = (entry.get("anyOf") or [entry])[0]
            names.append(shape["properties"]["name"]["enum"][0])
        return names
    return None


def _completion(payload: dict[str, Any]) -> dict[str, Any]:
    names = _verdict_names(payload)
    if names is None:
        message: dict[str, Any] = {"role": "assistant", "content": "Done: the answer is 42."}
        finish = "stop"
    else:
        verdict = {
            "criteria": [{"name": n, "evidence": "seen", "passed": True} for n in names],
            "explanation": "Every criterion is met.",
            "result": "satisfied",
        }
        call = {
            "id": f"call_{time.monotonic_ns()}",
            "type": "function",
            "function": {"name": "GraderResponse", "arguments": json.dumps(verdict)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": payload.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


class RateLimitedProvider:
    """The endpoint; a context manager that serves on a thread of this process."""

    TOKENS_PER_REQUEST = 120
    """What every answered request costs in tokens (its `usage.total_tokens`)."""

    def __init__(
        self,
        *,
        rpm: int = 600,
        tpm: int | None = None,
        burst: float | None = None,
        latency_s: float = 0.05,
        headers: bool = False,
    ) -> None:
        self.rpm, self.tpm, self.latency_s, self.headers = rpm, tpm, latency_s, headers
        self.requests = _Bucket(rpm, burst if burst is not None else max(1.0, rpm / 60))
        self.tokens = _Bucket(tpm, tpm / 60) if tpm else None
        self.lock = threading.Lock()
        self.ok = self.throttled = 0
        self.first: float | None = None
        self.last: float | None = None
        self.arrivals: list[float] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, json.dumps(provider.stats()).encode(), {})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                status, extra = provider.admit()
                if status == 429:
                    payload = {"error": {"message": "Rate limit reached", "type": "requests"}}
                    self._send(429, json.dumps(payload).encode(), extra)
                    return
                time.sleep(provider.latency_s)
                reply = _completion(json.loads(body or b"{}"))
                self._send(200, json.dumps(reply).encode(), extra)
                with provider.lock:
                    provider.ok += 1
                    provider.last = time.monotonic()

            def _send(self, status: int, payload: bytes, extra: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def admit(self) -> tuple[int, dict[str, str]]:
        """Take a request from the buckets: `(200, headers)` or `(429, headers)`."""
        with self.lock:
            now = time.monotonic()
            if self.first is None:
                self.first = now
            self.arrivals.append(now - self.first)
            wait = self.requests.take(1, now)
            if not wait and self.tokens is not None:
                wait = self.tokens.take(self.TOKENS_PER_REQUEST, now)
                if wait:  # the request slot goes back: only the tokens were short
                    self.requests.level += 1
            extra: dict[str, str] = {}
            if self.headers:
                extra.update(self._limit_headers())
            if wait:
                self.throttled += 1
                extra["retry-after"] = str(max(1, math.ceil(wait)))
                extra["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
                return 429, extra
            return 200, extra

    def _limit_headers(self) -> dict[str, str]:
        extra = {
            "x-ratelimit-limit-requests": str(self.rpm),
            "x-ratelimit-remaining-requests": str(int(self.requests.level)),
            "x-ratelimit-reset-requests": f"{self.requests.reset_s():.3f}s",
        }
        if self.tokens is not None and self.tpm:
            extra["x-ratelimit-limit-tokens"] = str(self.tpm)
            extra["x-ratelimit-remaining-tokens"] = str(int(self.tokens.level))
            extra["x-ratelimit-reset-tokens"] = f"{self.tokens.reset_s():.3f}s"
        return extra

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "ok": self.ok,
                "throttled": self.throttled,
                "first": self.first,
                "last": self.last,
                "arrivals": [round(t, 4) for t in self.arrivals],
            }

    def reset(self) -> None:
        """Forget what it saw and refill the buckets (between two measured batches)."""
        with self.lock:
            self.ok = self.throttled = 0
            self.first = self.last = None
            self.arrivals = []
            for bucket in (self.requests, self.tokens):
                if bucket is not None:
                    bucket.level, bucket.stamp = bucket.capacity, time.monotonic()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> RateLimitedProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--tpm", type=int, default=None)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--headers", action="store_true")
    args = parser.parse_args()
    server = RateLimitedProvider(
        rpm=args.rpm, tpm=args.tpm, latency_s=args.latency, headers=args.headers
    )
    with server:
        print(server.base_url, flush=True)
        for line in sys.stdin:  # "reset" between batches; EOF ends the server
            if line.strip() == "reset":
                server.reset()
                print("ok", flush=True)


if __name__ == "__main__":
    main()
