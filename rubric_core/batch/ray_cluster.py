"""Jobs on a Ray cluster: each unit (a batch's input, a grade's row, a re-grade's grading)
run by one of the job's Ray workers into the store.

Ray does the placement, the restarts and the retries; this module hands the inputs to
`concurrency` actors (`batch.ray_pool`: kept for the batch and, by this process, for the
next batch), one input each at a time, waits for them, and turns a stop into killing the
actors of the inputs in flight. Nothing here is a queue of our own.

Each run opens the store from its URL (a `Store` is never pickled) and runs
`run_batch_input`, the function a thread batch runs per input, so a Ray run records each
graded pass before its loop goes on, exactly as a thread run does, and the Batch page
(which reads only the store) shows its progress the same way. Ray restarts an actor whose
worker process died and runs its input again (`max_retries`; never on an exception of
ours); the new run finds the input's run by `(batch_id, input_index)` and continues its
grading run from the checkpointer, and since passes are recorded idempotently by
`(run, grading run, iteration)`, no pass is stored twice.

Where the code comes from: the actor class is pickled by reference, so every node must import
`rubric_core` and its dependencies from the Python that `ray start` ran: the same venv
with the package installed (`pip install -r requirements.txt` and `pip install .`, or the
checkout on `PYTHONPATH` when `ray start` runs). `run_on_ray(..., runtime_env=...)` passes
a Ray runtime environment through for clusters set up otherwise.

Why a SQLite store is refused on a cluster of more than one node: the file lives on one
machine, so a task placed on another would open a different (new, empty) file there, or
the same file over a network filesystem, where SQLite's locking is not reliable. One node
may use a SQLite file (every task is a process of the same machine); the store of a real
cluster is PostgreSQL.

`ray` is imported only here, and only when a Ray batch starts, so neither the CLI nor the
dashboard pays for it otherwise.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import TYPE_CHECKING, Any

from rubric_core import config
from rubric_core.batch.common import mark_interrupted, report_progress
from rubric_core.batch.limits import RayBook, ray_book
from rubric_core.batch.processes import check_picklable
from rubric_core.batch.ray_pool import RunnerPool, pools
from rubric_core.errors import RubricStudioError
from rubric_core.extras import MissingExtra
from rubric_core.runs.checkpoints import CHECKPOINTERS, checkpoint_path
from rubric_core.runs.spec import SpecError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import ModuleType

    from rubric_core.batch.common import Drive, Units
    from rubric_core.store import Store

__all__ = [
    "RAY_ADDRESS_ENV",
    "RayUnavailable",
    "check_ray_address",
    "configured_ray_address",
    "offered_executors",
    "run_on_ray",
]

logger = logging.getLogger(__name__)

RAY_ADDRESS_ENV = "RUBRIC_STUDIO_RAY_ADDRESS"
"""The environment variable naming the head node of the cluster (`HOST:PORT`)."""

_PROBE_TIMEOUT_S = 5.0
"""How long the head node's port gets to accept a TCP connection before Ray is tried."""

_INIT_TIMEOUT_S = 60.0
"""How long `ray.init` gets to connect (it can hang on an address that answers oddly)."""

_MAX_RETRIES = 3
"""Times Ray restarts a batch's worker, and re-runs its input, after its process died."""

_POLL_S = 0.25
"""How often the driver looks at the stop event while waiting for tasks."""

_CANCEL_GRACE_S = 30.0
"""How long the driver waits for Ray to end the inputs it stopped."""

_CONNECT_LOCK = threading.Lock()


class RayUnavailable(RubricStudioError):
    """The Ray cluster does not answer, or cannot run this batch; the message says which."""


# --------------------------------------------------------------------------- the address


def configured_ray_address(explicit: str | None = None) -> str | None:
    """The cluster to use: `explicit`, else `$RUBRIC_STUDIO_RAY_ADDRESS`, else `None`.

    Examples:
        >>> configured_ray_address("10.0.0.5:6379")
        '10.0.0.5:6379'
    """
    value = (explicit or config.text(RAY_ADDRESS_ENV)).strip()
    return value or None


def offered_executors(store: Store) -> tuple[str, ...]:
    """The executors a page should offer for `store`: Ray only with a cluster and PostgreSQL.

    Examples:
        >>> offered_executors(Store("studio.db"))  # doctest: +SKIP
        ('thread',)
    """
    if configured_ray_address() is not None and store.is_postgres:
        return ("thread", "ray")
    return ("thread",)


