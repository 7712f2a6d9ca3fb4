"""Where a batch's rate limit lives, so that every run of the batch draws on one budget.

The budget is a `RateBook` (`providers.ratelimit`: one GCRA budget per endpoint, fed by
the responses' headers); each executor puts it where all of its runs reach it:

- threads: the book itself, in this process;
- processes: a `multiprocessing` manager process holds it, and each worker process gets
  a proxy (`process_book`); a call is one round trip over a local socket;
- Ray: a manager process on the driver's machine serves it over TCP on the driver's
  address in the cluster, with a random key per batch (`ray_book`), and each task gets a
  `RayBook` that connects once per worker process. Not an actor: see `ray_book`.

Every caller asks its book through `use_book` around the run (`run_batch_input`'s
callers), so the OpenAI client's transport (`providers.ratelimit_http`) finds it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Iterator
from multiprocessing.managers import BaseManager
from typing import TYPE_CHECKING, Any

from rubric_core.providers.ratelimit import RateBook, RateLimit

if TYPE_CHECKING:
    from types import ModuleType

    from rubric_core.providers.ratelimit import BookLike

__all__ = ["RayBook", "local_book", "process_book", "ray_book"]


def local_book(limit: RateLimit | None) -> RateBook | None:
    """The book of a batch on threads of this process (`None`: no limit)."""
    return RateBook(limit) if limit is not None and limit.active else None


class _BookManager(BaseManager):
    """A manager process serving one `RateBook`."""


_BookManager.register("RateBook", RateBook)


@contextlib.contextmanager
def process_book(limit: RateLimit | None, context: Any) -> Iterator[BookLike | None]:
    """A proxy of a book held by a manager process (started from `context`) for the block."""
    if limit is None or not limit.active:
        yield None
        return
    manager = _BookManager(ctx=context)
    manager.start()
    try:
        yield manager.RateBook(limit)  # type: ignore[attr-defined]
    finally:
        manager.shutdown()


_SERVED: list[RateBook] = []
"""The book a `_BookServer` process serves (set by its initializer)."""


def _serve_book(limit: RateLimit) -> None:
    _SERVED.append(RateBook(limit))


def _served_book() -> RateBook:
    return _SERVED[0]


class _BookServer(BaseManager):
    """A manager process serving one `RateBook` over TCP to the tasks of a Ray batch."""


_BookServer.register("book", callable=_served_book)

_CONNECTED: dict[tuple[str, int], Any] = {}
_CONNECT_LOCK = threading.Lock()


class RayBook:
    """A task's handle on the batch's book: where its server listens and its key (pickled
    into every task; it connects once per worker process)."""

    def __init__(self, address: tuple[str, int], authkey: bytes) -> None:
        self.address, self.authkey = address, authkey

    def _book(self) -> Any:
        with _CONNECT_LOCK:
            book = _CONNECTED.get(self.address)
            if book is None:
                _CONNECTED.clear()  # an earlier batch's server is gone: one batch at a time
                client = _BookServer(address=self.address, authkey=self.authkey)
                client.connect()
                book = _CONNECTED[self.address] = client.book()  # type: ignore[attr-defined]
            return book

    def reserve(self, endpoint: str, tokens: int) -> float:
        wait: float = self._book().reserve(endpoint, tokens)
        return wait

    def hold(self, endpoint: str) -> float:
        wait: float = self._book().hold(endpoint)
        return wait

    def settle(self, endpoint: str, reserved: int, used: int) -> None:
        self._book().settle(endpoint, reserved, used)

    def observe(self, endpoint: str, status: int, headers: dict[str, str]) -> None:
        self._book().observe(endpoint, status, headers)

    def stats(self) -> dict[str, dict[str, float]]:
        stats: dict[str, dict[str, float]] = self._book().stats()
        return stats


@contextlib.contextmanager
def ray_book(ray: ModuleType, limit: RateLimit | None) -> Iterator[RayBook | None]:
    """A book served for the block from this machine, on its address in the cluster.

    Not a Ray actor: a task that waits in `ray.get` lends its CPU back to Ray, which may
    then start more worker processes for the tasks queued behind it than `ray_task_cpus`
    allows (each importing LangChain afresh). A plain socket call is not a wait Ray sees,
    so the batch runs as many tasks at once as it asked for. The key is random per batch
    and travels only in the tasks' arguments, inside the cluster.
    """
    if limit is None or not limit.active:
        yield None
        return
    host = ray.util.get_node_ip_address()
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    key = os.urandom(32)
    server = _BookServer(address=(host, 0), authkey=key, ctx=multiprocessing.get_context(method))
    server.start(initializer=_serve_book, initargs=(limit,))
    try:
        address = server.address
        assert isinstance(address, tuple)  # a TCP address, as given
        yield RayBook((str(address[0]), int(address[1])), key)
    finally:
        server.shutdown()
