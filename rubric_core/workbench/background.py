"""Jobs and runs working in the background of a long-lived process (the dashboard's, the CLI's).

`start_job` is the one way a batch, a grade or a re-grade starts on a thread: the job is
prepared here (checked completely, an experiment created; a bad request raises here,
not from the thread), then run on a thread by the executor it names, and its
`JobHandle` gives its progress, a stop, its result or its error. The process keeps the
handles in a `RunRegistry`, so a job or a run keeps its Stop button when the person who
started it switches page or reloads. The pages read progress from the store (background
work writes there), or from `JobHandle.finished`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubric_core.batch.job import Job
from rubric_core.batch.run import PreparedJob, prepare_batch
from rubric_core.workbench.grade import prepare_grade
from rubric_core.workbench.regrade import prepare_regrade

if TYPE_CHECKING:
    from rubric_core.batch.common import ProgressCallback
    from rubric_core.runs.handle import RunHandle
    from rubric_core.store import Store

__all__ = ["JobHandle", "RunRegistry", "batch_progress", "prepare_job", "start_job"]


@dataclass
class JobHandle:
    """A batch, grade or re-grade running on a background thread (`start_job`)."""

    batch_id: str
    """The `batch_id` its runs are stored with (a re-grade: `experiment-<id>`)."""

    total: int
    """How many units the job has (inputs, rows, gradings), finished ones included."""

    kind: str = "batch"
    """`batch`, `grade` or `regrade` (`Job.kind`)."""

    experiment_id: int | None = None
    """The experiment a re-grade stores into."""

    finished: int = 0
    """Units finished so far (a resumed job counts those finished before)."""

    stop_event: threading.Event = field(default_factory=threading.Event)
    """Set by `stop()`; the job's units watch it."""

    thread: threading.Thread | None = None
    """The thread running the job, once started."""

    result: Any = None
    """What the job returned (`BatchSummary`, `GradeSummary`, `RegradeResult`), once done."""

    exception: BaseException | None = None
    """What the job raised, if it did; `error` says it in words."""

    error: str | None = None
    """Why the job stopped early, if it raised."""

    ended: threading.Event = field(default_factory=threading.Event)
    """Set when the thread has finished, whatever the outcome."""

    def done(self) -> bool:
        """Whether the job's thread has finished."""
        return self.ended.is_set()

    def stop(self) -> None:
        """Stop the running units (runs end `interrupted`) and start no more."""
        self.stop_event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (at most `timeout` seconds) for the job to end; whether it has."""
        return self.ended.wait(timeout)


def prepare_job(store: Store, job: Job) -> PreparedJob[Any]:
    """Check `job` completely and make it ready to run, by its kind (`prepare_batch`,
    `prepare_grade`, `prepare_regrade`); a re-grade's experiment is created here.

    Raises:
        InputError (SpecError, GradingError, RegradeError), ModelSpecError,
        UnknownToolError, StoreError, RayUnavailable: Naming what is wrong.
    """
    if job.kind == "grade":
        return prepare_grade(store, job)
    if job.kind == "regrade":
        return prepare_regrade(store, job)
    return prepare_batch(store, job)


def start_job(store: Store, job: Job, *, progress: ProgressCallback | None = None) -> JobHandle:
    """Prepare `job` here, then run it on a background thread; returns its handle at once.

    Everything that can be checked before a unit runs is checked here (`prepare_job`:
    the spec or the rows, the grader, the batch to resume, a Ray cluster that answers),
    so a bad request raises here rather than from the thread. What goes wrong on the
    thread lands in `handle.error` (and `handle.exception`); units stored until then are
    kept.

    Args:
        store: The store the job records into.
        job: What to run and how.
        progress: Also called after each unit, as `run_batch`'s (the handle counts anyway).

    Returns:
        The handle, its thread started; keep it in a `RunRegistry` to find it again.

    Examples:
        >>> handle = start_job(store, Job(RunInputs(spec, inputs), concurrency=4))  # doctest: +SKIP
        >>> handle.wait(); handle.result.satisfied_rate  # doctest: +SKIP
        0.75
    """
    prepared = prepare_job(store, job)
    handle = JobHandle(
        batch_id=prepared.batch_id,
        total=prepared.total,
        kind=job.kind,
        experiment_id=prepared.experiment_id,
        finished=prepared.total - len(prepared.pending),
    )

    def counted(finished: int, total: int, row: dict[str, Any]) -> None:
        handle.finished = finished
        if progress is not None:
            progress(finished, total, row)

    def work() -> None:
        try:
            handle.result = prepared.run(progress=counted, stop_event=handle.stop_event)
        except BaseException as exc:  # shown by the caller; units stored so far are kept
            handle.exception = exc
            handle.error = f"{type(exc).__name__}: {exc}"
        finally:
            handle.ended.set()

    handle.thread = threading.Thread(target=work, name=f"rubric-{handle.batch_id}", daemon=True)
    handle.thread.start()
    return handle


class RunRegistry:
    """Run handles and job handles of this process, keyed by id; shared by every session.

    The dashboard holds one in `st.cache_resource`. Thread-safe.

    Examples:
        >>> registry = RunRegistry()
        >>> registry.run(1) is None, registry.active_runs()
        (True, [])
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, RunHandle] = {}
        self._jobs: dict[str, JobHandle] = {}

    def add_run(self, handle: RunHandle) -> None:
        """Keep a `RunHandle` under its `run_id`."""
        with self._lock:
            self._runs[int(handle.run_id)] = handle

    def run(self, run_id: int | None) -> RunHandle | None:
        """The handle of `run_id` if this process started it, else `None`."""
        if run_id is None:
            return None
        with self._lock:
            return self._runs.get(int(run_id))

    def active_runs(self) -> list[int]:
        """Ids of runs started here that have not finished, newest first."""
        with self._lock:
            return sorted((i for i, h in self._runs.items() if not h.done()), reverse=True)

    def add_job(self, handle: JobHandle) -> None:
        """Keep a job's handle under its `batch_id`."""
        with self._lock:
            self._jobs[handle.batch_id] = handle

    def job(self, batch_id: str | None) -> JobHandle | None:
        """The handle of the job `batch_id` if this process started it, else `None`."""
        if batch_id is None:
            return None
        with self._lock:
            return self._jobs.get(batch_id)


def batch_progress(store: Store, batch_id: str) -> tuple[int, int]:
    """`(finished, started)` runs of a batch or a grade, counted in the store."""
    started = int(store.runs.count(batch_id=batch_id))
    running = int(store.runs.count(batch_id=batch_id, status="running"))
    return started - running, started
