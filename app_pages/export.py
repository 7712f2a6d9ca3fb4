"""Export: the evaluation dataset as CSV or JSONL, and the training data, with the Runs page's
filters."""

from __future__ import annotations

import streamlit as st

from app_widgets.pickers import run_filter_widgets
from app_widgets.store import get_store
from rubric_core.ui import (
    export_bytes,
    export_file_name,
    preview_rows,
    training_bytes,
)
from rubric_core.ui.export import DATASETS, EXPORT_COLUMNS, TRAINING_FORMATS, TrainingOptions

PREVIEW_ROWS = 20
DATASET_HELP = {
    "criteria": "One row per criterion per grading pass: the verdict, its gap and the pass's context.",
    "runs": "One row per run: its settings, final status, final output and token totals.",
}

TRAINING_HELP = {
    "sft": "the request and each grading run's satisfied draft",
    "preference": "two drafts of one grading run, the better-scoring one chosen",
    "trajectories": "every pass of a grading run: drafts, verdicts, gaps, scores, feedback",
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

matching = store.runs.count(filters=filters)
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

st.subheader("Training data")
st.caption(
    "The revision loop in the chat shapes Hugging Face TRL reads: sft rows for SFTTrainer, "
    "preference rows (prompt, chosen, rejected) for DPOTrainer, or whole trajectories with "
    "every pass's verdicts and the feedback the agent saw. The same rows as "
    "`python -m rubric_core export --format KIND` with these filters."
)
kind = st.radio(
    "Training format",
    list(TRAINING_FORMATS),
    format_func=lambda k: f"{k} — {TRAINING_HELP[k]}",
    key="export_training_kind",
)
margin_col, flags_col = st.columns(2)
min_margin = margin_col.number_input(
    "Least score margin (preference)",
    min_value=0.01,
    max_value=1.0,
    value=0.1,
    step=0.05,
    key="export_training_margin",
    disabled=kind != "preference",
)
labels_only = flags_col.checkbox(
    "Only passes a human agreed with",
    key="export_training_labels",
    help="Passes with human labels, every label equal to the judge's verdict.",
)
include_unsatisfied = flags_col.checkbox(
    "Best draft of runs never satisfied (sft)",
    key="export_training_unsatisfied",
    disabled=kind != "sft",
)
options = TrainingOptions(
    min_margin=float(min_margin),
    labels_only=labels_only,
    include_unsatisfied=include_unsatisfied and kind == "sft",
)
name = export_file_name(kind, "jsonl", filters)
train_jsonl, train_parquet = st.columns(2)
train_jsonl.download_button(
    "Download JSONL",
    data=lambda: training_bytes(store, kind, filters, options),
    file_name=name,
    mime="application/jsonl",
    on_click="ignore",
    key="export_training_jsonl",
    disabled=matching == 0,
)
train_parquet.download_button(
    "Download Parquet",
    data=lambda: training_bytes(store, kind, filters, options, parquet=True),
    file_name=name.removesuffix(".jsonl") + ".parquet",
    mime="application/vnd.apache.parquet",
    on_click="ignore",
    key="export_training_parquet",
    disabled=matching == 0,
)
