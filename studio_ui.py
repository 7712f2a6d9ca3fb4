"""Streamlit glue shared by app.py and app_pages/: the store handle, the run registry, error display."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import streamlit as st

from rubric_core.providers import DEFAULT_REPLAY_SCENARIO
from rubric_core.schema import BASE_URL_ENV, MODEL_ENV, RUN_STATUSES
from rubric_core.store import RunFilters, Store, StoreError, default_db_target
from rubric_core.store.paths import is_postgres_url, redact_url
from rubric_core.tools import TOOL_NAMES
from rubric_core.ui import (
    ANY,
    MODEL_SOURCES,
    InputError,
    batch_choice_label,
    batch_options,
    find_regressions,
    heatmap_figure,
    known_batches,
    known_models,
    matching_scenario,
    md_escape,
    model_choice,
    one_line,
    parse_run_filters,
    pass_details,
    pass_label,
    pass_rate_figure,
    progress,
    progress_figure,
    replay_scenario_mismatch,
    rubric_label,
    run_seconds,
    run_spec_rows,
    spec_error_hint,
    status_icon,
    status_level,
    status_meaning,
    status_words,
    store_error_message,
    timeline_figure,
    token_pair,
    transcript_items,
    version_label,
)
from rubric_core.ui.forms import ScenarioForm
from rubric_core.workbench.background import RunRegistry, batch_progress

STORE_ERRORS: tuple[type[BaseException], ...] = (StoreError, sqlite3.Error)
"""What a page catches around store calls; shown with `show_store_error`, never as a traceback."""

PERSIST = "session"
"""`persist_state` of a form's widgets: a value survives while another page is open (a run
goes on while its person looks elsewhere, and comes back to the form as they left it)."""


@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> Store:
    # Keyed by path or URL: one Store (one writer thread or pool) per database per process.
    return Store(path)


@st.cache_resource(show_spinner=False)
def run_registry() -> RunRegistry:
    """The process-wide registry of runs and batches started from the dashboard."""
    return RunRegistry()


def db_path() -> str:
    """The database this session uses: $RUBRIC_STUDIO_DB (a file or a postgresql:// URL),
    else ./rubric_studio.db. Holds a URL's password: show `db_label()` instead."""
    target = default_db_target()
    if isinstance(target, str) and is_postgres_url(target):
        return target
    return str(Path(target).expanduser().resolve())


def db_label() -> str:
    """The database as shown on pages: the file path, or the URL with its password as ***."""
    return redact_url(db_path())


def get_store() -> Store | None:
    """The shared store, or `None` after showing why it cannot be opened and what to do."""
    path = db_path()
    try:
        return _open_store(path)
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
    st.error(store_error_message(exc, db_label()), icon=":material/database:")
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
    alert(f"**{status_words(status)}** — {status_meaning(status)}", icon=status_icon(status))
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


def rubric_version_picker(store: Store, *, key: str, persist: bool = False) -> dict | None:
    """Pick a rubric and one of its versions; `None` (with a hint) when none is stored.

    `persist` keeps the choice while another page is open (Streamlit's `persist_state`).
    """
    rubrics = store.list_rubrics()
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
    versions = list(reversed(store.rubric_versions(name)))  # newest first
    labels = {v["id"]: version_label(v) for v in versions}
    version_id = st.selectbox(
        "Version", list(labels), format_func=labels.get, key=f"{key}_version_{name}",
        persist_state=scope,
    )  # fmt: skip
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
        persist_state=PERSIST,
    )
    if source == "replay":
        names = [s["name"] for s in scenarios]
        if st.session_state.get(f"{key}_{role}_scenario") not in names and names:
            st.session_state[f"{key}_{role}_scenario"] = (
                default_scenario if default_scenario in names else names[0]
            )
        scenario_col, latency_col = st.columns([3, 2], vertical_alignment="bottom")
        scenario = scenario_col.selectbox(
            "Replay scenario",
            names,
            format_func=lambda n: next(
                (f"{n} — {s['title']}" for s in scenarios if s["name"] == n), n
            ),
            key=f"{key}_{role}_scenario",
            persist_state=PERSIST,
        )
        # No bounds on the widget: a bounded input keeps sending its last valid value while
        # it shows an out-of-range one; model_choice names the problem instead.
        latency = latency_col.number_input(
            "Delay (s)", value=0.0, step=0.5, format="%.1f",
            key=f"{key}_{role}_latency", persist_state=PERSIST,
            help="Replay models answer at once; a delay per call (0 to 60 s) lets you "
            "watch each pass arrive and try Stop.",
        )  # fmt: skip
        return model_choice("replay", scenario=scenario or "", latency_s=float(latency))
    if source == "provider":
        text = st.text_input(
            "Model (provider:model-id)",
            key=f"{key}_{role}_provider",
            placeholder="openai:gpt-4.1-mini",
            persist_state=PERSIST,
        )
        return model_choice("provider", provider_string=text)
    # The presets go in `value=`: a default kept only in session state is not the widget's
    # own, and the browser falls back to the widget's own ("") when it remounts the field.
    url = st.text_input(
        "Base URL",
        value=os.environ.get(BASE_URL_ENV, ""),
        key=f"{key}_{role}_base_url",
        placeholder="http://127.0.0.1:8080/v1",
        persist_state=PERSIST,
    )
    name = st.text_input(
        "Model name on that server",
        value=os.environ.get(MODEL_ENV, ""),
        key=f"{key}_{role}_base_url_model",
        placeholder="smollm2-135m",
        persist_state=PERSIST,
    )
    return model_choice("base_url", base_url=url, base_url_model=name)


