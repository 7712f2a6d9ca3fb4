"""Rubrics: write a checklist, see its criteria, save versions, diff them, tag them."""

from __future__ import annotations

import streamlit as st

from app_widgets.run_form import fill_run_form
from app_widgets.session import PERSIST, run_registry
from app_widgets.store import STORE_ERRORS, get_store, show_store_error
from rubric_core.errors import InputError
from rubric_core.ui import (
    RUBRIC_TEMPLATES,
    criteria_changes,
    criteria_preview,
    format_timestamp,
    parse_tags,
    scenario_templates,
    version_diff,
    version_label,
)
from rubric_core.ui.forms import DEMO_LATENCY_S, DEMO_SCENARIO, demo_latency_s, scenario_form
from rubric_core.ui.models import list_scenarios, load_scenario
from rubric_core.ui.rubrics import (
    RubricError,
    criteria_from_healthbench,
    tool_warnings,
    validate_rubric,
)
from rubric_core.ui.settings import TOOL_NAMES
from rubric_core.workbench import SpecError, start_run

NEW = "+ New rubric"
# The editor's fields: emptied for a new rubric, so nothing of the previous one is saved on it.
# (Comments, not docstrings: Streamlit's magic would draw a bare string on the page.)
EDITOR_KEYS = ("rubric_name", "rubric_text", "rubric_tags", "rubric_note")

store = get_store()
state = st.session_state
st.title("Rubrics")
st.caption(
    "A rubric is a checklist of what “done” means, one criterion per line. "
    "The grader judges every criterion on every pass. `[3]` before a criterion weighs it, "
    "`[-5]` makes it a penalty, and `{lines == 3}` at its end has code decide it."
)

rubrics = store.rubrics.find()
names = [r["name"] for r in rubrics]
templates = {**RUBRIC_TEMPLATES, **scenario_templates(list_scenarios())}


# ---------------------------------------------------------------- Try it


def try_demo(latency_s: float) -> None:
    """Run the demo scenario with slow replay models and open the Run page to watch it."""
    form = scenario_form(load_scenario(DEMO_SCENARIO), tool_names=TOOL_NAMES, latency_s=latency_s)
    try:
        version = fill_run_form(store, form)
        handle = start_run(store, form.run_spec(int(version["id"])))
    except SpecError as exc:
        st.error(f"The demo did not start: {exc}")
        return
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return
    run_registry().add_run(handle)
    state["run_watch"] = handle.run_id
    state["run_demo_view"] = True  # the Run page draws it above the form, where one lands
    state["run_flash"] = (
        "success",
        f"Demo run #{handle.run_id} started: the {DEMO_SCENARIO!r} scenario, replaying "
        f"scripted responses at {latency_s:g} s per call. Its form is filled in below; "
        "change it and launch your own.",
    )
    st.switch_page("app_pages/run.py")


def try_it_text(latency_s: float) -> str:
    return (
        "**New here? Watch the loop once.** *Try it* runs the bundled haiku demo: the agent "
        "writes a haiku, the grader counts its syllables with a tool and asks for a fix, the "
        "agent revises. Its models **replay scripted responses**: they are not language "
        f"models (no network, no key) and wait {latency_s:g} s per call, so each grading "
        "pass arrives on the timeline and heatmap while you watch, and you can press Stop."
    )


first_visit = not store.runs.count()
if first_visit:
    try:
        demo_latency: float | None = demo_latency_s()
    except InputError as exc:  # the variable is named; the demo waits until it is fixed
        demo_latency = None
        demo_problem = str(exc)
    with st.container(border=True):
        text_col, button_col = st.columns([5, 1], vertical_alignment="center")
        text_col.markdown(try_it_text(DEMO_LATENCY_S if demo_latency is None else demo_latency))
        if demo_latency is None:
            text_col.error(f"Try it is off: {demo_problem}")
        if button_col.button(
            "Try it", type="primary", icon=":material/play_arrow:", key="rubrics_try",
            width="stretch", disabled=demo_latency is None,
        ) and demo_latency is not None:  # fmt: skip
            try_demo(demo_latency)

