"""A PostgreSQL store whose server is lost mid-run (issue 22 item 15): the run's writes give
up within the stated retry bound instead of retrying each write for the whole budget; and
a URL whose port is no number is the one-sentence store error."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from click.testing import CliRunner
from langchain_core.messages import AIMessage

from rubric_core.cli import cli
from rubric_core.providers import ReplayChatModel, verdict_turn
from rubric_core.runs import RunSpec, start_run
from rubric_core.store import Store, StoreError

RUBRIC = "- has a title\n- cites a source"


def test_a_non_numeric_port_is_the_one_sentence_store_error():
    result = CliRunner().invoke(
        cli, ["rubrics", "list", "--db", "postgresql://u:secret@127.0.0.1:fivefour/studio"]
    )
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "has port 'fivefour', which is not a number" in result.output
    assert "secret" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(StoreError, match="not a number"):
        Store("postgresql://u@127.0.0.1:99999/studio")


class _Proxy:
    """A loopback TCP proxy in front of the server; `lose()` cuts every connection and
    refuses new ones, as a server that went away."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lost = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.lost.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.lost.is_set():
                client.close()
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)

    def lose(self, *_: object) -> None:
        self.lost.set()
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.mark.pg
def test_a_server_lost_mid_run_ends_the_run_within_the_retry_bound(pg_url):
    parts = urlsplit(pg_url)
    proxy = _Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    proxied = urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))
    store = Store(proxied)
    try:
        version = store.rubrics.save_version("article", RUBRIC)
        spec = RunSpec(
            rubric_version_id=version["id"],
            input="Write a short article about tides.",
            agent_model="replay:needs_revision_then_satisfied",
            grader_model="replay:needs_revision_then_satisfied",
            max_iterations=3,
        )
        agent = ReplayChatModel(scenario="a", turns=[AIMessage(f"draft {i}") for i in range(4)])
        fail = ("cites a source", False, "add a source")
        grader = ReplayChatModel(
            scenario="g",
            turns=[verdict_turn("needs_revision", [("has a title", True), fail], "v")] * 3,
        )
        started = time.monotonic()
        handle = start_run(
            store, spec, on_evaluation=proxy.lose, agent_llm=agent, grader_llm=grader
        )
        # Each write used to be tried 4 times with a 5 s pool wait, for the pass and again
        # for the run's end (114 s through the CLI); the bound is now about 9 s a write,
        # and the end is tried once once the server is known to be down.
        assert handle.wait(45), "the run did not end within 45 s of losing its server"
        elapsed = time.monotonic() - started
        print(f"run ended {elapsed:.1f} s after it started, its server lost after pass 1")
    finally:
        proxy.lose()
        store.close()
