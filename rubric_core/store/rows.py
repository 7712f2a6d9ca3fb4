"""What the store keeps of one transcript message and one grading pass, checked field by field."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rubric_core.messages import content_text, is_grader_feedback
from rubric_core.schema import (
    EVALUATION_RESULTS,
    MAX_EXPLANATION_CHARS,
    MAX_GAP_CHARS,
    RUBRIC_STATUSES,
    cut_text,
    verdict_problem,
)
from rubric_core.store.errors import StoreError
from rubric_core.store.validation import require_int, require_text

__all__ = [
    "CriterionRow",
    "MessageRow",
    "evaluation_row",
    "message_row",
    "pass_run_id",
    "stored_score",
    "stored_verdict",
]

_REQUIRED_EVALUATION_KEYS = ("grading_run_id", "iteration", "result", "status", "criteria")
_MESSAGE_FIELDS = ("name", "content", "additional_kwargs", "tool_calls", "tool_call_id")


class MessageRow(NamedTuple):
    """One transcript message as stored (`tool_calls` as `{name, args, id}` dicts)."""

    run_id: int
    position: int
    role: str
    name: str | None
    content: str
    is_grader: bool
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None


class CriterionRow(NamedTuple):
    """One criterion verdict of a pass, in rubric order."""

    position: int
    criterion: str
    passed: bool
    gap: str | None
    weight: int = 1
    """The criterion's weight in the rubric (negative: a penalty)."""
    checked_by: str | None = None
    """`"code"` when a code check decided it."""
    insufficient: bool = False
    """The grader could not verify it (then `passed` is `False`)."""


def message_row(run_id: int, position: int, message: object) -> MessageRow:
    """The stored form of a LangChain message or of a message mapping.

    The text follows `messages.content_text`; grader feedback is recognised by
    `messages.is_grader_feedback`.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> row = message_row(1, 0, AIMessage("hi", tool_calls=[{"name": "t", "args": {}, "id": "c"}]))
        >>> row.role, row.content, row.is_grader, row.tool_calls
        ('ai', 'hi', False, [{'name': 't', 'args': {}, 'id': 'c'}])
    """
    if isinstance(message, Mapping):
        fields: Mapping[str, Any] = message
        role = message.get("role") or message.get("type") or "unknown"
    else:
        fields = {key: getattr(message, key, None) for key in _MESSAGE_FIELDS}
        role = getattr(message, "type", None) or type(message).__name__
    name = fields.get("name")
    tool_call_id = fields.get("tool_call_id")
    calls = [
        {"name": call.get("name"), "args": call.get("args", {}), "id": call.get("id")}
        if isinstance(call, Mapping)
        else {"name": str(call), "args": {}, "id": None}
        for call in fields.get("tool_calls") or []
    ]
    return MessageRow(
        run_id,
        position,
        str(role),
        None if name is None else str(name),
        content_text(fields.get("content")),
        is_grader_feedback(fields),
        calls,
        None if tool_call_id is None else str(tool_call_id),
    )


def _number(evaluation: Mapping[str, Any], key: str, default: float) -> float:
    value = evaluation.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        msg = f"evaluation {key} must be a number, got {value!r}"
        raise StoreError(msg, kind="invalid")
    return float(value)


def _count(evaluation: Mapping[str, Any], key: str) -> int:
    value = evaluation.get(key, 0)
    return require_int(0 if value is None else value, f"evaluation {key}", minimum=0)


