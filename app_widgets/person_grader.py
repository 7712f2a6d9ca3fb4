"""The person grader's checklist: code-checked criteria shown as decided, the rest asked."""

from __future__ import annotations

import streamlit as st

from rubric_core.ui import md_escape
from rubric_core.ui.person import ChecklistItem, choices_for, person_checklist, verdict_words

__all__ = ["human_verdict_widgets"]


def _decided(item: ChecklistItem) -> None:
    """A criterion its code check decided: the verdict and the check's evidence, no choice."""
    decided = item.decided or {}
    passed = bool(decided.get("passed"))
    words = verdict_words(passed, penalty=item.penalty)
    if decided.get("check_error"):
        words = "could not be checked ✗"
    evidence = str(decided.get("evidence") or decided.get("gap") or "")
    st.markdown(f"**{item.index + 1}. {md_escape(item.name)}** · ⚙ decided by code: {words}")
    st.caption(f"Check `{item.check}`: {evidence}" if evidence else f"Check `{item.check}`")


def human_verdict_widgets(
    text: str, output: str, *, key: str
) -> tuple[dict[str, bool | None], dict[str, str], list[str]]:
    """A person's checklist for rubric `text` on `output`: the criteria a code check
    decides are shown decided, with their evidence; each other one asks pass / fail /
    insufficient (a penalty: absent ✓ / present ✗ / insufficient) and a gap.

    Returns `(verdicts, gaps, missing)`: the person's verdicts by judged criterion
    (`None` insufficient), gaps by criterion, and the judged criteria still without one.
    """
    verdicts: dict[str, bool | None] = {}
    gaps: dict[str, str] = {}
    missing: list[str] = []
    items = person_checklist(text, output)
    if any(item.check for item in items):
        st.caption(
            "⚙ Criteria with a code check are decided by it on this output, as in every "
            "pass; you judge the others."
            + ("" if output.strip() else " Paste the output to see what the checks decide.")
        )
    for item in items:
        with st.container(border=True):
            if item.check is not None:
                _decided(item)
                continue
            choices = choices_for(item)
            text_col, choice_col, gap_col = st.columns([3, 4, 3], vertical_alignment="center")
            text_col.markdown(f"**{item.index + 1}. {md_escape(item.name)}**")
            if item.hint:
                text_col.caption(item.hint)
            choice = choice_col.radio(
                "Your verdict",
                list(choices),
                index=None,
                horizontal=True,
                key=f"{key}_{item.index}",
            )
            verdict = choices.get(choice) if choice is not None else None
            gap = gap_col.text_input(
                "Gap (what is missing)" if not item.penalty else "Gap (what to remove)",
                key=f"{key}_{item.index}_gap",
                disabled=verdict is True,
                placeholder="required on fail / insufficient",
            )
        if choice is None:
            missing.append(item.name)
            continue
        verdicts[item.name] = verdict
        if verdict is not True and gap.strip():
            gaps[item.name] = gap.strip()
    return verdicts, gaps, missing
