"""Judge panels: several verdicts on one pass combined per criterion by strict majority."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, TypedDict

from rubric_core.evaluate._errors import EvaluationError
from rubric_core.evaluate._verdicts import Value, iter_verdicts
from rubric_core.schema import pass_result


class JudgeVote(TypedDict):
    """One judge's verdict on one criterion, kept for the record."""

    judge: str
    """The judge's name (its model, or `judge 1`...; repeated names get ` #1`, ` #2`...)."""

    passed: bool
    """Whether this judge passed the criterion (`False` when insufficient)."""

    gap: str | None
    """This judge's gap, or `None` when it gave none (as on a pass)."""

    insufficient: bool
    """Whether this judge said it could not verify the criterion."""


class Votes(TypedDict):
    """How the judges split on one criterion."""

    passed: int
    failed: int
    insufficient: int


class PanelCriterion(TypedDict):
    """One criterion as the panel decided it: a `CriterionVerdict` plus the votes."""

    name: str
    """The criterion, as the rubric states it."""

    passed: bool
    """`True` only if more than half of the judges passed it."""

    gap: NotRequired[str]
    """Only when not passed: the gaps of the judges who did not pass it; on a split
    it starts `judges split P-Q:` (P passed, Q did not)."""

    insufficient: NotRequired[bool]
    """Only present (and `True`) when the panel could not verify the criterion: a strict
    majority said so, or no judge judged it failed."""

    votes: Votes
    """How many judges passed, failed, or could not verify it."""

    judges: list[JudgeVote]
    """Every judge's verdict, in panel order."""


class PanelResult(TypedDict):
    """What `combine_panel` returns."""

    result: Literal["satisfied", "needs_revision"]
    """`satisfied` only if every combined criterion passed."""

    criteria: list[PanelCriterion]
    """The combined verdicts in rubric order."""

    judges: list[str]
    """The judges' names, in panel order."""

    explanation: str
    """One sentence: how many criteria passed, and how many the judges split on."""


def judge_labels(given: Sequence[str] | None, count: int) -> list[str]:
    """The judges' names as the record shows them: repeated names numbered (`m #1`,
    `m #2`), `judge 1`, `judge 2`... when none are given.

    Examples:
        >>> judge_labels(["m", "m", "n"], 3), judge_labels(None, 2)
        (['m #1', 'm #2', 'n'], ['judge 1', 'judge 2'])
    """
    if given is None:
        return [f"judge {i}" for i in range(1, count + 1)]
    names = [str(name).strip() for name in given]
    if len(names) != count or not all(names):
        msg = f"judges must give one non-empty name per verdict list ({count}), got {list(given)!r}"
        raise EvaluationError(msg)
    totals = Counter(names)
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(f"{name} #{seen[name]}" if totals[name] > 1 else name)
    return out


def _judge_votes(judge: str, verdicts: object) -> dict[str, JudgeVote]:
    return {
        name: {
            "judge": judge,
            "passed": value is True,
            "gap": str(verdict.get("gap") or "").strip() or None,
            "insufficient": value is None,
        }
        for name, value, verdict in iter_verdicts(verdicts, f"judge {judge!r}")
    }


def _value(vote: JudgeVote) -> Value:
    return None if vote["insufficient"] else vote["passed"]


def _dissent(votes: list[JudgeVote], *, named: bool) -> str:
    parts: list[str] = []
    for vote in votes:
        if vote["insufficient"]:
            text = vote["gap"] or "could not verify it"
            parts.append(f"{vote['judge']} (could not verify): {text}" if named else text)
        else:
            text = vote["gap"] or "no gap given"
            parts.append(f"{vote['judge']}: {text}" if named else text)
    return "; ".join(dict.fromkeys(parts))


