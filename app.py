"""Rubric Studio dashboard: the frame around the pages (`streamlit run app.py`)."""

from __future__ import annotations

import streamlit as st

from app_widgets.session import run_registry
from app_widgets.store import db_label, get_store, store_guard
from app_widgets.warm import preload_browser_chunks
from rubric_core.ui.models import configured_models_mode
from rubric_core.ui.warm import warm_up

st.set_page_config(page_title="Rubric Studio", page_icon="⚖️", layout="wide")

# Root-level keys of .streamlit/secrets.toml become environment variables, where the
# model providers look for their API keys. A missing file is fine: replay models run offline.
try:
    st.secrets.load_if_toml_exists()
except Exception as exc:  # a malformed secrets.toml must not take the whole app down
    st.sidebar.warning(f"Could not read .streamlit/secrets.toml: {exc}")

# The pages live in app_pages/, not pages/: Streamlit treats a folder named pages/ as a
# legacy multipage app until st.navigation has run once, and would then run a page
# deep-linked on the first request (or in AppTest) without this frame around it.
PAGES = [
    st.Page("app_pages/rubrics.py", title="Rubrics", icon=":material/checklist:", default=True),
    st.Page("app_pages/run.py", title="Run", icon=":material/play_arrow:"),
    st.Page("app_pages/batch.py", title="Batch", icon=":material/dataset:"),
    st.Page("app_pages/runs.py", title="Runs", icon=":material/history:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("app_pages/review.py", title="Review", icon=":material/rate_review:"),
    st.Page("app_pages/agreement.py", title="Agreement", icon=":material/handshake:"),
    st.Page("app_pages/experiments.py", title="Experiments", icon=":material/science:"),
    st.Page("app_pages/export.py", title="Export", icon=":material/download:"),
]
page = st.navigation(PAGES)

with st.sidebar:
    st.caption("Database")
    st.code(db_label(), language=None, wrap_lines=True)
    mode = configured_models_mode()
    st.caption("Models")
    if mode.real:
        st.success(mode.summary, icon=":material/key:")
    else:
        st.info(mode.summary, icon=":material/replay:")
    active = run_registry().active_runs()
    if active:
        st.caption(f"Running now: {', '.join(f'#{run_id}' for run_id in active)}")

store = get_store()
if store is None:
    # get_store already said what is wrong with the database file and what to do.
    st.stop()

# What later pages' first visits need, loaded in the background: the browser's chart and
# table code when it is idle (asked for here, once per session), the server's imports on a
# thread once the page has run (even one that stopped early).
preload_browser_chunks()
try:
    with store_guard():
        page.run()
finally:
    warm_up()
