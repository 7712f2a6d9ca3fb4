"""Where a batch's rate limit lives, so that every run of the batch draws on one budget.

The budget is a `RateBook` (`providers.ratelimit`: one GCRA budget per endpoint, fed by
the responses' headers); each executor puts it where all of its runs reach it:

- threads: the book itself, in this process;
- processes: a `multiprocessing` manager process holds it, and each worker process gets
  a proxy (`process_book`); a call is one round trip over a local socket;
- Ray: an actor holds it (`ray_book`, no CPU reserved), and each task gets a `RayBook`,
  whose `reserve` waits for the actor's answer and whose `observe` and `settle` are sent
  without waiting (an actor runs one caller's calls in the order they were sent).

Every caller asks its book through `use_book` around the run (`run_batch_input`'s
callers), so the OpenAI client's transport (`providers.ratelimit_http`) finds it.
"""

from __future__ import annotations

import contextlib
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


class RayBook:
    """A task's handle on the batch's book in a Ray actor (pickled into every task)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def reserve(self, endpoint: str, tokens: int) -> float:
        import ray

        wait: float = ray.get(self.actor.reserve.remote(endpoint, tokens))
        return wait

    def hold(self, endpoint: str) -> float:
        import ray

        wait: float = ray.get(self.actor.hold.remote(endpoint))
        return wait

    def settle(self, endpoint: str, reserved: int, used: int) -> None:
        self.actor.settle.remote(endpoint, reserved, used)

    def observe(self, endpoint: str, status: int, headers: dict[str, str]) -> None:
        self.actor.observe.remote(endpoint, status, headers)

    def stats(self) -> dict[str, dict[str, float]]:
        import ray

        stats: dict[str, dict[str, float]] = ray.get(self.actor.stats.remote())
        return stats


@contextlib.contextmanager
def ray_book(ray: ModuleType, limit: RateLimit | None) -> Iterator[RayBook | None]:
    """A book in a Ray actor of the connected cluster for the block (killed after it)."""
    if limit is None or not limit.active:
        yield None
        return
    actor = ray.remote(num_cpus=0)(RateBook).remote(limit)
    try:
        yield RayBook(actor)
    finally:
        with contextlib.suppress(Exception):
            ray.kill(actor)