def _combine(name: str, votes: list[JudgeVote]) -> PanelCriterion:
    values = [_value(vote) for vote in votes]
    count = len(values)
    tally: Votes = {
        "passed": values.count(True),
        "failed": values.count(False),
        "insufficient": values.count(None),
    }
    combined: PanelCriterion = {
        "name": name,
        "passed": 2 * tally["passed"] > count,
        "votes": tally,
        "judges": votes,
    }
    if not combined["passed"]:
        others = [vote for vote in votes if not vote["passed"]]
        kinds = {vote["insufficient"] for vote in others}
        gaps = {vote["gap"] for vote in others}
        if tally["passed"]:
            gap = f"judges split {tally['passed']}-{count - tally['passed']}: "
            gap += _dissent(others, named=True)
        elif len(kinds) > 1:
            gap = (
                f"{tally['failed']} of {count} judges failed it, {tally['insufficient']} "
                f"could not verify it: {_dissent(others, named=True)}"
            )
        else:  # unanimous: with one judge, exactly that judge's gap
            gap = _dissent(others, named=len(gaps) > 1)
        combined["gap"] = gap
        if 2 * tally["insufficient"] > count or not tally["failed"]:
            combined["insufficient"] = True
    return combined


def combine_panel(
    verdicts: Sequence[Sequence[Mapping[str, object]]],
    *,
    judges: Sequence[str] | None = None,
    criteria: Sequence[str] | None = None,
) -> PanelResult:
    """Combine several judges' verdicts on one pass, criterion by criterion.

    A criterion passes only by strict majority: more than half of the judges pass it.
    A tie is not a pass, and its gap says the judges split (`judges split 1-1: ...`,
    then the gaps of those who did not pass it). An insufficient-evidence vote counts as
    not-pass; the combined verdict is insufficient (not a judged failure) when a strict
    majority could not verify the criterion, or when no judge judged it failed (for
    example one pass and one insufficient). The panel is `satisfied` only if every
    combined criterion passes. With one judge the combined verdicts are that judge's.

    Args:
        verdicts: One list per judge of verdict dicts `{name, passed, gap?,
            insufficient?}`; every judge must judge every criterion once.
        judges: The judges' names (their models), one per list; repeated names are
            numbered (`m #1`, `m #2`) so each vote stays attributable.
            Default `judge 1`, `judge 2`...
        criteria: The rubric's criteria in order. Default: the first judge's order.

    Returns:
        `{"result", "criteria": [{name, passed, gap?, insufficient?, votes, judges}],
        "judges", "explanation"}`; see `PanelResult`.

    Raises:
        EvaluationError: No judges, a malformed verdict, or a judge that missed a
            criterion or judged one the others did not.

    Examples:
        >>> panel = combine_panel(
        ...     [[{"name": "has a title", "passed": True}],
        ...      [{"name": "has a title", "passed": False, "gap": "no title"}]],
        ...     judges=["model-a", "model-b"],
        ... )
        >>> panel["result"], panel["criteria"][0]["passed"], panel["criteria"][0]["gap"]
        ('needs_revision', False, 'judges split 1-1: model-b: no title')
        >>> [vote["judge"] for vote in panel["criteria"][0]["judges"]]
        ['model-a', 'model-b']
    """
    if not verdicts:
        msg = "a panel needs at least one judge's verdicts, got none"
        raise EvaluationError(msg)
    names = judge_labels(judges, len(verdicts))
    by_judge = [_judge_votes(name, judged) for name, judged in zip(names, verdicts, strict=True)]
    order = list(dict.fromkeys(criteria)) if criteria is not None else list(by_judge[0])
    if not order:
        msg = "a panel needs at least one criterion to combine, got none"
        raise EvaluationError(msg)
    for name, votes in zip(names, by_judge, strict=True):
        missing = [c for c in order if c not in votes]
        extra = [c for c in votes if c not in set(order)]
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"gave no verdict on {', '.join(map(repr, missing))}")
            if extra:
                problems.append(f"judged criteria not in the rubric: {', '.join(map(repr, extra))}")
            msg = f"judge {name!r} " + " and ".join(problems)
            raise EvaluationError(msg)
    combined = [_combine(c, [votes[c] for votes in by_judge]) for c in order]
    passed = sum(c["passed"] for c in combined)
    split = sum(len({_value(v) for v in c["judges"]}) > 1 for c in combined)
    explanation = (
        f"{passed} of {len(combined)} criteria passed by strict majority of "
        f"{len(names)} judge{'s' if len(names) != 1 else ''}"
        + (f"; the judges split on {split}." if split else ".")
    )
    return {
        "result": pass_result(combined),
        "criteria": combined,
        "judges": names,
        "explanation": explanation,
    }
