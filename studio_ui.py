"""Streamlit glue shared by app.py and pages/: the store handle, the run registry, error display."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import streamlit as st

from rubric_core.dashboard import (
    RunRegistry,
    status_badge,
    status_level,
    status_meaning,
    store_error_message,
)
from rubric_core.store import Store, StoreError, default_db_path

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


def reopen_store() -> None:
    """Drop the cached store (e.g. after its file was deleted) so the next call opens it afresh."""
    path = str(db_path())
    with contextlib.suppress(Exception):
        _open_store(path).close()
    _open_store.clear()


def show_store_error(exc: BaseException) -> None:
    """Show a store fault in place, with what to do, and a button that reopens the database."""
    st.error(store_error_message(exc, db_path()), icon="🗄️")
    if st.button(
        "Reopen the database",
        key=f"reopen-{id(exc)}",
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
