"""Run: configure one run, launch it, and watch each grading pass arrive."""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_plain, show_status
from app_widgets.model_pickers import agent_and_grader_pickers, grader_picker
from app_widgets.person_grader import human_verdict_widgets
from app_widgets.pickers import rubric_version_picker
from app_widgets.review import point_review_at, reviewer_input
from app_widgets.run_detail import render_passes, render_run_overview
from app_widgets.run_form import fill_run_form, scenario_loader
from app_widgets.session import PERSIST, run_registry
from app_widgets.store import STORE_ERRORS, get_store, show_store_error
from rubric_core.store import Store, StoreError
from rubric_core.ui import (
    InputError,
    combine_models,
    matching_scenario,
    rubric_label,
    run_label,
    spec_error_hint,
)
from rubric_core.ui.forms import (
    max_iterations_problem,
    replay_mismatch_problem,
    scenario_for_rubric,
    scenario_form,
)
from rubric_core.ui.models import DEFAULT_REPLAY_SCENARIO, list_scenarios
from rubric_core.ui.scenario_check import replay_scenario_name
from rubric_core.ui.settings import AGENT_KINDS, DEFAULT_MAX_ITERATIONS, KEEP_CHOICES, TOOL_NAMES
from rubric_core.workbench import (
    Grader,
    RunSpec,
    SpecError,
    grade_by_person,
    grade_one,
    start_run,
)

LIVE_POLL_S = 1.0
REPLAY_ROLES = ("agent_model", "grader_model")

# The grade-only mode: one output you already have, graded by a model or by you.


def grade_output_form(store: Store, scenarios: list[dict], *, key: str) -> None:
    """The Run page's grade-only mode: paste an input and an output; a model or you grade it."""
    st.caption(
        "Grade one output you already have, with no agent. Pick a grader model, or be the "
        "grader yourself: the rubric's code checks decide their criteria, you judge the "
        "others, and the pass follows from all of them (every criterion passed → "
        "satisfied). Your verdicts are kept as labels."
    )
    version = rubric_version_picker(store, key=key)
    if version is None:
        return
    left, right = st.columns(2, gap="large")
    text = left.text_area("Input (the request)", key=f"{key}_input", height=160)
    output = right.text_area("Output (the answer to grade)", key=f"{key}_output", height=160)
    who = st.radio(
        "Grader",
        ["person", "model"],
        format_func={"person": "You are the grader", "model": "A grader model"}.get,
        horizontal=True,
        key=f"{key}_who",
    )
    result: int | None = None
    if who == "model":
        grader_spec, base_url = grader_picker(scenarios, version, key=key)
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key=f"{key}_tools")
        if st.button("Grade", type="primary", key=f"{key}_grade", disabled=not grader_spec):
            try:
                with st.spinner("Grading…"):
                    graded = grade_one(
                        store,
                        int(version["id"]),
                        text,
                        output,
                        Grader(grader_spec, tuple(tools), base_url=base_url),
                    )
            except InputError as exc:
                st.error(f"Not graded: {exc}")
            except STORE_ERRORS as exc:
                show_store_error(exc)
            else:
                result = int(graded["run_id"])
    else:
        reviewer = reviewer_input(key=f"{key}_reviewer")
        st.caption("The checklist: your verdict on each criterion, and a gap where it falls short.")
        verdicts, gaps, missing = human_verdict_widgets(version["text"], output, key=key)
        explanation = st.text_input("Summary (optional)", key=f"{key}_explanation")
        if st.button(
            "Record my verdict", type="primary", key=f"{key}_record", disabled=not reviewer
        ):
            if missing:
                st.error("Give a verdict on every criterion: " + ", ".join(missing))
            else:
                try:
                    result = int(
                        grade_by_person(
                            store,
                            int(version["id"]),
                            text,
                            output,
                            verdicts,
                            gaps,
                            reviewer=reviewer,
                            explanation=explanation,
                        )
                    )
                except InputError as exc:
                    st.error(f"Not recorded: {exc}")
                except STORE_ERRORS as exc:
                    show_store_error(exc)
        if not reviewer:
            st.caption("Type your name to record a verdict: it is kept with the labels.")
    if result is not None:
        st.session_state[f"{key}_last"] = result
    last = st.session_state.get(f"{key}_last")
    if last is None:
        return
    st.divider()
    run = store.runs.get(int(last))
    st.subheader(f"Graded run #{last} · {rubric_label(run)}")
    show_status(run["status"], error=run.get("error"), agent_kind=run.get("agent_kind"))
    render_passes(store.passes.of_run(int(last)), running=run["status"] == "running")
    point_review_at(version, None)
    st.page_link(
        "app_pages/runs.py", label=f"Open run #{last}", icon=":material/history:",
        query_params={"run": str(last)},
    )  # fmt: skip


