"""Runs: every stored run, filtered and paged, with pass rates and one run's detail."""

from __future__ import annotations

import streamlit as st

from rubric_core.ui import (
    DEFAULT_PAGE_SIZE,
    page_caption,
    page_count,
    page_pass_rates,
    page_window,
    pass_rate_figure,
    run_label,
    runs_table,
)
from studio_ui import cached_pass_rates, get_store, render_run_detail, run_filter_widgets

store = get_store()
st.title("Runs")

filters = run_filter_widgets(store, key="runs")
if filters is None:
    st.stop()

total = store.count_runs(filters=filters)
pages = page_count(total, DEFAULT_PAGE_SIZE)
page_col, caption_col = st.columns([1, 4], vertical_alignment="bottom")
# Keyed by the filters: new filters start again at page 1 (and never exceed the last page).
requested = page_col.number_input(
    "Page", min_value=1, max_value=pages, value=1, key=f"runs_page_{hash(filters)}"
)
page, offset, limit = page_window(int(requested), total, DEFAULT_PAGE_SIZE)
caption_col.caption(page_caption(page, total, DEFAULT_PAGE_SIZE))
runs = store.list_runs(filters=filters, limit=limit, offset=offset)

if not runs:
    st.info(
        "No stored run matches these filters. Launch one on the Run page, or clear the filters."
    )
    st.stop()

st.dataframe(runs_table(runs), hide_index=True, key="runs_table")

show_rates = st.toggle(
    "Per-criterion pass rates (every pass of the matching runs)",
    key="runs_show_rates",
    help="Counted over every stored pass that matches the filters; cached until a new pass arrives.",
)
if show_rates:
    rates = page_pass_rates(store, filters, cached_pass_rates)
    st.plotly_chart(pass_rate_figure(rates), key="runs_pass_rates")

st.divider()
ids = [run["id"] for run in runs]
labels = {run["id"]: run_label(run) for run in runs}
wanted = st.query_params.get("run")
if wanted and wanted.isdigit() and int(wanted) not in labels:
    # A run linked by URL that is not on this page: offer it too.
    try:
        linked = store.get_run(int(wanted))
    except Exception:  # an unknown id in the URL is not worth an error box
        linked = None
    if linked is not None:
        ids.insert(0, linked["id"])
        labels[linked["id"]] = run_label(linked)
default = int(wanted) if wanted and wanted.isdigit() and int(wanted) in labels else ids[0]
run_id = st.selectbox(
    "Open a run", ids, index=ids.index(default), format_func=labels.get, key="runs_open"
)
st.query_params["run"] = str(run_id)
render_run_detail(store, run_id, key="runs_detail")
