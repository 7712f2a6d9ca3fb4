"""Streamlit glue shared by app.py and app_pages/: the store handle, the run registry, error display."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import streamlit as st

from rubric_core.runs.background import RunRegistry
from rubric_core.schema import BASE_URL_ENV, MODEL_ENV, RUN_STATUSES
from rubric_core.store import RunFilters, Store, StoreError, default_db_path
from rubric_core.ui import (
    ANY,
    MODEL_SOURCES,
    InputError,
    find_regressions,
    heatmap_figure,
    known_models,
    md_escape,
    model_choice,
    one_line,
    parse_run_filters,
    pass_details,
    pass_label,
    progress_figure,
    rubric_label,
    run_seconds,
    run_spec_rows,
    status_badge,
    status_level,
    status_meaning,
    store_error_message,
    timeline_figure,
    transcript_items,
    version_label,
)

STORE_ERRORS: tuple[type[BaseException], ...] = (StoreError, sqlite3.Error)
"""What a page catches around store calls; shown with `show_store_error`, never as a traceback."""


@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> Store:
    # Keyed by path: one Store (one writer thread) per database file per process.
    return Store(path)


@st.cache_resource(show_spinner=False)
def run_registry() -> RunRegistry:
    """The process-wide registry of runs and batches started from the dashboard."""
    return RunRegistry()


def db_path() -> Path:
    """The database file this session uses ($RUBRIC_STUDIO_DB or ./rubric_studio.db)."""
    return Path(default_db_path()).expanduser().resolve()


def get_store() -> Store | None:
    """The shared store, or `None` after showing why it cannot be opened and what to do."""
    path = db_path()
    try:
        return _open_store(str(path))
    except STORE_ERRORS as exc:
        show_store_error(exc)
        return None


@st.cache_data(max_entries=64, show_spinner="Counting verdicts over the matching passes…")
def cached_pass_rates(path: str, filters: RunFilters, version: tuple[int, int]) -> list[dict]:
    """`Store.criterion_pass_rates` under the store's data version (see `data_version`).

    Over 100,000 passes the count takes most of a second; it is computed once per
    new pass or run and filter choice, then served from the cache.
    """
    del version  # part of the cache key only
    return _open_store(path).criterion_pass_rates(filters=filters)


def reopen_store() -> None:
    """Drop the cached store (e.g. after its file was deleted) so the next call opens it afresh."""
    path = str(db_path())
    with contextlib.suppress(Exception):
        _open_store(path).close()
    _open_store.clear()


def show_store_error(exc: BaseException) -> None:
    """Show a store fault in place, with what to do, and a button that reopens the database."""
    st.error(store_error_message(exc, db_path()), icon=":material/database:")
    if st.button(
        "Reopen the database",
        key="reopen_store",
        help="Opens the file anew (a new empty database if it is gone).",
    ):
        reopen_store()
        st.rerun()


@contextlib.contextmanager
def store_guard() -> Iterator[None]:
    """Run a block of page code; a store fault is shown in place instead of a traceback."""
    try:
        yield
    except STORE_ERRORS as exc:
        show_store_error(exc)


def show_status(status: str | None, *, error: str | None = None) -> None:
    """A run's status as an alert: its badge, what it means and, if any, the error text."""
    alert = {"success": st.success, "info": st.info, "warning": st.warning, "error": st.error}[
        status_level(status)
    ]
    alert(f"**{status_badge(status)}** — {status_meaning(status)}")
    if error:
        st.text(f"Error: {error}")


def show_plain(text: str | None, *, empty: str = "(empty)", height: int | None = None) -> None:
    """Model output as monospaced text: never Markdown, never HTML."""
    body = text if text else empty
    if height is None:
        st.code(body, language=None, wrap_lines=True)
    else:
        st.code(body, language=None, wrap_lines=True, height=height)


# ---------------------------------------------------------------- shared widgets


def rubric_version_picker(store: Store, *, key: str) -> dict | None:
    """Pick a rubric and one of its versions; `None` (with a hint) when none is stored."""
    rubrics = store.list_rubrics()
    if not rubrics:
        st.info("No rubric is stored yet: write one on the Rubrics page first.", icon="📝")
        return None
    names = [r["name"] for r in rubrics]
    if st.session_state.get(f"{key}_rubric") not in names:
        st.session_state[f"{key}_rubric"] = names[0]
    name = st.selectbox("Rubric", names, key=f"{key}_rubric")
    versions = list(reversed(store.rubric_versions(name)))  # newest first
    labels = {v["id"]: version_label(v) for v in versions}
    version_id = st.selectbox(
        "Version", list(labels), format_func=labels.get, key=f"{key}_version_{name}"
    )
    return next(v for v in versions if v["id"] == version_id)


