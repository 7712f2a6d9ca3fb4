"""Human labels on stored passes: set, change, delete, read, and the review queue.

A label is a person's verdict on one criterion of one grading pass (an `evaluations` row):
`human_passed`, who said it (`reviewer`), an optional note and when. There is one label per
pass and criterion; labelling it again replaces it. The review queue reads an
experiment's verdicts in place of a pass's own, hence the base class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.limits import MAX_NOTE_CHARS, cut_text
from rubric_core.store.errors import StoreError
from rubric_core.store.filters import RunFilters
from rubric_core.store.rows import pass_run_id, stored_verdict
from rubric_core.store.sqlbase import now_iso
from rubric_core.store.validation import require_int, require_text

if TYPE_CHECKING:
    from rubric_core.schema import RubricEvaluation
    from rubric_core.store.queries.experiments import Experiments
    from rubric_core.store.queries.passes import Passes
    from rubric_core.store.queries.runs import Runs
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["LabelRecord", "Labels"]

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
    return (
        evaluation_id,
        criterion,
        passed,
        reviewer,
        cut_text((note or "").strip(), MAX_NOTE_CHARS),
    )


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


class Labels:
    """`Store.labels`: human labels and the review queue (see the module docstring)."""

    def __init__(
        self, backend: SQLBackend, runs: Runs, passes: Passes, experiments: Experiments
    ) -> None:
        self._backend = backend
        self._runs = runs
        self._passes = passes
        self._experiments = experiments

    def save(
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
        return self.import_rows(
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

    def record_labelled_pass(
        self,
        run_id: int,
        evaluation: RubricEvaluation,
        labels: Mapping[str, bool],
        *,
        reviewer: str,
    ) -> tuple[int, int]:
        """`record_evaluation` and `set_labels` on that pass, in one transaction: a pass is
        never kept without the labels that came with it (a graded dataset's row, a
        person's verdicts), nor labels without their pass. Returns (evaluation id, labels).

        Raises:
            StoreError: As the two do; nothing is stored then.
        """
        if not isinstance(labels, Mapping):
            msg = f"labels must map criterion to true/false, got {labels!r}"
            raise StoreError(msg, kind="invalid")
        record = self._passes.write_job(run_id, evaluation)
        given = dict(labels)

        def job(tx: Tx) -> tuple[int, int]:
            evaluation_id = record(tx)
            rows = [
                _clean_label(
                    f"label {i + 1}",
                    {
                        "evaluation_id": evaluation_id,
                        "criterion": criterion,
                        "human_passed": passed,
                        "reviewer": reviewer,
                    },
                )
                for i, (criterion, passed) in enumerate(given.items())
            ]
            return evaluation_id, write_labels(tx, rows) if rows else 0

        return self._backend.write(job)

    def import_rows(self, labels: Iterable[Mapping[str, Any]]) -> int:
        """Store many labels `{evaluation_id, criterion, human_passed, reviewer, note?}` in
        one transaction: all of them, or (on any error) none. Returns how many.

        Raises:
            StoreError: Of kind `invalid`, naming the first bad label; nothing is stored.
        """
        rows = [_clean_label(f"label {i + 1}", label) for i, label in enumerate(labels)]
        if not rows:
            return 0
        return self._backend.write(lambda tx: write_labels(tx, rows))

    def of_passes(self, evaluation_ids: Iterable[int]) -> dict[int, dict[str, LabelRecord]]:
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

    def _review_scope(
        self,
        batch_id: str | None,
        run_ids: Sequence[int] | None,
        filters: RunFilters | None,
    ) -> tuple[str, list[Any]] | None:
        """The `WHERE` clause over `runs r` the review methods share; `None`: no run at all."""
        filters = RunFilters.from_args(filters, **({"batch_id": batch_id} if batch_id else {}))
        where, params = self._runs.filter_sql(filters)
        if run_ids is not None:
            ids = [require_int(i, "run id", minimum=1) for i in run_ids]
            if not ids:
                return None
            where += f" AND r.id IN ({', '.join('?' for _ in ids)})"
            params = [*params, *ids]
        return where, params

    def review_items(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
        experiment_id: int | None = None,
        final_only: bool = True,
        judged_only: bool = True,
        evaluation_ids: Sequence[int] | None = None,
    ) -> list[dict[str, Any]]:
        """The passes to review, ordered by evaluation id, with their labels.

        A pass without verdicts (a `grader_error`) has nothing to label or agree with and
        is left out, unless `judged_only=False`. `evaluation_ids` keeps only those passes
        (the ones a page shows), so their criteria and labels are all that is read.

        Each item: `{evaluation_id, run_id, grading_run_id, iteration, input, draft,
        criteria, result, explanation, grader_model, labels}` (`labels` as in `labels_for`).
        With `experiment_id`, the experiment's source passes, with the experiment's
        verdicts as `criteria` (samples combined by strict majority) and its grader.

        Raises:
            StoreError: Unknown run, batch filter value or experiment.
        """
        scope = self._review_scope(batch_id, run_ids, filters)
        if scope is None:
            return []
        where, params = scope
        # `runs.final_evaluation_id` is the run's latest pass, kept by triggers (final_pass.py).
        final = " AND e.id = r.final_evaluation_id" if final_only else ""
        experiment: dict[int, list[dict[str, Any]]] | None = None
        grader_override: str | None = None
        if experiment_id is not None:
            settings = self._experiments.get(experiment_id)
            experiment = self._experiments.verdicts(experiment_id)
            grader_override = settings["grader_model"]
            ids = list(experiment)
            if not ids:
                return []
            where += f" AND e.id IN ({', '.join('?' for _ in ids)})"
            params = [*params, *ids]
            final = ""
        elif judged_only:
            final += " AND EXISTS (SELECT 1 FROM criterion_results c WHERE c.evaluation_id = e.id)"
        select = (
            "SELECT e.id AS evaluation_id, e.run_id, e.grading_run_id, e.iteration, r.input, "
            "e.draft, e.result, e.explanation, r.grader_model FROM evaluations e "
            f"JOIN runs r ON r.id = e.run_id WHERE {where}{final}"
        )
        if evaluation_ids is None:
            rows = self._backend.query(f"{select} ORDER BY e.id", params)
        else:
            wanted = sorted({require_int(i, "evaluation id", minimum=1) for i in evaluation_ids})
            rows = []
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows += self._backend.query(
                    f"{select} AND e.id IN ({', '.join('?' for _ in chunk)}) ORDER BY e.id",
                    [*params, *chunk],
                )
        if not rows:
            return []
        criteria = self._criteria_of([int(r["evaluation_id"]) for r in rows])
        labels = self.of_passes(int(r["evaluation_id"]) for r in rows)
        for row in rows:
            eid = int(row["evaluation_id"])
            row["criteria"] = experiment[eid] if experiment is not None else criteria.get(eid, [])
            if grader_override is not None:
                row["grader_model"] = grader_override
            row["labels"] = labels.get(eid, {})
        return [row for row in rows if row["criteria"]] if judged_only else rows

    def review_ids(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[int]:
        """A page of the review queue: the ids `review_items()` (final, judged passes) lists.

        Read from the index on the runs' final passes, so a page costs the same at any
        store size. `after` / `before` bound the ids (exclusive); `descending` reads the
        queue backwards (the pass before one: `before=id, limit=1, descending=True`).

        Raises:
            StoreError: Unknown rubric, version, or a bad bound.
        """
        scope = self._review_scope(batch_id, run_ids, filters)
        if scope is None:
            return []
        where, params = self._queue_bounds(*scope, after=after, before=before)
        sql = (
            f"SELECT r.final_evaluation_id AS evaluation_id FROM runs r WHERE {where} "
            f"ORDER BY r.final_evaluation_id{' DESC' if descending else ''}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params = [*params, require_int(limit, "limit", minimum=0)]
        return [int(row["evaluation_id"]) for row in self._backend.query(sql, params)]

    def review_counts(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
        before: int | None = None,
    ) -> dict[str, int]:
        """`{"passes": n, "labelled": m}`: how many passes the review queue holds and how
        many of them have every criterion labelled (`labelled_ids(review_items())`), by
        `COUNT` queries. With `before`, only the passes with a lower id (a position).
        """
        scope = self._review_scope(batch_id, run_ids, filters)
        if scope is None:
            return {"passes": 0, "labelled": 0}
        where, params = self._queue_bounds(*scope, before=before)
        passes = self._backend.query_one(f"SELECT COUNT(*) AS n FROM runs r WHERE {where}", params)
        done_sql, done_params = self._labelled_sql(where, params, fully=True)
        done = self._backend.query_one(f"SELECT COUNT(*) AS n FROM ({done_sql}) x", done_params)
        return {
            "passes": int(passes["n"]) if passes else 0,
            "labelled": int(done["n"]) if done else 0,
        }

    def labelled_pass_ids(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
        fully: bool = True,
    ) -> list[int]:
        """The review queue's passes with every criterion labelled (`fully=False`: with any
        label), ordered by id. Read starting from the labels, which are few."""
        scope = self._review_scope(batch_id, run_ids, filters)
        if scope is None:
            return []
        sql, params = self._labelled_sql(*self._queue_bounds(*scope), fully=fully)
        rows = self._backend.query(f"{sql} ORDER BY x.evaluation_id", params)
        return [int(row["evaluation_id"]) for row in rows]

    def labelled_items(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
    ) -> list[dict[str, Any]]:
        """The items of `review_items()` that have at least one label, read from the labels."""
        ids = self.labelled_pass_ids(
            batch_id=batch_id, run_ids=run_ids, filters=filters, fully=False
        )
        if not ids:
            return []
        return self.review_items(
            batch_id=batch_id, run_ids=run_ids, filters=filters, evaluation_ids=ids
        )

    def review_criteria(
        self,
        *,
        batch_id: str | None = None,
        run_ids: Sequence[int] | None = None,
        filters: RunFilters | None = None,
    ) -> list[str]:
        """The criteria the review queue's passes judged, in first-seen order (by pass id,
        then position), as `dict.fromkeys` over `review_items()`'s criteria gives them.

        Reads the queue a page at a time and stops once every criterion the matching
        rubric versions ever had a verdict on (`criterion_pass_counts`) has been seen,
        which is usually on the first page.
        """
        scope = self._review_scope(batch_id, run_ids, filters)
        if scope is None:
            return []
        where, params = self._queue_bounds(*scope)
        known = {
            row["criterion"]
            for row in self._backend.query(
                "SELECT DISTINCT c.criterion FROM criterion_pass_counts c WHERE EXISTS "
                f"(SELECT 1 FROM runs r WHERE r.rubric_version_id = c.rubric_version_id AND {where})",
                params,
            )
        }
        seen: dict[str, None] = {}
        after, size = None, 20
        while True:
            ids = self.review_ids(
                batch_id=batch_id, run_ids=run_ids, filters=filters, after=after, limit=size
            )
            for verdicts in self._criteria_of(ids).values():
                seen.update(dict.fromkeys(str(v["name"]) for v in verdicts))
            if len(ids) < size or known <= seen.keys():
                return list(seen)
            after, size = ids[-1], size * 4

    def _queue_bounds(
        self,
        where: str,
        params: list[Any],
        *,
        after: int | None = None,
        before: int | None = None,
    ) -> tuple[str, list[Any]]:
        """`where` narrowed to runs whose final pass is judged, within the bounds."""
        where += " AND r.final_judged = 1"
        if after is not None:
            where += " AND r.final_evaluation_id > ?"
            params = [*params, require_int(after, "after", minimum=0)]
        if before is not None:
            where += " AND r.final_evaluation_id < ?"
            params = [*params, require_int(before, "before", minimum=0)]
        return where, params

    @staticmethod
    def _labelled_sql(where: str, params: list[Any], *, fully: bool) -> tuple[str, list[Any]]:
        """`SELECT x.evaluation_id FROM (...) x`: the queue's passes with labels (`fully`:
        every criterion labelled), starting from the labelled passes (read off the labels'
        `(run_id, evaluation_id)` index), each run then looked up by its key. `EXISTS`, not a
        join: SQLite would build a Bloom filter over every run for the join."""
        sql = (
            "SELECT x.evaluation_id FROM (SELECT DISTINCT l.run_id, l.evaluation_id FROM labels l) x "
            "WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = x.run_id "
            f"AND r.final_evaluation_id = x.evaluation_id AND {where})"
        )
        if fully:
            sql += (
                " AND NOT EXISTS (SELECT 1 FROM criterion_results c "
                "WHERE c.evaluation_id = x.evaluation_id AND NOT EXISTS (SELECT 1 FROM labels l2 "
                "WHERE l2.evaluation_id = c.evaluation_id AND l2.criterion = c.criterion))"
            )
        return sql, params

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
