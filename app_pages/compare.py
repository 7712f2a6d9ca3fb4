"""Compare: two passes of one run (what changed and why), or two runs side by side."""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_plain, show_status
from app_widgets.run_detail import rubric_criteria
from app_widgets.store import get_store
from rubric_core.ui import (
    compare_runs_rows,
    draft_diff,
    final_verdict_rows,
    flipped_criteria,
    heatmap_figure,
    pass_label,
    run_label,
    status_badge,
)

RECENT_RUNS = 200

store = get_store()
st.title("Compare")

recent = store.runs.find(limit=RECENT_RUNS)
if not recent:
    st.info("No stored run yet. Launch one on the Run page, then compare its passes here.")
    st.stop()
labels = {run["id"]: run_label(run) for run in recent}
ids = list(labels)

passes_tab, runs_tab = st.tabs(["Two passes of one run", "Two runs side by side"])

with passes_tab:
    with_passes = [run["id"] for run in recent if (run.get("iterations") or 0) >= 2] or ids
    run_id = st.selectbox(
        "Run", with_passes, format_func=labels.get, key="compare_run",
        help=f"The {RECENT_RUNS} most recent runs; runs with two or more passes first.",
    )  # fmt: skip
    evaluations = store.passes.of_run(run_id)
    if len(evaluations) < 2:
        st.info(
            f"Run #{run_id} has {len(evaluations)} grading pass(es); comparing needs two. "
            "Pick a run that needed a revision."
        )
    else:
        options = list(range(len(evaluations)))

        def pass_name(index: int) -> str:
            return f"{pass_label(index)} · {status_badge(evaluations[index].get('result'))}"

        col_a, col_b = st.columns(2)
        a = col_a.selectbox(
            "Earlier pass", options, index=len(options) - 2, format_func=pass_name,
            key=f"compare_pass_a_{run_id}",
        )  # fmt: skip
        b = col_b.selectbox(
            "Later pass", options, index=len(options) - 1, format_func=pass_name,
            key=f"compare_pass_b_{run_id}",
        )  # fmt: skip
        if a == b:
            st.warning("Pick two different passes.")
        else:
            if a > b:
                a, b = b, a
                st.caption("Swapped so that the earlier pass is on the left.")
            first, second = evaluations[a], evaluations[b]
            diff_col, flip_col = st.columns([1, 1], gap="medium")
            with diff_col:
                st.subheader("Draft diff")
                diff = draft_diff(
                    first.get("draft") or "",
                    second.get("draft") or "",
                    label_a=pass_label(a),
                    label_b=pass_label(b),
                )
                if diff:
                    st.code(diff, language="diff", wrap_lines=True)
                else:
                    st.caption("The two drafts are identical.")
            with flip_col:
                # A smaller heading than the diff's: it stays on one line in a 1024 px window.
                st.markdown("#### Criteria that flipped")
                flipped = flipped_criteria(first, second)
                if not flipped:
                    st.caption("No criterion changed its verdict between these passes.")
                for item in flipped:
                    mark = {"fixed": "✅ fixed", "regressed": "↩️ regressed"}.get(
                        item["change"], item["change"]
                    )
                    st.text(f"{mark}: {item['criterion']}")
                    if item["gap"]:
                        reason = (
                            "asked for by the gap" if item["change"] == "fixed" else "what broke"
                        )
                        st.caption(reason)
                        st.text(f"   → {item['gap']}")
                st.markdown(f"#### Grader's feedback after {pass_label(a)}")
                st.text(first.get("explanation") or "(none)")

with runs_tab:
    col_a, col_b = st.columns(2, gap="large")
    run_a = col_a.selectbox(
        "Run A", ids, index=min(1, len(ids) - 1), format_func=labels.get, key="compare_run_a"
    )
    run_b = col_b.selectbox("Run B", ids, index=0, format_func=labels.get, key="compare_run_b")
    first_run, second_run = store.runs.get(run_a), store.runs.get(run_b)
    st.dataframe(compare_runs_rows(first_run, second_run), hide_index=True, key="compare_rows")
    verdict_rows = final_verdict_rows(store.passes.of_run(run_a), store.passes.of_run(run_b))
    if verdict_rows:
        st.caption("Final verdict of each criterion")
        st.dataframe(verdict_rows, hide_index=True, key="compare_final_criteria")
    lower_a, lower_b = st.columns(2, gap="large")
    for side, column, run in (("a", lower_a, first_run), ("b", lower_b, second_run)):
        with column:
            show_status(run["status"], error=run.get("error"), agent_kind=run.get("agent_kind"))
            st.plotly_chart(
                heatmap_figure(
                    store.passes.of_run(run["id"]),
                    rubric_criteria(store, run),
                    finished=run["status"] != "running",
                ),
                key=f"compare_heatmap_{side}",
            )
            st.caption("Final output")
            show_plain(run.get("final_output"), empty="(no final output)")