def _criterion_rows(criteria: object, weights: Mapping[str, int]) -> list[CriterionRow]:
    if isinstance(criteria, str | bytes) or not isinstance(criteria, Sequence):
        msg = f"evaluation criteria must be a list, got {type(criteria).__name__}"
        raise StoreError(msg, kind="invalid")
    rows: list[CriterionRow] = []
    for position, verdict in enumerate(criteria):
        where = f"evaluation criteria[{position}]"
        if not isinstance(verdict, Mapping):
            msg = f"{where} must be a dict with name and passed"
            raise StoreError(msg, kind="invalid")
        name = verdict.get("name")
        if not isinstance(name, str) or not name.strip():
            msg = f"{where} has no name"
            raise StoreError(msg, kind="invalid")
        passed = verdict.get("passed")
        if not isinstance(passed, bool):
            msg = f"{where} ({name!r}) passed must be true or false, got {passed!r}"
            raise StoreError(msg, kind="invalid")
        gap = verdict.get("gap")
        if gap is not None and not isinstance(gap, str):
            msg = f"{where} ({name!r}) gap must be a string"
            raise StoreError(msg, kind="invalid")
        checked_by = verdict.get("checked_by")
        if checked_by is not None and not isinstance(checked_by, str):
            msg = f"{where} ({name!r}) checked_by must be a string"
            raise StoreError(msg, kind="invalid")
        insufficient = verdict.get("insufficient", False)
        if not isinstance(insufficient, bool):
            msg = f"{where} ({name!r}) insufficient must be true or false, got {insufficient!r}"
            raise StoreError(msg, kind="invalid")
        problem = verdict_problem(name, passed, insufficient=insufficient, require_gap=False)
        if problem is not None:  # the verdict rules, as the judge's verdict is held to them
            raise StoreError(f"{where}: {problem}", kind="invalid")
        rows.append(
            CriterionRow(
                position,
                name.strip(),
                passed,
                cut_text(gap, MAX_GAP_CHARS) if gap else None,
                weight=weights.get(name.strip(), 1),
                checked_by=checked_by or None,
                insufficient=insufficient,
            )
        )
    return rows


