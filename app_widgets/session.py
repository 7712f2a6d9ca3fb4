"""What outlives one script run: widget values kept across pages, this process's jobs."""

from __future__ import annotations

import streamlit as st

from rubric_core.workbench.background import RunRegistry

__all__ = ["PERSIST", "run_registry"]


PERSIST = "session"
"""`persist_state` of a form's widgets: a value survives while another page is open (a run
goes on while its person looks elsewhere, and comes back to the form as they left it)."""


@st.cache_resource(show_spinner=False)
def run_registry() -> RunRegistry:
    """The process-wide registry of runs and jobs (batches, grades, re-grades) started from
    the dashboard."""
    return RunRegistry()