store = get_store()
registry = run_registry()
scenarios = list_scenarios()
scenario_by_name = {s["name"]: s for s in scenarios}

st.title("Run")
if st.toggle(
    "Grade an output you already have (no agent)", key="run_graded", persist_state=PERSIST
):
    grade_output_form(store, scenarios, key="grade_one")
    st.stop()

# After "Try it" the demo run is drawn here, above the form, where the person lands; the form
# below holds the demo's settings. A run of their own is drawn below the Launch button.
live_slot = st.container() if st.session_state.get("run_demo_view") else None
if live_slot is not None:
    live_slot.caption(
        "The demo's settings are filled in the form below the run: change them and press "
        "Launch run to start your own."
    )


def _use_scenario() -> None:
    """Save the chosen replay scenario's rubric and fill the form with its input and tools."""
    name = st.session_state.get("run_scenario_helper")
    scenario = scenario_by_name.get(name)
    if scenario is None:
        return
    try:
        fill_run_form(store, scenario_form(scenario, tool_names=TOOL_NAMES))
    except STORE_ERRORS as exc:
        st.session_state["run_flash"] = ("error", str(exc))
        return
    st.session_state["run_flash"] = (
        "success",
        f"Loaded scenario {name!r}: rubric, input and tools.",
    )


def _use_scenario_models(name: str) -> None:
    """Point both models at the replay scenario whose rubric is the chosen one."""
    for role in ("agent", "grader"):
        st.session_state[f"run_{role}_source"] = "replay"
        st.session_state[f"run_{role}_scenario"] = name


# Open on a first visit with no rubric, then stay as the person leaves it: an `expanded`
# that followed the store would fold the loader away right after its first use.
st.session_state.setdefault("run_demo_open", not store.rubrics.find())
with st.expander(
    "Offline demo: load a replay scenario", expanded=st.session_state["run_demo_open"]
):
    st.caption(
        "Replay models play back a scenario's scripted turns (no network, no API key). Their "
        "verdicts are written for the scenario's own rubric, so load it together with its input."
    )
    scenario_loader(scenario_by_name, key="run", on_use=_use_scenario)

# Messages that come and go sit in containers drawn on every run, so the widgets below keep
# their place in the page: a shifted widget shows twice while the page redraws.
flash_slot = live_slot if live_slot is not None else st.container()
flash = st.session_state.pop("run_flash", None)
if flash:
    (flash_slot.success if flash[0] == "success" else flash_slot.error)(flash[1])

version = rubric_version_picker(store, key="run", persist=True)
if version is None:
    st.stop()
with st.expander(f"{len(version['criteria'])} criteria of {version['name']} v{version['version']}"):
    for number, criterion in enumerate(version["criteria"], start=1):
        st.text(f"{number}. {criterion}")

text = st.text_area(
    "Input (the request to the agent)", key="run_input", height=120, persist_state=PERSIST
)

agent_choice, grader_choice, errors = agent_and_grader_pickers(
    key="run",
    scenarios=scenarios,
    default_scenario=matching_scenario(scenarios, version["criteria"], DEFAULT_REPLAY_SCENARIO),
    version=version,
)
models = {role: choice[0] for role, choice in (("agent", agent_choice), ("grader", grader_choice))
          if choice}  # fmt: skip
mismatch = replay_mismatch_problem(models, scenarios, version)
mismatch_slot = st.container()
if mismatch:
    mismatch_slot.error(mismatch, icon=":material/replay:")
    own = scenario_for_rubric(scenarios, version["criteria"])
    if own:
        mismatch_slot.button(
            f"Use the replay scenario {own!r} for both models",
            on_click=_use_scenario_models, args=(own,), key="run_use_own_scenario",
        )  # fmt: skip

c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
tools = c1.multiselect("Grader tools", list(TOOL_NAMES), key="run_tools", persist_state=PERSIST)
# The default goes in `value=`, not in session state: without it the widget's own default is
# what the browser falls back to whenever it mounts the input with no value of its own. No
# bounds: a bounded input shows an out-of-range number in red while it keeps sending the
# last valid one, so Launch would use a number the person no longer sees. The page checks.
max_iterations = c2.number_input(
    "Max iterations", step=1, value=DEFAULT_MAX_ITERATIONS, key="run_max_iterations",
    persist_state=PERSIST,
)  # fmt: skip
agent_kind = c3.radio(
    "Agent kind", list(AGENT_KINDS), key="run_agent_kind", horizontal=True, persist_state=PERSIST
)
keep = c4.radio(
    "Keep", list(KEEP_CHOICES), key="run_keep", horizontal=True, persist_state=PERSIST,
    help="When the run ends unmet: hand back the last draft, or the best-scoring pass's.",
)  # fmt: skip
with st.expander("System prompts (optional)"):
    grader_prompt = st.text_area(
        "Grader system prompt", key="run_grader_prompt", persist_state=PERSIST,
        placeholder="(the middleware's default)",
    )  # fmt: skip
    agent_prompt = st.text_area(
        "Agent system prompt", key="run_agent_prompt", persist_state=PERSIST,
        placeholder="(the framework's default)",
    )  # fmt: skip

