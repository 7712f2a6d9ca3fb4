"""What statuses and verdicts mean, in words: the one home of the status sentences and of a
verdict's mark (a penalty's `absent ✓` / `present ✗`), read by the CLI and every page."""

from __future__ import annotations

from collections.abc import Mapping

from rubric_core.schema import GRADED_KIND, GRADED_STATUS_DESCRIPTIONS, RUN_STATUS_DESCRIPTIONS


def status_sentence(status: str | None, agent_kind: str | None = None) -> str:
    """What a run status means, in one sentence: the one home of the status sentences,
    read by the CLI (`run`, `grade`) and every page (`ui` re-exports it). A grade-only
    run (`agent_kind == GRADED_KIND`) gets the sentence that mentions no agent; an
    unknown status says so.

    Examples:
        >>> status_sentence("satisfied")
        'Every criterion of the rubric passed.'
        >>> "agent" in status_sentence("needs_revision", GRADED_KIND)
        False
        >>> status_sentence("bogus")
        "Unknown status 'bogus'."
    """
    table = GRADED_STATUS_DESCRIPTIONS if agent_kind == GRADED_KIND else RUN_STATUS_DESCRIPTIONS
    return table.get(status or "", f"Unknown status {status!r}.")


PENALTY_MARKS: dict[bool, str] = {True: "absent ✓", False: "present ✗"}
"""How a penalty's verdict reads (`- [-N] text`, something the work must not do): its
criterion *passes* when the bad thing is absent, so ✓ alone would read as "it invents
a price". Every output that shows verdicts uses `criterion_mark`."""


def criterion_mark(passed: bool | None, *, penalty: bool = False) -> str:
    """A verdict's mark where it is printed or shown: `✓` / `✗` (`?` undecided), and for
    a penalty `absent ✓` / `present ✗`, the one wording the CLI and the pages use.

    Examples:
        >>> criterion_mark(True), criterion_mark(False), criterion_mark(None)
        ('✓', '✗', '?')
        >>> criterion_mark(True, penalty=True), criterion_mark(False, penalty=True)
        ('absent ✓', 'present ✗')
    """
    if passed is None:
        return "?"
    if penalty:
        return PENALTY_MARKS[bool(passed)]
    return "✓" if passed else "✗"


def is_penalty(verdict: object) -> bool:
    """Whether a verdict dict (stored: `weight` when not 1) is a penalty's (weight below 0).

    Examples:
        >>> is_penalty({"name": "Invents a price", "passed": True, "weight": -5})
        True
        >>> is_penalty({"name": "a", "passed": True})
        False
    """
    if not isinstance(verdict, Mapping):
        return False
    try:
        return int(verdict.get("weight") or 1) < 0
    except (TypeError, ValueError):
        return False
