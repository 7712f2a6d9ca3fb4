"""Fake OpenAI-compatible graders on loopback, for the tests of grader faults over real HTTP.

- `FaultServer` speaks the chat-completions protocol and plays a queue of behaviours, one per
  request: a verdict (`ok`), an HTTP status with headers (`status`), half a reply then a
  reset (`reset`), a raw JSON body (`raw`) or a hang (`hang`); `run_loop` grades one answer
  through it with a `RubricMiddleware` whose agent is a replay model.
- `SilentServer` accepts connections and never answers a byte.
- `DripServer` sends a reply's headers, then one byte of its body every `every_s` seconds.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from rubric_core import RetryPolicy, RubricMiddleware
from rubric_core.providers import ReplayChatModel

RUBRIC = "- has a title\n- cites a source"
GOOD = {
    "criteria": [
        {"name": "has a title", "passed": True},
        {"name": "cites a source", "passed": True},
    ],
    "explanation": "Both criteria are met.",
    "result": "satisfied",
}


def completion(arguments: dict | str) -> bytes:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return json.dumps(
        {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fault-server",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{time.monotonic_ns()}",
                                "type": "function",
                                "function": {"name": "GraderResponse", "arguments": args},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
        }
    ).encode()


class FaultServer:
    """An OpenAI-compatible endpoint that plays scripted behaviours, one per request."""

    def __init__(self, behaviours: list[tuple[str, object]]):
        self.behaviours = list(behaviours)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append(json.loads(body or b"{}"))
                kind, value = server.behaviours.pop(0) if server.behaviours else ("ok", GOOD)
                if kind == "ok":
                    self._send(200, completion(value))
                elif kind == "status":
                    status, headers = value
                    payload = json.dumps({"error": {"message": f"fault {status}"}}).encode()
                    self._send(status, payload, headers)
                elif kind == "reset":
                    # headers and half a body, then an RST instead of the rest
                    payload = completion(GOOD)
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                elif kind == "raw":
                    self._send(200, json.dumps(value).encode())
                elif kind == "hang":
                    time.sleep(float(value))
                    self.close_connection = True

            def _send(self, status, payload, headers=None):
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, val in (headers or {}).items():
                    self.send_header(key, val)
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_loop(server: FaultServer, *, timeout: float = 5.0, **kwargs):
    grader = ChatOpenAI(
        model="fault-server",
        base_url=server.base_url,
        api_key="not-needed",
        timeout=timeout,
        max_retries=0,
    )
    agent_model = ReplayChatModel(turns=[AIMessage(f"draft {i}") for i in range(1, 6)])
    evaluations: list[dict] = []
    kwargs.setdefault("retry", RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05))
    agent = create_agent(
        agent_model,
        middleware=[RubricMiddleware(model=grader, on_evaluation=evaluations.append, **kwargs)],
    )
    result = agent.invoke({"messages": [HumanMessage("Write it.")], "rubric": RUBRIC})
    return result, evaluations, agent_model


class LoopbackSocketServer:
    """A raw TCP endpoint on 127.0.0.1 (a port the OS picks) that hands each accepted
    connection to `_handle`; `base_url` is what an OpenAI client is pointed at."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.sock.close()


class SilentServer(LoopbackSocketServer):
    """A TCP endpoint that accepts connections and never answers a byte."""

    def __init__(self):
        super().__init__()
        self.connections: list[socket.socket] = []

    def _handle(self, conn: socket.socket) -> None:
        self.connections.append(conn)

    def __exit__(self, *exc):
        for conn in self.connections:
            conn.close()
        super().__exit__(*exc)


class DripServer(LoopbackSocketServer):
    """Sends a reply's headers at once, then one byte of its body every `every_s` seconds
    (spaces: JSON may start with any number of them), until it is closed."""

    def __init__(self, every_s: float = 0.3):
        super().__init__()
        self.every_s = every_s
        self.requests = 0
        self.closed_by_client = 0

    def _handle(self, conn: socket.socket) -> None:
        threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        with conn:
            conn.recv(65536)
            self.requests += 1
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: 100000\r\n\r\n"
            )
            while not self.stop.wait(self.every_s):
                try:
                    conn.sendall(b" ")
                except OSError:
                    self.closed_by_client += 1
                    return