def _host_port(address: str) -> tuple[str, int]:
    """`HOST:PORT` split and checked.

    Examples:
        >>> _host_port("127.0.0.2:6379")
        ('127.0.0.2', 6379)
        >>> _host_port("head")
        Traceback (most recent call last):
        ...
        rubric_core.batch.ray_cluster.RayUnavailable: Ray address 'head' is not HOST:PORT (the head node's GCS port, 6379 unless `ray start --head --port` said otherwise)
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        msg = (
            f"Ray address {address!r} is not HOST:PORT (the head node's GCS port, 6379 "
            "unless `ray start --head --port` said otherwise)"
        )
        raise RayUnavailable(msg)
    return host.strip("[]"), int(port)


def check_ray_address(address: str | None, *, timeout_s: float = _PROBE_TIMEOUT_S) -> str:
    """Check that the head node at `address` (default: the configured one) accepts connections.

    A plain TCP connect with a timeout, so a wrong or dead address is reported within
    `timeout_s` seconds rather than by a `ray.init` that may wait a minute or more.

    Raises:
        RayUnavailable: No address is configured, it is malformed, or nothing answers there.

    Examples:
        >>> check_ray_address("127.0.0.1:1", timeout_s=1)  # doctest: +SKIP
        Traceback (most recent call last):
        RayUnavailable: the Ray cluster at 127.0.0.1:1 does not answer (connection refused) ...
    """
    resolved = configured_ray_address(address)
    if resolved is None:
        msg = f"no Ray cluster configured: pass --ray-address HOST:PORT or set {RAY_ADDRESS_ENV}"
        raise RayUnavailable(msg)
    host, port = _host_port(resolved)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        else:
            reason = (exc.strerror or type(exc).__name__).lower()
        msg = (
            f"the Ray cluster at {resolved} does not answer ({reason}); is `ray start --head` "
            "running there, and is the port reachable from this machine?"
        )
        raise RayUnavailable(msg) from exc
    return resolved


def _connect(address: str, runtime_env: Mapping[str, Any] | None) -> ModuleType:
    """`ray`, connected to `address` (reusing this process's connection when it is the same)."""
    try:
        import ray
    except ImportError as exc:  # the core install: ray is the [ray] extra
        raise RayUnavailable(str(MissingExtra("ray", "ray"))) from exc

    with _CONNECT_LOCK:
        if ray.is_initialized():
            current = ray.get_runtime_context().gcs_address
            if current == address and runtime_env is None:
                return ray
            pools.end_all()  # their actors belong to the job that ends here
            ray.shutdown()
        outcome: dict[str, BaseException | None] = {}

        def init() -> None:
            try:
                ray.init(
                    address=address,
                    namespace="rubric-studio",
                    log_to_driver=False,
                    configure_logging=False,
                    runtime_env=dict(runtime_env) if runtime_env else None,
                )
                outcome["error"] = None
            except BaseException as exc:  # reported to the caller below
                outcome["error"] = exc

        # ray.init can hang (an address that accepts TCP but is no GCS, a raylet that never
        # registers): run it on a thread and give up on it after a bound.
        thread = threading.Thread(target=init, name="rubric-ray-init", daemon=True)
        thread.start()
        thread.join(_INIT_TIMEOUT_S)
        if thread.is_alive():
            msg = (
                f"the Ray cluster at {address} accepted a connection but Ray did not connect "
                f"within {_INIT_TIMEOUT_S:g} s; is it a Ray head node (GCS port), and is this "
                "machine one of its nodes?"
            )
            raise RayUnavailable(msg)
        error = outcome.get("error")
        if error is not None:
            msg = f"cannot connect to the Ray cluster at {address}: {error}"
            raise RayUnavailable(msg) from error
        return ray


def _store_target(store: Store, ray: ModuleType, address: str) -> str:
    """What a task opens the store from; refuses a SQLite file on a cluster of several nodes."""
    if not store.is_postgres:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        if len(nodes) > 1:
            msg = (
                f"the Ray cluster at {address} has {len(nodes)} nodes, and a SQLite store "
                f"({store.url}) lives on one machine: tasks on the others would not reach it. "
                "Use a PostgreSQL store (RUBRIC_STUDIO_DB=postgresql://...) for Ray batches."
            )
            raise RayUnavailable(msg)
    # The URL with its password: the tasks open their own store (it travels in the task's
    # arguments, inside the cluster only, and is never logged).
    return store.target


def _prepare_checkpoints(store: Store) -> None:
    """Create the checkpointer's tables here, once, before the tasks open it in parallel.

    Every worker's first run sets the checkpointer up; with the tables already there that
    is a check, rather than many processes racing to run the same migrations.
    """
    path = checkpoint_path(store)
    CHECKPOINTERS.acquire(path, store)
    CHECKPOINTERS.release(path)


# --------------------------------------------------------------------------- the driver


def _cancel(ray: ModuleType, pool: RunnerPool, in_flight: dict[Any, tuple[int, Any]]) -> None:
    """End the inputs in flight and wait (bounded) until Ray has ended them.

    By killing their actors' worker processes, as a crash would (they leave the pool):
    an interrupt raised at whatever line a run is on could leave a lock or a pooled
    connection behind in a worker that goes on serving. A killed worker loses nothing
    stored (every pass is committed when graded; the checkpoint is in the database).
    """
    refs = list(in_flight)
    for _, actor in in_flight.values():
        pool.drop(actor)
    ray.wait(refs, num_returns=len(refs), timeout=_CANCEL_GRACE_S)


def _task_failure(ray: ModuleType, exc: BaseException) -> str:
    """Why a task failed, for the log and the run's error; raises if no task can run."""
    if isinstance(exc, ray.exceptions.RayError) and "No module named 'rubric_core" in str(exc):
        msg = (
            "Ray workers cannot import rubric_core: install it (and requirements.txt) in the "
            "Python every `ray start` ran, or start the nodes with the checkout on PYTHONPATH"
        )
        raise RayUnavailable(msg) from exc
    cause = getattr(exc, "cause", None)  # a RayTaskError carries the task's own exception
    if isinstance(cause, BaseException):
        return _error_line(cause)
    return _error_line(exc)


def _error_line(exc: BaseException) -> str:
    """`Type: last line of the message`, one line for a log or a run's error."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1].strip()}" if lines else type(exc).__name__


def run_on_ray(
    store: Store,
    units: Units,
    pending: Sequence[int],
    drive: Drive,
    *,
    address: str | None,
    task_cpus: float = 1.0,
    max_retries: int = _MAX_RETRIES,
    runtime_env: Mapping[str, Any] | None = None,
) -> None:
    """Run units `pending` of a job on `drive.concurrency` Ray workers of `task_cpus` CPUs each.

    The job's runner calls this for `executor="ray"` after checking the job. Setting
    `drive.stop` kills the workers of the units in flight, hands out no more and marks
    their runs `interrupted`; a unit whose worker died more than `max_retries` times is
    marked `interrupted` too, so resuming the job continues it. A rate limit is held
    for the job's length by a server on this machine (`batch.limits.ray_book`), every
    unit asking it. The workers stay for this process's next Ray job (`batch.ray_pool`).

    Raises:
        RayUnavailable: The cluster does not answer or cannot run the job (a SQLite
            store on several nodes, workers that cannot import rubric_core).
        SpecError: The units (their factory) cannot be pickled to the workers.
    """
    if isinstance(task_cpus, bool) or not isinstance(task_cpus, int | float) or task_cpus <= 0:
        raise SpecError("ray_task_cpus", f"must be a positive number of CPUs, got {task_cpus!r}")
    check_picklable(units)
    resolved = check_ray_address(address)
    ray = _connect(resolved, runtime_env)
    target = _store_target(store, ray, resolved)
    _prepare_checkpoints(store)
    with pools.take(ray, task_cpus, max_retries) as pool, ray_book(ray, drive.rate_limit) as book:
        _drive(ray, pool, store, units, pending, (target, book), drive)


def _drive(
    ray: ModuleType,
    pool: RunnerPool,
    store: Store,
    units: Units,
    pending: Sequence[int],
    where: tuple[str, RayBook | None],
    drive: Drive,
) -> None:
    """Hand the units to the pool's actors, one each at a time, and wait for them."""
    target, book = where
    batch_id, stop = units.batch_id, drive.stop
    units_ref = ray.put(units)
    queue = list(pending)
    queue.reverse()
    free = list(reversed(pool.grow(min(drive.concurrency, len(pending)))))
    in_flight: dict[Any, tuple[int, Any]] = {}
    finished = units.total - len(pending)
    lost: dict[int, str] = {}
    try:
        while (queue or in_flight) and not stop.is_set():
            while queue and free:
                index, actor = queue.pop(), free.pop()
                ref = actor.run.remote(target, units_ref, index, book)
                in_flight[ref] = (index, actor)
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=_POLL_S)
            for ref in ready:
                index, actor = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    reason = _task_failure(ray, exc)
                    logger.warning("batch %s: input %d failed on Ray: %s", batch_id, index, reason)
                    lost[index] = reason
                    if isinstance(exc, ray.exceptions.RayActorError):  # Ray gave up on it
                        pool.drop(actor)
                        actor = pool.new_actor()
                    free.append(actor)
                    continue
                free.append(actor)
                row = result.get("row")
                logger.debug(
                    "batch %s: input %d ran as run %s on node %s (pid %s)",
                    batch_id,
                    index,
                    None if row is None else row.get("id"),
                    result.get("node_id"),
                    result.get("pid"),
                )
                if row is None:
                    continue
                finished += 1
                report_progress(drive, finished, units.total, row, batch_id)
    finally:
        stopped = {index for index, _ in in_flight.values()}
        if in_flight:
            _cancel(ray, pool, in_flight)
        if stopped:
            mark_interrupted(store, batch_id, "the batch was stopped", indexes=stopped)
        for index, reason in lost.items():
            mark_interrupted(store, batch_id, f"its Ray task failed: {reason}", indexes={index})
