"""Experiments: re-grade stored drafts without running the agent, and compare two experiments."""

from __future__ import annotations

import streamlit as st

from app_widgets.model_pickers import model_picker
from app_widgets.pickers import experiment_picker, rubric_version_picker, run_filter_widgets
from app_widgets.report import report_download
from app_widgets.session import run_registry
from app_widgets.store import STORE_ERRORS, get_store, show_store_error
from rubric_core.errors import InputError
from rubric_core.ui import (
    batch_options,
    change_mark,
    comparison_delta_rows,
    experiment_label,
    experiment_matrix_rows,
    experiment_rows,
    format_delta,
    format_kappa,
    format_rate,
    matching_scenario,
    md_escape,
    progress,
    verdict_mark,
)
from rubric_core.ui.models import DEFAULT_REPLAY_SCENARIO, list_scenarios
from rubric_core.ui.settings import MAX_CONCURRENCY, TOOL_NAMES
from rubric_core.workbench import Grader, Job, RegradePasses, start_job
from rubric_core.workbench.agreement import compare_stored_experiments

POLL_S = 1.0
FLIPS_SHOWN = 50

store = get_store()
scenarios = list_scenarios()
registry = run_registry()
st.title("Experiments")
st.caption(
    "An experiment grades stored drafts again, with another rubric version, grader, prompt, "
    "tools or sample count, without running the agent. The source runs are not changed."
)

# ------------------------------------------------------------------ launcher

st.subheader("Re-grade stored runs")
with st.container(border=True):
    SOURCES = {"batch": "A batch", "filters": "Runs matching filters", "run": "One run"}
    source = st.radio(
        "Which runs", list(SOURCES), format_func=SOURCES.get, horizontal=True, key="exp_source"
    )
    source_args: dict = {}
    if source == "batch":
        batches = batch_options(store.runs.find(limit=500))
        if batches:
            chosen = st.selectbox("Batch", batches, key="exp_batch")
            source_args = {"batch_id": chosen}
        else:
            st.caption("No batch stored yet.")
    elif source == "filters":
        filters = run_filter_widgets(store, key="exp")
        if filters is not None:
            source_args = {"filters": filters}
    else:
        run_id = st.number_input("Run id", min_value=1, step=1, key="exp_run")
        source_args = {"run_ids": (int(run_id),)}

    st.caption("Grade them against")
    version = rubric_version_picker(store, key="exp")
    grader_col, settings_col = st.columns(2, gap="large")
    errors: list[str] = []
    with grader_col:
        try:
            grader_spec, base_url = model_picker(
                "grader",
                key="exp",
                scenarios=scenarios,
                default_scenario=matching_scenario(
                    scenarios, version["criteria"] if version else [], DEFAULT_REPLAY_SCENARIO
                ),
                version=version,
            )
        except InputError as exc:
            grader_spec, base_url = "", None
            errors.append(f"Grader model: {exc}")
    with settings_col:
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key="exp_tools")
        s1, s2 = st.columns(2)
        samples = s1.number_input(
            "Samples (k)",
            min_value=1,
            max_value=9,
            step=1,
            key="exp_samples",
            help="Grade each draft k times: reports each criterion's flip rate, "
            "verdicts by strict majority.",
        )
        concurrency = s2.number_input(
            "Concurrency", min_value=1, max_value=MAX_CONCURRENCY, value=4, key="exp_concurrency"
        )
        all_passes = st.checkbox("Every pass, not only each run's final one", key="exp_all")
        name = st.text_input("Name (optional)", key="exp_name", placeholder="e.g. stricter v2")
        prompt = st.text_area(
            "Grader system prompt (optional)", key="exp_prompt", placeholder="(the default)"
        )

    if st.button(
        "Launch re-grade",
        type="primary",
        key="exp_launch",
        disabled=version is None or not source_args,
    ):
        for message in errors:
            st.error(message)
        if not errors and version is not None:
            try:
                grader = Grader(
                    grader_spec,
                    tuple(tools),
                    prompt.strip() or None,
                    int(samples),
                    base_url=base_url,
                )
                work = RegradePasses(
                    grader,
                    **source_args,
                    rubric_version_id=int(version["id"]),
                    all_passes=bool(all_passes),
                    name=name.strip() or None,
                )
                job = start_job(store, Job(work, concurrency=int(concurrency)))
            except InputError as exc:
                st.error(f"Not started: {exc}")
            except STORE_ERRORS as exc:
                show_store_error(exc)
            else:
                registry.add_job(job)
                st.session_state["exp_watch"] = job.experiment_id

watch = st.session_state.get("exp_watch")
watch_job = registry.job(f"experiment-{watch}") if watch is not None else None
polling = watch_job is not None and not watch_job.done()