if agent_choice and grader_choice:
    try:
        agent_spec, grader_spec, base_url = combine_models(agent_choice, grader_choice)
    except InputError as exc:
        errors.append(str(exc))
if problem := max_iterations_problem(max_iterations):
    errors.append(problem)
if mismatch:
    errors.append("Launch is blocked: the replay models do not belong to this rubric (above).")
blocked_slot = st.container()
for message in errors:
    blocked_slot.error(message)

# Launch stays clickable: a click that lands while a field is being fixed would be lost on a
# disabled button. With something in the way it launches nothing and says so.
launch = st.button("Launch run", type="primary", key="run_launch")
if launch and errors:
    blocked_slot.error("Not launched: fix what is shown above first.", icon=":material/block:")
elif launch:
    spec = RunSpec(
        rubric_version_id=int(version["id"]),
        input=text,
        agent_model=agent_spec,
        grader_model=grader_spec,
        grader_tools=tuple(tools),
        max_iterations=int(max_iterations),
        agent_kind=agent_kind,
        agent_system_prompt=agent_prompt.strip() or None,
        grader_system_prompt=grader_prompt.strip() or None,
        base_url=base_url,
        keep=keep,
    )
    try:
        handle = start_run(store, spec)
    except SpecError as exc:
        st.error(f"Not started: {spec_error_hint(str(exc))}")
    except STORE_ERRORS as exc:
        show_store_error(exc)
    else:
        registry.add_run(handle)
        st.session_state["run_watch"] = handle.run_id
        st.session_state["run_demo_view"] = False

# ------------------------------------------------------------------ the live view


def watched_run() -> tuple[int, bool] | None:
    """The run to watch (picked among several when more run) and whether it is running."""
    active = registry.active_runs()
    watch = st.session_state.get("run_watch")
    if watch is None and active:
        watch = active[0]
    if watch is None:
        return None
    st.divider()
    if len(active) > 1 or (active and watch not in active):
        recent = [watch, *(run_id for run_id in active if run_id != watch)]
        watch = st.selectbox(
            "Watching",
            recent,
            format_func=lambda run_id: run_label(store.runs.get(run_id)),
            key="run_watch_pick",
        )
        st.session_state["run_watch"] = watch
    try:
        return watch, store.runs.get(watch)["status"] == "running"
    except StoreError as exc:
        if exc.kind != "invalid":  # an unknown run id; any other fault is shown by the frame
            raise
        st.session_state.pop("run_watch", None)  # a run of another database (reopened or replaced)
        return None


watch_slot = live_slot if live_slot is not None else st.container()
with watch_slot:
    watched = watched_run()
if watched is None:
    st.stop()
watch, running_now = watched


@st.fragment(run_every=LIVE_POLL_S if running_now else None)
def live_view(run_id: int) -> None:
    """Redraw the run from the store; once it ends, rerun the page to stop polling."""
    try:
        run = store.runs.get(run_id)
        evaluations = store.passes.of_run(run_id)
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return
    st.subheader(f"Run #{run_id} · {rubric_label(run)}")
    if any(replay_scenario_name(str(run.get(role) or "")) for role in REPLAY_ROLES):
        st.caption(
            ":material/replay: Replay models: every reply is a scripted response played back "
            "from the scenario's file, not a language model's (no network, no key)."
        )
    handle = registry.run(run_id)
    if run["status"] == "running":
        st.caption(
            f"Live: pass {len(evaluations)} of at most {run['max_iterations']} stored; "
            f"redrawn from the store every {LIVE_POLL_S:g} s. Switching page does not stop it."
        )
        if handle is not None and st.button("Stop", key=f"run_stop_{run_id}"):
            handle.stop()
            st.toast(f"Stopping run #{run_id} before the agent's next model call.")
    render_run_overview(store, run, evaluations, key=f"live_{run_id}")
    render_passes(evaluations, running=run["status"] == "running")
    if run["status"] != "running":
        st.caption("Final output")
        show_plain(run.get("final_output"), empty="(no final output)")
        st.caption("Open it on the Runs page for the transcript, or compare its passes.")
    if running_now and run["status"] != "running":
        st.rerun()


with watch_slot:
    live_view(watch)
    if live_slot is not None:
        st.divider()  # the demo above, the form below
