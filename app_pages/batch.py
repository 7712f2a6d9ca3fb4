"""Batch: one rubric version over a dataset of inputs, with progress and a summary."""

from __future__ import annotations

import streamlit as st

from app_widgets.graded_batch import graded_batch_form
from app_widgets.model_pickers import agent_and_grader_pickers
from app_widgets.pickers import rubric_version_picker
from app_widgets.rate_limit import rate_limit_fields
from app_widgets.report import report_download
from app_widgets.run_detail import rubric_criteria
from app_widgets.run_form import fill_run_form, scenario_loader
from app_widgets.session import run_registry
from app_widgets.store import STORE_ERRORS, db_label, get_store, show_store_error
from rubric_core.ui import (
    InputError,
    batch_choice_label,
    batch_input_rows,
    combine_models,
    expand_counts,
    final_pass_verdicts,
    iterations_histogram,
    known_batches,
    matching_scenario,
    one_line,
    pass_rate_figure,
    progress,
    replay_run_problems,
    rubric_label,
    score_bins,
    spec_error_hint,
    status_badge,
    store_error_message,
)
from rubric_core.ui.forms import scenario_form
from rubric_core.ui.models import DEFAULT_REPLAY_SCENARIO, list_scenarios
from rubric_core.ui.settings import (
    DEFAULT_MAX_ITERATIONS,
    KEEP_CHOICES,
    MAX_CONCURRENCY,
    MAX_ITERATIONS_LIMIT,
    TOOL_NAMES,
)
from rubric_core.workbench import (
    DatasetError,
    Job,
    RayUnavailable,
    RunInputs,
    RunSpec,
    SpecError,
    batch_progress,
    configured_ray_address,
    format_rate,
    load_upload,
    offered_executors,
    start_job,
    summary_for_batch,
)

BATCH_POLL_S = 1.0
DEFAULT_CONCURRENCY = 4
DEMO_COPIES = 3  # a loaded scenario's input, this many times, is the dataset until an upload

store = get_store()
if store is None:
    st.stop()
registry = run_registry()
scenarios = list_scenarios()
scenario_by_name = {s["name"]: s for s in scenarios}

st.title("Batch")
st.caption(
    "Run one rubric version over many inputs: a CSV with an `input` column, or JSONL with "
    '`{"input": ...}` per line.'
)

if st.toggle("Grade existing outputs (no agent)", key="batch_graded"):
    graded_batch_form(store, scenarios, key="batch_graded")
    st.stop()


def _use_scenario() -> None:
    """Fill the form from the chosen replay scenario: rubric, tools, models, a demo dataset."""
    scenario = scenario_by_name.get(st.session_state.get("batch_scenario_helper"))
    if scenario is None:
        return
    try:
        fill_run_form(store, scenario_form(scenario, tool_names=TOOL_NAMES), key="batch")
    except STORE_ERRORS as exc:
        st.session_state["batch_flash"] = ("error", store_error_message(exc, db_label()))
        return
    st.session_state["batch_demo"] = scenario["name"]
    st.session_state["batch_flash"] = (
        "success",
        f"Loaded scenario {scenario['name']!r}: its rubric, grader tools and replay models, "
        f"and its input {DEMO_COPIES} times as the dataset (upload a file to use your own).",
    )


with st.expander("Offline demo: load a replay scenario", expanded=not store.rubrics.find()):
    st.caption(
        "Replay models play back a scenario's scripted turns (no network, no API key). Their "
        "verdicts are written for the scenario's own rubric, and some scripts call grader "
        "tools: loading the scenario sets both."
    )
    scenario_loader(scenario_by_name, key="batch", on_use=_use_scenario)

flash = st.session_state.pop("batch_flash", None)
if flash:
    (st.success if flash[0] == "success" else st.error)(flash[1])

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
elif st.session_state.get("batch_demo") in scenario_by_name:
    demo = scenario_by_name[st.session_state["batch_demo"]]
    inputs = [demo["input"]] * DEMO_COPIES
    st.info(
        f"Dataset: the input of scenario {demo['name']!r}, {DEMO_COPIES} times (a replay "
        "plays the same script for each). Upload a file to use your own inputs.",
        icon=":material/replay:",
    )

version = rubric_version_picker(store, key="batch")
if version is None:
    st.stop()