@st.fragment(run_every=POLL_S if polling else None)
def regrade_progress() -> None:
    """The watched experiment's progress, read from the store."""
    if watch is None:
        return
    try:
        experiment = store.experiments.get(watch)
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return
    total = watch_job.total if watch_job is not None else experiment["items"]
    value, text = progress(int(experiment["items"] or 0), int(total or 0))
    st.progress(value, text=f"Experiment {experiment_label(experiment)}: {text}")
    if watch_job is not None and watch_job.error:
        st.error(
            f"The re-grade stopped early: {watch_job.error}. Items graded until then are kept."
        )
    elif experiment.get("error"):
        st.error(f"The re-grade stopped early: {experiment['error']}")
    if polling and (watch_job is None or watch_job.done()):
        st.rerun()


regrade_progress()

# ------------------------------------------------------------------ the experiments

experiments = store.experiments.find()
if not experiments:
    st.info("No experiment yet: re-grade some stored runs above.", icon=":material/science:")
    st.stop()
st.dataframe(experiment_rows(experiments), hide_index=True, key="exp_table")

st.divider()
st.subheader("Compare two experiments")
left, right = st.columns(2)
# Keyed by the newest experiment: a new one starts the pickers again at the newest two.
a = experiment_picker(
    left, "Experiment A", experiments, key=f"exp_a_{experiments[0]['id']}",
    index=min(1, len(experiments) - 1),
)  # fmt: skip
b = experiment_picker(right, "Experiment B", experiments, key=f"exp_b_{experiments[0]['id']}")
if a == b:
    st.info("Pick two different experiments.")
    st.stop()
running = [e["id"] for e in experiments if e["id"] in (a, b) and e.get("status") == "running"]
if running:
    st.info(f"Experiment #{running[0]} is still grading; the comparison appears when it is done.")
    st.stop()
try:
    result = compare_stored_experiments(store, a, b)
except (InputError, *STORE_ERRORS) as exc:
    st.error(f"Cannot compare: {exc}")
    st.stop()
comparison = result["comparison"]
items_a = store.experiments.items(a)
run_of = {int(i["evaluation_id"]): int(i["run_id"]) for i in items_a}
overall = comparison["overall"]
m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("Verdicts compared", overall["n"])
m2.metric(
    "Pass rate of B",
    format_rate(overall["pass_rate_b"]),
    delta=format_delta(overall["delta"]) if overall["delta"] else None,
    help=f"A passed {format_rate(overall['pass_rate_a'])} of the same verdicts.",
)
m3.metric("Improved (fail → pass)", overall["improved"])
m4.metric("Regressed (pass → fail)", overall["regressed"])
m5.metric("Undecided", overall["undecided"], help="One side had insufficient evidence.")
report_download(store, key=f"exp_report_{a}_{b}", experiment_id=a, against=b)

agree_a, agree_b = st.columns(2)
for column, side, report in (
    (agree_a, "A", result["agreement_a"]),
    (agree_b, "B", result["agreement_b"]),
):
    with column:
        if report is None:
            st.caption(f"{side}: no human labels on these items yet (label them on Review).")
        else:
            o = report["overall"]
            st.markdown(
                f"**{side} vs human labels:** n {o['n']} · agreement {format_rate(o['agreement'])} · "
                f"kappa {format_kappa(o['kappa'])}"
            )

deltas_tab, matrix_tab, flips_tab = st.tabs(
    ["Pass-rate deltas", "Per-item matrix", f"Flipped items ({len(comparison['flips'])})"]
)
with deltas_tab:
    st.dataframe(comparison_delta_rows(comparison), hide_index=True, key="exp_deltas")
    for side, names in (
        ("A", comparison["criteria_only_in_a"]),
        ("B", comparison["criteria_only_in_b"]),
    ):
        if names:
            st.caption(f"Judged only in {side}: " + ", ".join(md_escape(n) for n in names))
with matrix_tab:
    st.caption(
        "Rows: the inputs whose drafts were re-graded (pass: the source pass). ✓ pass, "
        "✗ fail, ? insufficient evidence; A → B where they differ."
    )
    st.dataframe(
        experiment_matrix_rows(comparison, items_a),
        hide_index=True,
        key="exp_matrix",
    )
with flips_tab:
    if not comparison["flips"]:
        st.caption("No verdict changed between A and B.")
    for flip in comparison["flips"][:FLIPS_SHOWN]:
        st.page_link(
            "app_pages/review.py",
            label=md_escape(
                f"pass #{flip['item_id']} · {flip['criterion']} · {verdict_mark(flip['a'])} → "
                f"{verdict_mark(flip['b'])} {change_mark(flip['change'])}"
            ),
            icon=":material/open_in_new:",
            query_params={
                "pass": str(flip["item_id"]),
                "run": str(run_of.get(flip["item_id"], "")),
            },
        )
    if len(comparison["flips"]) > FLIPS_SHOWN:
        st.caption(f"… and {len(comparison['flips']) - FLIPS_SHOWN} more.")
