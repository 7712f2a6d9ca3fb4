"""A re-grade on a background thread (the Experiments page's): the job and its start."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_core.workbench.regrade import RegradeResult, _defaults, _finish, _prepare

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = ["RegradeJob", "start_regrade"]


@dataclass
class RegradeJob:
    """A re-grade running on a background thread; progress: `store.get_experiment(id)["items"]`."""

    experiment_id: int
    total: int
    """Gradings to do (passes times samples)."""
    stop_event: threading.Event
    thread: threading.Thread | None = None
    error: str | None = None
    result: RegradeResult | None = None

    def done(self) -> bool:
        """Whether the thread has finished."""
        return self.thread is not None and not self.thread.is_alive()

    def stop(self) -> None:
        """Start no more gradings; the experiment ends `stopped`."""
        self.stop_event.set()


def start_regrade(store: Store, **options: Any) -> RegradeJob:
    """`regrade` on a background thread: checked (and the experiment created) here, graded there.

    Raises:
        As `regrade`, from here.
    """
    plan = _prepare(store, **_defaults(options))
    job = RegradeJob(
        experiment_id=plan.experiment_id,
        total=len(plan.items) * plan.samples,
        stop_event=plan.stop_event,
    )

    def work() -> None:
        try:
            job.result = _finish(plan)
        except Exception as exc:
            job.error = f"{type(exc).__name__}: {exc}"

    job.thread = threading.Thread(target=work, name=f"regrade-{plan.experiment_id}", daemon=True)
    job.thread.start()
    return job
