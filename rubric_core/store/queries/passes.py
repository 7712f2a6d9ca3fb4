"""Grading passes: recording one with its verdicts, reading a run's passes, pass rates."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rubric_core.rubric import RubricError, parse_criteria
from rubric_core.store.errors import StoreError
from rubric_core.store.filters import RunFilters
from rubric_core.store.pass_counts import served_by_counts, summary_pass_rates_sql
from rubric_core.store.queries.runs import require_run
from rubric_core.store.rows import evaluation_row, stored_verdict
from rubric_core.store.sqlbase import now_iso, returned_id
from rubric_core.store.validation import require_int

if TYPE_CHECKING:
    from collections.abc import Callable

    from rubric_core.schema import RubricEvaluation
    from rubric_core.store.queries.rubrics import Rubrics
    from rubric_core.store.queries.runs import Runs
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["Passes"]

_LATEST_PASS = "r.final_evaluation_id"
"""The id of run `r`'s final pass: the column the triggers of `store.final_pass` keep
(its latest `started_at`, then its highest id); the one definition of "the final pass"."""


class Passes:
    """`Store.passes`: grading passes, their verdicts and pass rates."""

    def __init__(self, backend: SQLBackend, runs: Runs, rubrics: Rubrics) -> None:
        self._backend = backend
        self._runs = runs
        self._rubrics = rubrics
        self._weight_cache: dict[int, dict[str, int]] = {}
        """Criterion weights per run id (`_weights`)."""

    def record(self, run_id: int, evaluation: RubricEvaluation) -> int:
        """Commit one grading pass and its criterion verdicts; returns the evaluation id.

        Idempotent on (run_id, grading_run_id, iteration): recording the same pass
        again (a resumed run) updates it in place and returns the same id. The run's
        pass count, grader tokens, regressions, latest result and score follow.

        Raises:
            StoreError: Unknown run, or the evaluation dict is malformed.
        """
        return self._backend.write(self.write_job(run_id, evaluation))

    def write_job(self, run_id: int, evaluation: RubricEvaluation) -> Callable[[Tx], int]:
        """The write job of `record_evaluation` (checked now), for a caller that adds to
        its transaction (`record_labelled_pass`)."""
        run_id = require_int(run_id, "run_id")
        values, criteria = evaluation_row(evaluation, self._weights(run_id))
        values = {**values, "run_id": run_id, "recorded_at": now_iso()}
        columns = list(values)
        updates = ", ".join(
            f"{c} = excluded.{c}"
            for c in columns
            if c not in ("run_id", "grading_run_id", "iteration")
        )

        def job(tx: Tx) -> int:
            require_run(tx, run_id)
            evaluation_id = returned_id(
                tx.one(
                    f"INSERT INTO evaluations ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)}) "
                    f"ON CONFLICT (run_id, grading_run_id, iteration) DO UPDATE SET {updates} "
                    "RETURNING id",
                    list(values.values()),
                )
            )
            tx.run("DELETE FROM criterion_results WHERE evaluation_id = ?", (evaluation_id,))
            tx.many(
                "INSERT INTO criterion_results (evaluation_id, position, run_id, criterion, "
                "passed, gap, weight, checked_by, insufficient) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        evaluation_id,
                        row.position,
                        run_id,
                        row.criterion,
                        int(row.passed),
                        row.gap,
                        row.weight,
                        row.checked_by,
                        int(row.insufficient),
                    )
                    for row in criteria
                ],
            )
            # The run's score is its final pass's until finish_run says which draft it kept;
            # the final pass is the column the triggers of `store.final_pass` have just kept.
            tx.run(
                """
                UPDATE runs SET
                    iterations = agg.n, grader_input_tokens = agg.tin,
                    grader_output_tokens = agg.tout, regression_count = agg.regressions,
                    last_result = (SELECT e.result FROM evaluations e
                                   WHERE e.id = runs.final_evaluation_id),
                    score = (SELECT e.score FROM evaluations e
                             WHERE e.id = runs.final_evaluation_id)
                FROM (SELECT COUNT(*) AS n, COALESCE(SUM(grader_input_tokens), 0) AS tin,
                             COALESCE(SUM(grader_output_tokens), 0) AS tout,
                             COALESCE(SUM(regression_count), 0) AS regressions
                      FROM evaluations WHERE run_id = ?) AS agg
                WHERE runs.id = ?
                """,
                (run_id, run_id),
            )
            return evaluation_id

        return job

    def _weights(self, run_id: int) -> dict[str, int]:
        """Criterion name -> weight in the run's rubric (a run's rubric never changes).

        Read once per run. If the read fails, weights default to 1 and the write that
        follows reports what is wrong with the store (and recovers what it can).
        """
        if run_id not in self._weight_cache:
            text = self._runs.take_new_rubric(run_id)  # a run created here: known
            try:
                if text is None:
                    version_id = int(self._runs.get(run_id)["rubric_version_id"])
                    text = self._rubrics.version(version_id)["text"]
            except StoreError:
                return {}
            try:
                weights = {c.name: c.weight for c in parse_criteria(text)}
            except RubricError:  # a custom check this process has not registered
                weights = {}
            self._weight_cache[run_id] = weights
        return self._weight_cache[run_id]

    def of_run(self, run_id: int) -> list[dict[str, Any]]:
        """A run's grading passes, oldest first, each shaped like `RubricEvaluation` plus `id`.

        Raises:
            StoreError: No run has that id.
        """
        run_id = self._runs.known(run_id)
        evaluations = self._backend.query(
            "SELECT id, run_id, grading_run_id, iteration, result, status, explanation, draft, "
            "started_at, duration_s, grader_attempts, grader_input_tokens, grader_output_tokens, "
            "score, regressions, judges "
            "FROM evaluations WHERE run_id = ? ORDER BY started_at, id",
            (run_id,),
        )
        by_id: dict[int, dict[str, Any]] = {}
        for evaluation in evaluations:
            evaluation["criteria"] = []
            evaluation["regressions"] = json.loads(evaluation["regressions"] or "[]")
            judges = evaluation.pop("judges")
            if judges is not None:
                evaluation["judges"] = json.loads(judges)
            by_id[evaluation["id"]] = evaluation
        criteria = self._backend.query(
            "SELECT evaluation_id, criterion, passed, gap, weight, checked_by, insufficient "
            "FROM criterion_results "
            "WHERE evaluation_id IN (SELECT id FROM evaluations WHERE run_id = ?) "
            "ORDER BY evaluation_id, position",
            (run_id,),
        )
        for row in criteria:
            by_id[row["evaluation_id"]]["criteria"].append(stored_verdict(row))
        return evaluations

    def run_of(self, evaluation_id: int) -> int:
        """The run a stored pass belongs to.

        Raises:
            StoreError: Of kind `invalid`: no pass has that id.
        """
        evaluation_id = require_int(evaluation_id, "evaluation_id", minimum=1)
        row = self._backend.query_one(
            "SELECT run_id FROM evaluations WHERE id = ?", (evaluation_id,)
        )
        if row is None:
            msg = f"no grading pass has evaluation id {evaluation_id}"
            raise StoreError(msg, kind="invalid")
        return int(row["run_id"])

    def last_ids(self) -> tuple[int, int]:
        """`(highest run id, highest pass id)`, 0 where there is none. Rows are never deleted,
        so the pair changes exactly when a run or a pass is added."""
        row = self._backend.query_one(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM runs) AS runs, "
            "(SELECT COALESCE(MAX(id), 0) FROM evaluations) AS passes"
        )
        return (int(row["runs"]), int(row["passes"])) if row else (0, 0)

    def final_verdicts_of_batch(self, batch_id: str) -> list[dict[str, Any]]:
        """The verdicts of the final pass of each run of batch `batch_id`: `{run_id, criterion,
        passed, insufficient}`, by run then rubric position. A run whose final pass has no
        verdicts (a grader error), or that has no pass yet, has no rows."""
        return self._backend.query(
            "SELECT cr.run_id AS run_id, cr.criterion AS criterion, cr.passed AS passed, "
            "cr.insufficient AS insufficient FROM criterion_results cr "
            f"WHERE cr.evaluation_id IN (SELECT {_LATEST_PASS} FROM runs r WHERE r.batch_id = ?) "
            "ORDER BY cr.run_id, cr.position",
            (batch_id,),
        )

    def criterion_pass_rates(
        self, filters: RunFilters | None = None, *, final_only: bool = False, **filter_args: Any
    ) -> list[dict[str, Any]]:
        """Per-criterion pass counts over the matching runs' passes, computed in SQL.

        Read from the trigger-kept counts when they serve the filters
        (`pass_counts.served_by_counts`), else counted over the matching verdicts.

        Args:
            filters: Which runs; refined by `filter_args` (the `RunFilters` field names).
            final_only: Count only each run's last pass (its final verdict)
                instead of every pass.

        Returns:
            {criterion, passed, total, pass_rate, position} in rubric order.
        """
        chosen = RunFilters.from_args(filters, **filter_args)
        where, params = self._runs.filter_sql(chosen)  # also checks the rubric and version
        if served_by_counts(chosen, final_only=final_only):
            rubric_id = None if chosen.rubric is None else self._rubrics.id_of(chosen.rubric)
            rows = self._backend.query(*summary_pass_rates_sql(rubric_id, chosen.version_id))
        else:
            final = f" AND e.id = {_LATEST_PASS}"
            rows = self._backend.query(
                f"""
                SELECT cr.criterion AS criterion, SUM(cr.passed) AS passed, COUNT(*) AS total,
                       CAST(SUM(cr.passed) AS DOUBLE PRECISION) / COUNT(*) AS pass_rate,
                       MIN(cr.position) AS position
                FROM runs r
                JOIN evaluations e ON e.run_id = r.id
                JOIN criterion_results cr ON cr.evaluation_id = e.id
                WHERE {where}{final if final_only else ""}
                GROUP BY cr.criterion
                ORDER BY position, criterion
                """,
                params,
            )
        for row in rows:  # PostgreSQL sums to a numeric type
            row["passed"], row["total"] = int(row["passed"]), int(row["total"])
            row["pass_rate"] = float(row["pass_rate"])
        return rows
