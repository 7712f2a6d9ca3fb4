"""Two experiments over the same items: verdict matrix, pass-rate deltas, flipped verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias, TypedDict

from rubric_core.evaluate._errors import EvaluationError
from rubric_core.evaluate._verdicts import ItemId, Value, as_values, rate

Change: TypeAlias = Literal["same", "improved", "regressed", "undecided"]
"""How a verdict moved from A to B: `improved` fail→pass, `regressed` pass→fail,
`undecided` exactly one side could not verify it (insufficient evidence), `same` otherwise."""


class MatrixRow(TypedDict):
    """One criterion of one item, in both experiments."""

    item_id: ItemId
    criterion: str
    a: Value
    """Experiment A's verdict: `True`, `False`, or `None` (insufficient evidence)."""
    b: Value
    """Experiment B's verdict."""
    change: Change


class ChangeCounts(TypedDict):
    """How many verdicts moved, and which way."""

    improved: int
    regressed: int
    undecided: int


class PassRates(ChangeCounts):
    """Pass rates of A and B over the same compared verdicts."""

    n: int
    """Verdicts compared (items both experiments judged on the criterion)."""

    pass_rate_a: float | None
    """Share of the `n` verdicts A passed (insufficient is not a pass); `None` if `n` is 0."""

    pass_rate_b: float | None
    """Share of the `n` verdicts B passed."""

    delta: float | None
    """`pass_rate_b - pass_rate_a`: positive when B passes more."""

    insufficient_a: int
    """Of the `n`, how many A could not verify."""

    insufficient_b: int
    """Of the `n`, how many B could not verify."""


class CriterionComparison(PassRates):
    """One criterion's rates and changes."""

    name: str


class Comparison(TypedDict):
    """What `compare_experiments` returns; `json.dumps` takes it as it is."""

    overall: PassRates
    """Every compared verdict pooled."""

    criteria: list[CriterionComparison]
    """Criteria both experiments judged, in A's order."""

    rows: list[MatrixRow]
    """The per-item matrix: items both hold, criteria both judged, in A's order."""

    flips: list[MatrixRow]
    """The rows whose change is not `same`."""

    only_in_a: list[ItemId]
    """Items only A graded: reported, not compared."""

    only_in_b: list[ItemId]
    """Items only B graded: reported, not compared."""

    criteria_only_in_a: list[str]
    """Criteria only A judged (on the shared items), e.g. removed in B's rubric."""

    criteria_only_in_b: list[str]
    """Criteria only B judged (on the shared items), e.g. added in B's rubric."""


def _change(a: Value, b: Value) -> Change:
    if a == b:
        return "same"
    if a is None or b is None:
        return "undecided"
    return "improved" if b else "regressed"


def _rates(rows: list[MatrixRow]) -> PassRates:
    n = len(rows)
    rate_a = rate(sum(row["a"] is True for row in rows), n)
    rate_b = rate(sum(row["b"] is True for row in rows), n)
    changes = [row["change"] for row in rows]
    return {
        "n": n,
        "pass_rate_a": rate_a,
        "pass_rate_b": rate_b,
        "delta": rate_b - rate_a if rate_a is not None and rate_b is not None else None,
        "improved": changes.count("improved"),
        "regressed": changes.count("regressed"),
        "undecided": changes.count("undecided"),
        "insufficient_a": sum(row["a"] is None for row in rows),
        "insufficient_b": sum(row["b"] is None for row in rows),
    }


def compare_experiments(
    a: Mapping[Any, Mapping[str, object] | Iterable[Mapping[str, object]]],
    b: Mapping[Any, Mapping[str, object] | Iterable[Mapping[str, object]]],
) -> Comparison:
    """Compare experiment A with experiment B over the items both graded.

    Each experiment maps an item id (the source pass) to its verdicts: a list of
    verdict dicts `{name, passed, insufficient?}` or a mapping
    `{criterion: True/False/None}`. Only items and criteria both hold are compared;
    the rest are listed (`only_in_a`, `criteria_only_in_b`...). A flip is `improved`
    (fail→pass in B), `regressed` (pass→fail) or `undecided` (one side could not
    verify); insufficient evidence is never counted as a pass. For each one's
    agreement with human labels, pair each with the labels (`pair_up`) and call
    `agreement_report`.

    Raises:
        EvaluationError: The experiments share no item, or a malformed verdict.

    Examples:
        >>> before = {1: {"rhymes": False}, 2: {"rhymes": True}, 3: {"rhymes": True}}
        >>> after = {1: {"rhymes": True}, 2: {"rhymes": True}, 4: {"rhymes": False}}
        >>> report = compare_experiments(before, after)
        >>> report["criteria"][0]["pass_rate_a"], report["criteria"][0]["pass_rate_b"]
        (0.5, 1.0)
        >>> report["overall"]["improved"], report["only_in_a"], report["only_in_b"]
        (1, [3], [4])
    """
    shared = [item_id for item_id in a if item_id in b]
    if not shared:
        msg = (
            f"the experiments share no items to compare (A has {len(a)}, B has {len(b)}); "
            "re-grade the same source passes in both"
        )
        raise EvaluationError(msg)
    rows: list[MatrixRow] = []
    names_a: dict[str, None] = {}
    names_b: dict[str, None] = {}
    for item_id in shared:
        mine = as_values(a[item_id], f"experiment A item {item_id!r}")
        theirs = as_values(b[item_id], f"experiment B item {item_id!r}")
        names_a.update(dict.fromkeys(mine))
        names_b.update(dict.fromkeys(theirs))
        rows.extend(
            {
                "item_id": item_id,
                "criterion": name,
                "a": value,
                "b": theirs[name],
                "change": _change(value, theirs[name]),
            }
            for name, value in mine.items()
            if name in theirs
        )
    compared = [name for name in names_a if name in names_b]
    by_name: dict[str, list[MatrixRow]] = {name: [] for name in compared}
    for row in rows:
        by_name[row["criterion"]].append(row)
    return {
        "overall": _rates(rows),
        "criteria": [{"name": name, **_rates(group)} for name, group in by_name.items()],
        "rows": rows,
        "flips": [row for row in rows if row["change"] != "same"],
        "only_in_a": [item_id for item_id in a if item_id not in b],
        "only_in_b": [item_id for item_id in b if item_id not in a],
        "criteria_only_in_a": [name for name in names_a if name not in names_b],
        "criteria_only_in_b": [name for name in names_b if name not in names_a],
    }
