"""A run's grading passes read for people: per-pass details, criteria by pass, regressions, flips."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from rubric_core.rubric import CriterionSpec
from rubric_core.scoring import score_pass, shown_score
from rubric_core.ui.format import rounded
from rubric_core.wording import criterion_mark, is_penalty

__all__ = [
    "criterion_matrix",
    "criterion_order",
    "draft_diff",
    "final_criteria",
    "final_verdict_rows",
    "find_regressions",
    "flipped_criteria",
    "pass_details",
    "pass_label",
    "pass_score",
]

Evaluation = Mapping[str, Any]
"""One stored grading pass (`Store.passes.of_run` rows)."""


def pass_label(index: int) -> str:
    """The label of the pass at zero-based position `index`.

    Examples:
        >>> pass_label(0)
        'Pass 1'
    """
    return f"Pass {index + 1}"


def pass_score(evaluation: Evaluation) -> float | None:
    """A pass's score as one pass is shown (as stored, unclipped: `scoring.shown_score`):
    the stored one, else one computed from its verdicts' weights.

    Passes recorded before scores existed have no `score`; their verdicts read back with
    a `weight` when it is not 1, so the same formula applies (`rubric_core.score_pass`).
    A pass without verdicts (a grader error) has no score.

    Examples:
        >>> pass_score({"score": 0.25, "criteria": []})
        0.25
        >>> pass_score({"criteria": [{"name": "a", "passed": True, "weight": 3},
        ...                          {"name": "b", "passed": False}]})
        0.75
        >>> pass_score({"criteria": []}) is None
        True
        >>> pass_score({"score": -0.5, "criteria": []})
        -0.5
    """
    score = evaluation.get("score")
    if score is not None:
        return shown_score(float(score))
    criteria = evaluation.get("criteria") or []
    if not criteria:
        return None
    specs = [CriterionSpec(str(c["name"]), int(c.get("weight") or 1)) for c in criteria]
    return shown_score(score_pass(specs, criteria))


def pass_details(evaluations: Sequence[Evaluation]) -> list[dict[str, Any]]:
    """Per pass: verdict, loop status, explanation, the failing criteria with their gaps.

    Returns:
        `{label, result, status, explanation, passed, total, gaps: [(criterion, gap)],
        marks: {criterion: mark}, duration_s, grader_tokens}` per pass, oldest first;
        `marks` is `wording.criterion_mark` of each verdict (`absent ✓` / `present ✗` for a
        penalty).
    """
    details = []
    for j, evaluation in enumerate(evaluations):
        criteria = evaluation.get("criteria") or []
        gaps = [(c["name"], str(c.get("gap") or "")) for c in criteria if not c.get("passed")]
        details.append(
            {
                "label": pass_label(j),
                "result": evaluation.get("result"),
                "status": evaluation.get("status"),
                "explanation": str(evaluation.get("explanation") or ""),
                "passed": sum(1 for c in criteria if c.get("passed")),
                "total": len(criteria),
                "gaps": gaps,
                "marks": {
                    c["name"]: criterion_mark(bool(c.get("passed")), penalty=is_penalty(c))
                    for c in criteria
                },
                "duration_s": rounded(evaluation.get("duration_s")),
                "grader_tokens": int(evaluation.get("grader_input_tokens") or 0)
                + int(evaluation.get("grader_output_tokens") or 0),
                "score": pass_score(evaluation),
                "regressions": [
                    f"{r['name']} (passed in pass {r['passed_in']})"
                    for r in evaluation.get("regressions") or []
                ],
            }
        )
    return details


def criterion_order(evaluations: Sequence[Evaluation], preferred: Sequence[str] = ()) -> list[str]:
    """Every criterion name seen across the passes: those in `preferred` (the rubric's
    order) first, then the rest in first-seen order.

    Examples:
        >>> criterion_order([{"criteria": [{"name": "a"}, {"name": "b"}]},
        ...                  {"criteria": [{"name": "b"}, {"name": "c"}]}])
        ['a', 'b', 'c']
        >>> criterion_order([{"criteria": [{"name": "b"}, {"name": "a"}]}], preferred=["a", "b"])
        ['a', 'b']
    """
    judged = {c["name"] for e in evaluations for c in e.get("criteria") or []}
    names: list[str] = [name for name in preferred if name in judged]
    seen: set[str] = set(names)
    for evaluation in evaluations:
        for criterion in evaluation.get("criteria") or []:
            name = criterion["name"]
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def criterion_matrix(
    evaluations: Sequence[Evaluation], preferred: Sequence[str] = ()
) -> tuple[list[str], list[list[bool | None]]]:
    """Criteria × passes: `True` passed, `False` failed, `None` not judged in that pass.

    A pass that ended in `grader_error` judged nothing, so its column is all `None`.

    Returns:
        `(criteria, rows)` where `rows[i][j]` is criterion `i` in pass `j`.
    """
    names = criterion_order(evaluations, preferred)
    index = {name: i for i, name in enumerate(names)}
    rows: list[list[bool | None]] = [[None] * len(evaluations) for _ in names]
    for j, evaluation in enumerate(evaluations):
        for criterion in evaluation.get("criteria") or []:
            rows[index[criterion["name"]]][j] = bool(criterion["passed"])
    return names, rows


def find_regressions(evaluations: Sequence[Evaluation]) -> list[tuple[str, int, int]]:
    """Criteria that passed in one pass and failed in a later one.

    Passes are numbered by their zero-based position in `evaluations` (oldest
    first), which is the stored `iteration` for a run's single grading attempt.
    Passes where a criterion was not judged (a grader error) are skipped, so
    pass → error → fail is still a regression from the passing pass.

    Returns:
        `(criterion, from_pass, to_pass)` for every pass→fail transition, where
        `from_pass` is the last pass in which it passed.

    Examples:
        >>> passes = [{"criteria": [{"name": "a", "passed": True}]},
        ...           {"criteria": [{"name": "a", "passed": False, "gap": "x"}]}]
        >>> find_regressions(passes)
        [('a', 0, 1)]
    """
    names, rows = criterion_matrix(evaluations)
    regressions: list[tuple[str, int, int]] = []
    for name, row in zip(names, rows, strict=True):
        last_state: bool | None = None
        last_pass_index = -1
        for j, state in enumerate(row):
            if state is None:
                continue
            if state:
                last_pass_index = j
            elif last_state is True:
                regressions.append((name, last_pass_index, j))
            last_state = state
    return regressions


def flipped_criteria(eval_a: Evaluation, eval_b: Evaluation) -> list[dict[str, Any]]:
    """Criteria whose verdict differs between pass `eval_a` and a later pass `eval_b`.

    Returns:
        One dict per flipped criterion, in `eval_b`'s order then `eval_a`-only ones:
        `{criterion, before, after, change, gap}` where `before`/`after` are
        `True`/`False`/`None` (not judged), `change` is `"fixed"` (fail → pass),
        `"regressed"` (pass → fail), `"now judged"` or `"no longer judged"`, and
        `gap` is the feedback behind the change: the earlier gap that asked for a
        fix, or the later gap that says what broke.

    Examples:
        >>> a = {"criteria": [{"name": "t", "passed": False, "gap": "add a title"}]}
        >>> b = {"criteria": [{"name": "t", "passed": True}]}
        >>> flipped_criteria(a, b)[0]["change"], flipped_criteria(a, b)[0]["gap"]
        ('fixed', 'add a title')
    """
    before = {c["name"]: c for c in eval_a.get("criteria") or []}
    after = {c["name"]: c for c in eval_b.get("criteria") or []}
    names = list(after) + [name for name in before if name not in after]
    flipped: list[dict[str, Any]] = []
    for name in names:
        old, new = before.get(name), after.get(name)
        old_passed = None if old is None else bool(old["passed"])
        new_passed = None if new is None else bool(new["passed"])
        if old_passed == new_passed:
            continue
        if old_passed is False and new_passed is True:
            change, gap = "fixed", (old or {}).get("gap") or ""
        elif old_passed is True and new_passed is False:
            change, gap = "regressed", (new or {}).get("gap") or ""
        elif old_passed is None:
            change, gap = "now judged", (new or {}).get("gap") or ""
        else:
            change, gap = "no longer judged", (old or {}).get("gap") or ""
        flipped.append(
            {
                "criterion": name,
                "before": old_passed,
                "after": new_passed,
                "change": change,
                "gap": gap,
            }
        )
    return flipped


def draft_diff(a: str, b: str, *, label_a: str = "before", label_b: str = "after") -> str:
    """A unified diff of two drafts (or any two texts), line by line.

    Returns an empty string when the texts are equal.

    Examples:
        >>> print(draft_diff("one\\ntwo", "one\\nthree"))
        --- before
        +++ after
        @@ -1,2 +1,2 @@
         one
        -two
        +three
    """
    lines = difflib.unified_diff(
        (a or "").splitlines(),
        (b or "").splitlines(),
        fromfile=label_a,
        tofile=label_b,
        lineterm="",
    )
    return "\n".join(lines)


def final_criteria(evaluations: Sequence[Evaluation]) -> dict[str, bool | None]:
    """The last judged verdict of each criterion across a run's passes.

    Examples:
        >>> final_criteria([{"criteria": [{"name": "a", "passed": False}]},
        ...                 {"criteria": [{"name": "a", "passed": True}]}])
        {'a': True}
    """
    verdicts: dict[str, bool | None] = {}
    for evaluation in evaluations:
        for criterion in evaluation.get("criteria") or []:
            verdicts[criterion["name"]] = bool(criterion.get("passed"))
    return verdicts


def final_verdict_rows(
    evaluations_a: Sequence[Evaluation], evaluations_b: Sequence[Evaluation]
) -> list[dict[str, str]]:
    """Each criterion's last verdict in two runs: `{criterion, run A, run B}` with ✓, ✗ or –.

    Examples:
        >>> final_verdict_rows([{"criteria": [{"name": "a", "passed": True}]}], [])
        [{'criterion': 'a', 'run A': '✓', 'run B': '–'}]
    """
    verdicts_a, verdicts_b = final_criteria(evaluations_a), final_criteria(evaluations_b)
    marks: dict[bool | None, str] = {True: "✓", False: "✗"}
    return [
        {
            "criterion": name,
            "run A": marks.get(verdicts_a.get(name), "–"),
            "run B": marks.get(verdicts_b.get(name), "–"),
        }
        for name in dict.fromkeys([*verdicts_a, *verdicts_b])
    ]