def scenario_loader(
    scenario_by_name: dict[str, dict], *, key: str, on_use: Callable[[], None]
) -> None:
    """The offline demo's scenario picker and its "Use scenario" button (Run and Batch pages).

    The picker's value is `{key}_scenario_helper`; the button calls `on_use`.
    """
    helper_col, helper_button = st.columns([3, 1], vertical_alignment="bottom")
    names = list(scenario_by_name)
    helper_col.selectbox(
        "Scenario",
        names,
        index=names.index(DEFAULT_REPLAY_SCENARIO) if DEFAULT_REPLAY_SCENARIO in names else 0,
        format_func=lambda n: f"{n} — {scenario_by_name[n]['title']}",
        key=f"{key}_scenario_helper",
    )
    helper_button.button("Use scenario", on_click=on_use, key=f"{key}_use_scenario")


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


def fill_run_form(store: Store, form: ScenarioForm, *, key: str = "run") -> dict:
    """Save a scenario's rubric and put its fields in a run form; returns the version.

    The fields are the Run page's (`key="run"`) or the Batch page's (`key="batch"`), which
    name their widgets `{key}_...`.

    Call it from a callback or from another page: a widget's value can be set only before
    the widget is drawn in a script run.

    Raises:
        StoreError: The rubric could not be saved.
    """
    version = store.save_rubric_version(
        form.scenario, form.rubric_text, tags=["replay"], note="from scenario"
    )
    state = st.session_state
    state[f"{key}_rubric"] = form.scenario
    state[f"{key}_version_{form.scenario}"] = version["id"]
    state[f"{key}_input"] = form.input
    state[f"{key}_tools"] = list(form.grader_tools)
    state[f"{key}_max_iterations"] = form.max_iterations
    state[f"{key}_agent_kind"] = form.agent_kind
    for role in ("agent", "grader"):
        state[f"{key}_{role}_source"] = "replay"
        state[f"{key}_{role}_scenario"] = form.scenario
        state[f"{key}_{role}_latency"] = form.latency_s
    return version


def run_filter_widgets(store: Store, *, key: str) -> RunFilters | None:
    """The filters shared by Runs and Export; `None` after showing what is wrong with them.

    Two rows, so that each field (the date placeholders too) keeps its width at 1024 px.
    """
    rubrics = store.list_rubrics()
    names = [ANY, *(r["name"] for r in rubrics)]
    c1, c2, c3, c4 = st.columns(4)
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


# ---------------------------------------------------------------- a run, drawn


