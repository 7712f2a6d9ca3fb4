"""The Run page's grade-only mode: one output you already have, graded by a model or by you.

Beside the page rather than in it: the page with this form would be past 400 lines.
"""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_status
from app_widgets.model_pickers import grader_picker
from app_widgets.pickers import rubric_version_picker
from app_widgets.review import point_review_at, reviewer_input
from app_widgets.run_detail import render_passes
from app_widgets.store import STORE_ERRORS, show_store_error
from rubric_core.errors import InputError
from rubric_core.store import Store
from rubric_core.ui import md_escape, rubric_label
from rubric_core.ui.settings import TOOL_NAMES

__all__ = ["GRADE_VERDICTS", "grade_output_form", "human_verdict_widgets"]


GRADE_VERDICTS = {"pass": True, "fail": False, "insufficient": None}
"""A person's verdict choices on one criterion, as the human grader gives them."""


def human_verdict_widgets(criteria: list[str], *, key: str) -> tuple[dict, dict, list[str]]:
    """A person's checklist: per criterion pass / fail / insufficient and a gap.

    Returns `(verdicts, gaps, missing)`: verdicts by criterion (`None` insufficient),
    gaps by criterion, and the criteria still without a verdict.
    """
    verdicts: dict[str, bool | None] = {}
    gaps: dict[str, str] = {}
    missing: list[str] = []
    for index, criterion in enumerate(criteria):
        with st.container(border=True):
            text_col, choice_col, gap_col = st.columns([3, 4, 3], vertical_alignment="center")
            text_col.markdown(f"**{index + 1}. {md_escape(criterion)}**")
            choice = choice_col.radio(
                "Your verdict",
                list(GRADE_VERDICTS),
                index=None,
                horizontal=True,
                key=f"{key}_{index}",
            )
            gap = gap_col.text_input(
                "Gap (what is missing)",
                key=f"{key}_{index}_gap",
                disabled=choice == "pass",
                placeholder="required on fail / insufficient",
            )
        if choice is None:
            missing.append(criterion)
            continue
        verdicts[criterion] = GRADE_VERDICTS[choice]
        if choice != "pass" and gap.strip():
            gaps[criterion] = gap.strip()
    return verdicts, gaps, missing


def grade_output_form(store: Store, scenarios: list[dict], *, key: str) -> None:
    """The Run page's grade-only mode: paste an input and an output; a model or you grade it."""
    from rubric_core.workbench.grade import grade_by_person, grade_one

    st.caption(
        "Grade one output you already have, with no agent. Pick a grader model, or be the "
        "grader yourself: your verdicts drive the pass exactly as a model's would (every "
        "criterion passed → satisfied) and are kept as labels."
    )
    version = rubric_version_picker(store, key=key)
    if version is None:
        return
    left, right = st.columns(2, gap="large")
    text = left.text_area("Input (the request)", key=f"{key}_input", height=160)
    output = right.text_area("Output (the answer to grade)", key=f"{key}_output", height=160)
    who = st.radio(
        "Grader",
        ["person", "model"],
        format_func={"person": "You are the grader", "model": "A grader model"}.get,
        horizontal=True,
        key=f"{key}_who",
    )
    result: int | None = None
    if who == "model":
        grader_spec, base_url = grader_picker(scenarios, version, key=key)
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key=f"{key}_tools")
        if st.button("Grade", type="primary", key=f"{key}_grade", disabled=not grader_spec):
            try:
                with st.spinner("Grading…"):
                    graded = grade_one(
                        store,
                        int(version["id"]),
                        text,
                        output,
                        grader_spec,
                        grader_tools=tuple(tools),
                        base_url=base_url,
                    )
            except InputError as exc:
                st.error(f"Not graded: {exc}")
            except STORE_ERRORS as exc:
                show_store_error(exc)
            else:
                result = int(graded["run_id"])
    else:
        reviewer = reviewer_input(key=f"{key}_reviewer")
        st.caption("The checklist: your verdict on each criterion, and a gap where it falls short.")
        verdicts, gaps, missing = human_verdict_widgets(list(version["criteria"]), key=key)
        explanation = st.text_input("Summary (optional)", key=f"{key}_explanation")
        if st.button(
            "Record my verdict", type="primary", key=f"{key}_record", disabled=not reviewer
        ):
            if missing:
                st.error("Give a verdict on every criterion: " + ", ".join(missing))
            else:
                try:
                    result = int(
                        grade_by_person(
                            store,
                            int(version["id"]),
                            text,
                            output,
                            verdicts,
                            gaps,
                            reviewer=reviewer,
                            explanation=explanation,
                        )
                    )
                except InputError as exc:
                    st.error(f"Not recorded: {exc}")
                except STORE_ERRORS as exc:
                    show_store_error(exc)
        if not reviewer:
            st.caption("Type your name to record a verdict: it is kept with the labels.")
    if result is not None:
        st.session_state[f"{key}_last"] = result
    last = st.session_state.get(f"{key}_last")
    if last is None:
        return
    st.divider()
    run = store.get_run(int(last))
    st.subheader(f"Graded run #{last} · {rubric_label(run)}")
    show_status(run["status"], error=run.get("error"))
    render_passes(store.run_evaluations(int(last)), running=run["status"] == "running")
    point_review_at(version, None)
    st.page_link(
        "app_pages/runs.py", label=f"Open run #{last}", icon=":material/history:",
        query_params={"run": str(last)},
    )  # fmt: skip