# Open on a first visit, then stay as the person leaves it (not folded by the first save).
state.setdefault("rubrics_paths_open", not rubrics)
with st.expander(
    "Test a rubric with no API key: offline paths", expanded=state["rubrics_paths_open"]
):
    own, demo = st.columns(2, gap="large")
    with own:
        st.markdown(
            "**Your own rubric: you are the grader.** Save it here, then on the Run page "
            "paste an input and an output and grade them yourself, criterion by criterion "
            "(or upload rows of `input`,`output` on the Batch page). Your verdicts drive the "
            "pass exactly as a model's would and are kept as labels, to measure a model "
            "judge against later (Review, Agreement)."
        )
        st.page_link("app_pages/run.py", label="Grade an output yourself", icon=":material/gavel:")
    with demo:
        st.markdown(
            "**The replay demo: models that replay scripted responses.** Each bundled "
            "scenario plays back its own script for its own rubric (no network). Use it to "
            "see the loop, the review view and experiments work end to end; its grader "
            "does not judge *your* rubric."
        )
        st.page_link("app_pages/run.py", label="Load a replay scenario", icon=":material/replay:")
        if not first_visit and st.button(
            "Try it: watch the haiku demo run", icon=":material/play_arrow:", key="rubrics_try"
        ):
            try_demo()


# ---------------------------------------------------------------- the editor's callbacks


def _stored_text(name: str | None) -> str:
    """The latest stored text of rubric `name` ("" for a new one)."""
    if not name or name == NEW or name not in names:
        return ""
    versions = store.rubrics.versions(name)
    return str(versions[-1]["text"]) if versions else ""


def _load_rubric() -> None:
    """An existing rubric puts its latest version and tags in the editor; a new one empties it."""
    choice = state.get("rubrics_choice")
    state["rubric_pending"] = None
    if not choice or choice == NEW:
        for key in EDITOR_KEYS:
            state[key] = ""
        return
    state["rubric_text"] = _stored_text(choice)
    state["rubric_tags"] = ", ".join(next((r["tags"] for r in rubrics if r["name"] == choice), []))
    state["rubric_note"] = ""


def _offer(what: str, text: str) -> None:
    """Put `text` in the editor, or ask first when that would replace text the person typed."""
    current = str(state.get("rubric_text") or "")
    untouched = {
        "",
        _stored_text(state.get("rubrics_choice")).strip(),
        *map(str.strip, templates.values()),
    }
    if current.strip() in untouched:
        state["rubric_text"] = text
        state["rubric_pending"] = None
    else:
        state["rubric_pending"] = {"what": what, "text": text}


def _load_template() -> None:
    name = state.get("rubric_template")
    if name in templates:
        _offer(f"the template {name!r}", templates[name])


def _replace_text() -> None:
    pending = state.get("rubric_pending")
    if pending:
        state["rubric_text"] = pending["text"]
    state["rubric_pending"] = None


def _keep_text() -> None:
    state["rubric_pending"] = None


def _import_healthbench() -> None:
    """Put an uploaded HealthBench rubric (JSON list of {criterion, points}) in the editor."""
    upload = state.get("rubric_healthbench")
    if upload is None:
        state["rubric_import_error"] = "Choose a JSON file first."
        return
    try:
        text = criteria_from_healthbench(upload.getvalue().decode("utf-8", errors="replace"))
    except RubricError as exc:
        state["rubric_import_error"] = f"{upload.name}: {exc}"
        return
    state["rubric_import_error"] = None
    _offer(f"the HealthBench rubric {upload.name!r}", text)


def _save() -> None:
    """Save the editor as a new version; the note goes with it and is emptied for the next."""
    choice = state.get("rubrics_choice")
    name = str((state.get("rubric_name") if choice in (None, NEW) else choice) or "").strip()
    text = str(state.get("rubric_text") or "")
    tags = parse_tags(str(state.get("rubric_tags") or ""))
    if not name:
        state["rubric_result"] = ("error", "Give the rubric a name before saving (e.g. haiku).")
        return
    try:
        validate_rubric(text)
        latest = next((r for r in rubrics if r["name"] == name), None)
        saved = store.rubrics.save_version(
            name, text, tags=tags, note=state.get("rubric_note") or ""
        )
        if latest is not None and saved["version"] == latest["latest_version"]:
            store.rubrics.set_tags(name, tags)
            result = ("info", f"Unchanged: this text is already {name} v{saved['version']}.")
        else:
            result = (
                "success",
                f"Saved {saved['name']} v{saved['version']} ({len(saved['criteria'])} criteria).",
            )
    except RubricError as exc:
        state["rubric_result"] = ("error", f"Not saved: {exc}")
        return
    except STORE_ERRORS as exc:
        state["rubric_result"] = ("store", exc)
        return
    state["rubric_result"] = result
    state["rubric_note"] = ""  # a note describes one version, not the next one
    state["rubric_name"] = ""
    state["rubrics_choice"] = saved["name"]  # the editor now holds that rubric
    state["rubrics_browse"] = saved["name"]  # and "Versions of" shows it


