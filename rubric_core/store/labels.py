"""Human labels on stored passes: set, change, delete, read, and the review queue.

A label is a person's verdict on one criterion of one grading pass (an `evaluations` row):
`human_passed`, who said it (`reviewer`), an optional note and when. There is one label per
pass and criterion; labelling it again replaces it. The SQL is portable (SQLite and
PostgreSQL: `ON CONFLICT ... DO UPDATE`, no SQLite-only functions), written once and run
on either backend through the shared SQL base (`SQLBackend.write` with a `Tx`,
`SQLBackend.query`). Mixed into `Store`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.store.errors import StoreError
from rubric_core.store.filters import RunFilters
from rubric_core.store.rows import pass_run_id, stored_verdict
from rubric_core.store.sqlbase import now_iso
from rubric_core.store.validation import require_int, require_text

if TYPE_CHECKING:
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["LabelRecord", "LabelsMixin"]

LabelRecord = dict[str, Any]
"""`{"human_passed": bool, "reviewer": str, "label_note": str, "labelled_at": str}`."""

_UPSERT = (
    "INSERT INTO labels (evaluation_id, criterion, run_id, human_passed, reviewer, note, "
    "labelled_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (evaluation_id, criterion) DO UPDATE SET human_passed = excluded.human_passed, "
    "reviewer = excluded.reviewer, note = excluded.note, labelled_at = excluded.labelled_at"
)


def _clean_label(position: str, label: Mapping[str, Any]) -> tuple[int, str, bool, str, str]:
    evaluation_id = require_int(label.get("evaluation_id"), f"{position} evaluation_id", minimum=1)
    criterion = require_text(label.get("criterion"), f"{position} criterion").strip()
    passed = label.get("human_passed")
    if not isinstance(passed, bool):
        msg = f"{position} ({criterion!r}): human_passed must be true or false, got {passed!r}"
        raise StoreError(msg, kind="invalid")
    reviewer = require_text(label.get("reviewer"), f"{position} reviewer").strip()
    note = label.get("note")
    if note is not None and not isinstance(note, str):
        msg = f"{position} ({criterion!r}): note must be text, got {note!r}"
        raise StoreError(msg, kind="invalid")
    return evaluation_id, criterion, passed, reviewer, (note or "").strip()


def write_labels(tx: Tx, rows: Sequence[tuple[int, str, bool, str, str]]) -> int:
    """Upsert labels inside the caller's write job; raises (so nothing is kept) when a
    pass is unknown or did not judge the criterion. Used by `grade_by_person` too."""
    now = now_iso()
    judged: dict[int, tuple[int, set[str]]] = {}
    for evaluation_id, criterion, passed, reviewer, note in rows:
        if evaluation_id not in judged:
            run_id = pass_run_id(tx, evaluation_id)
            names = {
                r[0]
                for r in tx.all(
                    "SELECT criterion FROM criterion_results WHERE evaluation_id = ?",
                    (evaluation_id,),
                )
            }
            judged[evaluation_id] = (run_id, names)
        run_id, names = judged[evaluation_id]
        if criterion not in names:
            listed = ", ".join(map(repr, sorted(names))) or "none"
            msg = (
                f"pass {evaluation_id} has no criterion {criterion!r}; its criteria: {listed}. "
                "No label was stored."
            )
            raise StoreError(msg, kind="invalid")
        tx.run(_UPSERT, (evaluation_id, criterion, run_id, int(passed), reviewer, note, now))
    return len(rows)


class LabelsMixin:
    """The label methods of `Store` (see the module docstring)."""

    _backend: SQLBackend

    def set_labels(
        self,
        evaluation_id: int,
        labels: Mapping[str, bool],
        *,
        reviewer: str,
        note: str | None = None,
        notes: Mapping[str, str] | None = None,
    ) -> int:
        """Label criteria of one pass (new labels, or changes to earlier ones); returns how many.

        Args:
            evaluation_id: The pass (`run_evaluations(...)[i]["id"]`).
            labels: Criterion (as the pass judged it) to the person's verdict.
            reviewer: Who labels.
            note: A note stored on every label given here.
            notes: Notes per criterion (win over `note`).

        Raises:
            StoreError: Of kind `invalid`: unknown pass, a criterion the pass did not judge,
                a verdict that is not a bool, an empty reviewer. Nothing is stored then.

        Examples:
            >>> store.set_labels(12, {"has a title": True}, reviewer="ana")  # doctest: +SKIP
            1
        """
        if not isinstance(labels, Mapping):
            msg = f"labels must map criterion to true/false, got {labels!r}"
            raise StoreError(msg, kind="invalid")
        notes = notes or {}
        return self.import_labels(
            [
                {
                    "evaluation_id": evaluation_id,
                    "criterion": criterion,
                    "human_passed": passed,
                    "reviewer": reviewer,
                    "note": notes.get(criterion, note),
                }
                for criterion, passed in labels.items()
            ]
        )

    def set_label(
        self,
        evaluation_id: int,
        criterion: str,
        human_passed: bool,
        *,
        reviewer: str,
        note: str | None = None,
    ) -> None:
        """Label (or relabel) one criterion of one pass. Raises as `set_labels`."""
        self.set_labels(evaluation_id, {criterion: human_passed}, reviewer=reviewer, note=note)

    def import_labels(self, labels: Iterable[Mapping[str, Any]]) -> int:
        """Store many labels `{evaluation_id, criterion, human_passed, reviewer, note?}` in
        one transaction: all of them, or (on any error) none. Returns how many.

        Raises:
            StoreError: Of kind `invalid`, naming the first bad label; nothing is stored.
        """
        rows = [_clean_label(f"label {i + 1}", label) for i, label in enumerate(labels)]
        if not rows:
            return 0
        return self._backend.write(lambda tx: write_labels(tx, rows))

    def delete_label(self, evaluation_id: int, criterion: str) -> None:
        """Remove one label (no error when there is none)."""
        evaluation_id = require_int(evaluation_id, "evaluation_id", minimum=1)
        criterion = require_text(criterion, "criterion").strip()

        def job(tx: Tx) -> None:
            tx.run(
                "DELETE FROM labels WHERE evaluation_id = ? AND criterion = ?",
                (evaluation_id, criterion),
            )

        self._backend.write(job)

    def evaluation_run_id(self, evaluation_id: int) -> int:
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

    def labels_for(self, evaluation_ids: Iterable[int]) -> dict[int, dict[str, LabelRecord]]:
        """`{evaluation_id: {criterion: {human_passed, reviewer, label_note, labelled_at}}}`
        for the given passes (those without labels are left out)."""
        ids = [require_int(i, "evaluation id", minimum=1) for i in evaluation_ids]
        found: dict[int, dict[str, LabelRecord]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._backend.query(
                "SELECT evaluation_id, criterion, human_passed, reviewer, note, labelled_at "
                f"FROM labels WHERE evaluation_id IN ({', '.join('?' for _ in chunk)}) "
                "ORDER BY evaluation_id, criterion",
                chunk,
            )
            for row in rows:
                found.setdefault(int(row["evaluation_id"]), {})[row["criterion"]] = {
                    "human_passed": bool(row["human_passed"]),
                    "reviewer": row["reviewer"],
                    "label_note": row["note"],
                    "labelled_at": row["labelled_at"],
                }
        return found

    def all_labels(self, filters: RunFilters | None = None) -> dict[int, dict[str, bool]]:
        """Every label on the runs the filters match: `{evaluation_id: {criterion: bool}}`."""
        where, params = self._backend.run_filter_sql(filters or RunFilters())
        rows = self._backend.query(
            "SELECT l.evaluation_id, l.criterion, l.human_passed FROM labels l "
            f"JOIN runs r ON r.id = l.run_id WHERE {where} ORDER BY l.evaluation_id, l.criterion",
            params,
        )
        found: dict[int, dict[str, bool]] = {}
        for row in rows:
            found.setdefault(int(row["evaluation_id"]), {})[row["criterion"]] = bool(
                row["human_passed"]
            )
        return found

    def review_items(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
        experiment_id: int | None = None,
        final_only: bool = True,
        judged_only: bool = True,
    ) -> list[dict[str, Any]]:
        """The passes to review, ordered by evaluation id, with their labels.

        A pass without verdicts (a `grader_error`) has nothing to label or agree with and
        is left out, unless `judged_only=False`.

        Each item: `{evaluation_id, run_id, grading_run_id, iteration, input, draft,
        criteria, result, explanation, grader_model, labels}` (`labels` as in `labels_for`).
        With `experiment_id`, the experiment's source passes, with the experiment's
        verdicts as `criteria` (samples combined by strict majority) and its grader.

        Raises:
            StoreError: Unknown run, batch filter value or experiment.
        """
        filters = RunFilters.from_args(filters, **({"batch_id": batch_id} if batch_id else {}))
        where, params = self._backend.run_filter_sql(filters)
        if run_ids is not None:
            ids = [require_int(i, "run id", minimum=1) for i in run_ids]
            if not ids:
                return []
            where += f" AND r.id IN ({', '.join('?' for _ in ids)})"
            params = [*params, *ids]
        final = (
            " AND e.id = (SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id "
            "ORDER BY e2.started_at DESC, e2.id DESC LIMIT 1)"
            if final_only
            else ""
        )
        experiment: dict[int, list[dict[str, Any]]] | None = None
        grader_override: str | None = None
        if experiment_id is not None:
            settings = self.get_experiment(experiment_id)  # type: ignore[attr-defined]
            experiment = self.experiment_verdicts(experiment_id)  # type: ignore[attr-defined]
            grader_override = settings["grader_model"]
            ids = list(experiment)
            if not ids:
                return []
            where += f" AND e.id IN ({', '.join('?' for _ in ids)})"
            params = [*params, *ids]
            final = ""
        rows = self._backend.query(
            "SELECT e.id AS evaluation_id, e.run_id, e.grading_run_id, e.iteration, r.input, "
            "e.draft, e.result, e.explanation, r.grader_model FROM evaluations e "
            f"JOIN runs r ON r.id = e.run_id WHERE {where}{final} ORDER BY e.id",
            params,
        )
        if not rows:
            return []
        criteria = self._criteria_of([int(r["evaluation_id"]) for r in rows])
        labels = self.labels_for(int(r["evaluation_id"]) for r in rows)
        for row in rows:
            eid = int(row["evaluation_id"])
            row["criteria"] = experiment[eid] if experiment is not None else criteria.get(eid, [])
            if grader_override is not None:
                row["grader_model"] = grader_override
            row["labels"] = labels.get(eid, {})
        return [row for row in rows if row["criteria"]] if judged_only else rows

    def review_pass(self, evaluation_id: int) -> dict[str, Any]:
        """One stored pass in the shape of `review_items` (for `?pass=<evaluation id>`).

        Raises:
            StoreError: Of kind `invalid`: no pass has that id.
        """
        run_id = self.evaluation_run_id(evaluation_id)
        items = self.review_items(run_ids=[run_id], final_only=False, judged_only=False)
        return next(item for item in items if int(item["evaluation_id"]) == int(evaluation_id))

    def _criteria_of(self, evaluation_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
        found: dict[int, list[dict[str, Any]]] = {}
        for start in range(0, len(evaluation_ids), 500):
            chunk = list(evaluation_ids[start : start + 500])
            rows = self._backend.query(
                "SELECT evaluation_id, criterion, passed, gap, insufficient FROM criterion_results "
                f"WHERE evaluation_id IN ({', '.join('?' for _ in chunk)}) "
                "ORDER BY evaluation_id, position",
                chunk,
            )
            for row in rows:
                found.setdefault(int(row["evaluation_id"]), []).append(stored_verdict(row))
        return found
