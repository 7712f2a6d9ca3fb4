"""Runs: every stored run, filtered and paged, with pass rates and one run's detail."""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_plain
from app_widgets.pickers import run_filter_widgets
from app_widgets.report import report_download
from app_widgets.run_detail import render_passes, render_run_overview, render_transcript
from app_widgets.store import STORE_ERRORS, cached_pass_rates, get_store, show_store_error
from rubric_core.store import Store, StoreError
from rubric_core.ui import (
    DEFAULT_PAGE_SIZE,
    page_caption,
    page_count,
    page_pass_rates,
    page_window,
    parse_id_param,
    pass_rate_figure,
    rubric_label,
    run_spec_rows,
    runs_table,
)

LIVE_POLL_S = 1.0

store = get_store()
st.title("Runs")

filters = run_filter_widgets(store, key="runs")
if filters is None:
    st.stop()

total = store.runs.count(filters=filters)
pages = page_count(total, DEFAULT_PAGE_SIZE)
page_col, caption_col = st.columns([1, 4], vertical_alignment="bottom")
# Keyed by the filters: new filters start again at page 1 (and never exceed the last page).
requested = page_col.number_input(
    "Page", min_value=1, max_value=pages, value=1, key=f"runs_page_{hash(filters)}"
)
page, offset, limit = page_window(int(requested), total, DEFAULT_PAGE_SIZE)
caption_col.caption(
    f"{page_caption(page, total, DEFAULT_PAGE_SIZE)}. Click a row to open its run below."
)
runs = store.runs.find(filters=filters, limit=limit, offset=offset)

if not runs and not st.query_params.get("run"):
    st.info(
        "No stored run matches these filters. Launch one on the Run page, or clear the filters."
    )
    st.stop()

if runs:
    event = st.dataframe(
        runs_table(runs),
        hide_index=True,
        key=f"runs_table_{hash(filters)}_{page}",
        on_select="rerun",
        selection_mode="single-row",
    )
    picked = event.selection.rows
    if picked:
        # A click opens that run (and puts it in the URL, so the link can be shared).
        st.query_params["run"] = str(runs[picked[0]]["id"])

    show_rates = st.toggle(
        "Per-criterion pass rates (every pass of the matching runs)",
        key="runs_show_rates",
        help="Counted over every stored pass that matches the filters; cached until a new "
        "pass arrives.",
    )
    if show_rates:
        rates = page_pass_rates(store, filters, cached_pass_rates)
        st.plotly_chart(pass_rate_figure(rates), key="runs_pass_rates")
else:
    st.info("No stored run matches these filters; the run named in the address is shown below.")

st.divider()
wanted = st.query_params.get("run")
run_id = parse_id_param(wanted) if wanted else None
if wanted and run_id is None:
    st.error(f"“{wanted}” in the address is not a run number; showing the newest matching run.")
if run_id is None:
    if not runs:
        st.stop()
    run_id = int(runs[0]["id"])
try:
    running_now = store.runs.get(run_id)["status"] == "running"
except StoreError as exc:
    if exc.kind != "invalid":
        raise
    st.error(
        f"Run #{run_id} does not exist in this database. Pick a run in the table above "
        "(or check the link you followed).",
        icon=":material/search_off:",
    )
    st.stop()


def render_run_detail(store: Store, run_id: int, *, key: str) -> None:
    """A stored run's page: overview, passes, transcript, final output and its spec."""
    run = store.runs.get(run_id)
    evaluations = store.passes.of_run(run_id)
    st.subheader(f"Run #{run_id} · {rubric_label(run)}")
    if run["status"] != "running":
        report_download(store, key=f"{key}_report_{run_id}", run_id=run_id)
    render_run_overview(store, run, evaluations, key=key)
    # Only the open tab is drawn (a tab switch reruns this fragment): a long transcript or
    # many passes cost nothing until asked for.
    passes, transcript, output, spec = st.tabs(
        ["Passes", "Transcript", "Final output", "Spec"], key=f"{key}_tab", on_change="rerun"
    )
    if passes.open:
        with passes:
            render_passes(evaluations, running=run["status"] == "running")
    if transcript.open:
        with transcript:
            render_transcript(store, run_id)
    if output.open:
        with output:
            show_plain(run.get("final_output"), empty="(no final output stored)")
    if spec.open:
        with spec:
            st.dataframe(run_spec_rows(run), hide_index=True)
            st.caption("Input")
            show_plain(run.get("input"))


@st.fragment(run_every=LIVE_POLL_S if running_now else None)
def run_detail() -> None:
    """The run from the store, redrawn every second while it runs (as the Run page does)."""
    try:
        render_run_detail(store, run_id, key="runs_detail")
        still_running = store.runs.get(run_id)["status"] == "running"
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return
    if still_running:
        st.caption(f"Live: redrawn from the store every {LIVE_POLL_S:g} s while the run goes on.")
    elif running_now:
        st.rerun()  # it ended: redraw the page once, which stops the polling


run_detail()
