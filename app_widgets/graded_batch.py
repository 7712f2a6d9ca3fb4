"""The Batch page's grade-only mode: outputs you already have, graded with no agent.

Beside the page rather than in it: the page with this form would be past 450 lines.
"""

from __future__ import annotations

import streamlit as st

from app_widgets.model_pickers import grader_picker
from app_widgets.pickers import rubric_version_picker
from app_widgets.rate_limit import rate_limit_fields
from app_widgets.review import point_review_at
from app_widgets.session import run_registry
from app_widgets.store import STORE_ERRORS, show_store_error
from rubric_core.errors import InputError
from rubric_core.store import Store
from rubric_core.ui import one_line, pass_rate_figure, progress, spec_error_hint
from rubric_core.ui.settings import MAX_CONCURRENCY, TOOL_NAMES
from rubric_core.workbench import (
    Grader,
    GradeRows,
    Job,
    batch_progress,
    load_graded_upload,
    start_job,
    summary_for_batch,
)

__all__ = ["graded_batch_form"]


def graded_batch_form(store: Store, scenarios: list[dict], *, key: str) -> None:
    """The Batch page's grade-only mode: upload input/output rows, grade them, watch."""
    st.caption(
        "Grade outputs you already have, with no agent: a CSV with `input` and `output` "
        'columns, or JSONL with `{"input": ..., "output": ...}` per line. An optional '
        '`labels` column (a JSON object such as `{"has a title": true}`) is stored as human '
        "labels, reviewer: the file's name. One graded run per row."
    )
    upload = st.file_uploader("Dataset", type=["csv", "jsonl", "ndjson"], key=f"{key}_upload")
    rows: list[dict] = []
    if upload is not None:
        try:
            rows = load_graded_upload(upload.name, upload.getvalue())
        except InputError as exc:
            st.error(f"Cannot use this dataset: {exc}")
        else:
            labelled = sum(1 for row in rows if row.get("labels"))
            st.success(
                f"{len(rows)} row(s) read from {upload.name}"
                + (f", {labelled} with labels." if labelled else ".")
            )
            with st.expander("First rows"):
                for row in rows[:5]:
                    st.text(
                        f"{row['row']}. {one_line(row['input'], 90)}  →  {one_line(row['output'], 90)}"
                    )
    version = rubric_version_picker(store, key=key)
    if version is None:
        return
    grader_col, settings_col = st.columns(2, gap="large")
    with grader_col:
        grader_spec, base_url = grader_picker(scenarios, version, key=key)
    with settings_col:
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key=f"{key}_tools")
        concurrency = st.number_input(
            "Concurrency", min_value=1, max_value=MAX_CONCURRENCY, value=4, key=f"{key}_concurrency"
        )
    rate_limit = rate_limit_fields(key=key)
    registry = run_registry()
    if st.button(
        "Grade outputs", type="primary", key=f"{key}_launch", disabled=not rows or not grader_spec
    ):
        try:
            grader = Grader(grader_spec, tuple(tools), base_url=base_url)
            source = upload.name if upload is not None else "dataset"
            work = GradeRows(tuple(rows), int(version["id"]), grader, source=source)
            job = start_job(store, Job(work, concurrency=int(concurrency), rate_limit=rate_limit))
        except InputError as exc:
            st.error(f"Not started: {spec_error_hint(str(exc))}")
        except STORE_ERRORS as exc:
            show_store_error(exc)
        else:
            registry.add_job(job)
            st.session_state[f"{key}_watch"] = job.batch_id
    if not rows:
        st.caption("Upload a dataset to enable “Grade outputs”.")

    batch_id = st.session_state.get(f"{key}_watch")
    if batch_id is None:
        return
    job = registry.job(batch_id)
    polling = job is not None and not job.done()

    @st.fragment(run_every=1.0 if polling else None)
    def graded_view() -> None:
        try:
            total = job.total if job is not None else store.runs.count(batch_id=batch_id)
            finished, _ = batch_progress(store, batch_id)
            value, text = progress(finished, total)
            st.progress(value, text=f"Graded {text}")
            if job is not None and not job.done():
                return
            if job is not None and job.error:
                st.error(f"Grading stopped early: {job.error}. Passes stored until then are kept.")
            summary = summary_for_batch(store, batch_id)
        except STORE_ERRORS as exc:
            show_store_error(exc)
            return
        m1, m2, m3 = st.columns(3)
        m1.metric("Graded rows", summary.total)
        m2.metric("Every criterion passed", f"{summary.by_status.get('satisfied', 0)}")
        m3.metric("Grader errors", summary.grader_errors)
        st.plotly_chart(
            pass_rate_figure(summary.criterion_pass_rates, title=summary.pass_rate_rule),
            key=f"{key}_rates",
        )
        point_review_at(version, batch_id)
        st.page_link(
            "app_pages/review.py",
            label="Label these passes on Review",
            icon=":material/rate_review:",
        )
        if polling:
            st.rerun()

    st.subheader(f"Graded batch {batch_id}")
    graded_view()
