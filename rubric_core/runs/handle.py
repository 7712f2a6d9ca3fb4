"""`RunHandle`: a run executing off the caller's thread, as its starter and watchers see it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from rubric_core.summary import final_pass

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = ["RunHandle"]


class RunHandle:
    """A run executing off the caller's thread.

    Progress is read from the store, the one thing the run and its watchers share.
    The executor drives the handle through `stop_event`, `note_record_failure` and
    `mark_finished`; watchers use the rest.

    Examples:
        >>> handle = start_run(store, spec)  # doctest: +SKIP
        >>> handle.wait(60); handle.status  # doctest: +SKIP
        'satisfied'
    """

    def __init__(
        self,
        store: Store,
        run_id: int,
        thread_id: str,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.run_id = run_id
        """Id of the run row."""
        self.thread_id = thread_id
        """LangGraph thread id; `resume_run` continues it."""
        self.error: str | None = None
        """The exception text if the agent raised (status `error`)."""
        self.final_status: str | None = None
        """The status the run ended with, once it ended; `error` when storing its end
        failed (the stored row may then still say `running`)."""
        self._store = store
        self._stop_event = stop_event if stop_event is not None else threading.Event()
        self._finished = threading.Event()
        self._record_failures: list[str] = []

    # ---------------------------------------------------------------- stopping

    @property
    def stop_event(self) -> threading.Event:
        """The event `stop()` sets; the agent's stop middleware watches it."""
        return self._stop_event

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was asked for (by `stop()` or by setting the shared event)."""
        return self._stop_event.is_set()

    def stop(self) -> None:
        """Ask the run to stop before its next agent model call; it ends `interrupted`.

        Passes already graded stay stored. Stopping a finished run does nothing.
        """
        self._stop_event.set()

    # ---------------------------------------------------------------- executor side

    def note_record_failure(self, message: str) -> None:
        """Note that a grading pass could not be stored; the run then ends `error` with it."""
        self._record_failures.append(message)

    @property
    def record_failures(self) -> tuple[str, ...]:
        """Why grading passes could not be stored, in order (empty when all were)."""
        return tuple(self._record_failures)

    def mark_finished(self) -> None:
        """Wake `wait()`ers: the run's terminal status is stored (or storing it failed)."""
        self._finished.set()

    # ---------------------------------------------------------------- watching

    def done(self) -> bool:
        """Whether the run has finished (its terminal status is stored)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run finishes or `timeout` seconds pass; returns `done()`."""
        return self._finished.wait(timeout)

    def run(self) -> dict[str, Any]:
        """The run's row as stored now (status, iterations, tokens, ...)."""
        return self._store.runs.get(self.run_id)

    @property
    def status(self) -> str:
        """The run's latest status as stored (`running` until it ends)."""
        return str(self.run()["status"])

    @property
    def iteration(self) -> int:
        """Number of grading passes stored so far."""
        return len(self._store.passes.of_run(self.run_id))

    def latest_evaluation(self) -> dict[str, Any] | None:
        """The most recent stored grading pass, or `None` before the first."""
        evaluations = self._store.passes.of_run(self.run_id)
        final = final_pass(self._store.runs.get(self.run_id), evaluations)
        return None if final is None else dict(final)
