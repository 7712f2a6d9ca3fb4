"""Batch: one rubric version over a dataset of inputs, with progress and a summary."""

from __future__ import annotations

import streamlit as st

from rubric_core.models import DEFAULT_REPLAY_SCENARIO, list_scenarios
from rubric_core.runs import (
    DatasetError,
    RunSpec,
    SpecError,
    batch_progress,
    format_rate,
    load_upload,
    start_batch,
    summary_for_batch,
)
from rubric_core.runs.ray_batch import RayUnavailable, configured_ray_address, offered_executors
from rubric_core.schema import (
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_CONCURRENCY,
    MAX_ITERATIONS_LIMIT,
)
from rubric_core.tools import TOOL_NAMES
from rubric_core.ui import (
    InputError,
    combine_models,
    expand_counts,
    iterations_histogram,
    one_line,
    pass_rate_figure,
    progress,
    score_bins,
    spec_error_hint,
    status_badge,
)
from studio_ui import (
    STORE_ERRORS,
    agent_and_grader_pickers,
    get_store,
    graded_batch_form,
    rubric_version_picker,
    run_registry,
    show_store_error,
)

BATCH_POLL_S = 1.0
DEFAULT_CONCURRENCY = 4

store = get_store()
if store is None:
    st.stop()
registry = run_registry()
scenarios = list_scenarios()

st.title("Batch")
st.caption(
    "Run one rubric version over many inputs: a CSV with an `input` column, or JSONL with "
    '`{"input": ...}` per line.'
)

if st.toggle("Grade existing outputs (no agent)", key="batch_graded"):
    graded_batch_form(store, scenarios, key="batch_graded")
    st.stop()

upload = st.file_uploader("Dataset", type=["csv", "jsonl", "ndjson"], key="batch_upload")
inputs: list[str] = []
if upload is not None:
    try:
        inputs = load_upload(upload.name, upload.getvalue())
    except DatasetError as exc:
        st.error(f"Cannot use this dataset: {exc}")
    else:
        st.success(f"{len(inputs)} input(s) read from {upload.name}.")
        with st.expander("First inputs"):
            for number, text in enumerate(inputs[:5], start=1):
                st.text(f"{number}. {one_line(text, 200)}")

version = rubric_version_picker(store, key="batch")
if version is None:
    st.stop()

agent_choice, grader_choice, errors = agent_and_grader_pickers(
    key="batch", scenarios=scenarios, default_scenario=DEFAULT_REPLAY_SCENARIO
)

c1, c2, c3, c4 = st.columns([3, 1, 1, 1])
tools = c1.multiselect("Grader tools", list(TOOL_NAMES), key="batch_tools")
max_iterations = c2.number_input(
    "Max iterations",
    min_value=1,
    max_value=MAX_ITERATIONS_LIMIT,
    step=1,
    value=DEFAULT_MAX_ITERATIONS,  # in `value=`, so the browser never falls back to min_value
    key="batch_max_iterations",
)
concurrency = c3.number_input(
    "Concurrency", min_value=1, max_value=MAX_CONCURRENCY, step=1, value=DEFAULT_CONCURRENCY,
    key="batch_concurrency",
)  # fmt: skip
keep = c4.radio(
    "Keep",
    list(KEEP_CHOICES),
    key="batch_keep",
    horizontal=True,
    help="When a run ends unmet: hand back the last draft, or the best-scoring pass's.",
)
executors = offered_executors(store)
executor = "thread"
if "ray" in executors:
    ray_address = configured_ray_address()
    executor = st.radio(
        "Run on",
        executors,
        format_func=lambda name: (
            "this machine (threads)" if name == "thread" else f"the Ray cluster at {ray_address}"
        ),
        horizontal=True,
        key="batch_executor",
        help="On Ray, each input is a task on the cluster; its runs record into this "
        "PostgreSQL store, so progress shows here the same way.",
    )

if st.button("Launch batch", type="primary", key="batch_launch", disabled=not inputs):
    if agent_choice and grader_choice:
        try:
            agent_spec, grader_spec, base_url = combine_models(agent_choice, grader_choice)
        except InputError as exc:
            errors.append(str(exc))
    if errors:
        for message in errors:
            st.error(message)
    else:
        spec = RunSpec(
            rubric_version_id=int(version["id"]),
            input=inputs[0],
            agent_model=agent_spec,
            grader_model=grader_spec,
            grader_tools=tuple(tools),
            max_iterations=int(max_iterations),
            base_url=base_url,
            keep=keep,
        )
        try:
            job = start_batch(store, spec, inputs, concurrency=int(concurrency), executor=executor)
        except SpecError as exc:
            st.error(f"Not started: {spec_error_hint(str(exc))}")
        except RayUnavailable as exc:
            st.error(f"Not started: {exc}")
        except STORE_ERRORS as exc:
            show_store_error(exc)
        else:
            registry.add_batch(job)
            st.session_state["batch_watch"] = job.batch_id
elif errors:
    for message in errors:
        st.error(message)
if not inputs:
    st.caption("Upload a dataset to enable “Launch batch”.")

batch_id = st.session_state.get("batch_watch")
if batch_id is None:
    st.stop()
job = registry.batch(batch_id)
st.divider()
st.subheader(f"Batch {batch_id}")
polling = job is not None and not job.done()


@st.fragment(run_every=BATCH_POLL_S if polling else None)
def batch_view() -> None:
    """Progress from the store; the summary once every run has finished."""
    try:
        total = job.total if job is not None else store.count_runs(batch_id=batch_id)
        finished, started = batch_progress(store, batch_id, total)
        value, text = progress(finished, total)
        st.progress(value, text=f"{text} ({started - finished} running)")
        if job is not None and not job.done():
            if st.button("Stop batch", key="batch_stop"):
                job.stop()
                st.toast("Stopping: running runs end as interrupted; no new run starts.")
            return
        if job is not None and job.error:
            st.error(f"The batch stopped early: {job.error}. Runs stored until then are kept.")
        summary = summary_for_batch(store, batch_id)
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Runs", summary.total)
    m2.metric("Satisfied", format_rate(summary.satisfied_rate))
    m3.metric(
        "Mean passes to satisfied",
        "n/a"
        if summary.mean_iterations_to_satisfied is None
        else f"{summary.mean_iterations_to_satisfied:.2f}",
    )
    m4.metric("Grader errors", summary.grader_errors)
    if summary.mean_score is not None:
        s1, s2 = st.columns([1, 3])
        s1.metric("Mean score", f"{summary.mean_score:.2f}")
        s1.caption(f"over {len(summary.scores)} scored runs")
        s2.caption("Score distribution (runs per score band)")
        s2.bar_chart(score_bins(summary.scores), x="score", y="runs", height=180)
    st.dataframe(
        [{"status": status_badge(s), "runs": n} for s, n in summary.by_status.items()],
        hide_index=True,
        key="batch_status_counts",
    )
    left, right = st.columns(2)
    left.plotly_chart(
        iterations_histogram(expand_counts(summary.iterations_to_satisfied)),
        key="batch_iterations",
    )
    right.plotly_chart(pass_rate_figure(summary.criterion_pass_rates), key="batch_pass_rates")
    if summary.errors:
        st.caption("Runs that ended in error")
        for item in summary.errors:
            st.text(f"#{item['run_id']}: {one_line(item.get('error'), 300)}")
    if polling:
        st.rerun()


batch_view()