# ---------------------------------------------------------------- the editor

state.setdefault("rubric_text", "")
if state.get("rubrics_choice") not in (None, NEW, *names):
    state["rubrics_choice"] = NEW  # a rubric of another database
editor, parsed = st.columns([3, 2], gap="large")

with editor:
    choice = st.selectbox(
        "Rubric", [NEW, *names], key="rubrics_choice", on_change=_load_rubric,
        persist_state=PERSIST, help="Pick a rubric to edit its latest version, or start a new one.",
    )  # fmt: skip
    if choice == NEW:
        st.text_input("Name", key="rubric_name", placeholder="e.g. haiku", persist_state=PERSIST)
    template_col, button_col = st.columns([3, 2], vertical_alignment="bottom")
    template_col.selectbox(
        "Start from a template", list(templates), key="rubric_template", persist_state=PERSIST
    )
    button_col.button(
        "Use template", on_click=_load_template, width="stretch", key="rubric_use_template"
    )
    pending = state.get("rubric_pending")
    pending_slot = st.container()
    if pending:
        with pending_slot.container(border=True):
            st.warning(
                f"Replace the text in the editor with {pending['what']}? What you typed "
                "there would be lost.",
                icon=":material/warning:",
            )
            yes, no = st.columns(2)
            yes.button("Replace my text", on_click=_replace_text, key="rubric_replace")
            no.button("Keep my text", on_click=_keep_text, key="rubric_keep")
    with st.expander("Import a HealthBench rubric (JSON)"):
        st.file_uploader(
            'JSON list of {"criterion": ..., "points": ...}',
            type=["json"],
            key="rubric_healthbench",
            help="Points become weights; negative points become penalties.",
        )
        st.button("Import into the editor", on_click=_import_healthbench, key="rubric_import")
        if problem := state.get("rubric_import_error"):
            st.error(problem)
    text = st.text_area(
        "Checklist (one criterion per line)",
        key="rubric_text",
        height=260,
        persist_state=PERSIST,
        placeholder=(
            "- [2] The poem has exactly three lines {lines == 3}\n"
            "- The lines have 5, 7 and 5 syllables\n- [-3] Mentions a brand"
        ),
    )
    st.text_input(
        "Tags (comma-separated)", key="rubric_tags", placeholder="poetry, demo",
        persist_state=PERSIST,
    )  # fmt: skip
    st.text_input(
        "Version note (optional)", key="rubric_note", placeholder="what changed",
        persist_state=PERSIST,
    )  # fmt: skip
    st.button("Save as new version", type="primary", key="rubric_save", on_click=_save)
    result = state.pop("rubric_result", None)
    if result is not None:
        kind, message = result
        if kind == "store":
            show_store_error(message)
        else:
            {"success": st.success, "info": st.info, "error": st.error}[kind](message)

with parsed:
    # criteria_preview checks the size limits before it parses: a pasted 200 KB rubric is
    # one error line here, not a thousand criteria drawn before Save refuses it.
    criteria, problem = criteria_preview(text)
    st.subheader(f"Criteria ({len(criteria)})")
    if problem:
        st.error(problem)
    elif criteria:
        for row in criteria:
            st.text(f"{row['#']}. {row['criterion']}{row['marks']}")
        st.caption("Weight 1 unless marked; ⚙ marks a criterion a code check decides.")
        checked = sum(1 for row in criteria if row["check"] != "judge")
        if checked:
            st.caption(
                f"⚙ {checked} of {len(criteria)} criteria are decided by code checks, "
                "not by the grader."
                + (" No grader model is needed." if checked == len(criteria) else "")
            )
        for warning in tool_warnings(text, ()):
            st.warning(warning, icon=":material/build:")
        st.caption(
            "Tool warnings assume a grader without tools; pick the named tools on the Run page."
        )
    else:
        st.caption("Write one criterion per line; bullets and numbering are removed.")

