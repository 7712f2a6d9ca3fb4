"""The Ray workers of a driver's batches: actors kept for the batch, and between batches.

A Ray task per input would lease a worker per task, and Ray stops the worker processes
beyond one per CPU of a node about a second after they go idle; every batch (and every
lull in one) then starts them again, each importing LangChain, the providers and the
store afresh. Measured on the two-node cluster of `.ci/ray_cluster.sh` (1 CPU a node, 16
tasks of 0.125 CPU): 14 of 16 new workers spent the first 60 s of a 150-run batch
importing, while the two prestarted ones ran nearly every input (BENCHMARKS.md section 15).

So a batch runs its inputs on `concurrency` actors (`RunActor`), one input at a time
each, spread over the nodes. The driver keeps them after the batch (`RunnerPool`), and the
next batch of the same process with the same CPUs per worker takes them again. An
unused pool is ended after `idle_s` seconds (`RUBRIC_STUDIO_RAY_POOL_IDLE_S`, default
60), so it holds its share of the cluster's CPUs only a minute after the last batch.
A pool is taken by one batch at a time; a second batch at the same moment gets its own.

What a worker's death does: Ray restarts its actor (`max_restarts`) and runs the input
again (`max_task_retries`); that run continues the input's grading run from the
checkpointer (`run_batch_input`), as a retried task did. A stopped batch kills the actors
of the inputs in flight (`ray.kill`), as a crash would, and they leave the pool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rubric_core import config
from rubric_core.batch.worker import run_input_in_worker

if TYPE_CHECKING:
    from types import ModuleType

    from rubric_core.batch.common import Units
    from rubric_core.batch.limits import RayBook

__all__ = ["POOL_IDLE_ENV", "RunActor", "RunnerPool", "pools"]

logger = logging.getLogger(__name__)

POOL_IDLE_ENV = "RUBRIC_STUDIO_RAY_POOL_IDLE_S"
"""Seconds an unused pool of Ray workers is kept after its last batch (0: ended at once)."""


class RunActor:
    """One Ray worker of a job: runs one unit at a time into the store at `target`."""

    def run(
        self, target: str, units: Units, index: int, book: RayBook | None = None
    ) -> dict[str, Any]:
        """Run unit `index` of the job; its row and where it ran: `{row, pid, node_id}`."""
        import ray

        row = run_input_in_worker(target, units, index, threading.Event(), book)
        return {
            "row": row,
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
        }


class RunnerPool:
    """Actors of one Ray job and one CPU share, handed to one batch at a time."""

    def __init__(self, ray: ModuleType, task_cpus: float, max_retries: int) -> None:
        self.ray, self.task_cpus, self.max_retries = ray, task_cpus, max_retries
        self.actors: list[Any] = []
        self._remote: Any = None

    def new_actor(self) -> Any:
        """Start one more actor (spread over the nodes) and keep it in the pool."""
        if self._remote is None:
            self._remote = self.ray.remote(RunActor)
        actor = self._remote.options(
            num_cpus=self.task_cpus,
            max_restarts=self.max_retries,
            max_task_retries=self.max_retries,
            scheduling_strategy="SPREAD",
        ).remote()
        self.actors.append(actor)
        return actor

    def grow(self, size: int) -> list[Any]:
        """The first `size` actors, starting the ones missing."""
        while len(self.actors) < size:
            self.new_actor()
        return self.actors[:size]

    def drop(self, actor: Any) -> None:
        """End `actor` (a stop, or a death Ray gave up on) and forget it."""
        with contextlib.suppress(Exception):
            self.ray.kill(actor, no_restart=True)
        with contextlib.suppress(ValueError):
            self.actors.remove(actor)

    def end(self) -> None:
        for actor in list(self.actors):
            self.drop(actor)


def _idle_s() -> float:
    """`RUBRIC_STUDIO_RAY_POOL_IDLE_S` in seconds (a bad value is named, not guessed at)."""
    return config.seconds(POOL_IDLE_ENV, high=86_400)


class _Pools:
    """The idle pools of this process, by (Ray job, CPUs per worker, retries)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, float, int], tuple[RunnerPool, float]] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Timer | None = None

    @contextlib.contextmanager
    def take(self, ray: ModuleType, task_cpus: float, max_retries: int) -> Iterator[RunnerPool]:
        """A pool for one batch: the idle one of this job and share, or a new one."""
        idle_s = _idle_s()  # a bad value is an error before anything runs
        key = (ray.get_runtime_context().get_job_id(), float(task_cpus), int(max_retries))
        with self._lock:
            held = self._idle.pop(key, None)
        pool = held[0] if held else RunnerPool(ray, task_cpus, max_retries)
        try:
            yield pool
        except BaseException:
            pool.end()
            raise
        if idle_s <= 0 or not pool.actors:
            pool.end()
            return
        with self._lock:
            spare = self._idle.pop(key, None)
            self._idle[key] = (pool, time.monotonic() + idle_s)
            self._schedule(idle_s)
        if spare is not None:  # two batches at once each had a pool: keep one
            spare[0].end()

    def _schedule(self, delay_s: float) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        self._reaper = threading.Timer(delay_s + 0.5, self.reap)
        self._reaper.daemon = True
        self._reaper.start()

    def reap(self) -> None:
        """End the pools idle past their time (run by a timer after each batch)."""
        now = time.monotonic()
        with self._lock:
            due = [key for key, (_, until) in self._idle.items() if until <= now]
            ended = [self._idle.pop(key)[0] for key in due]
            later = [until for _, until in self._idle.values()]
            if later:
                self._schedule(max(0.0, min(later) - now))
        for pool in ended:
            logger.debug("ending an idle pool of %d Ray workers", len(pool.actors))
            pool.end()

    def end_all(self) -> None:
        """End every idle pool now (before `ray.shutdown`, and in tests)."""
        with self._lock:
            ended = [pool for pool, _ in self._idle.values()]
            self._idle.clear()
        for pool in ended:
            pool.end()


pools = _Pools()
"""This process's idle pools of Ray workers."""
