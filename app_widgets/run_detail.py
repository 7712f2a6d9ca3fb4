"""One run, drawn: its overview (numbers, timeline, heatmap), its passes, its transcript."""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_status
from app_widgets.store import STORE_ERRORS
from rubric_core.store import Store
from rubric_core.ui import (
    find_regressions,
    heatmap_figure,
    md_escape,
    one_line,
    pass_details,
    pass_label,
    progress_figure,
    run_seconds,
    status_icon,
    status_words,
    timeline_figure,
    token_pair,
    transcript_items,
)

__all__ = ["render_passes", "render_run_overview", "render_transcript", "rubric_criteria"]


def render_run_overview(store: Store, run: dict, evaluations: list[dict], *, key: str) -> None:
    """Status, numbers, the timeline and the heatmap of one run (live or stored)."""
    show_status(run["status"], error=run.get("error"), agent_kind=run.get("agent_kind"))
    # The token pair is the widest value: its column gets more room, so it is not cut off
    # at 1024 px, and in/out moved to the label, leaving the value two numbers.
    m1, m2, m3, m4 = st.columns([1, 1, 1.6, 1])
    m1.metric("Grading passes", f"{len(evaluations)} / {run.get('max_iterations', '?')}")
    m2.metric("Seconds", f"{run_seconds(run):.1f}")
    tokens_in, tokens_out = (
        int(run.get("grader_input_tokens") or 0), int(run.get("grader_output_tokens") or 0),
    )  # fmt: skip
    m3.metric(
        "Grader tokens (in / out)",
        token_pair(tokens_in, tokens_out),
        help=f"{tokens_in:,} input and {tokens_out:,} output tokens over every grading pass.",
    )
    regressions = find_regressions(evaluations)
    m4.metric("Regressions", len(regressions))
    if not evaluations and run["status"] != "running":
        st.info(
            "No pass was graded: the run ended before the grader returned a verdict, so "
            "there is no timeline or heatmap to draw.",
            icon=":material/info:",
        )
        return
    left, right = st.columns([2, 3])
    finished = run["status"] != "running"
    left.plotly_chart(progress_figure(evaluations, finished=finished), key=f"{key}_timeline")
    criteria = rubric_criteria(store, run)
    right.plotly_chart(
        heatmap_figure(evaluations, criteria, finished=finished), key=f"{key}_heatmap"
    )
    if run.get("score") is not None:
        kept = run.get("best_iteration")
        if kept is not None and kept + 1 < len(evaluations):
            st.info(
                f"keep=best: the answer handed back is the draft of {pass_label(kept)}, "
                f"its best-scoring pass (score {float(run['score']):.2f}), not the last one.",
                icon=":material/trophy:",
            )
        else:
            st.caption(f"Score of the answer handed back: {float(run['score']):.2f}")
    # Drawn only while open (opening it reruns the page or its fragment).
    seconds = st.expander("Grader seconds per pass", key=f"{key}_seconds_open", on_change="rerun")
    if seconds.open:
        seconds.plotly_chart(timeline_figure(evaluations), key=f"{key}_seconds")
    for name, from_pass, to_pass in regressions:
        st.warning(
            f"Regression: passed in {pass_label(from_pass)}, failed in {pass_label(to_pass)}: "
            f"{md_escape(one_line(name, 120))}",
            icon=":material/undo:",
        )


def rubric_criteria(store: Store, run: dict) -> list[str]:
    """The criteria of a run's rubric version, in rubric order (empty if it cannot be read)."""
    try:
        return list(store.rubrics.version(run["rubric_version_id"])["criteria"])
    except (*STORE_ERRORS, KeyError):
        return []


def render_passes(evaluations: list[dict], *, running: bool = True) -> None:
    """Each pass's verdict, explanation and gaps, as text."""
    if not evaluations:
        st.caption("No grading pass stored yet." if running else "No grading pass was stored.")
        return
    details = pass_details(evaluations)
    for index, detail in reversed(list(enumerate(details))):
        score = "" if detail["score"] is None else f" · score {detail['score']:.2f}"
        title = (
            f"{detail['label']} · {status_words(detail['result'])} · "
            f"{detail['passed']}/{detail['total']} criteria{score} · {detail['duration_s']} s"
        )
        icon = status_icon(detail["result"])
        with st.expander(title, expanded=index == len(details) - 1, icon=icon):
            st.caption("Grader's explanation")
            st.text(detail["explanation"] or "(none)")
            for regression in detail["regressions"]:
                st.warning(
                    f"Regressed: {md_escape(one_line(regression, 160))}", icon=":material/undo:"
                )
            if detail["gaps"]:
                st.caption("Gaps (what the grader asked to change)")
                for criterion, gap in detail["gaps"]:
                    st.text(f"{detail['marks'].get(criterion, '✗')} {criterion}\n   → {gap}")


def render_transcript(store: Store, run_id: int) -> None:
    """The stored conversation; the grader's injected feedback is marked as the grader's."""
    items = transcript_items(store.runs.transcript(run_id))
    if not items:
        st.caption("No transcript stored yet (it is saved when the run ends).")
        return
    for item in items:
        with st.chat_message(item["chat"], avatar=item["avatar"]):
            st.caption(item["speaker"])
            if item["is_grader"]:
                st.info("Injected by the grader, not written by the user.", icon=":material/gavel:")
            if item["content"]:
                st.text(item["content"])
            for call in item["tool_calls"]:
                st.code(call, language=None, wrap_lines=True)