def render_run_overview(store: Store, run: dict, evaluations: list[dict], *, key: str) -> None:
    """Status, numbers, the timeline and the heatmap of one run (live or stored)."""
    show_status(run["status"], error=run.get("error"))
    # The token pair is the widest value: its column gets more room, so it is not cut off
    # at 1024 px, and in/out moved to the label, leaving the value two numbers.
    m1, m2, m3, m4 = st.columns([1, 1, 1.6, 1])
    m1.metric("Grading passes", f"{len(evaluations)} / {run.get('max_iterations', '?')}")
    m2.metric("Seconds", f"{run_seconds(run):.1f}")
    tokens_in, tokens_out = (
        int(run.get("grader_input_tokens") or 0), int(run.get("grader_output_tokens") or 0),
    )  # fmt: skip
    m3.metric(
        "Grader tokens (in / out)",
        token_pair(tokens_in, tokens_out),
        help=f"{tokens_in:,} input and {tokens_out:,} output tokens over every grading pass.",
    )
    regressions = find_regressions(evaluations)
    m4.metric("Regressions", len(regressions))
    if not evaluations and run["status"] != "running":
        st.info(
            "No pass was graded: the run ended before the grader returned a verdict, so "
            "there is no timeline or heatmap to draw.",
            icon=":material/info:",
        )
        return
    left, right = st.columns([2, 3])
    finished = run["status"] != "running"
    left.plotly_chart(progress_figure(evaluations, finished=finished), key=f"{key}_timeline")
    criteria = rubric_criteria(store, run)
    right.plotly_chart(
        heatmap_figure(evaluations, criteria, finished=finished), key=f"{key}_heatmap"
    )
    if run.get("score") is not None:
        kept = run.get("best_iteration")
        if kept is not None and kept + 1 < len(evaluations):
            st.info(
                f"keep=best: the answer handed back is the draft of {pass_label(kept)}, "
                f"its best-scoring pass (score {float(run['score']):.2f}), not the last one.",
                icon=":material/trophy:",
            )
        else:
            st.caption(f"Score of the answer handed back: {float(run['score']):.2f}")
    with st.expander("Grader seconds per pass"):
        st.plotly_chart(timeline_figure(evaluations), key=f"{key}_seconds")
    for name, from_pass, to_pass in regressions:
        st.warning(
            f"Regression: passed in {pass_label(from_pass)}, failed in {pass_label(to_pass)}: "
            f"{md_escape(one_line(name, 120))}",
            icon=":material/undo:",
        )


def rubric_criteria(store: Store, run: dict) -> list[str]:
    """The criteria of a run's rubric version, in rubric order (empty if it cannot be read)."""
    try:
        return list(store.get_rubric_version(run["rubric_version_id"])["criteria"])
    except (*STORE_ERRORS, KeyError):
        return []


def render_passes(evaluations: list[dict], *, running: bool = True) -> None:
    """Each pass's verdict, explanation and gaps, as text."""
    if not evaluations:
        st.caption("No grading pass stored yet." if running else "No grading pass was stored.")
        return
    details = pass_details(evaluations)
    for index, detail in reversed(list(enumerate(details))):
        score = "" if detail["score"] is None else f" · score {detail['score']:.2f}"
        title = (
            f"{detail['label']} · {status_words(detail['result'])} · "
            f"{detail['passed']}/{detail['total']} criteria{score} · {detail['duration_s']} s"
        )
        icon = status_icon(detail["result"])
        with st.expander(title, expanded=index == len(details) - 1, icon=icon):
            st.caption("Grader's explanation")
            st.text(detail["explanation"] or "(none)")
            for regression in detail["regressions"]:
                st.warning(
                    f"Regressed: {md_escape(one_line(regression, 160))}", icon=":material/undo:"
                )
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
                st.info("Injected by the grader, not written by the user.", icon=":material/gavel:")
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
        render_passes(evaluations, running=run["status"] == "running")
    with transcript:
        render_transcript(store, run_id)
    with output:
        show_plain(run.get("final_output"), empty="(no final output stored)")
    with spec:
        st.dataframe(run_spec_rows(run), hide_index=True)
        st.caption("Input")
        show_plain(run.get("input"))


# ---------------------------------------------------------------- reviewing and grading


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


def review_scope(store: Store, *, key: str) -> tuple[dict, RunFilters] | None:
    """Pick a rubric version and, optionally, one batch of its runs; `None` if none is stored."""
    for rubric in store.list_rubrics():
        # Start each rubric on its newest version that has runs (a new version has none yet),
        # looked up once per session: later reruns (each label saved) keep the choice.
        version_key = f"{key}_version_{rubric['name']}"
        if version_key in st.session_state:
            continue
        versions = store.rubric_versions(rubric["name"])
        graded = [v for v in versions if store.list_runs(version_id=int(v["id"]), limit=1)]
        st.session_state[version_key] = (graded or versions)[-1]["id"]
    version = rubric_version_picker(store, key=key)
    if version is None:
        return None
    runs = store.list_runs(version_id=int(version["id"]), limit=500)
    batches = batch_options(runs)
    chosen = st.selectbox(
        "Runs",
        [ANY, *batches],
        format_func=lambda b: "every run of this version" if b == ANY else f"batch {b}",
        key=f"{key}_batch_{version['id']}",
    )
    filters = RunFilters(version_id=int(version["id"]), batch_id=None if chosen == ANY else chosen)
    return version, filters