def model_picker(
    role: str, *, key: str, scenarios: list[dict], default_scenario: str
) -> tuple[str, str | None]:
    """The Run/Batch pages' model chooser for one role; returns `(spec, base_url)`.

    Raises:
        InputError: A field is missing or malformed (shown by the caller in place).
    """
    sources = list(MODEL_SOURCES)
    source = st.radio(
        f"{role.capitalize()} model",
        sources,
        format_func=MODEL_SOURCES.get,
        key=f"{key}_{role}_source",
        horizontal=True,
    )
    if source == "replay":
        names = [s["name"] for s in scenarios]
        if st.session_state.get(f"{key}_{role}_scenario") not in names and names:
            st.session_state[f"{key}_{role}_scenario"] = (
                default_scenario if default_scenario in names else names[0]
            )
        scenario = st.selectbox(
            "Replay scenario",
            names,
            format_func=lambda n: next(
                (f"{n} — {s['title']}" for s in scenarios if s["name"] == n), n
            ),
            key=f"{key}_{role}_scenario",
        )
        return model_choice("replay", scenario=scenario or "")
    if source == "provider":
        text = st.text_input(
            "Model (provider:model-id)",
            key=f"{key}_{role}_provider",
            placeholder="openai:gpt-4.1-mini",
        )
        return model_choice("provider", provider_string=text)
    # The presets go in `value=`: a default kept only in session state is not the widget's
    # own, and the browser falls back to the widget's own ("") when it remounts the field.
    url = st.text_input(
        "Base URL",
        value=os.environ.get(BASE_URL_ENV, ""),
        key=f"{key}_{role}_base_url",
        placeholder="http://127.0.0.1:8080/v1",
    )
    name = st.text_input(
        "Model name on that server",
        value=os.environ.get(MODEL_ENV, ""),
        key=f"{key}_{role}_base_url_model",
        placeholder="smollm2-135m",
    )
    return model_choice("base_url", base_url=url, base_url_model=name)


def agent_and_grader_pickers(
    *, key: str, scenarios: list[dict], default_scenario: str
) -> tuple[tuple[str, str | None] | None, tuple[str, str | None] | None, list[str]]:
    """Agent and grader model choosers side by side, as the Run and Batch pages show them.

    Returns `(agent_choice, grader_choice, errors)`; a choice is `None` when its fields are
    malformed, and `errors` says why, for the page to show in place.
    """
    choices: list[tuple[str, str | None] | None] = []
    errors: list[str] = []
    for role, column in zip(("agent", "grader"), st.columns(2, gap="large"), strict=True):
        with column:
            try:
                choices.append(
                    model_picker(
                        role, key=key, scenarios=scenarios, default_scenario=default_scenario
                    )
                )
            except InputError as exc:
                choices.append(None)
                errors.append(f"{role.capitalize()} model: {exc}")
    return choices[0], choices[1], errors


def run_filter_widgets(store: Store, *, key: str) -> RunFilters | None:
    """The filters shared by Runs and Export; `None` after showing what is wrong with them."""
    rubrics = store.list_rubrics()
    names = [ANY, *(r["name"] for r in rubrics)]
    c1, c2, c3, c4, c5, c6 = st.columns([2, 2, 2, 2, 1.5, 1.5])
    rubric = c1.selectbox("Rubric", names, key=f"{key}_rubric")
    version_ids: list = [ANY]
    labels: dict = {ANY: ANY}
    if rubric != ANY:
        for version in reversed(store.rubric_versions(rubric)):
            version_ids.append(version["id"])
            labels[version["id"]] = f"v{version['version']}"
    version_id = c2.selectbox(
        "Version", version_ids, format_func=labels.get, key=f"{key}_version_{rubric}"
    )
    model = c3.selectbox("Model (agent or grader)", [ANY, *known_models(store)], key=f"{key}_model")
    status = c4.selectbox(
        "Status", [ANY, *RUN_STATUSES], format_func=lambda s: s if s == ANY else status_badge(s),
        key=f"{key}_status",
    )  # fmt: skip
    since = c5.date_input("From", value=None, key=f"{key}_since")
    until = c6.date_input("To", value=None, key=f"{key}_until")
    try:
        return parse_run_filters(
            rubric=rubric,
            version_id=None if version_id == ANY else version_id,
            model=model,
            status=status,
            since=since,
            until=until,
        )
    except InputError as exc:
        st.error(str(exc))
        return None


