"""Export: the evaluation dataset as CSV or JSONL, with the Runs page's filters."""

from __future__ import annotations

import streamlit as st

from app_widgets.pickers import run_filter_widgets
from app_widgets.store import get_store
from rubric_core.ui import export_bytes, export_file_name, preview_rows
from rubric_core.ui.export import DATASETS, EXPORT_COLUMNS

PREVIEW_ROWS = 20
DATASET_HELP = {
    "criteria": "One row per criterion per grading pass: the verdict, its gap and the pass's context.",
    "runs": "One row per run: its settings, final status, final output and token totals.",
}

store = get_store()
st.title("Export")

dataset = st.radio(
    "Dataset",
    list(DATASETS),
    format_func=lambda d: f"{d} — {DATASET_HELP.get(d, '')}",
    key="export_dataset",
)
filters = run_filter_widgets(store, key="export")
if filters is None:
    st.stop()

matching = store.count_runs(filters=filters)
st.caption(
    f"{matching:,} run(s) match these filters. Columns: {', '.join(EXPORT_COLUMNS[dataset])}."
)

csv_col, jsonl_col = st.columns(2)
csv_col.download_button(
    "Download CSV",
    data=lambda: export_bytes(store, "csv", dataset, filters),
    file_name=export_file_name(dataset, "csv", filters),
    mime="text/csv",
    on_click="ignore",
    type="primary",
    key="export_csv",
    disabled=matching == 0,
)
jsonl_col.download_button(
    "Download JSONL",
    data=lambda: export_bytes(store, "jsonl", dataset, filters),
    file_name=export_file_name(dataset, "jsonl", filters),
    mime="application/jsonl",
    on_click="ignore",
    key="export_jsonl",
    disabled=matching == 0,
)

st.subheader(f"Preview (first {PREVIEW_ROWS} rows)")
rows = preview_rows(store, dataset, filters, limit=PREVIEW_ROWS)
if rows:
    st.dataframe(rows, hide_index=True, key="export_preview")
else:
    st.info("Nothing to export with these filters yet: runs appear here once graded.")
