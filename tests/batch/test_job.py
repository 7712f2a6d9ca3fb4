"""One job object: a batch, a grade and a re-grade are a `Job`, run by the same executors.

Guards the job object of issue 30: grade and re-grade used thread pools of their own
(no process or Ray executor, no shared progress), and each front door had its own
16-parameter signature and its own background thread.
"""

from __future__ import annotations

import pytest

from rubric_core.batch import Grader, GradeRows, Job, RegradePasses, RunInputs
from rubric_core.runs.spec import SpecError
from rubric_core.store import NewRun, Store
from rubric_core.workbench import grade_outputs, regrade, start_job

CHECKS_ONLY = "- Mentions a price {regex: \\$\\d}\n- [-5] Shouts {regex: !}"
OUTPUTS = ["Great!", "$5 deal", "Buy now!"]


def _rows() -> tuple[dict, ...]:
    return tuple(
        {"row": n + 2, "input": f"q{n}", "output": text, "labels": {}}
        for n, text in enumerate(OUTPUTS)
    )


def _grade_job(version_id: int, **options) -> Job:
    return Job(GradeRows(_rows(), version_id, Grader("none")), **options)


def _unpicklable_factory():
    return lambda: None


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Job(GradeRows(_rows(), 1, Grader("none")), concurrency=0), "concurrency"),
        (lambda: Job(GradeRows(_rows(), 1, Grader("none")), executor="dask"), "executor"),
        (lambda: Job(GradeRows((), 1, Grader("none"))), "rows"),
        (lambda: Job(GradeRows(_rows(), 1, Grader("none", samples=21))), "grader.samples"),
        (lambda: Job(GradeRows(_rows(), 1, Grader(" "))), "grader.model"),
        (lambda: Job(GradeRows(_rows(), 1, Grader("none")), resume=True), "batch_id"),
        (lambda: Job(RegradePasses(Grader("none")), resume=True), "experiment_id"),
        (lambda: Job(GradeRows(_rows(), 1, Grader("none")), ray_task_cpus=0), "ray_task_cpus"),
    ],
)
def test_a_job_names_the_field_that_is_wrong_when_built(build, field):
    """A bad request is refused when the job is built, its field named, before any store."""
    with pytest.raises(SpecError) as caught:
        build()
    assert caught.value.field == field


def test_the_inputs_of_a_batch_are_checked_when_the_job_is_built():
    with pytest.raises(SpecError, match=r"inputs\[1\]"):
        RunInputs(spec=None, inputs=("fine", "  "))  # type: ignore[arg-type]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_grade_runs_on_every_local_executor_with_the_same_outcome(tmp_path, executor):
    """The grade's rows are units the process executor runs too (it had a thread pool
    of its own), with progress per row and the same summary."""
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("deal", CHECKS_ONLY)
        seen: list[tuple[int, int]] = []
        summary = grade_outputs(
            store,
            _grade_job(version["id"], executor=executor, concurrency=2),
            progress=lambda done, total, row: seen.append((done, total)),
        )
        runs = store.runs.of_batch(summary["batch_id"])
    assert summary["by_result"] == {"needs_revision": 2, "satisfied": 1}
    assert sorted(r["input_index"] for r in runs) == [0, 1, 2]
    assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]
    assert len(summary["run_ids"]) == 3 and None not in summary["evaluation_ids"]


def test_a_regrade_runs_on_worker_processes(tmp_path):
    """Re-grade gradings are units of the same executors: stored as experiment items."""
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("deal", CHECKS_ONLY)
        graded = grade_outputs(store, _grade_job(version["id"]))
        work = RegradePasses(Grader("none", samples=2), batch_id=graded["batch_id"])
        result = regrade(store, Job(work, executor="process", concurrency=2))
        experiment = store.experiments.get(result["experiment_id"])
        items = store.experiments.items(result["experiment_id"])
    assert (result["items"], result["errors"]) == (6, 0)
    assert experiment["status"] == "done" and len(items) == 6
    assert result["consistency"] is not None


def test_an_unpicklable_grader_factory_is_refused_before_anything_is_stored(tmp_path):
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("deal", CHECKS_ONLY)
        grader = Grader("none", factory=_unpicklable_factory())
        job = Job(GradeRows(_rows(), version["id"], grader), executor="process")
        with pytest.raises(SpecError, match=r"grader\.factory: must be picklable"):
            grade_outputs(store, job)
        assert store.runs.count() == 0


def test_a_stopped_grade_grades_nothing_more_and_resumes(tmp_path):
    """The stop event and resume of a batch hold for a grade: the same `Job` fields."""
    import threading

    stop = threading.Event()
    stop.set()
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("deal", CHECKS_ONLY)
        first = grade_outputs(store, _grade_job(version["id"], batch_id="g-1"), stop_event=stop)
        assert (first["run_ids"], store.runs.count()) == ([], 0)
        store.runs.create(
            NewRun(rubric_version_id=version["id"], input="q0", agent_model="", grader_model="checks",
            grader_tools=[], max_iterations=1, agent_kind="graded", batch_id="g-1", input_index=0),
        )  # fmt: skip
        resumed = grade_outputs(store, _grade_job(version["id"], batch_id="g-1", resume=True))
        assert store.runs.count() == 3  # the interrupted row's run was continued, not doubled
    assert resumed["skipped"] == 0 and len(resumed["run_ids"]) == 3


def test_start_job_runs_any_job_in_the_background_and_reports_it(tmp_path):
    """One background starter: a grade job's handle counts its rows and holds its summary."""
    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("deal", CHECKS_ONLY)
        handle = start_job(store, _grade_job(version["id"]))
        assert handle.wait(60) and handle.error is None
        assert (handle.kind, handle.finished, handle.total) == ("grade", 3, 3)
        assert handle.result["batch_id"] == handle.batch_id
        regraded = start_job(store, Job(RegradePasses(Grader("none"), batch_id=handle.batch_id)))
        assert regraded.wait(60) and regraded.error is None
        assert regraded.batch_id == f"experiment-{regraded.experiment_id}"
        assert regraded.result["items"] == 3