# ---------------------------------------------------------------- stored rubrics

st.divider()
st.subheader("Stored rubrics")
rubrics = store.rubrics.find()
if not rubrics:
    st.info("No rubric saved yet. Write one above (or use a template) and save it.")
    st.stop()

st.dataframe(
    [
        {
            "rubric": r["name"],
            "tags": ", ".join(r["tags"]),
            "latest": f"v{r['latest_version']}",
            "versions": r["versions"],
            "updated": format_timestamp(r["updated_at"]),
        }
        for r in rubrics
    ],
    hide_index=True,
)

browse_names = [r["name"] for r in rubrics]
if state.get("rubrics_browse") not in browse_names:
    state["rubrics_browse"] = browse_names[0]
browse = st.selectbox("Versions of", browse_names, key="rubrics_browse")
versions = store.rubrics.versions(browse)
labels = {v["id"]: version_label(v) for v in versions}
ids = list(labels)
left, right = st.columns(2)
old_id = left.selectbox(
    "From",
    ids,
    index=max(0, len(ids) - 2),
    format_func=labels.get,
    key=f"rubrics_diff_a_{browse}_{len(ids)}",
)
new_id = right.selectbox(
    "To",
    ids,
    index=len(ids) - 1,
    format_func=labels.get,
    key=f"rubrics_diff_b_{browse}_{len(ids)}",
)
old = next(v for v in versions if v["id"] == old_id)
new = next(v for v in versions if v["id"] == new_id)
diff = version_diff(old, new)
if diff:
    st.code(diff, language="diff")
    changes = criteria_changes(old["criteria"], new["criteria"])
    for criterion in changes["added"]:
        st.text(f"+ added: {criterion}")
    for criterion in changes["removed"]:
        st.text(f"- removed: {criterion}")
else:
    st.caption("The two versions are identical.")
with st.expander(f"Text of {labels[new_id]}"):
    st.code(new["text"], language=None)


def _update_tags(name: str, shown: str) -> None:
    """Store the field's tags, unless the stored ones changed since the field showed them."""
    now = ", ".join(next((r["tags"] for r in store.rubrics.find() if r["name"] == name), []))
    if now != shown:
        state[f"rubrics_tags_{name}"] = state[f"rubrics_tags_base_{name}"] = now
        state["rubrics_tags_result"] = (
            "warning",
            f"The tags of {name} changed meanwhile (now: {now or 'none'}); nothing was "
            "updated. The field shows them again: edit and update once more.",
        )
        return
    tags = parse_tags(str(state.get(f"rubrics_tags_{name}") or ""))
    try:
        store.rubrics.set_tags(name, tags)
    except STORE_ERRORS as exc:
        state["rubrics_tags_result"] = ("store", exc)
        return
    if state.get("rubrics_choice") == name:
        state["rubric_tags"] = ", ".join(tags)  # the editor above must not save the old ones
    state["rubrics_tags_result"] = (
        "success",
        f"Tags of {name}: {', '.join(tags)}." if tags else f"{name} has no tags now.",
    )


# The field follows the stored tags: whenever they change (a save above, another tab), it is
# filled again from the store, so "Update tags" never writes back a value gone stale.
stored_tags = ", ".join(next(r["tags"] for r in rubrics if r["name"] == browse))
if state.get(f"rubrics_tags_base_{browse}") != stored_tags:
    state[f"rubrics_tags_{browse}"] = state[f"rubrics_tags_base_{browse}"] = stored_tags
tag_col, tag_button = st.columns([3, 1], vertical_alignment="bottom")
tag_col.text_input(f"Tags of {browse}", value=stored_tags, key=f"rubrics_tags_{browse}")
tag_button.button(
    "Update tags", key="rubrics_update_tags", on_click=_update_tags, args=(browse, stored_tags)
)
tags_result = state.pop("rubrics_tags_result", None)
if tags_result is not None:
    kind, message = tags_result
    if kind == "store":
        show_store_error(message)
    else:
        {"success": st.success, "warning": st.warning}[kind](message)
