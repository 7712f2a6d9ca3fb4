"""Rubrics: write a checklist, see its criteria, save versions, diff them, tag them."""

from __future__ import annotations

import streamlit as st

from rubric_core.models import list_scenarios
from rubric_core.rubric import (
    RubricError,
    criteria_from_healthbench,
    tool_warnings,
    validate_rubric,
)
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
from studio_ui import STORE_ERRORS, get_store, show_store_error

NEW = "➕ New rubric"

store = get_store()
st.title("Rubrics")
st.caption(
    "A rubric is a checklist of what “done” means, one criterion per line. "
    "The grader judges every criterion on every pass. `[3]` before a criterion weighs it, "
    "`[-5]` makes it a penalty, and `{lines == 3}` at its end has code decide it."
)

rubrics = store.list_rubrics()
names = [r["name"] for r in rubrics]

with st.expander("Test a rubric with no API key: two offline paths", expanded=not rubrics):
    own, demo = st.columns(2, gap="large")
    with own:
        st.markdown(
            "**Your own rubric: you are the grader.** Save it here, then on the Run page "
            "paste an input and an output and grade them yourself, criterion by criterion "
            "(or upload rows of `input`,`output` on the Batch page). Your verdicts drive the "
            "pass exactly as a model's would and are kept as labels, to measure a model "
            "judge against later (Review, Agreement)."
        )
        st.page_link("app_pages/run.py", label="Grade an output yourself", icon="🧑‍⚖️")
    with demo:
        st.markdown(
            "**The replay demo: models that replay scripted responses.** Each bundled "
            "scenario plays back its own script for its own rubric (no network). Use it to "
            "see the loop, the review view and experiments work end to end; its grader "
            "does not judge *your* rubric."
        )
        st.page_link("app_pages/run.py", label="Load a replay scenario", icon="🔁")
templates = {**RUBRIC_TEMPLATES, **scenario_templates(list_scenarios())}


def _load_rubric() -> None:
    """Selecting an existing rubric puts its latest version in the editor."""
    choice = st.session_state.get("rubrics_choice")
    if choice and choice != NEW:
        versions = store.rubric_versions(choice)
        if versions:
            st.session_state["rubric_text"] = versions[-1]["text"]
            st.session_state["rubric_tags"] = ", ".join(
                next((r["tags"] for r in rubrics if r["name"] == choice), [])
            )


def _load_template() -> None:
    name = st.session_state.get("rubric_template")
    if name in templates:
        st.session_state["rubric_text"] = templates[name]


def _import_healthbench() -> None:
    """Put an uploaded HealthBench rubric (JSON list of {criterion, points}) in the editor."""
    upload = st.session_state.get("rubric_healthbench")
    if upload is None:
        st.session_state["rubric_import_error"] = "Choose a JSON file first."
        return
    try:
        st.session_state["rubric_text"] = criteria_from_healthbench(
            upload.getvalue().decode("utf-8", errors="replace")
        )
        st.session_state["rubric_import_error"] = None
    except RubricError as exc:
        st.session_state["rubric_import_error"] = f"{upload.name}: {exc}"


st.session_state.setdefault("rubric_text", "")
editor, parsed = st.columns([3, 2], gap="large")

with editor:
    choice = st.selectbox(
        "Rubric", [NEW, *names], key="rubrics_choice", on_change=_load_rubric,
        help="Pick a rubric to edit its latest version, or start a new one.",
    )  # fmt: skip
    if choice == NEW:
        name = st.text_input("Name", key="rubric_name", placeholder="e.g. haiku")
    else:
        name = choice
    template_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    template_col.selectbox("Start from a template", list(templates), key="rubric_template")
    button_col.button("Use template", on_click=_load_template, width="stretch")
    with st.expander("Import a HealthBench rubric (JSON)"):
        st.file_uploader(
            'JSON list of {"criterion": ..., "points": ...}',
            type=["json"],
            key="rubric_healthbench",
            help="Points become weights; negative points become penalties.",
        )
        st.button("Import into the editor", on_click=_import_healthbench, key="rubric_import")
        if problem := st.session_state.get("rubric_import_error"):
            st.error(problem)
    text = st.text_area(
        "Checklist (one criterion per line)",
        key="rubric_text",
        height=260,
        placeholder=(
            "- [2] The poem has exactly three lines {lines == 3}\n"
            "- The lines have 5, 7 and 5 syllables\n- [-3] Mentions a brand"
        ),
    )
    tags_text = st.text_input(
        "Tags (comma-separated)", key="rubric_tags", placeholder="poetry, demo"
    )
    note = st.text_input("Version note (optional)", key="rubric_note", placeholder="what changed")
    save = st.button("Save as new version", type="primary", key="rubric_save")

with parsed:
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
    else:
        st.caption("Write one criterion per line; bullets and numbering are removed.")
    for warning in tool_warnings(text, ()):
        st.warning(warning, icon="🧰")
    if criteria:
        st.caption(
            "Tool warnings assume a grader without tools; pick the named tools on the Run page."
        )

if save:
    try:
        if not name or not name.strip():
            st.error("Give the rubric a name before saving (e.g. haiku).")
        else:
            validate_rubric(text)
            latest = next((r for r in rubrics if r["name"] == name.strip()), None)
            saved = store.save_rubric_version(
                name.strip(), text, tags=parse_tags(tags_text), note=note
            )
            if latest is not None and saved["version"] == latest["latest_version"]:
                st.info(f"Unchanged: this text is already {name.strip()} v{saved['version']}.")
                store.set_rubric_tags(name.strip(), parse_tags(tags_text))
            else:
                st.success(
                    f"Saved {saved['name']} v{saved['version']} ({len(saved['criteria'])} criteria)."
                )
            st.session_state["rubrics_saved"] = saved["name"]
    except RubricError as exc:
        st.error(f"Not saved: {exc}")
    except STORE_ERRORS as exc:
        show_store_error(exc)

st.divider()
st.subheader("Stored rubrics")
rubrics = store.list_rubrics()
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
default_name = st.session_state.get("rubrics_saved")
browse = st.selectbox(
    "Versions of",
    browse_names,
    index=browse_names.index(default_name) if default_name in browse_names else 0,
    key="rubrics_browse",
)
versions = store.rubric_versions(browse)
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

tag_col, tag_button = st.columns([3, 1], vertical_alignment="bottom")
current_tags = next(r["tags"] for r in rubrics if r["name"] == browse)
new_tags = tag_col.text_input(
    f"Tags of {browse}", value=", ".join(current_tags), key=f"rubrics_tags_{browse}"
)
if tag_button.button("Update tags", key="rubrics_update_tags"):
    store.set_rubric_tags(browse, parse_tags(new_tags))
    st.rerun()
