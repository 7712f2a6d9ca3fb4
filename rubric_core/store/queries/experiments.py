"""Experiments: stored passes graded again with other settings, kept apart from the runs.

An experiment holds its settings (rubric version, grader model, prompt, tools, samples,
which passes) and one item per source pass and sample, each with its verdicts. The source
runs and passes are never changed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.evaluate import combine_panel
from rubric_core.limits import is_single_line
from rubric_core.store.errors import StoreError
from rubric_core.store.owner import current_owner, pid_alive
from rubric_core.store.rows import evaluation_row, pass_run_id, stored_verdict
from rubric_core.store.sqlbase import now_iso, returned_id
from rubric_core.store.validation import MAX_NAME_CHARS, optional_text, require_int, require_text

if TYPE_CHECKING:
    from rubric_core.schema import RubricEvaluation
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["EXPERIMENT_STATUSES", "Experiments"]

EXPERIMENT_STATUSES: tuple[str, ...] = ("running", "done", "stopped", "error", "interrupted")
"""An experiment is `running` while it grades, then `done`, `stopped` (on request) or
`error`; `interrupted` when its process went away mid-way (marked when a store opens, as
for runs); `regrade --resume` continues a stopped or interrupted one."""

_COLUMNS = (
    "x.id, x.name, rb.name AS rubric, x.rubric_id, x.rubric_version_id, rv.version, "
    "x.grader_model, x.grader_system_prompt, x.grader_tools, x.samples, x.all_passes, "
    "x.source, x.status, x.error, x.created_at, x.finished_at, x.pid, x.host, x.proc_start, "
    "(SELECT COUNT(*) FROM experiment_items i WHERE i.experiment_id = x.id) AS items"
)
_FROM = (
    "FROM experiments x JOIN rubric_versions rv ON rv.id = x.rubric_version_id "
    "JOIN rubrics rb ON rb.id = x.rubric_id"
)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    pid, host, proc_start = row.pop("pid"), row.pop("host"), row.pop("proc_start")
    if (
        row["status"] == "running"
        and host in (None, socket.gethostname())
        and not pid_alive(pid, proc_start)
    ):  # its process is gone; the next opening of the store records it (`mark_interrupted`)
        row["status"] = "interrupted"
        row["error"] = (
            f"its process exited while it was grading; continue it with "
            f"`regrade --resume {row['id']}`"
        )
    row["grader_tools"] = json.loads(row["grader_tools"] or "[]")
    row["source"] = json.loads(row["source"] or "{}")
    row["all_passes"] = bool(row["all_passes"])
    return row


class Experiments:
    """`Store.experiments`: re-grading experiments (see the module docstring)."""

    def __init__(self, backend: SQLBackend) -> None:
        self._backend = backend

    def create(
        self,
        *,
        name: str,
        rubric_version_id: int,
        grader_model: str,
        grader_system_prompt: str | None = None,
        grader_tools: Sequence[str] = (),
        samples: int = 1,
        all_passes: bool = False,
        source: Mapping[str, Any] | None = None,
    ) -> int:
        """Record a new `running` experiment; returns its id.

        Raises:
            StoreError: A field is invalid or the rubric version does not exist.
        """
        name = require_text(name, "experiment name").strip()
        if len(name) > MAX_NAME_CHARS or not is_single_line(name):
            msg = f"experiment name must be one line of at most {MAX_NAME_CHARS} characters"
            raise StoreError(msg, kind="invalid")
        version_id = require_int(rubric_version_id, "rubric_version_id", minimum=1)
        grader_model = require_text(grader_model, "grader_model").strip()
        optional_text(grader_system_prompt, "grader_system_prompt")
        tools = [require_text(t, "grader tool name").strip() for t in grader_tools]
        samples = require_int(samples, "samples", minimum=1)
        values = (
            name,
            version_id,
            grader_model,
            grader_system_prompt,
            json.dumps(tools),
            samples,
            int(bool(all_passes)),
            json.dumps(dict(source or {}), default=str),
            now_iso(),
        )

        def job(tx: Tx) -> int:
            row = tx.one("SELECT rubric_id FROM rubric_versions WHERE id = ?", (version_id,))
            if row is None:
                msg = f"unknown rubric version id {version_id}"
                raise StoreError(msg, kind="invalid")
            inserted = tx.one(
                "INSERT INTO experiments (name, rubric_version_id, grader_model, "
                "grader_system_prompt, grader_tools, samples, all_passes, source, created_at, "
                "rubric_id, pid, host, proc_start, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running') RETURNING id",
                (*values, row[0], *current_owner()),
            )
            return returned_id(inserted)

        return self._backend.write(job)

    def record_item(
        self, experiment_id: int, evaluation_id: int, sample: int, evaluation: RubricEvaluation
    ) -> int:
        """Store one grading of source pass `evaluation_id` (sample `sample`); idempotent on
        (experiment, pass, sample). Returns the item id.

        Raises:
            StoreError: Unknown experiment or pass, or a malformed evaluation.
        """
        experiment_id = require_int(experiment_id, "experiment_id", minimum=1)
        evaluation_id = require_int(evaluation_id, "evaluation_id", minimum=1)
        sample = require_int(sample, "sample", minimum=0)
        values, criteria = evaluation_row(evaluation)

        def job(tx: Tx) -> int:
            if tx.one("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)) is None:
                msg = f"unknown experiment {experiment_id}"
                raise StoreError(msg, kind="invalid")
            source_run = pass_run_id(tx, evaluation_id)
            inserted = tx.one(
                "INSERT INTO experiment_items (experiment_id, evaluation_id, run_id, sample, "
                "result, explanation, judges, started_at, duration_s, grader_attempts, "
                "grader_input_tokens, grader_output_tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (experiment_id, evaluation_id, sample) DO UPDATE SET "
                "result = excluded.result, explanation = excluded.explanation, "
                "judges = excluded.judges, started_at = excluded.started_at, "
                "duration_s = excluded.duration_s, grader_attempts = excluded.grader_attempts, "
                "grader_input_tokens = excluded.grader_input_tokens, "
                "grader_output_tokens = excluded.grader_output_tokens RETURNING id",
                (
                    experiment_id,
                    evaluation_id,
                    source_run,
                    sample,
                    values["result"],
                    values["explanation"],
                    values.get("judges"),
                    values["started_at"],
                    values["duration_s"],
                    values["grader_attempts"],
                    values["grader_input_tokens"],
                    values["grader_output_tokens"],
                ),
            )
            item_id = returned_id(inserted)
            tx.run("DELETE FROM experiment_criteria WHERE item_id = ?", (item_id,))
            tx.many(
                "INSERT INTO experiment_criteria (item_id, position, criterion, passed, "
                "insufficient, gap) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (item_id, r.position, r.criterion, int(r.passed), int(r.insufficient), r.gap)
                    for r in criteria
                ],
            )
            return item_id

        return self._backend.write(job)

    def finish(self, experiment_id: int, *, status: str = "done", error: str | None = None) -> None:
        """Close an experiment as `done`, `stopped` or `error` (with its error text)."""
        experiment_id = require_int(experiment_id, "experiment_id", minimum=1)
        if status not in EXPERIMENT_STATUSES[1:]:
            msg = f"experiment status must be one of {', '.join(EXPERIMENT_STATUSES[1:])}, got {status!r}"
            raise StoreError(msg, kind="invalid")
        optional_text(error, "error")

        def job(tx: Tx) -> None:
            tx.run(
                "UPDATE experiments SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, error, now_iso(), experiment_id),
            )

        self._backend.write(job)

    def resume(self, experiment_id: int) -> None:
        """Mark an experiment `running` again, owned by this process (`regrade --resume`).

        Raises:
            StoreError: Unknown experiment.
        """
        self.get(experiment_id)
        owner = current_owner()
        self._backend.write(
            lambda tx: tx.run(
                "UPDATE experiments SET status = 'running', error = NULL, finished_at = NULL, "
                "pid = ?, host = ?, proc_start = ? WHERE id = ?",
                (*owner, experiment_id),
            )
        )

    def get(self, experiment_id: int) -> dict[str, Any]:
        """One experiment's settings, status and item count.

        Raises:
            StoreError: No experiment has that id.
        """
        experiment_id = require_int(experiment_id, "experiment_id", minimum=1)
        row = self._backend.query_one(f"SELECT {_COLUMNS} {_FROM} WHERE x.id = ?", (experiment_id,))
        if row is None:
            msg = f"unknown experiment {experiment_id}"
            raise StoreError(msg, kind="invalid")
        return _decode(row)

    def find(self, *, rubric: str | None = None) -> list[dict[str, Any]]:
        """Every experiment (of one rubric, when named), newest first."""
        where, params = ("WHERE rb.name = ?", [rubric]) if rubric else ("", [])
        rows = self._backend.query(f"SELECT {_COLUMNS} {_FROM} {where} ORDER BY x.id DESC", params)
        return [_decode(row) for row in rows]

    def items(self, experiment_id: int) -> list[dict[str, Any]]:
        """Every grading of the experiment, by source pass then sample: `{id, evaluation_id,
        run_id, sample, result, explanation, criteria, judges, draft, input}`."""
        self.get(experiment_id)
        items = self._backend.query(
            "SELECT i.id, i.evaluation_id, i.run_id, i.sample, i.result, i.explanation, i.judges, "
            "i.started_at, i.duration_s, i.grader_attempts, i.grader_input_tokens, "
            "i.grader_output_tokens, e.draft, r.input FROM experiment_items i "
            "JOIN evaluations e ON e.id = i.evaluation_id JOIN runs r ON r.id = i.run_id "
            "WHERE i.experiment_id = ? ORDER BY i.evaluation_id, i.sample",
            (experiment_id,),
        )
        by_id: dict[int, dict[str, Any]] = {}
        for item in items:
            item["judges"] = json.loads(item["judges"]) if item["judges"] else None
            item["criteria"] = []
            by_id[int(item["id"])] = item
        rows = self._backend.query(
            "SELECT c.item_id, c.criterion, c.passed, c.insufficient, c.gap "
            "FROM experiment_criteria c JOIN experiment_items i ON i.id = c.item_id "
            "WHERE i.experiment_id = ? ORDER BY c.item_id, c.position",
            (experiment_id,),
        )
        for row in rows:
            by_id[int(row["item_id"])]["criteria"].append(stored_verdict(row))
        return items

    def verdicts(self, experiment_id: int) -> dict[int, list[dict[str, Any]]]:
        """The experiment's verdicts by source evaluation id, for `evaluate.compare_experiments`
        and `evaluate.pair_up`. Several samples of a pass are combined by strict majority
        (`evaluate.combine_panel`); samples that judged nothing (`grader_error`) are left out."""
        grouped: dict[int, list[list[dict[str, Any]]]] = {}
        for item in self.items(experiment_id):
            if item["criteria"]:
                grouped.setdefault(int(item["evaluation_id"]), []).append(item["criteria"])
        verdicts: dict[int, list[dict[str, Any]]] = {}
        for evaluation_id, samples in grouped.items():
            if len(samples) == 1:
                verdicts[evaluation_id] = samples[0]
                continue
            panel = combine_panel(samples, criteria=[c["name"] for c in samples[0]])
            verdicts[evaluation_id] = [
                {k: v for k, v in c.items() if k not in ("votes", "judges")}
                for c in panel["criteria"]
            ]
        return verdicts

    def samples(self, experiment_id: int) -> dict[int, list[list[dict[str, Any]]]]:
        """Every sample's verdicts by source evaluation id, for `evaluate.consistency_report`."""
        grouped: dict[int, list[list[dict[str, Any]]]] = {}
        for item in self.items(experiment_id):
            grouped.setdefault(int(item["evaluation_id"]), []).append(item["criteria"])
        return grouped