agent_choice, grader_choice, errors = agent_and_grader_pickers(
    key="batch",
    scenarios=scenarios,
    # Replay models start on the scenario whose rubric this is, if one is.
    default_scenario=matching_scenario(scenarios, version["criteria"], DEFAULT_REPLAY_SCENARIO),
    version=version,
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
problems = replay_run_problems(
    agent_model=agent_choice[0] if agent_choice else "",
    grader_model=grader_choice[0] if grader_choice else "",
    scenarios=scenarios,
    criteria=version["criteria"],
    rubric=f"{version['name']} v{version['version']}",
    grader_tools=tools,
)
blocking = [p.message for p in problems if p.blocking]
for problem in problems:
    if not problem.blocking:
        st.warning(problem.message, icon=":material/replay:")
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
rate_limit = rate_limit_fields(key="batch")

for message in blocking:
    st.error(message, icon=":material/block:")
if st.button(
    "Launch batch", type="primary", key="batch_launch", disabled=not inputs or bool(blocking)
):
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
            job = start_job(store, Job(
                RunInputs(spec, tuple(inputs)), executor=executor,
                concurrency=int(concurrency), rate_limit=rate_limit,
            ))  # fmt: skip
        except SpecError as exc:
            st.error(f"Not started: {spec_error_hint(str(exc))}")
        except RayUnavailable as exc:
            st.error(f"Not started: {exc}")
        except STORE_ERRORS as exc:
            show_store_error(exc)
        else:
            registry.add_job(job)
            st.session_state["batch_watch"] = job.batch_id
elif errors:
    for message in errors:
        st.error(message)
if not inputs:
    st.caption("Upload a dataset (or load a scenario above) to enable “Launch batch”.")
elif blocking:
    st.caption("“Launch batch” is off until the replay scenario fits the run (see above).")


def _open_stored_batch() -> None:
    st.session_state["batch_watch"] = st.session_state.get("batch_open")


# Any stored batch can be read input by input, not only the one launched in this session;
# `?batch=<id>` opens one directly (the Runs and Export filters name the same ids).
try:
    stored_batches = {b["batch_id"]: batch_choice_label(b) for b in known_batches(store)}
except STORE_ERRORS as exc:
    show_store_error(exc)
    st.stop()
linked = st.query_params.get("batch")
if linked and linked in stored_batches and "batch_watch" not in st.session_state:
    st.session_state["batch_watch"] = linked
elif linked and linked not in stored_batches:
    st.error(f"Batch {linked!r} in the address does not exist in this database.")
if stored_batches:
    options = list(stored_batches)
    watched = st.session_state.get("batch_watch")
    # The picker shows the batch being watched (a launch, a link or an earlier pick).
    st.session_state["batch_open"] = watched if watched in options else None
    st.selectbox(
        "Open a stored batch",
        options,
        format_func=stored_batches.get,
        placeholder="Choose a batch to read input by input",
        key="batch_open",
        on_change=_open_stored_batch,
    )

batch_id = st.session_state.get("batch_watch")
if batch_id is None:
    st.stop()
st.query_params["batch"] = batch_id
job = registry.job(batch_id)
st.divider()
st.subheader(f"Batch {batch_id}")
polling = job is not None and not job.done()


def inputs_table(runs: list[dict]) -> None:
    """One row per input: status, passes, score, final verdicts; clicking a row opens its run."""
    if not runs:
        st.caption("No run of this batch is stored yet.")
        return
    criteria = rubric_criteria(store, runs[0])
    rows = batch_input_rows(runs, final_pass_verdicts(store, batch_id), criteria)
    st.caption(
        f"Inputs of {rubric_label(runs[0])}, one row each: ✓ pass, ✗ fail, ? insufficient, "
        "– not judged in the run's final pass. Click a row to open its run on the Runs page."
    )
    event = st.dataframe(
        rows,
        hide_index=True,
        key=f"batch_inputs_{batch_id}",
        on_select="rerun",
        selection_mode="single-row",
        column_config={
            "status": st.column_config.TextColumn("status", width="medium"),
            # Verdict columns stay narrow; the whole criterion is their header's help.
            **{
                name: st.column_config.TextColumn(name, help=criterion, width="small")
                for name, criterion in zip(
                    [n for n in rows[0] if n[:1].isdigit()], criteria, strict=False
                )
            },
        },
    )
    if event.selection.rows:
        picked = rows[event.selection.rows[0]]["run"]
        st.switch_page("app_pages/runs.py", query_params={"run": str(picked)})


@st.fragment(run_every=BATCH_POLL_S if polling else None)
def batch_view() -> None:
    """Progress and each input's row from the store; the summary once every run has finished."""
    try:
        total = job.total if job is not None else store.runs.count(batch_id=batch_id)
        finished, started = batch_progress(store, batch_id)
        value, text = progress(finished, total)
        st.progress(value, text=f"{text} ({started - finished} running)")
        runs = store.runs.of_batch(batch_id)
        if job is not None and not job.done():
            if st.button("Stop batch", key="batch_stop"):
                job.stop()
                st.toast("Stopping: running runs end as interrupted; no new run starts.")
            inputs_table(runs)
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
        "Passes (mean)",  # a short label: the long one was cut off at 1024 px
        "n/a"
        if summary.mean_iterations_to_satisfied is None
        else f"{summary.mean_iterations_to_satisfied:.2f}",
        help=summary.iterations_basis(),
    )
    m4.metric("Grader errors", summary.grader_errors)
    report_download(store, key=f"batch_report_{batch_id}", batch_id=batch_id)
    if summary.mean_score is not None:
        s1, s2 = st.columns([1, 3])
        s1.metric("Mean score", f"{summary.mean_score:.2f}", help=summary.mean_basis())
        s1.caption(summary.mean_basis())
        s2.caption("Score distribution (runs per score band)")
        s2.bar_chart(score_bins(summary.scores), x="score", y="runs", height=180)
    inputs_table(runs)
    # Pass rates get the full width: criteria labels need the room at 1024 px.
    st.plotly_chart(
        pass_rate_figure(
            summary.criterion_pass_rates,
            title=f"{summary.pass_rate_rule} (worst first)",
        ),
        key="batch_pass_rates",
    )
    counts_col, iterations_col = st.columns([3, 4])
    counts_col.dataframe(
        [{"status": status_badge(s), "runs": n} for s, n in summary.by_status.items()],
        hide_index=True,
        key="batch_status_counts",
    )
    iterations_col.plotly_chart(
        iterations_histogram(expand_counts(summary.iterations_to_satisfied)),
        key="batch_iterations",
    )
    if summary.errors:
        st.caption("Runs that ended in error")
        for item in summary.errors:
            st.text(f"#{item['run_id']}: {one_line(item.get('error'), 300)}")
    if polling:
        st.rerun()


batch_view()