@st.cache_resource(show_spinner=False)
def regrade_jobs() -> dict[int, Any]:
    """Re-grade jobs started in this process, by experiment id (progress is read from the store)."""
    return {}


# ---------------------------------------------------------------- grade-only (no agent)

GRADE_VERDICTS = {"pass": True, "fail": False, "insufficient": None}
"""A person's verdict choices on one criterion, as the human grader gives them."""


def replay_mismatch_warning(grader_spec: str, scenarios: list[dict], version: dict) -> None:
    """Warn when a replay grader scripts verdicts for another rubric than `version`'s."""
    mismatch = replay_scenario_mismatch(grader_spec, scenarios, version["criteria"])
    if mismatch:
        st.warning(
            f"The replay scenario {mismatch!r} scripts verdicts for its own rubric, not for "
            f"{version['name']} v{version['version']}: it replays scripted responses and will "
            "not judge these criteria. To grade your own rubric offline, grade it yourself.",
            icon=":material/replay:",
        )


def point_review_at(version: dict, batch_id: str | None) -> None:
    """Preselect a rubric version (and batch) for the Review and Agreement pages."""
    for key in ("review", "agree"):
        st.session_state[f"{key}_rubric"] = version["name"]
        st.session_state[f"{key}_version_{version['name']}"] = version["id"]
        st.session_state[f"{key}_batch_{version['id']}"] = batch_id or ANY


def graded_batch_form(store: Store, scenarios: list[dict], *, key: str) -> None:
    """The Batch page's grade-only mode: upload input/output rows, grade them, watch."""
    from rubric_core.batch.summary import summary_for_batch
    from rubric_core.schema import MAX_CONCURRENCY
    from rubric_core.workbench.datasets import load_graded_upload
    from rubric_core.workbench.grade import start_graded_batch

    st.caption(
        "Grade outputs you already have, with no agent: a CSV with `input` and `output` "
        'columns, or JSONL with `{"input": ..., "output": ...}` per line. An optional '
        '`labels` column (a JSON object such as `{"has a title": true}`) is stored as human '
        "labels, reviewer: the file's name. One graded run per row."
    )
    upload = st.file_uploader("Dataset", type=["csv", "jsonl", "ndjson"], key=f"{key}_upload")
    rows: list[dict] = []
    if upload is not None:
        try:
            rows = load_graded_upload(upload.name, upload.getvalue())
        except InputError as exc:
            st.error(f"Cannot use this dataset: {exc}")
        else:
            labelled = sum(1 for row in rows if row.get("labels"))
            st.success(
                f"{len(rows)} row(s) read from {upload.name}"
                + (f", {labelled} with labels." if labelled else ".")
            )
            with st.expander("First rows"):
                for row in rows[:5]:
                    st.text(
                        f"{row['row']}. {one_line(row['input'], 90)}  →  {one_line(row['output'], 90)}"
                    )
    version = rubric_version_picker(store, key=key)
    if version is None:
        return
    grader_col, settings_col = st.columns(2, gap="large")
    with grader_col:
        try:
            grader_spec, base_url = model_picker(
                "grader",
                key=key,
                scenarios=scenarios,
                default_scenario=matching_scenario(scenarios, version["criteria"]),
            )
        except InputError as exc:
            grader_spec, base_url = "", None
            st.error(f"Grader model: {exc}")
        replay_mismatch_warning(grader_spec, scenarios, version)
    with settings_col:
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key=f"{key}_tools")
        concurrency = st.number_input(
            "Concurrency", min_value=1, max_value=MAX_CONCURRENCY, value=4, key=f"{key}_concurrency"
        )
    registry = run_registry()
    if st.button(
        "Grade outputs", type="primary", key=f"{key}_launch", disabled=not rows or not grader_spec
    ):
        try:
            job = start_graded_batch(
                store,
                int(version["id"]),
                rows,
                grader_model=grader_spec,
                grader_tools=tuple(tools),
                base_url=base_url,
                concurrency=int(concurrency),
                source_name=upload.name if upload is not None else "dataset",
            )
        except InputError as exc:
            st.error(f"Not started: {spec_error_hint(str(exc))}")
        except STORE_ERRORS as exc:
            show_store_error(exc)
        else:
            registry.add_batch(job)
            st.session_state[f"{key}_watch"] = job.batch_id
    if not rows:
        st.caption("Upload a dataset to enable “Grade outputs”.")

    batch_id = st.session_state.get(f"{key}_watch")
    if batch_id is None:
        return
    job = registry.batch(batch_id)
    polling = job is not None and not job.done()

    @st.fragment(run_every=1.0 if polling else None)
    def graded_view() -> None:
        try:
            total = job.total if job is not None else store.count_runs(batch_id=batch_id)
            finished, _ = batch_progress(store, batch_id, total)
            value, text = progress(finished, total)
            st.progress(value, text=f"Graded {text}")
            if job is not None and not job.done():
                return
            if job is not None and job.error:
                st.error(f"Grading stopped early: {job.error}. Passes stored until then are kept.")
            summary = summary_for_batch(store, batch_id)
        except STORE_ERRORS as exc:
            show_store_error(exc)
            return
        m1, m2, m3 = st.columns(3)
        m1.metric("Graded rows", summary.total)
        m2.metric("Every criterion passed", f"{summary.by_status.get('satisfied', 0)}")
        m3.metric("Grader errors", summary.grader_errors)
        st.plotly_chart(pass_rate_figure(summary.criterion_pass_rates), key=f"{key}_rates")
        point_review_at(version, batch_id)
        st.page_link(
            "app_pages/review.py",
            label="Label these passes on Review",
            icon=":material/rate_review:",
        )
        if polling:
            st.rerun()

    st.subheader(f"Graded batch {batch_id}")
    graded_view()


