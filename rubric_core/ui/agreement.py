"""Agreement reports and experiment comparisons read for people: tables, cells, captions.

The figures come from `rubric_core.evaluate` (`agreement_report`, `compare_experiments`);
these functions only lay them out for the Agreement and Experiments pages.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rubric_core.ui.format import format_timestamp, one_line

__all__ = [
    "change_mark",
    "comparison_delta_rows",
    "comparison_matrix_rows",
    "confusion_rows",
    "criterion_agreement_rows",
    "disagreement_label",
    "experiment_label",
    "experiment_matrix_rows",
    "experiment_picker_key",
    "experiment_rows",
    "format_delta",
    "format_kappa",
    "format_rate",
    "verdict_mark",
]

_MARKS = {True: "✓", False: "✗", None: "?"}
_CHANGES = {"improved": "↑ improved", "regressed": "↓ regressed", "undecided": "? undecided"}


def format_rate(value: float | None) -> str:
    """A share as a percentage; `n/a` when there is nothing to divide.

    Examples:
        >>> format_rate(0.8333), format_rate(None)
        ('83.3%', 'n/a')
    """
    return "n/a" if value is None else f"{value:.1%}"


def format_kappa(value: float | None) -> str:
    """Cohen's kappa to three places; `n/a` where it is undefined (one verdict throughout).

    Examples:
        >>> format_kappa(0.6666), format_kappa(None), format_kappa(-0.25)
        ('0.667', 'n/a', '-0.250')
    """
    return "n/a" if value is None else f"{value:.3f}"


def format_delta(value: float | None) -> str:
    """A pass-rate change in percentage points, signed.

    Examples:
        >>> format_delta(0.5), format_delta(-1 / 6), format_delta(0.0), format_delta(None)
        ('+50.0 pts', '-16.7 pts', '±0.0 pts', 'n/a')
    """
    if value is None:
        return "n/a"
    if abs(value) < 5e-4:
        return "±0.0 pts"
    return f"{value * 100:+.1f} pts"


def verdict_mark(value: bool | None) -> str:
    """`✓` pass, `✗` fail, `?` insufficient evidence.

    Examples:
        >>> verdict_mark(True) + verdict_mark(False) + verdict_mark(None)
        '✓✗?'
    """
    return _MARKS[value]


def change_mark(change: str) -> str:
    """How a verdict moved from A to B, for a table cell (`same` is blank).

    Examples:
        >>> change_mark("improved"), change_mark("same")
        ('↑ improved', '')
    """
    return _CHANGES.get(change, "")


def criterion_agreement_rows(
    report: Mapping[str, Any], *, predictor: str = "judge", reference: str = "human"
) -> list[dict[str, Any]]:
    """One row per criterion, then `overall`: n, agreement, kappa, confusion, insufficient.

    Examples:
        >>> report = {"overall": {"n": 3, "agreement": 2 / 3, "kappa": 0.4, "true_pass": 1,
        ...     "false_pass": 1, "false_fail": 0, "true_fail": 1, "insufficient": 1},
        ...     "criteria": []}
        >>> row = criterion_agreement_rows(report)[0]
        >>> row["criterion"], row["agreement"], row["kappa"], row["judge pass / human fail"]
        ('(overall)', '66.7%', '0.400', 1)
    """
    rows = []
    entries = [*report["criteria"], {"name": "(overall)", **report["overall"]}]
    for entry in entries:
        rows.append(
            {
                "criterion": entry["name"],
                "n": entry["n"],
                "agreement": format_rate(entry["agreement"]),
                "kappa": format_kappa(entry["kappa"]),
                f"{predictor} pass / {reference} pass": entry["true_pass"],
                f"{predictor} pass / {reference} fail": entry["false_pass"],
                f"{predictor} fail / {reference} pass": entry["false_fail"],
                f"{predictor} fail / {reference} fail": entry["true_fail"],
                "insufficient evidence": entry.get("insufficient", 0),
            }
        )
    return rows


def confusion_rows(
    entry: Mapping[str, Any], *, predictor: str = "judge", reference: str = "human"
) -> list[dict[str, Any]]:
    """The 2×2 confusion matrix with the predictor as rows, for a small table.

    Examples:
        >>> confusion_rows({"true_pass": 3, "false_pass": 1, "false_fail": 0, "true_fail": 2})
        [{'': 'judge pass', 'human pass': 3, 'human fail': 1}, {'': 'judge fail', 'human pass': 0, 'human fail': 2}]
    """
    return [
        {
            "": f"{predictor} pass",
            f"{reference} pass": entry["true_pass"],
            f"{reference} fail": entry["false_pass"],
        },
        {
            "": f"{predictor} fail",
            f"{reference} pass": entry["false_fail"],
            f"{reference} fail": entry["true_fail"],
        },
    ]


def disagreement_label(
    disagreement: Mapping[str, Any],
    *,
    item_label: Callable[[Any], str] = str,
    predictor: str = "judge",
    reference: str = "human",
) -> str:
    """One disagreement as a link label: which item, which criterion, who said what.

    Examples:
        >>> disagreement_label({"item_id": 7, "criterion": "has a title", "predicted": True,
        ...     "reference": False, "kind": "false_pass"}, item_label=lambda i: f"pass #{i}")
        'pass #7 · has a title · false pass: judge pass, human fail'
    """
    kind = str(disagreement["kind"]).replace("_", " ")
    said = (
        f"{predictor} {'pass' if disagreement['predicted'] else 'fail'}, "
        f"{reference} {'pass' if disagreement['reference'] else 'fail'}"
    )
    return f"{item_label(disagreement['item_id'])} · {disagreement['criterion']} · {kind}: {said}"


def comparison_delta_rows(comparison: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per criterion, then overall: n, A's and B's pass rates, the change, flips.

    Examples:
        >>> rates = {"n": 2, "pass_rate_a": 0.5, "pass_rate_b": 1.0, "delta": 0.5,
        ...     "improved": 1, "regressed": 0, "undecided": 0}
        >>> row = comparison_delta_rows({"criteria": [{"name": "rhymes", **rates}],
        ...     "overall": rates})[0]
        >>> row["criterion"], row["A pass rate"], row["B pass rate"], row["change"]
        ('rhymes', '50.0%', '100.0%', '+50.0 pts')
    """
    entries = [*comparison["criteria"], {"name": "(overall)", **comparison["overall"]}]
    return [
        {
            "criterion": entry["name"],
            "n": entry["n"],
            "A pass rate": format_rate(entry["pass_rate_a"]),
            "B pass rate": format_rate(entry["pass_rate_b"]),
            "change": format_delta(entry["delta"]),
            "improved": entry["improved"],
            "regressed": entry["regressed"],
            "undecided": entry["undecided"],
        }
        for entry in entries
    ]


