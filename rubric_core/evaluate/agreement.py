"""Agreement between a judge and human labels (or two experiments): kappa and confusion."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypedDict

from rubric_core.evaluate._errors import EvaluationError
from rubric_core.evaluate._verdicts import ItemId, Value, as_value, as_values, rate
from rubric_core.extras import require


class Pair(NamedTuple):
    """One criterion of one item, as the predictor and the reference judged it."""

    item_id: ItemId
    """The graded item: an evaluation id, a run id, a dataset row."""

    criterion: str
    """The criterion's name, as the rubric states it."""

    predicted: Value
    """The judge's verdict (or experiment A's); `None`: it could not verify it."""

    reference: Value
    """The human label (or experiment B's verdict); `None`: no verdict to compare with."""


class Confusion(TypedDict):
    """Counts over the decided pairs, with the predictor (the judge) as predictor."""

    true_pass: int
    """Judge pass, reference pass."""

    false_pass: int
    """Judge pass, reference fail: the judge let through what a person failed."""

    false_fail: int
    """Judge fail, reference pass."""

    true_fail: int
    """Judge fail, reference fail."""


class OverallAgreement(Confusion):
    """Agreement over every pair of every criterion, pooled."""

    n: int
    """Pairs where both sides gave a pass/fail verdict; only these enter the figures."""

    agreement: float | None
    """Share of the `n` pairs on which both sides agree; `None` when `n` is 0."""

    kappa: float | None
    """Cohen's kappa over the `n` pairs (scikit-learn's `cohen_kappa_score`); `None` when
    `n` is 0 or when both sides gave one and the same verdict on every pair (chance
    agreement is then 1 and kappa is 0/0; `agreement` is 1.0)."""

    insufficient: int
    """Pairs the predictor could not verify (`predicted is None`); not in `n` or kappa."""

    reference_undecided: int
    """Pairs with no reference verdict (`reference is None`: unlabelled, or experiment B
    could not verify); not in `n` or kappa. A pair may count here and in `insufficient`."""

    total: int
    """Every pair given: `n` plus the pairs with a `None` on either side."""


class CriterionAgreement(OverallAgreement):
    """Agreement on one criterion; the same figures as `OverallAgreement`."""

    name: str
    """The criterion."""


class Disagreement(TypedDict):
    """One decided pair on which the two sides differ."""

    item_id: ItemId
    criterion: str
    predicted: bool
    reference: bool
    kind: Literal["false_pass", "false_fail"]
    """`false_pass`: predictor pass, reference fail; `false_fail` the other way round."""


class InsufficientPair(TypedDict):
    """One pair the predictor could not verify, with the reference's verdict."""

    item_id: ItemId
    criterion: str
    reference: Value


class AgreementReport(TypedDict):
    """What `agreement_report` returns; `json.dumps` takes it as it is."""

    overall: OverallAgreement
    """Every criterion's pairs pooled (micro-averaged)."""

    criteria: list[CriterionAgreement]
    """One entry per criterion, in rubric order (or first-seen order)."""

    disagreements: list[Disagreement]
    """The decided pairs on which the sides differ, in input order."""

    insufficient: list[InsufficientPair]
    """The pairs the predictor could not verify, in input order."""


_NO_PAIRS = (
    "no labelled items to compare: {why}; label some passes (the Review page or "
    "`python -m rubric_core label`) or compare against another experiment"
)


def _pair(raw: object, index: int) -> Pair:
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes) or len(raw) != 4:
        msg = f"pair {index}: expected (item_id, criterion, predicted, reference), got {raw!r}"
        raise EvaluationError(msg)
    item_id, criterion, predicted, reference = raw
    if not isinstance(criterion, str) or not criterion.strip():
        msg = f"pair {index} (item {item_id!r}): criterion must be a non-empty name, got {criterion!r}"
        raise EvaluationError(msg)
    where = f"pair {index} (item {item_id!r}, criterion {criterion!r})"
    return Pair(
        item_id,
        criterion,
        as_value(predicted, f"{where} predicted"),
        as_value(reference, f"{where} reference"),
    )


def _kappa(predicted: list[bool], reference: list[bool]) -> float | None:
    if len(set(predicted) | set(reference)) < 2:
        return None  # no pairs, or one verdict throughout on both sides: kappa is 0/0
    # Imported here, not at the top: sklearn.metrics (with SciPy) takes seconds to import,
    # and the panel and label parsing, which the middleware and CLI load, need none of it.
    require("sklearn", "workbench")
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(predicted, reference, labels=[False, True]))


def _figures(pairs: list[Pair]) -> OverallAgreement:
    decided = [p for p in pairs if p.predicted is not None and p.reference is not None]
    predicted = [bool(p.predicted) for p in decided]
    reference = [bool(p.reference) for p in decided]
    cells = list(zip(predicted, reference, strict=True))
    agreed = sum(a == b for a, b in cells)
    return {
        "n": len(decided),
        "agreement": rate(agreed, len(decided)),
        "kappa": _kappa(predicted, reference),
        "true_pass": cells.count((True, True)),
        "false_pass": cells.count((True, False)),
        "false_fail": cells.count((False, True)),
        "true_fail": cells.count((False, False)),
        "insufficient": sum(p.predicted is None for p in pairs),
        "reference_undecided": sum(p.reference is None for p in pairs),
        "total": len(pairs),
    }


