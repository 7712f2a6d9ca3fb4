"""The store a session uses: opened once per database and process, its faults shown in place."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import streamlit as st

from rubric_core.store import RunFilters, Store, default_db_target, is_postgres_url
from rubric_core.ui.errors import STORE_ERRORS, database_label, store_error_message

__all__ = [
    "STORE_ERRORS",
    "cached_pass_rates",
    "db_label",
    "db_path",
    "get_store",
    "reopen_store",
    "show_store_error",
    "store_guard",
]


@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> Store:
    # Keyed by path or URL: one Store (one writer thread or pool) per database per process.
    return Store(path)


def db_path() -> str:
    """The database this session uses: $RUBRIC_STUDIO_DB (a file or a postgresql:// URL),
    else ./rubric_studio.db. Holds a URL's password: show `db_label()` instead."""
    target = default_db_target()
    if isinstance(target, str) and is_postgres_url(target):
        return target
    return str(Path(target).expanduser().resolve())


def db_label() -> str:
    """The database as shown on pages: the file path, or the URL with its password as ***."""
    return database_label(db_path())


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
    """`Store.passes.criterion_pass_rates` under the store's data version (see `data_version`).

    Over 100,000 passes the count takes most of a second; it is computed once per
    new pass or run and filter choice, then served from the cache.
    """
    del version  # part of the cache key only
    return _open_store(path).passes.criterion_pass_rates(filters=filters)


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
