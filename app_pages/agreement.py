"""Agreement: how far the judge (or an experiment) agrees with human labels, or with another experiment."""

from __future__ import annotations

import streamlit as st

from app_widgets.pickers import experiment_picker
from app_widgets.report import report_download
from app_widgets.review import review_scope
from app_widgets.store import STORE_ERRORS, get_store
from rubric_core.errors import InputError
from rubric_core.ui import (
    confusion_rows,
    criterion_agreement_rows,
    disagreement_label,
    format_kappa,
    format_rate,
    md_escape,
)
from rubric_core.workbench.agreement import agreement_between, agreement_with_labels

DISAGREEMENTS_SHOWN = 50

store = get_store()
st.title("Agreement")
st.caption(
    "Per criterion and overall: labelled items (n), percent agreement, Cohen's kappa "
    "(scikit-learn) and the confusion matrix with the judge as predictor: *judge pass / "
    "human fail* is a false pass. Insufficient evidence is counted apart, never as a fail."
)

MODES = {
    "judge": "The judge vs human labels",
    "experiment": "An experiment vs human labels",
    "between": "Experiment vs experiment",
}
mode = st.radio("Compare", list(MODES), format_func=MODES.get, horizontal=True, key="agree_mode")

experiments = store.experiments.find()
predictor, reference = "judge", "human"
run_of: dict[int, int] = {}
subject: dict | None = None  # what "Download report" reports
try:
    if mode == "judge":
        scope = review_scope(store, key="agree", want="labels")
        if scope is None:
            st.stop()
        _, filters = scope
        report = agreement_with_labels(store, filters=filters)
        subject = {"batch_id": filters.batch_id} if filters.batch_id else None
        # Every disagreement is a final pass of these runs: look up only the ones linked.
        run_of = {
            int(d["item_id"]): store.passes.run_of(int(d["item_id"]))
            for d in report["disagreements"][:DISAGREEMENTS_SHOWN]
        }
    else:
        if not experiments:
            st.info(
                "No experiment yet: re-grade stored runs on the Experiments page first.",
                icon=":material/science:",
            )
            st.stop()
        left, right = st.columns(2)
        a = experiment_picker(left, "Experiment A", experiments, key="agree_a")
        run_of = {int(i["evaluation_id"]): int(i["run_id"]) for i in store.experiments.items(a)}
        if mode == "experiment":
            report = agreement_with_labels(store, experiment_id=a)
            predictor = f"#{a}"
            subject = {"experiment_id": a}
        else:
            others = [e for e in experiments if e["id"] != a] or experiments
            b = experiment_picker(right, "Experiment B", others, key="agree_b")
            report = agreement_between(store, a, b)
            predictor, reference = f"A #{a}", f"B #{b}"
            subject = {"experiment_id": a, "against": b}
except (InputError, *STORE_ERRORS) as exc:
    st.info(f"No agreement to show: {exc}", icon=":material/info:")
    st.stop()

overall = report["overall"]
m1, m2, m3, m4 = st.columns(4)
m1.metric("Labelled items (n)", overall["n"])
m2.metric("Agreement", format_rate(overall["agreement"]))
m3.metric("Cohen's kappa", format_kappa(overall["kappa"]))
m4.metric("Insufficient evidence", overall["insufficient"])
if overall["kappa"] is None and overall["n"]:
    st.caption("Kappa is undefined when both sides give one and the same verdict throughout.")
if subject is not None:
    report_download(store, key=f"agree_report_{mode}", **subject)
else:
    st.caption("Pick one batch under “Runs” to download its report.")

st.subheader("Per criterion")
st.dataframe(
    criterion_agreement_rows(report, predictor=predictor, reference=reference),
    hide_index=True,
    key="agree_table",
)
st.subheader("Confusion matrix")
pick_col, matrix_col = st.columns([1, 2], gap="large")
names = ["(overall)", *(c["name"] for c in report["criteria"])]
which = pick_col.selectbox("Criterion", names, key="agree_matrix_of")
pick_col.caption(f"Rows: {predictor} (the predictor). Columns: {reference}.")
entry = (
    overall if which == "(overall)" else next(c for c in report["criteria"] if c["name"] == which)
)
matrix_col.dataframe(
    confusion_rows(entry, predictor=predictor, reference=reference),
    hide_index=True,
    key="agree_matrix",
)

st.subheader(f"Disagreements ({len(report['disagreements'])})")
if not report["disagreements"]:
    st.caption("None: on every labelled item both sides agree.")
for disagreement in report["disagreements"][:DISAGREEMENTS_SHOWN]:
    item_id = disagreement["item_id"]
    params = {"pass": str(item_id)}
    if item_id in run_of:
        params["run"] = str(run_of[item_id])
    st.page_link(
        "app_pages/review.py",
        label=md_escape(
            disagreement_label(
                disagreement,
                item_label=lambda i: f"pass #{i}",
                predictor=predictor,
                reference=reference,
            )
        ),
        icon=":material/open_in_new:",
        query_params=params,
    )
if len(report["disagreements"]) > DISAGREEMENTS_SHOWN:
    st.caption(f"… and {len(report['disagreements']) - DISAGREEMENTS_SHOWN} more (see the export).")
if report["insufficient"]:
    st.caption(
        f"{len(report['insufficient'])} verdict(s) of insufficient evidence, not counted in n "
        "or kappa: "
        + ", ".join(
            f"pass #{i['item_id']} · {md_escape(i['criterion'])}"
            for i in report["insufficient"][:20]
        )
    )