def stored_score(value: object, field: str = "evaluation score") -> float | None:
    """A score as the store keeps it: unclipped, as HealthBench scores an example (at most
    1, below 0 when penalties weigh more), or `None`.

    Raises:
        StoreError: Of kind `invalid`: not a finite number of at most 1.

    Examples:
        >>> stored_score(-0.5), stored_score(None) is None
        (-0.5, True)
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value > 1
    ):
        msg = f"{field} must be a number of at most 1 (unclipped) or None, got {value!r}"
        raise StoreError(msg, kind="invalid")
    return float(value)


def _score(evaluation: Mapping[str, Any]) -> float | None:
    return stored_score(evaluation.get("score"))


def _regressions(evaluation: Mapping[str, Any]) -> list[dict[str, Any]]:
    value = evaluation.get("regressions") or []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        msg = f"evaluation regressions must be a list, got {type(value).__name__}"
        raise StoreError(msg, kind="invalid")
    found = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            msg = f"evaluation regressions[{index}] must be a dict with name and passed_in"
            raise StoreError(msg, kind="invalid")
        passed_in = require_int(
            item.get("passed_in"), f"evaluation regressions[{index}].passed_in", minimum=1
        )
        found.append({"name": item["name"], "passed_in": passed_in})
    return found


def _capped_judge(judge: object) -> object:
    """A panel judge's record with its explanation and gaps cut as a pass's are."""
    if not isinstance(judge, Mapping):
        return judge
    capped = dict(judge)
    if isinstance(capped.get("explanation"), str):
        capped["explanation"] = cut_text(capped["explanation"], MAX_EXPLANATION_CHARS)
    verdicts = capped.get("criteria")
    if isinstance(verdicts, list):
        capped["criteria"] = [
            {**v, "gap": cut_text(v["gap"], MAX_GAP_CHARS)}
            if isinstance(v, Mapping) and isinstance(v.get("gap"), str)
            else v
            for v in verdicts
        ]
    return capped


def evaluation_row(
    evaluation: object, weights: Mapping[str, int] | None = None
) -> tuple[dict[str, Any], list[CriterionRow]]:
    """Validate a `RubricEvaluation` dict; returns its column values and criterion rows.

    `weights` maps criterion names to their rubric weights (1 when a name is missing).

    Raises:
        StoreError: Of kind `invalid`, naming the field that is missing or wrong.
    """
    if not isinstance(evaluation, Mapping):
        msg = f"evaluation must be a RubricEvaluation dict, got {type(evaluation).__name__}"
        raise StoreError(msg, kind="invalid")
    missing = [key for key in _REQUIRED_EVALUATION_KEYS if key not in evaluation]
    if missing:
        msg = f"evaluation is missing {', '.join(missing)}"
        raise StoreError(msg, kind="invalid")
    grading_run_id = evaluation["grading_run_id"]
    if not isinstance(grading_run_id, str) or not grading_run_id.strip():
        msg = f"evaluation grading_run_id must be a non-empty string, got {grading_run_id!r}"
        raise StoreError(msg, kind="invalid")
    iteration = require_int(evaluation["iteration"], "evaluation iteration", minimum=0)
    result = evaluation["result"]
    if result not in EVALUATION_RESULTS:
        msg = f"evaluation result {result!r} is not one of {', '.join(EVALUATION_RESULTS)}"
        raise StoreError(msg, kind="invalid")
    status = evaluation["status"]
    if status not in RUBRIC_STATUSES:
        msg = f"evaluation status {status!r} is not one of {', '.join(RUBRIC_STATUSES)}"
        raise StoreError(msg, kind="invalid")
    values = {
        "grading_run_id": grading_run_id,
        "iteration": iteration,
        "result": result,
        "status": status,
        "explanation": cut_text(
            require_text(
                evaluation.get("explanation") or "", "evaluation explanation", allow_empty=True
            ),
            MAX_EXPLANATION_CHARS,
        ),
        "draft": require_text(evaluation.get("draft") or "", "evaluation draft", allow_empty=True),
        "started_at": _number(evaluation, "started_at", time.time()),
        "duration_s": _number(evaluation, "duration_s", 0.0),
        "grader_attempts": _count(evaluation, "grader_attempts"),
        "grader_input_tokens": _count(evaluation, "grader_input_tokens"),
        "grader_output_tokens": _count(evaluation, "grader_output_tokens"),
    }
    regressed = _regressions(evaluation)
    values["score"] = _score(evaluation)
    values["regressions"] = json.dumps(regressed, ensure_ascii=False)
    # New regressions only: a criterion that passed in the pass just before and fails now
    # (the dashboard's heatmap marks the same transitions); one that keeps failing is
    # still listed in `regressions`, for the feedback, but is not counted again.
    values["regression_count"] = sum(1 for r in regressed if r["passed_in"] == iteration)
    judges = evaluation.get("judges")
    if judges is not None:
        if isinstance(judges, str | bytes) or not isinstance(judges, Sequence):
            msg = f"evaluation judges must be a list of judge verdicts, got {judges!r}"
            raise StoreError(msg, kind="invalid")
        values["judges"] = json.dumps(
            [_capped_judge(judge) for judge in judges], ensure_ascii=False, default=str
        )
    return values, _criterion_rows(evaluation["criteria"], weights or {})


def stored_verdict(row: Mapping[str, Any]) -> dict[str, Any]:
    """A criterion row read back (`criterion, passed, gap, insufficient`, and on a run's
    passes `weight, checked_by`) as a verdict dict.

    Only what differs from a plain judged criterion of weight 1 is added, so verdicts
    read back as the middleware gave them.

    Examples:
        >>> stored_verdict({"criterion": "a", "passed": 0, "gap": "?", "insufficient": 1})
        {'name': 'a', 'passed': False, 'gap': '?', 'insufficient': True}
        >>> row = {"criterion": "a", "passed": 1, "gap": None, "insufficient": 0}
        >>> stored_verdict({**row, "weight": 2, "checked_by": "code"})
        {'name': 'a', 'passed': True, 'checked_by': 'code', 'weight': 2}
    """
    verdict: dict[str, Any] = {"name": row["criterion"], "passed": bool(row["passed"])}
    if row["gap"] is not None:
        verdict["gap"] = row["gap"]
    if row["insufficient"]:
        verdict["insufficient"] = True
    if row.get("checked_by") is not None:
        verdict["checked_by"] = row["checked_by"]
    if row.get("weight", 1) != 1:
        verdict["weight"] = row["weight"]
    return verdict


def pass_run_id(tx: Any, evaluation_id: int) -> int:
    """The run of stored pass `evaluation_id`, read inside a write job (`tx`, a `sqlbase.Tx`).

    Raises:
        StoreError: Of kind `invalid`: no pass has that id.
    """
    found = tx.one("SELECT run_id FROM evaluations WHERE id = ?", (evaluation_id,))
    if found is None:
        msg = f"no grading pass has evaluation id {evaluation_id}"
        raise StoreError(msg, kind="invalid")
    return int(found[0])
