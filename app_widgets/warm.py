"""Warm-up for a page's first visit in the browser: Streamlit's element code, when idle.

A page's first visit paid for what it was the first to need: on the server, imports
(`rubric_core.ui.warm`); in the browser, Streamlit's lazily loaded element code (plotly's
4.7 MB chunk, the data grid's), fetched and evaluated when the first chart or table is
drawn. Once per session the frame asks the browser, when it is idle, to import those
chunks; the page that draws the first chart then finds them loaded. The script is ours and
static (no stored text reaches it); it only imports Streamlit's own files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import streamlit as st

__all__ = ["preload_browser_chunks"]

# Streamlit's element chunks, by the prefix of their hashed file names.
CHUNKS = ("PlotlyChart.", "DataFrame.")
_FLAG = "_rubric_studio_chunks_preloaded"


@functools.cache
def _chunk_names() -> tuple[str, ...]:
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".js"))
    except OSError:
        return ()
    return tuple(name for prefix in CHUNKS for name in names if name.startswith(prefix))


def _script(names: tuple[str, ...]) -> str:
    return (
        "<script>(() => {"
        f"const names = {json.dumps(list(names))};"
        "const load = () => names.forEach(n => import(new URL('static/js/' + n, "
        "document.baseURI).href).catch(() => {}));"
        "(window.requestIdleCallback || ((f) => setTimeout(f, 1500)))(load, {timeout: 3000});"
        "})();</script>"
    )


def preload_browser_chunks() -> None:
    """Once per session, ask the browser to import Streamlit's chart and table code when idle
    (the server's imports are `rubric_core.ui.warm.warm_up`)."""
    if st.session_state.get(_FLAG):
        return
    names = _chunk_names()
    if names:
        st.session_state[_FLAG] = True
        with st.sidebar:
            st.html(_script(names), unsafe_allow_javascript=True, width="content")
