"""Who reviews and what: the reviewer's name, the rubric version and batch under review."""

from __future__ import annotations

import streamlit as st

from app_widgets.pickers import rubric_version_picker
from rubric_core.store import RunFilters, Store
from rubric_core.ui import ANY, batch_options
from rubric_core.workbench.agreement import labels_elsewhere, opening_version, version_counts

__all__ = ["REVIEWER_KEY", "point_review_at", "review_scope", "reviewer_input"]


REVIEWER_KEY = "reviewer_name"
"""Session key of the reviewer's name: kept for the whole session, whichever page is open."""


def reviewer_input(*, key: str) -> str:
    """The reviewer's name, remembered in the session across pages (widget keys are not)."""

    def _keep() -> None:
        st.session_state[REVIEWER_KEY] = st.session_state[key].strip()

    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(REVIEWER_KEY, "")
    st.text_input(
        "Your name (reviewer)",
        key=key,
        on_change=_keep,
        placeholder="e.g. ana",
        help="Stored with every label you give; remembered while this browser tab is open.",
    )
    return str(st.session_state.get(key) or "").strip()


def review_scope(store: Store, *, key: str, want: str = "review") -> tuple[dict, RunFilters] | None:
    """Pick a rubric version and, optionally, one batch of its runs; `None` if none is stored.

    The page opens on the first rubric with something to review (or compare), and each
    rubric on the newest version with something to review (`want="review"`: a
    graded pass) or to compare (`want="labels"`: a labelled pass), looked up once per
    session (`opening_version`); when the shown version has no label and another has, the
    page says which.
    """
    rubrics = store.rubrics.find()
    if f"{key}_rubric" not in st.session_state:
        # The rubric too, once per session: the first with something to review (or with
        # labels to compare, else a graded pass), not merely the first stored.
        wanted = ("labelled", "passes") if want == "labels" else ("passes",)
        counts = {r["name"]: version_counts(store, r["name"]) for r in rubrics}
        for field in wanted:
            found = next((n for n, c in counts.items() if any(v[field] for v in c)), None)
            if found is not None:
                st.session_state[f"{key}_rubric"] = found
                break
    for rubric in rubrics:
        # Looked up once per session: later reruns (each label saved) keep the choice.
        version_key = f"{key}_version_{rubric['name']}"
        if version_key in st.session_state:
            continue
        opening = opening_version(store, rubric["name"], want=want)
        if opening is not None:
            st.session_state[version_key] = opening
    version = rubric_version_picker(store, key=key)
    if version is None:
        return None
    note = labels_elsewhere(store, version["name"], int(version["id"]))
    if note:
        st.info(note, icon=":material/rate_review:")
    runs = store.runs.find(version_id=int(version["id"]), limit=500)
    batches = batch_options(runs)
    chosen = st.selectbox(
        "Runs",
        [ANY, *batches],
        format_func=lambda b: "every run of this version" if b == ANY else f"batch {b}",
        key=f"{key}_batch_{version['id']}",
    )
    filters = RunFilters(version_id=int(version["id"]), batch_id=None if chosen == ANY else chosen)
    return version, filters


def point_review_at(version: dict, batch_id: str | None) -> None:
    """Preselect a rubric version (and batch) for the Review and Agreement pages."""
    for key in ("review", "agree"):
        st.session_state[f"{key}_rubric"] = version["name"]
        st.session_state[f"{key}_version_{version['name']}"] = version["id"]
        st.session_state[f"{key}_batch_{version['id']}"] = batch_id or ANY
