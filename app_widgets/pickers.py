"""Choosing what a page shows or runs on: a rubric version, the runs matching filters."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_widgets.session import PERSIST
from rubric_core.errors import InputError
from rubric_core.store import RUN_STATUSES, RunFilters, Store
from rubric_core.ui import (
    ANY,
    batch_choice_label,
    experiment_label,
    experiment_picker_key,
    known_batches,
    known_models,
    parse_run_filters,
    status_words,
    version_label,
)

__all__ = ["experiment_picker", "rubric_version_picker", "run_filter_widgets"]


def rubric_version_picker(store: Store, *, key: str, persist: bool = False) -> dict | None:
    """Pick a rubric and one of its versions; `None` (with a hint) when none is stored.

    `persist` keeps the choice while another page is open (Streamlit's `persist_state`).
    """
    rubrics = store.rubrics.find()
    if not rubrics:
        st.info(
            "No rubric is stored yet: write one on the Rubrics page first.",
            icon=":material/edit_note:",
        )
        return None
    names = [r["name"] for r in rubrics]
    if st.session_state.get(f"{key}_rubric") not in names:
        st.session_state[f"{key}_rubric"] = names[0]
    scope = PERSIST if persist else None
    name = st.selectbox("Rubric", names, key=f"{key}_rubric", persist_state=scope)
    versions = list(reversed(store.rubrics.versions(name)))  # newest first
    labels = {v["id"]: version_label(v) for v in versions}
    version_id = st.selectbox(
        "Version", list(labels), format_func=labels.get, key=f"{key}_version_{name}",
        persist_state=scope,
    )  # fmt: skip
    return next(v for v in versions if v["id"] == version_id)


def experiment_picker(
    container: Any,
    label: str,
    experiments: list[dict],
    *,
    key: str,
    index: int = 0,
) -> int:
    """Pick one of `experiments` (their current labels: items, status); returns its id.

    The widget's key follows the labels (`experiment_picker_key`), so an experiment that
    finished shows its real count and status; the chosen id is kept under `{key}_chosen`
    and chosen again in the redrawn picker.
    """
    ids = [int(e["id"]) for e in experiments]
    labels = {int(e["id"]): experiment_label(e) for e in experiments}
    widget_key = experiment_picker_key(key, experiments)
    kept = st.session_state.get(f"{key}_chosen")
    if widget_key not in st.session_state and kept in ids:
        st.session_state[widget_key] = kept
        index = 0  # the kept choice wins; no second default beside it
    chosen = int(
        container.selectbox(label, ids, index=index, format_func=labels.get, key=widget_key)
    )
    st.session_state[f"{key}_chosen"] = chosen
    return chosen


def run_filter_widgets(store: Store, *, key: str) -> RunFilters | None:
    """The filters shared by Runs and Export; `None` after showing what is wrong with them.

    Two rows, so that each field (the date placeholders too) keeps its width at 1024 px.
    """
    rubrics = store.rubrics.find()
    names = [ANY, *(r["name"] for r in rubrics)]
    c1, c2, c3, c4 = st.columns(4)
    rubric = c1.selectbox("Rubric", names, key=f"{key}_rubric")
    version_ids: list = [ANY]
    labels: dict = {ANY: ANY}
    if rubric != ANY:
        for version in reversed(store.rubrics.versions(rubric)):
            version_ids.append(version["id"])
            labels[version["id"]] = f"v{version['version']}"
    version_id = c2.selectbox(
        "Version", version_ids, format_func=labels.get, key=f"{key}_version_{rubric}"
    )
    model = c3.selectbox(
        "Model", [ANY, *known_models(store)], key=f"{key}_model",
        help="Runs whose agent or grader used this model.",
    )  # fmt: skip
    status = c4.selectbox(
        "Status", [ANY, *RUN_STATUSES], format_func=lambda s: s if s == ANY else status_words(s),
        key=f"{key}_status",
    )  # fmt: skip
    b1, b2, b3 = st.columns([2, 1, 1])
    batches = {b["batch_id"]: batch_choice_label(b) for b in known_batches(store)}
    if st.session_state.get(f"{key}_batch") not in (ANY, None, *batches):
        st.session_state[f"{key}_batch"] = ANY  # a batch of another database
    batch = b1.selectbox(
        "Batch", [ANY, *batches], format_func=lambda b: batches.get(b, b), key=f"{key}_batch"
    )
    since = b2.date_input("From", value=None, key=f"{key}_since", format="YYYY-MM-DD")
    until = b3.date_input("To", value=None, key=f"{key}_until", format="YYYY-MM-DD")
    try:
        return parse_run_filters(
            rubric=rubric,
            version_id=None if version_id == ANY else version_id,
            model=model,
            status=status,
            since=since,
            until=until,
            batch=batch,
        )
    except InputError as exc:
        st.error(str(exc))
        return None
