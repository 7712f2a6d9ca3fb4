"""The person grader's checklist: which criteria code decides, and what each choice means.

A person grading an output is the judge of the judged criteria only: the rubric's code
checks decide theirs (`workbench.grade.code_verdicts`, the checks a pass runs), and the
form shows those as decided, with their evidence. A penalty (`- [-2] Invents a price`)
passes when the bad thing is absent, so its choices say so ("absent ✓ / present ✗").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rubric_core.rubric import parse_criteria
from rubric_core.workbench.grade import code_verdicts

__all__ = [
    "PENALTY_CHOICES",
    "VERDICT_CHOICES",
    "ChecklistItem",
    "choices_for",
    "person_checklist",
    "verdict_words",
]

VERDICT_CHOICES: dict[str, bool | None] = {"pass": True, "fail": False, "insufficient": None}
"""A criterion's choices in the person's form, and the verdict each one gives."""

PENALTY_CHOICES: dict[str, bool | None] = {
    "absent ✓": True,
    "present ✗": False,
    "insufficient": None,
}
"""A penalty's choices: absent is the criterion passing, present is it failing."""

PENALTY_HINT = (
    "Penalty: something the output must not do. absent ✓ = it does not (the criterion "
    "passes); present ✗ = it does (the criterion fails and the score loses {weight})."
)


@dataclass(frozen=True)
class ChecklistItem:
    """One criterion of the person's checklist, in rubric order."""

    index: int
    """Its position in the rubric (0-based): the form's widget keys use it."""
    name: str
    """The criterion."""
    weight: int
    """Its weight; negative for a penalty."""
    check: str | None
    """The code check that decides it (`{words <= 60}`, as written), or `None`: the
    person judges it."""
    decided: Mapping[str, Any] | None
    """The check's verdict on the output (`passed`, `evidence`, `check_error`), if checked."""

    @property
    def penalty(self) -> bool:
        """A penalty passes when the bad thing is absent."""
        return self.weight < 0

    @property
    def hint(self) -> str | None:
        """What the choices mean, for a penalty; `None` otherwise."""
        return PENALTY_HINT.format(weight=-self.weight) if self.penalty else None


def choices_for(item: ChecklistItem) -> dict[str, bool | None]:
    """The radio's choices for a judged criterion: pass/fail, or absent/present on a penalty.

    Examples:
        >>> item = ChecklistItem(0, "Invents a price", -2, None, None)
        >>> list(choices_for(item))
        ['absent ✓', 'present ✗', 'insufficient']
    """
    return PENALTY_CHOICES if item.penalty else VERDICT_CHOICES


def verdict_words(passed: bool, *, penalty: bool) -> str:
    """A decided verdict in words that cannot be misread on a penalty.

    Examples:
        >>> verdict_words(True, penalty=True), verdict_words(False, penalty=False)
        ('absent ✓', 'fail ✗')
    """
    if penalty:
        return "absent ✓" if passed else "present ✗"
    return "pass ✓" if passed else "fail ✗"


def person_checklist(text: str, output: str) -> list[ChecklistItem]:
    """Every criterion of rubric `text`, those a code check decides with its verdict on `output`.

    Examples:
        >>> items = person_checklist("- Two lines {lines == 2}\\n- [-1] Shouts", "a\\nb")
        >>> [(i.name, i.check, i.decided["passed"] if i.decided else None) for i in items]
        [('Two lines', '{lines == 2}', True), ('Shouts', None, None)]
    """
    specs = parse_criteria(text)
    decided = {v["name"]: v for v in code_verdicts(text, output)} if output.strip() else {}
    return [
        ChecklistItem(
            index=index,
            name=spec.name,
            weight=spec.weight,
            check=None if spec.check is None else str(spec.check),
            decided=decided.get(spec.name),
        )
        for index, spec in enumerate(specs)
    ]