def agreement_report(
    pairs: Iterable[Pair | Sequence[object]], *, criteria: Sequence[str] | None = None
) -> AgreementReport:
    """Per criterion and overall: n, percent agreement, Cohen's kappa, confusion counts.

    The predictor (the judge, or experiment A) is the first verdict of each pair, the
    reference (the human label, or experiment B) the second. Only pairs where both are
    decided enter `n`, `agreement`, `kappa` and the confusion counts; a `None`
    predicted (insufficient evidence) is counted in `insufficient` and listed, a
    `None` reference in `reference_undecided`. Kappa is scikit-learn's
    `cohen_kappa_score`, reported as `None` where it is undefined: no decided pairs, or
    both sides giving one and the same verdict throughout (then `agreement` is 1.0).
    Where only one side is constant kappa is defined (0.0 or below) and reported.
    `overall` pools every criterion's pairs into one table.

    Args:
        pairs: `(item_id, criterion, predicted, reference)` tuples (or `Pair`s), each
            verdict `True`, `False` or `None` (0/1 are read as booleans). One pair per
            item and criterion.
        criteria: The rubric's criteria, to report them in its order, those without
            pairs included; a pair naming another criterion is an error. By default the
            criteria named in `pairs`, in first-seen order.

    Returns:
        `{"overall": {...}, "criteria": [{"name", ...}], "disagreements": [...],
        "insufficient": [...]}`; see `AgreementReport`.

    Raises:
        EvaluationError: No pairs, no pair with a reference verdict, a malformed pair, an
            item and criterion paired twice, or a criterion not in `criteria`.

    Examples:
        >>> report = agreement_report([
        ...     (1, "has a title", True, True),
        ...     (2, "has a title", True, False),
        ...     (3, "has a title", False, False),
        ...     (4, "has a title", None, True),
        ... ])
        >>> report["overall"]["n"], round(report["overall"]["agreement"], 3)
        (3, 0.667)
        >>> round(report["overall"]["kappa"], 3), report["criteria"][0]["false_pass"]
        (0.4, 1)
        >>> report["criteria"][0]["insufficient"], report["disagreements"][0]["item_id"]
        (1, 2)
        >>> agreement_report([(1, "has a title", True, True)])["overall"]["kappa"] is None
        True
    """
    checked = [_pair(raw, index) for index, raw in enumerate(pairs, start=1)]
    if not checked:
        raise EvaluationError(_NO_PAIRS.format(why="no pairs were given"))
    if all(p.reference is None for p in checked):
        why = f"none of the {len(checked)} pairs has a reference verdict"
        raise EvaluationError(_NO_PAIRS.format(why=why))
    seen: set[tuple[object, str]] = set()
    for p in checked:
        key = (p.item_id, p.criterion)
        if key in seen:
            msg = (
                f"item {p.item_id!r}, criterion {p.criterion!r} is paired twice; give one pair each"
            )
            raise EvaluationError(msg)
        seen.add(key)
    names = list(dict.fromkeys(p.criterion for p in checked))
    if criteria is not None:
        allowed = set(criteria)
        unknown = [name for name in names if name not in allowed]
        if unknown:
            msg = (
                f"pairs name criteria that are not in the rubric: {', '.join(map(repr, unknown))}"
                f" (its criteria: {', '.join(map(repr, criteria))})"
            )
            raise EvaluationError(msg)
        names = list(dict.fromkeys(criteria))
    by_name: dict[str, list[Pair]] = {name: [] for name in names}
    for p in checked:
        by_name[p.criterion].append(p)
    rows: list[CriterionAgreement] = [
        {"name": name, **_figures(group)} for name, group in by_name.items()
    ]
    return {
        "overall": _figures(checked),
        "criteria": rows,
        "disagreements": [
            {
                "item_id": p.item_id,
                "criterion": p.criterion,
                "predicted": p.predicted,
                "reference": p.reference,
                "kind": "false_pass" if p.predicted else "false_fail",
            }
            for p in checked
            if p.predicted is not None and p.reference is not None and p.predicted != p.reference
        ],
        "insufficient": [
            {"item_id": p.item_id, "criterion": p.criterion, "reference": p.reference}
            for p in checked
            if p.predicted is None
        ],
    }


def pair_up(
    predicted: Mapping[Any, Mapping[str, object] | Iterable[Mapping[str, object]]],
    reference: Mapping[Any, Mapping[str, object] | Iterable[Mapping[str, object]]],
) -> list[Pair]:
    """Pair two sets of verdicts on the criteria both hold, item by item.

    Each side maps an item id to that item's verdicts: a list of verdict dicts
    `{name, passed, insufficient?}` (as in `RubricEvaluation.criteria`) or a mapping
    `{criterion: True/False/None}` (as human labels are kept). Items or criteria only
    one side holds are left out: an unlabelled criterion is not a disagreement.

    Examples:
        >>> judge = {7: [{"name": "has a title", "passed": True},
        ...              {"name": "cites a source", "passed": False, "gap": "add one"}]}
        >>> pair_up(judge, {7: {"cites a source": True}, 8: {"has a title": True}})
        [Pair(item_id=7, criterion='cites a source', predicted=False, reference=True)]
    """
    pairs: list[Pair] = []
    for item_id, verdicts in predicted.items():
        if item_id not in reference:
            continue
        mine = as_values(verdicts, f"predicted item {item_id!r}")
        theirs = as_values(reference[item_id], f"reference item {item_id!r}")
        pairs.extend(
            Pair(item_id, name, value, theirs[name])
            for name, value in mine.items()
            if name in theirs
        )
    return pairs
