"""A batch read input by input: each input's run, status, passes, score and final verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.scoring import shown_score
from rubric_core.ui.format import format_timestamp, one_line, score_cell
from rubric_core.ui.status import status_badge

if TYPE_CHECKING:
    from rubric_core.store import Store

__all__ = [
    "VERDICT_MARKS",
    "batch_choice_label",
    "batch_input_rows",
    "criterion_column",
    "final_pass_verdicts",
    "known_batches",
]

VERDICT_MARKS = {"pass": "✓", "fail": "✗", "insufficient": "?", "not judged": "–"}
"""How a criterion's final verdict reads in the per-input table."""

_COLUMN_CHARS = 32


def known_batches(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    """The stored batches, newest first: `{batch_id, runs, started_at}`, for the batch filter.

    `started_at` is when the batch's first run started.
    """
    return store.runs.batches(limit)


def batch_choice_label(batch: Mapping[str, Any]) -> str:
    """How a batch reads in the filter: `"batch-1a2b · 3 runs · 2025-01-02 10:00"`.

    Examples:
        >>> batch_choice_label({"batch_id": "batch-1a2b", "runs": 1, "started_at": None})
        'batch-1a2b · 1 run'
    """
    runs = int(batch.get("runs") or 0)
    parts = [str(batch["batch_id"]), f"{runs} run{'' if runs == 1 else 's'}"]
    if batch.get("started_at"):
        parts.append(format_timestamp(batch["started_at"]))
    return " · ".join(parts)


def final_pass_verdicts(store: Store, batch_id: str) -> dict[int, dict[str, str]]:
    """Each run's final-pass verdicts in a batch: run id -> criterion -> pass/fail/insufficient.

    The final pass is a run's last stored pass. A run whose last pass was a grader
    error (no verdicts), or that has no pass yet, is absent.
    """
    verdicts: dict[int, dict[str, str]] = {}
    for row in store.passes.final_verdicts_of_batch(batch_id):
        word = "insufficient" if row["insufficient"] else ("pass" if row["passed"] else "fail")
        verdicts.setdefault(int(row["run_id"]), {})[str(row["criterion"])] = word
    return verdicts


def criterion_column(position: int, criterion: str) -> str:
    """A criterion's column name in the per-input table: numbered, cut to fit a column.

    Examples:
        >>> criterion_column(0, "Exactly two sentences")
        '1. Exactly two sentences'
    """
    return f"{position + 1}. {one_line(criterion, _COLUMN_CHARS)}"


def _input_order(run: Mapping[str, Any]) -> tuple[int, int]:
    index = run.get("input_index")
    return (int(index) if index is not None else 1 << 62, int(run["id"]))


def batch_input_rows(
    runs: Sequence[Mapping[str, Any]],
    verdicts: Mapping[int, Mapping[str, str]],
    criteria: Sequence[str],
) -> list[dict[str, Any]]:
    """One row per input of a batch: its run, status, passes, score, a mark per criterion, input.

    Rows follow the dataset's order (`input_index`). `criteria` (the rubric version's, in
    its order) name the verdict columns, as `criterion_column` spells them; criteria the
    grader judged that the rubric does not list are added after them. The `score` column
    is there only when some run has a score.

    Examples:
        >>> runs = [{"id": 7, "input_index": 1, "status": "failed", "iterations": 2,
        ...          "input": "b"},
        ...         {"id": 6, "input_index": 0, "status": "satisfied", "iterations": 1,
        ...          "input": "a"}]
        >>> rows = batch_input_rows(runs, {6: {"short": "pass"}, 7: {"short": "fail"}}, ["short"])
        >>> [(r["input #"], r["run"], r["1. short"]) for r in rows]
        [(1, 6, '✓'), (2, 7, '✗')]
    """
    names = list(dict.fromkeys([*criteria, *(c for v in verdicts.values() for c in v)]))
    scored = any(run.get("score") is not None for run in runs)
    rows = []
    for run in sorted(runs, key=_input_order):
        index = run.get("input_index")
        row: dict[str, Any] = {
            "input #": int(index) + 1 if index is not None else None,
            "run": int(run["id"]),
            "status": status_badge(run.get("status")),
            "passes": int(run.get("iterations") or 0),
        }
        if scored:
            row["score"] = score_cell(shown_score(run.get("score")))  # one run: as stored
        judged = verdicts.get(int(run["id"]), {})
        for position, name in enumerate(names):
            row[criterion_column(position, name)] = VERDICT_MARKS[judged.get(name, "not judged")]
        row["input"] = one_line(run.get("input"), 80)  # last: the widest column
        rows.append(row)
    return rows