def human_verdict_widgets(criteria: list[str], *, key: str) -> tuple[dict, dict, list[str]]:
    """A person's checklist: per criterion pass / fail / insufficient and a gap.

    Returns `(verdicts, gaps, missing)`: verdicts by criterion (`None` insufficient),
    gaps by criterion, and the criteria still without a verdict.
    """
    verdicts: dict[str, bool | None] = {}
    gaps: dict[str, str] = {}
    missing: list[str] = []
    for index, criterion in enumerate(criteria):
        with st.container(border=True):
            text_col, choice_col, gap_col = st.columns([3, 4, 3], vertical_alignment="center")
            text_col.markdown(f"**{index + 1}. {md_escape(criterion)}**")
            choice = choice_col.radio(
                "Your verdict",
                list(GRADE_VERDICTS),
                index=None,
                horizontal=True,
                key=f"{key}_{index}",
            )
            gap = gap_col.text_input(
                "Gap (what is missing)",
                key=f"{key}_{index}_gap",
                disabled=choice == "pass",
                placeholder="required on fail / insufficient",
            )
        if choice is None:
            missing.append(criterion)
            continue
        verdicts[criterion] = GRADE_VERDICTS[choice]
        if choice != "pass" and gap.strip():
            gaps[criterion] = gap.strip()
    return verdicts, gaps, missing


def grade_output_form(store: Store, scenarios: list[dict], *, key: str) -> None:
    """The Run page's grade-only mode: paste an input and an output; a model or you grade it."""
    from rubric_core.workbench.grade import grade_by_person, grade_one

    st.caption(
        "Grade one output you already have, with no agent. Pick a grader model, or be the "
        "grader yourself: your verdicts drive the pass exactly as a model's would (every "
        "criterion passed → satisfied) and are kept as labels."
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
        try:
            grader_spec, base_url = model_picker(
                "grader",
                key=key,
                scenarios=scenarios,
                default_scenario=matching_scenario(scenarios, version["criteria"]),
            )
        except InputError as exc:
            grader_spec, base_url = "", None
            st.error(f"Grader model: {exc}")
        replay_mismatch_warning(grader_spec, scenarios, version)
        tools = st.multiselect("Grader tools", list(TOOL_NAMES), key=f"{key}_tools")
        if st.button("Grade", type="primary", key=f"{key}_grade", disabled=not grader_spec):
            try:
                with st.spinner("Grading…"):
                    graded = grade_one(
                        store,
                        int(version["id"]),
                        text,
                        output,
                        grader_spec,
                        grader_tools=tuple(tools),
                        base_url=base_url,
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
        verdicts, gaps, missing = human_verdict_widgets(list(version["criteria"]), key=key)
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
    run = store.get_run(int(last))
    st.subheader(f"Graded run #{last} · {rubric_label(run)}")
    show_status(run["status"], error=run.get("error"))
    render_passes(store.run_evaluations(int(last)), running=run["status"] == "running")
    point_review_at(version, None)
    st.page_link(
        "app_pages/runs.py", label=f"Open run #{last}", icon=":material/history:",
        query_params={"run": str(last)},
    )  # fmt: skip