def comparison_matrix_rows(
    comparison: Mapping[str, Any],
    *,
    item_label: Callable[[Any], str] = str,
    criteria: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The per-item matrix: one row per item, one column per criterion, `A → B` marks.

    A cell reads `✓` when both agree on a pass, `✗ → ✓` when the verdict moved.

    Examples:
        >>> comparison = {"rows": [
        ...     {"item_id": 1, "criterion": "rhymes", "a": False, "b": True, "change": "improved"},
        ...     {"item_id": 2, "criterion": "rhymes", "a": True, "b": True, "change": "same"}]}
        >>> comparison_matrix_rows(comparison)
        [{'item': '1', 'rhymes': '✗ → ✓'}, {'item': '2', 'rhymes': '✓'}]
    """
    by_item: dict[Any, dict[str, Any]] = {}
    names: list[str] = list(criteria or [])
    for row in comparison["rows"]:
        if row["criterion"] not in names:
            names.append(row["criterion"])
        cells = by_item.setdefault(row["item_id"], {"item": item_label(row["item_id"])})
        a, b = row["a"], row["b"]
        cells[row["criterion"]] = (
            verdict_mark(a) if a == b else f"{verdict_mark(a)} → {verdict_mark(b)}"
        )
    return [
        {"item": cells["item"], **{n: cells.get(n, "") for n in names}}
        for cells in by_item.values()
    ]


def experiment_matrix_rows(
    comparison: Mapping[str, Any],
    items: Sequence[Mapping[str, Any]],
    *,
    criteria: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The per-item matrix with the inputs as its rows: `input` (the request the draft
    answered, on one line), a column per criterion, and `pass` (the source pass's id, to
    tell apart two drafts of one input).

    `items` are `Store.experiments.items` rows (`evaluation_id`, `input`).

    Examples:
        >>> comparison = {"rows": [
        ...     {"item_id": 7, "criterion": "rhymes", "a": False, "b": True, "change": "improved"}]}
        >>> experiment_matrix_rows(comparison, [{"evaluation_id": 7, "input": "Write a\\npoem"}])
        [{'input': 'Write a poem', 'rhymes': '✗ → ✓', 'pass': '#7'}]
    """
    inputs = {int(i["evaluation_id"]): str(i.get("input") or "") for i in items}
    rows = comparison_matrix_rows(comparison, item_label=lambda i: f"#{i}", criteria=criteria)
    shaped = []
    for row in rows:
        pass_id = row.pop("item")
        text = inputs.get(int(pass_id[1:]))
        label = one_line(text, 80) if text else f"(input of pass {pass_id})"
        shaped.append({"input": label, **row, "pass": pass_id})
    return shaped


def experiment_picker_key(base: str, experiments: Sequence[Mapping[str, Any]]) -> str:
    """The widget key of an experiment picker, changed whenever one of its labels changes.

    A picker's choice travels as its label's text, so a label that changed under it (an
    experiment that finished: `0 items · running` became `6 items`) would come back as the
    old text and stay on screen; a new key draws the picker afresh (the page keeps the
    chosen id apart and preselects it).

    Examples:
        >>> running = [{"id": 1, "items": 0, "status": "running"}]
        >>> done = [{"id": 1, "items": 6, "status": "done"}]
        >>> experiment_picker_key("exp_a", running) != experiment_picker_key("exp_a", done)
        True
    """
    labels = "\n".join(experiment_label(e) for e in experiments)
    return f"{base}_{zlib.crc32(labels.encode('utf-8')):08x}"


def experiment_label(experiment: Mapping[str, Any]) -> str:
    """An experiment as a picker shows it: id, its name (else rubric version and grader), items.

    Examples:
        >>> experiment_label({"id": 3, "name": "", "rubric": "haiku", "version": 2,
        ...     "grader_model": "replay:haiku", "samples": 1, "items": 6, "status": "done"})
        '#3 · haiku v2 · replay:haiku · 6 items'
        >>> experiment_label({"id": 4, "name": "stricter", "rubric": "haiku", "version": 3,
        ...     "grader_model": "m", "samples": 3, "items": 2, "status": "running"})
        '#4 stricter · ×3 · 2 items · running'
    """
    grader = str(experiment.get("grader_model") or "?")
    samples = int(experiment.get("samples") or 1)
    if samples > 1:
        grader += f" ×{samples}"
    if experiment.get("name"):
        parts = [f"#{experiment['id']} {experiment['name']}"]
        if samples > 1:
            parts.append(f"×{samples}")
    else:
        version = f"{experiment.get('rubric', '')} v{experiment.get('version', '?')}"
        parts = [f"#{experiment['id']}", version, grader]
    parts.append(f"{int(experiment.get('items') or 0)} items")
    if experiment.get("status") not in (None, "done"):
        parts.append(str(experiment["status"]))
    return " · ".join(parts)


def experiment_rows(experiments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The experiments table: one row each, settings a person scans.

    Examples:
        >>> experiment_rows([{"id": 3, "name": "", "rubric": "haiku", "version": 2,
        ...     "grader_model": "g", "samples": 1, "all_passes": False, "items": 6,
        ...     "status": "done", "created_at": None}])[0]["rubric"]
        'haiku v2'
    """
    return [
        {
            "id": e["id"],
            "name": e.get("name") or "",
            "rubric": f"{e.get('rubric', '')} v{e.get('version', '?')}",
            "grader": e.get("grader_model") or "",
            "samples": e.get("samples") or 1,
            "passes": "every pass" if e.get("all_passes") else "final",
            "items": e.get("items") or 0,
            "status": e.get("status") or "",
            "created": format_timestamp(e.get("created_at")),
        }
        for e in experiments
    ]