# ---------------------------------------------------------------- a run, drawn


def render_run_overview(store: Store, run: dict, evaluations: list[dict], *, key: str) -> None:
    """Status, numbers, the timeline and the heatmap of one run (live or stored)."""
    show_status(run["status"], error=run.get("error"))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Grading passes", f"{len(evaluations)} / {run.get('max_iterations', '?')}")
    m2.metric("Seconds", f"{run_seconds(run):.1f}")
    m3.metric(
        "Grader tokens",
        f"{int(run.get('grader_input_tokens') or 0):,} in / {int(run.get('grader_output_tokens') or 0):,} out",
    )
    regressions = find_regressions(evaluations)
    m4.metric("Regressions", len(regressions))
    left, right = st.columns([2, 3])
    left.plotly_chart(progress_figure(evaluations), key=f"{key}_timeline")
    criteria = rubric_criteria(store, run)
    right.plotly_chart(heatmap_figure(evaluations, criteria), key=f"{key}_heatmap")
    if run.get("score") is not None:
        kept = run.get("best_iteration")
        if kept is not None and kept + 1 < len(evaluations):
            st.info(
                f"keep=best: the answer handed back is the draft of {pass_label(kept)}, "
                f"its best-scoring pass (score {float(run['score']):.2f}), not the last one.",
                icon="🏆",
            )
        else:
            st.caption(f"Score of the answer handed back: {float(run['score']):.2f}")
    with st.expander("Grader seconds per pass"):
        st.plotly_chart(timeline_figure(evaluations), key=f"{key}_seconds")
    for name, from_pass, to_pass in regressions:
        st.warning(
            f"Regression: passed in {pass_label(from_pass)}, failed in {pass_label(to_pass)}: "
            f"{md_escape(one_line(name, 120))}",
            icon="↩️",
        )


def rubric_criteria(store: Store, run: dict) -> list[str]:
    """The criteria of a run's rubric version, in rubric order (empty if it cannot be read)."""
    try:
        return list(store.get_rubric_version(run["rubric_version_id"])["criteria"])
    except (*STORE_ERRORS, KeyError):
        return []


def render_passes(evaluations: list[dict]) -> None:
    """Each pass's verdict, explanation and gaps, as text."""
    if not evaluations:
        st.caption("No grading pass stored yet.")
        return
    details = pass_details(evaluations)
    for index, detail in reversed(list(enumerate(details))):
        score = "" if detail["score"] is None else f" · score {detail['score']:.2f}"
        title = (
            f"{detail['label']} · {status_badge(detail['result'])} · "
            f"{detail['passed']}/{detail['total']} criteria{score} · {detail['duration_s']} s"
        )
        with st.expander(title, expanded=index == len(details) - 1):
            st.caption("Grader's explanation")
            st.text(detail["explanation"] or "(none)")
            for regression in detail["regressions"]:
                st.warning(f"Regressed: {md_escape(one_line(regression, 160))}", icon="↩️")
            if detail["gaps"]:
                st.caption("Gaps (what the grader asked to change)")
                for criterion, gap in detail["gaps"]:
                    st.text(f"✗ {criterion}\n   → {gap}")


def render_transcript(store: Store, run_id: int) -> None:
    """The stored conversation; the grader's injected feedback is marked as the grader's."""
    items = transcript_items(store.transcript(run_id))
    if not items:
        st.caption("No transcript stored yet (it is saved when the run ends).")
        return
    for item in items:
        with st.chat_message(item["chat"], avatar=item["avatar"]):
            st.caption(item["speaker"])
            if item["is_grader"]:
                st.info("Injected by the grader, not written by the user.", icon="⚖️")
            if item["content"]:
                st.text(item["content"])
            for call in item["tool_calls"]:
                st.code(call, language=None, wrap_lines=True)


def render_run_detail(store: Store, run_id: int, *, key: str) -> None:
    """A stored run's page: overview, passes, transcript, final output and its spec."""
    run = store.get_run(run_id)
    evaluations = store.run_evaluations(run_id)
    st.subheader(f"Run #{run_id} · {rubric_label(run)}")
    render_run_overview(store, run, evaluations, key=key)
    passes, transcript, output, spec = st.tabs(["Passes", "Transcript", "Final output", "Spec"])
    with passes:
        render_passes(evaluations)
    with transcript:
        render_transcript(store, run_id)
    with output:
        show_plain(run.get("final_output"), empty="(no final output stored)")
    with spec:
        st.dataframe(run_spec_rows(run), hide_index=True)
        st.caption("Input")
        show_plain(run.get("input"))
